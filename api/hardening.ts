// The hardened container context (decisions 0009 and 0016): the restricted profile, stated once
// here for the operator and the Orchestrator alike, and one set of functions completing a Sandbox's
// contexts from it, used by the pod builder (capabilities/sandbox/pod.ts) and (as generated CEL) by
// the admission defaults, so a Sandbox that bypassed admission still yields a hardened pod. In
// api/ because these defaults are what a stored Sandbox says (decision 0026), words on the wire as
// api/wire.ts's fsGroup and idleTimeout defaults are, and because a companion may import api/ and
// never a capability (decision 0012).
//
// Field by field: a jr2-owned seat (the Harness and every sidecar but `user`) gets the hardened
// value of each field its context says nothing about, and keeps each field it states; admission
// refuses a stated value weaker than the hardened one. The `user` seat (what jr2 does not own) gets
// one default only: it drops NET_RAW unless its context says otherwise (decision 0048: it shares
// the pod's network with the Custodian's plain-HTTP traffic). Init containers pass through. Every mount
// of a Repo cache (`repo-<key>`), in any container, is read-only: a mount that says nothing about
// it gets `readOnly: true`.
//
// The API server writes the same defaults into the stored Sandbox with a MutatingAdmissionPolicy
// generated from these values (capabilities/admission/policy.ts, decision 0026). Reads any spec
// (one stored without admission too) without throwing: a value of the wrong shape is left as it
// is, for the validation to refuse.
import type { Container, SecurityContext } from "./crd/generated/corev1";
import type { SandboxSpec } from "./crd";
import { USER, keyOfRepoVolume } from "./wire";

/** What a composer fixes beside the profile: a user and group, a read-only root filesystem. */
export type Fixed = { runAsUser?: number; runAsGroup?: number; readOnlyRootFilesystem?: boolean };

/**
 * The restricted profile's values: what a jr2-owned seat gets for each field it leaves out, and,
 * with what the Orchestrator fixes besides (`fixed`), the context it states in full for the
 * containers it composes (orchestrator/workspaces/compose.ts). The keys keep one order, the generated
 * policy's CEL (capabilities/admission/policy.ts) and the composed pods' as before.
 */
export const hardenedSecurityContext = (fixed: Fixed = {}): SecurityContext => ({
  runAsNonRoot: true,
  ...(fixed.runAsUser !== undefined ? { runAsUser: fixed.runAsUser } : {}),
  ...(fixed.runAsGroup !== undefined ? { runAsGroup: fixed.runAsGroup } : {}),
  allowPrivilegeEscalation: false,
  ...(fixed.readOnlyRootFilesystem !== undefined ? { readOnlyRootFilesystem: fixed.readOnlyRootFilesystem } : {}),
  capabilities: { drop: ["ALL"] },
  seccompProfile: { type: "RuntimeDefault" },
});

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);
/** JSON null says nothing, as an absent key does. */
const unstated = (v: unknown) => v === undefined || v === null;

/**
 * A jr2-owned seat's context: the stated one, completed field by field (runAsNonRoot,
 * allowPrivilegeEscalation, capabilities.drop, seccompProfile.type), or the hardened one when it
 * states none. Stated fields are kept as stated, weaker ones included: admission refuses those.
 * Idempotent.
 */
export function hardenedContext(stated: SecurityContext | undefined): SecurityContext {
  if (unstated(stated)) return hardenedSecurityContext();
  if (!isObject(stated)) return stated as SecurityContext;
  // Each value from the one profile above, fresh per call.
  const profile = hardenedSecurityContext();
  const out: Obj = { ...stated };
  if (unstated(out.runAsNonRoot)) out.runAsNonRoot = profile.runAsNonRoot;
  if (unstated(out.allowPrivilegeEscalation)) out.allowPrivilegeEscalation = profile.allowPrivilegeEscalation;
  if (unstated(out.capabilities)) out.capabilities = profile.capabilities;
  else if (isObject(out.capabilities) && unstated(out.capabilities.drop)) {
    out.capabilities = { ...out.capabilities, drop: profile.capabilities?.drop };
  }
  if (unstated(out.seccompProfile)) out.seccompProfile = profile.seccompProfile;
  else if (
    isObject(out.seccompProfile) &&
    unstated(out.seccompProfile.type) &&
    unstated(out.seccompProfile.localhostProfile)
  ) {
    // An empty profile says nothing; one naming only a localhostProfile is refused, not guessed.
    out.seccompProfile = { ...out.seccompProfile, type: profile.seccompProfile?.type };
  }
  return out as SecurityContext;
}

/** The one capability the `user` seat loses by default (decision 0048): raw sockets would let it
 * read and forge the pod's loopback traffic, the Custodian's plain HTTP among it. */
export const USER_SEAT_DROP = "NET_RAW";

/**
 * The `user` seat's context: `capabilities.drop: [NET_RAW]` written where it says nothing about
 * dropping; every other field as stated (none written). A seat that states `capabilities.drop`,
 * even `[]`, keeps what it states: that is the opt-out (adding NET_RAW is beyond the baseline
 * admission holds the seat to). Idempotent.
 */
export function userSeatContext(stated: SecurityContext | undefined): SecurityContext {
  const drop = [USER_SEAT_DROP];
  if (unstated(stated)) return { capabilities: { drop } };
  if (!isObject(stated)) return stated as SecurityContext;
  const caps = (stated as Obj).capabilities;
  if (unstated(caps)) return { ...stated, capabilities: { drop } };
  if (!isObject(caps) || !unstated(caps.drop)) return stated;
  return { ...stated, capabilities: { ...caps, drop } } as SecurityContext;
}

/** Mounts with every `repo-<key>` mount that says nothing about readOnly made read-only. */
export function readOnlyRepoMounts<M>(mounts: M): M {
  if (!Array.isArray(mounts)) return mounts;
  return mounts.map((m: unknown) =>
    isObject(m) && typeof m.name === "string" && keyOfRepoVolume(m.name) !== undefined && unstated(m.readOnly)
      ? { ...m, readOnly: true }
      : m,
  ) as M;
}

const withReadOnlyRepoMounts = (c: Obj): Obj =>
  Array.isArray(c.volumeMounts) ? { ...c, volumeMounts: readOnlyRepoMounts(c.volumeMounts) } : c;

/** A sidecar hardened: its context completed (the `user` seat's only its NET_RAW drop), its Repo
 * mounts read-only. */
export function hardenSidecar(c: Container): Container {
  if (!isObject(c)) return c;
  const mounted = withReadOnlyRepoMounts(c);
  if (c.name === USER) return { ...mounted, securityContext: userSeatContext(c.securityContext) } as Container;
  return { ...mounted, securityContext: hardenedContext(c.securityContext) } as Container;
}

/** An init container keeps its context as stated (baseline); only its Repo mounts are made read-only. */
export const hardenInitContainer = (c: Container): Container =>
  isObject(c) ? (withReadOnlyRepoMounts(c) as Container) : c;

type Hardenable = Partial<Pick<SandboxSpec, "securityContext" | "sidecars" | "initContainers" | "volumeMounts">>;

/**
 * The spec with the hardened defaults written in: the primary container's context and every
 * sidecar's but `user`'s completed (the user seat's NET_RAW drop), and every Repo mount read-only (the Harness's, the sidecars',
 * the init containers'). Init containers' contexts pass through as stated. Idempotent: hardening
 * a hardened spec changes nothing.
 */
export function hardenSpec<S extends Hardenable>(spec: S): S {
  return {
    ...spec,
    securityContext: hardenedContext(spec.securityContext),
    ...(Array.isArray(spec.volumeMounts) ? { volumeMounts: readOnlyRepoMounts(spec.volumeMounts) } : {}),
    ...(Array.isArray(spec.sidecars) ? { sidecars: spec.sidecars.map(hardenSidecar) } : {}),
    ...(Array.isArray(spec.initContainers) ? { initContainers: spec.initContainers.map(hardenInitContainer) } : {}),
  };
}
