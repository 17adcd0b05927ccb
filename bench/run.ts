// `npm run bench`: runs the benchmarks and prints one JSON line per figure:
// {bench, metric, value, unit, target?, met?}. Progress goes to stderr. Benches against the local control
// plane (or KUBECONFIG) bring it up and build the module first; the others need neither.
//   BENCH_SANDBOXES=1000 (default)   BENCH_ADMISSION_REQUESTS=5000 (default)   BENCH_ATTACH_RUNS=5 (default)
//   BENCH_FANOUT_SANDBOXES=200   BENCH_WORKSPACES=200   BENCH_LIVE_WORKSPACES=1000   BENCH_EGRESS_CONNECTIONS=1000
//   BENCH_ONLY=sandbox-burst|admission|attach|custodian|custodian-ca|egress|footprint|effects|repo-fanout|orchestrator|orchestrator-replicas|versus|agents|picks|timings|real-node|gvisor
//   BENCH_REPLICAS_BURST=1000   BENCH_REPLICAS_LIVE=1000   BENCH_REPLICAS_COUNTS=1,2,3 (orchestrator-replicas)
//   BENCH_VERSUS_SANDBOXES=500   BENCH_VERSUS_ROUNDS=2 (versus: jr2 beside agent-sandbox)
//   BENCH_PICKS=2000   BENCH_TIMINGS_RUNS=20   BENCH_REAL_NODE_RUNS=20   BENCH_REAL_NODE_WARM_RUNS=3   BENCH_GVISOR_RUNS=5   BENCH_EFFECTS_RUNS=30   BENCH_BUILD=0: no `npm run build` first (dist/ as it is)
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { ROOT } from "../dev/local-operator";
import { admission } from "./admission-bench";
import { attach } from "./attach-bench";
import { orchestratorBench } from "./orchestrator-bench";
import { repoFanout } from "./repo-fanout-bench";
import { withVerdict } from "./cost";
import { sandboxBurst, type Result } from "./sandbox-burst-bench";

type Bench = { cluster: boolean; only?: boolean; run: (kubeconfig: string) => Promise<Result[]> };

const BENCHES: Record<string, Bench> = {
  "sandbox-burst": { cluster: true, run: (k) => sandboxBurst(k, Number(process.env.BENCH_SANDBOXES ?? 1000)) },
  admission: { cluster: true, run: (k) => admission(k) },
  attach: { cluster: false, run: () => attach() },
  custodian: { cluster: false, run: async () => (await import("./custodian-bench")).custodianBench() },
  egress: { cluster: false, run: async () => (await import("./egress-bench")).egressBench() },
  "custodian-ca": { cluster: false, run: async () => (await import("./custodian-ca-bench")).custodianCaBench() },
  footprint: { cluster: false, run: async () => (await import("./footprint-bench")).footprintBench() },
  effects: { cluster: false, run: async () => (await import("./effects-bench")).effectsBench() },
  picks: { cluster: false, run: async () => (await import("./picks-bench")).picksBench() },
  timings: { cluster: false, run: async () => (await import("./timings-bench")).timingsBench() },
  "repo-fanout": { cluster: true, run: (k) => repoFanout(k, Number(process.env.BENCH_FANOUT_SANDBOXES ?? 200)) },
  orchestrator: {
    cluster: true,
    run: (k) =>
      orchestratorBench(
        k,
        Number(process.env.BENCH_WORKSPACES ?? 200),
        Number(process.env.BENCH_LIVE_WORKSPACES ?? 1000),
      ),
  },
  // Not in a plain `npm run bench`: three runs of the orchestrator bench's size, and a kill in each.
  "orchestrator-replicas": {
    cluster: true,
    only: true,
    run: async (k) => {
      const burst = Number(process.env.BENCH_REPLICAS_BURST ?? 1000);
      const live = Number(process.env.BENCH_REPLICAS_LIVE ?? Math.max(1000, burst));
      const counts = (process.env.BENCH_REPLICAS_COUNTS ?? "1,2,3").split(",").map(Number);
      return (await import("./orchestrator-replicas-bench")).orchestratorReplicasBench(k, burst, live, counts);
    },
  },
  // Not in a plain `npm run bench`: jr2 beside agent-sandbox, alternating, and the split of a burst's
  // time on the API server (with admission removed, with the operator stopped).
  versus: { cluster: true, only: true, run: async (k) => (await import("./versus-bench")).versusBench(k) },
  agents: { cluster: true, run: async (k) => (await import("./agents-bench")).agentsBench(k) },
  // Not in a plain `npm run bench`: it empties the shared real node's image store 20 times.
  "real-node": { cluster: true, only: true, run: async (k) => (await import("./real-node-bench")).realNodeBench(k) },
  // Not in a plain `npm run bench` either: runsc against runc on the real node, cold runs among them.
  gvisor: { cluster: true, only: true, run: async (k) => (await import("./gvisor-bench")).gvisorBench(k) },
};

function clusterUp(): string {
  const r = spawnSync("bash", [join(ROOT, "dev", "cluster", "cluster.sh"), "up"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  const m = /^KUBECONFIG=(.+)$/m.exec(r.stdout ?? "");
  if (r.status !== 0 || !m) throw new Error(`the local control plane did not come up (exit ${r.status})`);
  return m[1];
}

/** The control plane up (unless KUBECONFIG names one) and the module built; returns the kubeconfig. */
function prepareCluster(): string {
  const kubeconfig = process.env.KUBECONFIG || clusterUp();
  process.env.KUBECONFIG = kubeconfig;
  // BENCH_BUILD=0: the module as dist/ holds it, built beforehand (a run that compares two builds
  // builds them outside its turn on the shared cluster).
  if (process.env.BENCH_BUILD === "0") return kubeconfig;
  const build = spawnSync("npm", ["run", "build", "--silent"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  if (build.status !== 0) throw new Error("npm run build failed");
  return kubeconfig;
}

async function main() {
  const only = process.env.BENCH_ONLY;
  if (only && !Object.hasOwn(BENCHES, only)) {
    throw new Error(`BENCH_ONLY=${only} names no bench (known: ${Object.keys(BENCHES).join(", ")})`);
  }
  const selected = Object.entries(BENCHES).filter(([name, b]) => (only ? only === name : !b.only));
  // The benches' processes run on this Node (process.execPath): under `npm run bench`, the one npm
  // ci brought (docs/decisions/0052-node-24-runtime.md). Said so a figure can be read against it.
  process.stderr.write(`bench: node ${process.version} (${process.execPath})\n`);
  const kubeconfig = selected.some(([, b]) => b.cluster) ? prepareCluster() : "";
  for (const [name, bench] of selected) {
    process.stderr.write(`bench ${name} ...\n`);
    // Each figure with its target says whether it meets it (decision 0043).
    for (const r of await bench.run(kubeconfig)) console.log(JSON.stringify(withVerdict(r)));
  }
}

main().catch((err) => {
  console.error(`bench: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
