// The Sandbox admission rules (pure): defaults written into the stored object on create and on
// every update, and every violation of the hardened context reported at once, each with its field
// path and its fix. A stated context is judged field by field: only what states something weaker
// than the hardened context is refused, what it leaves out the defaults complete (decision 0016).
// Reads hostile input as `unknown` and never throws.
import { EgressAllowList } from "../../api/egress-point";
import { OPERATOR_ENV } from "../../api/env";
import { parseGoDuration } from "../../lib/duration";
import { DEFAULT_FS_GROUP, DEFAULT_IDLE_TIMEOUT, EFFECTOR, HARNESS, USER, keyOfRepoVolume } from "../../api/wire";
import { hardenSpec } from "../../api/hardening";
import type { SandboxSpec } from "../../api/crd";
import { gitCredentialViolations } from "./git-credentials";
import { effectorVolumeViolations } from "./effector-volumes";
import { baselineViolations, hostPortViolations, weakerThanRestricted } from "./containers";
import { isOperatorVolume, repoMountViolations, volumeTypeViolations } from "./volumes";
import { asArray, asObject, isObject, str, violation, type Violation } from "./violations";
import { deepEqual } from "../../lib/patch";
import { IDLE_TIMEOUT_MAX, IDLE_TIMEOUT_MAX_MS, IDLE_TIMEOUT_MIN_MS } from "../../api/crd/sources/sandbox";

/** The ceiling of spec.idleTimeout: the CRD source's bound (api/crd/sources/sandbox.ts). */
export const MAX_IDLE_TIMEOUT_MS = IDLE_TIMEOUT_MAX_MS;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** A Sandbox's name names its Service, so it must be a DNS-1035 label. */
const DNS_1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/**
 * The defaults the stored Sandbox shows: the hardened contexts (completed field by field), Repo
 * mounts read-only, fsGroup, idleTimeout. Idempotent, so it runs on every update as on create: a
 * re-apply that leaves the defaulted fields out stores the same spec.
 */
export function withDefaults<S extends Partial<SandboxSpec>>(spec: S): S {
  return {
    ...hardenSpec(spec),
    fsGroup: spec.fsGroup ?? DEFAULT_FS_GROUP,
    idleTimeout: spec.idleTimeout ?? DEFAULT_IDLE_TIMEOUT,
  };
}

export type SandboxRules = {
  /** The shortest idle timeout allowed (the CRD source's IDLE_TIMEOUT_MIN_MS, 1m; tests of the
   * lease lower it through JR2_MIN_IDLE_TIMEOUT). */
  minIdleTimeoutMs: number;
};

export const DEFAULT_RULES: SandboxRules = { minIdleTimeoutMs: IDLE_TIMEOUT_MIN_MS };

/** The rules in force: JR2_MIN_IDLE_TIMEOUT lowers the floor (the lease's integration tests use
 * seconds). The webhooks and the reconcile's own check (capabilities/sandbox/gate.ts) read the same. */
export const rulesFromEnv = (env: NodeJS.ProcessEnv = process.env): SandboxRules => ({
  minIdleTimeoutMs: parseGoDuration(env[OPERATOR_ENV.minIdleTimeout] ?? "") ?? DEFAULT_RULES.minIdleTimeoutMs,
});

type Seat = {
  path: string;
  container: Record<string, unknown>;
  effector: boolean;
  kind: "primary" | "sidecar" | "init";
};

function seatsOf(spec: Record<string, unknown>): Seat[] {
  const primary = {
    name: HARNESS,
    securityContext: spec.securityContext,
    env: spec.env,
    envFrom: spec.envFrom,
    volumeMounts: spec.volumeMounts,
  };
  return [
    { path: "spec", container: primary, effector: false, kind: "primary" as const },
    ...asArray(spec.sidecars).map((c, i) => ({
      path: `spec.sidecars[${i}]`,
      container: asObject(c),
      effector: str(asObject(c).name) === EFFECTOR,
      kind: "sidecar" as const,
    })),
    ...asArray(spec.initContainers).map((c, i) => ({
      path: `spec.initContainers[${i}]`,
      container: asObject(c),
      effector: false,
      kind: "init" as const,
    })),
  ];
}

/**
 * The Sandbox's name, which names its Service (`<name>.<namespace>.svc`): a DNS-1035 label. Judged
 * at create (a name never changes); the reconcile may reuse it.
 */
export function sandboxNameViolations(name: unknown): Violation[] {
  const rule =
    "a DNS-1035 label: a lower-case letter first, then lower-case letters, digits and '-', not ending in '-', " +
    "at most 63 characters (e.g. ws-1a2b)";
  if (typeof name !== "string" || !name) return [violation("metadata.name", `is required: ${rule}`)];
  if (name.length > 63 || !DNS_1035.test(name)) {
    return [violation("metadata.name", `cannot name the Sandbox's Service; choose a name that is ${rule}`)];
  }
  return [];
}

/**
 * Every violation of the spec, at once. On an update (`old`, the stored spec), a spec equal to the
 * stored one, before or after the defaults, is a re-apply and no change: nothing to judge (a
 * keepalive must never be refused for a rule newer than its Sandbox). A changed spec is judged as
 * a create is.
 */
export function sandboxViolations(input: unknown, old?: unknown, rules: SandboxRules = DEFAULT_RULES): Violation[] {
  if (!isObject(input)) return [violation("spec", "is required: a Sandbox needs at least spec.image")];
  const spec = input;
  if (isObject(old) && (deepEqual(spec, old) || deepEqual(spec, withDefaults(old)))) return [];
  const seats = seatsOf(spec);
  return [
    ...imageViolations(spec),
    ...seats.flatMap(contextViolations),
    ...nameViolations(seats),
    ...volumeViolations(spec),
    ...seats.flatMap((seat) => mountViolations(seat, spec)),
    ...repoViolations(spec),
    ...gitCredentialViolations(spec, seats),
    ...effectorVolumeViolations(spec.volumes, seats),
    ...idleTimeoutViolations(spec, rules),
    ...egressViolations(spec),
  ];
}

function imageViolations(spec: Record<string, unknown>): Violation[] {
  const image = str(spec.image);
  return image && image.trim()
    ? []
    : [violation("spec.image", "is required: the Harness image, e.g. ghcr.io/org/harness:1")];
}

function contextViolations(seat: Seat): Violation[] {
  const path = seat.kind === "primary" ? "spec.securityContext" : `${seat.path}.securityContext`;
  const sc = seat.container.securityContext;
  const isUser = seat.kind === "sidecar" && str(seat.container.name) === USER;
  const checks = seat.kind === "init" || isUser ? baselineViolations(sc, path) : weakerThanRestricted(sc, path);
  return [...checks, ...(seat.kind === "primary" ? [] : hostPortViolations(seat.container, seat.path))];
}

function nameViolations(seats: Seat[]): Violation[] {
  const out: Violation[] = [];
  const seen = new Map<string, string>();
  for (const seat of seats) {
    const name = str(seat.container.name);
    if (seat.kind === "primary") {
      seen.set(HARNESS, "the primary container");
      continue;
    }
    const path = `${seat.path}.name`;
    if (!name) out.push(violation(path, "is required"));
    else if (name === HARNESS) {
      out.push(violation(path, `"${HARNESS}" is the primary container's name (spec.image); choose another`));
    } else if (seen.has(name)) {
      out.push(
        violation(path, `${JSON.stringify(name)} is already used by ${seen.get(name)}; container names must be unique`),
      );
    } else seen.set(name, seat.path);
  }
  return out;
}

/** Every volume of the spec: a type the restricted profile allows, and a name of its own. */
function volumeViolations(spec: Record<string, unknown>): Violation[] {
  const out: Violation[] = [];
  asArray(spec.volumes).forEach((v, i) => {
    const path = `spec.volumes[${i}]`;
    out.push(...volumeTypeViolations(v, path));
    const name = str(asObject(v).name);
    if (name && isOperatorVolume(name)) {
      out.push(
        violation(
          `${path}.name`,
          `${JSON.stringify(name)} is reserved for the operator's own volumes (jr2-shm, jr2-git-<n>, repo-<key>); rename it`,
        ),
      );
    }
  });
  return out;
}

/** A seat's mounts of the operator's Repo caches: read-only, and of a Repo the spec names. */
function mountViolations(seat: Seat, spec: Record<string, unknown>): Violation[] {
  const keys = new Set(asArray(spec.repos).map((r) => str(asObject(r).key)));
  const out = repoMountViolations(seat.container, seat.path, true);
  asArray(seat.container.volumeMounts).forEach((m, i) => {
    const name = str(asObject(m).name);
    const key = name === undefined ? undefined : keyOfRepoVolume(name);
    if (key !== undefined && !keys.has(key)) {
      out.push(
        violation(
          `${seat.path}.volumeMounts[${i}].name`,
          `${JSON.stringify(name)} is the cache of a Repo spec.repos does not name: add {key: ${JSON.stringify(key)}} to spec.repos or mount another volume`,
        ),
      );
    }
  });
  return out;
}

function repoViolations(spec: Record<string, unknown>): Violation[] {
  const out: Violation[] = [];
  const keys = new Set<string>();
  asArray(spec.repos).forEach((r, i) => {
    const repo = asObject(r);
    const key = str(repo.key);
    if (!key || key.length > 58 || !DNS_LABEL.test(key)) {
      out.push(
        violation(
          `spec.repos[${i}].key`,
          "must be a DNS label of at most 58 characters (it names the repo-<key> volume)",
        ),
      );
    } else if (keys.has(key)) {
      out.push(violation(`spec.repos[${i}].key`, `${JSON.stringify(key)} is listed twice; list each Repo once`));
    } else keys.add(key);
    if (!str(repo.url)?.trim()) out.push(violation(`spec.repos[${i}].url`, "is required: the Repo's url"));
  });
  return out;
}

function idleTimeoutViolations(spec: Record<string, unknown>, rules: SandboxRules): Violation[] {
  if (spec.idleTimeout === undefined) return [];
  const text = str(spec.idleTimeout);
  const ms = text === undefined ? undefined : parseGoDuration(text);
  const range = `between ${human(rules.minIdleTimeoutMs)} and ${IDLE_TIMEOUT_MAX} (7 days)`;
  if (ms === undefined) return [violation("spec.idleTimeout", `must be a Go duration such as "30m", ${range}`)];
  if (ms < rules.minIdleTimeoutMs || ms > MAX_IDLE_TIMEOUT_MS)
    return [violation("spec.idleTimeout", `must be ${range}`)];
  return [];
}

/** spec.egress.allow: each entry a rule the egress point can match (api/egress-point.ts, decision 0051),
 * named by its index with the fix. */
function egressViolations(spec: Record<string, unknown>): Violation[] {
  const egress = spec.egress;
  if (egress === undefined) return [];
  if (!isObject(egress)) return [violation("spec.egress", "must be an object such as {allow: [api.example.com]}")];
  const allow = egress.allow;
  if (allow === undefined) return [];
  if (!Array.isArray(allow)) return [violation("spec.egress.allow", "must be a list of hosts, e.g. [api.example.com]")];
  // The list's own check (api/egress-point.ts), its issues at this field's path.
  const r = EgressAllowList.safeParse(allow);
  if (r.success) return [];
  return r.error.issues.map((i) =>
    violation(`spec.egress.allow${i.path.length ? `[${String(i.path[0])}]` : ""}`, i.message),
  );
}

const human = (ms: number) => (ms % 60_000 === 0 ? `${ms / 60_000}m` : `${ms / 1000}s`);
