import type { kind } from "kubernetes-fluent-client";
import type { SandboxSpec } from "../../api/crd";
import type { Container } from "../../api/crd/generated/corev1";
import { buildPod, harnessContainer, shmVolume } from "../../capabilities/sandbox/pod";

const HARDENED = {
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ["ALL"] },
  seccompProfile: { type: "RuntimeDefault" },
};

const custodian: Container = { name: "custodian", image: "custodian:1", args: ["--watch"] };
const user: Container = { name: "user", image: "user:1" };
const effector: Container = { name: "effector", image: "effector:1", securityContext: { runAsUser: 1234 } };
const initA: Container = { name: "init-a", image: "init:1", command: ["a"] };
const initB: Container = { name: "init-b", image: "init:1", command: ["b"] };

const fullSpec = (): SandboxSpec => ({
  image: "harness:1",
  idleTimeout: "30m",
  command: ["/bin/harness"],
  args: ["--serve"],
  env: [{ name: "MODE", value: "agent" }],
  envFrom: [{ configMapRef: { name: "harness-env" } }],
  resources: { limits: { memory: "1Gi" } },
  volumeMounts: [{ name: "work", mountPath: "/work" }],
  shmSize: "256Mi",
  fsGroup: 3000,
  podResources: { limits: { cpu: "2" } },
  nodeSelector: { pool: "agents" },
  tolerations: [{ key: "agents", operator: "Exists", effect: "NoSchedule" }],
  priorityClassName: "agents-high",
  runtimeClassName: "gvisor",
  volumes: [{ name: "work", emptyDir: {} }],
  initContainers: [initA, initB],
  sidecars: [custodian, user, effector],
});

const sandbox = (spec: SandboxSpec) => ({ metadata: { name: "sb", namespace: "team-a", uid: "sbx-uid" }, spec });
const containers = (pod: kind.Pod) => pod.spec!.containers;
const harnessOf = (pod: kind.Pod) => containers(pod)[0];

describe("buildPod metadata", () => {
  const pod = buildPod(sandbox(fullSpec()));

  it("names the pod after the Sandbox, in the Sandbox's namespace", () => {
    expect(pod.metadata?.name).toBe("sb");
    expect(pod.metadata?.namespace).toBe("team-a");
  });

  it("labels the pod as managed by jr2-operator and with the Sandbox's name", () => {
    expect(pod.metadata?.labels?.["app.kubernetes.io/managed-by"]).toBe("jr2-operator");
    expect(pod.metadata?.labels?.["sandbox.jr2.dev/name"]).toBe("sb");
  });

  it("is owned by the Sandbox as its controller", () => {
    expect(pod.metadata?.ownerReferences).toHaveLength(1);
    const [owner] = pod.metadata!.ownerReferences!;
    expect(owner.apiVersion).toBe("core.jr2.dev/v1alpha1");
    expect(owner.kind).toBe("Sandbox");
    expect(owner.name).toBe("sb");
    expect(owner.uid).toBe("sbx-uid");
    expect(owner.controller).toBe(true);
  });
});

describe("the harness container", () => {
  const spec = fullSpec();
  const harness = harnessOf(buildPod(sandbox(spec)));

  it("is the first container, named harness, running spec.image", () => {
    expect(harness.name).toBe("harness");
    expect(harness.image).toBe("harness:1");
  });

  it("takes command, args, env, envFrom and resources from the spec", () => {
    expect(harness.command).toEqual(["/bin/harness"]);
    expect(harness.args).toEqual(["--serve"]);
    expect(harness.env).toEqual([{ name: "MODE", value: "agent" }]);
    expect(harness.envFrom).toEqual([{ configMapRef: { name: "harness-env" } }]);
    expect(harness.resources).toEqual({ limits: { memory: "1Gi" } });
  });

  it("mounts the spec's volumeMounts and /dev/shm", () => {
    expect(harness.volumeMounts).toEqual([
      { name: "work", mountPath: "/work" },
      { name: "jr2-shm", mountPath: "/dev/shm" },
    ]);
  });

  it("gets the hardened securityContext when the spec states none", () => {
    expect(harness.securityContext).toEqual(HARDENED);
  });

  // Decision 0016: a stated context keeps what it states and is completed field by field.
  it("keeps the securityContext the spec states, completing what it leaves out", () => {
    const stated = { runAsUser: 1000, runAsNonRoot: true };
    expect(harnessContainer({ ...spec, securityContext: stated }, []).securityContext).toEqual({
      ...HARDENED,
      ...stated,
    });
  });

  it("reports errors from its logs when it writes no termination message", () => {
    expect(harness.terminationMessagePolicy).toBe("FallbackToLogsOnError");
  });

  it("is probed with GET /healthz on 8080 when the spec gives no readinessProbe", () => {
    expect(harness.readinessProbe?.httpGet?.path).toBe("/healthz");
    expect(harness.readinessProbe?.httpGet?.port).toBe(8080);
  });

  it("uses spec.readinessProbe when given", () => {
    const probe = { tcpSocket: { port: 9000 }, periodSeconds: 7 };
    expect(harnessContainer({ ...spec, readinessProbe: probe }, []).readinessProbe).toEqual(probe);
  });

  it("appends extra mounts after its own", () => {
    const c = harnessContainer(spec, [{ name: "repo-x", mountPath: "/repos/x", readOnly: true }]);
    expect(c.volumeMounts?.map((m) => m.name)).toEqual(["work", "jr2-shm", "repo-x"]);
  });
});

describe("/dev/shm", () => {
  it("is a memory-backed emptyDir sized by spec.shmSize", () => {
    const v = shmVolume(fullSpec());
    expect(v.name).toBe("jr2-shm");
    expect(v.emptyDir?.medium).toBe("Memory");
    expect(v.emptyDir?.sizeLimit).toBe("256Mi");
  });

  it("has no sizeLimit when spec.shmSize is absent", () => {
    expect(shmVolume({ image: "x", idleTimeout: "30m" }).emptyDir).not.toHaveProperty("sizeLimit");
  });

  it("is a pod volume, after the spec's volumes", () => {
    expect(buildPod(sandbox(fullSpec())).spec?.volumes?.map((v) => v.name)).toEqual(["work", "jr2-shm"]);
  });

  it("is mounted in the harness container only, not in sidecars", () => {
    const [, ...sidecars] = containers(buildPod(sandbox(fullSpec())));
    for (const c of sidecars)
      expect(c.volumeMounts ?? []).not.toContainEqual(expect.objectContaining({ name: "jr2-shm" }));
  });
});

describe("sidecars and init containers", () => {
  const pod = buildPod(sandbox(fullSpec()));

  it("schedules the sidecars as plain containers after harness, in order", () => {
    expect(containers(pod).map((c) => c.name)).toEqual(["harness", "custodian", "user", "effector"]);
  });

  it("gives a sidecar that states no securityContext the hardened one, changing nothing else", () => {
    expect(containers(pod)[1]).toEqual({ ...custodian, securityContext: HARDENED });
  });

  // Decision 0048: the user seat's entrypoint and all it states are its own; it loses NET_RAW.
  it("leaves the sidecar named user as it is but for its NET_RAW drop", () => {
    expect(containers(pod)[2]).toEqual({ ...user, securityContext: { capabilities: { drop: ["NET_RAW"] } } });
  });

  it("gives the pod seccomp RuntimeDefault, for every container that names no profile of its own", () => {
    expect(pod.spec?.securityContext?.seccompProfile).toEqual({ type: "RuntimeDefault" });
  });

  // Decision 0016: a stated context keeps what it states and is completed field by field.
  it("keeps a sidecar's own securityContext, completing what it leaves out", () => {
    expect(containers(pod)[3]).toEqual({ ...effector, securityContext: { ...HARDENED, runAsUser: 1234 } });
  });

  it("copies initContainers verbatim and in order, writing no securityContext into them", () => {
    expect(pod.spec?.initContainers).toEqual([initA, initB]);
    for (const c of pod.spec!.initContainers!) expect(c).not.toHaveProperty("securityContext");
  });
});

describe("pod-level fields", () => {
  const spec = buildPod(sandbox(fullSpec())).spec!;

  it("mounts no service account token and no service links", () => {
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(spec.enableServiceLinks).toBe(false);
  });

  it("never shares the process namespace", () => {
    expect(spec.shareProcessNamespace).not.toBe(true);
  });

  it("restarts containers always", () => {
    expect(spec.restartPolicy).toBe("Always");
  });

  it("uses spec.fsGroup, or 2000 when the spec states none", () => {
    expect(spec.securityContext?.fsGroup).toBe(3000);
    const { fsGroup: _unused, ...rest } = fullSpec();
    expect(buildPod(sandbox(rest)).spec?.securityContext?.fsGroup).toBe(2000);
  });

  it("copies podResources, nodeSelector, tolerations, priorityClassName and runtimeClassName", () => {
    expect((spec as { resources?: unknown }).resources).toEqual({ limits: { cpu: "2" } });
    expect(spec.nodeSelector).toEqual({ pool: "agents" });
    expect(spec.tolerations).toEqual([{ key: "agents", operator: "Exists", effect: "NoSchedule" }]);
    expect(spec.priorityClassName).toBe("agents-high");
    expect(spec.runtimeClassName).toBe("gvisor");
  });

  it("leaves optional fields unset when the spec omits them", () => {
    const minimal = buildPod(sandbox({ image: "x", idleTimeout: "30m" })).spec!;
    for (const key of ["resources", "nodeSelector", "tolerations", "priorityClassName", "runtimeClassName"]) {
      expect(minimal).not.toHaveProperty(key);
    }
    expect(minimal).not.toHaveProperty("initContainers");
    expect(minimal.containers.map((c) => c.name)).toEqual(["harness"]);
  });
});

describe("PodContribution", () => {
  const repoVolume = { name: "repo-x", hostPath: { path: "/var/lib/jr2/repos/x" } };
  const credVolume = { name: "git-creds", secret: { secretName: "push" } };
  const affinity = { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: [] } };
  const pod = buildPod(sandbox(fullSpec()), [
    { volumes: [repoVolume], harnessMounts: [{ name: "repo-x", mountPath: "/repos/x", readOnly: true }], affinity },
    { volumes: [credVolume], sidecarMounts: { effector: [{ name: "git-creds", mountPath: "/run/jr2/secrets" }] } },
  ]);
  const byName = (name: string) => containers(pod).find((c) => c.name === name)!;

  it("appends the contributed volumes after the spec's and the shm volume", () => {
    expect(pod.spec?.volumes?.map((v) => v.name)).toEqual(["work", "jr2-shm", "repo-x", "git-creds"]);
  });

  it("adds harnessMounts to the harness container", () => {
    expect(byName("harness").volumeMounts).toContainEqual({ name: "repo-x", mountPath: "/repos/x", readOnly: true });
  });

  it("adds sidecarMounts to the named sidecar only", () => {
    expect(byName("effector").volumeMounts).toEqual([{ name: "git-creds", mountPath: "/run/jr2/secrets" }]);
    expect(byName("effector").securityContext).toEqual({ ...HARDENED, runAsUser: 1234 });
    for (const name of ["harness", "custodian", "user"]) {
      expect(byName(name).volumeMounts ?? []).not.toContainEqual(expect.objectContaining({ name: "git-creds" }));
    }
  });

  it("sets the contributed affinity", () => {
    expect(pod.spec?.affinity).toEqual(affinity);
  });
});
