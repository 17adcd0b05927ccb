// The Orchestrator's side of the keepalive lease (decision 0014), beside the operator's side in
// capabilities/sandbox/lease.ts: the operator alone decides when a Sandbox is abandoned (its
// leaseOf); this side only writes `jr2.dev/keepalive`, often enough that a live workspace is never
// reaped. Here: how often (the interval from the idle timeout, the jitter) and the renewal actor,
// an xstate callback actor the workspace lifecycle (lifecycle.ts) spawns once the Sandbox is
// written. Pure: the world is the SandboxGateway, time an injected timer pair.
import { fromCallback } from "xstate";
import { DEFAULT_IDLE_TIMEOUT } from "../../api/wire";
import { IDLE_TIMEOUT_MAX_MS, IDLE_TIMEOUT_MIN_MS } from "../../api/crd/sources/sandbox";
import { parseGoDuration } from "../../lib/duration";
import type { Loss } from "../../api/orchestrator-schemas";
import type { Continuity, SandboxGateway } from "./sandbox-gateway";
import { absentLoss } from "./provision-rules";

/** The timers the lease schedules with; the default reads the globals at call time, so jest's fake
 * timers apply. */
export type Timers = { set(fn: () => void, ms: number): unknown; clear(handle: unknown): void };
export const globalTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export type LeaseOptions = {
  /** The configured renewal interval (decision 0014, JR2_LEASE_INTERVAL), default
   * 5 min. A workspace renews at renewalIntervalMs(this, its idle timeout): never less often than a
   * third of the idle timeout. */
  intervalMs?: number;
  /** Each delay is the interval times 1 +/- this (default 0.2, at most 1), so a thousand
   * workspaces created together do not renew together. */
  jitter?: number;
  /** After a failed renew, the next try comes this soon (default 30 s, never later than the
   * interval): a lapsed lease is what lets the operator reap. */
  retryMs?: number;
  /** A number in [0, 1), as Math.random. */
  random?: () => number;
  timers?: Timers;
};

export const DEFAULT_LEASE_INTERVAL_MS = 5 * 60_000;
export const DEFAULT_LEASE_JITTER = 0.2;
const DEFAULT_RENEW_RETRY_MS = 30_000;
/** No workspace renews more often than this, whatever its idle timeout says. */
export const MIN_RENEWAL_INTERVAL_MS = 1_000;

/**
 * How often one workspace renews its keepalive: the configured interval, but never longer than a
 * third of the Sandbox's idle timeout, so any idle timeout the CRD allows stays alive.
 *
 *     interval = max(1 s, min(configuredMs, idleTimeout / 3))
 *
 * A third leaves room: with the jitter (a delay is at most (1 + jitter) x interval, jitter <= 1)
 * the gap between two renewals is at most 2/3 of the idle timeout (0.4 of it at the default 20%),
 * and a failed renewal is retried within min(30 s, interval). So a 1m Sandbox renews about every
 * 20 s, while the default 30m and anything up to the 7d ceiling renew at the configured interval
 * (5m) unless that is longer than a third of it.
 *
 * `idleTimeout` is the Sandbox's spec.idleTimeout: the CRD default (30m) when none was given; one
 * past the CRD's ceiling counts as the ceiling (the operator never waits longer); text that is no
 * Go duration counts as the CRD's floor (1m), since renewing too often is the harmless mistake.
 */
export function renewalIntervalMs(configuredMs: number, idleTimeout: string = DEFAULT_IDLE_TIMEOUT): number {
  const idleMs = Math.min(parseGoDuration(idleTimeout) ?? IDLE_TIMEOUT_MIN_MS, IDLE_TIMEOUT_MAX_MS);
  return Math.max(MIN_RENEWAL_INTERVAL_MS, Math.min(configuredMs, Math.floor(idleMs / 3)));
}

/**
 * One lease delay. The first, from the write (or a restore), is the interval +/- `jitter` of
 * itself, which spreads a burst of workspaces. Every later one is the interval plus up to `jitter`
 * of it, never less: so a workspace never renews more than once an interval, and L workspaces
 * write at most L / interval keepalives a second, whatever the draws (decision 0011).
 */
export function leaseDelay(intervalMs: number, jitter: number, random: () => number, first = false): number {
  const spread = first ? 2 * random() - 1 : random();
  return Math.round(intervalMs * (1 + jitter * spread));
}

/** A workspace's lease settings: its options with their defaults, the interval from its idle
 * timeout (renewalIntervalMs) and the jitter kept within [0, 1]. */
export function leaseSettings(options: LeaseOptions = {}, idleTimeout?: string): Required<LeaseOptions> {
  const intervalMs = renewalIntervalMs(options.intervalMs ?? DEFAULT_LEASE_INTERVAL_MS, idleTimeout);
  return {
    intervalMs,
    jitter: Math.min(1, Math.max(0, options.jitter ?? DEFAULT_LEASE_JITTER)),
    retryMs: Math.min(options.retryMs ?? DEFAULT_RENEW_RETRY_MS, intervalMs),
    random: options.random ?? Math.random,
    timers: options.timers ?? globalTimers,
  };
}

export type LeaseInput = Required<LeaseOptions> & {
  name: string;
  gateway: SandboxGateway;
  /** Renew at once (a restore: the lease may be close to lapsing), then every interval. */
  immediate: boolean;
};

export type LeaseEvent = { type: "RENEWED" } | { type: "RENEW_FAILED"; message: string } | { type: "LOST"; lost: Loss };

/** A Continuity that ends the workspace. `absent` from a subscription counts only once the watch
 * has shown the Sandbox present: a watch that has not listed yet says nothing (decision 0011). */
function lossOfContinuity(c: Continuity, name: string): Loss | undefined {
  if (c.kind === "lost") return { reason: c.reason, message: c.message };
  return c.kind === "absent" ? absentLoss(name) : undefined;
}

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/**
 * The lease: every (jittered) interval, ask continuity and, while the Sandbox is present, renew.
 * A failed read is unknown, not loss, so the renew goes ahead; a failed renew is retried sooner.
 */
export const leaseLogic = fromCallback<LeaseEvent, LeaseInput>(({ input, sendBack }) => {
  let stopped = false;
  let handle: unknown;
  let seenPresent = false;
  const send = (e: LeaseEvent) => {
    if (!stopped) sendBack(e);
  };
  const lose = (lost: Loss) => {
    send({ type: "LOST", lost });
    stopped = true;
    input.timers.clear(handle);
  };
  const schedule = (ms: number) => {
    if (!stopped) handle = input.timers.set(() => void tick(), ms);
  };
  const next = (first = false) => leaseDelay(input.intervalMs, input.jitter, input.random, first);

  async function tick(): Promise<void> {
    if (stopped) return;
    let continuity: Continuity | undefined;
    try {
      continuity = await input.gateway.continuity(input.name);
    } catch {
      continuity = undefined;
    }
    if (stopped) return;
    const lost = continuity && lossOfContinuity(continuity, input.name);
    if (lost) return lose(lost);
    let failed = false;
    try {
      await input.gateway.renew(input.name);
      send({ type: "RENEWED" });
    } catch (err) {
      failed = true;
      send({ type: "RENEW_FAILED", message: errorText(err) });
    }
    schedule(failed ? Math.min(input.retryMs, next()) : next());
  }

  const unwatch = input.gateway.watchContinuity?.(input.name, (c) => {
    if (c.kind === "present") seenPresent = true;
    if (c.kind === "absent" && !seenPresent) return;
    const lost = lossOfContinuity(c, input.name);
    if (lost) lose(lost);
  });
  schedule(input.immediate ? 0 : next(true));
  return () => {
    stopped = true;
    input.timers.clear(handle);
    unwatch?.();
  };
});
