// Benchmark: what the Custodian adds (decision 0018). The Custodian runs as the pod runs it,
// its esbuild bundle in its own Node process, its provider route bound to a fake provider on
// loopback; every proxied request carries a Stand-in, so the swap and the answer's mask are both
// paid. In one run, each request is sent three ways in turn (keep-alive on each): directly, through
// a bare Node pass-through in its own process (the cost of any extra hop on this machine, the
// floor), and through the Custodian: small bodies (256 B each way), 1 MiB each way, and a streamed
// answer (32 chunks of 1 KiB). Figures: each path's p50 and p99, the Custodian's p50 added over
// direct and over the bare hop. Then, on a fresh Custodian, its RSS at idle, its peak with 100
// concurrent streams (sampled every 50 ms), and its RSS after each 10 MiB of a 100 MiB streamed
// answer: flat means no growth over its second half (a buffered answer would grow by 50 MiB).
// Chained (docs/decisions/0051): two more Custodians, one with `egress.via` naming a stand-in egress
// point (test/support/egress-point-fixture.ts, a real proxy in this process) and one without, each
// sending small bodies to the fake provider over plain http (absolute-form through the egress
// point) and over https (a CONNECT tunnel, TLS over it), interleaved: each path's p50 and p99, the
// ratio of the chained p50 to the unchained one, and each Custodian's CPU per request.
//   BENCH_CUSTODIAN_REQUESTS=2000 (default; rounds of small bodies, a tenth of that of 1 MiB, a quarter of streams)
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Pool } from "undici";
import { CUSTODIAN_ENV } from "../api/env";
import { bundleCompanion } from "../scripts/companion-bundle";
import { cpuSeconds, threadCpuMs } from "./cost";
import { closedPort, newCa, newStandIn, secretValue, writeLayout, type Pem } from "../test/support/custodian-fixtures";
import { egressPoint } from "../test/support/egress-point-fixture";
import type { Result } from "./sandbox-burst-bench";
import { percentile, round, sleep, sorted } from "./stats";

const B = "custodian";
const ROOT = join(__dirname, "..");
const KIB = 1024;
const MIB = 1024 * KIB;
const log = (line: string) => process.stderr.write(`custodian: ${line}\n`);

// ---------------------------------------------------------------------------------------------
// The fake provider

const SMALL = Buffer.alloc(256, "s");
const LARGE = Buffer.alloc(MIB, "l");
const CHUNK = Buffer.alloc(KIB, "c");
const BIG_CHUNK = Buffer.alloc(64 * KIB, "h");

/** Writes `count` chunks, waiting for the socket whenever it asks, `gapMs` apart (0: at once). */
async function stream(res: http.ServerResponse, chunk: Buffer, count: number, gapMs: number): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream" });
  for (let i = 0; i < count && !res.destroyed; i++) {
    if (!res.write(chunk)) await once(res, "drain");
    if (gapMs) await sleep(gapMs);
  }
  res.end();
}

/** The fake provider, over https when given a serving certificate. */
function provider(tlsPem?: Pem): Promise<http.Server> {
  const handle = (req: http.IncomingMessage, res: http.ServerResponse) => {
    req.resume();
    req.on("end", () => {
      const path = req.url ?? "";
      if (path.endsWith("/small")) return res.end(SMALL);
      if (path.endsWith("/large")) return res.end(LARGE);
      if (path.endsWith("/stream")) return void stream(res, CHUNK, 32, 0);
      if (path.endsWith("/slow")) return void stream(res, CHUNK, 40, 50);
      if (path.endsWith("/huge")) return void stream(res, BIG_CHUNK, 1600, 0);
      res.writeHead(404).end();
    });
  };
  const server = tlsPem
    ? https.createServer({ cert: tlsPem.certPem, key: tlsPem.keyPem }, handle)
    : http.createServer(handle);
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

// ---------------------------------------------------------------------------------------------
// The Custodian, bundled and run as its own process

type Running = {
  child: ChildProcess;
  port: number;
  rss: () => number;
  stop: () => Promise<void>;
  /** The CPU it took to start, ms (bench/cost.ts threadCpuMs), read as it said it listens. */
  startCpu: number;
};

/** `tls`: a second provider, `tls`, at https://localhost:<port>, trusted through `ca`; `via`: the
 * egress point's url for `egress.via`. */
export async function runCustodian(
  upstreamPort: number,
  standIn: string,
  extra: { tls?: { port: number; ca: string }; via?: string } = {},
): Promise<Running> {
  // Bundled as `npm run build` bundles it, its lazy libraries beside it (scripts/companion-bundle.ts).
  const dir = join(ROOT, "node_modules", ".cache", "jr2-bench");
  await bundleCompanion("custodian", dir);
  const bundle = join(dir, "custodian.js");
  const origin = `http://127.0.0.1:${upstreamPort}`;
  const tlsOrigin = extra.tls ? `https://localhost:${extra.tls.port}` : undefined;
  const layout = writeLayout(
    {
      version: 1,
      providers: [{ name: "bench", url: origin }, ...(tlsOrigin ? [{ name: "tls", url: tlsOrigin }] : [])],
      held: [{ value: "key", standIn, origins: [origin, ...(tlsOrigin ? [tlsOrigin] : [])] }],
      ...(extra.via ? { egress: { via: extra.via } } : {}),
    },
    { key: secretValue("bench-key") },
  );
  const upstreamCa = join(layout.dir, "upstream-ca.pem");
  if (extra.tls) writeFileSync(upstreamCa, extra.tls.ca);
  const port = await closedPort();
  const child = spawn(process.execPath, [bundle], {
    env: {
      [CUSTODIAN_ENV.configFile]: layout.configFile,
      [CUSTODIAN_ENV.valuesDir]: layout.valuesDir,
      [CUSTODIAN_ENV.caDir]: layout.caDir,
      [CUSTODIAN_ENV.port]: String(port),
      [CUSTODIAN_ENV.healthPort]: "0",
      ...(extra.tls ? { [CUSTODIAN_ENV.upstreamCa]: upstreamCa } : {}),
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  // Its log lines (one per request) are read and dropped, as a log collector would.
  let ready = false;
  let startCpu = NaN;
  child.stdout!.on("data", (c: Buffer) => {
    if (!ready && c.toString().includes('"listening"')) [ready, startCpu] = [true, threadCpuMs(child.pid!)];
  });
  for (let i = 0; i < 100 && !ready; i++) await sleep(50);
  if (!ready) throw new Error("the Custodian did not start");
  const rss = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))![1]) / 1024;
  const stop = async () => {
    child.kill("SIGTERM");
    await once(child, "exit");
  };
  return { child, port, rss, stop, startCpu };
}

/** A process's user + system CPU so far, in milliseconds. */
const cpuMs = (pid: number) => cpuSeconds(pid) * 1000;

/** A bare pass-through (node:http, keep-alive, no rule) in its own process: the floor of a hop. */
async function runBare(upstreamPort: number): Promise<{ port: number; pid: number; stop: () => void }> {
  const script = `
    const http = require("node:http");
    const agent = new http.Agent({ keepAlive: true });
    const server = http.createServer((req, res) => {
      const path = req.url.replace("/providers/bench", "");
      const up = http.request({ host: "127.0.0.1", port: ${upstreamPort}, path, method: req.method, headers: req.headers, agent }, (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
      });
      req.pipe(up);
    });
    server.keepAliveTimeout = 60000;
    server.listen(0, "127.0.0.1", () => process.stdout.write(server.address().port + "\\n"));`;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  const [line] = (await once(child.stdout!, "data")) as [Buffer];
  return { port: Number(line.toString().trim()), pid: child.pid!, stop: () => child.kill("SIGTERM") };
}

// ---------------------------------------------------------------------------------------------
// Measuring

type Target = { pool: Pool; prefix: string; headers: Record<string, string> };

/** One request, its answer read to the end; milliseconds. */
async function timed(t: Target, path: string, body?: Buffer): Promise<number> {
  const started = performance.now();
  const res = await t.pool.request({ path: t.prefix + path, method: body ? "POST" : "GET", headers: t.headers, body });
  for await (const _ of res.body) void _;
  if (res.statusCode !== 200) throw new Error(`${t.prefix}${path}: ${res.statusCode}`);
  return performance.now() - started;
}

type Path = "direct" | "bare" | "custodian";
type Times = Record<Path, number[]>;

/** `n` rounds, each sending the request once per path in a rotating order; each path's sorted times. */
async function rounds<K extends string>(
  targets: Record<K, Target>,
  path: string,
  n: number,
  body?: Buffer,
): Promise<Record<K, number[]>> {
  const names = Object.keys(targets) as K[];
  const times = Object.fromEntries(names.map((k) => [k, [] as number[]])) as Record<K, number[]>;
  for (let i = 0; i < Math.ceil(n / 10); i++) for (const k of names) await timed(targets[k], path, body);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < names.length; j++) {
      const k = names[(i + j) % names.length];
      times[k].push(await timed(targets[k], path, body));
    }
  }
  return Object.fromEntries(names.map((k) => [k, sorted(times[k])])) as Record<K, number[]>;
}

function overhead(name: string, t: Times): Result[] {
  const p = (xs: number[], q: number) => round(percentile(xs, q));
  const r = (metric: string, value: number, target?: string): Result => ({
    bench: B,
    metric: `${name}_${metric}`,
    value,
    unit: "ms",
    ...(target ? { target } : {}),
  });
  return [
    r("direct_p50", p(t.direct, 50)),
    r("direct_p99", p(t.direct, 99)),
    r("bare_hop_p50", p(t.bare, 50)),
    r("bare_hop_p99", p(t.bare, 99)),
    r("custodian_p50", p(t.custodian, 50)),
    r("custodian_p99", p(t.custodian, 99)),
    r("added_p50", round(p(t.custodian, 50) - p(t.direct, 50)), "<= 2"),
    r("added_p99", round(p(t.custodian, 99) - p(t.direct, 99))),
    r("added_over_bare_hop_p50", round(p(t.custodian, 50) - p(t.bare, 50))),
  ];
}

/** Samples `rss` every 50 ms while `work` runs; the highest. */
async function peakDuring(rss: () => number, work: Promise<unknown>): Promise<number> {
  let peak = rss();
  let done = false;
  void work.finally(() => (done = true));
  while (!done) {
    peak = Math.max(peak, rss());
    await sleep(50);
  }
  await work;
  return Math.max(peak, rss());
}

/** The 100 MiB answer read through `t`, the Custodian's RSS sampled after each 10 MiB. */
async function hugeAnswer(t: Target, rss: () => number): Promise<{ samples: number[]; seconds: number }> {
  const started = performance.now();
  const res = await t.pool.request({ path: `${t.prefix}/huge`, method: "GET", headers: t.headers });
  const samples: number[] = [];
  let bytes = 0;
  for await (const chunk of res.body) {
    bytes += (chunk as Buffer).length;
    if (bytes >= (samples.length + 1) * 10 * MIB) samples.push(rss());
  }
  if (bytes !== 100 * MIB) throw new Error(`the 100 MiB answer ended at ${bytes} bytes`);
  return { samples, seconds: (performance.now() - started) / 1000 };
}

/**
 * The chained case (docs/decisions/0051): a Custodian whose provider requests go through the
 * egress point against one sending them straight, small bodies each way, over plain http and
 * https, interleaved; each path's p50 and p99, the ratio of the chained p50 to the unchained, and
 * each Custodian's CPU per request.
 */
async function chainedBench(n: number, httpPort: number, standIn: string): Promise<Result[]> {
  const ca = newCa("bench upstream CA");
  const tlsProvider = await provider(ca.sign(["localhost"]));
  const tls = { port: (tlsProvider.address() as AddressInfo).port, ca: ca.certPem };
  const egress = await egressPoint();
  const unchained = await runCustodian(httpPort, standIn, { tls });
  const chained = await runCustodian(httpPort, standIn, { tls, via: egress.url });
  const pools: Pool[] = [];
  const target = (port: number, prefix: string): Target => ({
    pool: pools[pools.push(new Pool(`http://127.0.0.1:${port}`, { connections: 256 })) - 1],
    prefix,
    headers: { authorization: `Bearer ${standIn}` },
  });
  const results: Result[] = [];
  const r = (metric: string, value: number, unit = "ms"): Result => ({ bench: B, metric, value, unit });
  try {
    for (const [name, prefix] of [
      ["http", "/providers/bench"],
      ["https", "/providers/tls"],
    ] as const) {
      log(`chained through the egress point, ${name}, small bodies, ${n} rounds`);
      const cpu0 = { unchained: cpuMs(unchained.child.pid!), chained: cpuMs(chained.child.pid!) };
      const t = await rounds(
        { unchained: target(unchained.port, prefix), chained: target(chained.port, prefix) },
        "/small",
        n,
        SMALL,
      );
      const served = n + Math.ceil(n / 10);
      const p = (xs: number[], q: number) => round(percentile(xs, q));
      const cpu = {
        unchained: round((cpuMs(unchained.child.pid!) - cpu0.unchained) / served),
        chained: round((cpuMs(chained.child.pid!) - cpu0.chained) / served),
      };
      results.push(
        r(`chained_${name}_unchained_p50`, p(t.unchained, 50)),
        r(`chained_${name}_unchained_p99`, p(t.unchained, 99)),
        r(`chained_${name}_via_p50`, p(t.chained, 50)),
        r(`chained_${name}_via_p99`, p(t.chained, 99)),
        r(`chained_${name}_p50_ratio_via_to_unchained`, round(p(t.chained, 50) / p(t.unchained, 50)), "x"),
        r(`chained_${name}_unchained_cpu_per_request`, cpu.unchained),
        r(`chained_${name}_via_cpu_per_request`, cpu.chained),
      );
    }
    // Kept alive: the chained Custodian opened one connection to the egress point per origin
    // (with the pool's concurrency 1, one each), not one per request.
    results.push(r("chained_egress_connections", egress.connections(), "connections"));
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    await unchained.stop();
    await chained.stop();
    await egress.close();
    tlsProvider.close();
    (tlsProvider as http.Server).closeAllConnections();
  }
  return results;
}

export async function custodianBench(): Promise<Result[]> {
  const n = Number(process.env.BENCH_CUSTODIAN_REQUESTS ?? 2000);
  const upstream = await provider();
  const upstreamPort = (upstream.address() as AddressInfo).port;
  const standIn = newStandIn();
  let custodian = await runCustodian(upstreamPort, standIn);
  const bare = await runBare(upstreamPort);
  const pools: Pool[] = [];
  const pool = (port: number) => pools[pools.push(new Pool(`http://127.0.0.1:${port}`, { connections: 256 })) - 1];
  // The direct and bare paths send a key of their own; the Custodian's path its Stand-in.
  const key = { authorization: "Bearer bench-direct-key" };
  const proxied = (port: number): Target => ({
    pool: pool(port),
    prefix: "/providers/bench",
    headers: { authorization: `Bearer ${standIn}` },
  });
  const targets: Record<Path, Target> = {
    direct: { pool: pool(upstreamPort), prefix: "", headers: key },
    bare: { pool: pool(bare.port), prefix: "/providers/bench", headers: key },
    custodian: proxied(custodian.port),
  };
  const results: Result[] = [];
  try {
    log(`small bodies, ${n} rounds`);
    // CPU as work (decision 0044): each process's user+system time over the phase, per request it
    // served; every path gets the same n requests, so the bare hop's figure is the floor.
    const cpu0 = { custodian: cpuMs(custodian.child.pid!), bare: cpuMs(bare.pid) };
    results.push(...overhead("small", await rounds(targets, "/small", n, SMALL)));
    const warm = Math.ceil(n / 10);
    const perRequest = (ms: number) => round(ms / (n + warm));
    results.push(
      {
        bench: B,
        metric: "small_cpu_per_request",
        value: perRequest(cpuMs(custodian.child.pid!) - cpu0.custodian),
        unit: "ms",
        target: "<= 1",
      },
      {
        bench: B,
        metric: "small_bare_hop_cpu_per_request",
        value: perRequest(cpuMs(bare.pid) - cpu0.bare),
        unit: "ms",
      },
    );
    log(`1 MiB bodies, ${Math.ceil(n / 10)} rounds`);
    results.push(...overhead("mib", await rounds(targets, "/large", Math.ceil(n / 10), LARGE)));
    log(`streamed answers, ${Math.ceil(n / 4)} rounds`);
    results.push(...overhead("stream", await rounds(targets, "/stream", Math.ceil(n / 4))));
    results.push(...(await chainedBench(n, upstreamPort, standIn)));

    // The memory figures on a fresh Custodian: the latency rounds above grew its heap.
    await custodian.stop();
    custodian = await runCustodian(upstreamPort, standIn);
    const fresh = proxied(custodian.port);
    const idle = custodian.rss();
    log("100 concurrent streams (2 s each)");
    const streams = Promise.all(Array.from({ length: 100 }, () => timed(fresh, "/slow")));
    const peak100 = await peakDuring(custodian.rss, streams);

    log("a 100 MiB streamed answer");
    const huge = await hugeAnswer(fresh, custodian.rss);
    // The heap settles over the first tens of MiB; flat is no growth over the second half.
    const drift = Math.max(...huge.samples.slice(4)) - huge.samples[4];
    results.push(
      // No target on RSS: the budget is footprint's custodian_idle_private (decision 0052).
      { bench: B, metric: "rss_idle", value: round(idle), unit: "MiB" },
      { bench: B, metric: "rss_100_streams_peak", value: round(peak100), unit: "MiB" },
      { bench: B, metric: "rss_100mib_at_10mib", value: round(huge.samples[0]), unit: "MiB" },
      { bench: B, metric: "rss_100mib_at_50mib", value: round(huge.samples[4]), unit: "MiB" },
      { bench: B, metric: "rss_100mib_at_100mib", value: round(huge.samples[9]), unit: "MiB" },
      { bench: B, metric: "rss_100mib_growth_50_to_100mib", value: round(drift), unit: "MiB", target: "flat (< 8)" },
      { bench: B, metric: "throughput_100mib", value: round(100 / huge.seconds), unit: "MiB/s" },
    );
  } finally {
    await Promise.all(pools.map((p) => p.close()));
    await custodian.stop();
    bare.stop();
    upstream.close();
    upstream.closeAllConnections();
  }
  return results;
}
