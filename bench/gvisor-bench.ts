// Benchmark: what gVisor costs (docs/decisions/0055-gvisor.md), runsc against runc on the same real
// node in one run. Every figure is taken for both runtimes, the two alternating (runc first on even
// rounds, gVisor first on odd), and reported with the ratio runsc/runc: on two shared cores a wall
// time alone is noise, a ratio taken side by side is not (decision 0043).
// Set up as real-node-bench.ts is (the module, the node's cache agent and the Orchestrator are
// processes on this machine; the pod runs on the real node), with one pod config whose
// runtime.allowedClassNames holds the gVisor RuntimeClass, so each workspace names its runtime.
//
//   warm    create -> `ready` with the images on the node (BENCH_GVISOR_RUNS, default 5 per runtime),
//           split as real-node-bench.ts splits it: start (pod bound -> Ready) and attach
//           (pod Ready -> `ready`); and each pod's memory once it idles (below).
//   cold    the same after the node's copies of both images are removed (BENCH_GVISOR_COLD_RUNS,
//           default 2 per runtime): the pull is the same bytes either way, the start is not.
//   attach  a workspace of the 20,000-file repository (attach-bench.ts's): pod Ready -> `ready`,
//           which is the Harness's shared clone and worktree checkout through the runtime's file
//           system (gVisor's gofer) (BENCH_GVISOR_BIG_RUNS, default 2 per runtime).
//   bash    in that workspace's harness container, a bash tool call as the Harness's bash tool makes
//           it (spawn `bash -c`, own process group, output piped): `true` (the floor: fork and exec)
//           and `git status --short` over the 20,000 files; p50 of 20 and 10 calls.
//   memory  the pod's working set (its memory cgroup's usage less inactive file pages, as the
//           kubelet counts it), 3 s after `ready`: under gVisor the sentry and the gofer are in it.
//   BENCH_GVISOR_RUNS=5   BENCH_GVISOR_COLD_RUNS=2   BENCH_GVISOR_BIG_RUNS=2
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ROOT } from "../dev/local-operator";
import { run as kubectl } from "../dev/kubectl";
import { pushProjectImages } from "../dev/project-images";
import { oneCommitRepository } from "../dev/repository";
import { OrchestratorClient } from "../clients/typescript/src";
import { upstream } from "./attach-bench";
import {
  again,
  containersOf,
  namesOf,
  podCgroup,
  pulledOf,
  realNodePlacement,
  realNodeReady,
  startRealNodeStage,
  stopRealNodeStage,
  type RealNodeStage,
  removeImages,
  watchPods,
} from "./real-node-bench";
import type { Result } from "./sandbox-burst-bench";
import { percentile, round, sleep, sorted } from "./stats";

const B = "gvisor";
const CLUSTER_SH = join(ROOT, "dev", "cluster", "cluster.sh");
const log = (line: string) => process.stderr.write(`gvisor: ${line}\n`);
const s = (ms: number) => (ms / 1000).toFixed(2);

type Runtime = "runc" | "runsc";
const RUNTIMES: Runtime[] = ["runc", "runsc"];

/** The pod's memory working set in MiB, from its memory cgroup (v1 or v2) on this machine. */
function podWorkingSet(uid: string): number {
  const v1 = podCgroup("memory", uid);
  if (v1) {
    const usage = Number(readFileSync(join(v1, "memory.usage_in_bytes"), "utf8"));
    const inactive = Number(/^total_inactive_file (\d+)$/m.exec(readFileSync(join(v1, "memory.stat"), "utf8"))![1]);
    return (usage - inactive) / (1 << 20);
  }
  const v2 = podCgroup("", uid);
  if (!v2) throw new Error(`no memory cgroup for pod ${uid} under /sys/fs/cgroup`);
  const usage = Number(readFileSync(join(v2, "memory.current"), "utf8"));
  const inactive = Number(/^inactive_file (\d+)$/m.exec(readFileSync(join(v2, "memory.stat"), "utf8"))![1]);
  return (usage - inactive) / (1 << 20);
}

/** Node, in the harness container: `n` bash tool calls of `command` in `cwd`, each as the Harness's
 * bash tool spawns it; prints each call's milliseconds, one per line. */
const BASH_CALLS_JS = `
const { spawn } = require("child_process");
const [command, cwd, n] = process.argv.slice(1);
(async () => {
  for (let i = 0; i < Number(n); i++) {
    const t0 = performance.now();
    await new Promise((resolve, reject) => {
      const c = spawn("bash", ["-c", command], { cwd, stdio: ["ignore", "pipe", "pipe"], detached: true });
      c.stdout.resume(); c.stderr.resume();
      c.once("error", reject);
      c.once("close", (code) => (code === 0 ? resolve() : reject(new Error(command + ": exit " + code))));
    });
    console.log((performance.now() - t0).toFixed(2));
  }
})().catch((e) => { console.error(e.message); process.exit(1); });`;

type Run = { runtime: Runtime; total: number; start: number; attach: number; pull: number; memory?: number };

export async function gvisorBench(kubeconfig: string): Promise<Result[]> {
  const warmRuns = Number(process.env.BENCH_GVISOR_RUNS ?? 5);
  const coldRuns = Number(process.env.BENCH_GVISOR_COLD_RUNS ?? 2);
  const bigRuns = Number(process.env.BENCH_GVISOR_BIG_RUNS ?? 2);
  const env = await realNodeReady(kubeconfig);
  const runtimeClass = env.JR2_GVISOR_RUNTIME_CLASS;
  const images = pushProjectImages(env.JR2_REGISTRY, false);
  const refs = [images.sandbox, images.companions];
  const big = await upstream();

  const placement = realNodePlacement(env);
  const suffix = randomBytes(3).toString("hex");
  const ns = `jr2-bench-gvisor-${suffix}`;
  const orchNs = `jr2-bench-gvisor-orch-${suffix}`;
  const tmp = mkdtempSync(join(tmpdir(), "jr2-bench-gvisor-"));
  chmodSync(tmp, 0o755);
  const cacheRoot = join(tmp, "caches");
  mkdirSync(cacheRoot, { mode: 0o755 });
  const remotes = join(tmp, "remotes");
  const small = oneCommitRepository(join(tmp, "src"), join(remotes, "bench.git"));
  const podConfig = join(tmp, "pod-config.json");
  writeFileSync(
    podConfig,
    JSON.stringify({
      custodian: { image: images.companions },
      placement,
      runtime: { allowedClassNames: [runtimeClass] },
    }),
  );

  const stage: Partial<RealNodeStage> = {};
  let watch: ReturnType<typeof watchPods> | undefined;
  /** Images of others removed for a cold run (sharing a layer), pulled back at the end. */
  const restore: string[] = [];
  try {
    const { orch } = await startRealNodeStage(
      kubeconfig,
      env,
      { name: "bench-gvisor", ns, orchNs, tmp, cacheRoot, credentials: [remotes, dirname(big)], podConfig },
      stage,
    );
    const client = new OrchestratorClient({ url: orch.url, token: orch.token });
    watch = watchPods(kubeconfig, ns);
    const exec = (name: string, ...cmd: string[]) =>
      kubectl(kubeconfig, ["exec", "-n", ns, name, "-c", "harness", "--", ...cmd]);

    /** One workspace under `runtime`: create -> ready, split; then `measure` while it lives. */
    const once = async (
      runtime: Runtime,
      what: string,
      o: { cold?: boolean; remote: string; measure?: (name: string, run: Run) => Promise<void> },
    ): Promise<Run> => {
      if (o.cold)
        for (const other of await removeImages(env.CRANE, refs)) if (!restore.includes(other)) restore.push(other);
      const t0 = Date.now();
      const { name } = await again(() =>
        client.createWorkspace({
          image: images.sandbox,
          branch: `bench/${what}`,
          repos: [{ slot: "app", url: o.remote }],
          ...(runtime === "runsc" ? { runtimeClassName: runtimeClass } : {}),
        }),
      );
      let view: Awaited<ReturnType<typeof client.workspace>> | undefined;
      for (const deadline = t0 + 600_000; Date.now() < deadline; await sleep(100)) {
        view = await again(() => client.workspace(name));
        if (["ready", "failed", "lost"].includes(view.state)) break;
      }
      const ready = Date.now();
      if (view?.state !== "ready")
        throw new Error(
          `workspace ${name} (${runtime}) ${view?.state ?? "not ready"} after ${s(ready - t0)}s: ${JSON.stringify(view?.failure)}`,
        );
      const seen = watch!.seen.get(name) ?? {};
      if (seen.scheduled === undefined || seen.ready === undefined)
        throw new Error(`the pod watch did not see ${name} bound and Ready`);
      const pod = JSON.parse(await kubectl(kubeconfig, ["get", "pod", "-n", ns, name, "-o", "json"]));
      // The guard: a workspace measured as gVisor's runs in its sentry, runc's on this kernel.
      const version = (await exec(name, "cat", "/proc/version")).trim();
      const host = readFileSync("/proc/version", "utf8").trim();
      if (
        (pod.spec.runtimeClassName === runtimeClass) !== (runtime === "runsc") ||
        (version === host) === (runtime === "runsc")
      )
        throw new Error(`workspace ${name} was to run under ${runtime}, and reads /proc/version "${version}"`);
      let pull = 0;
      if (o.cold) {
        let events = await pulledOf(kubeconfig, ns, name);
        for (let k = 0; k < 40 && events.pulled.length < refs.length; k++) {
          await sleep(250);
          events = await pulledOf(kubeconfig, ns, name);
        }
        if (events.pulled.length < refs.length)
          throw new Error(`cold ${name}: ${events.pulled.length} pulls, not ${refs.length}`);
        pull = events.pulled.reduce((a, p) => a + p.seconds * 1000, 0);
      }
      const r: Run = {
        runtime,
        total: ready - t0,
        start: seen.ready - seen.scheduled - pull,
        attach: ready - seen.ready,
        pull,
      };
      await o.measure?.(name, r);
      log(
        `${what} ${runtime}: ${s(r.total)} s (pull ${s(r.pull)}, start ${s(r.start)}, attach ${s(r.attach)})` +
          (r.memory !== undefined ? `, ${r.memory.toFixed(1)} MiB` : ""),
      );
      await again(() => client.deleteWorkspace(name));
      for (const deadline = Date.now() + 180_000; ; await sleep(250)) {
        const left = await kubectl(kubeconfig, ["get", "pods", "-n", ns, "-o", "name"]);
        if (!left.includes(`pod/${name}`) && containersOf(refs).length === 0) break;
        if (Date.now() > deadline) throw new Error(`${name}'s pod or containers still there after 180 s`);
      }
      return r;
    };
    /** Both runtimes, `rounds` times, alternating which goes first. */
    const sideBySide = async (rounds: number, fn: (rt: Runtime, i: number) => Promise<Run>) => {
      const runs: Run[] = [];
      for (let i = 0; i < rounds; i++)
        for (const rt of i % 2 ? [...RUNTIMES].reverse() : RUNTIMES) runs.push(await fn(rt, i));
      return runs;
    };
    const memory = async (name: string, r: Run) => {
      await sleep(3000);
      const uid = JSON.parse(await kubectl(kubeconfig, ["get", "pod", "-n", ns, name, "-o", "json"])).metadata.uid;
      r.memory = podWorkingSet(uid);
    };
    const bash: Record<Runtime, { floor: number[]; status: number[] }> = {
      runc: { floor: [], status: [] },
      runsc: { floor: [], status: [] },
    };
    const calls = async (name: string, command: string, n: number) =>
      (await exec(name, "node", "-e", BASH_CALLS_JS, command, "/work/app/default", String(n)))
        .trim()
        .split("\n")
        .map(Number);

    // First a workspace of each, untimed: the images on the node, the caches filled.
    for (const rt of RUNTIMES) await once(rt, "warm-up", { remote: small });
    const warm = await sideBySide(warmRuns, (rt, i) => once(rt, `warm-${i}`, { remote: small, measure: memory }));
    const cold = await sideBySide(coldRuns, (rt, i) => once(rt, `cold-${i}`, { remote: small, cold: true }));
    const large = await sideBySide(bigRuns, (rt, i) =>
      once(rt, `large-${i}`, {
        remote: big,
        measure: async (name) => {
          bash[rt].floor.push(...(await calls(name, "true", 20)));
          bash[rt].status.push(...(await calls(name, "git status --short", 10)));
        },
      }),
    );

    const out: Result[] = [];
    const p50 = (xs: number[]) => percentile(sorted(xs), 50);
    const pair = (metric: string, unit: string, of: (rt: Runtime) => number[], scale = 1) => {
      const [runc, runsc] = RUNTIMES.map((rt) => p50(of(rt)) * scale);
      out.push({ bench: B, metric: `${metric}_runc_p50`, value: round(runc), unit });
      out.push({ bench: B, metric: `${metric}_runsc_p50`, value: round(runsc), unit });
      out.push({ bench: B, metric: `${metric}_ratio`, value: round(runsc / runc), unit: "runsc/runc" });
    };
    const by = (runs: Run[], part: keyof Run) => (rt: Runtime) =>
      runs.filter((r) => r.runtime === rt).map((r) => r[part] as number);
    pair("warm_ready", "s", by(warm, "total"), 1 / 1000);
    pair("warm_start", "s", by(warm, "start"), 1 / 1000);
    pair("warm_attach", "s", by(warm, "attach"), 1 / 1000);
    pair("cold_ready", "s", by(cold, "total"), 1 / 1000);
    pair("cold_pull", "s", by(cold, "pull"), 1 / 1000);
    pair("cold_start", "s", by(cold, "start"), 1 / 1000);
    pair("attach_20k_files", "s", by(large, "attach"), 1 / 1000);
    pair("bash_call_true", "ms", (rt) => bash[rt].floor);
    pair("bash_call_git_status_20k", "ms", (rt) => bash[rt].status);
    pair("pod_memory_idle", "MiB", by(warm, "memory"));
    return out;
  } finally {
    watch?.stop();
    await stopRealNodeStage(kubeconfig, stage, [ns, orchNs]);
    rmSync(tmp, { recursive: true, force: true });
    for (const ref of [...refs, ...restore])
      if (!namesOf(ref).length) {
        log(`pulling ${ref} back onto the node`);
        spawnSync("bash", [CLUSTER_SH, "ctr", "images", "pull", "--plain-http", ref], { stdio: "ignore" });
      }
  }
}
