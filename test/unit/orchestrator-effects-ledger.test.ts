// The effects ledger's rules (orchestrator/effects/effect-ledger.ts, decision 0070): a retry of an id
// answers its record and a different body under it conflicts; sent before the send; one after
// another; bounded; and what the worker does after each thing the Effector may say, above all for
// an Effect whose answer was lost (at most once unless idempotent).
import { EffectBody } from "../../api/effects";
import type { EffectorAnswer } from "../../api/effector-wire";
import {
  MAX_QUEUED,
  acceptEffect,
  afterSend,
  canonicalJson,
  compactEffects,
  effectDigest,
  emptyEffects,
  markSent,
  nextEffect,
  parseEffectsLedger,
  recordOf,
  recoveryStep,
  serializeEffects,
  settleEffect,
  type EffectsLedger,
  type Heard,
} from "../../orchestrator/effects/effect-ledger";

const AT = "2026-03-01T12:00:00.000Z";
const http = (id: string, extra: Record<string, unknown> = {}) =>
  EffectBody.parse({ id, kind: "http", method: "POST", url: "https://forge.example/pulls", ...extra });

function accepted(ledger: EffectsLedger, id: string, extra?: Record<string, unknown>): EffectsLedger {
  const a = acceptEffect(ledger, http(id, extra), AT);
  if (a.kind !== "new") throw new Error(`not accepted: ${a.kind}`);
  return a.ledger;
}

describe("accepting an Effect", () => {
  it("records a new id queued, in the order sent", () => {
    const l = accepted(accepted(emptyEffects(), "a"), "b");
    expect(l.effects.map((e) => [e.id, e.state])).toEqual([
      ["a", "queued"],
      ["b", "queued"],
    ]);
    expect(nextEffect(l)?.id).toBe("a");
  });

  it("answers the record of an id sent again with the same body, whatever order its keys came in", () => {
    const l = accepted(emptyEffects(), "a", { headers: { accept: "application/json", "x-b": "1" } });
    const again = acceptEffect(l, http("a", { headers: { "x-b": "1", accept: "application/json" } }), AT);
    expect(again.kind).toBe("same");
    expect(canonicalJson({ b: 1, a: [1, { d: 2, c: 3 }] })).toBe('{"a":[1,{"c":3,"d":2}],"b":1}');
  });

  it("refuses another body under a recorded id as a conflict, settled or not", () => {
    let l = accepted(emptyEffects(), "a");
    expect(acceptEffect(l, http("a", { method: "PUT" }), AT).kind).toBe("conflict");
    l = settleEffect(markSent(l, "a", AT)!, "a", { state: "succeeded" }, AT)!;
    expect(acceptEffect(l, http("a", { idempotent: true }), AT).kind).toBe("conflict");
    expect(acceptEffect(l, http("a"), AT).kind).toBe("same");
  });

  it("is full past the bound of Effects waiting", () => {
    let l = emptyEffects();
    for (let i = 0; i < MAX_QUEUED; i++) l = accepted(l, `e-${i}`);
    const full = acceptEffect(l, http("one-more"), AT);
    expect(full).toMatchObject({ kind: "full", message: expect.stringContaining(`bound of ${MAX_QUEUED}`) });
  });

  it("digests the parsed body, its defaults filled in", () => {
    expect(effectDigest(http("a"))).toBe(effectDigest(http("a", { idempotent: false, headers: {} })));
    expect(effectDigest(http("a"))).not.toBe(effectDigest(http("a", { idempotent: true })));
  });
});

describe("sending and settling", () => {
  it("moves queued to sent only once, and settles once: the first settlement stands", () => {
    const l = accepted(emptyEffects(), "a");
    const sent = markSent(l, "a", AT)!;
    expect(sent.effects[0]).toMatchObject({ state: "sent", sentAt: AT });
    expect(markSent(sent, "a", AT)).toBeUndefined();
    const done = settleEffect(sent, "a", { state: "failed", error: { code: "refused", message: "no" } }, AT)!;
    expect(done.effects[0]).toMatchObject({ state: "failed", settledAt: AT, error: { code: "refused" } });
    expect(settleEffect(done, "a", { state: "succeeded" }, AT)).toBeUndefined();
    expect(nextEffect(done)).toBeUndefined();
    expect(recordOf(done.effects[0]!)).not.toHaveProperty("digest");
  });

  it("reads back what it writes, and refuses a text that is not a ledger", () => {
    const l = accepted(emptyEffects(), "a");
    expect(parseEffectsLedger(serializeEffects(l))).toEqual(l);
    expect(() => parseEffectsLedger('{"version":1,"effects":[{"id":"x"}]}')).toThrow(/not an effects ledger/);
  });
});

describe("the ledger's bound", () => {
  const result = (bytes: number) => ({
    kind: "http" as const,
    status: 200,
    headers: {},
    body: "x".repeat(bytes),
    bodyEncoding: "utf8" as const,
    truncated: false,
  });

  it("keeps a result's texts up to its keep bound, marked truncated", () => {
    const l = settleEffect(
      markSent(accepted(emptyEffects(), "a"), "a", AT)!,
      "a",
      { state: "succeeded", result: result(300_000) },
      AT,
    )!;
    const r = l.effects[0]!.result as ReturnType<typeof result>;
    expect(r.body.length).toBe(128 * 1024);
    expect(r.truncated).toBe(true);
  });

  it("drops the oldest settled Effects' bodies first, then the oldest settled records; never a waiting one", () => {
    let l = emptyEffects();
    for (const id of ["a", "b", "c"]) {
      l = accepted(l, id);
      l = settleEffect(
        markSent(l, id, AT)!,
        id,
        { state: "succeeded", result: result(100_000) },
        `2026-03-01T12:00:0${"abc".indexOf(id)}.000Z`,
      )!;
    }
    l = accepted(l, "waiting");
    const bodies = compactEffects(l, 250_000)!;
    expect(bodies.effects.map((e) => [e.id, (e.result as { body: string } | undefined)?.body.length])).toEqual([
      ["a", 0],
      ["b", 100_000],
      ["c", 100_000],
      ["waiting", undefined],
    ]);
    // Bodies emptied are enough here: no record goes.
    expect(compactEffects(l, 120_000)!.effects.map((e) => e.id)).toEqual(["a", "b", "c", "waiting"]);
    // Records that are large by their request alone: the oldest settled ones go, the waiting one stays.
    let big = emptyEffects();
    for (const id of ["a", "b", "c"]) {
      big = accepted(big, id, { body: { json: "y".repeat(20_000) } });
      big = settleEffect(
        markSent(big, id, AT)!,
        id,
        { state: "failed" },
        `2026-03-01T12:00:0${"abc".indexOf(id)}.000Z`,
      )!;
    }
    big = accepted(big, "waiting", { body: { json: "y".repeat(20_000) } });
    expect(compactEffects(big, 50_000)!.effects.map((e) => e.id)).toEqual(["c", "waiting"]);
    expect(compactEffects(l, 100)).toBeUndefined();
  });
});

describe("what the worker does next", () => {
  const answer = (state: EffectorAnswer["state"], extra: Partial<EffectorAnswer> = {}): Heard => ({
    kind: "answer",
    answer: { id: "a", state, replayed: false, ...extra },
  });
  const plain = { idempotent: false };
  const idem = { idempotent: true };

  it("settles with the Effector's answer, polls one still running", () => {
    expect(afterSend(plain, answer("succeeded"))).toEqual({ do: "settle", settlement: { state: "succeeded" } });
    expect(afterSend(plain, answer("running"))).toEqual({ do: "poll" });
    expect(recoveryStep(plain, answer("failed", { error: { code: "push_rejected", message: "x" } }))).toEqual({
      do: "settle",
      settlement: { state: "failed", error: { code: "push_rejected", message: "x" } },
    });
  });

  it("asks first when a send's answer was lost (a 5xx, a reset, a deadline), sends again when it was never delivered", () => {
    expect(afterSend(plain, { kind: "lost", message: "503" })).toEqual({ do: "query" });
    expect(afterSend(plain, { kind: "not_delivered", message: "ECONNREFUSED" })).toEqual({ do: "resend" });
  });

  it("recovers a sent Effect the Effector does not know: unknown (answer_lost) unless idempotent, then sent again a few times", () => {
    expect(recoveryStep(plain, { kind: "unknown_id" })).toMatchObject({
      do: "settle",
      settlement: { state: "unknown", error: { code: "answer_lost" } },
    });
    expect(recoveryStep(plain, answer("unknown"))).toMatchObject({ settlement: { state: "unknown" } });
    expect(recoveryStep(idem, { kind: "unknown_id" })).toEqual({ do: "resend" });
    expect(recoveryStep(idem, { kind: "unknown_id" }, 3)).toMatchObject({ settlement: { state: "unknown" } });
  });

  it("keeps asking an Effector it cannot reach", () => {
    expect(recoveryStep(plain, { kind: "not_delivered", message: "refused" })).toEqual({ do: "retry" });
    expect(recoveryStep(plain, { kind: "lost", message: "reset" })).toEqual({ do: "retry" });
  });

  it("fails an unsigned answer answer_unsigned, never sent again, on a send and on a query", () => {
    for (const step of [
      afterSend(idem, { kind: "unsigned", message: "m" }),
      recoveryStep(idem, { kind: "unsigned", message: "m" }),
    ])
      expect(step).toMatchObject({ do: "settle", settlement: { state: "failed", error: { code: "answer_unsigned" } } });
  });

  it("fails a signed refusal of the order with the Effector's code", () => {
    expect(afterSend(plain, { kind: "refused", status: 403, code: "unconfined", message: "no Landlock" })).toEqual({
      do: "settle",
      settlement: { state: "failed", error: { code: "unconfined", message: "no Landlock" } },
    });
  });
});
