// The volume rules (pure; decision 0016): the restricted profile's volume types for the whole pod,
// no Kubernetes credential projected into it, the names the operator defines itself reserved
// exactly, and a Repo cache mounted read-only wherever it is mounted. Reads hostile input
// without throwing.
import { SHM_VOLUME, keyOfRepoVolume } from "../../api/wire";
import { isGitCredentialVolume } from "./git-credentials";
import { asArray, asObject, isObject, str, violation, type Violation } from "./violations";

/** The volume types the restricted profile allows (the image volume included). */
export const ALLOWED_VOLUME_TYPES = new Set([
  "configMap",
  "csi",
  "downwardAPI",
  "emptyDir",
  "ephemeral",
  "persistentVolumeClaim",
  "projected",
  "secret",
  "image",
]);

/** What a projected volume may carry: data, never a credential of the pod's own (a service
 * account token, a pod certificate). */
export const ALLOWED_PROJECTIONS = new Set(["configMap", "downwardAPI", "secret", "clusterTrustBundle"]);

/**
 * The names the operator gives its own volumes, exactly: `jr2-shm`, `jr2-git-<n>` (one per
 * gitCredentials entry) and `repo-<key>` (one per Repo; the cache agents read every `repo-*`
 * volume of a pod as a use of that cache, so the whole `repo-` family is the operator's). Any
 * other name, `jr2-*` ones included, is the spec's own.
 */
export const isOperatorVolume = (name: string) =>
  name === SHM_VOLUME || isGitCredentialVolume(name) || keyOfRepoVolume(name) !== undefined;

const TYPES_IN_WORDS = [...ALLOWED_VOLUME_TYPES].join(", ");

/**
 * The volume's type against the restricted profile's list, and its projections. `hostPath`, when
 * `allowHostPath` says this one is allowed (the operator's own Repo cache in a pod), passes.
 */
export function volumeTypeViolations(volume: unknown, path: string, allowHostPath = false): Violation[] {
  const vol = asObject(volume);
  const out: Violation[] = [];
  for (const [key, value] of Object.entries(vol)) {
    if (key === "name" || value === undefined || ALLOWED_VOLUME_TYPES.has(key)) continue;
    if (key === "hostPath") {
      if (!allowHostPath) {
        out.push(violation(`${path}.hostPath`, "is not allowed: a Sandbox never mounts the node's filesystem"));
      }
      continue;
    }
    out.push(
      violation(
        `${path}.${key}`,
        `is not an allowed volume type: the restricted profile allows ${TYPES_IN_WORDS}; use one of those`,
      ),
    );
  }
  asArray(asObject(vol.projected).sources).forEach((source, j) => {
    for (const [key, value] of Object.entries(asObject(source))) {
      if (value === undefined || ALLOWED_PROJECTIONS.has(key)) continue;
      const where = `${path}.projected.sources[${j}].${key}`;
      out.push(
        key === "serviceAccountToken" || key === "podCertificate"
          ? violation(where, "is not allowed: a Sandbox pod holds no Kubernetes API credential; remove it")
          : violation(where, `is not an allowed projection: use ${[...ALLOWED_PROJECTIONS].join(", ")}`),
      );
    }
  });
  return out;
}

/** The Repo cache read-only in this container: every `repo-<key>` mount states readOnly true,
 * or (with `completes`, a spec the mutation will complete) says nothing about it. */
export function repoMountViolations(container: unknown, path: string, completes: boolean): Violation[] {
  const out: Violation[] = [];
  asArray(asObject(container).volumeMounts).forEach((m, i) => {
    const mount = asObject(m);
    const name = str(mount.name);
    if (name === undefined || keyOfRepoVolume(name) === undefined) return;
    const ro = mount.readOnly;
    if (ro === true || (completes && (ro === undefined || ro === null))) return;
    out.push(
      violation(
        `${path}.volumeMounts[${i}].readOnly`,
        `must be true: the Repo cache ${JSON.stringify(name)} is mounted read-only in every container` +
          (completes ? " (leave it out and the operator writes true)" : ""),
      ),
    );
  });
  return out;
}

/** Whether a value is a volume list entry with a name (hostile input may hold anything). */
export const volumeName = (v: unknown) => (isObject(v) ? str(v.name) : undefined);
