// The hardened container context (decision 0009): one function,
// used by the pod builder here and by the admission mutation, so a Sandbox that bypassed admission
// still yields a hardened pod.
import type { Container, SecurityContext } from "../../api/crd/generated/corev1";
import type { SandboxSpec } from "../../api/crd";
import { USER } from "../../api/wire";

/** The restricted profile's defaults for a container that states no securityContext. */
export const hardenedSecurityContext = (): SecurityContext => ({
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ["ALL"] },
  seccompProfile: { type: "RuntimeDefault" },
});

/** A container's own context, or the hardened one when it states none. */
export const hardenedContext = (stated: SecurityContext | undefined): SecurityContext =>
  stated ?? hardenedSecurityContext();

/** A sidecar with the hardened context when it states none; the `user` seat is exempt by design. */
export function hardenSidecar(c: Container): Container {
  if (c.name === USER || c.securityContext) return c;
  return { ...c, securityContext: hardenedSecurityContext() };
}

/**
 * The spec with the hardened defaults written in: the primary container's context and every
 * sidecar's but `user`'s. Init containers pass through verbatim (issue 4: no defaults written).
 * Idempotent: hardening a hardened spec changes nothing.
 */
export function hardenSpec<S extends Pick<SandboxSpec, "securityContext" | "sidecars">>(spec: S): S {
  return {
    ...spec,
    securityContext: hardenedContext(spec.securityContext),
    ...(spec.sidecars ? { sidecars: spec.sidecars.map(hardenSidecar) } : {}),
  };
}
