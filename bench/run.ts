// `npm run bench`: runs the benchmarks against the local control plane (or KUBECONFIG) and prints
// one JSON line per figure: {bench, metric, value, unit, target?}. Progress goes to stderr.
//   BENCH_SANDBOXES=1000 (default)   BENCH_ADMISSION_REQUESTS=5000 (default)
//   BENCH_ONLY=sandbox-burst|admission
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { ROOT } from "../scripts/local-operator";
import { admission } from "./admission";
import { sandboxBurst, type Result } from "./sandbox-burst";

function clusterUp(): string {
  const r = spawnSync("bash", [join(ROOT, "test", "cluster", "cluster.sh"), "up"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  const m = /^KUBECONFIG=(.+)$/m.exec(r.stdout ?? "");
  if (r.status !== 0 || !m) throw new Error(`the local control plane did not come up (exit ${r.status})`);
  return m[1];
}

async function main() {
  const kubeconfig = process.env.KUBECONFIG || clusterUp();
  process.env.KUBECONFIG = kubeconfig;
  const build = spawnSync("npm", ["run", "build", "--silent"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
  if (build.status !== 0) throw new Error("npm run build failed");

  const benches: Record<string, () => Promise<Result[]>> = {
    "sandbox-burst": () => sandboxBurst(kubeconfig, Number(process.env.BENCH_SANDBOXES ?? 1000)),
    admission: () => admission(kubeconfig),
  };
  for (const [name, run] of Object.entries(benches)) {
    if (process.env.BENCH_ONLY && process.env.BENCH_ONLY !== name) continue;
    process.stderr.write(`bench ${name} ...\n`);
    for (const r of await run()) console.log(JSON.stringify(r));
  }
}

main().catch((err) => {
  console.error(`bench: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
