// What spec.gitCredentials must satisfy (pure; decision 0009): valid, unique Secret names; only
// with an effector sidecar; and no container but the effector may reach those Secrets, by a volume,
// env.valueFrom or envFrom. Never echoes a Secret's data (it never sees any). The names of the
// volumes the pod builder projects them into (capabilities/sandbox/pod.ts) are defined here, with
// the rule that reserves them.
import { EFFECTOR } from "../../api/wire";
import { asArray, asObject, str, violation, type Violation } from "./violations";

export const GIT_CREDENTIAL_VOLUME_PREFIX = "jr2-git-";

export const gitCredentialVolumeName = (index: number) => `${GIT_CREDENTIAL_VOLUME_PREFIX}${index}`;

const SECRET_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Whether a volume name is one the projection gives a credential: jr2-git-<n>, exactly. Other
 * jr2-git-* names are the spec's own. */
export const isGitCredentialVolume = (name: string) =>
  name.startsWith(GIT_CREDENTIAL_VOLUME_PREFIX) && /^[0-9]+$/.test(name.slice(GIT_CREDENTIAL_VOLUME_PREFIX.length));

/** A container as the spec places it: its field path and whether it is the effector. */
type Seat = { path: string; container: Record<string, unknown>; effector: boolean };

export function gitCredentialViolations(spec: Record<string, unknown>, seats: Seat[]): Violation[] {
  const out: Violation[] = [];
  const names = new Set<string>();
  asArray(spec.gitCredentials).forEach((c, i) => {
    const name = str(asObject(c).name);
    const path = `spec.gitCredentials[${i}].name`;
    if (!name || name.length > 253 || !SECRET_NAME.test(name)) {
      out.push(violation(path, "must be a Secret name (lower-case letters, digits, '-' and '.')"));
    } else if (names.has(name)) {
      out.push(violation(path, `${JSON.stringify(name)} is listed twice; list each Secret once`));
    } else names.add(name);
  });
  // The operator's own projection volumes (jr2-git-<n>) are the effector's alone, whatever the spec says.
  for (const seat of seats.filter((s) => !s.effector)) {
    asArray(seat.container.volumeMounts).forEach((m, i) => {
      const name = str(asObject(m).name);
      if (name !== undefined && isGitCredentialVolume(name)) {
        out.push(
          violation(
            `${seat.path}.volumeMounts[${i}]`,
            `mounts the git credentials: only the "${EFFECTOR}" container may`,
          ),
        );
      }
    });
  }
  if (!names.size) return out;
  if (!seats.some((s) => s.effector)) {
    out.push(
      violation("spec.gitCredentials", `needs a sidecar named "${EFFECTOR}": only it receives push credentials`),
    );
  }
  // Volumes that carry one of these Secrets, by name.
  const carrying = new Map<string, string>();
  asArray(spec.volumes).forEach((v) => {
    const vol = asObject(v);
    const secrets = [
      str(asObject(vol.secret).secretName),
      ...asArray(asObject(vol.projected).sources).map((s) => str(asObject(asObject(s).secret).name)),
    ];
    const hit = secrets.find((s) => s && names.has(s));
    if (hit && str(vol.name)) carrying.set(str(vol.name)!, hit);
  });
  for (const seat of seats.filter((s) => !s.effector)) {
    asArray(seat.container.volumeMounts).forEach((m, i) => {
      const secret = carrying.get(str(asObject(m).name) ?? "");
      if (secret) out.push(reach(`${seat.path}.volumeMounts[${i}]`, secret));
    });
    asArray(seat.container.env).forEach((e, i) => {
      const secret = str(asObject(asObject(asObject(e).valueFrom).secretKeyRef).name);
      if (secret && names.has(secret)) out.push(reach(`${seat.path}.env[${i}].valueFrom.secretKeyRef`, secret));
    });
    asArray(seat.container.envFrom).forEach((e, i) => {
      const secret = str(asObject(asObject(e).secretRef).name);
      if (secret && names.has(secret)) out.push(reach(`${seat.path}.envFrom[${i}].secretRef`, secret));
    });
  }
  return out;
}

const reach = (path: string, secret: string) =>
  violation(path, `reaches gitCredentials Secret ${JSON.stringify(secret)}: only the "${EFFECTOR}" container may`);
