// Benchmark: the Orchestrator's API on the local control plane. N workspaces (default 200), each
// with one Repo Slot, created at once through POST /v1/workspaces: the API's latency and the time
// from each create to its workspace attached. Then more without slots until L are live (default
// 1000), and the keepalive writes per second over a window: at most L / lease interval. The real
// operator, a cache agent per node, real git; the Harnesses run inline in the Orchestrator
// (local mode), a process each would measure process start-up rather than the Orchestrator.
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import type { WorkspaceView } from "../api/orchestrator-schemas";
import { pathFor } from "../api/orchestrator-routes";
import { type Agent, localReposRoot, startCacheAgents } from "../dev/local-cache-agent";
import { startLocalOrchestrator, type LocalOrchestrator } from "../dev/local-orchestrator";
import { oneCommitRepository } from "../dev/repository";
import { benchOperator, memoryMb, sumMetric, type Result } from "./sandbox-burst-bench";
import { percentile, round, sleep, sorted } from "./stats";
import { ORCHESTRATOR_ENV } from "../api/env";
import { sandboxNamespace } from "../api/sandbox-namespaces";

const LEASE_S = 30;
const WINDOW_S = 60;
const CUSTODIAN_CPU = "50m";

async function call(orch: LocalOrchestrator, method: string, path: string, body?: unknown) {
  const res = await fetch(orch.url + path, {
    method,
    headers: { authorization: `Bearer ${orch.token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text;
}

/** Polls the list until `count` of `names` are ready; records when each became ready. */
async function untilReady(orch: LocalOrchestrator, names: Set<string>, readyAt: Map<string, number>, ms: number) {
  const deadline = Date.now() + ms;
  while ([...names].some((n) => !readyAt.has(n))) {
    if (Date.now() > deadline) throw new Error(`only ${readyAt.size}/${names.size} workspaces ready in time`);
    const { items } = JSON.parse(await call(orch, "GET", pathFor("listWorkspaces", {}))) as { items: WorkspaceView[] };
    const now = performance.now();
    for (const v of items) {
      if (!names.has(v.name) || readyAt.has(v.name)) continue;
      if (v.state === "ready") readyAt.set(v.name, now);
      else if (v.state === "failed" || v.state === "lost")
        throw new Error(`${v.name} ${v.state}: ${JSON.stringify(v.failure ?? v.lost)}`);
    }
    await sleep(100);
  }
}

export async function orchestratorBench(kubeconfig: string, count: number, live: number): Promise<Result[]> {
  const op = await benchOperator(kubeconfig, 3446, "bench-orchestrator-operator");
  const ns = `orch-bench-${randomBytes(3).toString("hex")}`;
  const tmp = mkdtempSync(join(tmpdir(), "jr2-orch-bench-"));
  const agents: Agent[] = [];
  let orch: LocalOrchestrator | undefined;
  try {
    const remotes = join(tmp, "remotes");
    const remote = join(remotes, "app.git");
    oneCommitRepository(join(tmp, "src"), remote);
    agents.push(...(await startCacheAgents(tmp)));
    await K8s(kind.Namespace).Apply(sandboxNamespace(ns) as kind.Namespace);
    // What is measured is the API and the lease, not packing: at the default Custodian slice
    // (100m) the 1000 workspaces would ask for more CPU than the three local nodes' 95.25 cores
    // allocatable, and the last ones would wait Unschedulable. A dense cluster's setting, 50m.
    const podConfig = join(tmp, "pod-config.json");
    writeFileSync(podConfig, JSON.stringify({ custodian: { resources: { cpu: CUSTODIAN_CPU } } }));
    orch = await startLocalOrchestrator({
      kubeconfig,
      namespace: ns,
      dir: join(tmp, "orchestrator"),
      credentials: [remotes],
      reposRoot: localReposRoot(tmp),
      harness: "inline",
      env: { [ORCHESTRATOR_ENV.leaseInterval]: `${LEASE_S}s`, [ORCHESTRATOR_ENV.podConfigFile]: podConfig },
    });
    const o = orch;
    // Its memory with no workspace, against its memory with L live below: what each costs it
    // (docs/operations.md's sizing). The Harnesses run inline here, so their attach state counts
    // too: an upper bound for the in-cluster Orchestrator, which holds none.
    const rssIdle = memoryMb(o.process.pid!, "VmRSS");

    // 1. N at once, each with a slot.
    const latencies: number[] = [];
    const createdAt = new Map<string, number>();
    const readyAt = new Map<string, number>();
    const body = { image: "ghcr.io/example/harness:1", branch: "feature/bench", repos: [{ slot: "app", url: remote }] };
    const t0 = performance.now();
    const names = await Promise.all(
      Array.from({ length: count }, async () => {
        const started = performance.now();
        const { name } = JSON.parse(await call(o, "POST", pathFor("createWorkspace", {}), body)) as { name: string };
        latencies.push(performance.now() - started);
        createdAt.set(name, started);
        return name;
      }),
    );
    await untilReady(o, new Set(names), readyAt, 10 * 60_000);
    const allAttached = (performance.now() - t0) / 1000;
    const toAttached = names.map((n) => readyAt.get(n)! - createdAt.get(n)!);

    // 2. Up to L live (no slot: the lease is what is measured), 100 creates in flight.
    const more: string[] = [];
    for (let i = count; i < live; i += 100) {
      const batch = Math.min(100, live - i);
      more.push(
        ...(await Promise.all(
          Array.from({ length: batch }, async () => {
            const created = JSON.parse(
              await call(o, "POST", pathFor("createWorkspace", {}), { image: body.image, branch: "b" }),
            );
            return created.name as string;
          }),
        )),
      );
    }
    await untilReady(o, new Set(more), new Map(), 15 * 60_000);
    const renewals = async () => sumMetric(await call(o, "GET", "/metrics"), "jr2_orchestrator_renewals_total");
    const r0 = await renewals();
    await sleep(WINDOW_S * 1000);
    const perSecond = ((await renewals()) - r0) / WINDOW_S;
    const rssLive = memoryMb(o.process.pid!, "VmRSS");

    const b = "orchestrator";
    return [
      { bench: b, metric: "workspaces_at_once", value: count, unit: "count" },
      { bench: b, metric: "create_api_p50_ms", value: round(percentile(sorted(latencies), 50)), unit: "ms" },
      { bench: b, metric: "create_api_p99_ms", value: round(percentile(sorted(latencies), 99)), unit: "ms" },
      { bench: b, metric: "create_to_attached_p50_ms", value: round(percentile(sorted(toAttached), 50)), unit: "ms" },
      { bench: b, metric: "create_to_attached_p99_ms", value: round(percentile(sorted(toAttached), 99)), unit: "ms" },
      { bench: b, metric: "all_attached_seconds", value: round(allAttached), unit: "s" },
      { bench: b, metric: "live_workspaces", value: live, unit: "count" },
      { bench: b, metric: "lease_interval_seconds", value: LEASE_S, unit: "s" },
      {
        bench: b,
        metric: "keepalive_writes_per_second",
        value: round(perSecond),
        unit: "1/s",
        target: `<= ${round(live / LEASE_S)}`,
      },
      { bench: b, metric: "orchestrator_rss_idle_mb", value: round(rssIdle), unit: "MB" },
      { bench: b, metric: "orchestrator_rss_live_mb", value: round(rssLive), unit: "MB" },
      {
        bench: b,
        metric: "orchestrator_rss_per_live_workspace_kb",
        value: round(((rssLive - rssIdle) * 1024) / live),
        unit: "KB",
      },
    ];
  } finally {
    await orch?.stop();
    await Promise.all(agents.map((a) => a.stop()));
    await K8s(kind.Namespace)
      .Delete(ns)
      .catch(() => undefined);
    await op.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}
