// spec.gitCredentials -> what the pod gets (pure): each named Secret, by reference, projected
// read-only (0400) into the effector sidecar alone at /run/jr2/secrets/@git/<name>/
// (decision 0009). The operator never reads these Secrets; the kubelet does.
//
// One projected volume per Secret, not one for all: a projected volume has no per-source
// directory, so one volume with a directory per Secret would need each Secret's keys when the pod
// is built, that is reading the Secret (docs/decisions/0009-admission.md).
import type { SandboxSpec } from "../../api/crd";
import type { PodContribution } from "../sandbox/pod";
import { EFFECTOR, GIT_CREDENTIALS_ROOT } from "../../api/wire";

export { GIT_CREDENTIALS_ROOT };
export const GIT_CREDENTIAL_VOLUME_PREFIX = "jr2-git-";

export const gitCredentialVolumeName = (index: number) => `${GIT_CREDENTIAL_VOLUME_PREFIX}${index}`;
export const gitCredentialMountPath = (name: string) => `${GIT_CREDENTIALS_ROOT}/${name}/`;

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
