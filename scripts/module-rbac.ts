// The module's rights and its controller pods, as `pepr build` writes them, narrowed here for the
// manifest and the Helm chart alike (decision 0047). Pure; scripts/post-build.ts does the I/O.
//   - Cluster-wide (Pepr's ClusterRole, from package.json's `pepr.rbac`): reads of what the
//     operator watches, status patches, Sandbox deletes (the lease), Events, and get/patch of its
//     own CRDs by name. Never a pod, Service, NetworkPolicy or Secret write: checked here, so a
//     rule Pepr adds from a binding fails the build instead of widening the installation.
//   - In each opted-in namespace (api/sandbox-namespaces.ts): the Namespace with the opt-in label
//     and a RoleBinding of `jr2-operator-sandboxes`, the pod and Service creates and the two
//     NetworkPolicies' writes.
//   - What the module's own identity writes, held by the API server whatever its RBAC: its pods in
//     the Sandbox pod's shape, its Role only `get` on Secrets by name (two
//     ValidatingAdmissionPolicies, capabilities/admission/module-policy.ts, decision 0069).
//   - The admission and watcher pods meet the restricted Pod Security Standard: RuntimeDefault
//     seccomp and a read-only root, what they write on emptyDirs (/app, where Pepr's controller
//     writes the module before forking it, and /tmp), the packages read from the image's /opt.
import { parseAllDocuments, stringify } from "yaml";
import { crds } from "../api/crd/definitions";
import { sandboxNamespace, sandboxRoleBinding } from "../api/sandbox-namespaces";
import {
  ADMISSION_DRAIN_PATH,
  ADMISSION_DRAIN_SECONDS,
  DEFAULT_CACHE_ROOT,
  PART_OF_JR2,
  REPO_CREDENTIALS_ROLE,
} from "../api/wire";
import {
  MODULE_PODS_POLICY,
  MODULE_ROLES_POLICY,
  SANDBOX_NAMESPACE_PODS_POLICY,
  modulePolicies,
  sandboxNamespacePolicies,
} from "../capabilities/admission/module-policy";
import { CONTROLLER_MODULES } from "./images/spec";

/** The ClusterRole of the operator's namespaced writes, bound in each opted-in namespace alone. */
export const OPERATOR_SANDBOXES_ROLE = "jr2-operator-sandboxes";

export type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };

/** The operator's writes where Sandboxes live: each Sandbox's pod and Service, and the namespace's
 * two NetworkPolicies (capabilities/sandbox/, decision 0047); `get` for a create's conflict. And
 * the cache agents' repo-credential Role (capabilities/repo/credentials-role.ts, decision 0046):
 * created empty, which asks for no privilege, then patched by name with `escalate`, so the
 * operator grants the agents a Secret read it does not hold itself, on that one Role alone. */
export const operatorSandboxesRole = () => ({
  apiVersion: "rbac.authorization.k8s.io/v1",
  kind: "ClusterRole",
  metadata: { name: OPERATOR_SANDBOXES_ROLE, labels: { ...PART_OF_JR2 } },
  rules: [
    { apiGroups: [""], resources: ["pods", "services"], verbs: ["get", "create"] },
    { apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], verbs: ["get", "create", "patch"] },
    { apiGroups: ["rbac.authorization.k8s.io"], resources: ["roles"], verbs: ["create"] },
    {
      apiGroups: ["rbac.authorization.k8s.io"],
      resources: ["roles"],
      verbs: ["get", "patch", "escalate"],
      resourceNames: [REPO_CREDENTIALS_ROLE],
    },
  ] satisfies Rule[],
});

/** Pepr's store CRD, as its controller applies it at start (pepr 1.1.4's dist/controller.js): in
 * the manifest, so the deployed controller's apply is a patch of an existing CRD. */
export const peprStoreCrd = () => ({
  apiVersion: "apiextensions.k8s.io/v1",
  kind: "CustomResourceDefinition",
  metadata: { name: "peprstores.pepr.dev" },
  spec: {
    group: "pepr.dev",
    versions: [
      {
        name: "v1",
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: "object",
            properties: { data: { type: "object", additionalProperties: { type: "string" } } },
          },
        },
      },
    ],
    scope: "Namespaced",
    names: { plural: "peprstores", singular: "peprstore", kind: "PeprStore" },
  },
});

/** The CRDs the module may get and patch (its two and Pepr's store), and nothing else. */
export const moduleCrdNames = () => [...crds().map((c) => c.metadata.name), peprStoreCrd().metadata.name];

/** Resources no cluster-wide rule of the module may write. */
const NAMESPACED_ONLY = new Set(["pods", "services", "networkpolicies", "secrets", "configmaps"]);
const WRITES = new Set(["create", "update", "patch", "delete", "deletecollection", "*"]);

/** Why a rule of the module's ClusterRole is too wide, or undefined. */
export function tooWide(rule: Rule): string | undefined {
  const res = rule.resources.join(",");
  if (rule.resources.includes("*") || rule.apiGroups.includes("*")) return `${res}: a wildcard`;
  if (rule.resources.includes("secrets")) return `${res}: Secrets are never the module's to read or write`;
  const writes = rule.verbs.filter((v) => WRITES.has(v));
  if (writes.length && rule.resources.some((r) => NAMESPACED_ONLY.has(r)))
    return `${res}: ${writes.join(",")} belongs in ${OPERATOR_SANDBOXES_ROLE}, bound in opted-in namespaces alone`;
  if (rule.resources.includes("customresourcedefinitions")) {
    const own = new Set(moduleCrdNames());
    if (!rule.resourceNames?.length || rule.resourceNames.some((n) => !own.has(n)))
      return `${res}: only the module's own CRDs, by resourceNames (${[...own].join(", ")})`;
    if (rule.verbs.some((v) => v !== "get" && v !== "patch")) return `${res}: get and patch only`;
  }
  return undefined;
}

/** Pepr adds `create` to the CRD rule of its own accord (for its store's CRD). With resourceNames
 * a create is never authorized anyway (its name is not known when it is judged); dropped, so the
 * role says what it grants. */
export const narrowedRules = (rules: Rule[]): Rule[] =>
  rules.map((r) =>
    r.resources.includes("customresourcedefinitions") && r.resourceNames?.length
      ? { ...r, verbs: r.verbs.filter((v) => v !== "create") }
      : r,
  );

/** Throws naming each rule of the built ClusterRole that is too wide, and the fix. */
export function checkClusterRole(rules: Rule[], where: string): void {
  const bad = rules.map(tooWide).filter((w): w is string => !!w);
  if (bad.length)
    throw new Error(`${where}: the module's ClusterRole is too wide (fix package.json pepr.rbac): ${bad.join("; ")}`);
}

/** The objects each opted-in namespace gets for the module: its Namespace (labelled), and the
 * RoleBinding of OPERATOR_SANDBOXES_ROLE to the module's service account; the ClusterRole first. */
export function moduleNamespaceObjects(namespaces: string[], serviceAccount: { name: string; namespace: string }) {
  return [
    ...namespaces.map(sandboxNamespace),
    operatorSandboxesRole(),
    ...namespaces.map((ns) => sandboxRoleBinding(ns, OPERATOR_SANDBOXES_ROLE, serviceAccount)),
  ];
}

const APP_VOLUME = "jr2-app";
const TMP_VOLUME = "jr2-tmp";
/** Where Pepr's controller script is in the image (scripts/images/spec.ts), and how the module it
 * forks from /app finds its packages. */
export const CONTROLLER_JS = `${CONTROLLER_MODULES}/pepr/dist/controller.js`;
const PEPR_CONTROLLER_JS = "/app/node_modules/pepr/dist/controller.js";
export const NODE_PATH = { name: "NODE_PATH", value: CONTROLLER_MODULES };

export const restrictedPodSecurity = () => ({
  runAsNonRoot: true,
  runAsUser: 65532,
  runAsGroup: 65532,
  fsGroup: 65532,
  seccompProfile: { type: "RuntimeDefault" },
});
export const restrictedContainerSecurity = () => ({
  runAsNonRoot: true,
  runAsUser: 65532,
  runAsGroup: 65532,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ["ALL"] },
  seccompProfile: { type: "RuntimeDefault" },
});
/** What the controller writes: the module it forks (/app) and temporary files; both small. */
export const writableVolumes = () => [
  { name: APP_VOLUME, emptyDir: { sizeLimit: "64Mi" } },
  { name: TMP_VOLUME, emptyDir: { sizeLimit: "64Mi" } },
];
export const writableMounts = () => [
  { name: APP_VOLUME, mountPath: "/app" },
  { name: TMP_VOLUME, mountPath: "/tmp" },
];

type Container = {
  name: string;
  args?: string[];
  env?: Array<{ name: string; value?: string }>;
  securityContext?: Record<string, unknown>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
  lifecycle?: Record<string, unknown>;
};
type Deployment = {
  kind: "Deployment";
  spec: {
    template: {
      spec: { securityContext?: Record<string, unknown>; containers: Container[]; volumes?: Array<{ name: string }> };
    };
  };
};

const withoutNamed = <T extends { name: string }>(list: T[] | undefined, names: string[]) =>
  (list ?? []).filter((x) => !names.includes(x.name));

type PodSpecOf<D extends Deployment> = D["spec"]["template"]["spec"];

/** `d` with its pod template's spec replaced by `edit`'s: the one copy of the nesting the edits share. */
function withPodSpec<D extends Deployment>(d: D, edit: (pod: PodSpecOf<D>) => PodSpecOf<D>): D {
  return { ...d, spec: { ...d.spec, template: { ...d.spec.template, spec: edit(d.spec.template.spec) } } };
}

/** A Pepr controller Deployment meeting the restricted profile (idempotent). */
export function restrictedController<D extends Deployment>(d: D): D {
  const ours = [APP_VOLUME, TMP_VOLUME];
  return withPodSpec(d, (pod) => ({
    ...pod,
    securityContext: { ...pod.securityContext, ...restrictedPodSecurity() },
    containers: pod.containers.map((c) => ({
      ...c,
      args: c.args?.map((a) => (a === PEPR_CONTROLLER_JS ? CONTROLLER_JS : a)),
      env: [...withoutNamed(c.env, [NODE_PATH.name]), NODE_PATH],
      securityContext: { ...c.securityContext, ...restrictedContainerSecurity() },
      volumeMounts: [...withoutNamed(c.volumeMounts, ours), ...writableMounts()],
    })),
    volumes: [...withoutNamed(pod.volumes, ours), ...writableVolumes()],
  }));
}

export { ADMISSION_DRAIN_SECONDS };

/**
 * The watcher's young generation held to 1 MB a semi-space: Node 24's V8 lets it grow to 32 MB,
 * and the watcher rested near 180 MB and peaked near 225 during a burst of 1,000 Sandboxes; with
 * this, 148 and 170, for about 1 ms more CPU per Sandbox (decision 0065). The admission process
 * keeps V8's default: its reviews are on every create's path. NODE_OPTIONS accepts this flag.
 */
export const WATCHER_V8_FLAGS = ["--max-semi-space-size=1"] as const;
const WATCHER_NODE_OPTIONS = { name: "NODE_OPTIONS", value: WATCHER_V8_FLAGS.join(" ") };

type Labelled = { metadata?: { labels?: Record<string, string> } };

/** `d`'s containers each edited when `d` is Pepr's `role` controller (its label); any other as it is. */
function editController<D extends Deployment>(
  role: "admission" | "watcher",
  d: D & Labelled,
  edit: (c: Container) => Container,
): D {
  if (d.metadata?.labels?.["pepr.dev/controller"] !== role) return d;
  return withPodSpec(d, (pod) => ({ ...pod, containers: pod.containers.map(edit) }));
}

/** The watcher Deployment with WATCHER_V8_FLAGS (idempotent; the admission one is left as it is). */
export function smallYoungWatcher<D extends Deployment>(d: D & Labelled): D {
  return editController("watcher", d, (c) => ({
    ...c,
    env: [...withoutNamed(c.env, [WATCHER_NODE_OPTIONS.name]), WATCHER_NODE_OPTIONS],
  }));
}

/**
 * The admission pod's preStop: a GET here (api/wire.ts's drain path on Pepr's port) that answers
 * after ADMISSION_DRAIN_SECONDS; from it on, every answer closes its connection (pepr.ts).
 */
export const ADMISSION_PRESTOP = {
  httpGet: { path: ADMISSION_DRAIN_PATH, port: 3000, scheme: "HTTPS" },
} as const;

/**
 * The admission Deployment's server told to stop only after a pause (idempotent; the watcher's is
 * left as it is): Pepr closes its listener at SIGTERM, while the Service may still send the API
 * server's next webhook call to the pod until the endpoint's removal reaches the node, and that
 * call would be refused. Pausing first lets a rollout drain it (decision 0060); and during the pause
 * each answer closes its connection, so no kept-alive connection of the API server's is left for
 * SIGTERM to reset under a review.
 */
export function drainedAdmission<D extends Deployment>(d: D & Labelled): D {
  return editController("admission", d, (c) => ({ ...c, lifecycle: { ...c.lifecycle, preStop: ADMISSION_PRESTOP } }));
}

type Doc = { kind?: string; metadata?: { name?: string; namespace?: string }; rules?: Rule[] };

/** The module's service account in a built manifest (the ClusterRoleBinding's subject). */
export function moduleServiceAccount(docs: Doc[]): { name: string; namespace: string } {
  const binding = docs.find((d) => d.kind === "ClusterRoleBinding") as
    | { subjects?: Array<{ kind: string; name: string; namespace: string }> }
    | undefined;
  const sa = binding?.subjects?.find((s) => s.kind === "ServiceAccount");
  if (!sa) throw new Error("the build has no ClusterRoleBinding to a ServiceAccount: which is the module's?");
  return { name: sa.name, namespace: sa.namespace };
}

/** The module's user name as the API server knows its service account. */
export const moduleUsername = (sa: { name: string; namespace: string }) =>
  `system:serviceaccount:${sa.namespace}:${sa.name}`;

/** The policies holding what the module's identity writes, for the build's service account, and
 * every pod of the opted-in namespaces to the baseline (decision 0069); the cache root is the
 * installation's (the manifests' cache agents use the default too). */
export const moduleHolds = (
  sa: { name: string; namespace: string },
  namespaces: string[],
  cacheRoot = DEFAULT_CACHE_ROOT,
) => [
  ...modulePolicies({ username: moduleUsername(sa), cacheRoot }),
  ...sandboxNamespacePolicies(namespaces, cacheRoot),
];

const OURS = new Set([
  OPERATOR_SANDBOXES_ROLE,
  peprStoreCrd().metadata.name,
  MODULE_PODS_POLICY,
  MODULE_ROLES_POLICY,
  SANDBOX_NAMESPACE_PODS_POLICY,
]);
const isOurs = (d: Doc, namespaces: string[]) =>
  OURS.has(d.metadata?.name ?? "") ||
  (d.kind === "Namespace" && namespaces.includes(d.metadata?.name ?? "")) ||
  (d.kind === "RoleBinding" && d.metadata?.name === OPERATOR_SANDBOXES_ROLE);

/**
 * The built manifest narrowed (idempotent): its ClusterRole checked, Pepr's store CRD beside the
 * module's, each opted-in namespace's objects after the module's Namespace, the controller
 * Deployments restricted, and the policies holding the module's own writes at the end.
 */
export function restrictModuleManifest(yaml: string, namespaces: string[]): string {
  const docs = parseAllDocuments(yaml)
    .map((d) => d.toJS() as Doc)
    .filter((d) => d && !isOurs(d, namespaces));
  const role = docs.find((d) => d.kind === "ClusterRole");
  if (!role) throw new Error("the build has no ClusterRole");
  role.rules = narrowedRules(role.rules ?? []);
  checkClusterRole(role.rules, "the manifest");
  const sa = moduleServiceAccount(docs);
  const out: unknown[] = [];
  let crdsSeen = false;
  for (const [i, d] of docs.entries()) {
    const isCrd = d.kind === "CustomResourceDefinition";
    if (crdsSeen && !isCrd && !out.some((o) => (o as Doc).metadata?.name === peprStoreCrd().metadata.name))
      out.push(peprStoreCrd());
    crdsSeen ||= isCrd;
    out.push(
      d.kind === "Deployment"
        ? drainedAdmission(smallYoungWatcher(restrictedController(d as unknown as Deployment)))
        : d,
    );
    // Right after the module's own Namespace: the opted-in namespaces exist before anything in them.
    if (d.kind === "Namespace" && d.metadata?.name === sa.namespace)
      out.push(...moduleNamespaceObjects(namespaces, sa));
    if (i === docs.length - 1 && !crdsSeen) throw new Error("the manifest carries no CRD");
  }
  out.push(...moduleHolds(sa, namespaces));
  return out.map((o) => stringify(o, { lineWidth: 0, aliasDuplicateObjects: false }).trimEnd()).join("\n---\n") + "\n";
}

/** The chart's template of the policies holding the module's own writes and the Sandbox namespaces'
 * pods (static: the build's service account and namespace list). */
export const moduleHoldsChartTemplate = (sa: { name: string; namespace: string }, namespaces: string[]) =>
  moduleHolds(sa, namespaces)
    .map((o) => stringify(o, { lineWidth: 0 }))
    .join("---\n");

/** The chart's template of the opted-in namespaces' objects (static: the build's list). */
export function moduleNamespacesChartTemplate(namespaces: string[], sa: { name: string; namespace: string }): string {
  return moduleNamespaceObjects(namespaces, sa)
    .map((o) => stringify(o, { lineWidth: 0 }))
    .join("---\n");
}

type Values = {
  rbac?: Rule[];
  admission?: Record<string, unknown>;
  watcher?: Record<string, unknown>;
};

/** The chart's values.yaml narrowed alike (idempotent): its rbac checked, both controllers'
 * security contexts restricted, their emptyDirs and NODE_PATH added, the watcher's V8 flags. */
export function restrictedChartValues(text: string): string {
  const values = parseAllDocuments(text)[0].toJS() as Values;
  values.rbac = narrowedRules(values.rbac ?? []);
  checkClusterRole(values.rbac, "the chart's values.yaml");
  for (const key of ["admission", "watcher"] as const) {
    const v = values[key];
    if (!v) continue;
    v.securityContext = { ...(v.securityContext as object), ...restrictedPodSecurity() };
    v.containerSecurityContext = { ...(v.containerSecurityContext as object), ...restrictedContainerSecurity() };
    const ours = [APP_VOLUME, TMP_VOLUME];
    v.extraVolumes = [...withoutNamed(v.extraVolumes as Array<{ name: string }>, ours), ...writableVolumes()];
    v.extraVolumeMounts = [...withoutNamed(v.extraVolumeMounts as Array<{ name: string }>, ours), ...writableMounts()];
    v.env = [...withoutNamed(v.env as Array<{ name: string }>, [NODE_PATH.name]), NODE_PATH];
  }
  if (values.watcher)
    values.watcher.env = [
      ...withoutNamed(values.watcher.env as Array<{ name: string }>, [WATCHER_NODE_OPTIONS.name]),
      WATCHER_NODE_OPTIONS,
    ];
  return stringify(values, { lineWidth: 0 });
}

/** A controller Deployment's chart template running Pepr's controller from the image's /opt. */
export const restrictedChartDeployment = (template: string) => template.split(PEPR_CONTROLLER_JS).join(CONTROLLER_JS);
