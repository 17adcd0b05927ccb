// Guarding the Sandbox pods themselves (pure): a pod carrying sandbox.jr2.dev/name is made by the
// operator alone and keeps the rules a Sandbox's pod is built to (decisions 0009 and 0016); its
// Sandbox label is set, changed or removed by the operator alone (the Sandbox's Service selects
// by it); an ephemeral container (kubectl debug) may not sit beside the credential holders, mount
// a Secret or read one into its environment, or run privileged.
import { cacheRootFrom } from "../../api/env";
import {
  CUSTODIAN,
  DEFAULT_CACHE_ROOT,
  EFFECTOR,
  HARNESS,
  JR2_DOMAIN,
  MANAGED_BY_LABEL,
  SANDBOX_NAME_LABEL,
  USER,
  keyOfRepoVolume,
  repoCachePath,
} from "../../api/wire";
import { isGitCredentialVolume } from "./git-credentials";
import { effectorVolumeViolations } from "./effector-volumes";
import { baselineViolations, hostPortViolations, restrictedViolations, sharedControlViolations } from "./containers";
import { repoMountViolations, volumeTypeViolations } from "./volumes";
import { asArray, asObject, isObject, str, violation, type Violation } from "./violations";

export type PodRules = {
  /** Where the nodes keep their Repo caches (JR2_CACHE_ROOT): the one hostPath a pod may have is
   * `<cacheRoot>/<its namespace>/<key>`, as capabilities/repo/caches.ts builds it. */
  cacheRoot: string;
};

export const DEFAULT_POD_RULES: PodRules = { cacheRoot: DEFAULT_CACHE_ROOT };

/** The pod rules as the environment sets them: the cache root read as the Repo capability reads it. */
export const podRulesFromEnv = (env: NodeJS.ProcessEnv = process.env): PodRules => ({ cacheRoot: cacheRootFrom(env) });

/** The sysctls the baseline profile allows a pod to set (namespaced, and safe to share a node). */
export const SAFE_SYSCTLS = new Set([
  "kernel.shm_rmid_forced",
  "net.ipv4.ip_local_port_range",
  "net.ipv4.ip_unprivileged_port_start",
  "net.ipv4.tcp_syncookies",
  "net.ipv4.ping_group_range",
  "net.ipv4.ip_local_reserved_ports",
  "net.ipv4.tcp_keepalive_time",
  "net.ipv4.tcp_fin_timeout",
  "net.ipv4.tcp_keepalive_intvl",
  "net.ipv4.tcp_keepalive_probes",
  "net.ipv4.tcp_rmem",
  "net.ipv4.tcp_wmem",
]);

const APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/";
const REPO_KEY = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The Sandbox a pod belongs to, by its label; undefined for any other pod. */
export const sandboxOf = (pod: unknown): string | undefined =>
  str(asObject(asObject(asObject(pod).metadata).labels)[SANDBOX_NAME_LABEL]);

/** Who made it, and whether it keeps the rules a Sandbox's pod is built to. */
export function podViolations(
  pod: unknown,
  creator: string | undefined,
  operator: string | undefined,
  rules: PodRules = DEFAULT_POD_RULES,
): Violation[] {
  const out: Violation[] = [];
  if (!operator || creator !== operator) {
    out.push(
      violation(
        `metadata.labels[${SANDBOX_NAME_LABEL}]`,
        `only the jr2 operator creates Sandbox pods (this request is from ${JSON.stringify(creator ?? "unknown")}): ` +
          "create a Sandbox instead",
      ),
    );
  }
  return [...out, ...builtPodViolations(pod, rules)];
}

/**
 * Whether a pod keeps the rules a Sandbox's pod is built to, whoever creates it: the webhook runs
 * it on every labelled pod but the operator's own, the reconcile on each pod it builds, before the
 * write (decision 0029).
 */
export function builtPodViolations(pod: unknown, rules: PodRules = DEFAULT_POD_RULES): Violation[] {
  const out: Violation[] = [];
  const spec = asObject(asObject(pod).spec);
  const namespace = str(asObject(asObject(pod).metadata).namespace);
  out.push(...podLevelViolations(spec), ...appArmorAnnotationViolations(pod));
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
    out.push(...volumeTypeViolations(v, `spec.volumes[${i}]`, true), ...hostPathViolations(v, i, rules, namespace));
  });
  for (const list of ["containers", "initContainers"] as const) {
    asArray(spec[list]).forEach((c, i) => {
      const path = `spec.${list}[${i}]`;
      // Read-only in every container, the user's included: nothing in a Sandbox writes (or gcs)
      // the object store its clones borrow from.
      out.push(...repoMountViolations(c, path, false));
      if (list === "containers" && str(asObject(c).name) === EFFECTOR) return;
      asArray(asObject(c).volumeMounts).forEach((m, j) => {
        const name = str(asObject(m).name);
        if (name !== undefined && isGitCredentialVolume(name)) {
          out.push(violation(`${path}.volumeMounts[${j}]`, `only the "${EFFECTOR}" container mounts git credentials`));
        }
      });
    });
  }
  // The Effector's own volumes (its key, scratch, effect secrets, trust bundle) and the Secrets they
  // carry reach the effector alone (decision 0070).
  const seats = (["containers", "initContainers"] as const).flatMap((list) =>
    asArray(spec[list]).map((c, i) => ({
      path: `spec.${list}[${i}]`,
      container: asObject(c),
      effector: list === "containers" && str(asObject(c).name) === EFFECTOR,
    })),
  );
  out.push(...effectorVolumeViolations(spec.volumes, seats));
  return out;
}

/** The pod's own fields: no host namespace, no shared process view, the pod context's baseline. */
function podLevelViolations(spec: Record<string, unknown>): Violation[] {
  const out: Violation[] = [];
  for (const ns of ["hostNetwork", "hostPID", "hostIPC"] as const) {
    if (spec[ns] === true)
      out.push(violation(`spec.${ns}`, "must not be true: a Sandbox pod shares no host namespace"));
  }
  if (spec.shareProcessNamespace === true) {
    out.push(
      violation(
        "spec.shareProcessNamespace",
        "must not be true: the Harness must not see the credential holders' processes",
      ),
    );
  }
  const sc = spec.securityContext;
  if (sc === undefined || sc === null) return out;
  if (!isObject(sc)) return [...out, violation("spec.securityContext", "must be an object")];
  // The jr2-owned containers inherit the pod's uid unless they state one.
  if (sc.runAsUser === 0) {
    out.push(violation("spec.securityContext.runAsUser", "must not be 0 (root): the jr2-owned containers inherit it"));
  }
  if (str(asObject(sc.seccompProfile).type) === "Unconfined") {
    out.push(violation("spec.securityContext.seccompProfile.type", 'must not be "Unconfined"; use "RuntimeDefault"'));
  }
  out.push(...sharedControlViolations(sc, "spec.securityContext", true));
  asArray(sc.sysctls).forEach((s, i) => {
    const name = str(asObject(s).name);
    if (name === undefined || !SAFE_SYSCTLS.has(name)) {
      out.push(
        violation(
          `spec.securityContext.sysctls[${i}].name`,
          `${JSON.stringify(name ?? null)} is outside the safe set (${[...SAFE_SYSCTLS].join(", ")}); remove it`,
        ),
      );
    }
  });
  return out;
}

/** The legacy AppArmor annotation, per container: the runtime's default or a node's profile. */
function appArmorAnnotationViolations(pod: unknown): Violation[] {
  const annotations = asObject(asObject(asObject(pod).metadata).annotations);
  return Object.entries(annotations).flatMap(([key, value]) =>
    key.startsWith(APPARMOR_ANNOTATION) &&
    !(value === "runtime/default" || (typeof value === "string" && value.startsWith("localhost/")))
      ? [violation(`metadata.annotations[${key}]`, 'must be "runtime/default" or "localhost/<profile>"; remove it')]
      : [],
  );
}

/** The one hostPath a Sandbox pod has: a Repo cache exactly as the operator builds it, the volume
 * `repo-<key>` at `<cacheRoot>/<the pod's namespace>/<key>` (DirectoryOrCreate): a pod reaches its
 * own namespace's caches and no other's (decision 0046). A name alone proves nothing. */
function hostPathViolations(volume: unknown, i: number, rules: PodRules, namespace: string | undefined): Violation[] {
  const vol = asObject(volume);
  if (vol.hostPath === undefined) return [];
  const name = str(vol.name);
  const key = name === undefined ? undefined : keyOfRepoVolume(name);
  const host = asObject(vol.hostPath);
  const ours =
    key !== undefined &&
    namespace !== undefined &&
    key.length <= 58 &&
    REPO_KEY.test(key) &&
    NAMESPACE.test(namespace) &&
    host.path === repoCachePath(rules.cacheRoot, namespace, key) &&
    host.type === "DirectoryOrCreate";
  return ours
    ? []
    : [
        violation(
          `spec.volumes[${i}].hostPath`,
          "is not allowed in a Sandbox pod: its one hostPath is a Repo cache of its own namespace, repo-<key> at " +
            `${repoCachePath(rules.cacheRoot, namespace ?? "<namespace>", "<key>")} (DirectoryOrCreate), which the operator adds for spec.repos`,
        ),
      ];
}

/** Whether an update adds, changes or removes the pod's Sandbox label. */
export const sandboxLabelChanged = (pod: unknown, oldPod: unknown) => sandboxOf(pod) !== sandboxOf(oldPod);

/**
 * The Sandbox label follows the pod from its creation: an update that adds, changes or removes it
 * is the operator's alone (relabelled, any pod would take a Sandbox's traffic from its Service).
 */
export function sandboxLabelViolations(
  pod: unknown,
  oldPod: unknown,
  requester: string | undefined,
  operator: string | undefined,
): Violation[] {
  if (!sandboxLabelChanged(pod, oldPod) || (operator && requester === operator)) return [];
  const [before, after] = [sandboxOf(oldPod), sandboxOf(pod)];
  const what = changeWords(before, after);
  return [
    violation(
      `metadata.labels[${SANDBOX_NAME_LABEL}]`,
      `only the jr2 operator sets, changes or removes a pod's Sandbox label; this request from ` +
        `${JSON.stringify(requester ?? "unknown")} ${what}: leave the label as it is`,
    ),
  ];
}

/** A label or annotation key that is jr2's: the operator's informers' `app.kubernetes.io/managed-by`,
 * and every key in jr2's domain (`jr2.dev/...`, `<anything>.jr2.dev/...`). */
export const isJr2Key = (key: string): boolean => {
  if (key === MANAGED_BY_LABEL) return true;
  const slash = key.indexOf("/");
  const prefix = slash < 0 ? "" : key.slice(0, slash);
  return prefix === JR2_DOMAIN || prefix.endsWith(`.${JR2_DOMAIN}`);
};

/** What an update did to one label or annotation, in a refusal's words. */
function changeWords(before: string | undefined, after: string | undefined): string {
  if (before === undefined) return `adds it (${JSON.stringify(after)})`;
  if (after === undefined) return `removes it (${JSON.stringify(before)})`;
  return `changes it from ${JSON.stringify(before)} to ${JSON.stringify(after)}`;
}

/** The jr2 keys of a map that an update adds, changes or removes (the Sandbox label aside: its rule is its own). */
function jr2KeysChanged(now: Record<string, unknown>, before: Record<string, unknown>, skip?: string): string[] {
  const keys = new Set([...Object.keys(now), ...Object.keys(before)]);
  return [...keys].filter((k) => k !== skip && isJr2Key(k) && str(now[k]) !== str(before[k])).sort();
}

/** Whether an update adds, changes or removes any jr2 label or annotation. */
export const jr2MetadataChanged = (pod: unknown, oldPod: unknown): boolean =>
  (["labels", "annotations"] as const).some(
    (m) =>
      jr2KeysChanged(asObject(asObject(asObject(pod).metadata)[m]), asObject(asObject(asObject(oldPod).metadata)[m]))
        .length > 0,
  );

/**
 * A Sandbox pod's jr2 labels and annotations are the operator's alone (decision 0067): its
 * NetworkPolicies and Service select it by them, the egress point knows it by them, and the
 * operator reads its spec digest from them. An update by anyone else, `pods/status` included (the
 * API server takes labels and annotations from a status update too), that adds, changes or removes
 * one is refused. The Sandbox label is `sandboxLabelViolations`'.
 */
export function jr2MetadataViolations(
  pod: unknown,
  oldPod: unknown,
  requester: string | undefined,
  operator: string | undefined,
): Violation[] {
  if (operator && requester === operator) return [];
  const who = JSON.stringify(requester ?? "unknown");
  return (["labels", "annotations"] as const).flatMap((m) =>
    jr2KeysChanged(
      asObject(asObject(asObject(pod).metadata)[m]),
      asObject(asObject(asObject(oldPod).metadata)[m]),
      m === "labels" ? SANDBOX_NAME_LABEL : undefined,
    ).map((key) => {
      const [before, after] = [
        str(asObject(asObject(asObject(oldPod).metadata)[m])[key]),
        str(asObject(asObject(asObject(pod).metadata)[m])[key]),
      ];
      const what = changeWords(before, after);
      return violation(
        `metadata.${m}[${key}]`,
        `only the jr2 operator sets, changes or removes jr2's ${m} on a Sandbox pod (its NetworkPolicies and ` +
          `Service select it by them); this request from ${who} ${what}: leave it as it is`,
      );
    }),
  );
}

/**
 * A pod update: its Sandbox label (any pod, labelled before or after); for a Sandbox pod its other
 * jr2 labels and annotations (on the pod and on `pods/status`), the ephemeral containers it adds,
 * and its images.
 */
export function podUpdateViolations(
  pod: unknown,
  oldPod: unknown,
  requester: string | undefined,
  operator: string | undefined,
  subResource?: string,
): Violation[] {
  const sandboxPod = sandboxOf(pod) !== undefined || sandboxOf(oldPod) !== undefined;
  return [
    ...sandboxLabelViolations(pod, oldPod, requester, operator),
    ...(sandboxPod && (!subResource || subResource === "status")
      ? jr2MetadataViolations(pod, oldPod, requester, operator)
      : []),
    ...(sandboxPod && subResource === "ephemeralcontainers" ? ephemeralViolations(pod, oldPod) : []),
    ...(sandboxPod && !subResource ? imageChangeViolations(pod, oldPod) : []),
  ];
}

/** A Sandbox pod runs the images it was built with (decision 0017): an image is the one thing a pod
 * UPDATE may change in a container, and the operator never does, so a changed one is refused. */
export function imageChangeViolations(pod: unknown, oldPod: unknown): Violation[] {
  const out: Violation[] = [];
  for (const list of ["containers", "initContainers"] as const) {
    const before = new Map(
      asArray(asObject(asObject(oldPod).spec)[list]).map((c) => [str(asObject(c).name), str(asObject(c).image)]),
    );
    asArray(asObject(asObject(pod).spec)[list]).forEach((c, i) => {
      const name = str(asObject(c).name);
      const was = before.get(name);
      if (was !== undefined && was !== str(asObject(c).image)) {
        out.push(
          violation(
            `spec.${list}[${i}].image`,
            "a Sandbox pod keeps the images it was built with: change the Sandbox's spec and create a new Sandbox",
          ),
        );
      }
    });
  }
  return out;
}

/**
 * The volumes of a pod no ephemeral container may mount: every Secret (or projected Secret) volume,
 * and every volume a credential holder mounts that the Harness does not (the Effector's scratch and
 * key, the Custodian's values and CA, emptyDirs included): what the Harness shares (/work) stays
 * open (decisions 0048, 0067).
 */
function credentialVolumes(spec: Record<string, unknown>): Map<string, string> {
  const out = new Map<string, string>();
  for (const v of asArray(spec.volumes).map(asObject)) {
    const name = str(v.name);
    if (
      name !== undefined &&
      (v.secret !== undefined || asArray(asObject(v.projected).sources).some((s) => asObject(s).secret !== undefined))
    )
      out.set(name, "a Secret volume");
  }
  const mountedBy = (c: unknown) =>
    new Set(
      asArray(asObject(c).volumeMounts)
        .map((m) => str(asObject(m).name))
        .filter((n) => n !== undefined),
    );
  const containers = asArray(spec.containers);
  const harness = mountedBy(containers.find((c) => str(asObject(c).name) === HARNESS));
  for (const c of containers) {
    const holder = str(asObject(c).name);
    if (holder === undefined || !CREDENTIAL_HOLDERS.includes(holder)) continue;
    for (const name of mountedBy(c))
      if (!harness.has(name) && !out.has(name)) out.set(name, `the "${holder}" container's volume`);
  }
  return out;
}

/**
 * An ephemeral container's context as it will run: the pod's runAsUser, runAsNonRoot and seccomp
 * profile apply where the container states none, as the kubelet applies them.
 */
function effectiveContext(container: Record<string, unknown>, spec: Record<string, unknown>): unknown {
  const sc = container.securityContext;
  if (sc !== undefined && sc !== null && !isObject(sc)) return sc;
  const pod = asObject(spec.securityContext);
  const inherited = Object.fromEntries(
    (["runAsUser", "runAsNonRoot", "seccompProfile"] as const)
      .filter((k) => pod[k] !== undefined)
      .map((k) => [k, pod[k]]),
  );
  return { ...inherited, ...asObject(sc) };
}

const EPHEMERAL =
  "for an ephemeral container of a Sandbox pod, held to the Harness's context (kubectl debug --profile=restricted)";

/**
 * The ephemeral containers an update adds (those not in the old pod), held to the Harness's context
 * (decision 0067): `kubectl debug` into a Sandbox pod sits in the pod's network namespace beside the
 * credential holders, so it gets what the Harness gets and no more: the restricted profile (every
 * capability dropped, NET_RAW with them, which decision 0051 relies on no seat holding; non-root; no
 * privilege escalation), a read-only root where the Harness's is, no credential holder as its
 * target, no Secret, and no volume of a credential holder.
 */
export function ephemeralViolations(pod: unknown, oldPod: unknown): Violation[] {
  const before = new Set(
    asArray(asObject(asObject(oldPod).spec).ephemeralContainers).map((c) => str(asObject(c).name)),
  );
  const spec = asObject(asObject(pod).spec);
  const forbidden = credentialVolumes(spec);
  const harness = asObject(asArray(spec.containers).find((c) => str(asObject(c).name) === HARNESS));
  const harnessReadOnlyRoot = asObject(harness.securityContext).readOnlyRootFilesystem === true;
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
      const why = forbidden.get(str(asObject(m).name) ?? "");
      if (why) out.push(violation(`${path}.volumeMounts[${j}]`, `may not mount ${why}: mount what the Harness mounts`));
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
    const sc = `${path}.securityContext`;
    const context = effectiveContext(container, spec);
    const held = restrictedViolations(context, sc, EPHEMERAL);
    if (harnessReadOnlyRoot && asObject(context).readOnlyRootFilesystem !== true)
      held.push(violation(`${sc}.readOnlyRootFilesystem`, "must be true: the Harness's root is read-only"));
    out.push(...repoMountViolations(container, path, false), ...held);
  });
  return out;
}

/** The containers of a Sandbox pod that hold its credentials (decision 0048): the Custodian its held
 * values, Sandbox token and CA key; the Effector its push credentials and key. */
export const CREDENTIAL_HOLDERS: readonly string[] = [CUSTODIAN, EFFECTOR];

/** The CONNECT subresources that run in, or read and write the streams of, one container. */
export const CONTAINER_CONNECTS: readonly string[] = ["exec", "attach"];

/**
 * Why an exec or attach into `container` of `pod` is refused, or undefined (decision 0048): a
 * Sandbox pod's credential holders are entered by nobody, the operator included; the Harness and
 * the `user` seat stay open, the way to inspect a run. No container named: the pod's only one, as
 * the API server picks it (with several, the API server refuses the request itself).
 */
export function connectRefusal(pod: unknown, subResource: string, container: string | undefined): string | undefined {
  if (!CONTAINER_CONNECTS.includes(subResource) || sandboxOf(pod) === undefined) return undefined;
  const containers = asArray(asObject(asObject(pod).spec).containers).map((c) => str(asObject(c).name));
  const target = container || (containers.length === 1 ? containers[0] : undefined);
  if (target === undefined || !CREDENTIAL_HOLDERS.includes(target)) return undefined;
  const meta = asObject(asObject(pod).metadata);
  const name = `${str(meta.namespace) ?? ""}/${str(meta.name) ?? ""}`;
  return (
    `${subResource} into container "${target}" of Sandbox pod ${name} is refused: it is a credential holder ` +
    `(it holds the Sandbox's ${target === CUSTODIAN ? "held values, token and CA key" : "push credentials"}; ` +
    `decision 0048). Exec into container "${HARNESS}" instead (kubectl exec -n ${str(meta.namespace) ?? "<namespace>"} ` +
    `${str(meta.name) ?? "<pod>"} -c ${HARNESS} -- <command>): it sees /work and the Repos as the Agent does`
  );
}
