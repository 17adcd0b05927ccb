// What the module's, the Orchestrator's and the cache agent's service accounts may do, as the built manifests grant
// it (decision 0047): their RBAC objects (namespaces, service accounts, roles, bindings) from dist/
// applied to the real control plane, and `kubectl auth can-i --as=system:serviceaccount:...` asked
// in a Sandbox namespace, another namespace and kube-system. Nothing else of the manifests is
// applied, so no workload runs; what this test created is deleted after it.
import { readdirSync, readFileSync } from "node:fs";
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
const objects = [
  ...read(`pepr-module-${cfg.pepr.uuid}.yaml`),
  ...read("jr2-orchestrator.yaml"),
  ...read("jr2-cache-agent.yaml"),
];

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
const cacheAgentSa = (() => {
  const sa = objects.find((o) => o.kind === "ServiceAccount" && o.metadata.name === "jr2-cache-agent");
  return `system:serviceaccount:${sa.metadata.namespace}:${sa.metadata.name}`;
})();

const other = useNamespace("rbac-other", { optedIn: false });
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

  // Decision 0066: which namespaces' Repos an agent fetches is its manifest's list, the one its
  // RoleBindings are rendered from; it costs no read of Namespaces.
  it("gives the cache agent no read of Namespaces and nothing namespaced but its Secrets' Role", async () => {
    for (const verb of ["get", "list", "watch"])
      expect([verb, await can(cacheAgentSa, verb, "namespaces")]).toEqual([verb, "no"]);
    const none = ["no", "no", "no"];
    expect(await matrix(cacheAgentSa, NAMESPACED)).toEqual(
      Object.fromEntries(NAMESPACED.map(([v, r]) => [`${v} ${r}`, none])),
    );
    expect(await can(cacheAgentSa, "list", "repos.core.jr2.dev")).toBe("yes");
  });

  it("names the opted-in namespaces in the cache agent's DaemonSet, and no built manifest or chart carries local mode's switch", () => {
    const all = (file: string): Obj[] =>
      parseAllDocuments(readFileSync(join(ROOT, "dist", file), "utf8")).map((d) => d.toJS() as Obj);
    const agent = all("jr2-cache-agent.yaml");
    const labelled = agent
      .filter((o) => o?.kind === "Namespace" && o.metadata.labels?.["jr2.dev/sandboxes"] === "enabled")
      .map((o) => o.metadata.name);
    expect(labelled).toContain(DEFAULT_SANDBOX_NAMESPACE);
    const env = agent.find((o) => o?.kind === "DaemonSet").spec.template.spec.containers[0].env as Obj[];
    expect(env.find((e) => e.name === "JR2_SANDBOX_NAMESPACES")?.value).toBe(labelled.join(","));
    const texts = readdirSync(join(ROOT, "dist"), { recursive: true, encoding: "utf8" })
      .filter((f) => /\.(ya?ml|json|tpl)$/.test(f))
      .map((f) => [f, readFileSync(join(ROOT, "dist", f), "utf8")] as const);
    expect(texts.length).toBeGreaterThan(5);
    for (const [f, text] of texts) expect([f, text.includes("JR2_LOCAL_REPO_ROOTS")]).toEqual([f, false]);
  });

  it("labels the Sandbox namespace as opted in", async () => {
    const labels = JSON.parse(
      await run(kubeconfig(), ["get", "namespace", DEFAULT_SANDBOX_NAMESPACE, "-o", "jsonpath={.metadata.labels}"]),
    );
    expect(labels["jr2.dev/sandboxes"]).toBe("enabled");
  });
});

// Decision 0067: admission judges a Sandbox create by its namespace's opt-in label, from a watch of
// the labelled Namespaces (and one read before a refusal): reads of namespaces, no write.
describe("the module's reads of namespaces (decision 0067)", () => {
  it("may get, list and watch namespaces, and write none", async () => {
    const asks = ["get", "list", "watch", "patch", "update", "create", "delete"];
    const answers = Object.fromEntries(
      await Promise.all(asks.map(async (v) => [v, await can(moduleSa, v, "namespaces")])),
    );
    expect(answers).toEqual({
      get: "yes",
      list: "yes",
      watch: "yes",
      patch: "no",
      update: "no",
      create: "no",
      delete: "no",
    });
  });
});
