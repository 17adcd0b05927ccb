// A work queue in front of an idempotent reconcile function, after controller-runtime's: one key is
// never reconciled twice at once, repeated adds of a waiting key coalesce into one reconcile, a
// failure is retried with per-key exponential backoff, and a key can ask to be looked at again at a
// time of its own (docs/decisions/0006-work-queue-and-cache.md). Pepr's Reconcile has none of these.

/** How many times in a row a key changed during its own reconcile may jump the line. */
const MAX_FRONT_STREAK = 3;

/**
 * The longest an addAfter waits: one day, far below Node's timer limit (2^31 - 1 ms, about 24.8
 * days), past which setTimeout fires after 1 ms instead, so a far deadline became a spin. A key
 * asked back later than this is looked at after a day and asks again.
 */
export const MAX_REQUEUE_DELAY_MS = 24 * 60 * 60 * 1000;

export type ReconcileResult = void | { requeueAfterMs?: number };

export type WorkQueueOptions = {
  name: string;
  workers: number;
  /**
   * Workers beyond `workers` that only keys added by addFirst may take (default 0): slow reconciles
   * that start new work never hold every worker while a key that finishes one waits (decision 0034).
   */
  extraForFirst?: number;
  reconcile: (key: string) => Promise<ReconcileResult>;
  /** First retry delay after a failure; doubles per consecutive failure of the key. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Told of every failure, with the delay before the retry. */
  onError?: (key: string, err: unknown, retryInMs: number) => void;
  /** Told after every reconcile, with its outcome, duration and, for a failure, the error. */
  onDone?: (key: string, result: "success" | "error", ms: number, err?: unknown) => void;
};

export class WorkQueue {
  readonly #o: Required<Omit<WorkQueueOptions, "onError" | "onDone">> & Pick<WorkQueueOptions, "onError" | "onDone">;
  /** Keys waiting to run, in order. */
  readonly #fifo: string[] = [];
  /** Keys added by addFirst waiting to run: before #fifo, and they may take an extra worker. */
  readonly #front: string[] = [];
  /** Running keys added by addFirst meanwhile: they go to #front when their reconcile ends. */
  readonly #firstAfterRun = new Set<string>();
  /** Keys that must run (again): in #fifo, or waiting for their running reconcile to end. */
  readonly #dirty = new Set<string>();
  readonly #processing = new Set<string>();
  readonly #failures = new Map<string, number>();
  readonly #timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  /** How many times in a row a key went to the front after changing during its own reconcile. */
  readonly #streaks = new Map<string, number>();
  #active = 0;
  /** How many of the running keys were added first when they started. */
  #activeFirst = 0;
  #stopped = false;
  #idleWaiters: (() => void)[] = [];

  constructor(opts: WorkQueueOptions) {
    this.#o = { baseDelayMs: 100, maxDelayMs: 10_000, extraForFirst: 0, ...opts };
  }

  /** Keys waiting to run (not counting those running). */
  get depth(): number {
    return this.#front.length + this.#fifo.length;
  }

  get running(): number {
    return this.#active;
  }

  add(key: string): void {
    if (this.#stopped || this.#dirty.has(key)) return;
    this.#dirty.add(key);
    // A running key is queued again when its reconcile ends, never run beside itself.
    if (!this.#processing.has(key)) this.#fifo.push(key);
    this.#pump();
  }

  /**
   * Adds the key at the front: its news finishes work already started (a pod turned Ready or
   * ended), which goes before keys that start new work (decision 0020). A key already waiting
   * moves to the front; a running one goes first once its reconcile ends.
   */
  addFirst(key: string): void {
    if (this.#stopped) return;
    if (this.#processing.has(key)) {
      this.#dirty.add(key);
      this.#firstAfterRun.add(key);
      return;
    }
    if (this.#dirty.has(key)) {
      // Waiting in one lane or the other: one search of #front, and of #fifo only when not there.
      const at = this.#front.indexOf(key);
      if (at >= 0) this.#front.splice(at, 1);
      else this.#fifo.splice(this.#fifo.indexOf(key), 1);
    }
    this.#dirty.add(key);
    this.#front.unshift(key);
    this.#pump();
  }

  /** Adds the key once `ms` have passed, at most MAX_REQUEUE_DELAY_MS (also for a delay that is no
   * number: a spin is worse than a late look); an earlier pending wake-up wins over a later one. */
  addAfter(key: string, ms: number): void {
    if (this.#stopped) return;
    if (ms <= 0) return this.add(key);
    ms = Number.isNaN(ms) ? MAX_REQUEUE_DELAY_MS : Math.min(ms, MAX_REQUEUE_DELAY_MS);
    const at = Date.now() + ms;
    const pending = this.#timers.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      this.add(key);
    }, ms);
    timer.unref?.();
    this.#timers.set(key, { at, timer });
  }

  /** Retries the key after its backoff: base * 2^(failures-1), capped. */
  addRateLimited(key: string): number {
    const n = (this.#failures.get(key) ?? 0) + 1;
    this.#failures.set(key, n);
    const delay = Math.min(this.#o.baseDelayMs * 2 ** (n - 1), this.#o.maxDelayMs);
    this.addAfter(key, delay);
    return delay;
  }

  /** Forgets the key's failures, so its next failure starts from the base delay. */
  forget(key: string): void {
    this.#failures.delete(key);
  }

  failures(key: string): number {
    return this.#failures.get(key) ?? 0;
  }

  /** Resolves when nothing is queued or running (timers may still be pending). */
  idle(): Promise<void> {
    if (this.#active === 0 && this.depth === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  stop(): void {
    this.#stopped = true;
    for (const { timer } of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    this.#fifo.length = 0;
    this.#front.length = 0;
    this.#dirty.clear();
    this.#firstAfterRun.clear();
  }

  #pump(): void {
    for (let next = this.#next(); next; next = this.#next()) {
      const { key, first } = next;
      this.#dirty.delete(key);
      this.#processing.add(key);
      this.#active++;
      if (first) this.#activeFirst++;
      void this.#run(key, first);
    }
    if (this.#active === 0 && this.depth === 0) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      waiters.forEach((w) => w());
    }
  }

  /**
   * Takes the next key a free worker may run: from #front, then #fifo, while an ordinary worker is
   * free; from #front alone while only an extra one is. Running keys added first fill the extra
   * workers first, so they never take an ordinary worker from the keys behind them.
   */
  #next(): { key: string; first: boolean } | undefined {
    if (this.#active >= this.#o.workers + this.#o.extraForFirst) return undefined;
    const front = this.#front.shift();
    if (front !== undefined) return { key: front, first: true };
    const ordinary = this.#active - Math.min(this.#activeFirst, this.#o.extraForFirst);
    const key = ordinary < this.#o.workers ? this.#fifo.shift() : undefined;
    return key === undefined ? undefined : { key, first: false };
  }

  async #run(key: string, first: boolean): Promise<void> {
    const started = Date.now();
    try {
      const result = await this.#o.reconcile(key);
      this.forget(key);
      if (result?.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
      this.#o.onDone?.(key, "success", Date.now() - started);
    } catch (err) {
      const delay = this.addRateLimited(key);
      this.#o.onError?.(key, err, delay);
      this.#o.onDone?.(key, "error", Date.now() - started, err);
    } finally {
      this.#processing.delete(key);
      this.#active--;
      if (first) this.#activeFirst--;
      if (this.#dirty.has(key)) this.#requeueDirty(key);
      else this.#streaks.delete(key);
      this.#pump();
    }
  }

  /**
   * A key that changed while it was being reconciled holds the freshest news there is (a pod that
   * turned Ready while its create was answered): it goes to the front of its lane (#front when it
   * was added first meanwhile), not behind a burst of others, but only a few times in a row, so a
   * key that never settles cannot starve the rest.
   */
  #requeueDirty(key: string): void {
    const lane = this.#firstAfterRun.delete(key) ? this.#front : this.#fifo;
    const streak = (this.#streaks.get(key) ?? 0) + 1;
    if (streak <= MAX_FRONT_STREAK) {
      this.#streaks.set(key, streak);
      lane.unshift(key);
    } else {
      this.#streaks.delete(key);
      lane.push(key);
    }
  }
}
