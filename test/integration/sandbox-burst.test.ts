// The operator killed in the middle of a burst of Sandboxes and started again: every Sandbox
// still gets exactly one pod, and all become Ready (the reconcile is level-based; the restarted
// operator's watches list what exists and carry on).
import { K8s, kind } from "kubernetes-fluent-client";
import { SandboxModel } from "../../api/crd";
import { createSandbox, operator, useNamespace, waitFor } from "./support/cluster";

const ns = useNamespace("burst");

// Whatever happens here, the tiers after this file get a full-speed operator back.
afterAll(async () => {
  await operator("kill").catch(() => undefined);
  await operator("start");
});
const COUNT = 100;

describe("a burst of Sandboxes across an operator crash", () => {
  it("gives each of 100 Sandboxes exactly one pod, all Ready", async () => {
    const names = Array.from({ length: COUNT }, (_, i) => `b-${String(i).padStart(3, "0")}`);
    // A slowed operator (10 writes/s, no burst) makes "in the middle" certain: 100 pods take it
    // at least ten seconds, the creates below one.
    await operator("kill");
    await operator("start", { qps: 10 });
    await Promise.all(names.map((n) => createSandbox(ns.name, n)));
    await operator("kill");
    const atCrash = (await K8s(kind.Pod).InNamespace(ns.name).Get()).items.length;
    expect(atCrash).toBeLessThan(COUNT);
    // Started again at full speed: it lists what exists and carries on.
    await operator("start");

    const sandboxes = await waitFor(
      `all ${COUNT} Sandboxes Ready`,
      async () => (await K8s(SandboxModel).InNamespace(ns.name).Get()).items,
      (items) => items.length === COUNT && items.every((s) => s.status?.phase === "Ready"),
      120_000,
    );
    const pods = (await K8s(kind.Pod).InNamespace(ns.name).Get()).items;
    expect(pods).toHaveLength(COUNT);
    const podUIDs = new Map(pods.map((p) => [p.metadata!.labels!["sandbox.jr2.dev/name"], p.metadata!.uid]));
    expect([...podUIDs.keys()].sort()).toEqual(names);
    for (const s of sandboxes) expect(s.status?.podUID).toBe(podUIDs.get(s.metadata!.name!));
  });
});
