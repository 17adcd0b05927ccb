// Sandbox reconciliation on the real control plane, kwok playing the kubelets. Where kwok cannot
// play a kubelet's part (a failed pod, an OOM kill, a crash loop), the test patches the pod's
// status as a kubelet would, and nothing more.
import { randomBytes } from "node:crypto";
import { K8s, kind } from "kubernetes-fluent-client";
import { SandboxModel } from "../../api/crd";
import { kubeRequest, paths } from "../../lib/kube";
import { sandboxNamespace } from "../../api/sandbox-namespaces";
import {
  condition,
  createSandbox,
  eventsFor,
  getSandbox,
  listPods,
  useNamespace,
  waitFor,
  waitPhase,
  withKubeletsStalled,
  type Sbx,
} from "./support/cluster";

const ns = useNamespace("sbx");

/** Sets a keepalive no clock can read and waits for the operator's Warning about it, which it
 * records as the last step of a reconcile: proof that a reconcile ran after this moment. */
async function reconciledAfterThis(name: string): Promise<Sbx> {
  const marker = `not-a-time-${randomBytes(4).toString("hex")}`;
  const patched = (await K8s(SandboxModel, { name, namespace: ns.name }).Patch([
    { op: "add", path: "/metadata/annotations", value: { "jr2.dev/keepalive": marker } },
  ])) as Sbx;
  await waitFor(
    `the KeepaliveInvalid Warning for ${marker}`,
    () => eventsFor(ns.name, name),
    (events) => events.some((e) => e.reason === "KeepaliveInvalid" && e.message?.includes(marker)),
  );
  return patched;
}

describe("a Sandbox becomes one hardened Pod and one Service", () => {
  it("is Ready with its endpoint once its pod is Ready, and says where it runs", async () => {
    const created = await createSandbox(ns.name, "ready", {
      sidecars: [
        { name: "custodian", image: "ghcr.io/example/custodian:1" },
        { name: "user", image: "ghcr.io/example/user:1" },
      ],
      shmSize: "128Mi",
    });
    const sbx = await waitPhase(ns.name, "ready", "Ready");
    const [pod] = await listPods(ns.name, "ready");
    const svc = await K8s(kind.Service).InNamespace(ns.name).Get("ready");

    expect(sbx.status?.endpoint).toBe(`http://ready.${ns.name}.svc:8080`);
    expect(sbx.status?.podName).toBe("ready");
    expect(sbx.status?.podUID).toBe(pod.metadata?.uid);
    expect(sbx.status?.nodeName).toBe(pod.spec?.nodeName);
    expect(sbx.status?.nodeName).toMatch(/^jr2-node-\d$/);
    expect(sbx.status?.observedGeneration).toBe(created.metadata.generation);
    expect(condition(sbx, "Scheduled")).toMatchObject({ status: "True", reason: "Scheduled" });
    expect(condition(sbx, "Ready")).toMatchObject({ status: "True", reason: "PodReady" });
    expect(sbx.status?.harness).toEqual({ restartCount: 0 });

    // The pod as the API server stored it: owned, labelled, hardened.
    expect(pod.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: "Sandbox", name: "ready", uid: created.metadata.uid, controller: true }),
    ]);
    expect(pod.metadata?.labels).toMatchObject({
      "app.kubernetes.io/managed-by": "jr2-operator",
      "sandbox.jr2.dev/name": "ready",
    });
    expect(pod.spec?.automountServiceAccountToken).toBe(false);
    expect(pod.spec?.enableServiceLinks).toBe(false);
    expect(pod.spec?.securityContext?.fsGroup).toBe(2000);
    expect(pod.spec?.containers.map((c) => c.name)).toEqual(["harness", "custodian", "user"]);
    const [harness, custodian, user] = pod.spec!.containers;
    for (const c of [harness, custodian]) {
      expect(c.securityContext).toEqual({
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ["ALL"] },
        seccompProfile: { type: "RuntimeDefault" },
      });
    }
    // Decision 0048: the user seat's one default, and seccomp RuntimeDefault for the pod.
    expect(user.securityContext).toEqual({ capabilities: { drop: ["NET_RAW"] } });
    expect(pod.spec?.securityContext?.seccompProfile).toEqual({ type: "RuntimeDefault" });
    expect(harness.volumeMounts).toContainEqual(expect.objectContaining({ mountPath: "/dev/shm" }));
    expect(custodian.volumeMounts ?? []).not.toContainEqual(expect.objectContaining({ mountPath: "/dev/shm" }));
    expect(pod.spec?.volumes).toContainEqual(
      expect.objectContaining({ emptyDir: { medium: "Memory", sizeLimit: "128Mi" } }),
    );

    // Headless as written (decision 0030): the API server allocated no virtual IP.
    expect(svc.spec?.clusterIP).toBe("None");
    expect(svc.spec?.clusterIPs).toEqual(["None"]);
    expect(svc.spec?.publishNotReadyAddresses).toBe(true);
    expect(svc.spec?.selector).toEqual({ "sandbox.jr2.dev/name": "ready" });
    expect(svc.spec?.ports?.[0]).toMatchObject({ name: "http", port: 8080 });
    expect(svc.metadata?.ownerReferences?.[0]).toMatchObject({ uid: created.metadata.uid, controller: true });

    // No Normal Event for placed or Ready: the status above says both, with the node and the
    // endpoint (decision 0043). The marker Warning is recorded by a reconcile after the one that
    // wrote Ready, through the same Event queue, so an Event of that write would be listed by now.
    await reconciledAfterThis("ready");
    const normal = (await eventsFor(ns.name, "ready")).filter((e) => e.type === "Normal");
    expect(normal.map((e) => e.reason)).toEqual([]);
  });

  it("waits Pending with the scheduler's own message while no node fits", async () => {
    await createSandbox(ns.name, "unschedulable", { nodeSelector: { "jr2.dev/test": "no-such-node" } });
    const sbx = await waitFor(
      "Scheduled=False",
      () => getSandbox(ns.name, "unschedulable"),
      (s) => condition(s, "Scheduled")?.status === "False",
    );
    expect(sbx.status?.phase).toBe("Pending");
    expect(condition(sbx, "Scheduled")).toMatchObject({
      reason: "Unschedulable",
      message: expect.stringMatching(/0\/\d+ nodes are available: .*node affinity\/selector/),
    });
    expect(sbx.status?.nodeName).toBeUndefined();
  });

  it("is Ready when sized as jr2's Orchestrator sizes it: ephemeral storage, pod-level resources, a zone and an instance type", async () => {
    // The fake nodes look like real ones (dev/cluster/cluster.sh): capacity with ephemeral-storage,
    // and the labels a placement rule reads.
    await createSandbox(ns.name, "sized", {
      resources: {
        requests: { cpu: "1400m", memory: "2880Mi", "ephemeral-storage": "20Gi" },
        limits: { cpu: "1400m", memory: "2880Mi" },
      },
      podResources: { requests: { cpu: "2", memory: "4Gi" }, limits: { cpu: "2", memory: "4Gi" } },
      nodeSelector: {
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "m6i.8xlarge",
      },
      sidecars: [
        {
          name: "custodian",
          image: "ghcr.io/example/custodian:1",
          resources: { requests: { cpu: "100m", memory: "192Mi" }, limits: { cpu: "100m", memory: "192Mi" } },
        },
      ],
    });
    const sbx = await waitPhase(ns.name, "sized", "Ready");
    const node = await K8s(kind.Node).Get(sbx.status!.nodeName!);
    expect(node.metadata?.labels?.["topology.kubernetes.io/zone"]).toMatch(/^local-1[abc]$/);
    expect(node.status?.allocatable?.["ephemeral-storage"]).toBeDefined();
    const [pod] = await listPods(ns.name, "sized");
    expect(pod.spec?.containers?.[0]?.resources?.requests?.["ephemeral-storage"]).toBe("20Gi");
  });
  it("names a ResourceQuota's refusal QuotaExceeded with no pod, then is Ready once the quota allows it", async () => {
    const quotaNs = `${ns.name}-q`;
    await K8s(kind.Namespace).Apply(sandboxNamespace(quotaNs) as kind.Namespace);
    try {
      await K8s(kind.ResourceQuota).Apply({
        metadata: { name: "no-pods", namespace: quotaNs },
        spec: { hard: { pods: "0" } },
      });
      await waitFor(
        "the quota's status",
        () => K8s(kind.ResourceQuota).InNamespace(quotaNs).Get("no-pods"),
        (q) => q.status?.hard?.pods === "0",
      );
      await createSandbox(quotaNs, "quota");
      const refused = await waitFor(
        "Scheduled=False QuotaExceeded",
        () => getSandbox(quotaNs, "quota"),
        (s) => condition(s, "Scheduled")?.reason === "QuotaExceeded",
      );
      expect(refused.status?.phase).toBe("Pending");
      expect(condition(refused, "Scheduled")).toMatchObject({
        status: "False",
        message: expect.stringContaining("exceeded quota: no-pods"),
      });
      expect(await listPods(quotaNs, "quota")).toHaveLength(0);
      expect(
        (await eventsFor(quotaNs, "quota")).some((e) => e.reason === "QuotaExceeded" && e.type === "Warning"),
      ).toBe(true);

      await K8s(kind.ResourceQuota).Apply({
        metadata: { name: "no-pods", namespace: quotaNs },
        spec: { hard: { pods: "5" } },
      });
      const ready = await waitPhase(quotaNs, "quota", "Ready");
      expect(condition(ready, "Scheduled")?.status).toBe("True");
      expect(await listPods(quotaNs, "quota")).toHaveLength(1);
    } finally {
      await K8s(kind.Namespace).Delete(quotaNs);
    }
  });

  it("names any other refused create by its own reason (a missing PriorityClass)", async () => {
    await createSandbox(ns.name, "no-priority", { priorityClassName: "jr2-test-no-such-class" });
    const sbx = await waitFor(
      "Scheduled=False PriorityClassNotFound",
      () => getSandbox(ns.name, "no-priority"),
      (s) => condition(s, "Scheduled")?.reason === "PriorityClassNotFound",
    );
    expect(condition(sbx, "Scheduled")?.message).toContain("no PriorityClass with name jr2-test-no-such-class");
    expect(await listPods(ns.name, "no-priority")).toHaveLength(0);
  });

  it("is Lost when its pod is deleted, and never gets a second pod", async () => {
    await createSandbox(ns.name, "deleted");
    const ready = await waitPhase(ns.name, "deleted", "Ready");
    await K8s(kind.Pod).InNamespace(ns.name).Delete("deleted");

    const lost = await waitPhase(ns.name, "deleted", "Lost");
    expect(condition(lost, "Lost")).toMatchObject({ status: "True", reason: "PodDeleted" });
    expect(condition(lost, "Lost")?.message).toContain(ready.status!.podUID!);
    expect(condition(lost, "Ready")).toMatchObject({ status: "False", reason: "Lost" });
    expect(lost.status?.podUID).toBe(ready.status?.podUID);

    await reconciledAfterThis("deleted");
    expect(await listPods(ns.name, "deleted")).toHaveLength(0);
    expect((await getSandbox(ns.name, "deleted")).status?.phase).toBe("Lost");
    expect((await eventsFor(ns.name, "deleted")).some((e) => e.reason === "Lost" && e.type === "Warning")).toBe(true);
  });

  it("is Lost when its pod is deleted before any status names it, and never gets a second pod (decision 0031)", async () => {
    // Kubelets stalled, the pod is bound but never Ready, so its first status waits (up to 2 s).
    // Deleted in that wait (grace 0), the pod is either seen going (deletionTimestamp) or already
    // gone; in the second case only the operator's own record of its create tells it a pod existed.
    const lost = await withKubeletsStalled(async () => {
      await createSandbox(ns.name, "early");
      const [pod] = await waitFor(
        "the pod of Sandbox early",
        () => listPods(ns.name, "early"),
        (pods) => pods.length > 0,
      );
      await kubeRequest("DELETE", paths.pod(ns.name, "early"), {
        apiVersion: "v1",
        kind: "DeleteOptions",
        gracePeriodSeconds: 0,
      });
      const lost = await waitPhase(ns.name, "early", "Lost");
      return { lost, podUID: pod.metadata!.uid! };
    });
    expect(condition(lost.lost, "Lost")).toMatchObject({ status: "True", reason: "PodDeleted" });
    expect(condition(lost.lost, "Lost")?.message).toContain(lost.podUID);
    expect(lost.lost.status?.podUID).toBe(lost.podUID);
    await reconciledAfterThis("early");
    expect(await listPods(ns.name, "early")).toHaveLength(0);
  });

  it("is Lost with the pod's own words when its pod fails, or is evicted", async () => {
    await createSandbox(ns.name, "failed");
    await createSandbox(ns.name, "evicted");
    await waitPhase(ns.name, "failed", "Ready");
    await waitPhase(ns.name, "evicted", "Ready");
    await K8s(kind.Pod).PatchStatus({
      metadata: { name: "failed", namespace: ns.name },
      status: { phase: "Failed", message: "the node shut down" },
    });
    await K8s(kind.Pod).PatchStatus({
      metadata: { name: "evicted", namespace: ns.name },
      status: { phase: "Failed", reason: "Evicted", message: "The node was low on resource: memory." },
    });
    const failed = await waitPhase(ns.name, "failed", "Lost");
    expect(condition(failed, "Lost")).toMatchObject({ reason: "PodFailed", message: "the node shut down" });
    const evicted = await waitPhase(ns.name, "evicted", "Lost");
    expect(condition(evicted, "Lost")).toMatchObject({
      reason: "Evicted",
      message: "The node was low on resource: memory.",
    });
    // The failed pod stays (it is evidence); no second pod is made.
    await reconciledAfterThis("failed");
    const pods = await listPods(ns.name, "failed");
    expect(pods.map((p) => p.metadata?.uid)).toEqual([failed.status?.podUID]);
  });

  it("reports the Harness's OOM-killed restarts and a crash-looping wait", async () => {
    await createSandbox(ns.name, "oom", { sidecars: [{ name: "effector", image: "ghcr.io/example/effector:1" }] });
    await waitPhase(ns.name, "oom", "Ready");
    const pod = await K8s(kind.Pod).InNamespace(ns.name).Get("oom");
    const statusOf = (name: string) => pod.status!.containerStatuses!.find((c) => c.name === name)!;
    await K8s(kind.Pod).PatchStatus({
      metadata: { name: "oom", namespace: ns.name },
      status: {
        conditions: pod.status!.conditions!.map((c) =>
          c.type === "Ready" || c.type === "ContainersReady" ? { ...c, status: "False" } : c,
        ),
        containerStatuses: [
          {
            ...statusOf("harness"),
            ready: false,
            restartCount: 3,
            state: {
              waiting: { reason: "CrashLoopBackOff", message: "back-off 40s restarting failed container=harness" },
            },
            lastState: {
              terminated: {
                exitCode: 137,
                reason: "OOMKilled",
                startedAt: new Date("2026-11-29T10:00:00Z"),
                finishedAt: new Date("2026-11-29T10:05:00Z"),
              },
            },
          },
          {
            ...statusOf("effector"),
            restartCount: 1,
            lastState: {
              terminated: {
                exitCode: 2,
                reason: "Error",
                message: "push refused",
                finishedAt: new Date("2026-11-29T10:04:00Z"),
              },
            },
          },
        ],
      },
    });
    const sbx = await waitFor(
      "the Harness's restarts on status",
      () => getSandbox(ns.name, "oom"),
      (s) => s.status?.harness?.restartCount === 3,
    );
    expect(sbx.status?.phase).toBe("Pending");
    expect(sbx.status?.harness).toEqual({
      restartCount: 3,
      lastTerminated: { reason: "OOMKilled", exitCode: 137, finishedAt: "2026-11-29T10:05:00Z" },
    });
    expect(sbx.status?.effector).toEqual({
      restartCount: 1,
      lastTerminated: { reason: "Error", exitCode: 2, message: "push refused", finishedAt: "2026-11-29T10:04:00Z" },
    });
    expect(sbx.status?.waiting).toEqual([
      { container: "harness", reason: "CrashLoopBackOff", message: "back-off 40s restarting failed container=harness" },
    ]);
  });

  it("writes no status when nothing changed", async () => {
    await createSandbox(ns.name, "quiet");
    await waitPhase(ns.name, "quiet", "Ready");
    const patched = await reconciledAfterThis("quiet");
    const after = await getSandbox(ns.name, "quiet");
    expect(after.metadata.resourceVersion).toBe(patched.metadata.resourceVersion);
  });
});

describe("a Sandbox being deleted", () => {
  it("says Terminating while a finalizer holds it, and its pod is not replaced", async () => {
    await createSandbox(ns.name, "leaving");
    const ready = await waitPhase(ns.name, "leaving", "Ready");
    // A finalizer of the test's own keeps the deleted Sandbox visible (the operator sets none).
    await K8s(SandboxModel, { name: "leaving", namespace: ns.name }).Patch([
      { op: "add", path: "/metadata/finalizers", value: ["jr2.dev/test-hold"] },
    ]);
    await K8s(SandboxModel).InNamespace(ns.name).Delete("leaving");
    const terminating = await waitPhase(ns.name, "leaving", "Terminating");
    expect(terminating.metadata.deletionTimestamp).toBeDefined();
    expect(terminating.status?.podUID).toBe(ready.status?.podUID);
    await K8s(SandboxModel, { name: "leaving", namespace: ns.name }).Patch([
      { op: "remove", path: "/metadata/finalizers" },
    ]);
    await waitFor(
      "the Sandbox to go",
      () =>
        getSandbox(ns.name, "leaving").then(
          () => false,
          (err: { status?: number }) => err.status === 404,
        ),
      (gone) => gone,
    );
  });
});
