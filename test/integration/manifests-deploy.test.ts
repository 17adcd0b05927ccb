// The build output's companion manifests on the real control plane: applied with strict field
// validation, the cache agent's DaemonSet puts one agent on every node (kwok plays the kubelets
// of the fake ones),
// and its service account may do what the agent does and nothing it does not. And the module's
// own manifest and chart: one ECDSA serving pair, trusted by every webhook in both.
import { X509Certificate } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { K8s, kind } from "kubernetes-fluent-client";
import { CACHE_AGENT } from "../../cache-agent/cache-agent-manifests";
import { COMPANION_NAMESPACE, DEFAULT_SANDBOX_NAMESPACE } from "../../api/wire";
import { GROUP } from "../../api/crd/sources/common";
import { ORCHESTRATOR } from "../../orchestrator/orchestrator-manifests";
import { ROOT } from "../../dev/local-operator";
import { run } from "../../dev/kubectl";
import { waitFor } from "./support/cluster";
import { CACHE_AGENT_ENV } from "../../api/env";
import { caBundleOf } from "../../scripts/webhooks";
import { tlsSecretOf } from "../../scripts/serving-tls";
import cfg from "../../package.json";

const kubeconfig = () => process.env.KUBECONFIG!;
const manifest = join(ROOT, "dist", "jr2-cache-agent.yaml");
const orchestratorManifest = join(ROOT, "dist", "jr2-orchestrator.yaml");

// Waits until what it applied is gone (its namespaces too): a later file applying into the same
// namespaces would otherwise meet them terminating.
afterAll(async () => {
  await run(kubeconfig(), ["delete", "--ignore-not-found", "--timeout=100s", "-f", orchestratorManifest]);
  await run(kubeconfig(), ["delete", "--ignore-not-found", "--timeout=100s", "-f", manifest]);
}, 240_000);

/** What a service account may do (a SubjectAccessReview through kubectl auth can-i). */
async function can(verb: string, resource: string, extra: string[] = [], account = CACHE_AGENT): Promise<boolean> {
  const as = `system:serviceaccount:${COMPANION_NAMESPACE}:${account}`;
  const out = await run(kubeconfig(), ["auth", "can-i", verb, resource, "--as", as, ...extra]).catch(
    (err: Error) => err.message,
  );
  return /^yes$/m.test(out);
}

describe("the companions' manifests in the build output", () => {
  it("applies with strict validation and runs one agent per node", async () => {
    const text = readFileSync(manifest, "utf8");
    expect(text).toContain("kind: DaemonSet");
    await run(kubeconfig(), [
      "apply",
      "--server-side",
      "--field-manager=jr2-test",
      "--validate=strict",
      "-f",
      manifest,
    ]);
    const all = (await K8s(kind.Node).Get()).items;
    const nodes = all.map((n) => n.metadata!.name!).sort();
    // Ready is asserted where kwok plays the kubelet. The real node (decision 0040) gets its agent
    // too, but pulls images for real, and the companions image is not in its registry here.
    const fake = all.filter((n) => n.metadata?.annotations?.["kwok.x-k8s.io/node"] === "fake").length;
    const ds = await waitFor(
      "the DaemonSet scheduled on every node and ready on every kwok node",
      () => K8s(kind.DaemonSet).InNamespace(COMPANION_NAMESPACE).Get(CACHE_AGENT),
      (d) => (d.status?.numberReady ?? 0) >= fake && d.status?.desiredNumberScheduled === nodes.length,
      60_000,
    );
    expect(ds.spec?.template.spec?.volumes).toContainEqual({
      name: "caches",
      hostPath: { path: "/var/lib/jr2/repos", type: "DirectoryOrCreate" },
    });
    const pods = await K8s(kind.Pod)
      .InNamespace(COMPANION_NAMESPACE)
      .WithLabel("app.kubernetes.io/name", CACHE_AGENT)
      .Get();
    expect(pods.items.map((p) => p.spec!.nodeName).sort()).toEqual(nodes);
    const env = pods.items[0].spec!.containers[0].env ?? [];
    expect(env).toContainEqual({
      name: CACHE_AGENT_ENV.nodeName,
      valueFrom: { fieldRef: { apiVersion: "v1", fieldPath: "spec.nodeName" } },
    });
  });

  it("grants the agent exactly what it uses", async () => {
    expect(await can("list", `repos.${GROUP}`)).toBe(true);
    expect(await can("watch", `sandboxes.${GROUP}`)).toBe(true);
    expect(await can("patch", `repos.${GROUP}`, ["--subresource=status"])).toBe(true);
    // No Secret outside a Sandbox namespace, no pod read at all (decision 0046; the Secrets a
    // Sandbox namespace's Repos name: test/integration/cache-agent-rbac.test.ts).
    expect(await can("get", "secrets", ["-n", "default"])).toBe(false);
    expect(await can("list", "pods")).toBe(false);
    // Not its business: writing a Repo's spec, any Sandbox, Pods, listing Secrets.
    expect(await can("patch", `repos.${GROUP}`)).toBe(false);
    expect(await can("delete", `sandboxes.${GROUP}`)).toBe(false);
    expect(await can("patch", `sandboxes.${GROUP}`, ["--subresource=status"])).toBe(false);
    expect(await can("create", "pods")).toBe(false);
    expect(await can("list", "secrets")).toBe(false);
  });

  it("has the Orchestrator's Deployment available, with RBAC scoped to its Sandbox namespace", async () => {
    await run(kubeconfig(), [
      "apply",
      "--server-side",
      "--field-manager=jr2-test",
      "--validate=strict",
      "-f",
      orchestratorManifest,
    ]);
    await K8s(kind.Secret).Apply({
      metadata: { name: ORCHESTRATOR, namespace: COMPANION_NAMESPACE },
      stringData: { "signing-key": "k".repeat(64), "api-tokens": "t".repeat(40) + "\n" },
    });
    const dep = await waitFor(
      "the Orchestrator available",
      () => K8s(kind.Deployment).InNamespace(COMPANION_NAMESPACE).Get(ORCHESTRATOR),
      (d) => (d.status?.availableReplicas ?? 0) >= 1,
      60_000,
    );
    // Several, rolled one at a time (decision 0079).
    expect([dep.spec?.replicas, dep.spec?.strategy?.type]).toEqual([2, "RollingUpdate"]);
    // Their Leases in its own namespace alone (decision 0079).
    const own = ["-n", COMPANION_NAMESPACE];
    expect(await can("create", "leases.coordination.k8s.io", own, ORCHESTRATOR)).toBe(true);
    expect(await can("update", "leases.coordination.k8s.io", own, ORCHESTRATOR)).toBe(true);
    expect(await can("patch", "leases.coordination.k8s.io", own, ORCHESTRATOR)).toBe(true);
    expect(await can("delete", "leases.coordination.k8s.io", own, ORCHESTRATOR)).toBe(true);
    expect(await can("create", "leases.coordination.k8s.io", ["-n", DEFAULT_SANDBOX_NAMESPACE], ORCHESTRATOR)).toBe(
      false,
    );
    // Its Sandboxes live in the default Sandbox namespace, not its own (decision 0047).
    const ns = ["-n", DEFAULT_SANDBOX_NAMESPACE];
    expect(await can("create", `sandboxes.${GROUP}`, ns, ORCHESTRATOR)).toBe(true);
    expect(await can("watch", `sandboxes.${GROUP}`, ns, ORCHESTRATOR)).toBe(true);
    expect(await can("patch", `sandboxes.${GROUP}`, ns, ORCHESTRATOR)).toBe(true);
    expect(await can("create", "secrets", ns, ORCHESTRATOR)).toBe(true);
    expect(await can("create", `repos.${GROUP}`, ns, ORCHESTRATOR)).toBe(true);
    // Nothing outside its namespace, no Pods, no listing Secrets, no rewriting a Repo.
    expect(await can("create", `sandboxes.${GROUP}`, ["-n", "default"], ORCHESTRATOR)).toBe(false);
    expect(await can("list", "pods", ns, ORCHESTRATOR)).toBe(false);
    expect(await can("list", "secrets", ns, ORCHESTRATOR)).toBe(false);
    expect(await can("patch", `repos.${GROUP}`, ns, ORCHESTRATOR)).toBe(false);
    // Nor its own namespace's Secrets (its signing key and API tokens), nor NetworkPolicies (the operator's).
    expect(await can("get", "secrets", ["-n", COMPANION_NAMESPACE], ORCHESTRATOR)).toBe(false);
    expect(await can("create", `sandboxes.${GROUP}`, ["-n", COMPANION_NAMESPACE], ORCHESTRATOR)).toBe(false);
    expect(await can("create", "networkpolicies", ns, ORCHESTRATOR)).toBe(false);
  });
});

describe("the module's manifest and Helm chart in the build output (decision 0032)", () => {
  const uuid = cfg.pepr.uuid;
  const moduleManifest = readFileSync(join(ROOT, "dist", `pepr-module-${uuid}.yaml`), "utf8");
  const templates = join(ROOT, "dist", `${uuid}-chart`, "templates");
  const docs = parseAllDocuments(moduleManifest).map((d) => d.toJS() as unknown);
  const secret = tlsSecretOf(docs, uuid);
  const caBundle = caBundleOf(docs);

  it("serves an ECDSA certificate its webhooks' CA signed", () => {
    const cert = new X509Certificate(Buffer.from(secret.data["tls.crt"], "base64"));
    const ca = new X509Certificate(Buffer.from(caBundle, "base64"));
    expect(cert.publicKey.asymmetricKeyType).toBe("ec");
    expect(cert.checkIssued(ca) && cert.verify(ca.publicKey)).toBe(true);
    expect(cert.checkHost(`pepr-${uuid}.pepr-system.svc`)).toBeTruthy();
  });

  it("has the chart carry the manifest's pair and every chart webhook trust the manifest's CA", () => {
    const tls = readFileSync(join(templates, "tls-secret.yaml"), "utf8").replace(/\s+/g, " ");
    expect(tls).toContain(secret.data["tls.crt"]);
    expect(tls).toContain(secret.data["tls.key"]);
    const bundles = readdirSync(templates)
      .filter((f) => f.endsWith("-webhook.yaml"))
      .flatMap((f) => [...readFileSync(join(templates, f), "utf8").matchAll(/caBundle: (\S+)/g)].map((m) => m[1]));
    expect(bundles.length).toBeGreaterThan(0);
    expect(new Set(bundles)).toEqual(new Set([caBundle]));
  });
});
