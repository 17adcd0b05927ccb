// The wire between the Orchestrator and a Sandbox Effector (decision 0070): every
// request signed with the Sandbox's Effector key, every answer signed back (decision 0070). The
// pod's containers share one network namespace, so the Harness can reach :8082: the signature is
// the barrier. A request is bound to its method, path, body, the pod address it is meant for, a
// time and a nonce; the Effector refuses what is unsigned, stale, replayed, meant for another pod
// or signed with another key. An answer is bound to the request's nonce, its status and body, so
// a process that binds :8082 while the Effector is down can neither run nor fake an Effect.
//
// Pure: hashing and comparing only.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { EffectError, EffectId, EffectResult, SecretRef } from "./effects";

export const EFFECTOR_PATHS = {
  healthz: "/healthz",
  metrics: "/metrics",
  /** POST: run an order (or answer the recorded result of its id). */
  effects: "/v1/effects",
  /** GET: what the Effector knows of an id, running nothing. */
  effect: (id: string) => `/v1/effects/${encodeURIComponent(id)}`,
} as const;

export const SIGNATURE_HEADERS = {
  time: "x-jr2-time",
  nonce: "x-jr2-nonce",
  pod: "x-jr2-pod",
  signature: "x-jr2-signature",
} as const;

/** How far a request's time may be from the Effector's clock, either way. Nonces are remembered
 * for twice this, so a replay inside the window is refused and one outside it is stale. */
export const SIGNATURE_WINDOW_MS = 60_000;

const REQUEST_PURPOSE = "jr2-effector-request/v1";
const ANSWER_PURPOSE = "jr2-effector-answer/v1";

export const bodyDigest = (body: string | Buffer) => createHash("sha256").update(body).digest("hex");

export type SignedRequest = { method: string; path: string; body: string; pod: string; time: number; nonce: string };

/** The text a request's signature covers: every field on its own line, the body by its digest. */
export function requestText(r: SignedRequest): string {
  return [REQUEST_PURPOSE, r.method.toUpperCase(), r.path, r.pod, String(r.time), r.nonce, bodyDigest(r.body)].join(
    "\n",
  );
}

const mac = (key: string | Buffer, text: string) => createHmac("sha256", key).update(text, "utf8").digest("base64url");

/** The headers that sign a request. `key` is the Effector key's text (orchestrator/tokens.ts effectorKey). */
export function signRequest(key: string | Buffer, r: SignedRequest): Record<string, string> {
  return {
    [SIGNATURE_HEADERS.time]: String(r.time),
    [SIGNATURE_HEADERS.nonce]: r.nonce,
    [SIGNATURE_HEADERS.pod]: r.pod,
    [SIGNATURE_HEADERS.signature]: mac(key, requestText(r)),
  };
}

export function signAnswer(key: string | Buffer, nonce: string, status: number, body: string): string {
  return mac(key, [ANSWER_PURPOSE, nonce, String(status), bodyDigest(body)].join("\n"));
}

function sameMac(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Whether an answer carries the Effector's signature over the request's nonce, its status and body. */
export function answerSigned(
  key: string | Buffer,
  nonce: string,
  status: number,
  body: string,
  signature: string | undefined,
): boolean {
  return signature !== undefined && sameMac(signAnswer(key, nonce, status, body), signature);
}

/** Why a request is refused, as counted on the Effector's metrics. */
export type Refusal = "unsigned" | "stale" | "replayed" | "wrong_pod" | "bad_signature";

export type Verdict = { ok: true; nonce: string } | { ok: false; refusal: Refusal; message: string };

const NONCE = /^[A-Za-z0-9_-]{16,64}$/;

/**
 * The Effector's judgement of a request (pure; the nonce memory is the caller's, `seen` asks it).
 * `pod` is the Effector's own address; `now` its clock.
 */
export function verifyRequest(
  key: string | Buffer,
  req: { method: string; path: string; body: string; headers: Record<string, string | string[] | undefined> },
  own: { pod: string; now: number; seen: (nonce: string) => boolean },
): Verdict {
  const h = (name: string) => {
    const v = req.headers[name];
    return Array.isArray(v) ? undefined : v;
  };
  const time = h(SIGNATURE_HEADERS.time);
  const nonce = h(SIGNATURE_HEADERS.nonce);
  const pod = h(SIGNATURE_HEADERS.pod);
  const signature = h(SIGNATURE_HEADERS.signature);
  if (!time || !nonce || !pod || !signature || !/^[0-9]{1,16}$/.test(time) || !NONCE.test(nonce))
    return { ok: false, refusal: "unsigned", message: "the request carries no signature of the Effector's shape" };
  const t = Number(time);
  if (Math.abs(own.now - t) > SIGNATURE_WINDOW_MS)
    return { ok: false, refusal: "stale", message: `the request's time is more than ${SIGNATURE_WINDOW_MS} ms away` };
  const expected = mac(key, requestText({ method: req.method, path: req.path, body: req.body, pod, time: t, nonce }));
  if (!sameMac(expected, signature))
    return { ok: false, refusal: "bad_signature", message: "the request is not signed with this Effector's key" };
  // Judged after the signature, so an unsigned request cannot spend a nonce or learn the address.
  if (pod !== own.pod)
    return { ok: false, refusal: "wrong_pod", message: "the request is signed for another pod's Effector" };
  if (own.seen(nonce)) return { ok: false, refusal: "replayed", message: "the request's nonce was already used" };
  return { ok: true, nonce };
}

// ---------------------------------------------------------------------------------------------
// The order: an Effect as the Orchestrator resolved it (every path, url and secret name decided
// by the Orchestrator from what jr2 recorded, decision 0070); the Effector checks it again.

const AbsPath = z.string().startsWith("/").max(4096);

export const PushOrder = z.strictObject({
  kind: z.literal("push"),
  /** The slot's worktree, /work/<slot>/<branch>: its objects (and the Repo cache's, by alternates). */
  worktree: AbsPath,
  /** What to push: a local branch's head (`refs/heads/<b>`) or a commit id. */
  source: z.union([z.strictObject({ branch: z.string() }), z.strictObject({ commit: z.string() })]),
  /** The remote: the slot's url, which its fence entry admits. */
  url: z.string(),
  /** The push Secret's name: /run/jr2/secrets/@git/<credential>/. */
  credential: z.string(),
  /** refs/heads/<to>. */
  ref: z.string(),
  expect: z.string().optional(),
  timeoutSeconds: z.number().int(),
});
export const HttpOrder = z.strictObject({
  kind: z.literal("http"),
  method: z.string(),
  url: z.string(),
  headers: z.record(z.string(), z.union([z.string(), SecretRef])),
  body: z
    .union([
      z.strictObject({ json: z.unknown() }),
      /** `root` the slot's worktree, `path` inside it (relative). */
      z.strictObject({ file: z.strictObject({ root: AbsPath, path: z.string() }) }),
    ])
    .optional(),
  maxResponseBytes: z.number().int(),
  timeoutSeconds: z.number().int(),
});
export const CommandOrder = z.strictObject({
  kind: z.literal("command"),
  argv: z.array(z.string()).min(1),
  /** The worktree and the directory inside it the command runs in. */
  root: AbsPath,
  cwd: z.string(),
  env: z.record(z.string(), z.union([z.string(), SecretRef])),
  timeoutSeconds: z.number().int(),
  maxOutputBytes: z.number().int(),
});
export const EffectorOrder = z.strictObject({
  id: EffectId,
  idempotent: z.boolean(),
  effect: z.discriminatedUnion("kind", [PushOrder, HttpOrder, CommandOrder]),
});
export type EffectorOrder = z.infer<typeof EffectorOrder>;

/** What the Effector knows of an id: running, settled, or (after its own restart mid-run) unknown. */
export const EffectorAnswer = z.strictObject({
  id: EffectId,
  state: z.enum(["running", "succeeded", "failed", "unknown"]),
  /** True when this answer is the record of an earlier run of the id: nothing ran now. */
  replayed: z.boolean(),
  result: EffectResult.optional(),
  error: EffectError.optional(),
});
export type EffectorAnswer = z.infer<typeof EffectorAnswer>;
