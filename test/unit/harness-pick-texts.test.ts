// The classification of a pick's failure into the cases and texts of decision 0025 (harness/picks/texts.ts):
// a table over every error code the decision names (and the Envoy flags, as our TypeScript Custodian says them),
// at each stage, with and without an abort of the call, against the decision's texts written out here word for
// word; and properties over generated failures (one case each, "never reached" only when proven, texts name
// the pick).
import fc from "fast-check";
import { CUSTODIAN_HEADER, REFUSED, UNREACHABLE, unreachableMessage } from "../../api/custodian-config";
import {
  NEVER_SENT_CODES,
  PICK_CASES,
  bodyMessage,
  causeOf,
  classify,
  pickText,
  pickTexts,
  type PickCase,
  type PickCause,
  type PickFailure,
  type PickStage,
} from "../../harness/picks/texts";
import { ADR } from "../support/decision-0025-texts";

const PICK = "propose";
const err = (code: string, message: string) => ({ error: { code, message } });

/** Codes that prove the request never left (decision 0025: no connection was made). */
const PROVING = [
  ["ECONNREFUSED", "connect ECONNREFUSED 10.96.0.10:8090"],
  ["ENOTFOUND", "getaddrinfo ENOTFOUND jr2-orchestrator.jr2.svc"],
  ["EAI_AGAIN", "getaddrinfo EAI_AGAIN jr2-orchestrator.jr2.svc"],
  ["UND_ERR_CONNECT_TIMEOUT", "Connect Timeout Error"],
  ["ENETUNREACH", "connect ENETUNREACH 10.96.0.10:8090"],
  ["EHOSTUNREACH", "connect EHOSTUNREACH 10.96.0.10:8090"],
] as const;

/** Codes of failures that can come after the request left. */
const NOT_PROVING = [
  ["ECONNRESET", "read ECONNRESET"],
  ["UND_ERR_SOCKET", "other side closed"],
  ["UND_ERR_HEADERS_TIMEOUT", "Headers Timeout Error"],
  ["UND_ERR_BODY_TIMEOUT", "Body Timeout Error"],
  ["EPIPE", "write EPIPE"],
] as const;

/** Envoy's flags for "not forwarded", and the Custodian's 502 `unreachable` for the same event. */
const UNREACHABLE_FLAGS = [
  ["UF", "connect ECONNREFUSED 10.96.0.10:8090"],
  ["UH", "the Custodian is not ready: the Sandbox token is not mounted"],
  ["DF", "getaddrinfo ENOTFOUND jr2-orchestrator.jr2.svc"],
  ["URX", "UND_ERR_CONNECT_TIMEOUT: Connect Timeout Error"],
] as const;

/** Envoy's flags for "may have been forwarded", and the Custodian's bare 502 for the same event. */
const MAY_HAVE_REACHED_FLAGS = [
  ["UC", "UND_ERR_SOCKET: other side closed"],
  ["UMSDR", "UND_ERR_HEADERS_TIMEOUT: Headers Timeout Error"],
  ["UPE", "HPE_INVALID_CONSTANT: Expected HTTP/"],
  ["UR", "read ECONNRESET"],
  ["LR", "This operation was aborted"],
  ["DPE", "UND_ERR_REQ_CONTENT_LENGTH_MISMATCH: Request body length does not match content-length header"],
] as const;

const mayHaveReached = (detail: string) => `the upstream failed after the request may have reached it (${detail})`;

type Expect = { post: PickCase; postAborted: PickCase; poll: PickCase; detail: string; own?: string };

const ROWS: Array<[string, PickCause, Expect]> = [
  ...PROVING.map(([code, message]): [string, PickCause, Expect] => [
    code,
    { kind: "transport", code, message },
    {
      post: "neverReached",
      postAborted: "unknown",
      poll: "reachedUnread",
      detail: message.includes(code) ? message : `${code}: ${message}`,
    },
  ]),
  ...NOT_PROVING.map(([code, message]): [string, PickCause, Expect] => [
    code,
    { kind: "transport", code, message },
    {
      post: "unknown",
      postAborted: "unknown",
      poll: "reachedUnread",
      detail: message.includes(code) ? message : `${code}: ${message}`,
    },
  ]),
  [
    "a transport failure with no code",
    { kind: "transport", message: "fetch failed" },
    { post: "unknown", postAborted: "unknown", poll: "reachedUnread", detail: "fetch failed" },
  ],
  [
    "an abort",
    { kind: "aborted", message: "This operation was aborted" },
    { post: "unknown", postAborted: "unknown", poll: "reachedUnread", detail: "This operation was aborted" },
  ],
  ...UNREACHABLE_FLAGS.map(([flag, detail]): [string, PickCause, Expect] => [
    `the Custodian's 502 unreachable (Envoy ${flag})`,
    {
      kind: "http",
      status: 502,
      custodian: UNREACHABLE,
      body: err("unreachable", unreachableMessage(detail)),
    },
    { post: "neverReached", postAborted: "unknown", poll: "reachedUnread", detail: unreachableMessage(detail) },
  ]),
  ...MAY_HAVE_REACHED_FLAGS.map(([flag, detail]): [string, PickCause, Expect] => [
    `the Custodian's bare 502 (Envoy ${flag})`,
    { kind: "http", status: 502, body: err("upstream_failed", mayHaveReached(detail)) },
    {
      post: "unknown",
      postAborted: "unknown",
      poll: "reachedUnread",
      detail: `HTTP 502: ${mayHaveReached(detail)}`,
    },
  ]),
  [
    "a 2xx whose body was cut",
    { kind: "body-cut", status: 200, detail: "UND_ERR_SOCKET: other side closed" },
    {
      post: "reachedUnread",
      postAborted: "reachedUnread",
      poll: "reachedUnread",
      detail: "UND_ERR_SOCKET: other side closed",
    },
  ],
  [
    "the Orchestrator's 503",
    { kind: "http", status: 503, body: err("stopping", "the Orchestrator is shutting down") },
    {
      post: "stopping",
      postAborted: "stopping",
      poll: "reachedUnread",
      detail: "HTTP 503: the Orchestrator is shutting down",
      own: "the Orchestrator is shutting down",
    },
  ],
  [
    "the Orchestrator's 409",
    { kind: "http", status: 409, body: err("outstanding", "pick review is outstanding") },
    {
      post: "outstanding",
      postAborted: "outstanding",
      poll: "reachedUnread",
      detail: "HTTP 409: pick review is outstanding",
      own: "pick review is outstanding",
    },
  ],
  [
    "the Orchestrator's 404",
    { kind: "http", status: 404, body: err("not_found", "turn 7 of a1 is over") },
    {
      post: "turnOver",
      postAborted: "turnOver",
      poll: "turnOver",
      detail: "HTTP 404: turn 7 of a1 is over",
      own: "turn 7 of a1 is over",
    },
  ],
  [
    "the Orchestrator's 409: the turn is over (decision 0042)",
    { kind: "http", status: 409, body: err("turn_over", "the turn of conversation a1 is over") },
    {
      post: "turnOver",
      postAborted: "turnOver",
      poll: "reachedUnread",
      detail: "HTTP 409: the turn of conversation a1 is over",
      own: "the turn of conversation a1 is over",
    },
  ],
  [
    "the Orchestrator's 403: not allowed now (decision 0042)",
    { kind: "http", status: 403, body: err("not_allowed", '"review" is not among the turn\'s Allowed picks now') },
    {
      post: "refused",
      postAborted: "refused",
      poll: "reachedUnread",
      detail: 'HTTP 403: "review" is not among the turn\'s Allowed picks now',
      own: '"review" is not among the turn\'s Allowed picks now',
    },
  ],
  [
    "the Orchestrator's 429 (decision 0042)",
    { kind: "http", status: 429, body: err("rate_limited", "over their rate") },
    {
      post: "refused",
      postAborted: "refused",
      poll: "reachedUnread",
      detail: "HTTP 429: over their rate",
      own: "over their rate",
    },
  ],
  [
    "the Custodian's refusal",
    { kind: "http", status: 403, custodian: REFUSED, body: err("refused", "no route") },
    {
      post: "unknown",
      postAborted: "unknown",
      poll: "reachedUnread",
      detail: `HTTP 403 from the Custodian (${CUSTODIAN_HEADER}: refused): no route`,
    },
  ],
  [
    "the Orchestrator's 500",
    { kind: "http", status: 500, body: '{"error":{"code":"internal","message":"boom"}}' },
    { post: "unknown", postAborted: "unknown", poll: "reachedUnread", detail: "HTTP 500: boom" },
  ],
];

/** The text decision 0025 (or, for the Orchestrator's own answers, the module's builder) gives. */
function expectedText(c: PickCase, pick: string, turnAborted: boolean, detail: string, own?: string): string {
  switch (c) {
    case "neverReached":
      return ADR.neverReached(detail);
    case "unknown":
      return turnAborted ? ADR.unknownAfterAbort(pick, detail) : ADR.unknown(pick, detail);
    case "reachedUnread":
      return turnAborted ? ADR.reachedUnreadAfterAbort(pick) : ADR.reachedUnread(pick, detail);
    case "stopping":
      return pickTexts.stopping(pick, own);
    case "outstanding":
      return pickTexts.outstanding(pick, own);
    case "turnOver":
      return pickTexts.turnOver(pick, own);
    case "refused":
      return pickTexts.refused(pick, own);
  }
}

describe("a pick's failure, by error code, stage and abort (decision 0025)", () => {
  const cases = ROWS.flatMap(([name, cause, e]) =>
    (["post", "poll"] as PickStage[]).flatMap((stage) =>
      [false, true].map((turnAborted) => {
        const want = stage === "poll" ? e.poll : turnAborted ? e.postAborted : e.post;
        return { name, cause, stage, turnAborted, want, detail: e.detail, own: e.own };
      }),
    ),
  );

  it.each(cases)(
    "$name, $stage, turn aborted $turnAborted: $want",
    ({ cause, stage, turnAborted, want, detail, own }) => {
      const f: PickFailure = { pick: PICK, stage, turnAborted, cause };
      expect(classify(f)).toBe(want);
      const answer = pickText(f);
      expect(answer.case).toBe(want);
      expect(answer.text).toBe(expectedText(want, PICK, turnAborted, detail, own));
      const refused =
        want === "stopping" || want === "outstanding" || want === "refused" || (want === "turnOver" && stage === "post");
      expect(answer.isError).toBe(want === "neverReached" || refused);
    },
  );

  it("covers every code and flag the decision names", () => {
    const named = ROWS.map(([name]) => name).join(" ");
    for (const word of [
      ...NEVER_SENT_CODES,
      "ECONNRESET",
      "UND_ERR_SOCKET",
      "UND_ERR_HEADERS_TIMEOUT",
      "UND_ERR_BODY_TIMEOUT",
      "EPIPE",
      ...["UF", "UH", "DF", "URX", "UC", "UMSDR", "UPE", "UR", "LR", "DPE"].map((f) => `Envoy ${f})`),
    ])
      expect(named).toContain(word);
    expect([...NEVER_SENT_CODES].sort()).toEqual(PROVING.map(([c]) => c).sort());
  });
});

describe("the texts, whole", () => {
  it("a refused connection fails the call", () => {
    expect(
      pickText({
        pick: PICK,
        stage: "post",
        turnAborted: false,
        cause: { kind: "transport", code: "ECONNREFUSED", message: "connect ECONNREFUSED 127.0.0.1:8081" },
      }),
    ).toEqual({
      case: "neverReached",
      isError: true,
      text: "the pick never reached the Orchestrator (connect ECONNREFUSED 127.0.0.1:8081) — try it again",
    });
  });

  it("the Custodian's unreachable 502 quotes the Custodian's text in the place of <detail>", () => {
    expect(
      pickText({
        pick: PICK,
        stage: "post",
        turnAborted: false,
        cause: {
          kind: "http",
          status: 502,
          custodian: "unreachable",
          body: err("unreachable", "the Custodian could not reach it (connect ECONNREFUSED 10.96.0.10:8090)"),
        },
      }).text,
    ).toBe(
      "the pick never reached the Orchestrator (the Custodian could not reach it (connect ECONNREFUSED 10.96.0.10:8090)) — try it again",
    );
    // Without a readable message, the Custodian's form is still the detail.
    expect(
      pickText({
        pick: PICK,
        stage: "post",
        turnAborted: false,
        cause: { kind: "http", status: 502, custodian: "unreachable", body: "<html>" },
      }).text,
    ).toBe("the pick never reached the Orchestrator (the Custodian could not reach it (HTTP 502)) — try it again");
  });

  it("an abort of the call during the POST: not known, and no order to call again", () => {
    expect(
      pickText({
        pick: "claim",
        stage: "post",
        turnAborted: true,
        cause: { kind: "aborted", message: "This operation was aborted" },
      }),
    ).toEqual({
      case: "unknown",
      isError: false,
      text:
        "It is not known whether this pick reached the workflow: your turn ended while the call to `claim` waited for " +
        "the workflow's answer (This operation was aborted). A pick that the workflow takes can end the turn in this " +
        "way. Do not call `claim` again before you read the next message: it tells you where the workflow is now.",
    });
  });

  it("a reset after the request was sent, the turn going on", () => {
    expect(
      pickText({
        pick: "claim",
        stage: "post",
        turnAborted: false,
        cause: { kind: "transport", code: "ECONNRESET", message: "read ECONNRESET" },
      }).text,
    ).toBe(
      "It is not known whether this pick reached the workflow: the call to `claim` failed before the workflow " +
        "answered (read ECONNRESET). A second call to `claim` can run the pick twice.",
    );
  });

  it("an outstanding pick whose poll the call's abort cut, and a poll's cut 2xx", () => {
    expect(pickText({ pick: "claim", stage: "poll", turnAborted: true, cause: { kind: "aborted" } }).text).toBe(
      "This pick reached the workflow, and your turn ended before you read its answer. Do not call `claim` again " +
        "before you read the next message: it tells you where the workflow is now.",
    );
    expect(
      pickText({
        pick: "claim",
        stage: "poll",
        turnAborted: false,
        cause: { kind: "body-cut", status: 200, detail: "terminated" },
      }).text,
    ).toBe(
      "This pick reached the workflow, and its answer did not reach you (terminated). Do not call `claim` again " +
        "before you read the next message: it tells you where the workflow is now.",
    );
  });

  it("the Orchestrator's own answers keep their meaning, with its message when it gives one", () => {
    const post = (status: number, body?: unknown) =>
      pickText({ pick: "claim", stage: "post", turnAborted: false, cause: { kind: "http", status, body } });
    expect(post(503, err("stopping", "shutting down")).text).toBe(
      "the pick `claim` was not taken: the Orchestrator is stopping (shutting down) — try it again",
    );
    expect(post(503).text).toBe("the pick `claim` was not taken: the Orchestrator is stopping — try it again");
    expect(post(409, err("conflict", "pick review is outstanding")).text).toBe(
      "the pick `claim` was not taken: another pick of this turn is outstanding (pick review is outstanding). " +
        "Do not call `claim` again before you read that pick's answer.",
    );
    expect(post(404).text).toBe(
      "This turn is over: the workflow answers no pick in it, and the call to `claim` has no answer. Do not call " +
        "`claim` again before you read the next message: it tells you where the workflow is now.",
    );
    expect(post(404, err("not_found", "turn 3 is over")).text).toContain("This turn is over (turn 3 is over): ");
  });
});

describe("reading a failure", () => {
  it("causeOf finds an abort, or the first code down the cause chain", () => {
    expect(causeOf(AbortSignal.abort().reason)).toEqual({ kind: "aborted", message: "This operation was aborted" });
    expect(causeOf(Object.assign(new Error("Request aborted"), { code: "UND_ERR_ABORTED" }))).toEqual({
      kind: "aborted",
      message: "Request aborted",
    });
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
    expect(causeOf(new TypeError("fetch failed", { cause: refused }))).toEqual({
      kind: "transport",
      code: "ECONNREFUSED",
      message: "connect ECONNREFUSED 127.0.0.1:1",
    });
    const aggregate = Object.assign(new AggregateError([refused], ""), { code: "ECONNREFUSED" });
    expect(causeOf(aggregate)).toEqual({ kind: "transport", code: "ECONNREFUSED", message: "" });
    expect(causeOf(new Error("odd"))).toEqual({ kind: "transport", message: "odd" });
    expect(causeOf("odd")).toEqual({ kind: "transport", message: "odd" });
    const loop: { message: string; cause?: unknown } = { message: "loop" };
    loop.cause = loop;
    expect(causeOf(loop)).toEqual({ kind: "transport", message: "[object Object]" });
  });

  it("an empty transport message leaves the code as the detail", () => {
    expect(
      pickText({
        pick: PICK,
        stage: "post",
        turnAborted: false,
        cause: { kind: "transport", code: "ECONNREFUSED", message: "" },
      }).text,
    ).toBe(ADR.neverReached("ECONNREFUSED"));
  });

  it("bodyMessage reads error.message from a parsed or a raw body", () => {
    expect(bodyMessage(err("x", "m"))).toBe("m");
    expect(bodyMessage('{"error":{"message":"m"}}')).toBe("m");
    for (const body of [undefined, null, "", "not json", 3, { error: "m" }, { error: { message: 3 } }, err("x", " ")])
      expect(bodyMessage(body)).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// Properties

const KNOWN_CODES = [...PROVING, ...NOT_PROVING].map(([c]) => c);
const pickName = fc.stringMatching(/^[a-z][a-z0-9_-]{0,24}$/);
const code = fc.oneof(fc.constantFrom(...KNOWN_CODES), fc.string({ maxLength: 12 }));
const message = fc.oneof(fc.constant(""), fc.string({ maxLength: 40 }));
const body = fc.oneof(
  fc.constant(undefined),
  fc.string({ maxLength: 30 }),
  fc.tuple(fc.constantFrom("c", "turn_over", "not_running", "pick_outstanding"), message).map(([c, m]) => err(c, m)),
  fc.anything(),
);
const cause: fc.Arbitrary<PickCause> = fc.oneof(
  fc.record({ kind: fc.constant("transport" as const), code: fc.option(code, { nil: undefined }), message }),
  fc.record({ kind: fc.constant("aborted" as const), message: fc.option(message, { nil: undefined }) }),
  fc.record({
    kind: fc.constant("http" as const),
    status: fc.oneof(
      fc.constantFrom(200, 202, 400, 403, 404, 409, 413, 429, 500, 502, 503),
      fc.integer({ min: 100, max: 599 }),
    ),
    custodian: fc.option(fc.constantFrom(UNREACHABLE, REFUSED, "other", " Unreachable "), { nil: undefined }),
    body,
  }),
  fc.record({ kind: fc.constant("body-cut" as const), status: fc.integer({ min: 200, max: 299 }), detail: message }),
);
const failure: fc.Arbitrary<PickFailure> = fc.record({
  pick: pickName,
  stage: fc.constantFrom<PickStage>("post", "poll"),
  turnAborted: fc.boolean(),
  cause,
});

/** The Orchestrator's error code in a body, read as the Harness reads it. */
function codeOf(body: unknown): string | undefined {
  try {
    const v = typeof body === "string" ? JSON.parse(body) : body;
    const c = (v as { error?: { code?: unknown } } | null | undefined)?.error?.code;
    return typeof c === "string" ? c : undefined;
  } catch {
    return undefined;
  }
}

/** The decision's proof that a request never left: a connect's code, or the Custodian's unreachable 502. */
const proves = (c: PickCause) =>
  (c.kind === "transport" && c.code !== undefined && NEVER_SENT_CODES.has(c.code)) ||
  (c.kind === "http" && c.status === 502 && c.custodian?.trim().toLowerCase() === UNREACHABLE);

describe("properties", () => {
  it("every failure is exactly one case, the same in classify and pickText", () => {
    fc.assert(
      fc.property(failure, (f) => {
        const own = f.cause.kind === "http" && f.cause.custodian === undefined ? f.cause.status : undefined;
        const twoXX =
          f.cause.kind === "body-cut" || (f.cause.kind === "http" && f.cause.status >= 200 && f.cause.status < 300);
        const post = f.stage === "post";
        const code = f.cause.kind === "http" ? codeOf(f.cause.body) : undefined;
        const over = post && own === 409 && (code === "turn_over" || code === "not_running");
        const refused = post && own !== undefined && [400, 403, 413, 429].includes(own);
        const ownAnswer = own === 404 || (post && (own === 409 || own === 503)) || refused;
        const oracle: Record<PickCase, boolean> = {
          turnOver: own === 404 || over,
          outstanding: post && own === 409 && !over,
          stopping: post && own === 503,
          refused,
          neverReached: post && !ownAnswer && !f.turnAborted && proves(f.cause),
          reachedUnread: own !== 404 && (!post || (!ownAnswer && twoXX)),
          unknown: post && !ownAnswer && !twoXX && (f.turnAborted || !proves(f.cause)),
        };
        const holding = PICK_CASES.filter((c) => oracle[c]);
        expect(holding).toHaveLength(1);
        expect(classify(f)).toBe(holding[0]);
        expect(pickText(f).case).toBe(holding[0]);
      }),
      { numRuns: 2000 },
    );
  });

  it('"never reached" only for a proving failure of the POST, never after an abort', () => {
    fc.assert(
      fc.property(failure, (f) => {
        const c = classify(f);
        if (c === "neverReached") {
          expect(f.turnAborted).toBe(false);
          expect(f.stage).toBe("post");
          expect(proves(f.cause)).toBe(true);
        }
        if (f.turnAborted) expect(c).not.toBe("neverReached");
        if (f.stage === "post" && !f.turnAborted && proves(f.cause)) expect(c).toBe("neverReached");
      }),
      { numRuns: 2000 },
    );
  });

  it("every text names the pick (the never-reached error is the call's own, and has no <pick>)", () => {
    fc.assert(
      fc.property(failure, (f) => {
        const a = pickText(f);
        expect(a.text.length).toBeGreaterThan(0);
        if (a.case === "neverReached") {
          expect(a.text).toMatch(/^the pick never reached the Orchestrator \(.+\) — try it again$/s);
          expect(a.isError).toBe(true);
        } else expect(a.text).toContain(`\`${f.pick}\``);
        if (a.case === "unknown" || a.case === "reachedUnread") expect(a.isError).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });
});
