// Foundation: the CRDs on the real API server. Valid objects are stored with their defaults, a
// misspelled field is refused by the server's own schema, and objects read back through the
// typed models parse with the same zod schemas they were generated from.
import { execFileSync } from "node:child_process";
import { K8s, kind } from "kubernetes-fluent-client";
import { Repo, RepoModel, Sandbox, SandboxModel } from "../../api/crd";
import { kubectlPath } from "../../dev/kubectl";
import { useNamespace } from "./support/cluster";

const ns = useNamespace("crds");

describe("the CRDs on the API server", () => {
  it("are installed by the module, with status subresources and short names", async () => {
    for (const name of ["sandboxes.core.jr2.dev", "repos.core.jr2.dev"]) {
      const crd = await K8s(kind.CustomResourceDefinition).Get(name);
      expect(crd.status?.conditions?.find((c) => c.type === "Established")?.status).toBe("True");
      expect(crd.spec.versions[0].subresources?.status).toEqual({});
    }
    const sbx = await K8s(kind.CustomResourceDefinition).Get("sandboxes.core.jr2.dev");
    expect(sbx.spec.names.shortNames).toEqual(["sbx"]);
  });

  it("store a valid Sandbox and a valid Repo, applying their defaults", async () => {
    // The Repo first: admission wants one of the namespace for each key a Sandbox names (decision 0046).
    const repo = await K8s(RepoModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Repo",
      metadata: { name: "example-a1b2", namespace: ns.name },
      spec: { url: "https://example.com/org/a.git", secretRef: { name: "fetch-token" } },
    });
    expect(repo.spec?.interval).toBe("5m");
    const sandbox = await K8s(SandboxModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Sandbox",
      metadata: { name: "valid", namespace: ns.name },
      spec: {
        image: "ghcr.io/example/harness:1",
        // Parked on a node no one has, so the operator never makes it Ready: this test is about storage.
        nodeSelector: { "jr2.dev/test": "nowhere" },
        sidecars: [{ name: "custodian", image: "ghcr.io/example/custodian:1", ports: [{ containerPort: 9000 }] }],
        resources: { limits: { cpu: "500m", memory: "1Gi" } },
        shmSize: "256Mi",
        repos: [{ key: "example-a1b2", url: "https://example.com/org/a.git" }],
        volumes: [{ name: "work", emptyDir: {} }],
        volumeMounts: [{ name: "work", mountPath: "/work" }],
      },
    });
    expect(sandbox.metadata?.uid).toBeTruthy();
    expect(sandbox.spec?.idleTimeout).toBe("30m");
  });

  it("refuse a misspelled field through the server's schema (strict field validation)", async () => {
    const typo = {
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Sandbox",
      metadata: { name: "typo", namespace: ns.name },
      spec: { image: "x", sidecars: [{ name: "custodian", image: "y", securityContex: { runAsNonRoot: true } }] },
    };
    // Server-side apply (the fluent client's Apply) says it as "field not declared in schema".
    await expect(K8s(SandboxModel).Apply(typo as unknown as SandboxModel)).rejects.toMatchObject({
      data: { message: expect.stringMatching(/\.spec\.sidecars\[0\]\.securityContex: field not declared in schema/) },
    });
    // kubectl's default (strict) says the same.
    expect(() =>
      execFileSync(kubectlPath(), ["apply", "-f", "-"], { input: JSON.stringify(typo), stdio: "pipe" }),
    ).toThrow(/unknown field "spec.sidecars\[0\].securityContex"/);
  });

  it("refuse a value the schema forbids, naming the field", async () => {
    const bad = {
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Sandbox",
      metadata: { name: "bad-timeout", namespace: ns.name },
      spec: { image: "x", idleTimeout: "half an hour" },
    };
    await expect(K8s(SandboxModel).Apply(bad as unknown as SandboxModel)).rejects.toMatchObject({
      status: 422,
      data: { message: expect.stringContaining("spec.idleTimeout") },
    });
  });

  it("read back through the typed models and parse with the zod schemas", async () => {
    const sandbox = await K8s(SandboxModel).InNamespace(ns.name).Get("valid");
    const parsed = Sandbox.parse({ ...sandbox, status: undefined });
    expect(parsed.spec.sidecars?.[0].ports?.[0].containerPort).toBe(9000);
    expect(parsed.spec.resources?.limits?.memory).toBe("1Gi");
    expect(parsed.spec.repos).toEqual([{ key: "example-a1b2", url: "https://example.com/org/a.git" }]);

    const repos = await K8s(RepoModel).InNamespace(ns.name).Get();
    expect(repos.items.map((r) => Repo.parse({ ...r, status: undefined }).spec.url)).toEqual([
      "https://example.com/org/a.git",
    ]);
  });

  it("print phase, node, endpoint and age for `kubectl get sbx`", () => {
    const out = execFileSync(kubectlPath(), ["get", "sbx", "-n", ns.name], { encoding: "utf8" });
    expect(out.split("\n")[0].split(/\s+/)).toEqual(["NAME", "PHASE", "NODE", "ENDPOINT", "AGE"]);
    const repos = execFileSync(kubectlPath(), ["get", "repo", "-n", ns.name], { encoding: "utf8" });
    expect(repos.split("\n")[0].split(/\s+/)).toEqual(["NAME", "URL", "PRESENT", "AGE"]);
  });
});
