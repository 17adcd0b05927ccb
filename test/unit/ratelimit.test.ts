import { TokenBucket } from "../../lib/ratelimit";

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
