// The effects ledger's rules, pure (decision 0070: at most once). Per workspace, each
// Effect the Machine sent, in the order it sent them: its id, a digest of its body (a retry of the
// same Effect answers its record; another body under the same id is a conflict), the body (secrets
// by reference only: the API takes nothing else), its state, times, result and error.
//   - At most once: an Effect is recorded `sent` before it is sent, and a `sent` one found again
//     (an Orchestrator restarted between the send and the answer) is asked about, never sent blind:
//     recoveryStep decides from what the Effector says.
//   - One after another: the worker takes the first unsettled Effect only (nextEffect).
//   - Bounded: at most MAX_QUEUED waiting; a result's texts at most RESULT_KEEP_BYTES; past the
//     ledger's byte bound the oldest settled Effects' bodies and outputs go first, then the oldest
//     settled records; an unsettled one is never dropped.
import { createHash } from "node:crypto";
import { z } from "zod";
import {
  EFFECT_LIMITS,
  EFFECT_STATES,
  EffectBody,
  EffectError,
  EffectId,
  EffectResult,
  SETTLED,
  type EffectState,
} from "../../api/effects";
import type { EffectorAnswer } from "../../api/effector-wire";
import type { EffectRecord } from "../../api/orchestrator-schemas";

export const StoredEffect = z.strictObject({
  id: EffectId,
  kind: z.enum(["push", "http", "command"]),
  idempotent: z.boolean(),
  /** sha256 of the body's canonical JSON (effectDigest). */
  digest: z.string(),
  state: z.enum(EFFECT_STATES),
  acceptedAt: z.string(),
  sentAt: z.string().optional(),
  settledAt: z.string().optional(),
  result: EffectResult.optional(),
  error: EffectError.optional(),
  request: EffectBody,
});
export type StoredEffect = z.infer<typeof StoredEffect>;

export const EffectsLedger = z.strictObject({ version: z.literal(1), effects: z.array(StoredEffect) });
export type EffectsLedger = z.infer<typeof EffectsLedger>;

export const effectsConfigMap = (workspace: string) => `${workspace}-effects`;
export const EFFECTS_KEY = "effects.json";
/** A ConfigMap holds 1 MiB with its metadata. */
export const MAX_EFFECTS_LEDGER_BYTES = 900 * 1024;
/** Effects waiting (queued or sent) per workspace, at most (decision 0049). */
export const MAX_QUEUED = 64;
/** An Effect's body as JSON, at most (a larger request body is a Worktree file); the Effects
 * waiting are bounded together by the ledger's bytes too (acceptEffect). */
export const MAX_EFFECT_BODY_BYTES = 64 * 1024;
/** A result's texts (an http body, a command's stdout and stderr) as the ledger keeps them, together. */
export const RESULT_KEEP_BYTES = 128 * 1024;

export const emptyEffects = (): EffectsLedger => ({ version: 1, effects: [] });

export function parseEffectsLedger(text: string): EffectsLedger {
  const r = EffectsLedger.safeParse(JSON.parse(text));
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  throw new Error(`not an effects ledger: ${issue?.path.join(".") || "ledger"}: ${issue?.message}`);
}
export const serializeEffects = (ledger: EffectsLedger) => JSON.stringify(ledger);
const size = (x: unknown) => Buffer.byteLength(JSON.stringify(x), "utf8");

/** JSON with every object's keys sorted: one text per value, whatever order a client wrote. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object")
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(value);
}

/** The digest of a parsed body (its defaults filled in): the same Effect sent again has the same one. */
export const effectDigest = (body: EffectBody) => createHash("sha256").update(canonicalJson(body)).digest("hex");

/** The codes an Effect settles with when the Orchestrator, not the Effector, says why (the
 * Effector's own codes, e.g. push_rejected, come in its answer). One owner for these words. */
export type EffectFailureCode = "answer_lost" | "answer_unsigned" | "bad_answer" | "refused";
export const failure = (code: EffectFailureCode, message: string): EffectError => ({ code, message });

export const isSettled = (state: EffectState) => SETTLED.includes(state);

/** What the API answers of a stored Effect: everything but its digest. */
export function recordOf(e: StoredEffect): EffectRecord {
  const { digest: _digest, ...record } = e;
  return record;
}

export type Acceptance =
  | { kind: "new"; ledger: EffectsLedger; effect: StoredEffect }
  | { kind: "same"; effect: StoredEffect }
  | { kind: "conflict"; effect: StoredEffect }
  | { kind: "full"; message: string };

/**
 * The Machine's POST: a new id is appended `queued`; an id recorded with the same digest answers
 * its record (never run twice); with another digest, a conflict. Refused (`full`) past MAX_QUEUED
 * waiting, or when even the compacted ledger would not hold it.
 */
export function acceptEffect(
  ledger: EffectsLedger,
  body: EffectBody,
  at: string,
  bounds: { maxQueued?: number; maxBytes?: number } = {},
): Acceptance {
  const digest = effectDigest(body);
  const held = ledger.effects.find((e) => e.id === body.id);
  if (held) return held.digest === digest ? { kind: "same", effect: held } : { kind: "conflict", effect: held };
  const waiting = ledger.effects.filter((e) => !isSettled(e.state)).length;
  const maxQueued = bounds.maxQueued ?? MAX_QUEUED;
  if (waiting >= maxQueued)
    return { kind: "full", message: `the workspace has ${waiting} Effects waiting to run, its bound of ${maxQueued}` };
  const effect: StoredEffect = {
    id: body.id,
    kind: body.kind,
    idempotent: body.idempotent,
    digest,
    state: "queued",
    acceptedAt: at,
    request: body,
  };
  const next = compactEffects({ version: 1, effects: [...ledger.effects, effect] }, bounds.maxBytes);
  if (!next)
    return {
      kind: "full",
      message: `the workspace's effects ledger would pass its ${bounds.maxBytes ?? MAX_EFFECTS_LEDGER_BYTES}-byte bound with the Effects waiting`,
    };
  return { kind: "new", ledger: next, effect };
}

/** The first Effect not settled: the one the worker runs (or recovers) next. */
export const nextEffect = (ledger: EffectsLedger): StoredEffect | undefined =>
  ledger.effects.find((e) => !isSettled(e.state));

const replace = (ledger: EffectsLedger, id: string, f: (e: StoredEffect) => StoredEffect): EffectsLedger => ({
  version: 1,
  effects: ledger.effects.map((e) => (e.id === id ? f(e) : e)),
});

/** queued → sent, written before the send (decision 0070: at most once). Undefined: it is not queued. */
export function markSent(ledger: EffectsLedger, id: string, at: string): EffectsLedger | undefined {
  const e = ledger.effects.find((x) => x.id === id);
  if (!e || e.state !== "queued") return undefined;
  return replace(ledger, id, (x) => ({ ...x, state: "sent", sentAt: at }));
}

export type Settlement = {
  state: Extract<EffectState, "succeeded" | "failed" | "unknown">;
  result?: EffectResult;
  error?: EffectError;
};

/** queued or sent → settled, its result cut to what the ledger keeps, then compacted. Undefined: it
 * is settled already (the first settlement stands) or gone. */
export function settleEffect(
  ledger: EffectsLedger,
  id: string,
  s: Settlement,
  at: string,
  maxBytes = MAX_EFFECTS_LEDGER_BYTES,
): EffectsLedger | undefined {
  const e = ledger.effects.find((x) => x.id === id);
  if (!e || isSettled(e.state)) return undefined;
  const settled = replace(ledger, id, (x) => ({
    ...x,
    state: s.state,
    settledAt: at,
    ...(s.result ? { result: keptResult(s.result, RESULT_KEEP_BYTES) } : {}),
    ...(s.error ? { error: { code: s.error.code.slice(0, 64), message: s.error.message.slice(0, 2000) } } : {}),
  }));
  return compactEffects(settled, maxBytes) ?? compactEffects(settled, maxBytes, id);
}

/** A text cut to at most `bytes` UTF-8 bytes, on a character boundary (base64: a whole quantum). */
function cut(text: string, bytes: number, base64 = false): string {
  if (Buffer.byteLength(text, "utf8") <= bytes) return text;
  if (base64) return text.slice(0, Math.max(0, bytes - (bytes % 4)));
  let out = Buffer.from(text, "utf8").subarray(0, bytes).toString("utf8");
  if (out.endsWith("\uFFFD")) out = out.slice(0, -1);
  return out;
}

/** A result with its texts at most `keep` bytes together, `truncated` saying where cut. */
export function keptResult(r: EffectResult, keep: number): EffectResult {
  if (r.kind === "http") {
    const body = cut(r.body, keep, r.bodyEncoding === "base64");
    return body === r.body ? r : { ...r, body, truncated: true };
  }
  if (r.kind === "command") {
    const half = Math.floor(keep / 2);
    const stdout = cut(r.stdout, half);
    const stderr = cut(r.stderr, half);
    return {
      ...r,
      stdout,
      stderr,
      truncated: {
        stdout: r.truncated.stdout || stdout !== r.stdout,
        stderr: r.truncated.stderr || stderr !== r.stderr,
      },
    };
  }
  return r;
}

/**
 * The ledger within `maxBytes` and EFFECT_LIMITS.ledgerEffects: first the oldest settled Effects'
 * bodies and outputs dropped (their results' texts emptied, marked truncated), then the oldest
 * settled records. `alsoCut`: a settled Effect whose own texts may go too (the one just settled,
 * when nothing else frees enough). Undefined when even that does not fit: only waiting Effects are left.
 */
export function compactEffects(
  ledger: EffectsLedger,
  maxBytes = MAX_EFFECTS_LEDGER_BYTES,
  alsoCut?: string,
): EffectsLedger | undefined {
  let effects = [...ledger.effects];
  const over = () => size({ version: 1, effects }) > maxBytes;
  // Oldest first by when each settled: the order they were sent, as they settle one after another.
  const settled = () =>
    effects
      .map((e, i) => ({ e, i }))
      .filter(({ e }) => isSettled(e.state))
      .sort((a, b) => (a.e.settledAt ?? "").localeCompare(b.e.settledAt ?? "") || a.i - b.i);
  while (effects.filter((e) => isSettled(e.state)).length > 0 && effects.length > EFFECT_LIMITS.ledgerEffects) {
    const oldest = settled()[0]!;
    effects = effects.filter((_, i) => i !== oldest.i);
  }
  if (!over()) return { version: 1, effects };
  const newest = [...effects].reverse().find((e) => isSettled(e.state))?.id;
  for (const { e, i } of settled()) {
    if (!over()) break;
    if (e.id === newest && e.id !== alsoCut) continue;
    if (e.result) effects[i] = { ...e, result: keptResult(e.result, 0) };
  }
  // The newest settled record stays whole or with its texts cut, never dropped: its Machine may
  // not have read it yet.
  for (const { e } of settled()) {
    if (!over()) break;
    if (e.id === newest) continue;
    effects = effects.filter((x) => x.id !== e.id);
  }
  return over() ? undefined : { version: 1, effects };
}

// ---------------------------------------------------------------------------------------------
// What the Effector said, and what the worker does next

/** The Effector's word on a send or a query, as the gateway read it. */
export type Heard =
  | { kind: "answer"; answer: EffectorAnswer }
  /** 404 unknown_id: the Effector holds no record of the id (never got it, or restarted since). */
  | { kind: "unknown_id" }
  /** A signed refusal of the order itself (4xx): it did not run. */
  | { kind: "refused"; status: number; code: string; message: string }
  /** An answer without the Effector's signature, or with another key's: it may have run. */
  | { kind: "unsigned"; message: string }
  /** A signed answer that is not one (another id, not an answer): the Effector is faulty. */
  | { kind: "bad_answer"; message: string }
  /** The connection was refused: nothing of the request reached anyone. */
  | { kind: "not_delivered"; message: string }
  /** Sent, and no answer read: a 5xx, a reset, a deadline passed. It may have run. */
  | { kind: "lost"; message: string };

export type Step =
  | { do: "settle"; settlement: Settlement }
  | { do: "poll" }
  | { do: "resend" }
  /** Ask the Effector what it knows of the id (GET), running nothing. */
  | { do: "query" }
  /** Nothing learned: ask again after a backoff. */
  | { do: "retry" };

function fromAnswer(e: Pick<StoredEffect, "idempotent">, a: EffectorAnswer, resends: number): Step {
  if (a.state === "running") return { do: "poll" };
  if (a.state === "unknown") return lostStep(e, resends);
  return {
    do: "settle",
    settlement: { state: a.state, ...(a.result ? { result: a.result } : {}), ...(a.error ? { error: a.error } : {}) },
  };
}

/** An Effect whose answer is lost for good: sent again when idempotent (a few times at most),
 * else unknown, never run again (decision 0070). */
function lostStep(e: Pick<StoredEffect, "idempotent">, resends: number): Step {
  if (e.idempotent && resends < MAX_RESENDS) return { do: "resend" };
  return {
    do: "settle",
    settlement: {
      state: "unknown",
      error: failure(
        "answer_lost",
        e.idempotent
          ? `its answer was lost ${resends + 1} times: it is not sent again`
          : "its answer was lost and it is not idempotent: it may have run, and it is never sent again",
      ),
    },
  };
}

export const MAX_RESENDS = 3;

const badAnswer = (message: string): Step => ({
  do: "settle",
  settlement: {
    state: "failed",
    error: failure("bad_answer", `${message}: it may have run; never sent again`),
  },
});

const unsigned = (message: string): Step => ({
  do: "settle",
  settlement: {
    state: "failed",
    error: failure(
      "answer_unsigned",
      `${message}: whatever answered is not the workspace's Effector; the Effect may have run and is never sent again`,
    ),
  },
});

/** After a send (POST of the order). `resends`: how often this worker sent it again already. */
export function afterSend(e: Pick<StoredEffect, "idempotent">, heard: Heard, resends = 0): Step {
  switch (heard.kind) {
    case "answer":
      return fromAnswer(e, heard.answer, resends);
    case "refused":
      return {
        do: "settle",
        settlement: { state: "failed", error: { code: heard.code, message: heard.message } },
      };
    case "unsigned":
      return unsigned(heard.message);
    case "bad_answer":
      return badAnswer(heard.message);
    // The connection was refused: the order reached no one, so it is sent again (the Effector's own
    // memory of ids makes even a second delivery run nothing).
    case "not_delivered":
      return { do: "resend" };
    // A 5xx, a reset, a deadline: it may have run. Ask first (the Effector remembers its ids).
    case "lost":
    case "unknown_id":
      return { do: "query" };
  }
}

/** After a query (GET of the id) for a `sent` Effect: on restart recovery, and after a lost answer. */
export function recoveryStep(e: Pick<StoredEffect, "idempotent">, heard: Heard, resends = 0): Step {
  switch (heard.kind) {
    case "answer":
      return fromAnswer(e, heard.answer, resends);
    case "unknown_id":
      return lostStep(e, resends);
    case "unsigned":
      return unsigned(heard.message);
    case "bad_answer":
      return badAnswer(heard.message);
    // A signed refusal of the query itself, or no answer: nothing learned, ask again.
    case "refused":
    case "not_delivered":
    case "lost":
      return { do: "retry" };
  }
}
