// Sandbox -> its one Pod (pure; decision 0013): the Harness is the primary container and the
// sidecars are opaque fragments scheduled without being understood; jr2's Orchestrator (`crFor`) is the client (decision 0001).
import type { kind } from "kubernetes-fluent-client";
import type { Container, Probe, Volume, VolumeMount } from "../../api/crd/generated/corev1";
import type { SandboxSpec } from "../../api/crd";
import {
  DEFAULT_FS_GROUP,
  EFFECTOR,
  GIT_CREDENTIALS_ROOT,
  HARNESS,
  HARNESS_PORT,
  SANDBOX_NAME_LABEL,
  SHM_VOLUME,
} from "../../api/wire";
import { hardenSidecar, hardenSpec, hardenedContext } from "../../api/hardening";
import { gitCredentialVolumeName } from "../rules/git-credentials";
import { type SandboxRef, managedLabels, ownerReference } from "./refs";

export { GIT_CREDENTIALS_ROOT };

/**
 * What a part other than the pod builder adds to the pod: the gitCredentials projection (below,
 * decision 0009) and the Repo caches (capabilities/repo/caches.ts, decision 0010) each contribute
 * volumes, mounts and affinity here.
 */
export type PodContribution = {
  volumes?: Volume[];
  harnessMounts?: VolumeMount[];
  /** Mounts added to the named sidecar only. */
  sidecarMounts?: Record<string, VolumeMount[]>;
  affinity?: kind.Pod["spec"] extends infer S ? (S extends { affinity?: infer A } ? A : never) : never;
};

// Every second, the kubelet's shortest period (decision 0056). The Harness binds its port before it
// loads and answers the probe it held once it serves (decision 0062): a 2 s timeout lets the first
// probe wait for that answer instead of failing and coming again a period later. Four misses mark
// it unready: 4 s for a Harness that refuses, 8 s for one that hangs (6 s before).
export const DEFAULT_READINESS_PROBE = (): Probe => ({
  httpGet: { path: "/healthz", port: HARNESS_PORT },
  periodSeconds: 1,
  timeoutSeconds: 2,
  failureThreshold: 4,
});

export function harnessContainer(spec: SandboxSpec, extraMounts: VolumeMount[]): Container {
  return {
    name: HARNESS,
    image: spec.image,
    ...(spec.command ? { command: spec.command } : {}),
    ...(spec.args ? { args: spec.args } : {}),
    ...(spec.env ? { env: spec.env } : {}),
    ...(spec.envFrom ? { envFrom: spec.envFrom } : {}),
    ...(spec.resources ? { resources: spec.resources } : {}),
    ports: [{ name: "http", containerPort: HARNESS_PORT, protocol: "TCP" }],
    readinessProbe: spec.readinessProbe ?? DEFAULT_READINESS_PROBE(),
    terminationMessagePolicy: "FallbackToLogsOnError",
    securityContext: hardenedContext(spec.securityContext),
    volumeMounts: [...(spec.volumeMounts ?? []), { name: SHM_VOLUME, mountPath: "/dev/shm" }, ...extraMounts],
  };
}

/** /dev/shm: memory-backed, sized by spec.shmSize, mounted in the Harness container alone. */
export function shmVolume(spec: SandboxSpec): Volume {
  return {
    name: SHM_VOLUME,
    emptyDir: { medium: "Memory", ...(spec.shmSize !== undefined ? { sizeLimit: spec.shmSize } : {}) },
  };
}

export const gitCredentialMountPath = (name: string) => `${GIT_CREDENTIALS_ROOT}/${name}/`;

/**
 * spec.gitCredentials -> what the pod gets: each named Secret, by reference, projected read-only
 * (0400) into the effector sidecar alone at /run/jr2/secrets/@git/<name>/ (decision 0009). The
 * operator never reads these Secrets; the kubelet does.
 *
 * One projected volume per Secret, not one for all: a projected volume has no per-source
 * directory, so one volume with a directory per Secret would need each Secret's keys when the pod
 * is built, that is reading the Secret (docs/decisions/0009-admission.md).
 */
export function gitCredentialsProjection(spec: Pick<SandboxSpec, "gitCredentials">): PodContribution | undefined {
  const creds = spec.gitCredentials ?? [];
  if (!creds.length) return undefined;
  return {
    volumes: creds.map(({ name }, i) => ({
      name: gitCredentialVolumeName(i),
      projected: { defaultMode: 0o400, sources: [{ secret: { name } }] },
    })),
    sidecarMounts: {
      [EFFECTOR]: creds.map(({ name }, i) => ({
        name: gitCredentialVolumeName(i),
        mountPath: gitCredentialMountPath(name),
        readOnly: true,
      })),
    },
  };
}

export function buildPod(sandbox: SandboxRef & { spec: SandboxSpec }, contributions: PodContribution[] = []): kind.Pod {
  // The same field-by-field hardening as the admission mutation (decision 0016), for a Sandbox
  // that bypassed it: contexts completed, Repo mounts read-only in every container.
  const spec = hardenSpec(sandbox.spec);
  // The push credentials go to the effector alone (decision 0009).
  const git = gitCredentialsProjection(spec);
  const parts = git ? [git, ...contributions] : contributions;
  const volumes = [...(spec.volumes ?? []), shmVolume(spec), ...parts.flatMap((p) => p.volumes ?? [])];
  const harnessMounts = parts.flatMap((p) => p.harnessMounts ?? []);
  const sidecars = (spec.sidecars ?? []).map((c) => {
    const extra = parts.flatMap((p) => p.sidecarMounts?.[c.name] ?? []);
    const hardened = hardenSidecar(c);
    return extra.length ? { ...hardened, volumeMounts: [...(hardened.volumeMounts ?? []), ...extra] } : hardened;
  });
  const affinity = parts.map((p) => p.affinity).find((a) => a !== undefined);
  const pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: sandbox.metadata.name,
      namespace: sandbox.metadata.namespace,
      labels: managedLabels(sandbox.metadata.name),
      // The label again as an annotation: a node's container runtime hands a pod's annotations, not its
      // labels, to the network plugins, and the node closes its own addresses to a Sandbox pod before
      // its containers start (decision 0051).
      annotations: { [SANDBOX_NAME_LABEL]: sandbox.metadata.name },
      ownerReferences: [ownerReference(sandbox)],
    },
    spec: {
      // The Agent runs code in this pod: it gets no Kubernetes credential and no view of other
      // Services or of its sidecars' processes (decision 0009).
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      shareProcessNamespace: false,
      restartPolicy: "Always",
      // RuntimeDefault for every container that names no profile of its own: the `user` seat and
      // init containers, whose contexts the Sandbox states (decision 0048).
      securityContext: { fsGroup: spec.fsGroup ?? DEFAULT_FS_GROUP, seccompProfile: { type: "RuntimeDefault" } },
      ...(spec.podResources ? { resources: spec.podResources } : {}),
      ...(spec.nodeSelector ? { nodeSelector: spec.nodeSelector } : {}),
      ...(spec.tolerations ? { tolerations: spec.tolerations } : {}),
      ...(spec.priorityClassName ? { priorityClassName: spec.priorityClassName } : {}),
      ...(spec.runtimeClassName ? { runtimeClassName: spec.runtimeClassName } : {}),
      ...(spec.hostAliases?.length ? { hostAliases: spec.hostAliases } : {}),
      ...(affinity ? { affinity } : {}),
      ...(spec.initContainers?.length ? { initContainers: spec.initContainers } : {}),
      containers: [harnessContainer(spec, harnessMounts), ...sidecars],
      volumes,
    },
  };
  return pod as unknown as kind.Pod;
}
