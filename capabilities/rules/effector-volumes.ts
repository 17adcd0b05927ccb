// The Effector's volumes are the effector's alone (pure; decision 0070). The Orchestrator composes
// them for the `effector` sidecar (orchestrator/workspaces/compose.ts): its key and scratch, the
// effect Secrets its create declared (`effector-secret-<n>`, at /run/jr2/secrets/<secret>/) and the
// installation's trust bundle, every one named `effector-*`. No other container (the Harness, the
// User Container, the Custodian, an init container) may mount a volume so named, nor reach a Secret
// one of them carries by another volume, env.valueFrom or envFrom: the Agent's seats never hold what
// an Effect spends. Never echoes a Secret's data (it never sees any).
import { EFFECTOR, EFFECTOR_VOLUME_PREFIX } from "../../api/wire";
import { asArray, asObject, str, violation, type Violation } from "./violations";

/** Whether a volume's name is of the Effector's family: `effector-*`. */
export const isEffectorVolume = (name: string) => name.startsWith(EFFECTOR_VOLUME_PREFIX);

/** A container and its field path; `effector`: it is the one the rule lets mount them. */
type Seat = { path: string; container: Record<string, unknown>; effector: boolean };

/** The Secrets a volume carries, directly or projected. */
const secretsOf = (volume: Record<string, unknown>): string[] =>
  [
    str(asObject(volume.secret).secretName),
    ...asArray(asObject(volume.projected).sources).map((s) => str(asObject(asObject(s).secret).name)),
  ].filter((s): s is string => !!s);

const FIX = `only the "${EFFECTOR}" container may (decision 0070): remove it from this container`;

/**
 * Every seat but the effector: no mount of an `effector-*` volume, and no other way to a Secret an
 * `effector-*` volume carries (a volume of its own carrying it, env.valueFrom.secretKeyRef, envFrom).
 * `volumes`: the pod's or the Sandbox spec's volume list.
 */
export function effectorVolumeViolations(volumes: unknown, seats: Seat[]): Violation[] {
  const vols = asArray(volumes).map(asObject);
  const effectorSecrets = new Set(vols.filter((v) => isEffectorVolume(str(v.name) ?? "")).flatMap((v) => secretsOf(v)));
  // The other volumes that carry one of those Secrets, by name.
  const carrying = new Map<string, string>();
  for (const v of vols) {
    const name = str(v.name);
    if (!name || isEffectorVolume(name)) continue;
    const hit = secretsOf(v).find((s) => effectorSecrets.has(s));
    if (hit) carrying.set(name, hit);
  }
  const out: Violation[] = [];
  for (const seat of seats.filter((s) => !s.effector)) {
    asArray(seat.container.volumeMounts).forEach((m, i) => {
      const name = str(asObject(m).name) ?? "";
      const where = `${seat.path}.volumeMounts[${i}]`;
      if (isEffectorVolume(name))
        out.push(
          violation(
            where,
            `mounts ${JSON.stringify(name)}, one of the Effector's volumes (its key, scratch, effect secrets or ` +
              `trust bundle): ${FIX}`,
          ),
        );
      else if (carrying.has(name)) out.push(reach(where, carrying.get(name)!));
    });
    asArray(seat.container.env).forEach((e, i) => {
      const secret = str(asObject(asObject(asObject(e).valueFrom).secretKeyRef).name);
      if (secret && effectorSecrets.has(secret))
        out.push(reach(`${seat.path}.env[${i}].valueFrom.secretKeyRef`, secret));
    });
    asArray(seat.container.envFrom).forEach((e, i) => {
      const secret = str(asObject(asObject(e).secretRef).name);
      if (secret && effectorSecrets.has(secret)) out.push(reach(`${seat.path}.envFrom[${i}].secretRef`, secret));
    });
  }
  return out;
}

const reach = (path: string, secret: string) =>
  violation(path, `reaches Secret ${JSON.stringify(secret)}, which the Effector's volumes carry: ${FIX}`);
