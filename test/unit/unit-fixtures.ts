// Hand-built objects shared by the unit tests (not a test file itself).
import type { kind } from "kubernetes-fluent-client";
import type { SandboxStatus } from "../../api/crd";

export const NAME = "sb";
export const NAMESPACE = "team-a";
export const POD_UID = "pod-uid-1";
export const NODE = "node-a";

export type PodCondition = { type: string; status: "True" | "False" | "Unknown"; reason?: string; message?: string };

export type PodShape = {
  uid?: string;
  nodeName?: string;
  phase?: string;
  reason?: string;
  message?: string;
  deletionTimestamp?: string;
  conditions?: PodCondition[];
  containerStatuses?: object[];
  initContainerStatuses?: object[];
};

/** A Pod as the API server would report it, cast: only the fields a test states are set. */
export function podOf(p: PodShape = {}): kind.Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: NAME,
      namespace: NAMESPACE,
      uid: p.uid ?? POD_UID,
      ...(p.deletionTimestamp ? { deletionTimestamp: p.deletionTimestamp } : {}),
    },
    spec: { containers: [{ name: "harness", image: "harness:1" }], ...(p.nodeName ? { nodeName: p.nodeName } : {}) },
    status: {
      phase: p.phase ?? "Pending",
      ...(p.reason ? { reason: p.reason } : {}),
      ...(p.message ? { message: p.message } : {}),
      conditions: p.conditions ?? [],
      ...(p.containerStatuses ? { containerStatuses: p.containerStatuses } : {}),
      ...(p.initContainerStatuses ? { initContainerStatuses: p.initContainerStatuses } : {}),
    },
  } as unknown as kind.Pod;
}

const SCHEDULED: PodCondition = { type: "PodScheduled", status: "True" };

/** Placed on NODE, running, Ready. */
export const readyPod = (p: PodShape = {}) =>
  podOf({
    nodeName: NODE,
    phase: "Running",
    conditions: [SCHEDULED, { type: "Ready", status: "True" }],
    ...p,
  });

/** Placed on NODE, running, not Ready yet. */
export const unreadyPod = (p: PodShape = {}) =>
  podOf({
    nodeName: NODE,
    phase: "Running",
    conditions: [
      SCHEDULED,
      {
        type: "Ready",
        status: "False",
        reason: "ContainersNotReady",
        message: "containers with unready status: [harness]",
      },
    ],
    ...p,
  });

export const serviceOf = (): kind.Service =>
  ({ apiVersion: "v1", kind: "Service", metadata: { name: NAME, namespace: NAMESPACE } }) as kind.Service;

export const sandboxOf = (
  metadata: { generation?: number; deletionTimestamp?: string } = {},
  status?: SandboxStatus,
) => ({
  metadata: { name: NAME, namespace: NAMESPACE, ...metadata },
  ...(status ? { status } : {}),
});

/** The named condition of a status, or undefined. */
export const conditionOf = (status: SandboxStatus, type: string) => status.conditions?.find((c) => c.type === type);

/** A promise the test settles itself. */
export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
