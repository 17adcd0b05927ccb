// Guarding the Sandbox pods themselves (pure): a pod carrying sandbox.jr2.dev/name is made by the
// operator alone and keeps the Sandbox rules; an ephemeral container (kubectl debug) may not sit
// beside the credential holders, mount a Secret or read one into its environment, or run privileged.
import { CUSTODIAN, EFFECTOR, USER } from "../../api/wire";
import { GIT_CREDENTIAL_VOLUME_PREFIX } from "../git-credentials/projection";
import { baselineViolations, hostPortViolations, restrictedViolations } from "./containers";
import { asArray, asObject, str, violation, type Violation } from "./violations";

/** Who made it, and whether it keeps the rules a Sandbox's pod is built to. */
export function podViolations(pod: unknown, creator: string | undefined, operator: string | undefined): Violation[] {
  const out: Violation[] = [];
  if (!operator || creator !== operator) {
    out.push(
      violation(
        "metadata.labels[sandbox.jr2.dev/name]",
        `only the jr2 operator creates Sandbox pods (this request is from ${JSON.stringify(creator ?? "unknown")}): ` +
          "create a Sandbox instead",
      ),
    );
  }
  const spec = asObject(asObject(pod).spec);
  asArray(spec.containers).forEach((c, i) => {
    const path = `spec.containers[${i}]`;
    const sc = asObject(c).securityContext;
    const checks =
      str(asObject(c).name) === USER
        ? baselineViolations(sc, `${path}.securityContext`)
        : restrictedViolations(sc, `${path}.securityContext`);
    // A pod states every context: the builder wrote the hardened one where the Sandbox had none.
    if (sc === undefined && str(asObject(c).name) !== USER) {
      checks.push(violation(`${path}.securityContext`, "is required on a jr2-owned container of a Sandbox pod"));
    }
    out.push(...checks, ...hostPortViolations(c, path));
  });
  asArray(spec.initContainers).forEach((c, i) => {
    const path = `spec.initContainers[${i}]`;
    out.push(
      ...baselineViolations(asObject(c).securityContext, `${path}.securityContext`),
      ...hostPortViolations(c, path),
    );
  });
  asArray(spec.volumes).forEach((v, i) => {
    const vol = asObject(v);
    // The one hostPath a Sandbox pod has is the operator's own Repo cache, repo-<key>.
    if (vol.hostPath !== undefined && !str(vol.name)?.startsWith("repo-")) {
      out.push(violation(`spec.volumes[${i}].hostPath`, "is not allowed in a Sandbox pod"));
    }
  });
  for (const list of ["containers", "initContainers"] as const) {
    asArray(spec[list]).forEach((c, i) => {
      if (list === "containers" && str(asObject(c).name) === EFFECTOR) return;
      asArray(asObject(c).volumeMounts).forEach((m, j) => {
        if (str(asObject(m).name)?.startsWith(GIT_CREDENTIAL_VOLUME_PREFIX)) {
          out.push(
            violation(
              `spec.${list}[${i}].volumeMounts[${j}]`,
              `only the "${EFFECTOR}" container mounts git credentials`,
            ),
          );
        }
      });
    });
  }
  return out;
}

/** The ephemeral containers an update adds (those not in the old pod), checked. */
export function ephemeralViolations(pod: unknown, oldPod: unknown): Violation[] {
  const before = new Set(
    asArray(asObject(asObject(oldPod).spec).ephemeralContainers).map((c) => str(asObject(c).name)),
  );
  const spec = asObject(asObject(pod).spec);
  const secretVolumes = new Set(
    asArray(spec.volumes)
      .map(asObject)
      .filter(
        (v) =>
          v.secret !== undefined ||
          asArray(asObject(v.projected).sources).some((s) => asObject(s).secret !== undefined),
      )
      .map((v) => str(v.name)),
  );
  const out: Violation[] = [];
  asArray(spec.ephemeralContainers).forEach((c, i) => {
    const container = asObject(c);
    if (before.has(str(container.name))) return;
    const path = `spec.ephemeralContainers[${i}]`;
    const target = str(container.targetContainerName);
    if (target === CUSTODIAN || target === EFFECTOR) {
      out.push(
        violation(
          `${path}.targetContainerName`,
          `may not be ${JSON.stringify(target)}: it holds the pod's credentials`,
        ),
      );
    }
    asArray(container.volumeMounts).forEach((m, j) => {
      if (secretVolumes.has(str(asObject(m).name))) {
        out.push(violation(`${path}.volumeMounts[${j}]`, "may not mount a Secret volume"));
      }
    });
    asArray(container.env).forEach((e, j) => {
      if (asObject(asObject(e).valueFrom).secretKeyRef !== undefined) {
        out.push(violation(`${path}.env[${j}].valueFrom.secretKeyRef`, "may not read a Secret"));
      }
    });
    asArray(container.envFrom).forEach((e, j) => {
      if (asObject(e).secretRef !== undefined)
        out.push(violation(`${path}.envFrom[${j}].secretRef`, "may not read a Secret"));
    });
    out.push(...baselineViolations(container.securityContext, `${path}.securityContext`));
  });
  return out;
}
