// The signature of the wire between the Orchestrator and a Sandbox Effector (decision 0070), apart
// from the order's schema (api/effector-wire.ts, which re-exports all of this): the Effector judges a
// request at rest with node:crypto alone, and loads zod only with its first order
// (docs/decisions/0044-the-custodian-starts-small.md). The wire's story is in api/effector-wire.ts.
//
// Pure: hashing and comparing only.
import { createHash, createHmac, timingSafeEqual } from "node:crypto";

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
