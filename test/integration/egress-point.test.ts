// The egress point as a process (the built dist/companions/egress.js, docs/decisions/0051) against
// the real API server: two Sandboxes in an opted-in namespace, their pods (the operator's, left
// unscheduled by a nodeSelector no node matches, so no kubelet or kwok owns their status) given
// loopback addresses as a kubelet would write them (127.0.0.7 and 127.0.0.8), and connections made
// FROM those addresses. What it must do: pass a base-list host, refuse a workspace rule that
// reaches an internal address, refuse an unlisted host (logged, counted, one Event for three
// refusals), take a spec.egress.allow patch on its watch event without a restart, never apply one
// Sandbox's list to another, refuse an unknown source, and cap one Sandbox's open connections.
// Decision 0076: never open a Sandbox's own rule outside the installation's egress ceiling.
// Decision 0068: hold the installation's cluster ranges internal (its pod config's word), forget a
// pod's address as it starts terminating, and correct a stalled watch within seconds. Its API
// connections go through a forwarder here, so a test can stall them (the TCP connections stay open,
// nothing is delivered) without touching the shared API server.
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request, createServer as httpServer } from "node:http";
import { createServer, connect, type AddressInfo, type Server, type Socket } from "node:net";
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { SandboxModel } from "../../api/crd";
import { EGRESS_HEADER, EGRESS_REFUSED_REASON, egressLogPath, type EgressLogEntry } from "../../api/egress-point";
import { SANDBOX_NAMESPACE_ENABLED, SANDBOX_NAMESPACE_LABEL } from "../../api/wire";
import { clusterEnv } from "../../scripts/images/main";
import { freePort as localPort } from "../../dev/local-orchestrator";
import { createSandbox, eventsFor, listPods, useNamespace, waitFor } from "./support/cluster";

const ROOT = join(__dirname, "..", "..");
const ns = useNamespace("egress");
const A = { name: "egress-a", ip: "127.0.0.7" };
const B = { name: "egress-b", ip: "127.0.0.8" };
const STRANGER = "127.0.0.9";
/** Terminated (a finalizer holds its pod) and deleted under a stalled watch, in that order. */
const C = { name: "egress-c", ip: "127.0.0.10" };
const D = { name: "egress-d", ip: "127.0.0.11" };
/** The stand-in public host's other address (a documentation address, dev/cluster/node.sh), which
 * this installation calls public, and a neighbour it names as its cluster's range. */
const PUBLIC_TEST = clusterEnv().JR2_PUBLIC_OTHER_IP || "198.51.100.11";
const CLUSTER_RANGE_IP = "198.51.100.12";
const HOLD = "test.jr2.dev/hold";
const CAP = 3;
const tmp = mkdtempSync(join(tmpdir(), "jr2-egress-"));

let echo: Server;
let web: ReturnType<typeof httpServer>;
let echoPort: number;
let webPort: number;
let otherPort: number;
let proxyPort: number;
let adminPort: number;
let child: ChildProcess | undefined;
let output = "";

/**
 * A TCP forwarder to the API server: the egress point's every API connection goes through it.
 * `stall()` stops delivering on the connections open now (they stay open: a watch that hears
 * nothing and no error), while new connections pass; `resume()` delivers again.
 */
function apiForwarder(target: { host: string; port: number }) {
  const pairs = new Set<[Socket, Socket]>();
  let stalled: Array<[Socket, Socket]> = [];
  const server = createServer((down) => {
    const up = connect(target);
    const pair: [Socket, Socket] = [down, up];
    pairs.add(pair);
    const end = () => {
      pairs.delete(pair);
      down.destroy();
      up.destroy();
    };
    down.on("error", end).on("close", end);
    up.on("error", end).on("close", end);
    down.pipe(up);
    up.pipe(down);
  });
  return {
    server,
    stall() {
      stalled = [...pairs];
      for (const [down, up] of stalled) {
        down.unpipe(up);
        up.unpipe(down);
        down.pause();
        up.pause();
      }
      return stalled.length;
    },
    resume() {
      for (const [down, up] of stalled) {
        down.pipe(up);
        up.pipe(down);
      }
      stalled = [];
    },
  };
}
let forwarder: ReturnType<typeof apiForwarder> | undefined;

const freePort = () => localPort("127.0.0.1");

type Answer = { status: number; headers: Record<string, string>; body: string; socket: Socket };

/** CONNECT host:port from `source`; resolves with the answer's head and body, the socket left open on a 200. */
function connectVia(source: string, target: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port: proxyPort, localAddress: source });
    let buf = Buffer.alloc(0);
    socket.on("error", reject);
    socket.on("data", function onData(chunk: Buffer) {
      buf = Buffer.concat([buf, chunk]);
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const [statusLine, ...lines] = buf.subarray(0, end).toString().split("\r\n");
      const headers = Object.fromEntries(
        lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]),
      );
      const status = Number(statusLine.split(" ")[1]);
      const length = Number(headers["content-length"] ?? 0);
      const rest = buf.subarray(end + 4);
      if (status !== 200 && rest.length < length) return;
      socket.off("data", onData);
      resolve({ status, headers, body: rest.toString(), socket });
    });
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  });
}

/** Through an open tunnel to the echo server: what goes out comes back. */
async function echoes(socket: Socket, text: string): Promise<string> {
  socket.write(text);
  const [chunk] = (await once(socket, "data")) as [Buffer];
  return chunk.toString();
}

const admin = async (path: string) => {
  const res = await fetch(`http://127.0.0.1:${adminPort}${path}`);
  return { status: res.status, text: await res.text() };
};
const logOf = async (name: string) =>
  (JSON.parse((await admin(egressLogPath(ns.name, name))).text) as { entries: EgressLogEntry[] }).entries;

async function podOf(sandbox: string) {
  const pods = await waitFor(
    `the operator's pod of Sandbox ${sandbox}`,
    () => listPods(ns.name, sandbox),
    (p) => p.length === 1,
  );
  return pods[0];
}

/** Plays the kubelet's one write the egress point reads: the pod's address. */
async function givePodIP(sandbox: string, ip: string) {
  const pod = await podOf(sandbox);
  await K8s(kind.Pod).PatchStatus({
    metadata: { name: pod.metadata!.name!, namespace: ns.name },
    status: { podIP: ip, podIPs: [{ ip }] },
  });
}

beforeAll(async () => {
  echo = createServer((s) => s.pipe(s)).listen(0, "127.0.0.1");
  await once(echo, "listening");
  echoPort = (echo.address() as AddressInfo).port;
  web = httpServer((req, res) => res.writeHead(200, { "content-type": "text/plain" }).end(`hello ${req.url}`)).listen(
    0,
    "127.0.0.1",
  );
  await once(web, "listening");
  webPort = (web.address() as AddressInfo).port;
  otherPort = await freePort();
  proxyPort = await freePort();
  adminPort = await freePort();

  // Opted in, as the installation's manifests label it.
  await K8s(kind.Namespace).Apply(
    { metadata: { name: ns.name, labels: { [SANDBOX_NAMESPACE_LABEL]: SANDBOX_NAMESPACE_ENABLED } } },
    { force: true },
  );
  // Placed where no node is: the pod stays unscheduled, its status ours to write.
  const spec = { nodeSelector: { "jr2.dev/egress-test": "nowhere" } };
  for (const x of [A, B, C, D]) await createSandbox(ns.name, x.name, spec);
  for (const x of [A, B, C, D]) await givePodIP(x.name, x.ip);

  // The installation vouches for localhost on two ports (exact rules); a workspace rule never reaches
  // it. It calls the stand-in's documentation /24 public, as a test installation may, and names
  // one address in it as its cluster's range, which stays internal.
  const podConfig = join(tmp, "pod.yaml");
  writeFileSync(
    podConfig,
    JSON.stringify({
      egress: {
        allow: [`localhost:${echoPort}`, `localhost:${webPort}`],
        publicTestRanges: ["198.51.100.0/24"],
        clusterRanges: [`${CLUSTER_RANGE_IP}/32`],
        // The ceiling (decision 0076): every workspace rule the tests name, and nothing else.
        ceiling: ["localhost", "127.0.0.1", PUBLIC_TEST, CLUSTER_RANGE_IP, "198.18.0.1"],
      },
    }),
  );
  // The egress point's kubeconfig: this cluster's, through the forwarder.
  const kubeconfig = readFileSync(process.env.KUBECONFIG!, "utf8");
  const server = /server: https:\/\/([^:\s]+):([0-9]+)/.exec(kubeconfig);
  if (!server) throw new Error(`${process.env.KUBECONFIG} names no https server with a port`);
  forwarder = apiForwarder({ host: server[1], port: Number(server[2]) });
  forwarder.server.listen(0, "127.0.0.1");
  await once(forwarder.server, "listening");
  const forwardedConfig = join(tmp, "kubeconfig");
  writeFileSync(
    forwardedConfig,
    kubeconfig.replace(server[0], `server: https://${server[1]}:${(forwarder.server.address() as AddressInfo).port}`),
  );
  child = spawn(process.execPath, [join(ROOT, "dist", "companions", "egress.js")], {
    cwd: ROOT,
    env: {
      ...process.env,
      KUBECONFIG: forwardedConfig,
      JR2_EGRESS_RELIST_INTERVAL: "2s",
      JR2_SANDBOX_NAMESPACES: ns.name,
      JR2_POD_CONFIG_FILE: podConfig,
      JR2_EGRESS_PROXY_PORT: String(proxyPort),
      JR2_EGRESS_ADMIN_PORT: String(adminPort),
      JR2_LISTEN_HOST: "127.0.0.1",
      JR2_EGRESS_MAX_CONNECTIONS: String(CAP),
      // Short: the documentation address below may swallow a connect, and the answer waits for it.
      JR2_EGRESS_CONNECT_TIMEOUT: "300ms",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (output += c.toString()));
  await waitFor(
    "the egress point ready",
    () => admin("/readyz").catch(() => ({ status: 0, text: "" })),
    (r) => r.status === 200,
  ).catch((err: Error) => {
    throw new Error(`${err.message}; its output: ${output.slice(-2000)}`);
  });
  // Both pods' addresses in its index before a test asks.
  await waitFor(
    "both Sandbox pods in the index",
    () => admin("/metrics"),
    (r) => /jr2_egress_pods 4\b/.test(r.text) && /jr2_egress_sandboxes 4\b/.test(r.text),
  );
}, 120_000);

afterAll(async () => {
  forwarder?.resume();
  // The held pod's finalizer, so its namespace can go.
  await K8s(kind.Pod)
    .InNamespace(ns.name)
    .WithLabel("sandbox.jr2.dev/name", C.name)
    .Get()
    .then(({ items }) =>
      Promise.all(
        items.map((p) =>
          K8s(kind.Pod, { namespace: ns.name, name: p.metadata!.name! }).Patch([
            { op: "remove", path: "/metadata/finalizers" },
          ]),
        ),
      ),
    )
    .catch(() => undefined);
  if (child && child.exitCode === null) {
    child.kill("SIGTERM");
    await once(child, "exit");
  }
  echo?.close();
  web?.close();
  forwarder?.server.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe("the egress point", () => {
  it("passes a base-list host through CONNECT and an absolute-form GET, and logs the bytes", async () => {
    const a = await connectVia(A.ip, `localhost:${echoPort}`);
    expect(a.status).toBe(200);
    expect(await echoes(a.socket, "ping")).toBe("ping");
    a.socket.end();
    await once(a.socket, "close");

    const got = await new Promise<{ status: number; body: string; header?: string }>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port: proxyPort,
          localAddress: A.ip,
          path: `http://localhost:${webPort}/page?q=1`,
          headers: { host: `localhost:${webPort}` },
        },
        (res) => {
          let body = "";
          res.on("data", (c) => (body += c));
          res.on("end", () => resolve({ status: res.statusCode!, body, header: res.headers[EGRESS_HEADER] as string }));
        },
      );
      req.on("error", reject);
      req.end();
    });
    expect(got).toEqual({ status: 200, body: "hello /page?q=1", header: undefined });

    const entries = await waitFor(
      "both allowed entries in A's log",
      () => logOf(A.name),
      (e) => e.filter((x) => x.decision === "allowed").length >= 2,
    );
    const tunnel = entries.find((e) => e.port === echoPort)!;
    expect(tunnel).toMatchObject({ host: "localhost", decision: "allowed", bytesOut: 4, bytesIn: 4 });
    // No path, no header: host, port, decision, bytes, time, duration.
    expect(JSON.stringify(entries)).not.toContain("/page");
  });

  it("refuses a workspace rule that reaches an internal address, name or literal", async () => {
    await K8s(SandboxModel, { namespace: ns.name, name: A.name }).Patch([
      { op: "add", path: "/spec/egress", value: { allow: [`localhost:${otherPort}`, `127.0.0.1:${otherPort}`] } },
    ]);
    const stored = await K8s(SandboxModel).InNamespace(ns.name).Get(A.name);
    expect((stored.spec as { egress?: { allow?: string[] } }).egress?.allow).toEqual([
      `localhost:${otherPort}`,
      `127.0.0.1:${otherPort}`,
    ]);
    for (const target of [`localhost:${otherPort}`, `127.0.0.1:${otherPort}`]) {
      const r = await waitFor(
        `${target} judged internal (the patch in force)`,
        () => connectVia(A.ip, target),
        (x) => x.body.includes("internal address"),
        5_000,
      );
      expect(r.status).toBe(403);
      expect(r.headers[EGRESS_HEADER]).toBe("refused");
      expect(JSON.parse(r.body).error.code).toBe("egress_refused");
    }
    expect((await logOf(A.name)).filter((e) => e.reason === "internal").length).toBeGreaterThanOrEqual(2);
  });

  it("refuses an unlisted host with the fix, logs and counts each refusal, and says it once as an Event", async () => {
    for (let i = 0; i < 3; i++) {
      const r = await connectVia(A.ip, "unlisted.example.com:443");
      expect(r.status).toBe(403);
      expect(r.headers[EGRESS_HEADER]).toBe("refused");
      expect(JSON.parse(r.body)).toEqual({
        error: {
          code: "egress_refused",
          message:
            `unlisted.example.com:443 is not in Sandbox ${ns.name}/${A.name}'s egress list: add it to the workspace's ` +
            `egress list (PUT /v1/workspaces/${A.name}/egress) or to spec.egress.allow`,
        },
      });
    }
    const refused = (await logOf(A.name)).filter((e) => e.host === "unlisted.example.com");
    expect(refused.map((e) => [e.decision, e.reason, e.port])).toEqual(Array(3).fill(["refused", "not_listed", 443]));
    const metrics = await waitFor(
      "the Event written",
      () => admin("/metrics"),
      (m) => /jr2_egress_events_total [1-9]/.test(m.text),
    );
    expect(metrics.text).toMatch(/jr2_egress_connections_total\{decision="refused",reason="not_listed"\} 3\b/);
    const events = (await eventsFor(ns.name, A.name)).filter((e) => e.reason === EGRESS_REFUSED_REASON);
    const unlisted = events.filter((e) => e.message?.includes("unlisted.example.com:443"));
    expect(unlisted).toHaveLength(1);
    expect(unlisted[0]).toMatchObject({ type: "Warning", involvedObject: { kind: "Sandbox", name: A.name } });
  });

  it("takes a spec.egress.allow patch on its watch event, for that Sandbox alone", async () => {
    // A public address, so a workspace rule may name it: the stand-in public host's (a documentation
    // address the local cluster routes to a namespace of this machine, dev/cluster/node.sh), where
    // nothing listens on :80 in this tier, so a connect is refused at once and nothing leaves this
    // machine. Passing the list shows as `unreachable` (or a 200), never `refused`.
    const ip = PUBLIC_TEST;
    const target = `${ip}:80`;
    const before = await connectVia(A.ip, target);
    expect([before.status, before.headers[EGRESS_HEADER]]).toEqual([403, "refused"]);
    await K8s(SandboxModel, { namespace: ns.name, name: A.name }).Patch([
      { op: "replace", path: "/spec/egress/allow", value: [target] },
    ]);
    const after = await waitFor(
      "A's patched list in force",
      () => connectVia(A.ip, target),
      (r) => r.headers[EGRESS_HEADER] !== "refused",
      // A deadline, not a measurement (decision 0050): the test proves the patch takes effect with
      // nothing restarted; how fast is no test's to time on shared cores.
      15_000,
    );
    expect([200, 502]).toContain(after.status);
    after.socket.destroy();
    // An entry is written when its connection ends, which the destroy above may not have reached yet.
    const log = await waitFor(
      "A's log records the attempt the new list passed",
      () => logOf(A.name),
      (entries) => entries.filter((e) => e.host === ip).at(-1)?.decision !== "refused",
    );
    expect(log.filter((e) => e.host === ip).at(-1)?.decision).toMatch(/^(allowed|unreachable)$/);
    // B's list is B's: the same target stays refused for it.
    const b = await connectVia(B.ip, target);
    expect([b.status, b.headers[EGRESS_HEADER], JSON.parse(b.body).error.message]).toEqual([
      403,
      "refused",
      expect.stringContaining(`Sandbox ${ns.name}/${B.name}'s egress list`),
    ]);
  });

  it("refuses a source that is no Sandbox pod's address", async () => {
    const r = await connectVia(STRANGER, `localhost:${echoPort}`);
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).error.code).toBe("not_a_sandbox");
    expect((await admin(egressLogPath(ns.name, "no-such-sandbox"))).status).toBe(404);
  });

  it(`refuses a Sandbox's connection past its cap of ${CAP} open, and only that Sandbox's`, async () => {
    const open: Socket[] = [];
    try {
      for (let i = 0; i < CAP; i++) {
        const r = await connectVia(A.ip, `localhost:${echoPort}`);
        expect(r.status).toBe(200);
        open.push(r.socket);
      }
      const over = await connectVia(A.ip, `localhost:${echoPort}`);
      expect([over.status, over.headers[EGRESS_HEADER], JSON.parse(over.body).error.code]).toEqual([
        429,
        "refused",
        "egress_limit",
      ]);
      const b = await connectVia(B.ip, `localhost:${echoPort}`);
      expect(b.status).toBe(200);
      b.socket.destroy();
      expect((await logOf(A.name)).some((e) => e.reason === "limit")).toBe(true);
    } finally {
      open.forEach((s) => s.destroy());
    }
  });

  // Decision 0068: the installation's word on addresses reaches the egress point through its pod config.
  it("refuses a workspace rule to the installation's cluster range and to a benchmarking address, as internal", async () => {
    const targets = [`${CLUSTER_RANGE_IP}:80`, "198.18.0.1:80"];
    await K8s(SandboxModel, { namespace: ns.name, name: B.name }).Patch([
      { op: "add", path: "/spec/egress", value: { allow: targets } },
    ]);
    for (const target of targets) {
      const r = await waitFor(
        `${target} judged internal (the patch in force)`,
        () => connectVia(B.ip, target),
        (x) => x.body.includes("internal address"),
        15_000,
      );
      expect([r.status, r.headers[EGRESS_HEADER], JSON.parse(r.body).error.code]).toEqual([
        403,
        "refused",
        "egress_refused",
      ]);
    }
    const internal = (await logOf(B.name)).filter((e) => e.reason === "internal").map((e) => e.host);
    expect(internal).toEqual(expect.arrayContaining([CLUSTER_RANGE_IP, "198.18.0.1"]));
  });

  // Decision 0076: the ceiling holds for a Sandbox written directly, past the Orchestrator's check.
  it("never opens a Sandbox's own rule outside the installation's egress ceiling; one within it passes", async () => {
    // A public address of the same test range, outside the ceiling: it would pass the list otherwise.
    const outside = "198.51.100.13:80";
    const within = `${PUBLIC_TEST}:80`;
    await K8s(SandboxModel, { namespace: ns.name, name: B.name }).Patch([
      { op: "add", path: "/spec/egress", value: { allow: [outside, within] } },
    ]);
    const passed = await waitFor(
      "B's list with the rule within the ceiling in force",
      () => connectVia(B.ip, within),
      (r) => r.headers[EGRESS_HEADER] !== "refused",
      15_000,
    );
    passed.socket.destroy();
    const r = await connectVia(B.ip, outside);
    expect([r.status, r.headers[EGRESS_HEADER], JSON.parse(r.body).error.code]).toEqual([
      403,
      "refused",
      "egress_refused",
    ]);
    const last = (await logOf(B.name)).filter((e) => e.host === "198.51.100.13").at(-1);
    expect([last?.decision, last?.reason]).toEqual(["refused", "not_listed"]);
    expect(output).toMatch(
      /spec\.egress\.allow\[0\]: \\"198\.51\.100\.13:80\\" is outside the installation's egress ceiling/,
    );
  });

  // Decision 0068: the network plugin frees a pod's address at teardown, before the pod object goes.
  it("forgets a pod's address as soon as it is terminating, while the pod is still there", async () => {
    const before = await connectVia(C.ip, `localhost:${echoPort}`);
    before.socket.destroy();
    expect(before.status).toBe(200);
    const pod = await podOf(C.name);
    const name = pod.metadata!.name!;
    await K8s(kind.Pod, { namespace: ns.name, name }).Patch([
      { op: "add", path: "/metadata/finalizers", value: [HOLD] },
    ]);
    await K8s(kind.Pod).InNamespace(ns.name).Delete(name);
    const held = await K8s(kind.Pod).InNamespace(ns.name).Get(name);
    expect(held.metadata?.deletionTimestamp).toBeTruthy();
    const r = await waitFor(
      `${C.ip} no longer the address of Sandbox ${C.name}'s terminating pod`,
      async () => {
        const x = await connectVia(C.ip, `localhost:${echoPort}`);
        x.socket.destroy();
        return x;
      },
      (x) => x.status === 403,
      10_000,
    );
    expect([r.status, JSON.parse(r.body).error.code]).toEqual([403, "not_a_sandbox"]);
    // Still there, held by its finalizer: it was the terminating, not the deletion, that counted.
    expect((await K8s(kind.Pod).InNamespace(ns.name).Get(name)).metadata?.deletionTimestamp).toBeTruthy();
  });

  // Decision 0068: a watch that hears nothing (its connection open, nothing delivered) is corrected
  // by the relist (JR2_EGRESS_RELIST_INTERVAL, 2s here) within seconds, not the library's ten minutes.
  it("forgets a deleted pod's address within seconds while its watch is stalled", async () => {
    const before = await connectVia(D.ip, `localhost:${echoPort}`);
    before.socket.destroy();
    expect(before.status).toBe(200);
    const name = (await podOf(D.name)).metadata!.name!;
    expect(forwarder!.stall()).toBeGreaterThan(0);
    try {
      // Unscheduled, so gone at once: a DELETED event its stalled watch does not deliver.
      await K8s(kind.Pod).InNamespace(ns.name).Delete(name);
      await waitFor(
        `pod ${name} gone`,
        () => listPods(ns.name, D.name),
        (p) => !p.some((x) => x.metadata?.name === name),
      );
      const r = await waitFor(
        `${D.ip} forgotten with its watch stalled`,
        async () => {
          const x = await connectVia(D.ip, `localhost:${echoPort}`);
          // Each attempt closed at once: D's cap of open connections is not what answers.
          x.socket.destroy();
          return x;
        },
        (x) => x.status === 403,
        // A deadline, not a measurement: the relist runs every 2-3 s here.
        15_000,
      );
      r.socket.destroy();
      expect([r.status, JSON.parse(r.body).error.code]).toEqual([403, "not_a_sandbox"]);
      const metrics = await admin("/metrics");
      expect(metrics.text).toMatch(/jr2_egress_watch_corrections_total [1-9]/);
    } finally {
      forwarder!.resume();
    }
  });
});
