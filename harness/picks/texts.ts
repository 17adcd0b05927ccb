// What a Menu tool call tells the Agent when its pick got no receipt or no answer (decision 0025,
// "A held tool result is a poll, never a held socket"): a pick's POST, or the long-poll
// of its delivery, failed; which of the three cases that is (never reached / not known whether it
// reached / reached but its answer unread), or which of the Orchestrator's own answers (503 while
// stopping, 409 while a pick is outstanding, 404 when the Turn is over); and the exact text, word
// for word from decision 0025. Our Custodian is TypeScript, not Envoy: its 502 with
// `x-jr2-custodian: unreachable` stands for Envoy's flags UF, UH, DF and URX (the request was not
// forwarded); a 502 without that header stands for UC, UMSDR, UPE, UR, LR and DPE (it may have
// been). Pure: no I/O. The Harness and the tests share these builders, so there is one source.
import { CUSTODIAN_HEADER, NEVER_SENT_CODES, UNREACHABLE, unreachableMessage } from "../../api/custodian-config";

// ---------------------------------------------------------------------------------------------
// What happened

/** The pick's own POST (no receipt yet), or a long-poll of its delivery (the POST's 2xx was the receipt). */
export type PickStage = "post" | "poll";

/** How one request of a pick failed. */
export type PickCause =
  /** The request threw before any response: a transport error, with its code when it has one. */
  | { kind: "transport"; code?: string; message: string }
  /** The request was cut by an abort signal (the call's own, or any other). */
  | { kind: "aborted"; message?: string }
  /**
   * A response whose status is not the answer looked for. `custodian` is the `x-jr2-custodian`
   * header's value (on the Custodian's own answers only); `body` is the parsed JSON body or its
   * raw text, when it was read (the Orchestrator and the Custodian answer `{error: {code, message}}`).
   */
  | { kind: "http"; status: number; custodian?: string; body?: unknown }
  /** A 2xx whose body did not arrive whole, or could not be read: the Orchestrator took the pick. */
  | { kind: "body-cut"; status: number; detail: string };

export type PickFailure = {
  /** The Menu tool's name: the pick. */
  pick: string;
  stage: PickStage;
  /** The call was aborted (its Turn ended) before it had its answer. */
  turnAborted: boolean;
  cause: PickCause;
};

/**
 * The three cases of decision 0025 and the Orchestrator's own answers:
 * - `neverReached`: the request never left the Harness (a proving connect failure, or the
 *   Custodian's unreachable 502), and the call was not aborted;
 * - `unknown`: it is not known whether the Orchestrator took the pick;
 * - `reachedUnread`: the Orchestrator took it (a 2xx said so) and its answer was not read;
 * - `stopping` (503 to the POST), `outstanding` (409 to the POST), `turnOver` (404, or 409 naming
 *   the turn as over or not running), `refused` (400, 403, 413 or 429 to the POST: the Orchestrator
 *   checked the pick against the turn it admitted and did not take it, decision 0042).
 */
export type PickCase =
  | "neverReached"
  | "unknown"
  | "reachedUnread"
  | "stopping"
  | "outstanding"
  | "turnOver"
  | "refused";

export const PICK_CASES: readonly PickCase[] = [
  "neverReached",
  "unknown",
  "reachedUnread",
  "stopping",
  "outstanding",
  "turnOver",
  "refused",
];

/** The codes that prove a request never left (api/custodian-config.ts, shared with the Custodian). */
export { NEVER_SENT_CODES };

// ---------------------------------------------------------------------------------------------
// The texts (decision 0025, word for word; `<pick>` in backquotes as the decision writes it)

const paren = (message: string | undefined) => (message ? ` (${message})` : "");

export const pickTexts = {
  /** The call fails with this error: the request never left the Harness. */
  neverReached: (detail: string) => `the pick never reached the Orchestrator (${detail}) — try it again`,
  /** Not known whether it reached, after an abort of the call. */
  unknownAfterAbort: (pick: string, detail: string) =>
    `It is not known whether this pick reached the workflow: your turn ended while the call to \`${pick}\` ` +
    `waited for the workflow's answer (${detail}). A pick that the workflow takes can end the turn in this way. ` +
    `Do not call \`${pick}\` again before you read the next message: it tells you where the workflow is now.`,
  /** Not known whether it reached, and the Turn goes on. */
  unknown: (pick: string, detail: string) =>
    `It is not known whether this pick reached the workflow: the call to \`${pick}\` failed before the ` +
    `workflow answered (${detail}). A second call to \`${pick}\` can run the pick twice.`,
  /** Reached, and the call's abort cut the wait for its answer. */
  reachedUnreadAfterAbort: (pick: string) =>
    `This pick reached the workflow, and your turn ended before you read its answer. Do not call \`${pick}\` ` +
    `again before you read the next message: it tells you where the workflow is now.`,
  /** Reached, and its answer was lost for another cause. */
  reachedUnread: (pick: string, detail: string) =>
    `This pick reached the workflow, and its answer did not reach you (${detail}). Do not call \`${pick}\` ` +
    `again before you read the next message: it tells you where the workflow is now.`,
  /** 503 to the POST: a stopping Orchestrator did not take the pick (decision 0025). */
  stopping: (pick: string, message?: string) =>
    `the pick \`${pick}\` was not taken: the Orchestrator is stopping${paren(message)} — try it again`,
  /** 409 to the POST: a pick of this Turn is already outstanding (decision 0025). */
  outstanding: (pick: string, message?: string) =>
    `the pick \`${pick}\` was not taken: another pick of this turn is outstanding${paren(message)}. ` +
    `Do not call \`${pick}\` again before you read that pick's answer.`,
  /** 400, 403, 413 or 429 to the POST: the Orchestrator did not take the pick (decision 0042). */
  refused: (pick: string, message?: string) =>
    `the pick \`${pick}\` was not taken: the workflow refused it${paren(message)}. Do not call \`${pick}\` ` +
    `again unless what refused it has changed.`,
  /** 404: the Turn is over (decision 0025). */
  turnOver: (pick: string, message?: string) =>
    `This turn is over${paren(message)}: the workflow answers no pick in it, and the call to \`${pick}\` has ` +
    `no answer. Do not call \`${pick}\` again before you read the next message: it tells you where the ` +
    `workflow is now.`,
} as const;

// ---------------------------------------------------------------------------------------------
// Reading a failure

/** One field of the `error` of an `{error: {...}}` body, parsed or raw JSON text; else undefined. */
function errorField(body: unknown, field: "message" | "code"): unknown {
  let value = body;
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return undefined;
    }
  }
  const error = (value as { error?: unknown } | null | undefined)?.error;
  return (error as Record<string, unknown> | null | undefined)?.[field];
}

/** `error.message` of an `{error: {message}}` body, parsed or raw JSON text; else undefined. */
export function bodyMessage(body: unknown): string | undefined {
  const message = errorField(body, "message");
  return typeof message === "string" && message.trim() !== "" ? message : undefined;
}

/** An error's short detail: its code and its message (the Custodian's form, custodian/rules.ts). */
export function errorDetail(code: string | undefined, message: string): string {
  if (!message) return code || "no detail";
  return code && !message.includes(code) ? `${code}: ${message}` : message;
}

const ABORT_NAMES = new Set(["AbortError", "TimeoutError"]);
const ABORT_CODES = new Set(["ABORT_ERR", "UND_ERR_ABORTED"]);

/**
 * The cause for an error a request threw: an abort, or a transport failure with the first code
 * found down its `cause` chain (fetch wraps undici's error as `TypeError: fetch failed`).
 */
export function causeOf(err: unknown): PickCause {
  const seen = new Set<unknown>();
  for (let e: unknown = err; typeof e === "object" && e !== null && !seen.has(e); ) {
    seen.add(e);
    const { name, code, message } = e as { name?: unknown; code?: unknown; message?: unknown };
    const text = typeof message === "string" ? message : "";
    if ((typeof name === "string" && ABORT_NAMES.has(name)) || (typeof code === "string" && ABORT_CODES.has(code)))
      return { kind: "aborted", ...(text ? { message: text } : {}) };
    if (typeof code === "string" && code !== "") return { kind: "transport", code, message: text };
    e = (e as { cause?: unknown }).cause;
  }
  const message = err instanceof Error ? err.message : String(err);
  return { kind: "transport", message };
}

/** "the Custodian could not reach it (": how the Custodian's unreachable message opens. */
const UNREACHABLE_PREFIX = unreachableMessage("").slice(0, -1);

const isCustodianUnreachable = (c: PickCause) =>
  c.kind === "http" && c.status === 502 && c.custodian?.trim().toLowerCase() === UNREACHABLE;

/** The Orchestrator's own answer (the Custodian passes its status through, without the header). */
const orchestratorStatus = (c: PickCause) => (c.kind === "http" && c.custodian === undefined ? c.status : undefined);

/** The Orchestrator's 409 codes that say the pick's turn is not the running one (decision 0042). */
const TURN_OVER_CODES = new Set(["turn_over", "not_running"]);
/** The Orchestrator's refusals of a pick it judged (decision 0042). */
const REFUSED_STATUSES = new Set([400, 403, 413, 429]);

/** `error.code` of an `{error: {code}}` body, parsed or raw JSON text; else undefined. */
function bodyCode(body: unknown): string | undefined {
  const code = errorField(body, "code");
  return typeof code === "string" ? code : undefined;
}

/** Which case `f` is. Total: every failure is exactly one case. */
export function classify(f: PickFailure): PickCase {
  const { cause, stage } = f;
  const status = orchestratorStatus(cause);
  // A 404 is the Turn's end at either stage; a 409 or a 503 refuses the POST only (a poll's 503
  // costs a retry, never the pick: the POST's 2xx already took it).
  if (status === 404) return "turnOver";
  if (stage === "post" && status === 409)
    return TURN_OVER_CODES.has(bodyCode(cause.kind === "http" ? cause.body : undefined) ?? "")
      ? "turnOver"
      : "outstanding";
  if (stage === "post" && status !== undefined && REFUSED_STATUSES.has(status)) return "refused";
  if (stage === "post" && status === 503) return "stopping";
  // A poll runs only after the POST's 2xx, the Orchestrator's word that it took the pick; a 2xx
  // to the POST whose body was lost says the same.
  if (stage === "poll") return "reachedUnread";
  if (cause.kind === "body-cut" || (cause.kind === "http" && cause.status >= 200 && cause.status < 300))
    return "reachedUnread";
  // After an abort of the call no failure proves "never reached": the call was the Turn's, and
  // the Orchestrator's abort of that Turn can cut a request it already took.
  if (f.turnAborted) return "unknown";
  if (cause.kind === "transport" && cause.code !== undefined && NEVER_SENT_CODES.has(cause.code)) return "neverReached";
  if (isCustodianUnreachable(cause)) return "neverReached";
  return "unknown";
}

/** The `<detail>` a text quotes for `cause`. */
export function causeDetail(cause: PickCause): string {
  switch (cause.kind) {
    case "transport":
      return errorDetail(cause.code, cause.message);
    case "aborted":
      return cause.message || "This operation was aborted";
    case "body-cut":
      return cause.detail || `the body of the HTTP ${cause.status} answer did not arrive`;
    case "http": {
      const message = bodyMessage(cause.body);
      if (isCustodianUnreachable(cause)) {
        // The Custodian's own text goes in the place of <detail>: "the Custodian could not reach it (…)".
        return message?.startsWith(UNREACHABLE_PREFIX) ? message : unreachableMessage(message ?? "HTTP 502");
      }
      const from = cause.custodian !== undefined ? ` from the Custodian (${CUSTODIAN_HEADER}: ${cause.custodian})` : "";
      return message ? `HTTP ${cause.status}${from}: ${message}` : `HTTP ${cause.status}${from}`;
    }
  }
}

export type PickAnswer = {
  case: PickCase;
  /** What the tool call returns (as its error when `isError`). */
  text: string;
  /**
   * Whether the call fails with `text` as its error: only when the pick is known not to have been
   * taken. Every other case is the call's answer, since an error reads as a failed pick and
   * invites a second one.
   */
  isError: boolean;
};

/** The case of `f` and its text. */
export function pickText(f: PickFailure): PickAnswer {
  const c = classify(f);
  const { pick, cause } = f;
  const detail = causeDetail(cause);
  const own = cause.kind === "http" ? bodyMessage(cause.body) : undefined;
  switch (c) {
    case "neverReached":
      return { case: c, text: pickTexts.neverReached(detail), isError: true };
    case "unknown":
      return {
        case: c,
        text: f.turnAborted ? pickTexts.unknownAfterAbort(pick, detail) : pickTexts.unknown(pick, detail),
        isError: false,
      };
    case "reachedUnread":
      return {
        case: c,
        text: f.turnAborted ? pickTexts.reachedUnreadAfterAbort(pick) : pickTexts.reachedUnread(pick, detail),
        isError: false,
      };
    case "stopping":
      return { case: c, text: pickTexts.stopping(pick, own), isError: true };
    case "outstanding":
      return { case: c, text: pickTexts.outstanding(pick, own), isError: true };
    case "turnOver":
      return { case: c, text: pickTexts.turnOver(pick, own), isError: f.stage === "post" };
    case "refused":
      return { case: c, text: pickTexts.refused(pick, own), isError: true };
  }
}
