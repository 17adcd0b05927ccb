// Benchmark: what each companion costs at rest, per pod (decision 0044). Node's own
// floor on this machine first (an empty process, and one holding an HTTP server, TLS and a P-256
// key, as every companion does), then the Custodian and the Harness as their images run them
// (bundled by scripts/companion-bundle.ts), each idle: started, ready, nothing asked of it yet. The
// Harness hosts its Agents as in a pod (a conversations directory, a model behind the Custodian).
// RSS is read from /proc after 2 s of rest, the median of five fresh processes; with it the CPU
// each took to start (its threads' schedstat, read the moment it says it is ready).
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HARNESS_ENV } from "../api/env";
import { HARNESS_CUSTODIAN_URL_ENV } from "../api/custodian-config";
import { bundleCompanion } from "../scripts/companion-bundle";
import { threadCpuMs } from "./cost";
import { runCustodian } from "./custodian-bench";
import type { Result } from "./sandbox-burst-bench";
import { percentile, round, sleep, sorted } from "./stats";

const B = "footprint";
const ROOT = join(__dirname, "..");
const log = (line: string) => process.stderr.write(`footprint: ${line}\n`);

const rssOf = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;

/** The process's own memory in MiB (its private pages, clean and dirty): RSS less the pages it shares
 * with every other process mapping the same files, the Node binary's above all (decision 0052). */
function privateOf(pid: number): number {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(rollup)![1]);
  return (kb("Private_Clean") + kb("Private_Dirty")) / 1024;
}

/** What a start cost: the CPU until ready (read the moment it says so), and the RSS at rest. */
type Start = { rss: number; cpu: number };

/** A process started and, once `ready` says so, left alone for 2 s; its RSS in MiB. */
async function restingRss(child: ChildProcess, ready: (out: string) => boolean): Promise<Start> {
  let out = "";
  let cpu = NaN;
  child.stdout?.on("data", (c: Buffer) => {
    out += c.toString();
    if (Number.isNaN(cpu) && ready(out)) cpu = threadCpuMs(child.pid!);
  });
  for (let i = 0; i < 200 && !ready(out); i++) await sleep(50);
  if (!ready(out)) throw new Error(`the process did not get ready: ${out.slice(-300)}`);
  await sleep(2000);
  const rss = rssOf(child.pid!);
  child.kill("SIGTERM");
  return { rss, cpu };
}

/** Five fresh processes: the median RSS at rest and the median CPU to start. */
async function median(what: string, one: () => Promise<Start>): Promise<Start> {
  const runs: Start[] = [];
  for (let i = 0; i < 5; i++) runs.push(await one());
  log(
    `${what}: ${runs.map((r) => r.rss.toFixed(1)).join(", ")} MiB; ${runs.map((r) => r.cpu.toFixed(0)).join(", ")} ms CPU to start`,
  );
  return {
    rss: percentile(sorted(runs.map((r) => r.rss)), 50),
    cpu: percentile(sorted(runs.map((r) => r.cpu)), 50),
  };
}

const FLOOR_HTTP = `require("node:http").createServer().listen(0, "127.0.0.1", () => process.stdout.write("up\\n"));
require("node:tls"); require("node:crypto").generateKeyPairSync("ec", { namedCurve: "P-256" });`;

export async function footprintBench(): Promise<Result[]> {
  const dir = join(ROOT, "node_modules", ".cache", "jr2-bench");
  await bundleCompanion("harness", dir);
  const floor = await median("node, empty", () =>
    restingRss(spawn(process.execPath, ["-e", 'process.stdout.write("up\\n"); setInterval(() => {}, 1000)']), (o) =>
      o.includes("up"),
    ),
  );
  const floorHttp = await median("node, http + tls + key", () =>
    restingRss(spawn(process.execPath, ["-e", FLOOR_HTTP]), (o) => o.includes("up")),
  );
  const own: number[] = [];
  const custodian = await median("custodian", async () => {
    const c = await runCustodian(9, "jr2-stand-in-" + "0".repeat(32));
    const cpu = c.startCpu;
    await sleep(2000);
    const rss = c.rss();
    own.push(privateOf(c.child.pid!));
    await c.stop();
    return { rss, cpu };
  });
  log(`custodian, own: ${own.map((r) => r.toFixed(1)).join(", ")} MiB`);
  const harness = await median("harness", () =>
    restingRss(
      spawn(process.execPath, [join(dir, "harness.js")], {
        env: {
          PATH: process.env.PATH,
          [HARNESS_ENV.port]: "0",
          [HARNESS_ENV.host]: "127.0.0.1",
          [HARNESS_ENV.workRoot]: mkdtempSync(join(tmpdir(), "jr2-fp-work-")),
          [HARNESS_ENV.reposRoot]: mkdtempSync(join(tmpdir(), "jr2-fp-repos-")),
          [HARNESS_ENV.conversationsDir]: mkdtempSync(join(tmpdir(), "jr2-fp-conv-")),
          [HARNESS_ENV.modelProvider]: "model",
          [HARNESS_CUSTODIAN_URL_ENV]: "http://127.0.0.1:9",
        },
        stdio: ["ignore", "pipe", "inherit"],
      }),
      (o) => o.includes('"listening"'),
    ),
  );
  return [
    { bench: B, metric: "node_floor_rss", value: round(floor.rss), unit: "MiB" },
    { bench: B, metric: "node_http_tls_floor_rss", value: round(floorHttp.rss), unit: "MiB" },
    { bench: B, metric: "custodian_idle_rss", value: round(custodian.rss), unit: "MiB" },
    { bench: B, metric: "custodian_idle_over_floor", value: round(custodian.rss - floorHttp.rss), unit: "MiB" },
    // The budget is on private memory (decision 0052): Node's own pages are shared by every
    // process on the node, so RSS, Node's floor included, is not the Custodian's cost.
    {
      bench: B,
      metric: "custodian_idle_private",
      value: round(percentile(sorted(own), 50)),
      unit: "MiB",
      target: "<= 16",
    },
    { bench: B, metric: "harness_idle_rss", value: round(harness.rss), unit: "MiB" },
    { bench: B, metric: "harness_idle_over_floor", value: round(harness.rss - floorHttp.rss), unit: "MiB" },
    // The CPU each takes to start (decision 0064): a workspace's create waits on the Custodian's.
    { bench: B, metric: "node_floor_start_cpu_ms", value: round(floor.cpu), unit: "ms" },
    { bench: B, metric: "node_http_tls_floor_start_cpu_ms", value: round(floorHttp.cpu), unit: "ms" },
    { bench: B, metric: "custodian_start_cpu_ms", value: round(custodian.cpu), unit: "ms" },
    {
      bench: B,
      metric: "custodian_start_cpu_ratio_to_floor",
      value: round(custodian.cpu / floorHttp.cpu),
      unit: "ratio",
    },
    { bench: B, metric: "harness_start_cpu_ms", value: round(harness.cpu), unit: "ms" },
  ];
}
