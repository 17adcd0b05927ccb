// The turns ledger (decisions 0025, 0042): its pure rules (turn-ledger.ts: admitting, ending,
// compacting at its stated bound, the Allowed picks, a pick judged against the turn it claims),
// and Turns over an in-memory ledger and a fake Harness: the Harness's answers held to what was
// asked, a refused submit that changes nothing, two first loads that lose no entry, a corrupt
// ledger refused rather than reset; and a stream followed within its bounds (decision 0049) on a
// virtual clock: re-polls backed off, streams capped per workspace, a resume past the end the
// Machine's 400.
import { streamPath, type Admission } from "../../api/agent-protocol";
import { MemoryLedgers } from "../../orchestrator/agents/ledger-store";
import {
  MAX_TURNS_LEDGER_BYTES,
  admitTurn,
  emptyTurns,
  endTurn,
  judgePick,
  parseTurnsLedger,
  runningTurn,
  serializeTurns,
  setTurnAllowed,
  type TurnsLedger,
} from "../../orchestrator/agents/turn-ledger";
import {
  STREAM_POLL,
  TURNS_FORMAT,
  Turns,
  type HarnessCaller,
  type TurnsOptions,
} from "../../orchestrator/agents/turns";
import { SubmitTurnBody } from "../../api/orchestrator-schemas";
import type { HttpError } from "../../api/orchestrator-errors";
import type { Misbehaviour } from "../../orchestrator/workspaces/sandbox-gateway";
import type { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";

const admission = (iid: string, submissionId = "s1"): Admission => ({
  streamUrl: streamPath("coder", iid),
  offset: 0,
  submissionId,
});
const menu = [
  { name: "propose", description: "p" },
  { name: "reject", description: "r" },
];
const admit = (ledger: TurnsLedger, iid: string, at: string, submissionId = "s1", max?: number) =>
  admitTurn(
    ledger,
    iid,
    { agent: "coder", admission: admission(iid, submissionId), at, body: { menu, allowed: ["propose"] } },
    max,
  );
const size = (l: TurnsLedger) => Buffer.byteLength(serializeTurns(l));

describe("the turns ledger's rules", () => {
  it("records an admitted turn with its Menu and Allowed picks, and ends every other conversation's", () => {
    const one = admit(emptyTurns(), "ws-1.a", "2026-01-01T00:00:01Z")!;
    expect(runningTurn(one, "ws-1.a")).toMatchObject({ menu: ["propose", "reject"], allowed: ["propose"] });
    const two = admit(one, "ws-1.b", "2026-01-01T00:00:02Z")!;
    expect(runningTurn(two, "ws-1.a")).toBeUndefined();
    // An ended conversation keeps its Agent and admission alone.
    expect(two.conversations["ws-1.a"]).toEqual({
      agent: "coder",
      admission: admission("ws-1.a"),
      at: "2026-01-01T00:00:01Z",
      ended: true,
    });
    expect(runningTurn(two, "ws-1.b")?.admission.submissionId).toBe("s1");
  });

  it("ends a turn at its own end only, and says when nothing changes", () => {
    const l = admit(emptyTurns(), "ws-1.a", "t1", "s1")!;
    expect(endTurn(l, "ws-1.a", "s0")).toBeUndefined();
    expect(endTurn(l, "ws-1.b", "s1")).toBeUndefined();
    const ended = endTurn(l, "ws-1.a", "s1")!;
    expect(runningTurn(ended, "ws-1.a")).toBeUndefined();
    expect(endTurn(ended, "ws-1.a", "s1")).toBeUndefined();
  });

  it("keeps its stated bound: past it the oldest ended conversations go, the running one stays", () => {
    // Fill a ledger with ended conversations until one more would pass a small bound.
    const max = 20 * 1024;
    let l = emptyTurns();
    for (let i = 0; ; i++) {
      const next = admit(
        l,
        `ws-1.c${String(i).padStart(4, "0")}`,
        `2026-01-01T00:${String(i).padStart(4, "0")}`,
        "s1",
        Infinity,
      )!;
      if (size(next) > max) break;
      l = next;
    }
    const kept = Object.keys(l.conversations).length;
    expect(size(l)).toBeLessThanOrEqual(max);
    // At the edge: one more admission fits only by dropping the oldest ended conversation(s).
    const after = admit(l, "ws-1.new", "2026-02-01T00:00:00Z", "s1", max)!;
    expect(size(after)).toBeLessThanOrEqual(max);
    expect(runningTurn(after, "ws-1.new")).toBeDefined();
    const gone = Object.keys(l.conversations).filter((iid) => !(iid in after.conversations));
    expect(gone.length).toBeGreaterThanOrEqual(1);
    expect(gone).toEqual(Object.keys(l.conversations).sort().slice(0, gone.length));
    expect(Object.keys(after.conversations)).toHaveLength(kept + 1 - gone.length);
    // A bound no entry fits in: refused, never a ledger past it.
    expect(admit(emptyTurns(), "ws-1.x", "t", "s1", 100)).toBeUndefined();
    // The default bound is the one stated.
    expect(MAX_TURNS_LEDGER_BYTES).toBe(900 * 1024);
  });

  it("changes the Allowed picks of a running turn only", () => {
    const l = admit(emptyTurns(), "ws-1.a", "t1")!;
    expect(setTurnAllowed(l, "ws-1.z", ["x"]).kind).toBe("unknown");
    expect(setTurnAllowed(l, "ws-1.a", ["propose"]).kind).toBe("same");
    const set = setTurnAllowed(l, "ws-1.a", ["reject", "propose", "reject"]);
    expect(set).toMatchObject({ kind: "set", allowed: ["propose", "reject"] });
    const ended = endTurn(l, "ws-1.a", "s1")!;
    expect(setTurnAllowed(ended, "ws-1.a", ["propose"])).toMatchObject({ kind: "over" });
  });

  it("judges a pick against the turn it claims", () => {
    const l = admit(emptyTurns(), "ws-1.a", "t1")!;
    expect(judgePick(l, "ws-1.a", { pick: "propose", submissionId: "s1" })).toBeUndefined();
    expect(judgePick(l, "ws-1.b", { pick: "propose", submissionId: "s1" })?.code).toBe("unknown_conversation");
    expect(judgePick(l, "ws-1.a", { pick: "propose", submissionId: "s2" })?.code).toBe("not_running");
    expect(judgePick(l, "ws-1.a", { pick: "deploy", submissionId: "s1" })?.code).toBe("not_on_menu");
    expect(judgePick(l, "ws-1.a", { pick: "reject", submissionId: "s1" })?.code).toBe("not_allowed");
    expect(judgePick(endTurn(l, "ws-1.a", "s1")!, "ws-1.a", { pick: "propose", submissionId: "s1" })?.code).toBe(
      "turn_over",
    );
  });

  it("reads its own text and the first Orchestrators' back, and refuses anything else", () => {
    const l = admit(emptyTurns(), "ws-1.a", "t1")!;
    expect(parseTurnsLedger(serializeTurns(l))).toEqual(l);
    const legacy = parseTurnsLedger(JSON.stringify({ "ws-1.a": { agent: "coder", admission: admission("ws-1.a") } }));
    expect(legacy.conversations["ws-1.a"]).toMatchObject({ agent: "coder", ended: true });
    expect(runningTurn(legacy, "ws-1.a")).toBeUndefined();
    for (const bad of ["{", "[]", '{"version":3,"conversations":{}}', '{"ws-1.a":{"agent":1}}'])
      expect(() => parseTurnsLedger(bad)).toThrow();
  });
});

// ---------------------------------------------------------------------------------------------

type Answer = { status: number; body: unknown };

/** A Harness whose admission answer the test writes; it records every path it was asked for. */
class ScriptedHarness implements HarnessCaller {
  readonly paths: string[] = [];
  admit: (path: string, sent: { submissionId: string }) => Answer = (path, sent) => {
    const [, , agent, iid] = path.split("/").map(decodeURIComponent);
    return { status: 202, body: { streamUrl: streamPath(agent!, iid!), offset: 0, submissionId: sent.submissionId } };
  };
  page: (path: string, signal?: AbortSignal) => Answer | Promise<Answer> = () => ({
    status: 200,
    body: { events: [], next: 0, idle: true },
  });
  async harness(_name: string, method: "GET" | "POST", path: string, sent?: unknown, signal?: AbortSignal) {
    this.paths.push(`${method} ${path}`);
    if (method === "POST" && path.endsWith("/abort")) return { status: 200, body: { aborted: true } };
    return method === "POST" ? this.admit(path, sent as { submissionId: string }) : this.page(path, signal);
  }
}

const watch = {
  whenListed: async () => undefined,
  get: (name: string) => (name === "ws-1" ? { metadata: { name, uid: "u1" }, status: { phase: "Ready" } } : undefined),
} as unknown as SandboxWatch;

function turnsOf(
  harness = new ScriptedHarness(),
  backend = new MemoryLedgers(TURNS_FORMAT),
  more: Partial<TurnsOptions> = {},
) {
  const misbehaved: Array<[string, Misbehaviour, string]> = [];
  const turns = new Turns({
    namespace: "ns",
    gateway: harness,
    watch,
    backend,
    onMisbehaviour: (w, r, m) => misbehaved.push([w, r, m]),
    ...more,
  });
  return { turns, harness, backend, misbehaved };
}

const turn = (iid: string, over: Record<string, unknown> = {}) =>
  SubmitTurnBody.parse({ agent: "coder", iid, message: "go", menu, allowed: ["propose"], ...over });

describe("Turns", () => {
  it("refuses an admission whose stream is not the conversation's own, names the workspace, and records nothing", async () => {
    for (const streamUrl of [
      "http://elsewhere.example:8080/steal",
      "//elsewhere/steal",
      "/agents/other/ws-1.a/stream",
    ]) {
      const t = turnsOf();
      t.harness.admit = (_p, sent) => ({
        status: 202,
        body: { streamUrl, offset: 0, submissionId: sent.submissionId },
      });
      const err = (await t.turns.submit("ws-1", turn("ws-1.a")).catch((e: HttpError) => e)) as HttpError;
      expect(err).toMatchObject({ status: 502, code: "harness_misbehaved" });
      expect(err.message).toMatch(/workspace ws-1's Harness answered an admission for another stream/);
      expect(t.misbehaved).toEqual([["ws-1", "bad_answer", err.message]]);
      expect(t.backend.writes).toBe(0);
    }
  });

  it("passes on a Harness's refusal only in the catalogue's words at their status, else harness_error", async () => {
    const cases: Array<[number, unknown, { status: number; code: string }]> = [
      [409, { error: { code: "busy", message: "a turn is running" } }, { status: 409, code: "busy" }],
      [400, { error: { code: "invalid", message: "menu: Required" } }, { status: 400, code: "invalid" }],
      [404, { error: { code: "not_found", message: "no conversation" } }, { status: 404, code: "not_found" }],
      // A word the catalogue lacks, a word at another status than its own, a catalogued word the
      // Harness has no business saying, no body at all: none reaches a Machine as the Harness said it.
      [409, { error: { code: "weird_word", message: "?" } }, { status: 502, code: "harness_error" }],
      [400, { error: { code: "busy", message: "?" } }, { status: 502, code: "harness_error" }],
      [409, { error: { code: "already_answered", message: "?" } }, { status: 502, code: "harness_error" }],
      [404, "not json", { status: 502, code: "harness_error" }],
    ];
    for (const [status, body, expected] of cases) {
      const t = turnsOf();
      t.harness.admit = () => ({ status, body });
      const err = (await t.turns.submit("ws-1", turn("ws-1.a")).catch((e: HttpError) => e)) as HttpError;
      expect({ status: err.status, code: err.code }).toEqual(expected);
      expect(err.message).toContain(`workspace ws-1's Harness answered ${status}`);
    }
  });

  it("reads a conversation's stream at the path it builds, never one a Harness named", async () => {
    const t = turnsOf();
    await t.turns.submit("ws-1", turn("ws-1.a", { submissionId: "s1" }));
    await t.turns.page("ws-1", "ws-1.a", undefined, 0);
    expect(t.harness.paths.at(-1)).toBe(`GET ${streamPath("coder", "ws-1.a")}?offset=0&wait=0&limit=500`);
  });

  it("refuses a page with more events than asked for, and ends the turn when its end is read", async () => {
    const t = turnsOf();
    await t.turns.submit("ws-1", turn("ws-1.a", { submissionId: "s1" }));
    const ev = (offset: number) => ({ kind: "working", offset, at: "t", note: "n" });
    t.harness.page = () => ({
      status: 200,
      body: { events: Array.from({ length: 501 }, (_, i) => ev(i)), next: 501, idle: false },
    });
    await expect(t.turns.page("ws-1", "ws-1.a", 0, 0)).rejects.toMatchObject({
      status: 502,
      code: "harness_misbehaved",
    });
    t.harness.page = () => ({
      status: 200,
      body: {
        events: [{ kind: "end", offset: 3, at: "t", submissionId: "s1", outcome: "completed" }],
        next: 4,
        idle: true,
      },
    });
    expect(await t.turns.allowedFor("ws-1", "ws-1.a")).toEqual({ allowed: ["propose"], submissionId: "s1" });
    await t.turns.page("ws-1", "ws-1.a", 3, 0);
    expect(await t.turns.allowedFor("ws-1", "ws-1.a")).toBeUndefined();
  });

  it("changes nothing when the Harness refuses a submit: the running turn's Allowed picks stay", async () => {
    const t = turnsOf();
    await t.turns.submit("ws-1", turn("ws-1.a", { submissionId: "s1" }));
    const writes = t.backend.writes;
    t.harness.admit = () => ({ status: 409, body: { error: { code: "busy", message: "a turn is running" } } });
    await expect(
      t.turns.submit("ws-1", turn("ws-1.a", { submissionId: "s2", allowed: ["reject"] })),
    ).rejects.toMatchObject({
      status: 409,
    });
    expect(t.backend.writes).toBe(writes);
    expect(await t.turns.allowedFor("ws-1", "ws-1.a")).toEqual({ allowed: ["propose"], submissionId: "s1" });
  });

  it("loses no entry when two Orchestrators' first loads race", async () => {
    const backend = new MemoryLedgers(TURNS_FORMAT);
    const a = turnsOf(new ScriptedHarness(), backend);
    const b = turnsOf(new ScriptedHarness(), backend);
    await Promise.all([a.turns.submit("ws-1", turn("ws-1.a")), b.turns.submit("ws-1", turn("ws-1.b"))]);
    const stored = parseTurnsLedger(backend.stored.get("ws-1")!.text);
    expect(Object.keys(stored.conversations).sort()).toEqual(["ws-1.a", "ws-1.b"]);
  });

  it("refuses, and never overwrites, a ledger that does not parse", async () => {
    const t = turnsOf();
    t.backend.stored.set("ws-1", { text: "not json", version: 3 });
    await expect(t.turns.submit("ws-1", turn("ws-1.a"))).rejects.toMatchObject({
      status: 500,
      code: "ledger_unreadable",
    });
    expect(t.harness.paths).toEqual([]);
    expect(t.backend.stored.get("ws-1")).toEqual({ text: "not json", version: 3 });
  });
});

describe("following a stream (decision 0049)", () => {
  /** A virtual clock: `sleep` moves it, and the Harness's hold moves it when it holds. */
  function clock() {
    const c = { t: 0, slept: [] as number[] };
    return {
      c,
      now: () => c.t,
      sleep: async (ms: number) => {
        c.slept.push(ms);
        c.t += ms;
      },
    };
  }
  const waitOf = (path: string) => Number(new URL(path, "http://h").searchParams.get("wait"));
  const offsetOf = (path: string) => Number(new URL(path, "http://h").searchParams.get("offset"));

  it("asks a Harness that answers empty pages at once a bounded number of times, backing off to a cap", async () => {
    const { c, now, sleep } = clock();
    const t = turnsOf(new ScriptedHarness(), undefined, { now, sleep });
    await t.turns.submit("ws-1", turn("ws-1.a", { submissionId: "s1" }));
    const stop = new AbortController();
    let asked = 0;
    // Empty, not idle, at once: a Harness that does not hold its long-poll. A minute of virtual time.
    t.harness.page = () => {
      if (++asked >= 1000 || c.t >= 60_000) stop.abort();
      return { status: 200, body: { events: [], next: 0, idle: false } };
    };
    await t.turns.follow("ws-1", "ws-1.a", {}, stop.signal, () => undefined);
    // First page (no hold), then the schedule 250 ms doubling to 5 s: 17 requests in the minute.
    expect(c.slept.slice(0, 7)).toEqual([250, 500, 1000, 2000, 4000, 5000, 5000]);
    expect(asked).toBeLessThanOrEqual(
      2 + Math.log2(STREAM_POLL.maxBackoffMs / STREAM_POLL.firstBackoffMs) + 60_000 / STREAM_POLL.maxBackoffMs,
    );
    expect(t.misbehaved).toEqual([]);
  });

  it("asks again at once after a page that held, or that carried events", async () => {
    const { c, now, sleep } = clock();
    const t = turnsOf(new ScriptedHarness(), undefined, { now, sleep });
    await t.turns.submit("ws-1", turn("ws-1.a", { submissionId: "s1" }));
    let asked = 0;
    t.harness.page = (path) => {
      asked++;
      const from = offsetOf(path);
      if (asked % 2) {
        c.t += waitOf(path); // held its whole long-poll, then nothing
        return { status: 200, body: { events: [], next: from, idle: false } };
      }
      const events = [{ kind: "working", offset: from, at: "t", note: "n" }];
      if (asked === 6)
        events.push({ kind: "end", offset: from + 1, at: "t", submissionId: "s1", outcome: "completed" } as never);
      return { status: 200, body: { events, next: from + events.length, idle: false } };
    };
    const seen: number[] = [];
    await t.turns.follow(
      "ws-1",
      "ws-1.a",
      {},
      new AbortController().signal,
      (p) => void seen.push(...p.events.map((e) => e.offset)),
    );
    expect(asked).toBe(6);
    expect(seen).toEqual([0, 1, 2, 3]);
    expect(c.slept).toEqual([]);
  });

  it("ends a stream resumed at the log's end once the Harness says nothing more can come (idle)", async () => {
    const t = turnsOf();
    await t.turns.submit("ws-1", turn("ws-1.a", { submissionId: "s1" }));
    t.harness.page = (path) => ({ status: 200, body: { events: [], next: offsetOf(path), idle: true } });
    const pages: unknown[] = [];
    await t.turns.follow("ws-1", "ws-1.a", { lastEventId: 4 }, new AbortController().signal, (p) => void pages.push(p));
    expect(t.harness.paths.filter((p) => p.startsWith("GET"))).toEqual([
      `GET ${streamPath("coder", "ws-1.a")}?offset=5&wait=0&limit=500`,
    ]);
    expect(pages).toEqual([{ events: [], next: 5, idle: true }]);
  });

  it("answers a Last-Event-ID past the end 400 naming the header, and counts no misbehaviour", async () => {
    const t = turnsOf();
    await t.turns.submit("ws-1", turn("ws-1.a", { submissionId: "s1" }));
    // The Harness's log has 5 events: it reads an offset past them from its end, as the Harness does.
    t.harness.page = () => ({ status: 200, body: { events: [], next: 5, idle: true } });
    const called: unknown[] = [];
    const err = (await t.turns
      .follow("ws-1", "ws-1.a", { lastEventId: 9 }, new AbortController().signal, (p) => void called.push(p))
      .catch((e: HttpError) => e)) as HttpError;
    expect(err).toMatchObject({ status: 400, code: "invalid" });
    expect(err.message).toMatch(
      /^Last-Event-ID: 9 is past the end of conversation ws-1.a's stream .*send the id of an event this stream sent/,
    );
    expect(called).toEqual([]);
    expect(t.misbehaved).toEqual([]);
    // The same answer to an offset the Orchestrator chose (not the Machine's) is the Harness's misbehaviour.
    await expect(t.turns.page("ws-1", "ws-1.a", 9, 0)).rejects.toMatchObject({
      status: 502,
      code: "harness_misbehaved",
    });
    expect(t.misbehaved.map(([w, r]) => [w, r])).toEqual([["ws-1", "bad_answer"]]);
  });

  it("follows at most streamsPerWorkspace streams of a workspace at once: one more is 429 until one closes", async () => {
    const t = turnsOf(new ScriptedHarness(), undefined, { poll: { ...STREAM_POLL, streamsPerWorkspace: 2 } });
    await t.turns.submit("ws-1", turn("ws-1.a", { submissionId: "s1" }));
    // A Harness that holds until its caller leaves.
    t.harness.page = (path, signal) =>
      new Promise((resolve) => {
        const answer = () => resolve({ status: 200, body: { events: [], next: offsetOf(path), idle: false } });
        if (signal!.aborted) answer();
        else signal!.addEventListener("abort", answer);
      });
    const leave = [new AbortController(), new AbortController()];
    const open = leave.map((l) => t.turns.follow("ws-1", "ws-1.a", {}, l.signal, () => undefined));
    await expect(
      t.turns.follow("ws-1", "ws-1.a", {}, new AbortController().signal, () => undefined),
    ).rejects.toMatchObject({
      status: 429,
      code: "too_many_streams",
    });
    leave[0]!.abort();
    await open[0];
    const third = new AbortController();
    const again = t.turns.follow("ws-1", "ws-1.a", {}, third.signal, () => undefined);
    third.abort();
    leave[1]!.abort();
    await Promise.all([again, open[1]]);
  });
});
