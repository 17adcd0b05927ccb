// The workspace lifecycle as an xstate v5 machine (issue 6, item 3): placing -> provisioning ->
// attaching -> ready, ending lost | failed | destroyed. Pure logic: the world is the SandboxPort in
// its input, time is an injected clock and timer pair, and every transition and wait is handed to
// an injected `onEvent` (the HTTP API streams them). A lease child renews the Sandbox's keepalive
// from the moment its CR is written (decision 0014) and watches its continuity (decision 0013).
import { assign, createActor, enqueueActions, fromCallback, fromPromise, setup, stopChild } from "xstate";
import type { AttachBody } from "../api/attach";
import {
  FINAL_STATES,
  type Failure,
  type Loss,
  type Wait,
  type WorkspaceEvent,
  type WorkspaceState,
  type WorkspaceView,
} from "./api";
import {
  DEFAULT_BUDGETS,
  WorkspaceFailure,
  failureOf,
  type Attached,
  type Budgets,
  type Continuity,
  type PlaceRequest,
  type Provisioned,
  type SandboxPort,
} from "./port";
import { absentLoss, type SandboxObject } from "./provision-rules";

// ---------------------------------------------------------------------------------------------
// Time and the lease

/** The timers the lease schedules with; the default reads the globals at call time, so jest's fake
 * timers apply. */
export type Timers = { set(fn: () => void, ms: number): unknown; clear(handle: unknown): void };
export const globalTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export type LeaseOptions = {
  /** How often the keepalive is renewed (decision 0014): must be well under the
   * Sandbox's idleTimeout. Default 5 min. */
  intervalMs?: number;
  /** Each delay is the interval times 1 +/- this (default 0.2), so a thousand workspaces created
   * together do not renew together. */
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

type LeaseInput = Required<LeaseOptions> & {
  name: string;
  port: SandboxPort;
  /** Renew at once (a restore: the lease may be close to lapsing), then every interval. */
  immediate: boolean;
};

type LeaseEvent = { type: "RENEWED" } | { type: "RENEW_FAILED"; message: string } | { type: "LOST"; lost: Loss };

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
const leaseLogic = fromCallback<LeaseEvent, LeaseInput>(({ input, sendBack }) => {
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
      continuity = await input.port.continuity(input.name);
    } catch {
      continuity = undefined;
    }
    if (stopped) return;
    const lost = continuity && lossOfContinuity(continuity, input.name);
    if (lost) return lose(lost);
    let failed = false;
    try {
      await input.port.renew(input.name);
      send({ type: "RENEWED" });
    } catch (err) {
      failed = true;
      send({ type: "RENEW_FAILED", message: errorText(err) });
    }
    schedule(failed ? Math.min(input.retryMs, next()) : next());
  }

  const unwatch = input.port.watchContinuity?.(input.name, (c) => {
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

// ---------------------------------------------------------------------------------------------
// The machine

/** Where a restored workspace resumes: what its Sandbox's status says (the registry decides). */
export type Resume = {
  at: "provisioning" | "attaching" | "ready";
  endpoint?: string;
  attached?: Attached;
  /** When the workspace was first created, if known (e.g. the CR's creationTimestamp). */
  createdAt?: number;
};

export type WorkspaceInput = {
  name: string;
  port: SandboxPort;
  /** What to place; required unless `resume` is given. */
  place?: PlaceRequest;
  /** The Harness's attach body; absent, the workspace has no Repo Slot and skips the attach. */
  attach?: AttachBody;
  budgets?: Budgets;
  lease?: LeaseOptions;
  now?: () => number;
  onEvent?: (event: WorkspaceEvent) => void;
  resume?: Resume;
};

export type WorkspaceContext = {
  name: string;
  port: SandboxPort;
  place?: PlaceRequest;
  attach?: AttachBody;
  budgets: Budgets;
  lease: Required<LeaseOptions>;
  now: () => number;
  onEvent: (event: WorkspaceEvent) => void;
  resume?: Resume;
  state: WorkspaceState | null;
  previous: WorkspaceState | null;
  wait?: Wait;
  endpoint?: string;
  attached?: Attached;
  failure?: Failure;
  lost?: Loss;
  leaseStarted: boolean;
  renewals: number;
  createdAt: number;
  writtenAt?: number;
  placedAt?: number;
  readyAt?: number;
  renewedAt?: number;
  endedAt?: number;
};

export type WorkspaceMachineEvent =
  | { type: "WRITTEN" }
  | { type: "WAIT"; wait: Wait }
  | { type: "DESTROY" }
  | LeaseEvent;

export type WorkspaceOutcome = { state: WorkspaceState; failure?: Failure; lost?: Loss };

/** How a port call's hooks reach the machine (its own `send`). */
type Notify = (event: WorkspaceMachineEvent) => void;

/** Runs a port call whose hooks speak only while the call is current: not once it has settled, nor
 * once the lifecycle left the state that made it (its signal aborted). A late word from a finished
 * wait must not pass for news about the next one. */
async function hooked<T>(signal: AbortSignal, notify: Notify, call: (notify: Notify) => Promise<T>): Promise<T> {
  let live = true;
  try {
    return await call((e) => {
      if (live && !signal.aborted) notify(e);
    });
  } finally {
    live = false;
  }
}

const iso = (ms: number) => new Date(ms).toISOString();

function safely(onEvent: ((e: WorkspaceEvent) => void) | undefined): (e: WorkspaceEvent) => void {
  return (e) => {
    try {
      onEvent?.(e);
    } catch {
      // A listener's fault is its own: the lifecycle goes on.
    }
  };
}

function initialContext(input: WorkspaceInput): WorkspaceContext {
  if (!input.resume && !input.place) throw new Error(`workspace "${input.name}": give a place request or a resume`);
  const now = input.now ?? Date.now;
  const lease = input.lease ?? {};
  const intervalMs = lease.intervalMs ?? DEFAULT_LEASE_INTERVAL_MS;
  return {
    name: input.name,
    port: input.port,
    ...(input.place ? { place: input.place } : {}),
    ...(input.attach ? { attach: input.attach } : {}),
    budgets: input.budgets ?? DEFAULT_BUDGETS,
    lease: {
      intervalMs,
      jitter: lease.jitter ?? DEFAULT_LEASE_JITTER,
      retryMs: lease.retryMs ?? Math.min(DEFAULT_RENEW_RETRY_MS, intervalMs),
      random: lease.random ?? Math.random,
      timers: lease.timers ?? globalTimers,
    },
    now,
    onEvent: safely(input.onEvent),
    ...(input.resume ? { resume: input.resume } : {}),
    state: null,
    previous: null,
    ...(input.resume?.endpoint ? { endpoint: input.resume.endpoint } : {}),
    ...(input.resume?.attached ? { attached: input.resume.attached } : {}),
    leaseStarted: false,
    renewals: 0,
    createdAt: input.resume?.createdAt ?? now(),
  };
}

const isLoss = (err: unknown) => err instanceof WorkspaceFailure && err.reason === "Lost";

/** The Loss a failure named Lost carries in its details (provision-rules puts reason and message there). */
function lossOfFailure(err: unknown): Loss {
  const d = err instanceof WorkspaceFailure ? err.details : undefined;
  const reason = typeof d?.reason === "string" ? d.reason : "Lost";
  const message = typeof d?.message === "string" ? d.message : errorText(err);
  return { reason, message };
}

export const workspaceMachine = setup({
  types: {
    input: {} as WorkspaceInput,
    context: {} as WorkspaceContext,
    events: {} as WorkspaceMachineEvent,
    output: {} as WorkspaceOutcome,
  },
  actors: {
    place: fromPromise<void, { port: SandboxPort; request: PlaceRequest; notify: Notify }>(({ input, signal }) =>
      hooked(signal, input.notify, (notify) =>
        input.port.place(input.request, {
          onWritten: () => notify({ type: "WRITTEN" }),
          onWait: (wait) => notify({ type: "WAIT", wait }),
          signal,
        }),
      ),
    ),
    provision: fromPromise<Provisioned, { port: SandboxPort; name: string; budgets: Budgets; notify: Notify }>(
      ({ input, signal }) =>
        hooked(signal, input.notify, (notify) =>
          input.port.provision(input.name, input.budgets, { onWait: (wait) => notify({ type: "WAIT", wait }), signal }),
        ),
    ),
    attach: fromPromise<Attached, { port: SandboxPort; name: string; body: AttachBody }>(({ input }) =>
      input.port.attach(input.name, input.body),
    ),
    destroy: fromPromise<void, { port: SandboxPort; name: string }>(({ input }) => input.port.destroy(input.name)),
    lease: leaseLogic,
  },
  actions: {
    setState: assign(({ context }, params: { state: WorkspaceState }) => ({
      previous: context.state,
      state: params.state,
      ...(params.state === "ready" ? { readyAt: context.now() } : {}),
      ...(FINAL_STATES.includes(params.state) ? { endedAt: context.now() } : {}),
    })),
    announce: ({ context }) => {
      const to = context.state!;
      context.onEvent({
        type: "transition",
        from: context.previous,
        to,
        at: iso(context.now()),
        ...(context.previous === null && context.resume ? { restored: true } : {}),
        ...(to === "failed" && context.failure ? { failure: context.failure } : {}),
        ...(to === "lost" && context.lost ? { lost: context.lost } : {}),
      });
    },
    startLease: enqueueActions(({ context, enqueue }) => {
      if (context.leaseStarted) return;
      enqueue.spawnChild("lease", {
        id: "lease",
        input: { ...context.lease, name: context.name, port: context.port, immediate: context.resume !== undefined },
      });
      enqueue.assign({ leaseStarted: true });
    }),
    stopLease: stopChild("lease"),
    written: assign(({ context }) => ({ writtenAt: context.now() })),
    placed: assign(({ context }) => ({ placedAt: context.now(), wait: undefined })),
    recordWait: assign(({ event }) => (event.type === "WAIT" ? { wait: event.wait } : {})),
    announceWait: ({ context }) => {
      if (context.wait) context.onEvent({ type: "wait", wait: context.wait, at: iso(context.now()) });
    },
    renewed: assign(({ context }) => ({ renewals: context.renewals + 1, renewedAt: context.now() })),
    announceRenewed: ({ context }) => {
      context.onEvent({ type: "renewed", count: context.renewals, at: iso(context.now()) });
    },
    renewFailed: ({ context, event }) => {
      if (event.type !== "RENEW_FAILED") return;
      context.onEvent({ type: "renew_failed", message: event.message, at: iso(context.now()) });
    },
    lostFromLease: assign(({ event }) => (event.type === "LOST" ? { lost: event.lost, wait: undefined } : {})),
  },
  guards: {
    resumeAt: ({ context }, params: { at: Resume["at"] }) => context.resume?.at === params.at,
    hasAttach: ({ context }) => context.attach !== undefined,
  },
}).createMachine({
  id: "workspace",
  context: ({ input }) => initialContext(input),
  initial: "boot",
  output: ({ context }) => ({
    state: context.state!,
    ...(context.failure ? { failure: context.failure } : {}),
    ...(context.lost ? { lost: context.lost } : {}),
  }),
  on: {
    RENEWED: { actions: ["renewed", "announceRenewed"] },
    RENEW_FAILED: { actions: "renewFailed" },
  },
  states: {
    // Transient: where the workspace starts, from its input. A restore never re-places: the CR
    // exists, so the lease starts at once.
    boot: {
      always: [
        { guard: { type: "resumeAt", params: { at: "ready" } }, target: "active.ready", actions: "startLease" },
        { guard: { type: "resumeAt", params: { at: "attaching" } }, target: "active.attaching", actions: "startLease" },
        {
          guard: { type: "resumeAt", params: { at: "provisioning" } },
          target: "active.provisioning",
          actions: "startLease",
        },
        { target: "active.placing" },
      ],
    },
    active: {
      initial: "placing",
      on: {
        LOST: { target: "lost", actions: "lostFromLease" },
        DESTROY: { target: "destroying" },
      },
      states: {
        placing: {
          entry: [{ type: "setState", params: { state: "placing" } }, "announce"],
          on: {
            WRITTEN: { actions: ["written", "startLease"] },
            WAIT: { actions: ["recordWait", "announceWait"] },
          },
          invoke: {
            src: "place",
            input: ({ context, self }) => ({
              port: context.port,
              request: context.place!,
              notify: (e: WorkspaceMachineEvent) => self.send(e),
            }),
            // A port that never said "written" still wrote the CR by now: the lease starts anyway.
            onDone: { target: "provisioning", actions: ["placed", "startLease"] },
            onError: [
              {
                guard: ({ event }) => isLoss(event.error),
                target: "#workspace.lost",
                actions: assign(({ event }) => ({
                  failure: failureOf("place", event.error),
                  lost: lossOfFailure(event.error),
                  wait: undefined,
                })),
              },
              {
                target: "#workspace.failed",
                actions: assign(({ event }) => ({ failure: failureOf("place", event.error), wait: undefined })),
              },
            ],
          },
        },
        provisioning: {
          entry: [{ type: "setState", params: { state: "provisioning" } }, "announce"],
          on: { WAIT: { actions: ["recordWait", "announceWait"] } },
          invoke: {
            src: "provision",
            input: ({ context, self }) => ({
              port: context.port,
              name: context.name,
              budgets: context.budgets,
              notify: (e: WorkspaceMachineEvent) => self.send(e),
            }),
            onDone: [
              {
                guard: "hasAttach",
                target: "attaching",
                actions: assign(({ event }) => ({ endpoint: event.output.endpoint, wait: undefined })),
              },
              {
                target: "ready",
                actions: assign(({ event }) => ({ endpoint: event.output.endpoint, wait: undefined })),
              },
            ],
            onError: [
              {
                // The Sandbox itself is gone: `lost`, whoever heard it first (this wait or the lease).
                guard: ({ event }) => isLoss(event.error),
                target: "#workspace.lost",
                actions: assign(({ event }) => ({
                  failure: failureOf("provision", event.error),
                  lost: lossOfFailure(event.error),
                  wait: undefined,
                })),
              },
              {
                target: "#workspace.failed",
                actions: assign(({ event }) => ({ failure: failureOf("provision", event.error), wait: undefined })),
              },
            ],
          },
        },
        attaching: {
          entry: [{ type: "setState", params: { state: "attaching" } }, "announce"],
          invoke: {
            src: "attach",
            input: ({ context }) => ({ port: context.port, name: context.name, body: context.attach! }),
            onDone: { target: "ready", actions: assign(({ event }) => ({ attached: event.output })) },
            onError: {
              target: "#workspace.failed",
              actions: assign(({ event }) => ({ failure: failureOf("attach", event.error) })),
            },
          },
        },
        ready: {
          entry: [{ type: "setState", params: { state: "ready" } }, "announce"],
        },
      },
    },
    // The lease stops first: a renew after the delete would only fail.
    destroying: {
      entry: ["stopLease", { type: "setState", params: { state: "destroying" } }, "announce"],
      invoke: {
        src: "destroy",
        input: ({ context }) => ({ port: context.port, name: context.name }),
        onDone: { target: "destroyed" },
        // The CR may outlive this: its lease has stopped, so the operator's idle GC reaps it.
        onError: { target: "failed", actions: assign(({ event }) => ({ failure: failureOf("destroy", event.error) })) },
      },
    },
    lost: { type: "final", entry: [{ type: "setState", params: { state: "lost" } }, "announce"] },
    failed: { type: "final", entry: [{ type: "setState", params: { state: "failed" } }, "announce"] },
    destroyed: { type: "final", entry: [{ type: "setState", params: { state: "destroyed" } }, "announce"] },
  },
});

/** Creates and starts a workspace actor. */
export function startWorkspace(input: WorkspaceInput) {
  // Checked here too, so a bad input throws at the caller instead of leaving an errored actor.
  if (!input.resume && !input.place) throw new Error(`workspace "${input.name}": give a place request or a resume`);
  return createActor(workspaceMachine, { input }).start();
}
export type WorkspaceActor = ReturnType<typeof startWorkspace>;

/** The API's view of a workspace (pure): its lifecycle, and what its Sandbox reports when known. */
export function viewOf(context: WorkspaceContext, sandbox?: SandboxObject): WorkspaceView {
  const status = sandbox?.status;
  const endpoint = status?.endpoint ?? context.endpoint;
  return {
    name: context.name,
    state: context.state ?? "placing",
    ...(status?.phase ? { phase: status.phase } : {}),
    ...(endpoint ? { endpoint } : {}),
    conditions: status?.conditions ?? [],
    ...(context.wait ? { wait: context.wait } : {}),
    ...(context.attached ? { attach: context.attached.answer } : {}),
    ...(context.attached?.stale ? { stale: context.attached.stale } : {}),
    ...(context.failure ? { failure: context.failure } : {}),
    ...(context.lost ? { lost: context.lost } : {}),
    createdAt: iso(context.createdAt),
    ...(context.readyAt !== undefined ? { readyAt: iso(context.readyAt) } : {}),
    ...(context.renewedAt !== undefined ? { renewedAt: iso(context.renewedAt) } : {}),
  };
}
