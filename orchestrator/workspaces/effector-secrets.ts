// The effect secrets a workspace's Effector mounts (decision 0070), pure: the volumes and mounts the
// composition writes for them, and the same list read back from a Sandbox's spec, so a restarted
// Orchestrator (the Effects resolver) knows what a workspace declared without a record of its own.
// The Sandbox's spec is immutable: what its create declared is what its effector mounts, for its life.
//
// One projected volume per Secret (`effector-secret-<n>`), its items the declared keys (path `<key>`,
// 0400), mounted read-only in the effector alone at `/run/jr2/secrets/<secret>/`: a sibling of the
// operator's `@git/<name>/` mounts (no Secret's name takes `@git`), never nested in another mount.
// The Orchestrator never reads these Secrets: the kubelet mounts them.
import type { SecretRef } from "../../api/effects";
import type { SandboxSpec } from "../../api/crd";
import type { Volume, VolumeMount } from "../../api/crd/generated/corev1";
import { EFFECTOR, EFFECT_SECRET_VOLUME_PREFIX, effectSecretMountPath, effectSecretVolumeName } from "../../api/wire";

/** The effector's volumes and mounts for `refs`, one volume per Secret in order of first mention. */
export function effectSecretVolumes(refs: readonly SecretRef[]): { volumes: Volume[]; mounts: VolumeMount[] } {
  const bySecret = new Map<string, string[]>();
  for (const r of refs) {
    const keys = bySecret.get(r.secret) ?? [];
    if (!keys.includes(r.key)) keys.push(r.key);
    bySecret.set(r.secret, keys);
  }
  const entries = [...bySecret];
  return {
    volumes: entries.map(([name, keys], i) => ({
      name: effectSecretVolumeName(i),
      projected: {
        defaultMode: 0o400,
        sources: [{ secret: { name, items: keys.map((key) => ({ key, path: key })) } }],
      },
    })),
    mounts: entries.map(([name], i) => ({
      name: effectSecretVolumeName(i),
      mountPath: effectSecretMountPath(name),
      readOnly: true,
    })),
  };
}

const isEffectSecretVolume = (name: string | undefined) =>
  !!name &&
  name.startsWith(EFFECT_SECRET_VOLUME_PREFIX) &&
  /^[0-9]+$/.test(name.slice(EFFECT_SECRET_VOLUME_PREFIX.length));

/**
 * The effect secrets a Sandbox's effector mounts, read back from its spec: each `effector-secret-<n>`
 * volume the effector sidecar mounts at `/run/jr2/secrets/<secret>/`, each of its items a `{secret,
 * key}`, in the composition's order. None without an effector. What the Effects resolver checks an
 * Effect's secret references against (beside the pod config's effector.secrets and their origins).
 */
export function declaredEffectSecrets(sandbox: { spec?: Partial<SandboxSpec> }): SecretRef[] {
  const spec = sandbox.spec;
  const effector = (spec?.sidecars ?? []).find((c) => c.name === EFFECTOR);
  if (!effector) return [];
  const mounted = new Map((effector.volumeMounts ?? []).map((m) => [m.name, m.mountPath]));
  const out: SecretRef[] = [];
  for (const v of spec?.volumes ?? []) {
    if (!isEffectSecretVolume(v.name)) continue;
    for (const source of v.projected?.sources ?? []) {
      const secret = source.secret?.name;
      if (!secret || mounted.get(v.name) !== effectSecretMountPath(secret)) continue;
      for (const item of source.secret?.items ?? []) out.push({ secret, key: item.key });
    }
  }
  return out;
}
