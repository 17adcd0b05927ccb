// A second gate in the reconcile (decision 0017): a Sandbox stored while no webhook was
// registered, or in a namespace admission ignores, never becomes a pod. Tried before this gate: a
// privileged Harness with the node's / mounted through a hostPath named `repo-root` became Ready.
import { K8s, kind } from "kubernetes-fluent-client";
import cfg from "../../package.json";
import { SandboxModel } from "../../api/crd";
import { condition, eventsFor, getSandbox, listPods, operator, useNamespace, waitFor } from "./support/cluster";

const ns = useNamespace("gate");
const CONFIG = `pepr-${cfg.pepr.uuid}`;

const hostile = (name: string, namespace: string) => ({
  apiVersion: "core.jr2.dev/v1alpha1",
  kind: "Sandbox",
  metadata: { name, namespace },
  spec: {
    image: "ghcr.io/example/harness:1",
    idleTimeout: "30m",
    securityContext: { privileged: true },
    volumes: [{ name: "repo-root", hostPath: { path: "/" } }],
    volumeMounts: [{ name: "repo-root", mountPath: "/host" }],
  },
});

async function expectRefusedWithoutPod(namespace: string, name: string, reason: string) {
  const s = await waitFor(
    `Sandbox ${namespace}/${name} refused by the reconcile`,
    () => getSandbox(namespace, name),
    (x) => condition(x, "Scheduled")?.reason === reason,
  );
  expect(s.status?.phase).toBe("Pending");
  expect(condition(s, "Ready")).toMatchObject({ status: "False", reason });
  const events = await waitFor(
    `a ${reason} Event on ${namespace}/${name}`,
    () => eventsFor(namespace, name),
    (es) => es.some((e) => e.reason === reason),
  );
  expect(events.find((e) => e.reason === reason)?.type).toBe("Warning");
  expect(await listPods(namespace, name)).toEqual([]);
  const services = await K8s(kind.Service).InNamespace(namespace).Get();
  expect(services.items.filter((x) => x.metadata?.name === name)).toEqual([]);
  return s;
}

describe("a Sandbox admission never saw", () => {
  it("stored while no webhook was registered: refused on its status, naming each field, and no pod", async () => {
    await operator("kill");
    try {
      // The module crashed after its webhook configuration was removed (it has no mutating one:
      // the defaults policy, the API server's own, stays and hardens what it can, decision 0026).
      await K8s(kind.ValidatingWebhookConfiguration).Delete(CONFIG);
      await K8s(SandboxModel).Apply(hostile("escape", ns.name));
    } finally {
      await operator("start");
    }
    const s = await expectRefusedWithoutPod(ns.name, "escape", "SpecRefused");
    const message = condition(s, "Scheduled")?.message ?? "";
    expect(message).toContain("spec.securityContext.privileged");
    expect(message).toMatch(/spec\.volumes\[0\]/);
  });

  it("in a namespace admission ignores: refused on its status, and no pod", async () => {
    const namespace = "kube-public";
    const name = `ignored-${ns.name}`;
    await K8s(SandboxModel).Apply(hostile(name, namespace));
    try {
      const s = await expectRefusedWithoutPod(namespace, name, "NamespaceIgnored");
      expect(condition(s, "Scheduled")?.message).toContain("create the Sandbox in another namespace");
    } finally {
      await K8s(SandboxModel).InNamespace(namespace).Delete(name);
    }
  });
});
