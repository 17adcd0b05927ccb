// The module's rights and controller pods as the build writes them (scripts/module-rbac.ts,
// decision 0047): cluster-wide only reads, status patches and its own CRDs by name; pod, Service
// and NetworkPolicy writes bound in each opted-in namespace alone; Pepr's Deployments held to the
// restricted Pod Security Standard, in the manifest and the Helm chart alike.
import { parseAllDocuments, stringify } from "yaml";
import { BUILD_ENV } from "../../api/env";
import { sandboxNamespacesFrom } from "../../api/sandbox-namespaces";
import { DEFAULT_SANDBOX_NAMESPACE, SANDBOX_NAMESPACE_ENABLED, SANDBOX_NAMESPACE_LABEL } from "../../api/wire";
import { crdRefusal } from "../../lib/crd-install";
import cfg from "../../package.json";
import {
  ADMISSION_DRAIN_SECONDS,
  CONTROLLER_JS,
  OPERATOR_SANDBOXES_ROLE,
  checkClusterRole,
  restrictModuleManifest,
  restrictedChartDeployment,
  restrictedChartValues,
  tooWide,
  type Rule,
  WATCHER_V8_FLAGS,
} from "../../scripts/module-rbac";
import { DEPLOYED_OPERATOR } from "../../scripts/webhooks";

const name = `pepr-${cfg.pepr.uuid}`;
/** What `pepr build` writes in rbacMode scoped: package.json's rules as the ClusterRole. */
const peprRules = cfg.pepr.rbac as Rule[];
const peprDeployment = (suffix: string) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: {
    name: `${name}${suffix}`,
    namespace: "pepr-system",
    labels: { "pepr.dev/controller": suffix ? "watcher" : "admission" },
  },
  spec: {
    template: {
      spec: {
        serviceAccountName: name,
        securityContext: { runAsUser: 65532, runAsGroup: 65532, runAsNonRoot: true, fsGroup: 65532 },
        containers: [
          {
            name: suffix ? "watcher" : "server",
            image: "jr2/controller:0.1.0",
            args: ["/app/node_modules/pepr/dist/controller.js", "d3b3"],
            env: [{ name: "LOG_LEVEL", value: "info" }],
            securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
            volumeMounts: [{ name: "module", mountPath: "/app/load", readOnly: true }],
          },
        ],
        volumes: [{ name: "module", secret: { secretName: `${name}-module` } }],
      },
    },
  },
});
const built = [
  {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "sandboxes.core.jr2.dev" },
  },
  { apiVersion: "v1", kind: "Namespace", metadata: { name: "pepr-system" } },
  { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name }, rules: peprRules },
  {
    apiVersion: "rbac.authorization.k8s.io/v1",
    kind: "ClusterRoleBinding",
    metadata: { name },
    roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
    subjects: [{ kind: "ServiceAccount", name, namespace: "pepr-system" }],
  },
  peprDeployment("-watcher"),
  peprDeployment(""),
]
  .map((d) => stringify(d))
  .join("---\n");

type Obj = { kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> } } & Record<
  string,
  any // eslint-disable-line @typescript-eslint/no-explicit-any
>;
const docs = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as Obj);

describe("the module's ClusterRole (package.json pepr.rbac)", () => {
  it("grants no pod, Service, NetworkPolicy or Secret write anywhere, and CRDs only its own by name", () => {
    expect(() => checkClusterRole(peprRules, "package.json")).not.toThrow();
    const writes = peprRules.filter((r) =>
      r.resources.some((x) => ["pods", "services", "networkpolicies", "secrets"].includes(x)),
    );
    // Reads only (`get` on pods for the exec guard, decision 0048; list already reads them all).
    for (const r of writes) expect(r.verbs.filter((v) => !["get", "list", "watch"].includes(v))).toEqual([]);
    const crd = peprRules.find((r) => r.resources.includes("customresourcedefinitions"))!;
    expect(crd.verbs.sort()).toEqual(["get", "patch"]);
    expect(crd.resourceNames!.sort()).toEqual(["peprstores.pepr.dev", "repos.core.jr2.dev", "sandboxes.core.jr2.dev"]);
  });

  it("refuses, naming the rule and the fix, what was there before", () => {
    const pods: Rule = { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch", "create"] };
    const crds: Rule = {
      apiGroups: ["apiextensions.k8s.io"],
      resources: ["customresourcedefinitions"],
      verbs: ["get", "create", "patch"],
    };
    expect(tooWide(pods)).toMatch(/pods: create belongs in jr2-operator-sandboxes/);
    expect(tooWide(crds)).toMatch(/only the module's own CRDs, by resourceNames/);
    expect(tooWide({ ...crds, resourceNames: ["sandboxes.core.jr2.dev"] })).toMatch(/get and patch only/);
    expect(tooWide({ apiGroups: [""], resources: ["secrets"], verbs: ["get"] })).toMatch(/Secrets/);
    expect(() => checkClusterRole([pods], "the manifest")).toThrow(/the manifest: .*fix package.json pepr.rbac/);
  });
});

describe("the built manifest, narrowed", () => {
  const out = docs(restrictModuleManifest(built, ["jr2-sandboxes", "team-a"]));

  it("labels each opted-in namespace and binds the namespaced writes there alone", () => {
    for (const ns of ["jr2-sandboxes", "team-a"]) {
      const namespace = out.find((d) => d.kind === "Namespace" && d.metadata.name === ns)!;
      expect(namespace.metadata.labels).toEqual({ [SANDBOX_NAMESPACE_LABEL]: SANDBOX_NAMESPACE_ENABLED });
      const binding = out.find((d) => d.kind === "RoleBinding" && d.metadata.namespace === ns)!;
      expect(binding.roleRef).toEqual({
        apiGroup: "rbac.authorization.k8s.io",
        kind: "ClusterRole",
        name: OPERATOR_SANDBOXES_ROLE,
      });
      expect(`system:serviceaccount:${binding.subjects[0].namespace}:${binding.subjects[0].name}`).toBe(
        DEPLOYED_OPERATOR,
      );
    }
    expect(out.filter((d) => d.kind === "RoleBinding").map((d) => d.metadata.namespace)).toEqual([
      "jr2-sandboxes",
      "team-a",
    ]);
    expect(out.some((d) => d.kind === "ClusterRoleBinding" && d.roleRef.name === OPERATOR_SANDBOXES_ROLE)).toBe(false);
    const role = out.find((d) => d.kind === "ClusterRole" && d.metadata.name === OPERATOR_SANDBOXES_ROLE)!;
    expect(role.rules).toEqual([
      { apiGroups: [""], resources: ["pods", "services"], verbs: ["get", "create"] },
      { apiGroups: ["networking.k8s.io"], resources: ["networkpolicies"], verbs: ["get", "create", "patch"] },
      // The cache agents' repo-credential Role (decision 0046): any Role created (empty), that one patched.
      { apiGroups: ["rbac.authorization.k8s.io"], resources: ["roles"], verbs: ["create"] },
      {
        apiGroups: ["rbac.authorization.k8s.io"],
        resources: ["roles"],
        verbs: ["get", "patch", "escalate"],
        resourceNames: ["jr2-cache-agent-repo-credentials"],
      },
    ]);
    // The namespaces come before anything placed in them (kubectl apply -f goes in order).
    const first = out.findIndex((d) => d.kind === "Namespace" && d.metadata.name === "team-a");
    const binding = out.findIndex((d) => d.kind === "RoleBinding" && d.metadata.namespace === "team-a");
    expect(first).toBeLessThan(binding);
  });

  it("carries Pepr's store CRD beside the module's, so the controller's apply is a patch", () => {
    const names = out.filter((d) => d.kind === "CustomResourceDefinition").map((d) => d.metadata.name);
    expect(names).toEqual(["sandboxes.core.jr2.dev", "peprstores.pepr.dev"]);
  });

  it("holds both controller Deployments to the restricted profile, what they write on emptyDirs", () => {
    const deployments = out.filter((d) => d.kind === "Deployment");
    expect(deployments).toHaveLength(2);
    for (const d of deployments) {
      const pod = d.spec.template.spec;
      expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } });
      for (const c of pod.containers) {
        expect(c.securityContext).toMatchObject({
          runAsNonRoot: true,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ["ALL"] },
          seccompProfile: { type: "RuntimeDefault" },
        });
        expect(c.args[0]).toBe(CONTROLLER_JS);
        expect(c.env).toContainEqual({ name: "NODE_PATH", value: "/opt/jr2-controller/node_modules" });
        const mounted = Object.fromEntries(
          c.volumeMounts.map((m: { mountPath: string; name: string }) => [m.mountPath, m.name]),
        );
        for (const path of ["/app", "/tmp"]) {
          const volume = pod.volumes.find((v: { name: string }) => v.name === mounted[path]);
          expect(volume?.emptyDir).toBeDefined();
        }
        expect(mounted["/app/load"]).toBe("module");
      }
    }
  });

  it("pauses the admission server before it stops, so a rollout drains it; not the watcher", () => {
    const preStop = (n: string) =>
      out.find((d) => d.kind === "Deployment" && d.metadata.name === n)!.spec.template.spec.containers[0].lifecycle
        ?.preStop;
    expect(preStop(name)).toEqual({ httpGet: { path: "/jr2-drain", port: 3000, scheme: "HTTPS" } });
    expect(ADMISSION_DRAIN_SECONDS).toBe(3);
    expect(preStop(`${name}-watcher`)).toBeUndefined();
  });

  it("holds the watcher's young generation small (decision 0065); not the admission server's", () => {
    const env = (n: string) =>
      out.find((d) => d.kind === "Deployment" && d.metadata.name === n)!.spec.template.spec.containers[0].env as Array<{
        name: string;
        value?: string;
      }>;
    expect(env(`${name}-watcher`).filter((e) => e.name === "NODE_OPTIONS")).toEqual([
      { name: "NODE_OPTIONS", value: WATCHER_V8_FLAGS.join(" ") },
    ]);
    expect(WATCHER_V8_FLAGS).toEqual(["--max-semi-space-size=1"]);
    expect(env(name).some((e) => e.name === "NODE_OPTIONS")).toBe(false);
  });

  it("is idempotent", () => {
    const once = restrictModuleManifest(built, ["jr2-sandboxes"]);
    expect(restrictModuleManifest(once, ["jr2-sandboxes"])).toBe(once);
  });

  it("drops the CRD create Pepr adds of its own accord", () => {
    const withCreate = built.replace(/(peprstores.pepr.dev\n\s+verbs:\n)/, "$1      - create\n");
    expect(withCreate).not.toBe(built);
    const role = docs(restrictModuleManifest(withCreate, ["jr2-sandboxes"])).find((d) => d.metadata.name === name)!;
    const crd = role.rules.find((r: Rule) => r.resources.includes("customresourcedefinitions"));
    expect(crd.verbs).toEqual(["get", "patch"]);
  });

  it("fails the build when Pepr's ClusterRole writes pods cluster-wide", () => {
    const wide = built.replace(/(- pods\n\s+verbs:\n)/, "$1      - create\n");
    expect(wide).not.toBe(built);
    expect(() => restrictModuleManifest(wide, ["jr2-sandboxes"])).toThrow(/too wide/);
  });
});

describe("the Helm chart, narrowed alike", () => {
  const values = stringify({
    rbac: peprRules,
    admission: {
      env: [{ name: "LOG_LEVEL", value: "info" }],
      securityContext: { runAsUser: 65532, runAsNonRoot: true, fsGroup: 65532 },
      containerSecurityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
      extraVolumes: [],
      extraVolumeMounts: [],
    },
    watcher: { env: [], securityContext: {}, containerSecurityContext: {}, extraVolumes: [], extraVolumeMounts: [] },
  });

  it("restricts both controllers' values and mounts their emptyDirs", () => {
    const v = parseAllDocuments(restrictedChartValues(values))[0].toJS();
    for (const key of ["admission", "watcher"]) {
      expect(v[key].securityContext.seccompProfile).toEqual({ type: "RuntimeDefault" });
      expect(v[key].containerSecurityContext).toMatchObject({ readOnlyRootFilesystem: true, runAsNonRoot: true });
      expect(v[key].extraVolumeMounts.map((m: { mountPath: string }) => m.mountPath)).toEqual(["/app", "/tmp"]);
      expect(v[key].env).toContainEqual({ name: "NODE_PATH", value: "/opt/jr2-controller/node_modules" });
    }
    expect(v.watcher.env).toContainEqual({ name: "NODE_OPTIONS", value: WATCHER_V8_FLAGS.join(" ") });
    expect(v.admission.env.map((e: { name: string }) => e.name)).not.toContain("NODE_OPTIONS");
    expect(restrictedChartValues(restrictedChartValues(values))).toBe(restrictedChartValues(values));
  });

  it("refuses a values.yaml whose rbac writes pods cluster-wide, and runs the controller from /opt", () => {
    const wide = stringify({ rbac: [{ apiGroups: [""], resources: ["pods"], verbs: ["create"] }] });
    expect(() => restrictedChartValues(wide)).toThrow(/values.yaml.*too wide/);
    expect(restrictedChartDeployment("args:\n  - /app/node_modules/pepr/dist/controller.js\n")).toBe(
      `args:\n  - ${CONTROLLER_JS}\n`,
    );
  });
});

describe("the build's opted-in namespaces (JR2_SANDBOX_NAMESPACES)", () => {
  const from = (v?: string) => sandboxNamespacesFrom(v === undefined ? {} : { [BUILD_ENV.sandboxNamespaces]: v });
  it("defaults to the one Sandbox namespace, and reads a list once each", () => {
    expect(from()).toEqual([DEFAULT_SANDBOX_NAMESPACE]);
    expect(from(" , ")).toEqual([DEFAULT_SANDBOX_NAMESPACE]);
    expect(from(" team-a, team-b,,team-a ")).toEqual(["team-a", "team-b"]);
  });
  it("refuses what is no namespace name, naming the variable, the entry and the fix", () => {
    expect(() => from("team-a,Team_B")).toThrow(
      /JR2_SANDBOX_NAMESPACES\[1\]: "Team_B" is not a namespace name: write lower-case/,
    );
  });
});

describe("the CRD apply in the watcher", () => {
  it("names the fix when the deployed module may not create a missing CRD", () => {
    expect(crdRefusal("sandboxes.core.jr2.dev", { status: 403 }).message).toMatch(
      /sandboxes.core.jr2.dev .*403.*kubectl apply -f dist\/crds\//,
    );
    const other = new Error("boom");
    expect(crdRefusal("x", other)).toBe(other);
  });
});
