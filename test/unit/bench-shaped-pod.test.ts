import { podRefs, shapedPod, SLEEP } from "../../bench/shaped-pod";

// A Sandbox pod as the operator writes it, cut to what the shaped floor reads.
const sandboxPod = () => ({
  metadata: {
    name: "ws-1",
    namespace: "a",
    labels: { "sandbox.jr2.dev/name": "ws-1" },
    ownerReferences: [{ kind: "Sandbox", name: "ws-1" }],
  },
  spec: {
    nodeName: "node-1",
    priority: 0,
    overhead: { cpu: "10m" },
    readinessGates: [{ conditionType: "x" }],
    automountServiceAccountToken: false,
    securityContext: { runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } },
    volumes: [
      { name: "work", emptyDir: {} },
      { name: "config", configMap: { name: "ws-1-custodian" } },
      { name: "values", secret: { secretName: "ws-1-values" } },
      {
        name: "ca",
        projected: { sources: [{ secret: { name: "ws-1-ca" } }, { configMap: { name: "ws-1-custodian" } }] },
      },
    ],
    initContainers: [{ name: "init", image: "i", command: ["setup"] }],
    containers: [
      {
        name: "harness",
        image: "sandbox",
        args: ["--serve"],
        readinessProbe: { httpGet: { port: 1 } },
        env: [
          { name: "TOKEN", valueFrom: { secretKeyRef: { name: "ws-1-token", key: "t" } } },
          { name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
        ],
        volumeMounts: [{ name: "work", mountPath: "/work" }],
        securityContext: { readOnlyRootFilesystem: true },
      },
      {
        name: "custodian",
        image: "companions",
        command: ["node", "custodian.js"],
        lifecycle: { postStart: { exec: { command: ["bash"] } } },
        startupProbe: { tcpSocket: { port: 2 } },
        livenessProbe: { tcpSocket: { port: 2 } },
        envFrom: [{ configMapRef: { name: "ws-1-env" } }],
        resources: { requests: { cpu: "100m" } },
      },
    ],
  },
});

describe("the real-node bench's shaped floor", () => {
  it("names every Secret and ConfigMap the pod reads, once", () => {
    expect(podRefs(sandboxPod())).toEqual(
      expect.arrayContaining([
        { kind: "ConfigMap", name: "ws-1-custodian" },
        { kind: "Secret", name: "ws-1-values" },
        { kind: "Secret", name: "ws-1-ca" },
        { kind: "Secret", name: "ws-1-token" },
        { kind: "ConfigMap", name: "ws-1-env" },
      ]),
    );
    expect(podRefs(sandboxPod())).toHaveLength(5);
  });

  it("keeps the pod's shape and takes out its software, its owner and what admission fills in", () => {
    type C = Record<string, unknown> & {
      env: Array<{ valueFrom: { secretKeyRef: { name: string } } }>;
    };
    type V = { configMap?: { name: string }; secret?: { secretName: string }; projected?: unknown };
    const pod = shapedPod(sandboxPod(), "shaped-0", "a", (r) => `${r.name}-copy`) as {
      metadata: Record<string, unknown>;
      spec: Record<string, unknown> & { volumes: V[]; containers: C[] };
    };
    expect(pod.metadata).toEqual({ name: "shaped-0", namespace: "a" });
    for (const key of ["nodeName", "priority", "overhead", "readinessGates"]) expect(pod.spec[key]).toBeUndefined();
    expect(pod.spec.securityContext).toEqual(sandboxPod().spec.securityContext);
    expect(pod.spec.automountServiceAccountToken).toBe(false);
    expect(pod.spec.volumes.map((v) => v.configMap?.name ?? v.secret?.secretName ?? v.projected ?? "dir")).toEqual([
      "dir",
      "ws-1-custodian-copy",
      "ws-1-values-copy",
      { sources: [{ secret: { name: "ws-1-ca-copy" } }, { configMap: { name: "ws-1-custodian-copy" } }] },
    ]);
    expect(pod.spec.initContainers).toEqual([{ name: "init", image: "i", command: ["setup"] }]);
    const [harness, custodian] = pod.spec.containers;
    for (const c of [harness, custodian]) {
      expect(c.command).toEqual(SLEEP);
      for (const key of ["args", "readinessProbe", "livenessProbe", "startupProbe", "lifecycle"])
        expect(c[key]).toBeUndefined();
    }
    expect(harness.env[0].valueFrom.secretKeyRef.name).toBe("ws-1-token-copy");
    expect(harness.env[1]).toEqual({ name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } });
    expect(harness.volumeMounts).toEqual([{ name: "work", mountPath: "/work" }]);
    expect(harness.securityContext).toEqual({ readOnlyRootFilesystem: true });
    expect(custodian.envFrom).toEqual([{ configMapRef: { name: "ws-1-env-copy" } }]);
    expect(custodian.resources).toEqual({ requests: { cpu: "100m" } });
  });

  it("leaves the pod it was given as it was", () => {
    const pod = sandboxPod();
    shapedPod(pod, "shaped-0", "a", (r) => `${r.name}-copy`);
    expect(pod).toEqual(sandboxPod());
  });
});
