import { KeyedRateLimiter, TokenBucket } from "../../lib/ratelimit";

// The bucket starts its clock at construction (Date.now()); the fake clock pins that instant so
// every `now` the tests pass is relative to it.
const T0 = 1_700_000_000_000;

describe("TokenBucket.reserve", () => {
  beforeEach(() => jest.useFakeTimers({ now: T0 }));
  afterEach(() => jest.useRealTimers());

  it("lets the first `burst` reservations through without waiting", () => {
    const b = new TokenBucket(10, 3);
    expect([b.reserve(T0), b.reserve(T0), b.reserve(T0)]).toEqual([0, 0, 0]);
  });

  it("makes the next reservation wait 1000/qps ms, and the one after twice that", () => {
    const b = new TokenBucket(10, 3);
    for (let i = 0; i < 3; i++) b.reserve(T0);
    expect(b.reserve(T0)).toBe(100);
    expect(b.reserve(T0)).toBe(200);
  });

  it("refills at qps tokens per second", () => {
    const b = new TokenBucket(10, 3);
    for (let i = 0; i < 3; i++) b.reserve(T0);
    expect(b.reserve(T0 + 100)).toBe(0);
    expect(b.reserve(T0 + 100)).toBe(100);
  });

  it("refills no further than burst, however long it stays unused", () => {
    const b = new TokenBucket(10, 3);
    const later = T0 + 3_600_000;
    expect([b.reserve(later), b.reserve(later), b.reserve(later)]).toEqual([0, 0, 0]);
    expect(b.reserve(later)).toBe(100);
  });

  it("is not drained by a now earlier than the last one (a wall clock stepped back)", () => {
    const b = new TokenBucket(10, 3);
    expect(b.reserve(T0)).toBe(0);
    expect(b.reserve(T0 - 60_000)).toBe(0);
  });
});

// Finish before start (decision 0020): a saturated bucket serves a finishing write before every
// start already waiting, and each lane in arrival order.
describe("TokenBucket.take", () => {
  beforeEach(() => jest.useFakeTimers({ now: T0 }));
  afterEach(() => jest.useRealTimers());

  const served: string[] = [];
  beforeEach(() => served.splice(0));
  const take = (b: TokenBucket, lane: "finish" | "start", id: string) =>
    b.take(lane).then((waited) => {
      served.push(id);
      return waited;
    });

  it("serves a finishing write before the starts queued ahead of it", async () => {
    const b = new TokenBucket(10, 1);
    const all = [take(b, "start", "s0"), take(b, "start", "s1"), take(b, "start", "s2"), take(b, "start", "s3")];
    await Promise.resolve();
    all.push(take(b, "finish", "f0"), take(b, "start", "s4"), take(b, "finish", "f1"));
    await jest.advanceTimersByTimeAsync(1000);
    await Promise.all(all);
    expect(served).toEqual(["s0", "f0", "f1", "s1", "s2", "s3", "s4"]);
  });

  it("keeps the rate: one token per 1000/qps ms once the burst is spent", async () => {
    const b = new TokenBucket(10, 2);
    const all = Array.from({ length: 6 }, (_, i) => take(b, "start", `s${i}`));
    await jest.advanceTimersByTimeAsync(199);
    expect(served).toEqual(["s0", "s1", "s2"]);
    await jest.advanceTimersByTimeAsync(201);
    expect(served).toEqual(["s0", "s1", "s2", "s3", "s4", "s5"]);
    const waited = await Promise.all(all);
    expect(waited.slice(0, 2)).toEqual([0, 0]);
    expect(waited[5]).toBeGreaterThanOrEqual(400);
  });

  it("lets a finishing write through at once when a token is at hand, starts waiting or not", async () => {
    const b = new TokenBucket(10, 3);
    await take(b, "start", "s0");
    expect(await take(b, "finish", "f0")).toBe(0);
    expect(b.queued).toEqual({ finish: 0, start: 0 });
  });

  it("with qps 0 sets no client-side limit at all", async () => {
    const b = new TokenBucket(0, 0);
    expect(b.unlimited).toBe(true);
    const waited = await Promise.all(Array.from({ length: 1000 }, () => b.take("start")));
    expect(waited.every((w) => w === 0)).toBe(true);
  });
});

describe("KeyedRateLimiter (decision 0042)", () => {
  it("lets each key spend its own burst, then tells how long to wait, refilling at its rate", () => {
    const l = new KeyedRateLimiter(2, 3);
    const t = 1_000_000;
    expect([0, 1, 2].map(() => l.tryTake("a", t))).toEqual([0, 0, 0]);
    expect(l.tryTake("a", t)).toBe(500); // one token at 2/s: half a second away
    // Another key is untouched by a's flood.
    expect(l.tryTake("b", t)).toBe(0);
    expect(l.tryTake("a", t + 500)).toBe(0);
    expect(l.tryTake("a", t + 500)).toBeGreaterThan(0);
    // A clock stepped back adds nothing.
    expect(l.tryTake("a", t - 10_000)).toBeGreaterThan(0);
  });

  it("holds at most maxKeys keys, dropping the least recently used", () => {
    const l = new KeyedRateLimiter(1, 1, 2);
    l.tryTake("a", 0);
    l.tryTake("b", 0);
    l.tryTake("a", 0); // a is now the most recent
    l.tryTake("c", 0);
    expect(l.size).toBe(2);
    // b was dropped: it starts again with a full bucket; a was kept, and is still empty.
    expect(l.tryTake("b", 0)).toBe(0);
    expect(l.tryTake("c", 0)).toBeGreaterThan(0);
  });
});
