// The workspace lifecycle as an xstate v5 statechart (decision 0011): placing -> provisioning ->
// attaching -> ready, ending lost | failed | destroyed. Pure logic: the world is the SandboxGateway in
// its input, time is an injected clock and timer pair, and every transition and wait is handed to
// an injected `onEvent` (the HTTP API streams them). A lease child renews the Sandbox's keepalive
// from the moment its CR is written (decision 0014) and watches its continuity (decision 0013); it
// lives in keepalive.ts, and renews at a third of the Sandbox's idle timeout at most.
import { assign, createActor, enqueueActions, fromPromise, setup, stopChild } from "xstate";
import type { AttachBody } from "../../api/attach";
import {
  FINAL_STATES,
  type Failure,
  type Loss,
  type Wait,
  type WorkspaceEvent,
  type WorkspaceState,
  type WorkspaceView,
} from "../../api/orchestrator-schemas";
import {
  DEFAULT_BUDGETS,
  WorkspaceFailure,
  failureOf,
  type Attached,
  type Budgets,
  type PlaceRequest,
  type Provisioned,
  type SandboxGateway,
} from "./sandbox-gateway";
import type { SandboxObject } from "./provision-rules";
import { leaseLogic, leaseSettings, type LeaseEvent, type LeaseOptions } from "./keepalive";

// ---------------------------------------------------------------------------------------------
// The lease lives in keepalive.ts (its timing, jitter and renewal actor); a workspace's options name it.

export type { LeaseOptions } from "./keepalive";

// ---------------------------------------------------------------------------------------------
// The statechart

/** Where a restored workspace resumes: what its Sandbox's status says (the registry decides). */
export type Resume = {
  at: "provisioning" | "attaching" | "ready";
  endpoint?: string;
  attached?: Attached;
  /** When the workspace was first created, if known (e.g. the CR's creationTimestamp). */
  createdAt?: number;
  /** The Sandbox's spec.idleTimeout, so the restored lease renews as often as the first one did
   * (renewalIntervalMs); absent, the CRD default (30m) is assumed. */
  idleTimeout?: string;
};

export type WorkspaceInput = {
  name: string;
  gateway: SandboxGateway;
  /** What to place; required unless `resume` is given. */
  place?: PlaceRequest;
  /** The Harness's attach body; absent, the workspace has no Repo Slot and skips the attach. */
  attach?: AttachBody;
  budgets?: Budgets;
  /** The configured lease; the workspace's interval also follows its idle timeout (the place
   * request's, or the resume's). */
  lease?: LeaseOptions;
  now?: () => number;
  onEvent?: (event: WorkspaceEvent) => void;
  resume?: Resume;
};

export type WorkspaceContext = {
  name: string;
  gateway: SandboxGateway;
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

export type WorkspaceLifecycleEvent =
  | { type: "WRITTEN" }
  | { type: "WAIT"; wait: Wait }
  | { type: "DESTROY" }
  | LeaseEvent;

export type WorkspaceOutcome = { state: WorkspaceState; failure?: Failure; lost?: Loss };

/** How a gateway call's hooks reach the statechart (its own `send`). */
type Notify = (event: WorkspaceLifecycleEvent) => void;

/** Runs a gateway call whose hooks speak only while the call is current: not once it has settled, nor
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
  return {
    name: input.name,
    gateway: input.gateway,
    ...(input.place ? { place: input.place } : {}),
    ...(input.attach ? { attach: input.attach } : {}),
    budgets: input.budgets ?? DEFAULT_BUDGETS,
    lease: leaseSettings(input.lease, input.place?.idleTimeout ?? input.resume?.idleTimeout),
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

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

const isLoss = (err: unknown) => err instanceof WorkspaceFailure && err.reason === "Lost";

/** The Loss a failure named Lost carries in its details (provision-rules puts reason and message there). */
function lossOfFailure(err: unknown): Loss {
  const d = err instanceof WorkspaceFailure ? err.details : undefined;
  const reason = typeof d?.reason === "string" ? d.reason : "Lost";
  const message = typeof d?.message === "string" ? d.message : errorText(err);
  return { reason, message };
}

export const workspaceLifecycle = setup({
  types: {
    input: {} as WorkspaceInput,
    context: {} as WorkspaceContext,
    events: {} as WorkspaceLifecycleEvent,
    output: {} as WorkspaceOutcome,
  },
  actors: {
    place: fromPromise<void, { gateway: SandboxGateway; request: PlaceRequest; notify: Notify }>(({ input, signal }) =>
      hooked(signal, input.notify, (notify) =>
        input.gateway.place(input.request, {
          onWritten: () => notify({ type: "WRITTEN" }),
          onWait: (wait) => notify({ type: "WAIT", wait }),
          signal,
        }),
      ),
    ),
    provision: fromPromise<Provisioned, { gateway: SandboxGateway; name: string; budgets: Budgets; notify: Notify }>(
      ({ input, signal }) =>
        hooked(signal, input.notify, (notify) =>
          input.gateway.provision(input.name, input.budgets, {
            onWait: (wait) => notify({ type: "WAIT", wait }),
            signal,
          }),
        ),
    ),
    attach: fromPromise<Attached, { gateway: SandboxGateway; name: string; body: AttachBody }>(({ input }) =>
      input.gateway.attach(input.name, input.body),
    ),
    destroy: fromPromise<void, { gateway: SandboxGateway; name: string }>(({ input }) =>
      input.gateway.destroy(input.name),
    ),
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
        input: {
          ...context.lease,
          name: context.name,
          gateway: context.gateway,
          immediate: context.resume !== undefined,
        },
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
              gateway: context.gateway,
              request: context.place!,
              notify: (e: WorkspaceLifecycleEvent) => self.send(e),
            }),
            // A gateway that never said "written" still wrote the CR by now: the lease starts anyway.
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
              gateway: context.gateway,
              name: context.name,
              budgets: context.budgets,
              notify: (e: WorkspaceLifecycleEvent) => self.send(e),
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
            input: ({ context }) => ({ gateway: context.gateway, name: context.name, body: context.attach! }),
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
        input: ({ context }) => ({ gateway: context.gateway, name: context.name }),
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
  return createActor(workspaceLifecycle, { input }).start();
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
