// The container checks, after the Pod Security Standards (decision 0009): jr2-owned seats
// meet the restricted profile; the user seat and init containers meet the baseline (a privileged
// init container is a host escape like any other). Pure; reads hostile input without throwing.
import { asArray, asObject, isObject, str, violation, type Violation } from "./violations";

/** Capabilities the baseline profile allows a container to add. */
export const BASELINE_CAPABILITIES = new Set([
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT",
]);

const OWNED = 'for a jr2-owned container (only the "user" container may run as root)';

/** The restricted profile, for a container whose securityContext is stated. An absent one is
 * hardened by the operator (capabilities/sandbox/hardening.ts) and passes. */
export function restrictedViolations(sc: unknown, path: string): Violation[] {
  if (sc === undefined || sc === null) return [];
  if (!isObject(sc)) return [violation(path, "must be an object")];
  const out: Violation[] = [];
  if (sc.privileged === true) out.push(violation(`${path}.privileged`, `must not be true ${OWNED}`));
  if (sc.runAsNonRoot !== true) out.push(violation(`${path}.runAsNonRoot`, `must be true ${OWNED}`));
  if (sc.runAsUser === 0) out.push(violation(`${path}.runAsUser`, `must not be 0 (root) ${OWNED}`));
  if (sc.allowPrivilegeEscalation !== false) {
    out.push(violation(`${path}.allowPrivilegeEscalation`, `must be false ${OWNED}`));
  }
  const caps = asObject(sc.capabilities);
  if (!asArray(caps.drop).includes("ALL"))
    out.push(violation(`${path}.capabilities.drop`, `must include "ALL" ${OWNED}`));
  if (asArray(caps.add).length) out.push(violation(`${path}.capabilities.add`, `must be empty ${OWNED}`));
  const seccomp = str(asObject(sc.seccompProfile).type);
  if (seccomp !== "RuntimeDefault" && seccomp !== "Localhost") {
    out.push(violation(`${path}.seccompProfile.type`, `must be "RuntimeDefault" or "Localhost" ${OWNED}`));
  }
  // Restricted includes baseline: what is refused even to the user seat.
  out.push(...hostControlViolations(sc, path));
  return out;
}

/** The baseline profile: what even the user seat and init containers may not do. */
export function baselineViolations(sc: unknown, path: string): Violation[] {
  if (sc === undefined || sc === null) return [];
  if (!isObject(sc)) return [violation(path, "must be an object")];
  const out: Violation[] = [];
  if (sc.privileged === true)
    out.push(violation(`${path}.privileged`, "must not be true: a privileged container owns the node"));
  asArray(asObject(sc.capabilities).add).forEach((cap, i) => {
    const name = typeof cap === "string" ? cap.replace(/^CAP_/, "") : `(a ${typeof cap}, not a capability name)`;
    if (!BASELINE_CAPABILITIES.has(name)) {
      out.push(
        violation(`${path}.capabilities.add[${i}]`, `${JSON.stringify(name)} is beyond the baseline set; remove it`),
      );
    }
  });
  if (str(asObject(sc.seccompProfile).type) === "Unconfined") {
    out.push(violation(`${path}.seccompProfile.type`, 'must not be "Unconfined"; use "RuntimeDefault"'));
  }
  out.push(...hostControlViolations(sc, path));
  return out;
}

/** Baseline controls neither profile's other checks cover: an unmasked /proc, a Windows host process. */
function hostControlViolations(sc: Record<string, unknown>, path: string): Violation[] {
  const out: Violation[] = [];
  if (sc.procMount !== undefined && sc.procMount !== "Default") {
    out.push(violation(`${path}.procMount`, 'must be "Default"'));
  }
  if (asObject(sc.windowsOptions).hostProcess === true) {
    out.push(violation(`${path}.windowsOptions.hostProcess`, "must not be true"));
  }
  return out;
}

/** No container binds a port on the node. */
export function hostPortViolations(container: unknown, path: string): Violation[] {
  return asArray(asObject(container).ports).flatMap((p, i) =>
    asObject(p).hostPort !== undefined && asObject(p).hostPort !== 0
      ? [violation(`${path}.ports[${i}].hostPort`, "host ports are not allowed; expose the port through the Service")]
      : [],
  );
}
