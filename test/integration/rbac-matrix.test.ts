// What the module's and the Orchestrator's service accounts may do, as the built manifests grant
// it (decision 0047): their RBAC objects (namespaces, service accounts, roles, bindings) from dist/
// applied to the real control plane, and `kubectl auth can-i --as=system:serviceaccount:...` asked
// in a Sandbox namespace, another namespace and kube-system. Nothing else of the manifests is
// applied, so no workload runs; what this test created is deleted after it.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { apply, run } from "../../dev/kubectl";
import { ROOT } from "../../dev/local-operator";
import { DEFAULT_SANDBOX_NAMESPACE } from "../../api/wire";
import cfg from "../../package.json";
import { useNamespace } from "./support/cluster";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;
const kubeconfig = () => process.env.KUBECONFIG!;
const RBAC_KINDS = new Set(["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]);

const read = (file: string): Obj[] =>
  parseAllDocuments(readFileSync(join(ROOT, "dist", file), "utf8"))
    .map((d) => d.toJS() as Obj)
    .filter((d) => d && RBAC_KINDS.has(d.kind));
const objects = [...read(`pepr-module-${cfg.pepr.uuid}.yaml`), ...read("jr2-orchestrator.yaml")];

/** The module's service account, as its manifest binds it. */
const moduleSa = (() => {
  const binding = objects.find((o) => o.kind === "ClusterRoleBinding" && o.metadata.name === `pepr-${cfg.pepr.uuid}`);
  const s = binding.subjects[0];
  return `system:serviceaccount:${s.namespace}:${s.name}`;
})();
const orchestratorSa = (() => {
  const sa = objects.find((o) => o.kind === "ServiceAccount" && o.metadata.name === "jr2-orchestrator");
  return `system:serviceaccount:${sa.metadata.namespace}:${sa.metadata.name}`;
})();
const ORCHESTRATOR_NS = orchestratorSa.split(":")[2];

const other = useNamespace("rbac-other");
/** The namespaces this test found already there: never deleted after it. */
let existing: Set<string>;

beforeAll(async () => {
  const names = (await run(kubeconfig(), ["get", "namespaces", "-o", "jsonpath={.items[*].metadata.name}"])).split(
    /\s+/,
  );
  existing = new Set(names);
  // Namespaces first, then what lives in them.
  await apply(
    kubeconfig(),
    objects.filter((o) => o.kind === "Namespace"),
  );
  await apply(
    kubeconfig(),
    objects.filter((o) => o.kind !== "Namespace"),
  );
}, 60_000);

// Waits until the namespaces it made are gone: a later test file applying the manifests into the
// same namespaces would otherwise meet them terminating.
afterAll(async () => {
  const made = objects.filter((o) => o.kind !== "Namespace" || !existing.has(o.metadata.name));
  await run(
    kubeconfig(),
    ["delete", "--ignore-not-found", "--timeout=100s", "-f", "-"],
    JSON.stringify({ apiVersion: "v1", kind: "List", items: made }),
  );
}, 120_000);

/** `kubectl auth can-i` as `as`: "yes" or "no". */
const can = async (as: string, verb: string, resource: string, namespace?: string) => {
  // `<resource> --subresource=<sub>` asks of a subresource (kubectl reads `a/b` as a name).
  const args = ["auth", "can-i", verb, ...resource.split(" "), `--as=${as}`, ...(namespace ? ["-n", namespace] : [])];
  const out = await run(kubeconfig(), args).catch((err: Error) => err.message);
  return /^yes$/m.test(out) ? "yes" : "no";
};

/** Each [verb, resource] asked in the three namespaces, answered as [sandbox ns, other ns, kube-system]. */
async function matrix(as: string, asks: Array<[string, string]>) {
  const out: Record<string, string[]> = {};
  for (const [verb, resource] of asks)
    out[`${verb} ${resource}`] = [
      await can(as, verb, resource, DEFAULT_SANDBOX_NAMESPACE),
      await can(as, verb, resource, other.name),
      await can(as, verb, resource, "kube-system"),
    ];
  return out;
}

const NAMESPACED: Array<[string, string]> = [
  ["create", "pods"],
  ["create", "services"],
  ["create", "networkpolicies.networking.k8s.io"],
  ["patch", "networkpolicies.networking.k8s.io"],
  ["get", "secrets"],
  ["list", "secrets"],
  // The cache agents' repo-credential Role (decision 0046): that one Role patched, with escalate.
  ["patch", "roles.rbac.authorization.k8s.io/jr2-cache-agent-repo-credentials"],
  ["escalate", "roles.rbac.authorization.k8s.io/jr2-cache-agent-repo-credentials"],
  ["patch", "roles.rbac.authorization.k8s.io/admin"],
  ["escalate", "roles.rbac.authorization.k8s.io/admin"],
  ["create", "rolebindings.rbac.authorization.k8s.io"],
  // An exec or attach is a `create` on the pod's subresource (and a websocket's also a `get`, from
  // 1.35 asked `create` as well): `can-i exec pods` asks a verb no rule grants.
  ["create", "pods --subresource=exec"],
  ["get", "pods --subresource=exec"],
  ["create", "pods --subresource=attach"],
  ["get", "pods --subresource=attach"],
];

/** Neither account may exec into or attach to a pod, in any of the three namespaces. */
const EXEC_DENIED = Object.fromEntries(
  NAMESPACED.filter(([, r]) => r.startsWith("pods --subresource=")).map(([v, r]) => [`${v} ${r}`, ["no", "no", "no"]]),
);

describe("the RBAC of the built manifests (decision 0047)", () => {
  it("binds the operator's pod, Service and policy writes in the Sandbox namespace alone; no Secret anywhere", async () => {
    expect(moduleSa).toBe(`system:serviceaccount:pepr-system:pepr-${cfg.pepr.uuid}`);
    expect(await matrix(moduleSa, NAMESPACED)).toEqual({
      "create pods": ["yes", "no", "no"],
      "create services": ["yes", "no", "no"],
      "create networkpolicies.networking.k8s.io": ["yes", "no", "no"],
      "patch networkpolicies.networking.k8s.io": ["yes", "no", "no"],
      "get secrets": ["no", "no", "no"],
      "list secrets": ["no", "no", "no"],
      "patch roles.rbac.authorization.k8s.io/jr2-cache-agent-repo-credentials": ["yes", "no", "no"],
      "escalate roles.rbac.authorization.k8s.io/jr2-cache-agent-repo-credentials": ["yes", "no", "no"],
      "patch roles.rbac.authorization.k8s.io/admin": ["no", "no", "no"],
      "escalate roles.rbac.authorization.k8s.io/admin": ["no", "no", "no"],
      "create rolebindings.rbac.authorization.k8s.io": ["no", "no", "no"],
      ...EXEC_DENIED,
    });
    // What it watches, it reads everywhere: its labelled pods and Services, Sandboxes, Repos.
    expect(
      await matrix(moduleSa, [
        ["watch", "pods"],
        // The exec guard reads the pod an exec names, wherever it is (decision 0048).
        ["get", "pods"],
        ["list", "services"],
        ["watch", "sandboxes.core.jr2.dev"],
        ["patch", "sandboxes.core.jr2.dev --subresource=status"],
      ]),
    ).toEqual({
      "watch pods": ["yes", "yes", "yes"],
      "get pods": ["yes", "yes", "yes"],
      "list services": ["yes", "yes", "yes"],
      "watch sandboxes.core.jr2.dev": ["yes", "yes", "yes"],
      "patch sandboxes.core.jr2.dev --subresource=status": ["yes", "yes", "yes"],
    });
  });

  it("lets the operator get and patch its own CRDs by name, create none, and touch no other", async () => {
    const crd = "customresourcedefinitions.apiextensions.k8s.io";
    const asks: Array<[string, string]> = [];
    for (const name of ["sandboxes.core.jr2.dev", "repos.core.jr2.dev", "networkpolicies.example.com"])
      for (const verb of ["get", "patch", "create"]) asks.push([verb, `${crd}/${name}`]);
    asks.push(["create", crd], ["list", crd]);
    const answers: Record<string, string> = {};
    for (const [verb, resource] of asks)
      answers[`${verb} ${resource.split("/")[1] ?? "(any)"}`] = await can(moduleSa, verb, resource);
    expect(answers).toEqual({
      "get sandboxes.core.jr2.dev": "yes",
      "patch sandboxes.core.jr2.dev": "yes",
      "create sandboxes.core.jr2.dev": "no",
      "get repos.core.jr2.dev": "yes",
      "patch repos.core.jr2.dev": "yes",
      "create repos.core.jr2.dev": "no",
      "get networkpolicies.example.com": "no",
      "patch networkpolicies.example.com": "no",
      "create networkpolicies.example.com": "no",
      "create (any)": "no",
      "list (any)": "no",
    });
  });

  it("gives the Orchestrator its Sandbox namespace alone: no pods, no policies, nothing of its own namespace's Secrets", async () => {
    expect(await matrix(orchestratorSa, [...NAMESPACED, ["create", "sandboxes.core.jr2.dev"]])).toEqual({
      "create pods": ["no", "no", "no"],
      "create services": ["yes", "no", "no"],
      "create networkpolicies.networking.k8s.io": ["no", "no", "no"],
      "patch networkpolicies.networking.k8s.io": ["no", "no", "no"],
      "get secrets": ["yes", "no", "no"],
      "list secrets": ["no", "no", "no"],
      "patch roles.rbac.authorization.k8s.io/jr2-cache-agent-repo-credentials": ["no", "no", "no"],
      "escalate roles.rbac.authorization.k8s.io/jr2-cache-agent-repo-credentials": ["no", "no", "no"],
      "patch roles.rbac.authorization.k8s.io/admin": ["no", "no", "no"],
      "escalate roles.rbac.authorization.k8s.io/admin": ["no", "no", "no"],
      "create rolebindings.rbac.authorization.k8s.io": ["no", "no", "no"],
      ...EXEC_DENIED,
      "create sandboxes.core.jr2.dev": ["yes", "no", "no"],
    });
    expect(await can(orchestratorSa, "get", "secrets", ORCHESTRATOR_NS)).toBe("no");
    expect(
      await can(orchestratorSa, "get", "customresourcedefinitions.apiextensions.k8s.io/sandboxes.core.jr2.dev"),
    ).toBe("no");
  });

  it("labels the Sandbox namespace as opted in", async () => {
    const labels = JSON.parse(
      await run(kubeconfig(), ["get", "namespace", DEFAULT_SANDBOX_NAMESPACE, "-o", "jsonpath={.metadata.labels}"]),
    );
    expect(labels["jr2.dev/sandboxes"]).toBe("enabled");
  });
});
