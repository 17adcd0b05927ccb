// What the module's own identity may write, held by the API server itself (decision 0069): two
// ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1, GA since Kubernetes 1.30) matched to
// the module's user name. The module's pod creates skip the pod webhook (decision 0029) and it holds
// `escalate` on the repo-credential Role (decision 0046/0047), so a stolen module token could start a
// privileged, host-path pod on any node, or write any rule into the Role every node's cache agent is
// bound to. These bind that token whatever its RBAC says, system:masters included:
//   - its pods only in the shape the pod builder makes (capabilities/sandbox/pod.ts), what
//     `builtPodViolations` (capabilities/rules/pods.ts) checks in the reconcile, as far as CEL can
//     say it without the Sandbox: see decision 0069 for what it cannot;
//   - its Roles only the repo-credential Role, and that only `get` on Secrets by name.
// Pure; generated from the same constants the TypeScript rules read, so no list is typed twice.
// Written into the manifest and the charts by scripts/module-rbac.ts, registered by the local
// runner when the local module has an identity of its own (dev/local-operator.ts).
import { Volume } from "../../api/crd/generated/corev1";
import { API_VERSION } from "../../api/crd/sources/common";
import {
  CUSTODIAN_CA_SECRET,
  EFFECTOR,
  EFFECTOR_VOLUME_PREFIX,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  REPO_CREDENTIALS_ROLE,
  SANDBOX_NAME_LABEL,
  USER,
  repoCachePath,
  repoVolumeName,
} from "../../api/wire";
import { BASELINE_CAPABILITIES, SELINUX_TYPES } from "../rules/containers";
import { GIT_CREDENTIAL_VOLUME_PREFIX } from "../rules/git-credentials";
import { SAFE_SYSCTLS } from "../rules/pods";
import { ALLOWED_VOLUME_TYPES } from "../rules/volumes";

/** The policies' (and their bindings') names. */
export const MODULE_PODS_POLICY = "jr2-module-pods";
export const MODULE_ROLES_POLICY = "jr2-module-roles";
export const SANDBOX_NAMESPACE_PODS_POLICY = "jr2-sandbox-namespace-pods";

export type ModulePolicyOptions = {
  /** The module's user name as the API server knows it: `system:serviceaccount:<ns>:<name>`. */
  username: string;
  /** Where the nodes keep their Repo caches (JR2_CACHE_ROOT): the one hostPath a pod may have. */
  cacheRoot: string;
};

/** A string list as a CEL literal. */
const list = (xs: Iterable<string>) => `[${[...xs].map((x) => JSON.stringify(x)).join(", ")}]`;
const REPO_PREFIX = repoVolumeName("");
/** What each message ends with: why, and where it is written down. */
const WHY_MODULE = "(the module's pods are the Sandbox pods the operator builds; decision 0069)";
const WHY_NAMESPACE =
  "(every pod in a Sandbox namespace meets the baseline Pod Security Standard, the Repo caches' read-only hostPath aside; decision 0069)";

type Validation = { expression: string; message?: string; messageExpression?: string; reason?: string };

/** The two kinds of check, each message ending with `why`. */
function checks(why: string) {
  return {
    /** A check on the pod as a whole. */
    pod: (expression: string, message: string): Validation => ({
      expression,
      message: `${message} ${why}`,
      reason: "Forbidden",
    }),
    /** A check on every container and init container `c`; the message names the ones that fail it. */
    each: (test: string, what: string): Validation => ({
      expression: `variables.containers.all(c, ${test})`,
      messageExpression:
        `${JSON.stringify(`${what}; these containers do not: `)} + variables.containers.filter(c, !(${test})).map(c, c.name).join(", ")` +
        ` + ${JSON.stringify(` ${why}`)}`,
      reason: "Forbidden",
    }),
  };
}

/** `<cacheRoot>/<the request's namespace>/<key>` as a CEL string expression, the key the CEL `key`. */
function cachePathCel(cacheRoot: string, key: string): string {
  const [root, between, after] = repoCachePath(cacheRoot, "\0", "\0").split("\0");
  return `${JSON.stringify(root)} + request.namespace + ${JSON.stringify(between)} + ${key}${after ? ` + ${JSON.stringify(after)}` : ""}`;
}

const sc = (c: string) => `${c}.?securityContext`;

/** The volume types a pod of the module may not have: all but the restricted profile's (hostPath has a rule of its own). */
export const forbiddenVolumeTypes = () =>
  Object.keys(Volume.shape).filter((k) => k !== "name" && k !== "hostPath" && !ALLOWED_VOLUME_TYPES.has(k));

/**
 * The baseline Pod Security Standard (as capabilities/rules/containers.ts and pods.ts read it), but
 * for one hostPath: a Repo cache of the pod's own namespace, `repo-<key>` at
 * `<cacheRoot>/<namespace>/<key>` (DirectoryOrCreate), mounted read-only wherever it is mounted.
 * Every container and init container; the pod's own fields.
 */
export function baselinePodValidations(cacheRoot: string, why: string): Validation[] {
  const { pod, each } = checks(why);
  const hostPathOk =
    `v.name.startsWith(${JSON.stringify(REPO_PREFIX)}) && ` +
    `v.name.substring(${REPO_PREFIX.length}).matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$") && size(v.name) <= ${REPO_PREFIX.length + 58} && ` +
    `v.hostPath.path == ${cachePathCel(cacheRoot, `v.name.substring(${REPO_PREFIX.length})`)} && ` +
    `v.hostPath.?type.orValue("") == "DirectoryOrCreate"`;
  const caps = list(BASELINE_CAPABILITIES);
  return [
    pod(
      `!object.spec.?hostNetwork.orValue(false) && !object.spec.?hostPID.orValue(false) && !object.spec.?hostIPC.orValue(false)`,
      "a pod here shares no host namespace: spec.hostNetwork, hostPID and hostIPC are not true",
    ),
    // The pod's own context: never root for the containers that inherit it, a confined profile.
    pod(
      `object.spec.?securityContext.?seccompProfile.?type.orValue("") != "Unconfined" && ` +
        `object.spec.?securityContext.?appArmorProfile.?type.orValue("") != "Unconfined" && ` +
        `!object.spec.?securityContext.?windowsOptions.?hostProcess.orValue(false) && ` +
        `object.spec.?securityContext.?seLinuxOptions.?user.orValue("") == "" && ` +
        `object.spec.?securityContext.?seLinuxOptions.?role.orValue("") == "" && ` +
        `object.spec.?securityContext.?seLinuxOptions.?type.orValue("") in ${list(["", ...SELINUX_TYPES])} && ` +
        `object.spec.?securityContext.?sysctls.orValue([]).all(s, s.name in ${list(SAFE_SYSCTLS)})`,
      "a pod here has a baseline pod securityContext: no Unconfined seccomp or AppArmor, no host process, " +
        "no custom SELinux user, role or type, only safe sysctls",
    ),
    pod(
      `!has(object.metadata.annotations) || object.metadata.annotations.all(k, !k.startsWith("container.apparmor.security.beta.kubernetes.io/") || ` +
        `object.metadata.annotations[k] == "runtime/default" || object.metadata.annotations[k].startsWith("localhost/"))`,
      'a pod here names an AppArmor profile "runtime/default" or "localhost/<profile>" only',
    ),
    each(`!${sc("c")}.?privileged.orValue(false)`, "a container here is never privileged"),
    each(
      `${sc("c")}.?capabilities.?add.orValue([]).all(x, x in ${caps} || (x.startsWith("CAP_") && x.substring(4) in ${caps}))`,
      "a container here adds no capability beyond the baseline set",
    ),
    each(
      `${sc("c")}.?seccompProfile.?type.orValue("") != "Unconfined" && ${sc("c")}.?appArmorProfile.?type.orValue("") != "Unconfined" && ` +
        `${sc("c")}.?procMount.orValue("Default") == "Default" && !${sc("c")}.?windowsOptions.?hostProcess.orValue(false) && ` +
        `${sc("c")}.?seLinuxOptions.?user.orValue("") == "" && ${sc("c")}.?seLinuxOptions.?role.orValue("") == "" && ` +
        `${sc("c")}.?seLinuxOptions.?type.orValue("") in ${list(["", ...SELINUX_TYPES])}`,
      "a container here never runs unconfined (seccomp, AppArmor, procMount, host process, SELinux)",
    ),
    each(`c.?ports.orValue([]).all(p, p.?hostPort.orValue(0) == 0)`, "a container here binds no host port"),
    {
      expression: `object.spec.?volumes.orValue([]).all(v, !has(v.hostPath) || (${hostPathOk}))`,
      messageExpression:
        `"a pod here mounts one kind of hostPath, a Repo cache of its own namespace: repo-<key> at " + ` +
        `${cachePathCel(cacheRoot, '"<key>"')} + " (DirectoryOrCreate); not " + ` +
        `object.spec.volumes.filter(v, has(v.hostPath) && !(${hostPathOk})).map(v, v.name + " (" + v.hostPath.path + ")").join(", ")` +
        ` + ${JSON.stringify(` ${why}`)}`,
      reason: "Forbidden",
    },
    each(
      `c.?volumeMounts.orValue([]).all(m, !m.name.startsWith(${JSON.stringify(REPO_PREFIX)}) || m.?readOnly.orValue(false))`,
      "a container here mounts every Repo cache read-only",
    ),
  ];
}

/** What only the operator's pod builder makes (capabilities/sandbox/pod.ts), beyond the baseline. */
export function podShapeValidations(why: string): Validation[] {
  const { pod, each } = checks(why);
  return [
    // Whose pod it is: the Sandbox's, by name, label and controller reference, as refs.ts builds it.
    pod(
      `has(object.metadata.labels) && ` +
        `${JSON.stringify(SANDBOX_NAME_LABEL)} in object.metadata.labels && object.metadata.labels[${JSON.stringify(SANDBOX_NAME_LABEL)}] == object.metadata.name && ` +
        `${JSON.stringify(MANAGED_BY_LABEL)} in object.metadata.labels && object.metadata.labels[${JSON.stringify(MANAGED_BY_LABEL)}] == ${JSON.stringify(MANAGED_BY)}`,
      `a pod of the module carries the labels ${SANDBOX_NAME_LABEL}=<its name> and ${MANAGED_BY_LABEL}=${MANAGED_BY}`,
    ),
    pod(
      `object.metadata.?ownerReferences.orValue([]).exists_one(r, r.?controller.orValue(false)) && ` +
        `object.metadata.ownerReferences.exists(r, r.?controller.orValue(false) && r.apiVersion == ${JSON.stringify(API_VERSION)} && r.kind == "Sandbox" && r.name == object.metadata.name)`,
      "a pod of the module is controlled by its Sandbox (an ownerReference to the Sandbox of its name)",
    ),
    // No Kubernetes credential, the namespace's default service account (decision 0009).
    pod(
      `object.spec.?automountServiceAccountToken.orValue(true) == false && ` +
        `object.spec.?serviceAccountName.orValue("default") in ["", "default"] && ` +
        `object.spec.?serviceAccount.orValue("default") in ["", "default"]`,
      "a pod of the module runs as its namespace's default service account with automountServiceAccountToken false",
    ),
    pod(
      `object.spec.?volumes.orValue([]).all(v, v.?projected.?sources.orValue([]).all(s, !has(s.serviceAccountToken)))`,
      "a pod of the module projects no service account token",
    ),
    // Placed by the scheduler.
    pod(`!has(object.spec.nodeName)`, "a pod of the module is placed by the scheduler: spec.nodeName is not set"),
    pod(
      `!object.spec.?shareProcessNamespace.orValue(false)`,
      "a pod of the module does not share its process namespace (the Harness must not see the credential holders)",
    ),
    pod(`!has(object.spec.ephemeralContainers)`, "a pod of the module is created without ephemeral containers"),
    pod(
      `object.spec.?securityContext.?runAsUser.orValue(1) != 0`,
      "a pod of the module does not run as root by default: spec.securityContext.runAsUser is not 0",
    ),
    // The jr2-owned seats (every container but the user seat): the restricted profile, as the
    // builder states it (api/hardening.ts).
    {
      expression: `object.spec.containers.all(c, c.name == ${JSON.stringify(USER)} || (${restricted("c")}))`,
      messageExpression:
        `"the module's pods run their jr2-owned containers with the hardened securityContext (runAsNonRoot, no ` +
        `privilege escalation, drop ALL, add none, RuntimeDefault or Localhost seccomp, not root): not so in " + ` +
        `object.spec.containers.filter(c, c.name != ${JSON.stringify(USER)} && !(${restricted("c")})).map(c, c.name).join(", ")` +
        ` + ${JSON.stringify(` ${why}`)}`,
      reason: "Forbidden",
    },
    pod(
      `object.spec.?volumes.orValue([]).all(v, ${forbiddenVolumeTypes()
        .map((t) => `!has(v.${t})`)
        .join(" && ")})`,
      `a pod of the module has volumes of the restricted profile's types only (${[...ALLOWED_VOLUME_TYPES].join(", ")}, ` +
        "and the Repo caches' hostPath)",
    ),
    // The push credentials (the jr2-git-<n> projections) reach the effector alone (decision 0009).
    each(
      `c.name == ${JSON.stringify(EFFECTOR)} || c.?volumeMounts.orValue([]).all(m, !m.name.startsWith(${JSON.stringify(GIT_CREDENTIAL_VOLUME_PREFIX)}))`,
      `only the "${EFFECTOR}" container of the module's pods mounts the git credentials (jr2-git-<n>)`,
    ),
    // The Effector's own volumes (its key, scratch, effect secrets, trust bundle) reach it alone
    // (decision 0070); by name, as the pod builder names them (a Secret's other ways in need the
    // Sandbox, which the reconcile's builtPodViolations judges).
    each(
      `c.name == ${JSON.stringify(EFFECTOR)} || c.?volumeMounts.orValue([]).all(m, !m.name.startsWith(${JSON.stringify(EFFECTOR_VOLUME_PREFIX)}))`,
      `only the "${EFFECTOR}" container of the module's pods mounts the Effector's volumes (${EFFECTOR_VOLUME_PREFIX}*)`,
    ),
  ];
}

/** The CEL checks of a pod the module creates: the Sandbox pod's shape, and the baseline it meets. */
export const podValidations = (cacheRoot: string): Validation[] => [
  ...podShapeValidations(WHY_MODULE),
  ...baselinePodValidations(cacheRoot, WHY_MODULE),
];

/** The restricted profile of the hardened context, on the container the CEL expression `c` reads. */
function restricted(c: string): string {
  return [
    `${sc(c)}.?runAsNonRoot.orValue(false) == true`,
    `${sc(c)}.?runAsUser.orValue(1) != 0`,
    `${sc(c)}.?allowPrivilegeEscalation.orValue(true) == false`,
    `"ALL" in ${sc(c)}.?capabilities.?drop.orValue([])`,
    `size(${sc(c)}.?capabilities.?add.orValue([])) == 0`,
    `${sc(c)}.?seccompProfile.?type.orValue("") in ["RuntimeDefault", "Localhost"]`,
  ].join(" && ");
}

/** The CEL checks of a Role the module creates or updates: the repo-credential Role, `get` on Secrets by name. */
export function roleValidations(): Validation[] {
  const rule =
    `r.?apiGroups.orValue([]) == [""] && r.?resources.orValue([]) == ["secrets"] && r.verbs == ["get"] && !has(r.nonResourceURLs) && ` +
    `size(r.?resourceNames.orValue([])) > 0 && r.resourceNames.all(n, n != "" && n != "*" && n != ${JSON.stringify(CUSTODIAN_CA_SECRET)})`;
  const why = "(the cache agents' repo-credential Role, decisions 0046 and 0069)";
  return [
    {
      expression: `object.metadata.name == ${JSON.stringify(REPO_CREDENTIALS_ROLE)}`,
      messageExpression: `"the module writes one Role, ${REPO_CREDENTIALS_ROLE}, not " + object.metadata.name + " ${why}"`,
      reason: "Forbidden",
    },
    {
      expression: `object.?rules.orValue([]).all(r, ${rule})`,
      message:
        `the module's Role ${REPO_CREDENTIALS_ROLE} grants only get on secrets by resourceNames (apiGroups [""], ` +
        `resources [secrets], verbs [get], named Secrets, never ${CUSTODIAN_CA_SECRET}): no other verb, resource, ` +
        `group or wildcard ${why}`,
      reason: "Forbidden",
    },
  ];
}

/** The list of a pod's containers and init containers the container checks read. */
const CONTAINERS = {
  name: "containers",
  expression: "object.spec.containers + object.spec.?initContainers.orValue([])",
};

const policy = (
  name: string,
  username: string | undefined,
  rule: { apiGroups: string[]; resources: string[]; operations: string[] },
  validations: Validation[],
) => ({
  apiVersion: "admissionregistration.k8s.io/v1",
  kind: "ValidatingAdmissionPolicy",
  metadata: { name },
  spec: {
    // A CEL error refuses the write: never a pod or rule let through unjudged.
    failurePolicy: "Fail",
    matchConstraints: {
      matchPolicy: "Equivalent",
      resourceRules: [
        { apiGroups: rule.apiGroups, apiVersions: ["*"], operations: rule.operations, resources: rule.resources },
      ],
    },
    // The module alone: everyone else's Sandbox pods are the pod webhook's (decision 0029).
    ...(username
      ? {
          matchConditions: [
            { name: "is-the-module", expression: `request.userInfo.username == ${JSON.stringify(username)}` },
          ],
        }
      : {}),
    ...(rule.resources.includes("pods") ? { variables: [CONTAINERS] } : {}),
    validations,
  },
});

/** Its binding: `Deny`, in the namespaces `namespaces` names, or everywhere. */
const binding = (name: string, namespaces?: readonly string[]) => ({
  apiVersion: "admissionregistration.k8s.io/v1",
  kind: "ValidatingAdmissionPolicyBinding",
  metadata: { name },
  spec: {
    policyName: name,
    validationActions: ["Deny"],
    ...(namespaces
      ? {
          // By the name the API server sets, never a label a namespace's writer may change.
          matchResources: {
            namespaceSelector: {
              matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values: [...namespaces] }],
            },
          },
        }
      : {}),
  },
});

/**
 * The module's two policies and their bindings, each policy before its binding, bound everywhere:
 * its RBAC names the namespaces, the policies hold its name wherever it writes.
 */
export function modulePolicies({ username, cacheRoot }: ModulePolicyOptions) {
  if (!username)
    throw new Error("modulePolicies: the module's user name is empty: which identity do the policies hold?");
  return [
    // Pod creates alone: the module never updates a pod (its RBAC has no pod update), and a
    // scheduled pod's update would carry the nodeName a create may not.
    policy(
      MODULE_PODS_POLICY,
      username,
      { apiGroups: [""], resources: ["pods"], operations: ["CREATE"] },
      podValidations(cacheRoot),
    ),
    binding(MODULE_PODS_POLICY),
    policy(
      MODULE_ROLES_POLICY,
      username,
      { apiGroups: ["rbac.authorization.k8s.io"], resources: ["roles"], operations: ["CREATE", "UPDATE"] },
      roleValidations(),
    ),
    binding(MODULE_ROLES_POLICY),
  ];
}

/**
 * Every pod created in the Sandbox namespaces, by anyone, meets the baseline Pod Security Standard
 * but for the Repo caches' read-only hostPath: what Pod Security admission's `enforce: baseline`
 * would hold there, which cannot be that label because baseline forbids every hostPath and a
 * Sandbox pod with Repos mounts its caches so (decision 0069).
 */
export function sandboxNamespacePolicies(namespaces: readonly string[], cacheRoot: string) {
  if (!namespaces.length) throw new Error("sandboxNamespacePolicies: no Sandbox namespace to bind the policy in");
  return [
    policy(
      SANDBOX_NAMESPACE_PODS_POLICY,
      undefined,
      { apiGroups: [""], resources: ["pods"], operations: ["CREATE"] },
      baselinePodValidations(cacheRoot, WHY_NAMESPACE),
    ),
    binding(SANDBOX_NAMESPACE_PODS_POLICY, namespaces),
  ];
}

/** The kinds these objects are, for whoever sorts or removes them. */
export const MODULE_POLICY_KINDS = new Set(["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]);
