// Admission a platform team can install (decision 0017): with the module stopped hard (SIGKILL,
// its webhook configurations left behind), an ordinary pod is still created in an ordinary
// namespace and a Sandbox's keepalive is still renewed, while a Sandbox create is refused with a
// clear message (fail closed stays for what admission guards). Back up, everything resumes with no
// manual step. The webhooks registered are the build's, scoped as deployed.
import { CREDENTIAL_HOLDER_CONNECT } from "../../scripts/webhooks";
import { K8s, kind } from "kubernetes-fluent-client";
import { RepoModel, SandboxModel } from "../../api/crd";
import { kubeRequest, paths } from "../../lib/kube";
import { KEEPALIVE_ANNOTATION } from "../../api/wire";
import { createSandbox, getSandbox, operator, useNamespace, waitFor, waitPhase } from "./support/cluster";

const ns = useNamespace("outage");

const plainPod = (name: string) => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns.name },
  spec: { containers: [{ name: "app", image: "ghcr.io/example/app:1" }] },
});

const message = (err: unknown) => {
  const e = err as { data?: { message?: string }; message?: string };
  return String(e?.data?.message ?? e?.message ?? err);
};

describe("the webhooks as registered", () => {
  it("scope Sandboxes to create or a spec change, pods to the Sandbox label, exec to the credential holders", async () => {
    const configs = [
      ...(await K8s(kind.ValidatingWebhookConfiguration).Get()).items,
      ...(await K8s(kind.MutatingWebhookConfiguration).Get()).items,
    ].filter((c) => c.webhooks?.some((w) => w.name.endsWith(".pepr.dev")));
    const hooks = configs.flatMap((c) => c.webhooks ?? []);
    // Validating only: the Sandbox defaults are a policy the API server runs (decision 0026).
    const mutating = (await K8s(kind.MutatingWebhookConfiguration).Get()).items;
    expect(mutating.filter((c) => c.webhooks?.some((w) => w.name.endsWith(".pepr.dev")))).toEqual([]);
    // Both halves are there: the Sandbox webhook (what makes a create fail closed below) and the pod one.
    const guards = (w: (typeof hooks)[number]) => (w.rules ?? []).flatMap((r) => r.resources ?? []);
    const sandboxHooks = hooks.filter((w) => guards(w).includes("sandboxes"));
    // Decision 0066: Repos have a webhook of their own, scoped as the Sandboxes' is.
    const repoHooks = hooks.filter((w) => guards(w).includes("repos"));
    const podHooks = hooks.filter((w) => !guards(w).includes("sandboxes") && !guards(w).includes("repos"));
    expect(repoHooks.map((w) => [w.name.split(".")[0], guards(w), w.failurePolicy])).toEqual([
      ["repos", ["repos"], "Fail"],
    ]);
    expect(sandboxHooks.length).toBeGreaterThanOrEqual(1);
    expect(podHooks.length).toBeGreaterThanOrEqual(1);
    for (const w of sandboxHooks) {
      expect(w.name).toMatch(/^sandboxes\..+\.pepr\.dev$/);
      expect(w.rules?.flatMap((r) => r.operations ?? [])).toEqual(expect.arrayContaining(["CREATE", "UPDATE"]));
      expect(w.failurePolicy).toBe("Fail");
    }
    for (const w of podHooks) expect(w.name).toMatch(/^(pods|connect)\..+\.pepr\.dev$/);
    expect(hooks.length).toBeGreaterThanOrEqual(4);
    for (const w of hooks) {
      const resources = guards(w);
      if (resources.includes("sandboxes") || resources.includes("repos")) {
        expect(w.matchConditions?.map((m) => m.expression)).toEqual([
          "request.operation != 'UPDATE' || object.spec != oldObject.spec",
        ]);
      } else if ((w.rules ?? []).some((r) => r.operations?.includes("CONNECT"))) {
        // Decision 0048: a CONNECT's object has no labels, so a container condition scopes it.
        expect(resources).toEqual(["pods/exec", "pods/attach"]);
        expect(w.objectSelector?.matchExpressions).toBeUndefined();
        expect(w.matchConditions?.map((m) => m.expression)).toEqual([CREDENTIAL_HOLDER_CONNECT.expression]);
      } else {
        expect(resources.every((r) => r === "pods" || r.startsWith("pods/"))).toBe(true);
        expect(w.objectSelector?.matchExpressions).toEqual([{ key: "sandbox.jr2.dev/name", operator: "Exists" }]);
      }
    }
  });
});

describe("while the module is down", () => {
  let live: string;

  beforeAll(async () => {
    live = "outage-live";
    await K8s(RepoModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Repo",
      metadata: { name: "outage-repo", namespace: ns.name },
      spec: { url: "https://example.com/org/app.git" },
    });
    await createSandbox(ns.name, live, {}, { [KEEPALIVE_ANNOTATION]: new Date().toISOString() });
    await waitPhase(ns.name, live, "Ready");
    await operator("kill");
  });

  afterAll(async () => {
    await operator("start");
  });

  it("an ordinary pod is created in an ordinary namespace", async () => {
    const pod = await K8s(kind.Pod).Create(plainPod("plain-during-outage"));
    expect(pod.metadata?.uid).toBeTruthy();
  });

  it("a Sandbox's keepalive is renewed (a metadata patch never waits on admission)", async () => {
    const stamp = new Date().toISOString();
    await K8s(SandboxModel, { name: live, namespace: ns.name }).Patch([
      { op: "add", path: `/metadata/annotations/${KEEPALIVE_ANNOTATION.replace("/", "~1")}`, value: stamp },
    ]);
    expect((await getSandbox(ns.name, live)).metadata.annotations?.[KEEPALIVE_ANNOTATION]).toBe(stamp);
  });

  // Decision 0066: a cache agent's status write never waits on admission; a Repo create does.
  it("a cache agent's Repo status write goes through; a Repo create is refused, naming its webhook", async () => {
    await kubeRequest(
      "PATCH",
      paths.repoStatus(ns.name, "outage-repo"),
      { status: { nodes: { "outage-node": { phase: "Failed", error: "during the outage" } } } },
      "application/merge-patch+json",
    );
    const repo = await K8s(RepoModel).InNamespace(ns.name).Get("outage-repo");
    expect(repo.status?.nodes?.["outage-node"]?.error).toBe("during the outage");
    const err = await K8s(RepoModel)
      .Apply({
        apiVersion: "core.jr2.dev/v1alpha1",
        kind: "Repo",
        metadata: { name: "outage-refused", namespace: ns.name },
        spec: { url: "https://example.com/org/other.git" },
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(message(err)).toMatch(/failed calling webhook "repos\..*pepr\.dev"/);
  });

  it("a Sandbox create is refused, saying the webhook could not be reached", async () => {
    const err = await createSandbox(ns.name, "outage-refused").then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeDefined();
    expect(message(err)).toMatch(/failed calling webhook "sandboxes\..*pepr\.dev"/);
    await expect(getSandbox(ns.name, "outage-refused")).rejects.toBeDefined();
  });
});

describe("once the module is back", () => {
  it("creates and reconciles Sandboxes again with no manual step", async () => {
    await waitFor(
      "a Sandbox create admitted again",
      () => createSandbox(ns.name, "outage-after").then(() => true),
      (ok) => ok,
    );
    const ready = await waitPhase(ns.name, "outage-after", "Ready");
    expect(ready.status?.endpoint).toContain("outage-after");
    // The Sandbox that lived through the outage is still reconciled: Ready, its one pod kept.
    const live = await waitPhase(ns.name, "outage-live", "Ready");
    expect(live.status?.podName).toBeTruthy();
  });
});
