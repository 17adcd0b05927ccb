// The real node (docs/decisions/0040-real-node.md): a kubelet, containerd, runc and the CNI bridge
// on this machine, beside the kwok nodes. Each test asserts what only a real node does: a readiness
// probe that can fail, exec and logs through the kubelet, a read-only root enforced by the kernel,
// Services and DNS from inside a pod, NetworkPolicy dropping packets, and the taint keeping others off;
// and the stand-in public host its pods reach, and the node closed to Sandbox pods (docs/decisions/0051).
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer } from "node:net";
import { guardedAddresses, openPorts, openToSandboxes } from "./node-guard";
import { type PublicHost, publicHostAddresses, startPublicHost } from "./public-host";
import { type Obj, apply, fromSetup, getJson, kubectl, kubectlOk, realNode, until } from "./support";

const node = realNode();
const image = process.env.JR2_NODE_TEST_IMAGE!;
const ns = `jr2-node-${randomBytes(3).toString("hex")}`;
const POD_CIDR = /^10\.244\.255\.\d+$/;

/** A pod of the probe image on the real node: non-root, read-only root, hardened as a Sandbox's. */
function probePod(
  name: string,
  opts: {
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    readyPath?: string;
    onNode?: boolean;
  } = {},
) {
  const { labels = { app: name }, annotations, readyPath = "/healthz", onNode = true } = opts;
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns, labels, ...(annotations ? { annotations } : {}) },
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

describe("the stand-in public host, and the node closed to Sandbox pods (docs/decisions/0051)", () => {
  let host: PublicHost;
  const pub = publicHostAddresses();
  const nodeIP = fromSetup("JR2_REAL_NODE_IP");
  const annotation = fromSetup("JR2_SANDBOX_ANNOTATION");
  // "inet/jr2-node/sandbox_pods": the nft set the node guard keeps.
  const guardSet = fromSetup("JR2_NODE_GUARD_SET").split("/");
  const DROPPED = /i\/o timeout/;

  beforeAll(async () => {
    host = await startPublicHost();
    apply(
      probePod("plain", { labels: { app: "plain" } }),
      // What the operator puts on every Sandbox pod; the value is the Sandbox's name.
      probePod("sandboxed", { labels: { app: "sandboxed" }, annotations: { [annotation]: "x" } }),
    );
  });

  afterAll(() => host?.stop());

  test("a plain pod on the real node reaches the stand-in public host over TCP, by address and by name, from its own address", async () => {
    const plain = await readyPod("plain");
    const byAddress = exec("plain", "get", `http://${pub.allowedIp}/by-address`);
    expect(byAddress.stderr).toBe("");
    expect(byAddress.stdout).toBe(`200 public ${pub.allowedIp}:80\n`);
    // The node's DNS names it.
    const byName = exec("plain", "get", `http://${pub.allowedName}:443/by-name`);
    expect(byName.stderr).toBe("");
    expect(byName.stdout).toBe(`200 public ${pub.allowedIp}:443\n`);
    expect(exec("plain", "resolve", pub.otherName).stdout).toBe(`${pub.otherIp}\n`);
    // The listener saw the pod's own address (no NAT on the way) and what it asked. (Its records
    // come in over a pipe, read between the test's synchronous kubectl calls: waited for.)
    const seen = await host.waitFor("the stand-in's records of both requests", () => {
      const mine = host.http().filter((r) => r.from === plain.status.podIP);
      return mine.length >= 2 ? mine : undefined;
    });
    expect(seen.map((r) => [r.local, r.method, r.host, r.path, r.authorization])).toEqual([
      [`${pub.allowedIp}:80`, "GET", pub.allowedIp, "/by-address", null],
      [`${pub.allowedIp}:443`, "GET", `${pub.allowedName}:443`, "/by-name", null],
    ]);
    const echo = exec("plain", "connect", `${pub.otherIp}:7`);
    expect(echo.stdout).toBe("connected\n");
    await host.waitFor("the TCP echo's record of the pod", (rs) =>
      rs.find((r) => r.kind === "tcp" && r.from === plain.status.podIP),
    );
  }, 120_000);

  test("the node's DNS forwards attacker.example to the stand-in's DNS recorder, which sees the name", async () => {
    await readyPod("plain");
    const name = `leak-${randomBytes(4).toString("hex")}.${pub.dnsZone}`;
    const r = exec("plain", "resolve", name);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/no such host/);
    const q = await host.waitFor(`${name} at the DNS recorder`, () => host.dns().find((x) => x.name === name));
    expect(q.type).toBe(1); // A
  }, 60_000);

  test("a Sandbox pod opens nothing on its node (DNS, the API server, the kubelet, by TCP or UDP) while a plain pod does", async () => {
    // Ready: the kubelet's probes (connections the node opens) still reach the guarded pod.
    await readyPod("sandboxed");
    await readyPod("plain");
    const apiPort = getJson(["endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes"]).items[0]
      .ports[0].port;
    const apiService = getJson(["service", "-n", "default", "kubernetes"]).spec.clusterIP;
    // The kubernetes Service's address is rewritten to the node's (kube-proxy): closed as well.
    const targets = [`${nodeIP}:53`, `${nodeIP}:${apiPort}`, `${nodeIP}:10250`, `${apiService}:443`];
    for (const t of targets) {
      expect([t, exec("plain", "connect", t).stdout]).toEqual([t, "connected\n"]);
      const r = exec("sandboxed", "connect", t);
      expect([t, r.status, r.stdout]).toEqual([t, 1, ""]);
      expect(r.stderr).toMatch(DROPPED);
    }
    // UDP: the pod's resolver is the node's CoreDNS (Go's resolver asks over UDP).
    const cluster = "kubernetes.default.svc.cluster.local";
    expect(exec("plain", "resolve", cluster).stdout).toBe(`${apiService}\n`);
    const dns = exec("sandboxed", "resolve", cluster);
    expect(dns.status).toBe(1);
    expect(dns.stderr).toMatch(/timeout|deadline/);
    // The guard closes the node, not the network: with no policy of its own the pod reaches the
    // stand-in public host (its egress policy is what closes that, docs/decisions/0051).
    expect(exec("sandboxed", "get", `http://${pub.allowedIp}/from-sandbox`).stdout).toBe(
      `200 public ${pub.allowedIp}:80\n`,
    );
  }, 120_000);

  test("a node port opened to Sandbox pods admits them to that port only, until it is closed", async () => {
    await readyPod("sandboxed");
    // A process of this machine on the node IP, as an Orchestrator run from here in-cluster mode.
    const server = createServer((s) => s.destroy());
    await new Promise<void>((resolve) => server.listen(0, nodeIP, resolve));
    const port = (server.address() as { port: number }).port;
    const target = `${nodeIP}:${port}`;
    try {
      expect(exec("sandboxed", "connect", target).stderr).toMatch(DROPPED);
      const close = openToSandboxes(port);
      try {
        expect(openPorts()).toContain(port);
        expect(exec("sandboxed", "connect", target).stdout).toBe("connected\n");
        expect(exec("sandboxed", "connect", `${nodeIP}:10250`).stderr).toMatch(DROPPED);
      } finally {
        close();
      }
      expect(openPorts()).not.toContain(port);
      expect(exec("sandboxed", "connect", target).stderr).toMatch(DROPPED);
    } finally {
      server.close();
    }
  }, 60_000);

  test("the Sandbox pod's address is in the node guard's set while it runs, a plain pod's never, and it leaves when the pod is deleted", async () => {
    const sandboxed = await readyPod("sandboxed");
    const plain = await readyPod("plain");
    expect(guardedAddresses()).toContain(sandboxed.status.podIP);
    expect(guardedAddresses()).not.toContain(plain.status.podIP);
    kubectlOk(["delete", "pod", "-n", ns, "sandboxed", "--wait=true", "--timeout=60s"]);
    await until(`${sandboxed.status.podIP} gone from the set ${guardSet.join(" ")}`, 30_000, () =>
      guardedAddresses().includes(sandboxed.status.podIP) ? undefined : true,
    );
  }, 120_000);

  test("the node guard fails closed: an ADD that cannot add the address, or that gets no pod annotations, fails", () => {
    const guard = fromSetup("JR2_NODE_GUARD");
    const conf = (table: string, runtimeConfig?: object) =>
      JSON.stringify({
        cniVersion: "1.0.0",
        name: "jr2",
        type: "jr2-node-guard",
        nft: "nft",
        family: "inet",
        table,
        set: guardSet[2],
        annotation,
        ...(runtimeConfig ? { runtimeConfig } : {}),
        prevResult: { cniVersion: "1.0.0", ips: [{ address: "10.244.255.250/24", gateway: nodeIP }] },
      });
    const add = (input: string) =>
      spawnSync(guard, [], {
        input,
        encoding: "utf8",
        env: {
          ...process.env,
          CNI_COMMAND: "ADD",
          CNI_CONTAINERID: "jr2-node-test",
          CNI_ARGS: `K8S_POD_NAMESPACE=${ns};K8S_POD_NAME=x`,
        },
      });
    // A table that does not exist: the address cannot be added, so the sandbox is not created.
    const missing = add(conf("jr2-no-such-table", { "io.kubernetes.cri.pod-annotations": { [annotation]: "x" } }));
    expect(missing.status).toBe(1);
    expect(JSON.parse(missing.stdout)).toMatchObject({ code: 101, msg: expect.stringContaining(`pod ${ns}/x`) });
    // No annotations passed at all (a runtime without the capability): no pod can be told apart.
    const blind = add(conf(guardSet[1]));
    expect(blind.status).toBe(1);
    expect(JSON.parse(blind.stdout)).toMatchObject({
      code: 4,
      msg: expect.stringContaining("passed no pod annotations"),
    });
    expect(guardedAddresses()).not.toContain("10.244.255.250");
  });
});
