// The real node (docs/decisions/0040-real-node.md): a kubelet, containerd, runc and the CNI bridge
// on this machine, beside the kwok nodes. Each test asserts what only a real node does: a readiness
// probe that can fail, exec and logs through the kubelet, a read-only root enforced by the kernel,
// Services and DNS from inside a pod, NetworkPolicy dropping packets, and the taint keeping others off.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { type Obj, apply, getJson, kubectl, kubectlOk, realNode, until } from "./support";

const node = realNode();
const image = process.env.JR2_NODE_TEST_IMAGE!;
const ns = `jr2-node-${randomBytes(3).toString("hex")}`;
const POD_CIDR = /^10\.244\.255\.\d+$/;

/** A pod of the probe image on the real node: non-root, read-only root, hardened as a Sandbox's. */
function probePod(name: string, opts: { labels?: Record<string, string>; readyPath?: string; onNode?: boolean } = {}) {
  const { labels = { app: name }, readyPath = "/healthz", onNode = true } = opts;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns, labels },
    spec: {
      ...(onNode
        ? {
            nodeSelector: { [node.label[0]]: node.label[1] },
            tolerations: [
              { key: node.taint.key, operator: "Equal", value: node.taint.value, effect: node.taint.effect },
            ],
          }
        : {}),
      terminationGracePeriodSeconds: 1,
      securityContext: {
        runAsNonRoot: true,
        runAsUser: 65532,
        runAsGroup: 65532,
        seccompProfile: { type: "RuntimeDefault" },
      },
      containers: [
        {
          name: "probe",
          image,
          ports: [{ containerPort: 8080 }],
          readinessProbe: {
            httpGet: { path: readyPath, port: readyPath === "/healthz" ? 8080 : 8081 },
            periodSeconds: 1,
          },
          securityContext: {
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ["ALL"] },
          },
          volumeMounts: [{ name: "scratch", mountPath: "/scratch" }],
        },
      ],
      volumes: [{ name: "scratch", emptyDir: {} }],
    },
  };
}

const pod = (name: string): Obj => getJson(["pod", "-n", ns, name]);
const ready = (p: Obj) => p.status?.conditions?.find((c: Obj) => c.type === "Ready")?.status === "True";
const exec = (name: string, ...args: string[]) => kubectl(["exec", "-n", ns, name, "--", "/jr2-probe", ...args]);

/** Wait until the pod is Ready; returns it. */
const readyPod = (name: string, ms = 90_000) =>
  until(`pod ${name} Ready`, ms, () => (ready(pod(name)) ? pod(name) : undefined));

beforeAll(() => {
  kubectlOk(["create", "namespace", ns]);
  // Pods run once the namespace's default service account exists.
  return until("ServiceAccount default", 30_000, () =>
    kubectl(["get", "sa", "default", "-n", ns]).status === 0 ? true : undefined,
  );
});

afterAll(() => {
  kubectl(["delete", "namespace", ns, "--wait=false"]);
});

test("the real node is Ready, labelled, tainted, with a pod CIDR of its own", () => {
  const n = getJson(["node", node.name]);
  expect(n.status.conditions.find((c: Obj) => c.type === "Ready").status).toBe("True");
  expect(n.metadata.labels[node.label[0]]).toBe(node.label[1]);
  expect(n.spec.taints).toContainEqual({ key: node.taint.key, value: node.taint.value, effect: node.taint.effect });
  // A real kubelet, not kwok: no kwok annotation, and containerd as its runtime.
  expect(n.metadata.annotations?.["kwok.x-k8s.io/node"]).toBeUndefined();
  expect(n.status.nodeInfo.containerRuntimeVersion).toMatch(/^containerd:\/\/2\./);
  expect(n.status.nodeInfo.kubeletVersion).toBe("v1.36.3");
  const others = getJson(["nodes"]).items.filter((o: Obj) => o.metadata.name !== node.name);
  expect(others.length).toBeGreaterThan(0);
  for (const o of others) expect(o.spec.podCIDR).not.toBe(n.spec.podCIDR);
  expect(n.spec.podCIDR).toBe("10.244.255.0/24");
});

describe("pods on the real node", () => {
  beforeAll(() => {
    apply(
      probePod("web"),
      probePod("client", { labels: { app: "client" } }),
      // Its readiness probe asks a port nothing serves: it must stay unready while running.
      probePod("unready", { labels: { app: "unready" }, readyPath: "/nowhere" }),
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "web", namespace: ns },
        spec: { selector: { app: "web" }, ports: [{ port: 8080 }] },
      },
      // Headless, as a Sandbox's Service is: its name resolves to the pod's IP.
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: { name: "web-headless", namespace: ns },
        spec: { clusterIP: "None", selector: { app: "web" }, ports: [{ port: 8080 }] },
      },
    );
  });

  test("a pod from the loopback registry runs there and turns Ready by its readiness probe", async () => {
    const web = await readyPod("web");
    expect(web.spec.nodeName).toBe(node.name);
    expect(web.status.podIP).toMatch(POD_CIDR);
    expect(web.status.containerStatuses[0].imageID).toContain(process.env.JR2_REGISTRY);
    // The probe is really run: the pod whose probe fails is running but stays unready, and the
    // kubelet says why.
    await until("a failed readiness probe reported for pod unready", 60_000, () => {
      const events = getJson(["events", "-n", ns, "--field-selector", "involvedObject.name=unready,reason=Unhealthy"]);
      return events.items.some((e: Obj) => /Readiness probe failed/.test(e.message)) ? true : undefined;
    });
    const unready = pod("unready");
    expect(unready.status.containerStatuses[0].state.running).toBeDefined();
    expect(ready(unready)).toBe(false);
  }, 120_000);

  test("kubectl exec and kubectl logs reach the container", async () => {
    await readyPod("web");
    const r = exec("web", "get", "http://127.0.0.1:8080/");
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("200 ok web\n");
    expect(kubectlOk(["logs", "-n", ns, "web"])).toContain("jr2-probe serving :8080");
  });

  test("the read-only root filesystem holds; the emptyDir is writable", async () => {
    await readyPod("web");
    const root = exec("web", "write", "/escape");
    expect(root.status).not.toBe(0);
    expect(root.stderr).toMatch(/read-only file system/);
    const scratch = exec("web", "write", "/scratch/ok");
    expect(scratch.stderr).toBe("");
    expect(scratch.status).toBe(0);
  });

  test("a pod reaches the API server through the kubernetes Service and resolves Service names", async () => {
    await readyPod("client");
    const web = await readyPod("web");
    const ca = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
    // kubernetes.default.svc: DNS (CoreDNS), the ClusterIP (kube-proxy), the API server's TLS name.
    const api = exec("client", "get", "https://kubernetes.default.svc/version", ca);
    expect(api.stderr).toBe("");
    expect(api.stdout).toMatch(/^200 .*"gitVersion": "v1\.36\.3"/s);
    const clusterIP = getJson(["service", "-n", ns, "web"]).spec.clusterIP;
    expect(exec("client", "resolve", `web.${ns}.svc`).stdout).toBe(`${clusterIP}\n`);
    expect(exec("client", "resolve", `web-headless.${ns}.svc`).stdout).toBe(`${web.status.podIP}\n`);
    await until("web's Service answers from pod client", 30_000, () => {
      const r = exec("client", "get", `http://web.${ns}.svc:8080/`);
      return r.status === 0 ? r.stdout : undefined;
    });
  }, 120_000);

  test("this machine resolves and reaches Service names too", async () => {
    const web = await readyPod("web");
    const clusterIP = getJson(["service", "-n", ns, "web"]).spec.clusterIP;
    const lookup = (name: string) =>
      spawnSync("getent", ["ahostsv4", name], { encoding: "utf8" }).stdout.split(/\s+/)[0];
    expect(lookup(`web.${ns}.svc`)).toBe(clusterIP);
    expect(lookup(`web-headless.${ns}.svc`)).toBe(web.status.podIP);
    for (const host of [`web.${ns}.svc`, `web-headless.${ns}.svc`]) {
      const body = await until(`http://${host}:8080/ from this machine`, 30_000, () => {
        const r = spawnSync("curl", ["-fsS", "--max-time", "3", `http://${host}:8080/`], { encoding: "utf8" });
        return r.status === 0 ? r.stdout : undefined;
      });
      expect(body).toBe("ok web\n");
    }
  }, 90_000);

  test("a NetworkPolicy denying ingress is enforced, and lifting it restores access", async () => {
    const web = await readyPod("web");
    await readyPod("client");
    const url = `http://${web.status.podIP}:8080/`;
    const reach = () => exec("client", "get", url);
    expect(reach().stdout).toBe("200 ok web\n");
    apply({
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: "web-deny-ingress", namespace: ns },
      spec: { podSelector: { matchLabels: { app: "web" } }, policyTypes: ["Ingress"] },
    });
    // The policy reaches kube-network-policies through its watch: wait for it, then it must hold.
    const denied = await until("client's request to web refused by the policy", 30_000, () => {
      const r = reach();
      return r.status !== 0 ? r : undefined;
    });
    expect(denied.stderr).toMatch(/Client\.Timeout|i\/o timeout|deadline exceeded/);
    for (let i = 0; i < 3; i++) expect(reach().status).not.toBe(0);
    // The pod itself is fine: this machine's kubelet still probes it Ready.
    expect(ready(pod("web"))).toBe(true);
    kubectlOk(["delete", "networkpolicy", "-n", ns, "web-deny-ingress"]);
    await until("client reaches web again once the policy is gone", 30_000, () =>
      reach().status === 0 ? true : undefined,
    );
  }, 120_000);
});

test("a pod that does not tolerate the taint does not land on the real node", async () => {
  const intolerant = probePod("intolerant", { onNode: false });
  // Asks for the node by its label, without the toleration.
  (intolerant.spec as Obj).nodeSelector = { [node.label[0]]: node.label[1] };
  apply(intolerant, probePod("anywhere", { onNode: false, labels: { app: "anywhere" } }));
  const cond = await until("pod intolerant found unschedulable", 30_000, () =>
    pod("intolerant").status?.conditions?.find((c: Obj) => c.type === "PodScheduled" && c.status === "False"),
  );
  expect(cond.reason).toBe("Unschedulable");
  // The scheduler's summary: the real node refused for its taint, the kwok nodes for the selector.
  expect(cond.message).toMatch(/1 node\(s\) had untolerated taint/);
  expect(pod("intolerant").spec.nodeName).toBeUndefined();
  // One with no selector and no toleration goes to a kwok node, never the real one.
  const placed = await until(
    "pod anywhere scheduled",
    30_000,
    () => pod("anywhere").spec.nodeName as string | undefined,
  );
  expect(placed).not.toBe(node.name);
});
