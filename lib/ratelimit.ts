// A token bucket for the operator's writes (decision 0006: 100 requests/s, burst 200). Tokens may go
// negative: each caller reserves its slot and waits for it, so callers are served in order.
export class TokenBucket {
  #tokens: number;
  #last = Date.now();

  constructor(
    readonly qps: number,
    readonly burst: number,
  ) {
    this.#tokens = burst;
  }

  /** Milliseconds the caller must wait for its token (0 when one is at hand); reserves it. */
  reserve(now = Date.now()): number {
    // A clock stepped back (NTP, a resumed VM) adds nothing and takes nothing.
    const elapsed = Math.max(0, now - this.#last);
    this.#tokens = Math.min(this.burst, this.#tokens + (elapsed * this.qps) / 1000);
    this.#last = Math.max(this.#last, now);
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : Math.ceil((-this.#tokens * 1000) / this.qps);
  }

  async take(): Promise<void> {
    const wait = this.reserve();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
}
