// The egress point's pure parts (egress/, docs/decisions/0051): the index (address -> Sandbox ->
// compiled list, from pod and Sandbox events), the per-Sandbox limits, the record (bounded logs,
// one Event per refused host, counters) and the rendered manifests.
import { parse as parseYaml } from "yaml";
import { addressRangesOf, baseListOf, EGRESS_ADMIN_PORT, EGRESS_PROXY_PORT, NO_RANGES } from "../../api/egress-point";
import { orchestratorManifests } from "../../orchestrator/orchestrator-manifests";
import { orchestratorPeer, sandboxPodsPeer } from "../../api/sandbox-policies";
import { EgressIndex, relistInterval } from "../../egress/index";
import { SandboxLimits, envCount } from "../../egress/limits";
import { EVENTS_IN_FLIGHT_MAX, EgressRecord, REFUSED_HOSTS_MAX } from "../../egress/record";
import { POD_CONFIGMAP, egressManifests } from "../../egress/egress-manifests";

const base = baseListOf({ egress: { allow: ["model.local:8080", "*.base.example"] } });
const sbx = (name: string, allow?: unknown, repos: string[] = [], uid = `uid-${name}`) => ({
  metadata: { name, namespace: "ns", uid },
  spec: { ...(allow !== undefined ? { egress: { allow } } : {}), repos: repos.map((url) => ({ url })) },
});
const pod = (uid: string, sandbox: string, ip?: string, phase = "Pending", managed = true) => ({
  metadata: {
    uid,
    name: `${sandbox}-pod`,
    namespace: "ns",
    labels: { "sandbox.jr2.dev/name": sandbox, ...(managed ? { "app.kubernetes.io/managed-by": "jr2-operator" } : {}) },
  },
  status: { phase, ...(ip ? { podIP: ip, podIPs: [{ ip }] } : {}) },
});

describe("EgressIndex", () => {
  it("attributes a pod's address to its Sandbox, with the base list, its own rules and its remotes", () => {
    const index = new EgressIndex(base);
    index.onSandbox(sbx("a", ["api.example.com:443"], ["git@github.com:o/r.git"]), false);
    index.onPod(pod("p1", "a", "10.0.0.5"), false);
    const found = index.lookup("10.0.0.5")!;
    expect(found.ref).toEqual({ namespace: "ns", name: "a" });
    expect(found.list.base.map((r) => r.text)).toEqual(["model.local:8080", "*.base.example"]);
    expect(found.list.vouched.map((r) => r.text)).toEqual(["model.local:8080"]);
    expect(found.list.own.map((r) => r.text)).toEqual(["api.example.com:443", "github.com:22"]);
    expect(index.lookup("::ffff:10.0.0.5")?.ref.name).toBe("a");
  });

  it("knows no address before the Sandbox is known, after the pod goes or ends, or for an unlabelled pod", () => {
    const index = new EgressIndex(base);
    index.onPod(pod("p1", "a", "10.0.0.5"), false);
    expect(index.lookup("10.0.0.5")).toBeUndefined();
    index.onSandbox(sbx("a", []), false);
    expect(index.lookup("10.0.0.5")).toBeDefined();
    index.onPod(pod("p1", "a", "10.0.0.5", "Failed"), false);
    expect(index.lookup("10.0.0.5")).toBeUndefined();
    index.onPod(pod("p2", "a", "10.0.0.6"), false);
    index.onPod(pod("p2", "a", "10.0.0.6"), true);
    expect(index.lookup("10.0.0.6")).toBeUndefined();
    index.onPod(pod("p3", "a", "10.0.0.7", "Running", false), false);
    expect(index.lookup("10.0.0.7")).toBeUndefined();
  });

  // Decision 0068: the network plugin frees the address at teardown, before the pod object goes.
  it("forgets a pod's address as soon as it is terminating (deletionTimestamp), while the pod is still there", () => {
    const index = new EgressIndex(base);
    index.onSandbox(sbx("a", ["only-a.example"]), false);
    index.onPod(pod("p1", "a", "10.0.0.5", "Running"), false);
    expect(index.lookup("10.0.0.5")?.ref.name).toBe("a");
    const terminating = pod("p1", "a", "10.0.0.5", "Running");
    index.onPod(
      { ...terminating, metadata: { ...terminating.metadata, deletionTimestamp: "2026-12-07T06:00:00Z" } },
      false,
    );
    expect(index.lookup("10.0.0.5")).toBeUndefined();
    expect(index.sizes).toMatchObject({ pods: 0, sandboxes: 1 });
    // A relist's older answer, handed over after, gives nothing back.
    index.onPod(pod("p1", "a", "10.0.0.5", "Running"), false);
    expect(index.lookup("10.0.0.5")).toBeUndefined();
  });

  it("reads JR2_EGRESS_RELIST_INTERVAL from 1s to 10m, 10s unset", () => {
    expect(relistInterval({})).toBe(10_000);
    expect(relistInterval({ JR2_EGRESS_RELIST_INTERVAL: "2s" })).toBe(2_000);
    expect(() => relistInterval({ JR2_EGRESS_RELIST_INTERVAL: "500ms" })).toThrow(
      /JR2_EGRESS_RELIST_INTERVAL=500ms is not from 1s to 10m/,
    );
    expect(() => relistInterval({ JR2_EGRESS_RELIST_INTERVAL: "soon" })).toThrow(/not a positive Go duration/);
  });

  it("gives a reused address to the newest pod; the old pod's late delete leaves it", () => {
    const index = new EgressIndex(base);
    index.onSandbox(sbx("a", []), false);
    index.onSandbox(sbx("b", []), false);
    index.onPod(pod("p1", "a", "10.0.0.5"), false);
    index.onPod(pod("p2", "b", "10.0.0.5"), false);
    index.onPod(pod("p1", "a", "10.0.0.5"), true);
    expect(index.lookup("10.0.0.5")?.ref.name).toBe("b");
  });

  it("a list change is in force on the Sandbox's event; one Sandbox's list never another's", () => {
    const index = new EgressIndex(base);
    index.onSandbox(sbx("a", []), false);
    index.onSandbox(sbx("b", ["only-b.example"]), false);
    index.onPod(pod("p1", "a", "10.0.0.5"), false);
    expect(index.lookup("10.0.0.5")!.list.own).toEqual([]);
    index.onSandbox(sbx("a", ["now.example:443"]), false);
    expect(index.lookup("10.0.0.5")!.list.own.map((r) => r.text)).toEqual(["now.example:443"]);
  });

  it("reports a bad spec.egress.allow entry by its path and forgets a deleted Sandbox (not an older one's delete)", () => {
    const problems: string[] = [];
    const forgotten: string[] = [];
    const index = new EgressIndex(base, {
      onProblems: (_ref, p) => problems.push(...p),
      onForget: (ref) => forgotten.push(ref.name),
    });
    index.onSandbox(sbx("a", ["ok.example", "*"]), false);
    expect(problems).toEqual([expect.stringMatching(/^spec\.egress\.allow\[1\]: .*every host/)]);
    expect(index.lookup("x")).toBeUndefined();
    index.onSandbox(sbx("a", [], [], "older-uid"), true);
    expect(index.has({ namespace: "ns", name: "a" })).toBe(true);
    index.onSandbox(sbx("a", []), true);
    expect(index.has({ namespace: "ns", name: "a" })).toBe(false);
    expect(forgotten).toEqual(["a"]);
  });

  it("reads spec.egress tolerantly: absent or any shape is an empty list", () => {
    const index = new EgressIndex(base);
    index.onSandbox({ metadata: { name: "a", namespace: "ns", uid: "u" }, spec: {} }, false);
    index.onSandbox({ metadata: { name: "b", namespace: "ns", uid: "v" }, spec: { egress: { allow: "x" } } }, false);
    index.onPod(pod("p1", "a", "10.0.0.1"), false);
    index.onPod(pod("p2", "b", "10.0.0.2"), false);
    expect(index.lookup("10.0.0.1")!.list.own).toEqual([]);
    expect(index.lookup("10.0.0.2")!.list.own).toEqual([]);
  });
});

describe("SandboxLimits", () => {
  it("caps each Sandbox's open connections, and a release frees a slot; another Sandbox is untouched", () => {
    const l = new SandboxLimits({ maxConnections: 2, connectRate: 1000, connectBurst: 1000 });
    expect([l.admit("a", 0), l.admit("a", 0), l.admit("a", 0)]).toEqual(["ok", "ok", "connections"]);
    expect(l.admit("b", 0)).toBe("ok");
    l.release("a");
    expect(l.admit("a", 0)).toBe("ok");
  });

  it("refills each Sandbox's bucket at its rate up to its burst", () => {
    const l = new SandboxLimits({ maxConnections: 1000, connectRate: 10, connectBurst: 3 });
    const take = (now: number) => {
      const r = l.admit("a", now);
      if (r === "ok") l.release("a");
      return r;
    };
    expect([take(0), take(0), take(0), take(0)]).toEqual(["ok", "ok", "ok", "rate"]);
    expect(take(50)).toBe("rate");
    expect(take(100)).toBe("ok");
    expect(l.admit("b", 0)).toBe("ok");
    // A clock stepped back adds nothing.
    expect(take(10)).toBe("rate");
  });

  it("envCount refuses what is no positive whole number, naming the variable and the fix", () => {
    expect(envCount({}, "X", 5)).toBe(5);
    expect(envCount({ X: "7" }, "X", 5)).toBe(7);
    for (const bad of ["0", "-1", "1.5", "lots"])
      expect(() => envCount({ X: bad }, "X", 5)).toThrow(/^X=.* is not a whole number from 1 to .*set e\.g\. X=5/);
  });
});

describe("EgressRecord", () => {
  const make = (logEntries = 3) => {
    const events: string[] = [];
    const record = new EgressRecord({
      logEntries,
      writeEvent: async (ref, message) => void events.push(`${ref.name}: ${message}`),
      log: () => undefined,
    });
    return { record, events };
  };
  const a = { namespace: "ns", name: "a" };

  it("keeps the newest entries per Sandbox, oldest first, and drops a Sandbox's log when it goes", () => {
    const { record } = make(3);
    for (let i = 1; i <= 5; i++) record.refused(a, `h${i}.example`, 443, "not_listed", "m");
    expect(record.logOf(a).map((e) => e.host)).toEqual(["h3.example", "h4.example", "h5.example"]);
    record.forget(a);
    expect(record.logOf(a)).toEqual([]);
    expect(record.logs).toBe(0);
  });

  it("writes one Event per refused host per Sandbox, none for a limit, and at most REFUSED_HOSTS_MAX hosts", async () => {
    const { record, events } = make();
    for (let i = 0; i < 3; i++) record.refused(a, "x.example", 443, "not_listed", "x refused");
    record.refused(a, "x.example", 80, "not_listed", "x refused");
    record.refused(a, "y.example", 443, "limit", "limit");
    record.refused({ namespace: "ns", name: "b" }, "x.example", 443, "not_listed", "x refused for b");
    await new Promise((r) => setImmediate(r));
    expect(events).toEqual(["a: x refused", "b: x refused for b"]);
    for (let i = 0; i < REFUSED_HOSTS_MAX + 10; i++) {
      record.refused(a, `h${i}.example`, 443, "not_listed", "m");
      if (i % 32 === 0) await new Promise((r) => setImmediate(r));
    }
    await new Promise((r) => setImmediate(r));
    expect(events).toHaveLength(2 + REFUSED_HOSTS_MAX - 1);
  });

  it(`drops (and counts) an Event past ${EVENTS_IN_FLIGHT_MAX} in flight rather than queueing it`, async () => {
    const { record, events } = make();
    for (let i = 0; i < EVENTS_IN_FLIGHT_MAX + 5; i++) record.refused(a, `h${i}.example`, 443, "not_listed", "m");
    await new Promise((r) => setImmediate(r));
    expect(events).toHaveLength(EVENTS_IN_FLIGHT_MAX);
    expect(record.metrics({ sandboxes: 0, pods: 0 })).toContain("jr2_egress_events_dropped_total 5");
  });

  it("counts decisions, bytes and open connections in Prometheus text", () => {
    const { record } = make();
    record.opened();
    record.opened();
    record.closed(a, "h.example", 443, Date.now(), 10, 20);
    record.refused(a, "x.example", 443, "not_listed", "m");
    record.refused(undefined, "x.example", 443, "not_a_sandbox", "");
    record.unreachable(a, "h.example", 443, "connect", 1);
    const text = record.metrics({ sandboxes: 1, pods: 2 });
    expect(text).toContain('jr2_egress_connections_total{decision="allowed"} 2');
    expect(text).toContain('jr2_egress_connections_total{decision="refused",reason="not_listed"} 1');
    expect(text).toContain('jr2_egress_connections_total{decision="refused",reason="not_a_sandbox"} 1');
    expect(text).toContain('jr2_egress_connections_total{decision="unreachable",reason="connect"} 1');
    expect(text).toContain("jr2_egress_bytes_out_total 10");
    expect(text).toContain("jr2_egress_bytes_in_total 20");
    expect(text).toContain("jr2_egress_connections_current 1");
    expect(record.logOf(a).map((e) => [e.decision, e.bytesOut, e.bytesIn])).toEqual([
      ["allowed", 10, 20],
      ["refused", 0, 0],
      ["unreachable", 0, 0],
    ]);
  });
});

describe("egressManifests", () => {
  type Obj = { kind: string; metadata: { name: string; namespace?: string }; [k: string]: unknown };
  const docs = egressManifests({ image: "img:1", sandboxNamespaces: ["team-a", "team-b"] }) as Obj[];
  const one = (kind: string) => docs.find((d) => d.kind === kind) as Obj & Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

  it("binds its read-only ClusterRole in each opted-in namespace only, never cluster-wide", () => {
    expect(docs.filter((d) => d.kind === "ClusterRoleBinding")).toEqual([]);
    expect(docs.filter((d) => d.kind === "RoleBinding").map((d) => d.metadata.namespace)).toEqual(["team-a", "team-b"]);
    const verbs = one("ClusterRole").rules.map((r: { resources: string[]; verbs: string[] }) => [r.resources, r.verbs]);
    expect(verbs).toEqual([
      [["pods"], ["get", "list", "watch"]],
      [["sandboxes"], ["get", "list", "watch"]],
      [["events"], ["create", "patch"]],
    ]);
  });

  it("admits the proxy port from Sandbox pods alone and the admin port from the Orchestrator alone", () => {
    expect(one("NetworkPolicy").spec.ingress).toEqual([
      { from: [sandboxPodsPeer()], ports: [{ protocol: "TCP", port: EGRESS_PROXY_PORT }] },
      { from: [orchestratorPeer()], ports: [{ protocol: "TCP", port: EGRESS_ADMIN_PORT }] },
    ]);
  });

  it("runs /app/egress.js restricted, reading the Orchestrator's pod config (optional) and the namespaces", () => {
    const spec = one("Deployment").spec.template.spec;
    const c = spec.containers[0];
    expect(c.command).toEqual(["node", "/app/egress.js"]);
    expect(c.image).toBe("img:1");
    expect(spec.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: "RuntimeDefault" } });
    expect(c.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
    });
    expect(spec.volumes).toEqual([{ name: "pod", configMap: { name: POD_CONFIGMAP, optional: true } }]);
    expect(c.env).toEqual([
      { name: "JR2_SANDBOX_NAMESPACES", value: "team-a,team-b" },
      { name: "JR2_POD_CONFIG_FILE", value: "/etc/jr2/pod/pod.yaml" },
    ]);
    expect(one("Service").spec.ports.map((p: { port: number }) => p.port)).toEqual([3128, 9091]);
  });

  // Decision 0068: names are looked up absolute (egress/proxy.ts); no dotted name tries a search domain first.
  it("keeps the cluster's resolver with ndots 1", () => {
    const spec = one("Deployment").spec.template.spec;
    expect([spec.dnsPolicy, spec.dnsConfig]).toEqual([undefined, { options: [{ name: "ndots", value: "1" }] }]);
  });

  // Decision 0068: only a test installation calls a documentation range public. The chart's default
  // podConfig is {} too (test/unit/scripts-helm-chart.test.ts).
  it("ships a pod config that calls no range public: the release's ConfigMap sets no egress.publicTestRanges", () => {
    const cm = (orchestratorManifests({ image: "img:1" }) as Obj[]).find(
      (o) => o.kind === "ConfigMap" && o.metadata.name === POD_CONFIGMAP,
    ) as Obj & { data: Record<string, string> };
    const doc = parseYaml(cm.data["pod.yaml"]);
    expect(addressRangesOf(doc)).toEqual(NO_RANGES);
    expect(JSON.stringify(doc)).not.toContain("publicTestRanges");
  });

  it("refuses the companions' namespace as a Sandbox namespace", () => {
    expect(() => egressManifests({ image: "i", sandboxNamespaces: ["jr2-system"] })).toThrow(
      /hold Sandboxes elsewhere/,
    );
  });

  // Decision 0076: two replicas, rolled one new pod first and none unavailable, spread, a budget,
  // and a grace that covers the drain delay and bound.
  it("runs two replicas, rolled surge-first, spread by node, with a PodDisruptionBudget of one", () => {
    const dep = one("Deployment").spec;
    expect(dep.replicas).toBe(2);
    expect(dep.strategy).toEqual({ type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    expect(dep.template.spec.topologySpreadConstraints).toEqual([
      {
        maxSkew: 1,
        topologyKey: "kubernetes.io/hostname",
        whenUnsatisfiable: "ScheduleAnyway",
        labelSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-egress" } },
        matchLabelKeys: ["pod-template-hash"],
      },
    ]);
    expect(dep.template.spec.terminationGracePeriodSeconds).toBe(45);
    expect(dep.template.spec.containers[0].readinessProbe).toMatchObject({ failureThreshold: 1, periodSeconds: 2 });
    expect(one("PodDisruptionBudget").spec).toEqual({
      minAvailable: 1,
      selector: { matchLabels: { "app.kubernetes.io/name": "jr2-egress" } },
    });
    const three = egressManifests({ image: "i", sandboxNamespaces: ["a"], replicas: 3 }) as Obj[];
    expect((three.find((d) => d.kind === "Deployment") as Obj & { spec: { replicas: number } }).spec.replicas).toBe(3);
    const single = egressManifests({ image: "i", sandboxNamespaces: ["a"], replicas: 1, podDisruptionBudget: false });
    expect(single.filter((d) => d.kind === "PodDisruptionBudget")).toEqual([]);
    expect(() => egressManifests({ image: "i", sandboxNamespaces: ["a"], replicas: 1 })).toThrow(
      /minAvailable 1 must be below replicas \(1\).*podDisruptionBudget false/,
    );
    expect(() => egressManifests({ image: "i", sandboxNamespaces: ["a"], replicas: 0 })).toThrow(/replicas 0/);
  });

  it("admits the admin port to the monitoring namespaces named, and adds no rule when none is", () => {
    const docs2 = egressManifests({ image: "i", sandboxNamespaces: ["a"], monitoringNamespaces: ["monitoring"] });
    const policy = docs2.find((d) => d.kind === "NetworkPolicy") as Obj & { spec: { ingress: unknown[] } };
    expect(policy.spec.ingress[2]).toEqual({
      from: [
        {
          namespaceSelector: {
            matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values: ["monitoring"] }],
          },
        },
      ],
      ports: [{ protocol: "TCP", port: EGRESS_ADMIN_PORT }],
    });
  });
});
