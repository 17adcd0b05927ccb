// Benchmark: several Orchestrator replicas on the local control plane (decision 0079), for 1, 2 and 3
// replicas in one run. Each replica a local Orchestrator process holding shards through the bench's
// own Lease namespace, all with the same signing key and API token (a Harness bearer derives from
// the key), over the same Sandbox namespace; the Machine's creates go round-robin across them, as a
// Service spreads them. Per replica count: each replica's memory and CPU idle and with L live; a
// burst of N creates at once (API latency, create to ready); the shard Lease writes a second over a
// quiet window (the design's API-server cost); and, for 2 and 3, how long the workspaces of the
// replica holding the most shards take to be served ready again by the survivors after a SIGKILL.
// The real operator and cache agents; Harnesses inline in each Orchestrator (as the orchestrator
// bench, bench/orchestrator-bench.ts).
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import type { WorkspaceView } from "../api/orchestrator-schemas";
import { pathFor } from "../api/orchestrator-routes";
import { ORCHESTRATOR_ENV } from "../api/env";
import { ORCHESTRATOR_LEASE_LABEL, OWN_ONLY_HEADER, SHARD_COUNT } from "../api/wire";
import { sandboxNamespace } from "../api/sandbox-namespaces";
import { type Agent, localReposRoot, startCacheAgents } from "../dev/local-cache-agent";
import { freePort, startLocalOrchestrator, type LocalOrchestrator } from "../dev/local-orchestrator";
import { oneCommitRepository } from "../dev/repository";
import { kubeRequest } from "../lib/kube";
import { cpuSeconds, leaseWrites, mostShards, notYetServed } from "./replicas-figures";
import { benchOperator, memoryMb, sumMetric, type Result } from "./sandbox-burst-bench";
import { percentile, round, sleep, sorted } from "./stats";

const B = "orchestrator-replicas";
/** A Custodian's requests small enough that 5,000 pods fit the three kwok nodes (31.75 CPUs and
 * 124 Gi each; the memory is the pod config's floor): the API and the shards are measured here, not
 * packing. */
const CUSTODIAN_CPU = "10m";
const CUSTODIAN_MEMORY = "64Mi";
/** The quiet window over which the Lease writes are counted, and how often the Leases are read in
 * it (more often than the 4 s renewals, so no write is counted twice as one). */
const WINDOW_S = 30;
const LEASE_READ_MS = 1_000;
const TICKS = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;

type Lease = { metadata: { name: string; resourceVersion: string }; spec?: { holderIdentity?: string } };

async function call(orch: LocalOrchestrator, method: string, path: string, body?: unknown, own = false) {
  const res = await fetch(orch.url + path, {
    method,
    headers: {
      authorization: `Bearer ${orch.token}`,
      ...(body ? { "content-type": "application/json" } : {}),
      ...(own ? { [OWN_ONLY_HEADER]: "1" } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${orch.url}${path}: ${res.status} ${text}`);
  return text;
}

const list = async (orch: LocalOrchestrator, own = false) =>
  (JSON.parse(await call(orch, "GET", pathFor("listWorkspaces", {}), undefined, own)) as { items: WorkspaceView[] })
    .items;

const leases = (ns: string) =>
  kubeRequest<{ items: Lease[] }>(
    "GET",
    `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases?labelSelector=${encodeURIComponent(ORCHESTRATOR_LEASE_LABEL)}`,
  ).then((l) => l.items);

const cpu = (pid: number | undefined) => cpuSeconds(readFileSync(`/proc/${pid}/stat`, "utf8"), TICKS);

/** Polls the merged list until every one of `names` is ready; records when each became ready. */
async function untilReady(orch: LocalOrchestrator, names: Set<string>, readyAt: Map<string, number>, ms: number) {
  const deadline = Date.now() + ms;
  while ([...names].some((n) => !readyAt.has(n))) {
    if (Date.now() > deadline) throw new Error(`only ${readyAt.size}/${names.size} workspaces ready in time`);
    const now = performance.now();
    for (const v of await list(orch)) {
      if (!names.has(v.name) || readyAt.has(v.name)) continue;
      if (v.state === "ready") readyAt.set(v.name, now);
      else if (v.state === "failed" || v.state === "lost")
        throw new Error(`${v.name} ${v.state}: ${JSON.stringify(v.failure ?? v.lost)}`);
    }
    await sleep(250);
  }
}

/** Until the replicas hold all 16 shards between them, none more than its share (the plan's cap). */
async function untilSharded(replicas: LocalOrchestrator[], ms: number) {
  const deadline = Date.now() + ms;
  const cap = Math.ceil(SHARD_COUNT / replicas.length);
  for (;;) {
    const held = await Promise.all(
      replicas.map(async (r) => sumMetric(await call(r, "GET", "/metrics"), "jr2_orchestrator_shards_held")),
    );
    if (held.reduce((a, b) => a + b, 0) === SHARD_COUNT && held.every((h) => h > 0 && h <= cap)) return held;
    if (Date.now() > deadline) throw new Error(`the shards were not shared out in time: ${held.join("/")}`);
    await sleep(500);
  }
}

/** Creates `count` at once, round-robin across the replicas, each recording its API latency. */
function createSpread(replicas: LocalOrchestrator[], count: number, body: unknown, offset: number) {
  return Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const r = replicas[(offset + i) % replicas.length];
      const started = performance.now();
      const { name } = JSON.parse(await call(r, "POST", pathFor("createWorkspace", {}), body)) as { name: string };
      return { name, started, ms: performance.now() - started };
    }),
  );
}

type Shared = { kubeconfig: string; tmp: string; remote: string; remotes: string; podConfig: string };

/** Measures `count` replicas, each figure pushed onto `out` as soon as it is known. */
async function measure(s: Shared, count: number, burst: number, live: number, out: Result[]): Promise<void> {
  const id = randomBytes(3).toString("hex");
  const ns = `orch-rep-${count}-${id}`;
  const leaseNs = `orch-rep-leases-${count}-${id}`;
  const dir = join(s.tmp, `replicas-${count}`);
  // One key and one token for all: a Harness bearer is derived from the key, and a Machine's token
  // must be accepted by whichever replica its call lands on.
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "signing-key"), randomBytes(32).toString("hex"), { mode: 0o600 });
  writeFileSync(join(dir, "api-tokens"), `${randomBytes(24).toString("hex")}\n`, { mode: 0o600 });
  const replicas: LocalOrchestrator[] = [];
  const pods = Array.from({ length: count }, (_, i) => `r${i}`);
  const ports: number[] = [];
  const fig = (metric: string, value: number, unit: string, target?: string) =>
    out.push({
      bench: B,
      metric: `replicas_${count}_${metric}`,
      value: round(value),
      unit,
      ...(target ? { target } : {}),
    });
  // Replica i on its own port and directory; started again after a kill with the same ones (a new
  // identity all the same: the pod name plus a per-process suffix, decision 0079).
  const start = (i: number) =>
    startLocalOrchestrator({
      kubeconfig: s.kubeconfig,
      namespace: ns,
      dir: join(dir, pods[i]),
      port: ports[i],
      credentials: [s.remotes],
      reposRoot: localReposRoot(s.tmp),
      harness: "inline",
      env: {
        [ORCHESTRATOR_ENV.podConfigFile]: s.podConfig,
        [ORCHESTRATOR_ENV.shardLeasesNamespace]: leaseNs,
        [ORCHESTRATOR_ENV.podName]: pods[i],
        [ORCHESTRATOR_ENV.peerUrl]: `http://127.0.0.1:${ports[i]}`,
      },
    });
  /** The replica holding the most shards SIGKILLed; the seconds until the survivors serve every
   * one of `names` ready. */
  const killAndMove = async (names: string[]) => {
    const victim = mostShards(
      (await leases(leaseNs))
        .filter((l) => /-shard-\d+$/.test(l.metadata.name))
        .map((l) => l.spec?.holderIdentity ?? ""),
      pods,
    );
    if (victim < 0) throw new Error(`no shard Lease in ${leaseNs} names a replica`);
    const shards = sumMetric(await call(replicas[victim], "GET", "/metrics"), "jr2_orchestrator_shards_held");
    const survivors = replicas.filter((_, i) => i !== victim);
    const killedAt = performance.now();
    await replicas[victim].stop("SIGKILL");
    const deadline = Date.now() + 5 * 60_000;
    // A survivor that fails to list (busy adopting) counts as serving none this round; the last
    // failure is said if the wait runs out.
    const failed = new Map<string, string>();
    for (;;) {
      const own = await Promise.all(
        survivors.map((r) =>
          list(r, true).catch((err: unknown) => {
            failed.set(r.url, String(err));
            return [];
          }),
        ),
      );
      const missing = notYetServed(names, own);
      if (!missing.length) break;
      if (Date.now() > deadline)
        throw new Error(
          `${missing.length} workspaces not served ready 5 min after ${pods[victim]} was killed` +
            (failed.size ? `; the survivors' last failures to list: ${[...failed.values()].join("; ")}` : "") +
            `; not ready, e.g.: ${missing.slice(0, 3).join(", ")}`,
        );
      await sleep(250);
    }
    return { victim, shards, seconds: (performance.now() - killedAt) / 1000 };
  };
  try {
    await K8s(kind.Namespace).Apply(sandboxNamespace(ns) as kind.Namespace);
    await K8s(kind.Namespace).Apply({ apiVersion: "v1", kind: "Namespace", metadata: { name: leaseNs } });
    for (const [i, pod] of pods.entries()) {
      const own = join(dir, pod);
      mkdirSync(own, { recursive: true });
      for (const f of ["signing-key", "api-tokens"]) copyFileSync(join(dir, f), join(own, f));
      ports.push(await freePort("127.0.0.1"));
      replicas.push(await start(i));
    }
    const heldIdle = await untilSharded(replicas, 60_000);
    process.stderr.write(`  ${count} replica(s) hold ${heldIdle.join("/")} shards\n`);
    const rssIdle = replicas.map((r) => memoryMb(r.process.pid!, "VmRSS"));
    const cpuIdle = replicas.map((r) => cpu(r.process.pid));

    // 1. N at once, each with a Repo Slot, round-robin.
    const body = {
      image: "ghcr.io/example/harness:1",
      branch: "feature/bench",
      repos: [{ slot: "app", url: s.remote }],
    };
    const t0 = performance.now();
    const created = await createSpread(replicas, burst, body, 0);
    const readyAt = new Map<string, number>();
    await untilReady(replicas[0], new Set(created.map((c) => c.name)), readyAt, 15 * 60_000);
    const allReady = (performance.now() - t0) / 1000;
    const latencies = sorted(created.map((c) => c.ms));
    const toReady = sorted(created.map((c) => readyAt.get(c.name)! - c.started));
    process.stderr.write(`  ${burst} ready in ${round(allReady)} s\n`);
    fig("workspaces_at_once", burst, "count");
    fig("create_api_p50_ms", percentile(latencies, 50), "ms");
    fig("create_api_p90_ms", percentile(latencies, 90), "ms");
    fig("create_to_ready_p50_ms", percentile(toReady, 50), "ms");
    fig("create_to_ready_p90_ms", percentile(toReady, 90), "ms");
    fig("all_ready_seconds", allReady, "s");
    for (const [i, pod] of pods.entries())
      fig(`${pod}_rss_at_burst_mb`, memoryMb(replicas[i].process.pid!, "VmRSS"), "MB");

    // 2. Several: the replica holding the most shards killed with the burst live, its workspaces served
    // ready again by the survivors; then started again and the shards shared out once more.
    const names = created.map((c) => c.name);
    if (count > 1) {
      const moved = await killAndMove(names);
      process.stderr.write(`  ${burst} live: ${moved.shards} shards moved in ${round(moved.seconds)} s\n`);
      fig(`killed_shards_${burst}_live`, moved.shards, "count");
      fig(`move_after_kill_${burst}_live_seconds`, moved.seconds, "s", "<= 15");
      replicas[moved.victim] = await start(moved.victim);
      await untilSharded(replicas, 60_000);
      // Its CPU to live is counted from here: the process before the kill is gone.
      cpuIdle[moved.victim] = cpu(replicas[moved.victim].process.pid);
    }

    // 3. Up to L live (no slot), 100 creates in flight, round-robin.
    const t1 = performance.now();
    for (let i = burst; i < live; i += 100) {
      const batch = await createSpread(replicas, Math.min(100, live - i), { image: body.image, branch: "b" }, i);
      names.push(...batch.map((c) => c.name));
    }
    await untilReady(replicas[0], new Set(names), new Map(), 60 * 60_000);
    const liveSeconds = (performance.now() - t1) / 1000;
    process.stderr.write(`  ${live} live (${round(liveSeconds)} s for the ${live - burst} more)\n`);

    // 4. The Lease writes over a quiet window, every Lease of the bench's namespace read each second.
    let before = new Map<string, string>();
    let writes = 0;
    ({ seen: before } = leaseWrites(
      before,
      (await leases(leaseNs)).map((l) => l.metadata),
    ));
    const windowStart = performance.now();
    let windowMs = 0;
    while (windowMs < WINDOW_S * 1000) {
      await sleep(LEASE_READ_MS);
      const step = leaseWrites(
        before,
        (await leases(leaseNs)).map((l) => l.metadata),
      );
      windowMs = performance.now() - windowStart;
      writes += step.writes;
      before = step.seen;
    }
    const rssLive = replicas.map((r) => memoryMb(r.process.pid!, "VmRSS"));
    const cpuLive = replicas.map((r) => cpu(r.process.pid));

    fig("live_workspaces", live, "count");
    fig("top_up_seconds", liveSeconds, "s");
    // Against the design's 16 shard Leases and one member Lease per replica, each renewed every 4 s
    // (decision 0079); a renewal's tick lands a little after 4 s, and a take or a sweep adds one.
    fig("lease_writes_per_second", (writes * 1000) / windowMs, "1/s");
    fig("lease_writes_per_second_design", (SHARD_COUNT + count) / 4, "1/s");
    for (const [i, pod] of pods.entries()) {
      fig(`${pod}_shards_held`, heldIdle[i], "count");
      fig(`${pod}_rss_idle_mb`, rssIdle[i], "MB");
      fig(`${pod}_rss_live_mb`, rssLive[i], "MB");
      // Since its start (the start-up and the shards' sharing out), then from there to L live and
      // the quiet window: the creates, attaches and renewals it served.
      fig(`${pod}_cpu_idle_seconds`, cpuIdle[i], "s");
      fig(`${pod}_cpu_to_live_seconds`, cpuLive[i] - cpuIdle[i], "s");
    }
    fig(
      "rss_live_total_mb",
      rssLive.reduce((a, b) => a + b, 0),
      "MB",
    );

    // 5. Several: a kill again, now with L live.
    if (count > 1 && live > burst) {
      const moved = await killAndMove(names);
      process.stderr.write(`  ${live} live: ${moved.shards} shards moved in ${round(moved.seconds)} s\n`);
      fig(`killed_shards_${live}_live`, moved.shards, "count");
      fig(`move_after_kill_${live}_live_seconds`, moved.seconds, "s", "<= 15");
    }
  } finally {
    await Promise.all(replicas.map((r) => r.stop()));
    // Gone before the next replica count runs, so its figures do not carry this one's Sandboxes.
    for (const n of [ns, leaseNs])
      await K8s(kind.Namespace)
        .Delete(n)
        .catch(() => undefined);
    const gone = Date.now() + 10 * 60_000;
    while (Date.now() < gone) {
      const left = await K8s(kind.Namespace)
        .Get(ns)
        .then(() => true)
        .catch(() => false);
      if (!left) break;
      await sleep(2_000);
    }
  }
}

export async function orchestratorReplicasBench(
  kubeconfig: string,
  burst: number,
  live: number,
  counts: number[] = [1, 2, 3],
): Promise<Result[]> {
  if (live < burst) throw new Error(`BENCH_REPLICAS_LIVE (${live}) is below BENCH_REPLICAS_BURST (${burst})`);
  const op = await benchOperator(kubeconfig, 3448, "bench-orchestrator-replicas-operator");
  const tmp = mkdtempSync(join(tmpdir(), "jr2-orch-replicas-bench-"));
  const agents: Agent[] = [];
  try {
    const remotes = join(tmp, "remotes");
    const remote = join(remotes, "app.git");
    oneCommitRepository(join(tmp, "src"), remote);
    agents.push(...(await startCacheAgents(tmp)));
    const podConfig = join(tmp, "pod-config.json");
    writeFileSync(
      podConfig,
      JSON.stringify({ custodian: { resources: { cpu: CUSTODIAN_CPU, memory: CUSTODIAN_MEMORY } } }),
    );
    const out: Result[] = [];
    for (const count of counts) {
      process.stderr.write(`bench orchestrator-replicas: ${count} replica(s), ${burst} at once, ${live} live\n`);
      // A count that fails is reported as failed, with the figures it had measured, and the next
      // count still runs: a long run keeps what it measured.
      const figures: Result[] = [];
      let completed = 1;
      try {
        await measure({ kubeconfig, tmp, remote, remotes, podConfig }, count, burst, live, figures);
      } catch (err) {
        completed = 0;
        process.stderr.write(`bench orchestrator-replicas: ${count} replica(s) failed: ${String(err)}\n`);
      }
      out.push(...figures, {
        bench: B,
        metric: `replicas_${count}_completed`,
        value: completed,
        unit: "count",
        target: "1",
        met: completed === 1,
      });
    }
    return out;
  } finally {
    await Promise.all(agents.map((a) => a.stop()));
    await op.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}
