// A token bucket for the operator's writes (decision 0020: 100 requests/s, burst 200), with two lanes
// (decision 0020): while tokens are scarce, a write that finishes a Sandbox
// (its status once the pod is Ready, a Lost mark, a reap) goes before one that starts new work (a
// pod or Service create), so a burst of new Sandboxes never holds back the one write a ready one
// still needs. Within a lane, callers are served in order. qps 0: no client-side limit (the API
// server's priority and fairness decides).
export type Lane = "finish" | "start";

export class TokenBucket {
  #tokens: number;
  #last = Date.now();
  readonly #waiting: Record<Lane, Array<() => void>> = { finish: [], start: [] };
  #timer: NodeJS.Timeout | undefined;

  constructor(
    readonly qps: number,
    readonly burst: number,
  ) {
    this.#tokens = burst;
  }

  /** No client-side limit at all. */
  get unlimited(): boolean {
    return !(this.qps > 0);
  }

  /** Callers waiting, by lane. */
  get queued(): Record<Lane, number> {
    return { finish: this.#waiting.finish.length, start: this.#waiting.start.length };
  }

  #refill(now: number): void {
    // A clock stepped back (NTP, a resumed VM) adds nothing and takes nothing.
    const elapsed = Math.max(0, now - this.#last);
    this.#tokens = Math.min(this.burst, this.#tokens + (elapsed * this.qps) / 1000);
    this.#last = Math.max(this.#last, now);
  }

  /** Milliseconds a caller must wait for its token (0 when one is at hand); reserves it. Tokens
   * may go negative: each reservation waits its turn. Lane-blind; take() is what callers use. */
  reserve(now = Date.now()): number {
    this.#refill(now);
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : Math.ceil((-this.#tokens * 1000) / this.qps);
  }

  /** Waits for a token in `lane`; resolves with the milliseconds waited. */
  take(lane: Lane = "start"): Promise<number> {
    if (this.unlimited) return Promise.resolve(0);
    const started = Date.now();
    this.#refill(started);
    // Nobody ahead: nobody in this lane, and for a start nobody finishing either.
    const ahead = this.#waiting.finish.length + (lane === "start" ? this.#waiting.start.length : 0);
    if (ahead === 0 && this.#tokens >= 1) {
      this.#tokens -= 1;
      return Promise.resolve(0);
    }
    return new Promise((resolve) => {
      this.#waiting[lane].push(() => resolve(Date.now() - started));
      this.#schedule();
    });
  }

  /** Hands out the tokens that have accrued, finishing lane first; sleeps until the next one. */
  #drain = (): void => {
    this.#timer = undefined;
    this.#refill(Date.now());
    while (this.#tokens >= 1) {
      const next = this.#waiting.finish.shift() ?? this.#waiting.start.shift();
      if (!next) break;
      this.#tokens -= 1;
      next();
    }
    this.#schedule();
  };

  #schedule(): void {
    if (this.#timer || (!this.#waiting.finish.length && !this.#waiting.start.length)) return;
    const ms = Math.max(1, Math.ceil(((1 - this.#tokens) * 1000) / this.qps));
    this.#timer = setTimeout(this.#drain, ms);
  }
}

/**
 * Token buckets by key that refuse rather than queue: a caller over its rate is told how long to
 * wait (an HTTP 429's retry-after), so one key's flood costs the others nothing (decision 0042:
 * each workspace's Sandbox routes). One small entry per key, dropped oldest-first past `maxKeys`
 * (a dropped key starts again with a full bucket).
 */
export class KeyedRateLimiter {
  readonly #buckets = new Map<string, { tokens: number; last: number }>();

  constructor(
    readonly perSecond: number,
    readonly burst: number,
    readonly maxKeys = 100_000,
  ) {}

  /** 0 when `key` may go now (its token taken); else the milliseconds until it may. */
  tryTake(key: string, now = Date.now()): number {
    let b = this.#buckets.get(key);
    if (b) {
      // A clock stepped back adds nothing; the entry moves to the newest end (least recently used first).
      b.tokens = Math.min(this.burst, b.tokens + (Math.max(0, now - b.last) * this.perSecond) / 1000);
      b.last = Math.max(b.last, now);
      this.#buckets.delete(key);
    } else b = { tokens: this.burst, last: now };
    this.#buckets.set(key, b);
    for (const oldest of this.#buckets.keys()) {
      if (this.#buckets.size <= this.maxKeys) break;
      this.#buckets.delete(oldest);
    }
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - b.tokens) * 1000) / this.perSecond);
  }

  /** Keys held now. */
  get size(): number {
    return this.#buckets.size;
  }
}
