import { KeepaliveSightings, leaseOf } from "../../capabilities/sandbox/lease";

const CREATED = "2026-03-01T12:00:00Z";
const at = (iso: string) => Date.parse(iso);
const MIN = 60_000;
const DAY = 24 * 60 * MIN;
/** Two hours after creation: every keepalive below is in its past unless a test says otherwise. */
const NOW = at("2026-03-01T14:00:00Z");

const sandbox = (opts: { keepalive?: string; idleTimeout?: string; created?: string | Date } = {}) => ({
  metadata: {
    creationTimestamp: opts.created ?? CREATED,
    ...(opts.keepalive !== undefined ? { annotations: { "jr2.dev/keepalive": opts.keepalive } } : {}),
  },
  spec: opts.idleTimeout !== undefined ? { idleTimeout: opts.idleTimeout } : {},
});

describe("leaseOf", () => {
  it("is creation + 30m when there is no keepalive and no idleTimeout", () => {
    expect(leaseOf(sandbox(), NOW).deadline).toBe(at(CREATED) + 30 * MIN);
  });

  it("adds spec.idleTimeout, read as a Go duration", () => {
    expect(leaseOf(sandbox({ idleTimeout: "1h30m" }), NOW).deadline).toBe(at(CREATED) + 90 * MIN);
  });

  it("accepts a creationTimestamp given as a Date", () => {
    expect(leaseOf(sandbox({ created: new Date(CREATED) }), NOW).deadline).toBe(at(CREATED) + 30 * MIN);
  });

  it("counts from a keepalive later than creation", () => {
    const keepalive = "2026-03-01T13:00:00Z";
    const lease = leaseOf(sandbox({ keepalive, idleTimeout: "10m" }), NOW);
    expect(lease.deadline).toBe(at(keepalive) + 10 * MIN);
    expect(lease).not.toHaveProperty("invalidKeepalive");
  });

  it("counts from creation when the keepalive is older than creation", () => {
    const lease = leaseOf(sandbox({ keepalive: "2026-03-01T11:00:00Z", idleTimeout: "10m" }), NOW);
    expect(lease.deadline).toBe(at(CREATED) + 10 * MIN);
  });

  it("counts a keepalive in the future as now", () => {
    const lease = leaseOf(sandbox({ keepalive: "2026-03-11T14:00:00Z", idleTimeout: "1m" }), NOW);
    expect(lease.deadline).toBe(NOW + MIN);
    expect(lease).not.toHaveProperty("invalidKeepalive");
  });

  it("gives a keepalive of 2100 a deadline within the idle timeout of now, and reaps it once unrenewed", () => {
    const s = sandbox({ keepalive: "2100-01-01T00:00:00Z", idleTimeout: "1m" });
    const seen = new KeepaliveSightings();
    const look = (now: number) => leaseOf(s, now, seen.seenAt("ns/sb", "2100-01-01T00:00:00Z", now));
    expect(look(NOW).deadline).toBe(NOW + MIN);
    // The requeue at that deadline: the same annotation, first seen a minute ago, no longer holds it.
    expect(look(NOW + MIN).deadline).toBe(NOW + MIN);
    expect(look(NOW + 10 * MIN).deadline).toBeLessThanOrEqual(NOW + 10 * MIN);
  });

  it("counts a future keepalive from when it was seen, not from each later look", () => {
    const s = sandbox({ keepalive: "2026-03-11T14:00:00Z", idleTimeout: "10m" });
    expect(leaseOf(s, NOW + 5 * MIN, NOW).deadline).toBe(NOW + 10 * MIN);
  });

  it("counts a stored idleTimeout past the 168h ceiling as 168h", () => {
    expect(leaseOf(sandbox({ idleTimeout: "100000h" }), NOW).deadline).toBe(at(CREATED) + 7 * DAY);
    expect(leaseOf(sandbox({ idleTimeout: `${"9".repeat(400)}h` }), NOW).deadline).toBe(at(CREATED) + 7 * DAY);
  });

  it("counts a stored idleTimeout that is no Go duration as the default 30m", () => {
    expect(leaseOf(sandbox({ idleTimeout: "a week" }), NOW).deadline).toBe(at(CREATED) + 30 * MIN);
  });

  it("never gives a deadline past now + 168h, whatever the annotation, timeout or creation", () => {
    const cases = [
      sandbox({ keepalive: "2100-01-01T00:00:00Z", idleTimeout: "100000h" }),
      sandbox({ keepalive: "9999-12-31T23:59:59Z", idleTimeout: "168h" }),
      sandbox({ created: "2100-01-01T00:00:00Z", idleTimeout: "168h" }),
      sandbox({ created: "not a time", idleTimeout: "168h" }),
    ];
    for (const s of cases) {
      const { deadline } = leaseOf(s, NOW);
      expect(Number.isFinite(deadline)).toBe(true);
      expect(deadline).toBeLessThanOrEqual(NOW + 7 * DAY);
    }
  });

  it("treats an unparsable keepalive as absent and reports it in invalidKeepalive", () => {
    const lease = leaseOf(sandbox({ keepalive: "yesterday", idleTimeout: "10m" }), NOW);
    expect(lease.deadline).toBe(at(CREATED) + 10 * MIN);
    expect(lease.invalidKeepalive).toBe("yesterday");
  });
});

describe("KeepaliveSightings", () => {
  it("remembers when each key's value was first seen, and starts again when it changes", () => {
    const seen = new KeepaliveSightings();
    expect(seen.seenAt("a", "v1", 100)).toBe(100);
    expect(seen.seenAt("a", "v1", 200)).toBe(100);
    expect(seen.seenAt("b", "v1", 300)).toBe(300);
    expect(seen.seenAt("a", "v2", 400)).toBe(400);
    expect(seen.seenAt("a", "v2", 500)).toBe(400);
  });

  it("keeps nothing for a Sandbox without a keepalive, nor for one forgotten", () => {
    const seen = new KeepaliveSightings();
    seen.seenAt("a", "v1", 100);
    expect(seen.seenAt("a", undefined, 200)).toBe(200);
    expect(seen.size).toBe(0);
    seen.seenAt("b", "v1", 300);
    seen.forget("b");
    expect(seen.size).toBe(0);
    expect(seen.seenAt("b", "v1", 400)).toBe(400);
  });
});
