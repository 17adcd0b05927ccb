// The Sandbox defaults as a MutatingAdmissionPolicy (decision 0026): the API server writes them
// in-process with CEL, so a Sandbox create costs one webhook round trip (validation) instead of two,
// and the module has no mutating webhook. What it writes is exactly `withDefaults` (rules/sandbox.ts):
// the primary container's and every sidecar's but `user`'s securityContext completed field by
// field (api/hardening.ts), the `user` seat's NET_RAW drop where it says nothing (decision 0048), every `repo-<key>` mount that says nothing about readOnly made read-only
// (the Harness's, the sidecars', the init containers'), fsGroup and idleTimeout. The CEL is
// generated here from the same constants, so no hardened value is typed twice; an integration test
// (test/integration/admission-policy.test.ts) holds the API server's result to `withDefaults` on
// generated specs.
//
// JSON null needs no case of its own: the API server prunes a null from a field the CRD does not
// mark nullable (none is) before admission, so the policy sees it absent, as `withDefaults` reads it.
import { GROUP, VERSION } from "../../api/crd/sources/common";
import { DEFAULT_FS_GROUP, DEFAULT_IDLE_TIMEOUT, USER, repoVolumeName } from "../../api/wire";
import { USER_SEAT_DROP, hardenedSecurityContext } from "../../api/hardening";

/** The policy's and its binding's name. */
export const SANDBOX_DEFAULTS = "jr2-sandbox-defaults";

/**
 * A Sandbox UPDATE reaches admission only when its spec changes (CEL, GA since Kubernetes 1.30):
 * the webhooks' matchCondition (scripts/webhooks.ts) and the policy's alike.
 */
export const SPEC_CHANGED = {
  name: "spec-changed",
  expression: "request.operation != 'UPDATE' || object.spec != oldObject.spec",
};

/** The `repo-<key>` prefix (api/wire.ts keyOfRepoVolume reads the same). */
const REPO_PREFIX = repoVolumeName("");

/**
 * Fields of a hardened value that a stated object completes only when these also say nothing: a
 * seccompProfile naming only a localhostProfile is refused by validation, not given a type.
 */
const ALSO_STATED_BY: Record<string, readonly string[]> = { "seccompProfile.type": ["localhostProfile"] };

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** A JSON value as a CEL literal; each map value dyn() so a map may mix types. */
export function celLiteral(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(celLiteral).join(", ")}]`;
  if (isObject(v)) {
    return `{${Object.entries(v)
      .map(([k, x]) => `${JSON.stringify(k)}: dyn(${celLiteral(x)})`)
      .join(", ")}}`;
  }
  if (typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isInteger(v))) {
    return JSON.stringify(v);
  }
  throw new Error(`no CEL literal for ${JSON.stringify(v)}`);
}

/** One JSON Patch `add` of `value` at the pointer the CEL string expression `path` computes. */
const add = (path: string, value: unknown) => `JSONPatch{op: "add", path: ${path}, value: ${celLiteral(value)}}`;
/** A CEL string expression: `path` (a CEL string expression) + "/<field>", one literal where it can. */
const under = (path: string, field: string) =>
  path.endsWith('"') ? `${path.slice(0, -1)}/${field}"` : `${path} + "/${field}"`;

/**
 * The patches that complete the securityContext of the container the CEL expression `c` reads, whose
 * context sits at the pointer `path`: the hardened context when it states none, else each hardened
 * field it says nothing about (api/hardening.ts hardenedContext).
 */
function contextPatches(c: string, path: string): string {
  const sc = `${c}.securityContext`;
  const hardened = hardenedSecurityContext() as Obj;
  const fields = Object.entries(hardened).map(([field, value]) => {
    if (!isObject(value)) return `(has(${sc}.${field}) ? [] : [${add(under(path, field), value)}])`;
    // A stated object (capabilities, seccompProfile): each of its hardened fields it leaves out.
    const nested = Object.entries(value).map(([inner, v]) => {
      const unstated = [inner, ...(ALSO_STATED_BY[`${field}.${inner}`] ?? [])]
        .map((n) => `!has(${sc}.${field}.${n})`)
        .join(" && ");
      return `(${unstated} ? [${add(under(under(path, field), inner), v)}] : [])`;
    });
    return `(!has(${sc}.${field}) ? [${add(under(path, field), value)}] : ${nested.join(" + ")})`;
  });
  return `(!has(${sc}) ? [${add(path, hardened)}] : ${fields.join(" + ")})`;
}

/**
 * The `user` seat's one default (api/hardening.ts userSeatContext): `capabilities.drop: [NET_RAW]`
 * unless its context states a drop list of its own.
 */
function userSeatPatches(c: string, path: string): string {
  const sc = `${c}.securityContext`;
  const drop = [USER_SEAT_DROP];
  return (
    `(!has(${sc}) ? [${add(path, { capabilities: { drop } })}] : ` +
    `!has(${sc}.capabilities) ? [${add(under(path, "capabilities"), { drop })}] : ` +
    `!has(${sc}.capabilities.drop) ? [${add(under(under(path, "capabilities"), "drop"), drop)}] : [])`
  );
}

/** The patches that make read-only each Repo mount of container `c` (at `path`) that says nothing. */
function repoMountPatches(c: string, path: string): string {
  const m = `${c}.volumeMounts[j]`;
  return (
    `(has(${c}.volumeMounts) ? lists.range(size(${c}.volumeMounts))` +
    `.filter(j, has(${m}.name) && ${m}.name.startsWith(${JSON.stringify(REPO_PREFIX)}) && !has(${m}.readOnly))` +
    `.map(j, ${add(`${under(path, "volumeMounts")} + "/" + string(j) + "/readOnly"`, true)}) : [])`
  );
}

/** For each item `i` of the spec's list `field`, the patches `each(item, pointer)` gives, flattened. */
function eachOf(field: string, each: (c: string, path: string) => string): string {
  const list = `object.spec.${field}`;
  return `(has(${list}) ? lists.range(size(${list})).map(i, ${each(`${list}[i]`, `"/spec/${field}/" + string(i)`)}).flatten() : [])`;
}

const jsonPatch = (expression: string) => ({ patchType: "JSONPatch", jsonPatch: { expression } });

/** The MutatingAdmissionPolicy that writes the Sandbox defaults (admissionregistration.k8s.io/v1). */
export function sandboxDefaultsPolicy() {
  const sidecar = (c: string, path: string) =>
    `(has(${c}.name) && ${c}.name == ${JSON.stringify(USER)} ? ${userSeatPatches(c, under(path, "securityContext"))} : ${contextPatches(c, under(path, "securityContext"))}) + ` +
    repoMountPatches(c, path);
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingAdmissionPolicy",
    metadata: { name: SANDBOX_DEFAULTS },
    spec: {
      // A CEL error refuses the request, as the webhook's did: never a Sandbox stored unhardened.
      failurePolicy: "Fail",
      // Again after any later mutation, so what is stored keeps the defaults.
      reinvocationPolicy: "IfNeeded",
      matchConstraints: {
        matchPolicy: "Equivalent",
        resourceRules: [
          { apiGroups: [GROUP], apiVersions: [VERSION], operations: ["CREATE", "UPDATE"], resources: ["sandboxes"] },
        ],
      },
      matchConditions: [SPEC_CHANGED, { name: "has-spec", expression: "has(object.spec)" }],
      // One mutation, not one per part: the API server applies each mutation's patch to the whole
      // object in turn, and four cost four times the one (decision 0026, amended).
      mutations: [
        jsonPatch(
          [
            // The Harness: its context and its Repo mounts.
            contextPatches("object.spec", '"/spec/securityContext"'),
            repoMountPatches("object.spec", '"/spec"'),
            // Every sidecar's context but the user seat's; every sidecar's Repo mounts.
            eachOf("sidecars", sidecar),
            // Init containers: their contexts as stated, their Repo mounts read-only.
            eachOf("initContainers", repoMountPatches),
            `(has(object.spec.fsGroup) ? [] : [${add('"/spec/fsGroup"', DEFAULT_FS_GROUP)}])`,
            `(has(object.spec.idleTimeout) ? [] : [${add('"/spec/idleTimeout"', DEFAULT_IDLE_TIMEOUT)}])`,
          ].join(" + "),
        ),
      ],
    },
  };
}

/** Its binding: Sandboxes in every namespace but those admission ignores (the webhooks' namespaceSelector). */
export function sandboxDefaultsBinding(ignoredNamespaces: readonly string[]) {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingAdmissionPolicyBinding",
    metadata: { name: SANDBOX_DEFAULTS },
    spec: {
      policyName: SANDBOX_DEFAULTS,
      matchResources: {
        namespaceSelector: {
          matchExpressions: [
            { key: "kubernetes.io/metadata.name", operator: "NotIn", values: [...new Set(ignoredNamespaces)] },
          ],
        },
      },
    },
  };
}
