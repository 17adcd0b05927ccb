// Spec updates follow Kubernetes conventions and jr2's re-apply (decision 0017): an identical
// re-apply is a no-op; a changed spec is admitted like a create; what can take effect on a live
// Sandbox does (spec.idleTimeout moves the reap deadline), and what cannot leaves the pod as it
// was and is named on the status, with observedGeneration.
import { K8s, kind } from "kubernetes-fluent-client";
import { SandboxModel } from "../../api/crd";
import { condition, createSandbox, getSandbox, listPods, useNamespace, waitFor, waitPhase } from "./support/cluster";

const ns = useNamespace("specupd");

describe("a spec update on a live Sandbox", () => {
  it("is a no-op when the re-applied spec is the same, defaults left out", async () => {
    const created = await createSandbox(ns.name, "same");
    await waitPhase(ns.name, "same", "Ready");
    // The client states only what it stated before; admission's defaults are filled in again.
    const again = await createSandbox(ns.name, "same");
    expect(again.metadata.generation).toBe(created.metadata.generation);
    expect(again.spec).toEqual(created.spec);
  });

  it("keeps the pod as it was and names each changed field, at the new generation", async () => {
    await createSandbox(ns.name, "changed");
    const ready = await waitPhase(ns.name, "changed", "Ready");
    const [pod] = await listPods(ns.name, "changed");
    expect(condition(ready, "SpecApplied")).toMatchObject({ status: "True", reason: "Applied" });

    const patched = await K8s(SandboxModel, { name: "changed", namespace: ns.name }).Patch([
      { op: "replace", path: "/spec/image", value: "ghcr.io/example/harness:2" },
      { op: "add", path: "/spec/env", value: [{ name: "A", value: "1" }] },
    ]);
    const generation = patched.metadata!.generation!;
    const seen = await waitFor(
      "SpecApplied=False at the new generation",
      () => getSandbox(ns.name, "changed"),
      (s) => condition(s, "SpecApplied")?.status === "False" && s.status?.observedGeneration === generation,
    );
    expect(condition(seen, "SpecApplied")).toMatchObject({ reason: "PodSpecChanged" });
    expect(condition(seen, "SpecApplied")?.message).toContain("spec.env, spec.image changed after the pod was built");
    expect(seen.status?.phase).toBe("Ready");
    const [after] = await listPods(ns.name, "changed");
    expect(after.metadata?.uid).toBe(pod.metadata?.uid);
    expect(after.spec?.containers.find((c) => c.name === "harness")?.image).toBe("ghcr.io/example/harness:1");
  });

  it("takes a new idleTimeout at once: the reap deadline moves", async () => {
    await createSandbox(ns.name, "shortened", { idleTimeout: "30m" });
    await waitPhase(ns.name, "shortened", "Ready");
    await K8s(SandboxModel, { name: "shortened", namespace: ns.name }).Patch([
      { op: "replace", path: "/spec/idleTimeout", value: "2s" },
    ]);
    await waitFor(
      "Sandbox reaped under its new idleTimeout",
      () => K8s(SandboxModel).InNamespace(ns.name).Get(),
      (list) => !list.items.some((s) => s.metadata?.name === "shortened"),
      20_000,
    );
    const left = await K8s(kind.Pod).InNamespace(ns.name).Get();
    expect(left.items.filter((p) => p.metadata?.name === "shortened" && !p.metadata.deletionTimestamp)).toEqual([]);
  });
});
