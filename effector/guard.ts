// The signed wire's door (decision 0070): every route but /healthz and /metrics
// answers only a request signed with this pod's Effector key, meant for this pod's address, fresh,
// and never seen before. The judgement itself is api/effector-sign.ts verifyRequest (pure); this
// file (zod-free, so loaded at rest) keeps the nonces it needs and the counts of what it refused.
import { SIGNATURE_WINDOW_MS, type Refusal } from "../api/effector-sign";

/** A request body larger than this is refused before it is verified (an order is small). */
export const MAX_REQUEST_BYTES = 1024 * 1024;

/**
 * The nonces of verified requests, each kept twice the signature window: a replay inside the
 * window is refused as replayed, one after it as stale, so none is forgotten early. Bounded: when
 * full of live nonces it refuses new requests (`full`) rather than forget one a replay could reuse.
 */
export class NonceMemory {
  readonly #expires = new Map<string, number>();
  constructor(
    readonly max = 100_000,
    readonly keepMs = 2 * SIGNATURE_WINDOW_MS,
  ) {}

  /** Drops the expired ones (kept in insertion order, which is time order). */
  #prune(now: number) {
    for (const [nonce, until] of this.#expires) {
      if (until > now) break;
      this.#expires.delete(nonce);
    }
  }

  full(now: number): boolean {
    this.#prune(now);
    return this.#expires.size >= this.max;
  }

  /** Whether `nonce` was seen; records it when not. */
  seen(nonce: string, now: number): boolean {
    this.#prune(now);
    if (this.#expires.has(nonce)) return true;
    this.#expires.set(nonce, now + this.keepMs);
    return false;
  }

  get size() {
    return this.#expires.size;
  }
}

/** Why a request was refused before it ran: the wire's refusals and the door's own. */
export type RefusalReason = Refusal | "too_large" | "nonce_memory_full" | "no_key";

/** The Effector's metrics, Prometheus text: refusals by reason, Effects by kind and final state. */
export class EffectorMetrics {
  readonly refused = new Map<RefusalReason, number>();
  readonly effects = new Map<string, number>();

  refuse(reason: RefusalReason) {
    this.refused.set(reason, (this.refused.get(reason) ?? 0) + 1);
  }

  effect(kind: string, state: string) {
    const k = `${kind}\0${state}`;
    this.effects.set(k, (this.effects.get(k) ?? 0) + 1);
  }

  text(): string {
    const lines = [
      "# HELP jr2_effector_refused_total Requests refused before anything ran, by reason.",
      "# TYPE jr2_effector_refused_total counter",
      ...[...this.refused].map(([r, n]) => `jr2_effector_refused_total{reason="${r}"} ${n}`),
      "# HELP jr2_effector_effects_total Effects run, by kind and the state they settled in.",
      "# TYPE jr2_effector_effects_total counter",
      ...[...this.effects].map(([k, n]) => {
        const [kind, state] = k.split("\0");
        return `jr2_effector_effects_total{kind="${kind}",state="${state}"} ${n}`;
      }),
    ];
    return `${lines.join("\n")}\n`;
  }
}
