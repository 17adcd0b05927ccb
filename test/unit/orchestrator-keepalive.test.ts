// The Orchestrator's lease on its own (orchestrator/workspaces/keepalive.ts): the interval from the idle timeout,
// the jitter's bounds, and the renewal actor under jest's fake timers. The lease inside a whole
// workspace (from the CR's write, through every stage, on a restore) is in orchestrator-lifecycle.
// Last, the idle-timeout range: the API, admission and the CRD read the same bounds.
import { readFileSync } from "node:fs";
import { createActor } from "xstate";
import {
  IDLE_TIMEOUT_MAX_MS,
  IDLE_TIMEOUT_MIN_MS,
  IDLE_TIMEOUT_RANGE,
  idleTimeoutInRange,
} from "../../api/crd/sources/sandbox";
import { sandboxViolations } from "../../capabilities/rules/sandbox-rules";
import { parseGoDuration } from "../../lib/duration";
import { parseCreateBody } from "../../api/orchestrator-schemas";
import {
  DEFAULT_LEASE_INTERVAL_MS,
  MIN_RENEWAL_INTERVAL_MS,
  leaseDelay,
  leaseLogic,
  leaseSettings,
  renewalIntervalMs,
} from "../../orchestrator/workspaces/keepalive";
import type { SandboxGateway } from "../../orchestrator/workspaces/sandbox-gateway";

const T0 = Date.parse("2026-03-01T12:00:00.000Z");
const S = 1000;
const MIN = 60 * S;
const H = 60 * MIN;

describe("renewalIntervalMs: min(configured, idleTimeout / 3)", () => {
  it.each([
    ["1m (the floor)", "1m", 5 * MIN, 20 * S],
    ["90s", "90s", 5 * MIN, 30 * S],
    ["15m", "15m", 5 * MIN, 5 * MIN],
    ["none: the CRD default 30m", undefined, 5 * MIN, 5 * MIN],
    ["none, with a configured 1h", undefined, H, 10 * MIN],
    ["168h (the ceiling)", "168h", 5 * MIN, 5 * MIN],
    ["168h, with a configured 1h", "168h", H, H],
    ["past the ceiling: counts as 168h", "1000h", 100 * H, 56 * H],
    ["no Go duration: counts as the floor", "8d", 5 * MIN, 20 * S],
    ["0s (below any floor): one second", "0s", 5 * MIN, MIN_RENEWAL_INTERVAL_MS],
  ])("%s", (_what, idleTimeout, configured, expected) => {
    expect(renewalIntervalMs(configured, idleTimeout)).toBe(expected);
  });

  it("never lets a jittered renewal, nor a retry, come later than the idle timeout allows", () => {
    const idles = ["1m", "61s", "90s", "5m", "15m", "30m", "1h", "24h", "168h"];
    const draws = [0, 0.5, 0.999999];
    for (const configured of [S, MIN, 5 * MIN, H, 24 * H]) {
      for (const idle of idles) {
        const idleMs = renewalIntervalMs(Infinity, idle) * 3;
        const lease = leaseSettings({ intervalMs: configured }, idle);
        for (const r of draws) {
          for (const first of [true, false]) {
            const gap = leaseDelay(lease.intervalMs, lease.jitter, () => r, first);
            // At most 1.2 x a third of the idle timeout: 40% of it, leaving room for retries.
            expect(gap).toBeLessThanOrEqual(Math.ceil(0.4 * idleMs));
          }
        }
        // A failed renewal is tried again within min(retryMs, the next delay): no later.
        expect(lease.retryMs).toBeLessThanOrEqual(lease.intervalMs);
      }
    }
  });

  it("holds the bound across the whole CRD range", () => {
    for (let ms = IDLE_TIMEOUT_MIN_MS; ms <= IDLE_TIMEOUT_MAX_MS; ms = Math.ceil(ms * 1.37)) {
      const interval = renewalIntervalMs(DEFAULT_LEASE_INTERVAL_MS, `${ms}ms`);
      expect(interval).toBeLessThanOrEqual(ms / 3);
      expect(interval).toBeLessThanOrEqual(DEFAULT_LEASE_INTERVAL_MS);
      expect(leaseDelay(interval, 0.2, () => 0.999999)).toBeLessThan(ms / 2);
    }
  });
});

describe("leaseSettings", () => {
  it("fills the defaults: 5m, 20% jitter, a 30 s retry", () => {
    const s = leaseSettings();
    expect(s).toMatchObject({ intervalMs: 5 * MIN, jitter: 0.2, retryMs: 30 * S });
  });

  it("keeps the retry within the interval and the jitter within [0, 1]", () => {
    expect(leaseSettings({ retryMs: MIN }, "1m")).toMatchObject({ intervalMs: 20 * S, retryMs: 20 * S });
    expect(leaseSettings({ jitter: 3 }).jitter).toBe(1);
    expect(leaseSettings({ jitter: -1 }).jitter).toBe(0);
  });
});

describe("leaseDelay", () => {
  it("stays within its bounds for any draw", () => {
    for (let k = 0; k < 1000; k++) {
      const first = leaseDelay(5 * MIN, 0.2, Math.random, true);
      expect(first).toBeGreaterThanOrEqual(4 * MIN);
      expect(first).toBeLessThanOrEqual(6 * MIN);
      const later = leaseDelay(5 * MIN, 0.2, Math.random);
      expect(later).toBeGreaterThanOrEqual(5 * MIN);
      expect(later).toBeLessThanOrEqual(6 * MIN);
    }
    expect(leaseDelay(5 * MIN, 0.2, () => 0.5, true)).toBe(5 * MIN);
    expect(leaseDelay(5 * MIN, 0, () => 0)).toBe(5 * MIN);
  });
});

describe("the renewal actor", () => {
  beforeEach(() => jest.useFakeTimers({ now: T0 }));
  afterEach(() => jest.useRealTimers());

  /** A gateway that answers present and records each renewal's time. */
  function gateway() {
    const renewals: number[] = [];
    const p: SandboxGateway = {
      place: () => Promise.reject(new Error("unused")),
      provision: () => Promise.reject(new Error("unused")),
      attach: () => Promise.reject(new Error("unused")),
      destroy: () => Promise.reject(new Error("unused")),
      continuity: async () => ({ kind: "present" }),
      renew: async () => void renewals.push(Date.now()),
    };
    return { p, renewals };
  }

  /** Runs the actor for `forMs` with the configured 5m and random draws; answers the gaps. */
  async function gaps(idleTimeout: string | undefined, forMs: number): Promise<number[]> {
    const { p, renewals } = gateway();
    const settings = leaseSettings({ intervalMs: 5 * MIN, random: Math.random }, idleTimeout);
    const actor = createActor(leaseLogic, { input: { ...settings, name: "ws-1", gateway: p, immediate: false } });
    actor.start();
    await jest.advanceTimersByTimeAsync(forMs);
    actor.stop();
    return renewals.map((t, k) => t - (k === 0 ? T0 : renewals[k - 1]));
  }

  it("idleTimeout 1m: renews every 20 s +/- 20%, never as late as the idle timeout", async () => {
    const g = await gaps("1m", 30 * MIN);
    expect(g.length).toBeGreaterThanOrEqual(70);
    expect(g[0]).toBeGreaterThanOrEqual(16 * S);
    for (const gap of g) {
      expect(gap).toBeGreaterThanOrEqual(16 * S);
      expect(gap).toBeLessThanOrEqual(24 * S);
    }
  });

  it.each([
    ["168h", "168h"],
    ["the default (30m)", undefined],
  ])("idleTimeout %s: renews at the configured 5m (+/- 20%)", async (_what, idleTimeout) => {
    const g = await gaps(idleTimeout, 2 * H);
    expect(g.length).toBeGreaterThanOrEqual(19);
    expect(g[0]).toBeGreaterThanOrEqual(4 * MIN);
    for (const gap of g) {
      expect(gap).toBeGreaterThanOrEqual(4 * MIN);
      expect(gap).toBeLessThanOrEqual(6 * MIN);
    }
  });
});

describe("the idle-timeout range, one statement for the API, admission and the lease", () => {
  const body = (idleTimeout: string) => ({ image: "h:1", branch: "b", idleTimeout });
  const refusal = (idleTimeout: string) => {
    const r = parseCreateBody(body(idleTimeout));
    if (r.ok) throw new Error(`expected ${idleTimeout} refused`);
    return r.message;
  };

  it.each(["1m", "60s", "90s", "30m", "168h", "167h60m"])("the API accepts %s", (idleTimeout) => {
    expect(parseCreateBody(body(idleTimeout)).ok).toBe(true);
  });

  it.each(["59s", "0s", "168h1s", "192h"])("the API refuses %s, naming idleTimeout, the range and a fix", (t) => {
    const m = refusal(t);
    expect(m).toMatch(/^idleTimeout: idleTimeout must be between 1m and 168h \(7 days\)/);
    expect(m).toContain('such as "30m"');
    expect(m.split("; ")).toHaveLength(1);
  });

  it("the API refuses 8d as no Go duration (Go has no day unit), naming idleTimeout", () => {
    expect(refusal("8d")).toBe('idleTimeout: idleTimeout must be a Go duration such as "30m" or "1h30m"');
  });

  it("admission and the API agree on every sample, and every accepted one renews in time", () => {
    const samples = ["1ms", "1s", "59s", "59.999s", "1m", "60s", "90s", "5m", "30m", "24h", "168h", "168h1ms", "169h"];
    for (const t of samples) {
      const api = parseCreateBody(body(t)).ok;
      const admitted = sandboxViolations({ image: "h:1", idleTimeout: t }).length === 0;
      expect([t, admitted]).toEqual([t, api]);
      expect(idleTimeoutInRange(t)).toBe(api);
      if (api) expect(renewalIntervalMs(DEFAULT_LEASE_INTERVAL_MS, t) * 1.2).toBeLessThan(parseGoDuration(t)! / 2);
    }
  });

  it("the CRD says the range in spec.idleTimeout's description", () => {
    const crd = readFileSync("api/crd/generated/sandboxes.core.jr2.dev.yaml", "utf8");
    expect(crd).toContain(`A Go duration ${IDLE_TIMEOUT_RANGE}`);
  });
});
