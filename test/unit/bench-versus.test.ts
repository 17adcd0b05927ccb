// The side-by-side bench's pure parts (bench/versus-bench.ts): the order of the sides, the Sandboxes
// each side creates, the split of the API server's time, the watch's Ready lines and the ratios.
import { parseLoad } from "../../bench/apiserver-load";
import {
  agentCrd,
  agentSandboxFor,
  alternation,
  benchRepos,
  benchSpec,
  jr2SandboxFor,
  listOf,
  median,
  ratio,
  readyLines,
  split,
} from "../../bench/versus-bench";
import { sandboxViolations } from "../../capabilities/rules/sandbox-rules";
import { crForSpec } from "../support/crfor-sandbox";

describe("alternation", () => {
  it("starts with jr2, then each round swaps who goes first", () => {
    expect(alternation(2)).toEqual(["jr2", "agent-sandbox", "agent-sandbox", "jr2"]);
    expect(alternation(3).slice(4)).toEqual(["jr2", "agent-sandbox"]);
    expect(alternation(1)).toEqual(["jr2", "agent-sandbox"]);
  });
});

describe("benchSpec", () => {
  const mounts = (spec: ReturnType<typeof benchSpec>) =>
    (spec.sidecars ?? []).flatMap((c) => (c.volumeMounts ?? []).map((m) => m.name));

  it("is crFor's spec without resources, placement and priority class, admitted by the spec rules", () => {
    const spec = benchSpec({ repos: true });
    const full = crForSpec();
    expect(spec.image).toBe(full.image);
    expect(spec.sidecars!.map((c) => c.name)).toEqual(full.sidecars!.map((c) => c.name));
    expect(spec.volumes).toEqual(full.volumes);
    expect(spec.repos).toEqual(full.repos);
    for (const k of ["resources", "podResources", "nodeSelector", "tolerations", "priorityClassName"] as const)
      expect(spec[k]).toBeUndefined();
    expect([...(spec.sidecars ?? []), ...(spec.initContainers ?? [])].every((c) => c.resources === undefined)).toBe(
      true,
    );
    expect(sandboxViolations(spec)).toEqual([]);
  });

  it("without Repos names none and mounts none", () => {
    const spec = benchSpec({ repos: false });
    expect(spec.repos).toBeUndefined();
    expect(mounts(spec).filter((n) => n.startsWith("repo-"))).toEqual([]);
    expect(mounts(benchSpec({ repos: true })).filter((n) => n.startsWith("repo-")).length).toBeGreaterThan(0);
    expect(sandboxViolations(spec)).toEqual([]);
  });

  it("names a Repo per key, by the key", () => {
    expect(benchRepos(benchSpec({ repos: true })).map((r) => r.metadata.name)).toEqual(["app", "lib"]);
    expect(benchRepos(benchSpec({ repos: false }))).toEqual([]);
  });
});

describe("the Lists", () => {
  const spec = benchSpec({ repos: false });

  it("hold count Sandboxes named s-0.. of each side's kind", () => {
    const jr2 = listOf(3, jr2SandboxFor(spec));
    expect(jr2.kind).toBe("List");
    expect(jr2.items.map((i) => (i as { metadata: { name: string } }).metadata.name)).toEqual(["s-0", "s-1", "s-2"]);
    expect(jr2.items[0]).toMatchObject({ apiVersion: "core.jr2.dev/v1alpha1", kind: "Sandbox", spec });
    const agent = listOf(2, agentSandboxFor(spec)).items[1] as {
      apiVersion: string;
      spec: { podTemplate: { spec: { containers: { name: string }[]; initContainers?: { name: string }[] } } };
    };
    expect(agent.apiVersion).toBe("agents.x-k8s.io/v1beta1");
    // The pod jr2 builds: its Harness seat and every sidecar, and the preflight.
    expect(agent.spec.podTemplate.spec.containers).toHaveLength(1 + spec.sidecars!.length);
    expect(agent.spec.podTemplate.spec.initContainers?.map((c) => c.name)).toEqual(["preflight"]);
  });

  it("agent-sandbox's CRD is served without its conversion webhook", () => {
    const yaml = [
      "apiVersion: apiextensions.k8s.io/v1",
      "kind: CustomResourceDefinition",
      "metadata: {name: sandboxes.agents.x-k8s.io}",
      "spec:",
      "  group: agents.x-k8s.io",
      "  conversion: {strategy: Webhook, webhook: {conversionReviewVersions: [v1]}}",
    ].join("\n");
    expect(agentCrd(yaml)).toMatchObject({ spec: { group: "agents.x-k8s.io", conversion: { strategy: "None" } } });
  });
});

describe("split", () => {
  const metrics = (n: number) =>
    [
      `apiserver_request_total{code="201",group="core.jr2.dev",resource="sandboxes",subresource="",verb="POST"} ${n * 500}`,
      `apiserver_request_duration_seconds_sum{group="core.jr2.dev",resource="sandboxes",subresource="",verb="POST"} ${n * 10}`,
      `apiserver_request_total{code="201",group="",resource="pods",subresource="",verb="POST"} ${n * 500}`,
      `apiserver_request_duration_seconds_sum{group="",resource="pods",subresource="",verb="POST"} ${n * 5}`,
      `apiserver_watch_events_total{group="",resource="pods",version="v1"} ${n * 900}`,
      `apiserver_admission_webhook_admission_duration_seconds_count{name="sandboxes.pepr-1.pepr.dev",operation="CREATE",rejected="false",type="validating"} ${n * 500}`,
      `apiserver_admission_webhook_admission_duration_seconds_sum{name="sandboxes.pepr-1.pepr.dev",operation="CREATE",rejected="false",type="validating"} ${n * 2}`,
      `etcd_request_duration_seconds_count{group="",operation="create",resource="pods"} ${n * 500}`,
      `etcd_request_duration_seconds_sum{group="",operation="create",resource="pods"} ${n * 1}`,
      `apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="global-default",priority_level="global-default"} ${n * 1000}`,
      `apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="global-default",priority_level="global-default"} ${n * 3}`,
      `apiserver_request_total{code="200",group="",resource="leases",subresource="",verb="PUT"} ${n * 2}`,
      `process_cpu_seconds_total ${n * 40}`,
    ].join("\n");

  it("reads each webhook by name, etcd by operation and time queued by priority level", () => {
    const load = parseLoad(metrics(1));
    expect(load.get("webhook validating sandboxes")).toEqual({ count: 500, seconds: 2 });
    expect(load.get("webhook validating")).toEqual({ count: 500, seconds: 2 });
    expect(load.get("etcd create pods")).toEqual({ count: 500, seconds: 1 });
    expect(load.get("apf wait global-default")).toEqual({ count: 1000, seconds: 3 });
  });

  it("gives each part's calls and ms per Sandbox, costliest first, without watches, CPU, totals or rare calls", () => {
    const rows = split(parseLoad(metrics(1)), parseLoad(metrics(2)), 500);
    expect(rows.slice(0, 3)).toEqual([
      { key: "POST sandboxes", count: 1, ms: 20 },
      { key: "POST pods", count: 1, ms: 10 },
      { key: "apf wait global-default", count: 2, ms: 6 },
    ]);
    expect(rows.map((r) => r.key)).toEqual(
      expect.arrayContaining(["webhook validating sandboxes", "etcd create pods"]),
    );
    // Each webhook once, by name, not again in its type's total.
    expect(rows.some((r) => r.key === "webhook validating")).toBe(false);
    expect(rows.some((r) => r.key.startsWith("watch") || r.key === "process cpu" || r.key === "PUT leases")).toBe(
      false,
    );
  });
});

describe("readyLines", () => {
  it("names the Sandboxes whose Ready is True, across chunks cut mid-line", () => {
    const seen: string[] = [];
    const feed = readyLines((n) => seen.push(n));
    feed("s-0 \ns-1 False\ns-0 Tr");
    feed("ue\ns-2 True\n");
    feed("s-3 True");
    expect(seen).toEqual(["s-0", "s-2"]);
  });
});

describe("ratio and median", () => {
  it("divide and take the middle, NaN where a figure is missing", () => {
    expect(ratio(15, 30)).toBe(0.5);
    expect(ratio(NaN, 30)).toBeNaN();
    expect(ratio(1, 0)).toBeNaN();
    expect(median([3, 1, 2])).toBe(2);
    expect(median([NaN, 4])).toBe(4);
  });
});
