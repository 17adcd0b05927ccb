// Per-Sandbox limits at the egress point (docs/decisions/0051): a cap on the connections one
// Sandbox holds open and a token bucket of the new ones it opens, so one Sandbox's flood slows no
// other's traffic (each has its own count and bucket; nothing is shared). Pure: time is passed in.
export type LimitsConfig = {
  /** Connections one Sandbox may hold open at once. */
  maxConnections: number;
  /** New connections per second, sustained. */
  connectRate: number;
  /** New connections at once, from a full bucket. */
  connectBurst: number;
};

export type Admission = "ok" | "connections" | "rate";

type State = { open: number; tokens: number; last: number };

export class SandboxLimits {
  readonly #state = new Map<string, State>();

  constructor(readonly config: LimitsConfig) {}

  /** Takes a slot and a token for `key`, or says which limit refused (taking nothing). */
  admit(key: string, now = Date.now()): Admission {
    let s = this.#state.get(key);
    if (!s) this.#state.set(key, (s = { open: 0, tokens: this.config.connectBurst, last: now }));
    // A clock stepped back adds nothing.
    const elapsed = Math.max(0, now - s.last);
    s.tokens = Math.min(this.config.connectBurst, s.tokens + (elapsed * this.config.connectRate) / 1000);
    s.last = Math.max(s.last, now);
    if (s.open >= this.config.maxConnections) return "connections";
    if (s.tokens < 1) return "rate";
    s.tokens -= 1;
    s.open += 1;
    return "ok";
  }

  /** Gives back `key`'s slot (its token is spent). */
  release(key: string): void {
    const s = this.#state.get(key);
    if (s && s.open > 0) s.open -= 1;
  }

  open(key: string): number {
    return this.#state.get(key)?.open ?? 0;
  }

  /** A Sandbox gone: its state dropped (its open connections end with their sockets). */
  forget(key: string): void {
    this.#state.delete(key);
  }
}

/** A positive whole number from the environment, or the default; throws naming the variable and the fix. */
export function envCount(env: NodeJS.ProcessEnv, name: string, fallback: number, max = 1_000_000): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const n = Number(raw.trim());
  if (!/^[0-9]+$/.test(raw.trim()) || !Number.isSafeInteger(n) || n < 1 || n > max)
    throw new Error(
      `${name}=${JSON.stringify(raw.slice(0, 40))} is not a whole number from 1 to ${max}: set e.g. ${name}=${fallback}, or unset it for ${fallback}`,
    );
  return n;
}
