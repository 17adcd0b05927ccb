// The container checks, after the Pod Security Standards (decisions 0009 and 0016): jr2-owned
// seats meet the restricted profile; the user seat and init containers meet the baseline (a
// privileged init container is a host escape like any other). Pure; reads hostile input without
// throwing.
//
// Two readings of the restricted profile: `weakerThanRestricted` judges a context as a Sandbox
// states it, refusing only what states something weaker (what it leaves out, the mutation
// completes: api/hardening.ts); `restrictedViolations` judges a context as it
// will run (a pod's), where a field left out is a field missing.
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

/** The SELinux types a container may ask for (the baseline's list; spc_t, say, is unconfined). */
export const SELINUX_TYPES = new Set(["container_t", "container_init_t", "container_kvm_t"]);

const OWNED = 'for a jr2-owned container (only the "user" container may run as root)';
const unstated = (v: unknown) => v === undefined || v === null;
const show = (v: unknown) => (typeof v === "string" ? JSON.stringify(v) : `a ${v === null ? "null" : typeof v}`);

/** The restricted profile, for a context as it will run: every field stated and hardened. An
 * absent context passes (the caller decides whether one is required). `who` ends each message:
 * whose context is held to it. */
export function restrictedViolations(sc: unknown, path: string, who: string = OWNED): Violation[] {
  if (unstated(sc)) return [];
  if (!isObject(sc)) return [violation(path, "must be an object")];
  const out: Violation[] = [];
  if (sc.privileged === true) out.push(violation(`${path}.privileged`, `must not be true ${who}`));
  if (sc.runAsNonRoot !== true) out.push(violation(`${path}.runAsNonRoot`, `must be true ${who}`));
  if (sc.runAsUser === 0) out.push(violation(`${path}.runAsUser`, `must not be 0 (root) ${who}`));
  if (sc.allowPrivilegeEscalation !== false) {
    out.push(violation(`${path}.allowPrivilegeEscalation`, `must be false ${who}`));
  }
  const caps = asObject(sc.capabilities);
  if (!asArray(caps.drop).includes("ALL"))
    out.push(violation(`${path}.capabilities.drop`, `must include "ALL" ${who}`));
  if (asArray(caps.add).length) out.push(violation(`${path}.capabilities.add`, `must be empty ${who}`));
  const seccomp = str(asObject(sc.seccompProfile).type);
  if (seccomp !== "RuntimeDefault" && seccomp !== "Localhost") {
    out.push(violation(`${path}.seccompProfile.type`, `must be "RuntimeDefault" or "Localhost" ${who}`));
  }
  // Restricted includes baseline: what is refused even to the user seat.
  out.push(...sharedControlViolations(sc, path));
  return out;
}

/**
 * The restricted profile, for a context as a Sandbox states it: only what states something weaker
 * than the hardened context is refused. A field left out passes: the mutation (and the pod
 * builder) writes the hardened value into it.
 */
export function weakerThanRestricted(sc: unknown, path: string): Violation[] {
  if (unstated(sc)) return [];
  if (!isObject(sc)) return [violation(path, "must be an object")];
  const out: Violation[] = [];
  if (sc.privileged === true) out.push(violation(`${path}.privileged`, `must not be true ${OWNED}`));
  if (!unstated(sc.runAsNonRoot) && sc.runAsNonRoot !== true) {
    out.push(violation(`${path}.runAsNonRoot`, `must be true ${OWNED}; leave it out and the operator writes true`));
  }
  if (sc.runAsUser === 0) out.push(violation(`${path}.runAsUser`, `must not be 0 (root) ${OWNED}`));
  if (!unstated(sc.allowPrivilegeEscalation) && sc.allowPrivilegeEscalation !== false) {
    out.push(violation(`${path}.allowPrivilegeEscalation`, `must be false ${OWNED}`));
  }
  if (!unstated(sc.capabilities)) {
    if (!isObject(sc.capabilities)) out.push(violation(`${path}.capabilities`, "must be an object"));
    else {
      const { drop, add } = sc.capabilities;
      if (!unstated(drop) && !asArray(drop).includes("ALL")) {
        out.push(
          violation(
            `${path}.capabilities.drop`,
            `must include "ALL" ${OWNED}; leave it out and the operator writes ["ALL"]`,
          ),
        );
      }
      if (asArray(add).length || (!unstated(add) && !Array.isArray(add))) {
        out.push(violation(`${path}.capabilities.add`, `must be empty ${OWNED}`));
      }
    }
  }
  if (!unstated(sc.seccompProfile)) {
    const type = asObject(sc.seccompProfile).type;
    if (type === "Unconfined") {
      out.push(violation(`${path}.seccompProfile.type`, `must not be "Unconfined" ${OWNED}; use "RuntimeDefault"`));
    } else if (!isObject(sc.seccompProfile) || (type !== "RuntimeDefault" && type !== "Localhost" && !unstated(type))) {
      out.push(violation(`${path}.seccompProfile.type`, `must be "RuntimeDefault" or "Localhost" ${OWNED}`));
    } else if (unstated(type) && !unstated(sc.seccompProfile.localhostProfile)) {
      out.push(violation(`${path}.seccompProfile.type`, 'must be "Localhost" when localhostProfile is stated'));
    }
  }
  out.push(...sharedControlViolations(sc, path));
  return out;
}

/** The baseline profile: what even the user seat and init containers may not do. */
export function baselineViolations(sc: unknown, path: string): Violation[] {
  if (unstated(sc)) return [];
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
  out.push(...sharedControlViolations(sc, path));
  return out;
}

/**
 * Baseline controls both profiles share, for a container's context and (with `pod`) the pod's:
 * an unmasked /proc, a Windows host process, AppArmor and SELinux left unconfined, a seccomp
 * profile file outside the kubelet's profile root.
 */
export function sharedControlViolations(sc: Record<string, unknown>, path: string, pod = false): Violation[] {
  const out: Violation[] = [];
  if (!pod && !unstated(sc.procMount) && sc.procMount !== "Default") {
    out.push(violation(`${path}.procMount`, 'must be "Default"'));
  }
  if (asObject(sc.windowsOptions).hostProcess === true) {
    out.push(violation(`${path}.windowsOptions.hostProcess`, "must not be true"));
  }
  out.push(...seccompFileViolations(sc.seccompProfile, `${path}.seccompProfile`));
  out.push(...appArmorViolations(sc.appArmorProfile, `${path}.appArmorProfile`));
  out.push(...seLinuxViolations(sc.seLinuxOptions, `${path}.seLinuxOptions`));
  return out;
}

/** A Localhost seccomp profile is a file under the kubelet's profile root: a descending path. */
function seccompFileViolations(profile: unknown, path: string): Violation[] {
  const p = asObject(profile);
  if (p.type !== "Localhost") return [];
  // The API server refuses a Localhost profile that names no file; here, one that climbs out.
  const file = p.localhostProfile;
  if (typeof file === "string" && (file.startsWith("/") || file.split("/").includes(".."))) {
    return [
      violation(
        `${path}.localhostProfile`,
        "must be a path inside the kubelet's seccomp profile root (relative, without '..'); or use \"RuntimeDefault\"",
      ),
    ];
  }
  return [];
}

function appArmorViolations(profile: unknown, path: string): Violation[] {
  if (unstated(profile)) return [];
  const type = asObject(profile).type;
  if (type === "Unconfined") return [violation(`${path}.type`, 'must not be "Unconfined"; use "RuntimeDefault"')];
  if (type !== "RuntimeDefault" && type !== "Localhost") {
    return [
      violation(`${path}.type`, `${show(type)} is no AppArmor profile type: use "RuntimeDefault" or "Localhost"`),
    ];
  }
  return [];
}

function seLinuxViolations(options: unknown, path: string): Violation[] {
  if (unstated(options)) return [];
  if (!isObject(options)) return [violation(path, "must be an object")];
  const out: Violation[] = [];
  for (const key of ["user", "role"] as const) {
    if (!unstated(options[key]) && options[key] !== "") {
      out.push(
        violation(
          `${path}.${key}`,
          "must not be set: a custom SELinux user or role escapes the container's confinement; remove it",
        ),
      );
    }
  }
  const type = options.type;
  if (!unstated(type) && type !== "" && !(typeof type === "string" && SELINUX_TYPES.has(type))) {
    out.push(
      violation(
        `${path}.type`,
        `${show(type)} is not a confined container type: use ${[...SELINUX_TYPES].join(", ")} or leave it out`,
      ),
    );
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
