import { MAX_REQUEUE_DELAY_MS, WorkQueue, type ReconcileResult, type WorkQueueOptions } from "../../lib/queue";
import { deferred } from "./unit-fixtures";

/** Lets every settled promise's continuations run (real timers only). */
const flush = () => new Promise((r) => setImmediate(r));

/** A reconcile that blocks on a promise the test releases, counting runs and concurrency per key. */
function gated() {
  const runs = new Map<string, number>();
  const inFlight = new Map<string, number>();
  const maxInFlight = new Map<string, number>();
  const gates: { key: string; release: () => void }[] = [];
  const reconcile = async (key: string) => {
    runs.set(key, (runs.get(key) ?? 0) + 1);
    inFlight.set(key, (inFlight.get(key) ?? 0) + 1);
    maxInFlight.set(key, Math.max(maxInFlight.get(key) ?? 0, inFlight.get(key)!));
    const gate = deferred();
    gates.push({ key, release: () => gate.resolve() });
    await gate.promise;
    inFlight.set(key, inFlight.get(key)! - 1);
  };
  /** Releases the oldest blocked reconcile of the key. */
  const release = (key: string) => {
    const i = gates.findIndex((g) => g.key === key);
    gates.splice(i, 1)[0].release();
  };
  return { reconcile, release, runs: (k: string) => runs.get(k) ?? 0, maxInFlight: (k: string) => maxInFlight.get(k) };
}

const queue = (o: Partial<WorkQueueOptions> & Pick<WorkQueueOptions, "reconcile">) =>
  new WorkQueue({ name: "test", workers: 4, ...o });

describe("WorkQueue with a reconcile the test releases", () => {
  it("never runs one key twice at once, and runs it exactly once more after an add during its run", async () => {
    const g = gated();
    const q = queue({ reconcile: g.reconcile });
    q.add("a");
    q.add("a");
    q.add("a");
    await flush();
    expect(g.runs("a")).toBe(1);
    g.release("a");
    await flush();
    expect(g.runs("a")).toBe(2);
    g.release("a");
    await q.idle();
    expect(g.runs("a")).toBe(2);
    expect(g.maxInFlight("a")).toBe(1);
  });

  // Finish before start (decision 0020): a key whose news finishes a Sandbox goes before the burst
  // of new keys queued ahead of it.
  it("runs a key added first before the keys already waiting, and moves a waiting one forward", async () => {
    const g = gated();
    const order: string[] = [];
    const q = queue({
      workers: 1,
      reconcile: async (key) => {
        order.push(key);
        await g.reconcile(key);
      },
    });
    q.add("busy");
    q.add("s1");
    q.add("s2");
    q.add("ready");
    q.addFirst("ready");
    q.addFirst("fresh");
    expect(q.depth).toBe(4);
    for (const key of ["busy", "fresh", "ready", "s1", "s2"]) {
      await flush();
      g.release(key);
    }
    await q.idle();
    expect(order).toEqual(["busy", "fresh", "ready", "s1", "s2"]);
  });

  it("coalesces ten adds of a key waiting behind busy workers into one reconcile", async () => {
    const g = gated();
    const q = queue({ workers: 1, reconcile: g.reconcile });
    q.add("busy");
    for (let i = 0; i < 10; i++) q.add("a");
    expect(q.depth).toBe(1);
    g.release("busy");
    await flush();
    g.release("a");
    await q.idle();
    expect(g.runs("a")).toBe(1);
  });

  it("runs different keys in parallel, up to `workers`", async () => {
    const g = gated();
    const q = queue({ workers: 2, reconcile: g.reconcile });
    q.add("a");
    q.add("b");
    q.add("c");
    expect(q.running).toBe(2);
    expect(q.depth).toBe(1);
    expect(g.runs("c")).toBe(0);
    g.release("a");
    await flush();
    expect(g.runs("c")).toBe(1);
    expect(q.running).toBe(2);
    g.release("b");
    g.release("c");
    await q.idle();
  });

  it("idle() resolves at once when nothing is queued or running", async () => {
    await expect(queue({ reconcile: async () => undefined }).idle()).resolves.toBeUndefined();
  });

  it("idle() resolves only once the running reconcile ends", async () => {
    const g = gated();
    const q = queue({ reconcile: g.reconcile });
    q.add("a");
    let idle = false;
    void q.idle().then(() => (idle = true));
    await flush();
    expect(idle).toBe(false);
    g.release("a");
    await flush();
    expect(idle).toBe(true);
  });

  it("stop() prevents a key added during its run from running again", async () => {
    const g = gated();
    const q = queue({ reconcile: g.reconcile });
    q.add("a");
    q.add("a");
    q.stop();
    g.release("a");
    await flush();
    q.add("a");
    await flush();
    expect(g.runs("a")).toBe(1);
  });
});

describe("WorkQueue on Node's own timers", () => {
  it("addAfter with a delay past 2^31 - 1 ms does not fire after 1 ms (Node's overflow)", async () => {
    let runs = 0;
    const q = queue({ reconcile: async () => void runs++ });
    q.addAfter("a", 2 ** 40);
    await new Promise((r) => setTimeout(r, 50));
    expect(runs).toBe(0);
    q.stop();
  });
});

describe("WorkQueue in time (fake timers)", () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  /** A reconcile that records when it ran and answers from a script (throws on "fail"). */
  function scripted(outcomes: ("fail" | "ok" | ReconcileResult)[]) {
    const ranAt: number[] = [];
    const reconcile = async (): Promise<ReconcileResult> => {
      ranAt.push(Date.now());
      const outcome = outcomes.shift() ?? "ok";
      if (outcome === "fail") throw new Error("boom");
      return outcome === "ok" ? undefined : outcome;
    };
    return { reconcile, ranAt };
  }

  it("retries a failure after baseDelayMs * 2^(n-1), capped at maxDelayMs", async () => {
    const delays: number[] = [];
    const s = scripted(Array(7).fill("fail"));
    const q = queue({
      reconcile: s.reconcile,
      baseDelayMs: 100,
      maxDelayMs: 1000,
      onError: (_k, _e, ms) => delays.push(ms),
    });
    const start = Date.now();
    q.add("a");
    await jest.advanceTimersByTimeAsync(99);
    expect(s.ranAt).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(s.ranAt).toHaveLength(2);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(delays.slice(0, 6)).toEqual([100, 200, 400, 800, 1000, 1000]);
    expect(s.ranAt.slice(0, 7).map((t) => t - start)).toEqual([0, 100, 300, 700, 1500, 2500, 3500]);
    q.stop();
  });

  it("addRateLimited returns the growing, capped delay and counts failures", () => {
    const q = queue({ reconcile: async () => undefined, baseDelayMs: 50, maxDelayMs: 300 });
    expect([1, 2, 3, 4, 5].map(() => q.addRateLimited("a"))).toEqual([50, 100, 200, 300, 300]);
    expect(q.failures("a")).toBe(5);
    expect(q.failures("b")).toBe(0);
    q.stop();
  });

  it("a success forgets the key's failures, so the next failure retries after the base delay", async () => {
    const delays: number[] = [];
    const s = scripted(["fail", "fail", "ok", "fail", "ok"]);
    const q = queue({ reconcile: s.reconcile, baseDelayMs: 100, onError: (_k, _e, ms) => delays.push(ms) });
    q.add("a");
    await jest.advanceTimersByTimeAsync(300);
    expect(s.ranAt).toHaveLength(3);
    expect(q.failures("a")).toBe(0);
    q.add("a");
    await jest.advanceTimersByTimeAsync(0);
    expect(delays).toEqual([100, 200, 100]);
    q.stop();
  });

  it("runs a key again requeueAfterMs after a reconcile asks for it", async () => {
    const s = scripted([{ requeueAfterMs: 5000 }, "ok"]);
    const q = queue({ reconcile: s.reconcile });
    q.add("a");
    await jest.advanceTimersByTimeAsync(4999);
    expect(s.ranAt).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(s.ranAt).toHaveLength(2);
    await jest.advanceTimersByTimeAsync(60_000);
    expect(s.ranAt).toHaveLength(2);
  });

  it("addAfter keeps the earliest pending wake-up of a key", async () => {
    const s = scripted([]);
    const q = queue({ reconcile: s.reconcile });
    const start = Date.now();
    q.addAfter("a", 5000);
    q.addAfter("a", 1000);
    q.addAfter("a", 3000);
    await jest.advanceTimersByTimeAsync(10_000);
    expect(s.ranAt.map((t) => t - start)).toEqual([1000]);
  });

  it("addAfter with a delay past Node's timer limit does not fire early: it waits the one-day cap", async () => {
    const s = scripted([]);
    const q = queue({ reconcile: s.reconcile });
    const start = Date.now();
    const setTimer = jest.spyOn(global, "setTimeout");
    // 2100-01-01 from 2026: Node's setTimeout would overflow and fire after 1 ms (jest's fake does not).
    q.addAfter("a", Date.parse("2100-01-01T00:00:00Z") - Date.parse("2026-03-01T00:00:00Z"));
    q.addAfter("b", 2 ** 31);
    q.addAfter("c", Infinity);
    q.addAfter("d", NaN);
    const delays = setTimer.mock.calls.map(([, ms]) => ms);
    setTimer.mockRestore();
    expect(delays).toEqual(Array(4).fill(MAX_REQUEUE_DELAY_MS));
    expect(MAX_REQUEUE_DELAY_MS).toBeLessThan(2 ** 31 - 1);
    await jest.advanceTimersByTimeAsync(MAX_REQUEUE_DELAY_MS - 1);
    expect(s.ranAt).toEqual([]);
    await jest.advanceTimersByTimeAsync(1);
    expect(s.ranAt.map((t) => t - start)).toEqual(Array(4).fill(MAX_REQUEUE_DELAY_MS));
    q.stop();
  });

  it("does not spin on a reconcile that keeps asking for a far deadline: one look a day", async () => {
    const far = Date.parse("2100-01-01T00:00:00Z");
    const runs: number[] = [];
    const q = queue({
      reconcile: async () => {
        runs.push(Date.now());
        return { requeueAfterMs: far - Date.now() };
      },
    });
    q.add("a");
    await jest.advanceTimersByTimeAsync(10 * MAX_REQUEUE_DELAY_MS);
    expect(runs).toHaveLength(11);
    q.stop();
  });

  it("stop() cancels pending wake-ups and ignores later adds", async () => {
    const s = scripted([]);
    const q = queue({ reconcile: s.reconcile });
    q.addAfter("a", 1000);
    q.stop();
    q.add("b");
    q.addAfter("c", 10);
    await jest.advanceTimersByTimeAsync(5000);
    expect(s.ranAt).toHaveLength(0);
  });
});

describe("WorkQueue: a key that changed during its own reconcile", () => {
  it("runs again before keys that were waiting, a few times in a row at most", async () => {
    const order: string[] = [];
    const gates = new Map<string, () => void>();
    const q = new WorkQueue({
      name: "test",
      workers: 1,
      reconcile: (key) => {
        order.push(key);
        return new Promise<void>((resolve) => gates.set(key, resolve));
      },
    });
    const finish = async (key: string) => {
      gates.get(key)!();
      await new Promise((r) => setImmediate(r));
    };
    q.add("hot");
    q.add("a");
    q.add("b");
    // "hot" changes while it runs, four times over: three jumps to the front, then the back.
    for (let i = 0; i < 4; i++) {
      q.add("hot");
      await finish("hot");
    }
    await finish("a");
    await finish("b");
    await finish("hot");
    await q.idle();
    expect(order).toEqual(["hot", "hot", "hot", "hot", "a", "b", "hot"]);
  });
});

describe("WorkQueue: workers only keys added first may take (decision 0034)", () => {
  it("runs a key added first at once while every ordinary worker is busy; an ordinary key never takes the extra one", async () => {
    const g = gated();
    const q = queue({ workers: 2, extraForFirst: 1, reconcile: g.reconcile });
    q.add("s1");
    q.add("s2");
    q.add("s3");
    expect(q.running).toBe(2);
    q.addFirst("ready");
    expect(g.runs("ready")).toBe(1);
    expect(q.running).toBe(3);
    // The extra worker frees; the ordinary key waiting still does not take it.
    g.release("ready");
    await flush();
    expect(q.running).toBe(2);
    expect(g.runs("s3")).toBe(0);
    // Two keys added first: one takes the extra worker, the other waits for it.
    q.addFirst("r1");
    q.addFirst("r2");
    expect(q.running).toBe(3);
    expect(g.runs("r1") + g.runs("r2")).toBe(1);
    const took = g.runs("r2") ? "r2" : "r1";
    g.release(took);
    await flush();
    expect(g.runs("r1") + g.runs("r2")).toBe(2);
    // An ordinary worker frees while a key added first runs on the extra one: the ordinary key takes it.
    g.release("s1");
    await flush();
    expect(g.runs("s3")).toBe(1);
    expect(q.running).toBe(3);
    for (const k of ["s2", "s3", took === "r1" ? "r2" : "r1"]) g.release(k);
    await q.idle();
    expect(q.running).toBe(0);
  });

  it("a key added first takes an ordinary worker when one is free, and the extra one stays open", async () => {
    const g = gated();
    const q = queue({ workers: 2, extraForFirst: 1, reconcile: g.reconcile });
    q.addFirst("r1");
    q.add("s1");
    expect(q.running).toBe(2);
    // r1 counts against the extra worker, so one ordinary worker is still free for s2.
    q.add("s2");
    expect(g.runs("s2")).toBe(1);
    q.add("s3");
    expect(g.runs("s3")).toBe(0);
    for (const k of ["r1", "s1", "s2"]) g.release(k);
    await flush();
    g.release("s3");
    await q.idle();
  });

  it("a key added first behind a requeued key still takes the extra worker", async () => {
    const g = gated();
    const q = queue({ workers: 1, extraForFirst: 1, reconcile: g.reconcile });
    q.add("hot");
    q.add("hot"); // changed during its run: requeued at the front when the run ends
    q.add("s1");
    g.release("hot");
    await flush();
    expect(g.runs("hot")).toBe(2);
    q.add("hot"); // requeued at the front again, ahead of any key added first meanwhile
    q.addFirst("ready");
    expect(g.runs("ready")).toBe(1);
    expect(q.running).toBe(2);
    g.release("ready");
    g.release("hot");
    await flush();
    g.release("hot");
    await flush();
    g.release("s1");
    await q.idle();
    expect(g.runs("s1")).toBe(1);
  });

  it("with no extra workers, a key added first waits for an ordinary worker like any other", async () => {
    const g = gated();
    const q = queue({ workers: 1, reconcile: g.reconcile });
    q.add("s1");
    q.addFirst("ready");
    expect(g.runs("ready")).toBe(0);
    g.release("s1");
    await flush();
    expect(g.runs("ready")).toBe(1);
    g.release("ready");
    await q.idle();
  });
});
