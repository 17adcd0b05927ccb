import { leaseOf } from "../../capabilities/sandbox/lease";

const CREATED = "2026-03-01T12:00:00Z";
const at = (iso: string) => Date.parse(iso);
const MIN = 60_000;

const sandbox = (opts: { keepalive?: string; idleTimeout?: string; created?: string | Date } = {}) => ({
  metadata: {
    creationTimestamp: opts.created ?? CREATED,
    ...(opts.keepalive !== undefined ? { annotations: { "jr2.dev/keepalive": opts.keepalive } } : {}),
  },
  spec: opts.idleTimeout !== undefined ? { idleTimeout: opts.idleTimeout } : {},
});

describe("leaseOf", () => {
  it("is creation + 30m when there is no keepalive and no idleTimeout", () => {
    expect(leaseOf(sandbox()).deadline).toBe(at(CREATED) + 30 * MIN);
  });

  it("adds spec.idleTimeout, read as a Go duration", () => {
    expect(leaseOf(sandbox({ idleTimeout: "1h30m" })).deadline).toBe(at(CREATED) + 90 * MIN);
  });

  it("accepts a creationTimestamp given as a Date", () => {
    expect(leaseOf(sandbox({ created: new Date(CREATED) })).deadline).toBe(at(CREATED) + 30 * MIN);
  });

  it("counts from a keepalive later than creation", () => {
    const keepalive = "2026-03-01T13:00:00Z";
    const lease = leaseOf(sandbox({ keepalive, idleTimeout: "10m" }));
    expect(lease.deadline).toBe(at(keepalive) + 10 * MIN);
    expect(lease).not.toHaveProperty("invalidKeepalive");
  });

  it("counts from creation when the keepalive is older than creation", () => {
    const lease = leaseOf(sandbox({ keepalive: "2026-03-01T11:00:00Z", idleTimeout: "10m" }));
    expect(lease.deadline).toBe(at(CREATED) + 10 * MIN);
  });

  it("treats an unparsable keepalive as absent and reports it in invalidKeepalive", () => {
    const lease = leaseOf(sandbox({ keepalive: "yesterday", idleTimeout: "10m" }));
    expect(lease.deadline).toBe(at(CREATED) + 10 * MIN);
    expect(lease.invalidKeepalive).toBe("yesterday");
  });
});
