// Benchmark: what the egress point adds (docs/decisions/0051). The proxy (egress/proxy.ts) runs in
// this process with its index fed as its watches would feed it (one Sandbox, its pod at 127.0.0.7;
// the base list names the local echo and web servers); clients connect from 127.0.0.7. Figures:
//   - per connection: a fresh CONNECT + one 32-byte echo round trip, p50 and p99, through the
//     egress point and directly in the same run, and their ratio;
//   - per request: a fresh absolute-form GET through it and a direct GET, likewise;
//   - CPU ms per 1,000 proxied connections (this process's CPU for the proxied run minus the
//     direct run's: the clients and the echo server cost the same in both);
//   - heap per 1,000 open tunnels (heap with 1,000 held open through it minus 1,000 held directly);
//   - heap per 1,000 Sandboxes in the index (each with 5 rules, one git remote and one pod).
//   BENCH_EGRESS_CONNECTIONS=1000 (default)
import { once } from "node:events";
import { createServer as httpServer, request, type Server as HttpServer } from "node:http";
import { connect, createServer, type AddressInfo, type Server, type Socket } from "node:net";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { baseListOf } from "../api/egress-point";
import { EgressIndex } from "../egress/index";
import { SandboxLimits } from "../egress/limits";
import { EgressProxy } from "../egress/proxy";
import { EgressRecord } from "../egress/record";
import type { Result } from "./sandbox-burst-bench";
import { percentile, round, sorted } from "./stats";

const B = "egress";
const SOURCE = "127.0.0.7";
const log = (line: string) => process.stderr.write(`egress: ${line}\n`);
const PAYLOAD = Buffer.alloc(32, "e");

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;
const heapUsed = () => {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
};

const listen = async <T extends Server | HttpServer>(s: T): Promise<number> => {
  s.listen(0, "127.0.0.1");
  await once(s, "listening");
  return (s.address() as AddressInfo).port;
};

/** Reads until the end of an HTTP head; resolves with the status. */
function readHead(socket: Socket): Promise<number> {
  return new Promise((resolve, reject) => {
    let buf = "";
    const onData = (c: Buffer) => {
      buf += c.toString("latin1");
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.off("data", onData);
      socket.off("error", reject);
      if (buf.length > end + 4) socket.unshift(Buffer.from(buf.slice(end + 4), "latin1"));
      resolve(Number(buf.split(" ")[1]));
    };
    socket.on("data", onData).on("error", reject);
  });
}

async function openTunnel(proxyPort: number, target: string): Promise<Socket> {
  const s = connect({ host: "127.0.0.1", port: proxyPort, localAddress: SOURCE });
  s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  const status = await readHead(s);
  if (status !== 200) throw new Error(`CONNECT ${target}: ${status}`);
  return s;
}

async function openDirect(port: number): Promise<Socket> {
  const s = connect({ host: "127.0.0.1", port, localAddress: SOURCE });
  await once(s, "connect");
  return s;
}

async function echoOnce(s: Socket): Promise<void> {
  s.write(PAYLOAD);
  let got = 0;
  while (got < PAYLOAD.length) got += ((await once(s, "data")) as [Buffer])[0].length;
  s.destroy();
}

function get(port: number, path: string, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path, localAddress: SOURCE, agent: false, headers: { host } },
      (res) => {
        res.resume();
        res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`GET ${path}: ${res.statusCode}`))));
      },
    );
    req.on("error", reject).end();
  });
}

async function timed(n: number, f: () => Promise<void>): Promise<{ ms: number[]; cpuMs: number }> {
  const ms: number[] = [];
  const cpu = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await f();
    ms.push(performance.now() - t);
  }
  const used = process.cpuUsage(cpu);
  return { ms: sorted(ms), cpuMs: (used.user + used.system) / 1000 };
}

export async function egressBench(): Promise<Result[]> {
  const n = Number(process.env.BENCH_EGRESS_CONNECTIONS ?? 1000);
  const echo = createServer((s) => s.on("error", () => undefined).pipe(s));
  const web = httpServer((_req, res) => res.end("ok"));
  const echoPort = await listen(echo);
  const webPort = await listen(web);
  const base = baseListOf({ egress: { allow: [`localhost:${echoPort}`, `localhost:${webPort}`] } });
  const index = new EgressIndex(base);
  index.onSandbox({ metadata: { name: "bench", namespace: "bench", uid: "u" }, spec: {} }, false);
  index.onPod(
    {
      metadata: {
        uid: "p",
        namespace: "bench",
        labels: { "app.kubernetes.io/managed-by": "jr2-operator", "sandbox.jr2.dev/name": "bench" },
      },
      status: { phase: "Running", podIP: SOURCE },
    },
    false,
  );
  const record = new EgressRecord({ logEntries: 500, writeEvent: async () => undefined, log: () => undefined });
  const limits = new SandboxLimits({ maxConnections: 1_000_000, connectRate: 1_000_000, connectBurst: 1_000_000 });
  const proxy = new EgressProxy({ index, record, limits, connectTimeoutMs: 5_000 });
  const proxyPort = await proxy.listen(0, "127.0.0.1");
  const out: Result[] = [];
  const figure = (metric: string, value: number, unit: string) =>
    out.push({ bench: B, metric, value: round(value), unit });

  try {
    // Warm both paths (JIT, the resolver's first answer).
    for (let i = 0; i < 50; i++) {
      await echoOnce(await openDirect(echoPort));
      await echoOnce(await openTunnel(proxyPort, `localhost:${echoPort}`));
    }
    log(`${n} connections each way`);
    const direct = await timed(n, async () => echoOnce(await openDirect(echoPort)));
    const via = await timed(n, async () => echoOnce(await openTunnel(proxyPort, `localhost:${echoPort}`)));
    const p50 = (t: { ms: number[] }) => percentile(t.ms, 50);
    const p99 = (t: { ms: number[] }) => percentile(t.ms, 99);
    figure("connect_echo_direct_p50", p50(direct), "ms");
    figure("connect_echo_direct_p99", p99(direct), "ms");
    figure("connect_echo_egress_p50", p50(via), "ms");
    figure("connect_echo_egress_p99", p99(via), "ms");
    figure("connect_echo_ratio_p50", p50(via) / p50(direct), "x");
    figure("cpu_per_1000_connections", ((via.cpuMs - direct.cpuMs) * 1000) / n, "ms");

    log(`${n} requests each way`);
    const getDirect = await timed(n, () => get(webPort, "/x", `localhost:${webPort}`));
    const getVia = await timed(n, () => get(proxyPort, `http://localhost:${webPort}/x`, `localhost:${webPort}`));
    figure("get_direct_p50", p50(getDirect), "ms");
    figure("get_egress_p50", p50(getVia), "ms");
    figure("get_egress_p99", p99(getVia), "ms");
    figure("get_ratio_p50", p50(getVia) / p50(getDirect), "x");

    log("heap of 1000 open tunnels");
    const held = async (open: () => Promise<Socket>) => {
      const before = heapUsed();
      const socks: Socket[] = [];
      for (let i = 0; i < 1000; i++) socks.push(await open());
      const after = heapUsed();
      socks.forEach((s) => s.destroy());
      await new Promise((r) => setTimeout(r, 200));
      return after - before;
    };
    const heldDirect = await held(() => openDirect(echoPort));
    const heldVia = await held(() => openTunnel(proxyPort, `localhost:${echoPort}`));
    figure("heap_per_1000_open_tunnels", (heldVia - heldDirect) / 2 ** 20, "MiB");
  } finally {
    await proxy.close();
    echo.close();
    web.close();
  }

  log("heap of 1000 Sandboxes in the index");
  const big = new EgressIndex(base);
  const before = heapUsed();
  for (let i = 0; i < 1000; i++) {
    big.onSandbox(
      {
        metadata: { name: `s${i}`, namespace: "bench", uid: `u${i}` },
        spec: {
          egress: {
            allow: [
              `api${i}.example.com:443`,
              "*.pkg.example.org",
              "registry.example:443",
              `h${i}.example`,
              "203.0.113.9",
            ],
          },
          repos: [{ url: `https://github.com/org/repo${i}.git` }],
        },
      },
      false,
    );
    big.onPod(
      {
        metadata: {
          uid: `p${i}`,
          namespace: "bench",
          labels: { "app.kubernetes.io/managed-by": "jr2-operator", "sandbox.jr2.dev/name": `s${i}` },
        },
        status: { phase: "Running", podIP: `10.${(i >> 8) & 255}.${i & 255}.1` },
      },
      false,
    );
  }
  figure("heap_per_1000_sandboxes_indexed", (heapUsed() - before) / 2 ** 20, "MiB");
  if (big.sizes.sandboxes !== 1000) throw new Error("the index lost Sandboxes");
  return out;
}
