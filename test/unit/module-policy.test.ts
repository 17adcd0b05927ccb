// The policies holding what the module's own identity writes, and the Sandbox namespaces' pods
// (capabilities/admission/module-policy.ts, decision 0069), as objects: who they match, what they
// cover, where the build and the local runner put them. Their CEL runs on a real API server:
// test/integration/module-holds.test.ts and test/kube-1.34/manifest.test.ts.
import { parseAllDocuments } from "yaml";
import {
  MODULE_PODS_POLICY,
  MODULE_ROLES_POLICY,
  SANDBOX_NAMESPACE_PODS_POLICY,
  forbiddenVolumeTypes,
  modulePolicies,
  sandboxNamespacePolicies,
} from "../../capabilities/admission/module-policy";
import { ALLOWED_VOLUME_TYPES } from "../../capabilities/rules/volumes";
import { localModuleHolds } from "../../dev/local-operator";
import { moduleHoldsChartTemplate, restrictModuleManifest } from "../../scripts/module-rbac";
import { DEPLOYED_OPERATOR } from "../../scripts/webhooks";
import cfg from "../../package.json";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;
const USERNAME = "system:serviceaccount:pepr-system:pepr-test";
const policies = modulePolicies({ username: USERNAME, cacheRoot: "/srv/caches" }) as Obj[];
const named = (objs: Obj[], kind: string, name: string) =>
  objs.find((o) => o.kind === kind && o.metadata.name === name)!;
const allText = (p: Obj) =>
  p.spec.validations.map((v: Obj) => `${v.expression}\n${v.message ?? v.messageExpression}`).join("\n");

describe("the module's policies", () => {
  it("are two policies, each before its Deny binding, bound everywhere", () => {
    expect(policies.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      `ValidatingAdmissionPolicy/${MODULE_PODS_POLICY}`,
      `ValidatingAdmissionPolicyBinding/${MODULE_PODS_POLICY}`,
      `ValidatingAdmissionPolicy/${MODULE_ROLES_POLICY}`,
      `ValidatingAdmissionPolicyBinding/${MODULE_ROLES_POLICY}`,
    ]);
    for (const b of policies.filter((o) => o.kind.endsWith("Binding"))) {
      expect(b.spec).toEqual({ policyName: b.metadata.name, validationActions: ["Deny"] });
    }
    for (const p of policies.filter((o) => o.kind === "ValidatingAdmissionPolicy")) {
      expect(p.apiVersion).toBe("admissionregistration.k8s.io/v1");
      expect(p.spec.failurePolicy).toBe("Fail");
    }
  });

  it("match the module's user name alone", () => {
    for (const p of policies.filter((o) => o.kind === "ValidatingAdmissionPolicy")) {
      expect(p.spec.matchConditions).toEqual([
        { name: "is-the-module", expression: `request.userInfo.username == "${USERNAME}"` },
      ]);
    }
  });

  it("hold pod creates and Role creates and updates", () => {
    const pods = named(policies, "ValidatingAdmissionPolicy", MODULE_PODS_POLICY);
    expect(pods.spec.matchConstraints.resourceRules).toEqual([
      { apiGroups: [""], apiVersions: ["*"], operations: ["CREATE"], resources: ["pods"] },
    ]);
    const roles = named(policies, "ValidatingAdmissionPolicy", MODULE_ROLES_POLICY);
    expect(roles.spec.matchConstraints.resourceRules).toEqual([
      {
        apiGroups: ["rbac.authorization.k8s.io"],
        apiVersions: ["*"],
        operations: ["CREATE", "UPDATE"],
        resources: ["roles"],
      },
    ]);
  });

  it("check the pod shape the issue names: privilege, host namespaces and ports, the cache hostPath, contexts, the label, the service account", () => {
    const text = allText(named(policies, "ValidatingAdmissionPolicy", MODULE_PODS_POLICY));
    for (const piece of [
      "privileged",
      "hostNetwork",
      "hostPID",
      "hostIPC",
      "hostPort",
      // The cache root given, the request's namespace, the key from the volume's name.
      '"/srv/caches/" + request.namespace + "/" + v.name.substring(5)',
      "DirectoryOrCreate",
      "readOnly",
      "runAsNonRoot",
      "allowPrivilegeEscalation",
      '"ALL" in',
      "sandbox.jr2.dev/name",
      "automountServiceAccountToken",
      "serviceAccountName",
      "serviceAccountToken",
      "jr2-git-",
    ])
      expect(text).toContain(piece);
    // Every message says why, by this record.
    for (const v of named(policies, "ValidatingAdmissionPolicy", MODULE_PODS_POLICY).spec.validations)
      expect(v.message ?? v.messageExpression).toContain("decision 0069");
  });

  it("refuse every volume type the restricted profile does not list", () => {
    const forbidden = forbiddenVolumeTypes();
    expect(forbidden).toEqual(expect.arrayContaining(["nfs", "gitRepo", "iscsi", "rbd", "flexVolume"]));
    for (const t of forbidden) expect(ALLOWED_VOLUME_TYPES.has(t)).toBe(false);
    expect(forbidden).not.toContain("hostPath");
    expect(forbidden).not.toContain("secret");
  });

  it("hold the Role to get on Secrets by name, and its name", () => {
    const text = allText(named(policies, "ValidatingAdmissionPolicy", MODULE_ROLES_POLICY));
    expect(text).toContain('r.verbs == ["get"]');
    expect(text).toContain('r.?resources.orValue([]) == ["secrets"]');
    expect(text).toContain('r.?apiGroups.orValue([]) == [""]');
    expect(text).toContain("size(r.?resourceNames.orValue([])) > 0");
    expect(text).toContain('object.metadata.name == "jr2-cache-agent-repo-credentials"');
  });

  it("need a user name", () => {
    expect(() => modulePolicies({ username: "", cacheRoot: "/x" })).toThrow(/user name is empty/);
  });
});

describe("the Sandbox namespaces' pods policy", () => {
  const objs = sandboxNamespacePolicies(["jr2-sandboxes", "team-a"], "/srv/caches") as Obj[];

  it("binds every pod create in the opted-in namespaces, by the name the API server sets", () => {
    const p = named(objs, "ValidatingAdmissionPolicy", SANDBOX_NAMESPACE_PODS_POLICY);
    expect(p.spec.matchConditions).toBeUndefined();
    expect(named(objs, "ValidatingAdmissionPolicyBinding", SANDBOX_NAMESPACE_PODS_POLICY).spec).toEqual({
      policyName: SANDBOX_NAMESPACE_PODS_POLICY,
      validationActions: ["Deny"],
      matchResources: {
        namespaceSelector: {
          matchExpressions: [
            { key: "kubernetes.io/metadata.name", operator: "In", values: ["jr2-sandboxes", "team-a"] },
          ],
        },
      },
    });
  });

  it("holds the baseline but for the cache hostPath, and nothing only the operator's builder makes", () => {
    const text = allText(named(objs, "ValidatingAdmissionPolicy", SANDBOX_NAMESPACE_PODS_POLICY));
    for (const piece of ["privileged", "hostNetwork", "hostPort", '"/srv/caches/" + request.namespace', "readOnly"])
      expect(text).toContain(piece);
    for (const piece of ["sandbox.jr2.dev/name", "automountServiceAccountToken", "runAsNonRoot", "jr2-git-"])
      expect(text).not.toContain(piece);
  });

  it("needs a namespace", () => {
    expect(() => sandboxNamespacePolicies([], "/x")).toThrow(/no Sandbox namespace/);
  });
});

describe("where they are written", () => {
  const manifest = [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "pepr-system" } },
    {
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "sandboxes.core.jr2.dev" },
    },
    { apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: "pepr" }, rules: [] },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: "pepr" },
      roleRef: { kind: "ClusterRole", name: "pepr" },
      subjects: [{ kind: "ServiceAccount", name: `pepr-${cfg.pepr.uuid}`, namespace: "pepr-system" }],
    },
  ]
    .map((o) => JSON.stringify(o))
    .join("\n---\n");

  it("in the manifest, once, naming the service account the build binds, and the opted-in namespaces", () => {
    const once = restrictModuleManifest(manifest, ["jr2-sandboxes"]);
    const out = parseAllDocuments(restrictModuleManifest(once, ["jr2-sandboxes"])).map((d) => d.toJS() as Obj);
    const holds = out.filter((o) => /^ValidatingAdmissionPolicy/.test(o.kind));
    expect(holds.map((o) => o.metadata.name)).toEqual([
      MODULE_PODS_POLICY,
      MODULE_PODS_POLICY,
      MODULE_ROLES_POLICY,
      MODULE_ROLES_POLICY,
      SANDBOX_NAMESPACE_PODS_POLICY,
      SANDBOX_NAMESPACE_PODS_POLICY,
    ]);
    expect(holds[0].spec.matchConditions[0].expression).toBe(`request.userInfo.username == "${DEPLOYED_OPERATOR}"`);
    expect(holds[0].spec.validations.map((v: Obj) => v.expression).join("\n")).toContain(
      '"/var/lib/jr2/repos/" + request.namespace',
    );
    expect(holds[5].spec.matchResources.namespaceSelector.matchExpressions[0].values).toEqual(["jr2-sandboxes"]);
  });

  it("in the chart's template, the same objects", () => {
    const sa = { name: `pepr-${cfg.pepr.uuid}`, namespace: "pepr-system" };
    const chart = parseAllDocuments(moduleHoldsChartTemplate(sa, ["jr2-sandboxes"])).map((d) => d.toJS() as Obj);
    const fromManifest = parseAllDocuments(restrictModuleManifest(manifest, ["jr2-sandboxes"]))
      .map((d) => d.toJS() as Obj)
      .filter((o) => /^ValidatingAdmissionPolicy/.test(o.kind));
    expect(chart).toEqual(fromManifest);
  });

  it("by the local runner only for an identity of the module's own, with the cache root it runs with", () => {
    expect(localModuleHolds("kubernetes-admin", {})).toEqual([]);
    const local = localModuleHolds(DEPLOYED_OPERATOR, { JR2_CACHE_ROOT: "/tmp/caches" }) as Obj[];
    expect(local.map((o) => o.metadata.name)).toEqual([
      MODULE_PODS_POLICY,
      MODULE_PODS_POLICY,
      MODULE_ROLES_POLICY,
      MODULE_ROLES_POLICY,
    ]);
    expect(JSON.stringify(local[0])).toContain('\\"/tmp/caches/\\" + request.namespace');
  });
});
