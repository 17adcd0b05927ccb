// (Sandbox, Pod, Service, the last create's answer) -> the Sandbox's status (pure). Clients never
// read the pod (decision 0013), so everything they wait on is said here: why
// a pod is not placed, why it is not Ready, how its Harness last ended, and when it is Lost.
import type { kind } from "kubernetes-fluent-client";
import type { Condition, ContainerReport, ContainerWaiting, SandboxStatus } from "../../api/crd";
import { CONDITION, FINAL_REFUSALS, LOST_REASON, READY_REASON, SCHEDULED_REASON } from "../../api/conditions";
import { EFFECTOR, HARNESS } from "../../api/wire";
import { endpointOf } from "./service";

/** Why a pod is gone for good (decision 0013): the Sandbox is Lost and never gets another.
 * `podUID`: the pod the verdict is about, so a status can name it even when none named it
 * before (decision 0031). */
export type PodLoss = { reason: string; message: string; podUID?: string };

/** Why no pod is made: its create was refused (a ResourceQuota, a missing PriorityClass, ...), or
 * the reconcile's gate refuses the spec (gate.ts). */
export type PodRefusal = { reason: string; message: string };

/** A further hold on Ready (the Repo caches, decision 0010): the first one holding names the wait. */
export type ReadyGate = { reason: string; message: string };

export type Observed = {
  sandbox: {
    metadata: { name: string; namespace: string; generation?: number; deletionTimestamp?: string | Date };
    status?: SandboxStatus;
  };
  pod?: kind.Pod;
  service?: kind.Service;
  refusal?: PodRefusal;
  loss?: PodLoss;
  gates?: ReadyGate[];
  /** Extra conditions computed elsewhere (ReposFresh), already in condition shape. */
  extraConditions?: Omit<Condition, "lastTransitionTime">[];
  now: Date;
};

/** Waiting reasons every starting container passes through: not worth a client's attention. */
const ROUTINE_WAITING = new Set(["ContainerCreating", "PodInitializing"]);

export const rfc3339 = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, "Z");

const condition = (pod: kind.Pod | undefined, type: string) => pod?.status?.conditions?.find((c) => c.type === type);

/** The verdict on a pod that is gone or ended, or undefined while it lives (pure). */
export function lossOf(
  pod: kind.Pod | undefined,
  recordedUID: string | undefined,
  goneConfirmed: boolean,
): PodLoss | undefined {
  if (!pod) {
    return recordedUID && goneConfirmed
      ? { reason: LOST_REASON.PodDeleted, message: `its pod (uid ${recordedUID}) was deleted`, podUID: recordedUID }
      : undefined;
  }
  // Every verdict names the pod it is about: the recorded one, else the one seen (decision 0031).
  const loss = verdictOn(pod, recordedUID);
  return loss && { ...loss, podUID: recordedUID ?? pod.metadata?.uid };
}

/** Why a pod that is still there ends its Sandbox, or undefined while it lives (pure). */
function verdictOn(pod: kind.Pod, recordedUID: string | undefined): Omit<PodLoss, "podUID"> | undefined {
  const name = pod.metadata?.name;
  if (recordedUID && pod.metadata?.uid !== recordedUID) {
    return {
      reason: LOST_REASON.PodDeleted,
      message: `its pod (uid ${recordedUID}) was deleted; pod ${name} now is another`,
    };
  }
  const disruption = condition(pod, "DisruptionTarget");
  if (pod.status?.phase === "Failed") {
    if (pod.status.reason === LOST_REASON.Evicted || disruption?.status === "True") {
      return {
        reason: LOST_REASON.Evicted,
        message: pod.status.message || disruption?.message || `pod ${name} was evicted`,
      };
    }
    return {
      reason: LOST_REASON.PodFailed,
      message: pod.status.message || endedContainers(pod) || `pod ${name} failed`,
    };
  }
  if (pod.status?.phase === "Succeeded") {
    return {
      reason: LOST_REASON.PodSucceeded,
      message: pod.status.message || endedContainers(pod) || `pod ${name} exited`,
    };
  }
  if (pod.metadata?.deletionTimestamp) {
    if (disruption?.status === "True") {
      return {
        reason: disruption.reason === "PreemptionByScheduler" ? LOST_REASON.Preempted : LOST_REASON.Evicted,
        message: disruption.message ?? "",
      };
    }
    return { reason: LOST_REASON.PodDeleted, message: `its pod ${name} (uid ${pod.metadata.uid}) was deleted` };
  }
  return undefined;
}

/** "harness: Error (exit 1): boom; effector: Completed (exit 0)" from the containers' last ends. */
function endedContainers(pod: kind.Pod): string {
  return (pod.status?.containerStatuses ?? [])
    .map((s) => ({ name: s.name, t: s.state?.terminated }))
    .filter((x) => x.t)
    .map(
      ({ name, t }) =>
        `${name}: ${t!.reason ?? "Terminated"} (exit ${t!.exitCode})${t!.message ? `: ${t!.message.trim()}` : ""}`,
    )
    .join("; ");
}

/** A container's restarts and last end, from the pod's container statuses. */
export function reportOf(pod: kind.Pod | undefined, container: string): ContainerReport | undefined {
  const s = pod?.status?.containerStatuses?.find((c) => c.name === container);
  if (!s) return undefined;
  const t = s.lastState?.terminated ?? s.state?.terminated;
  return {
    restartCount: s.restartCount ?? 0,
    ...(t
      ? {
          lastTerminated: {
            ...(t.reason ? { reason: t.reason } : {}),
            exitCode: t.exitCode,
            ...(t.message ? { message: t.message } : {}),
            ...(t.finishedAt ? { finishedAt: rfc3339(new Date(t.finishedAt)) } : {}),
          },
        }
      : {}),
  };
}

/** Every container still waiting for a reason worth naming, init containers first. */
export function waitingOf(pod: kind.Pod | undefined): ContainerWaiting[] {
  const statuses = [...(pod?.status?.initContainerStatuses ?? []), ...(pod?.status?.containerStatuses ?? [])];
  return statuses
    .filter((s) => s.state?.waiting?.reason && !ROUTINE_WAITING.has(s.state.waiting.reason))
    .map((s) => ({
      container: s.name,
      reason: s.state!.waiting!.reason!,
      ...(s.state!.waiting!.message ? { message: s.state!.waiting!.message } : {}),
    }));
}

type Cond = Omit<Condition, "lastTransitionTime">;

function scheduledCondition(o: Observed): Cond {
  const { pod, refusal } = o;
  if (!pod) {
    if (refusal)
      return { type: CONDITION.Scheduled, status: "False", reason: refusal.reason, message: refusal.message };
    return {
      type: CONDITION.Scheduled,
      status: "Unknown",
      reason: SCHEDULED_REASON.PodNotCreated,
      message: "the pod is not created yet",
    };
  }
  const c = condition(pod, "PodScheduled");
  if (c?.status === "True" || pod.spec?.nodeName) {
    return {
      type: CONDITION.Scheduled,
      status: "True",
      reason: SCHEDULED_REASON.Scheduled,
      message: `placed on node ${pod.spec?.nodeName ?? "?"}`,
    };
  }
  if (c?.status === "False") {
    return {
      type: CONDITION.Scheduled,
      status: "False",
      reason: c.reason || SCHEDULED_REASON.Unschedulable,
      message: c.message ?? "",
    };
  }
  return {
    type: CONDITION.Scheduled,
    status: "Unknown",
    reason: SCHEDULED_REASON.SchedulerPending,
    message: "the scheduler has not placed the pod yet",
  };
}

function readyCondition(o: Observed, loss: PodLoss | undefined): Cond {
  if (loss) return { type: CONDITION.Ready, status: "False", reason: READY_REASON.Lost, message: loss.message };
  const { pod } = o;
  if (!pod) {
    const why = o.refusal ? `the pod create was refused: ${o.refusal.message}` : "the pod is not created yet";
    // A refusal no retry mends (the spec itself, its namespace) is the reason Ready will not come.
    const reason =
      o.refusal && FINAL_REFUSALS.includes(o.refusal.reason) ? o.refusal.reason : READY_REASON.PodNotCreated;
    return { type: CONDITION.Ready, status: "False", reason, message: why };
  }
  const c = condition(pod, "Ready");
  if (c?.status !== "True") {
    const message = c?.message || (pod.spec?.nodeName ? "the pod is not Ready" : "the pod is not scheduled yet");
    return { type: CONDITION.Ready, status: "False", reason: READY_REASON.PodNotReady, message };
  }
  // Ready means a client can reach the Harness: the endpoint must exist too, since
  // a client may refuse a Ready Sandbox with no endpoint (decision 0013).
  if (!o.service) {
    return {
      type: CONDITION.Ready,
      status: "False",
      reason: READY_REASON.ServiceNotCreated,
      message: "the Service is not created yet",
    };
  }
  const gate = o.gates?.[0];
  if (gate) return { type: CONDITION.Ready, status: "False", reason: gate.reason, message: gate.message };
  return { type: CONDITION.Ready, status: "True", reason: READY_REASON.PodReady, message: "the pod is Ready" };
}

/** Carries lastTransitionTime over when a condition's status did not change. */
function stamp(next: Cond[], prev: Condition[] | undefined, now: Date): Condition[] {
  return next.map((c) => {
    const old = prev?.find((p) => p.type === c.type);
    const lastTransitionTime = old && old.status === c.status ? old.lastTransitionTime : rfc3339(now);
    return { ...c, lastTransitionTime };
  });
}

export function computeStatus(o: Observed): SandboxStatus {
  const prev = o.sandbox.status;
  const { name, namespace } = o.sandbox.metadata;
  // Lost is terminal: once said, it stays, whatever the pod does next (decision 0013).
  const loss: PodLoss | undefined = prev?.phase === "Lost" ? lostOf(prev) : o.loss;
  const pod = loss ? undefined : o.pod;
  // A lost pod keeps the Scheduled condition it had: where it ran is history worth keeping.
  const scheduledBefore = prev?.conditions?.find((c) => c.type === CONDITION.Scheduled);
  const scheduled: Cond = loss && scheduledBefore ? scheduledBefore : scheduledCondition(o);
  const conditions: Cond[] = [scheduled, readyCondition(o, loss)];
  conditions.push(...(o.extraConditions ?? []));
  if (loss) conditions.push({ type: CONDITION.Lost, status: "True", reason: loss.reason, message: loss.message });

  const ready = !loss && conditions[1].status === "True";
  const phase = o.sandbox.metadata.deletionTimestamp ? "Terminating" : loss ? "Lost" : ready ? "Ready" : "Pending";
  const harness = loss ? prev?.harness : reportOf(pod, HARNESS);
  const effector = loss ? prev?.effector : reportOf(pod, EFFECTOR);
  const waiting = loss ? [] : waitingOf(pod);
  const podName = pod?.metadata?.name ?? prev?.podName;
  const podUID = pod?.metadata?.uid ?? prev?.podUID ?? loss?.podUID;
  const nodeName = pod?.spec?.nodeName ?? (loss ? prev?.nodeName : undefined);

  return {
    phase,
    ...(o.service
      ? { endpoint: endpointOf(name, namespace) }
      : prev?.endpoint && loss
        ? { endpoint: prev.endpoint }
        : {}),
    ...(podName ? { podName } : {}),
    ...(podUID ? { podUID } : {}),
    ...(nodeName ? { nodeName } : {}),
    ...(o.sandbox.metadata.generation !== undefined ? { observedGeneration: o.sandbox.metadata.generation } : {}),
    conditions: stamp(
      conditions.map(({ type, status, reason, message, observedGeneration }) => ({
        type,
        status,
        reason,
        message,
        ...(observedGeneration !== undefined ? { observedGeneration } : {}),
      })),
      prev?.conditions,
      o.now,
    ),
    ...(harness ? { harness } : {}),
    ...(effector ? { effector } : {}),
    ...(waiting.length ? { waiting } : {}),
  };
}

function lostOf(status: SandboxStatus): PodLoss {
  const c = status.conditions?.find((x) => x.type === CONDITION.Lost);
  return { reason: c?.reason ?? "Lost", message: c?.message ?? "its pod is gone" };
}

export type StatusEvent = { type: "Normal" | "Warning"; reason: string; message: string };

/**
 * The Events a status change deserves (pure): the Warnings alone, one per transition, none for a
 * repeat. Placed and Ready are said by the status itself (the Scheduled and Ready conditions, the
 * node, the endpoint, each with its time), so a Normal Event for them was an API write every
 * Sandbox paid for that told a person nothing more (decision 0043, amending decision 0027).
 */
export function statusEvents(prev: SandboxStatus | undefined, next: SandboxStatus): StatusEvent[] {
  const events: StatusEvent[] = [];
  const was = (t: string) => prev?.conditions?.find((c) => c.type === t);
  const now = (t: string) => next.conditions?.find((c) => c.type === t);
  const s0 = was(CONDITION.Scheduled);
  const s1 = now(CONDITION.Scheduled);
  const changed =
    s1 && next.phase !== "Lost" && (s1.status !== s0?.status || s1.reason !== s0?.reason || s1.message !== s0?.message);
  if (changed && s1.status === "False") events.push({ type: "Warning", reason: s1.reason, message: s1.message });
  if (next.phase === "Lost" && prev?.phase !== "Lost") {
    const l = now(CONDITION.Lost);
    events.push({ type: "Warning", reason: "Lost", message: `${l?.reason ?? "Lost"}: ${l?.message ?? ""}` });
  }
  return events;
}

/**
 * How long a new Sandbox's first status may wait for news once its pod is placed (decision 0031):
 * a pod is usually Ready within it, and then one status write says placed and Ready at once,
 * where two said Pending first. Counted from when this process saw the pod placed (decision 0043).
 */
export const FIRST_STATUS_QUIET_MS = 2000;

/**
 * The longest a first status waits from its pod's create while the pod is not placed (decision
 * 0043): a status that says only "not placed yet" reads to every client as no status at all, so it
 * waits for the scheduler's word (placed, or Unschedulable, which is written at once), but no
 * longer than this, so a person still sees the pod's name when the scheduler says nothing.
 */
export const FIRST_STATUS_LIMIT_MS = 10_000;

/** Ready's reasons that only say the start is under way: nothing a client acts on. */
const UNDER_WAY: readonly string[] = [READY_REASON.PodNotReady, READY_REASON.ServiceNotCreated];

/** How long ago this process created a Sandbox's pod, and saw it placed (undefined: not yet). */
export type PodSightings = { createdMs: number; placedMs?: number };

/**
 * The milliseconds a status may still wait before it is written (pure); 0: write it now. Only a
 * Sandbox's first status waits (`since`: undefined when this process did not create its pod), only
 * while it says nothing but "under way", and never past FIRST_STATUS_LIMIT_MS from the create:
 * while the pod is not placed it waits for the scheduler; once placed, FIRST_STATUS_QUIET_MS from
 * then. A condition False for any other reason (a refusal, Unschedulable, a Repo hold) or a
 * container waiting for a reason worth naming is written at once. So is the placed status of a
 * Sandbox whose Ready waits on Repo caches (`awaitsCaches`): the node's cache agent starts its fetch
 * when the status names the node (decision 0010), and a quiet wait there would hold Ready for the
 * whole fetch after the pod is Ready (decision 0056).
 */
export function firstStatusWaitMs(
  prev: SandboxStatus | undefined,
  next: SandboxStatus,
  since: PodSightings | undefined,
  awaitsCaches = false,
): number {
  if (prev || since === undefined) return 0;
  if (next.phase !== "Pending" || next.waiting?.length) return 0;
  const news = (next.conditions ?? []).some(
    (c) => c.status === "False" && !(c.type === CONDITION.Ready && UNDER_WAY.includes(c.reason)),
  );
  const left = FIRST_STATUS_LIMIT_MS - since.createdMs;
  if (news || left <= 0) return 0;
  const placed = next.conditions?.some((c) => c.type === CONDITION.Scheduled && c.status === "True");
  if (!placed) return left;
  if (awaitsCaches) return 0;
  return Math.max(0, Math.min(left, FIRST_STATUS_QUIET_MS - (since.placedMs ?? 0)));
}
