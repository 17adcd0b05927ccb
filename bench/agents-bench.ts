// Benchmark: an Agent's turn end to end (decision 0025's figures), on the local control plane
// in local mode: the real module, the Orchestrator (its bundle, a process), and per workspace the
// real Harness and Custodian processes it starts; the model is the scripted one (dev/scripted-model.ts)
// answering at once, reached through the Custodian's provider route with the held key, as in
// test/integration/agent-turns.test.ts.
//
// A step is one model answer that calls one tool, and that tool run: an S-step turn (BENCH_AGENT_STEPS,
// default 20) is S answers each calling `read` on a 12-byte file in /work, then a final text answer
// (S + 1 model requests). `read` is the cheapest working tool (no process, unlike bash), so a step's
// time is the loop's and not the tool's. Each turn carries a Menu of one pick (`propose`, allowed,
// never called), as a Machine's turn does, so each step boundary also reads the turn's Allowed picks
// from the Orchestrator through the Custodian (decision 0025).
//
// The model. The scripted model plays its script per conversation (S `read` calls, then "done"), so
// every concurrent turn plays the whole of it. In front of it, as the installation's one provider, a
// small router on loopback stamps each request when it arrives and each answer when its last byte is
// handed to the socket, by turn: the turn's message carries a tag (`agent-bench:<tag>`) the router
// finds in the request's first user message. Its hop to the scripted model happens between those two
// stamps, inside the model's own answering time, so it is in none of the figures below.
//
// Each workspace has one Repo Slot (a one-commit repository, its caches kept by a cache agent per
// node): its attach starts the pod's Harness and Custodian when the workspace is created, so ready
// means both run (without a slot they would start at the first turn, and the turns would time
// process start-up).
//
// 1. One workspace, warm (BENCH_AGENT_WARMUP turns first, default 2, not counted), then
//    BENCH_AGENT_REPEATS turns (default 10) one after another, each on a new conversation:
//    - step overhead (the headline, against the 20 ms target): per step, from the model's answer
//      sent to the next model request arriving: pi parsing the streamed answer, the tool run, the
//      Harness's events written, the next request built, and both hops through the Custodian (the
//      Custodian's swap of the Stand-in for the key included). p50/p99 over REPEATS × S steps.
//    - Machine → model: the Machine's POST .../turns sent to the turn's first model request arriving
//      (Machine → Orchestrator (ledger written) → Harness admission → pi → Custodian → model).
//    - model → Machine: the turn's last answer sent to the Machine reading the turn's `end` on the
//      Orchestrator's Server-Sent Events (Custodian → Harness (end written) → the Orchestrator's
//      long-poll of the Harness's stream → SSE). p50/p99 over the REPEATS turns.
// 2. N workspaces (BENCH_AGENT_WORKSPACES, default 50) created at once (ready: the time to all ready,
//    and the Orchestrator's event-loop delay meanwhile, which in local mode includes its spawning of
//    2N processes), then two bursts, each one S-step turn in every workspace, all submitted at once:
//    `cold_`, each workspace's first turn (its Harness loads pi then, as a new workspace's does), and
//    `warm_`, a second one on a new conversation. Per burst: turns completed and failed, the Machine's
//    stream resumes (a stream that fails is resumed after its last event, as the client's contract
//    says; counted, not hidden), wall time (first submit to last `end`), the three figures of 1
//    under that load, and the Orchestrator's event-loop delay p99 and max (from its /metrics: the
//    window starts at a scrape, which resets it, orchestrator/orchestrator-metrics.ts) against the 100 ms target.
//    Beside it, to say where the time goes: the same delay in an idle node process (the machine's
//    floor: a process that only waits for a core) and in this one (which plays the Machines and the
//    model, so its lateness inflates the step figures); the CPU seconds used by the Orchestrator,
//    the Harnesses, the Custodians and this process, and how busy the machine was; the Orchestrator's
//    main thread's time on a core and its time runnable but waiting for one (schedstat); the peak RSS
//    sampled (every 250 ms) of the Orchestrator and of the sums over the Harnesses and Custodians.
//    After both: each process's own peak (VmHWM) for the Orchestrator, and p50, max and sum over
//    the Harnesses and the Custodians.
// Afterwards every workspace is destroyed, the Orchestrator stopped, and every Harness and Custodian
// it started is checked gone (`leftover_processes`; any still there is then ended by its pid).
//
// Local mode puts all of it on this machine: 2N pod processes, the Orchestrator, the control plane
// and this process on its cores. Local mode runs each pod's processes at the lowest priority, their
// autogroups too (orchestrator/local/local-process.ts), as a cluster keeps Sandboxes off the
// Orchestrator's cores; before it did, the Orchestrator got about one pod's share under the bursts.
// BENCH_AGENT_CPU_PROF=<dir> writes a V8 CPU profile of the Orchestrator there, and with
// BENCH_AGENT_CPU_PROF_HARNESS=1 of each Harness too (sampled every 0.5 ms: slower figures; for
// finding where time goes, not for the figures).
//   BENCH_AGENT_WORKSPACES=50  BENCH_AGENT_STEPS=20  BENCH_AGENT_REPEATS=10  BENCH_AGENT_WARMUP=2
//   BENCH_AGENT_CPU_PROF  BENCH_AGENT_CPU_PROF_HARNESS   (unset)
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { K8s, kind } from "kubernetes-fluent-client";
import { ORCHESTRATOR_ENV } from "../api/env";
import type { WorkspaceView } from "../api/orchestrator-schemas";
import { OrchestratorClient } from "../clients/typescript/src";
import { EVENT_LOOP_DELAY, EVENT_LOOP_DELAY_MAX } from "../orchestrator/orchestrator-metrics";
import { type Agent, localReposRoot, startCacheAgents } from "../dev/local-cache-agent";
import { startLocalOrchestrator, type LocalOrchestrator } from "../dev/local-orchestrator";
import { oneCommitRepository } from "../dev/repository";
import { startScriptedModel, type ScriptedModel, type ScriptStep } from "../dev/scripted-model";
import { alive, killPid } from "../orchestrator/local/local-process";
import { benchOperator, sumMetric, type Result } from "./sandbox-burst-bench";
import { percentile, round, sleep, sorted } from "./stats";
import { sandboxNamespace } from "../api/sandbox-namespaces";

const KEY = `sk-bench-${randomBytes(8).toString("hex")}`;
const FILE = "bench.txt";
const B = "agents";
/** The Menu every turn carries (never picked here), as a Machine's turn does. */
const PROPOSE = {
  name: "propose",
  description: "Propose the change for a human's approval.",
  parameters: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] },
};

// ---------------------------------------------------------------------------------------------
// The model: the scripted one, behind a router that stamps each turn's requests and answers

type Turn = { arrived: number[]; answered: number[] };

class ModelRouter {
  readonly turns = new Map<string, Turn>();
  #server?: Server;
  #model?: ScriptedModel;
  url = "";

  /** Every conversation plays `steps` `read` calls, then "done" (the scripted model's per-conversation
   * play: a request's step is the number of answers its conversation holds). */
  async start(steps: number): Promise<void> {
    const script: ScriptStep[] = [
      ...Array.from({ length: steps }, () => ({ toolCalls: [{ name: "read", arguments: { path: FILE } }] })),
      { text: "done" },
    ];
    this.#model = await startScriptedModel({ script, apiKey: KEY, perConversation: true });
    this.#server = createServer((req, res) => {
      const arrived = performance.now();
      this.#route(req, arrived).then(
        ({ turn, upstream }) => {
          res.on("finish", () => turn.answered.push(performance.now()));
          res.writeHead(upstream.statusCode ?? 502, upstream.headers);
          upstream.pipe(res);
        },
        (err: unknown) => {
          const body = JSON.stringify({ error: { message: String(err), type: "bench_router", code: null } });
          res.writeHead(400, { "content-type": "application/json" }).end(body);
        },
      );
    });
    // Connections from the Custodians are kept a minute, as a hosted provider's front keeps them.
    this.#server.keepAliveTimeout = 65_000;
    await new Promise<void>((r) => this.#server!.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** A turn whose requests carry `tag`. */
  open(tag: string): void {
    this.turns.set(tag, { arrived: [], answered: [] });
  }

  async #route(req: IncomingMessage, arrived: number): Promise<{ turn: Turn; upstream: IncomingMessage }> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const tag = tagOf(body);
    const turn = tag === undefined ? undefined : this.turns.get(tag);
    if (!turn) throw new Error(`no turn for this request (tag ${tag})`);
    turn.arrived.push(arrived);
    const { host: _host, ...headers } = req.headers;
    const upstream = await new Promise<IncomingMessage>((resolve, reject) => {
      const out = request(
        `${this.#model!.url}${req.url ?? "/"}`,
        // A connection of its own each time: a kept-alive one may be closed by the model's server
        // while this process is too busy to notice (a reset), and this hop is nobody's overhead.
        { method: req.method, headers, agent: false },
        resolve,
      );
      out.on("error", reject);
      out.end(body);
    });
    return { turn, upstream };
  }

  async stop(): Promise<void> {
    const closed = new Promise<void>((r) => (this.#server ? this.#server.close(() => r()) : r()));
    this.#server?.closeAllConnections();
    await closed;
    await this.#model?.stop();
  }
}

/** The tag in a chat request's first user message. */
function tagOf(body: Buffer): string | undefined {
  try {
    const parsed = JSON.parse(body.toString("utf8")) as { messages?: Array<{ role?: string; content?: unknown }> };
    const first = parsed.messages?.find((m) => m.role === "user");
    return /agent-bench:([A-Za-z0-9-]+)/.exec(JSON.stringify(first?.content ?? ""))?.[1];
  } catch {
    return undefined;
  }
}

/** Per step, the model's answer sent to the next request arriving (one per tool step). */
const stepGaps = (t: Turn) => t.answered.slice(0, -1).map((sent, i) => t.arrived[i + 1]! - sent);

// ---------------------------------------------------------------------------------------------
// Processes

/** VmRSS (now) or VmHWM (the peak) of a process in MB; NaN when it is gone. */
function memoryMb(pid: number, field: "VmRSS" | "VmHWM"): number {
  try {
    const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

const TICK_S = 1 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim() || 100);

/** The CPU time a process has used (user + system), in seconds; 0 when it is gone. */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * TICK_S;
  } catch {
    return 0;
  }
}

/** The machine's CPU time so far, busy and in all, in seconds (every core). */
function machineCpu(): { busy: number; all: number } {
  const [, ...ticks] = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/);
  const n = ticks.map(Number);
  const all = n.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: (all - n[3]! - n[4]!) * TICK_S, all: all * TICK_S };
}

/** The main thread's time on a core and waiting for one while runnable, in seconds (schedstat). */
function mainThreadSched(pid: number): { run: number; wait: number } {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ").map(Number);
    return { run: run! / 1e9, wait: wait! / 1e9 };
  } catch {
    return { run: 0, wait: 0 };
  }
}

/** The Harness and Custodian pids of each local pod the Orchestrator started (`<name>.pod/local.json`). */
function podPids(workRoot: string): Map<string, { harness?: number; custodian?: number }> {
  const out = new Map<string, { harness?: number; custodian?: number }>();
  if (!existsSync(workRoot)) return out;
  for (const entry of readdirSync(workRoot)) {
    const file = join(workRoot, entry, "local.json");
    if (!entry.endsWith(".pod") || !existsSync(file)) continue;
    try {
      const s = JSON.parse(readFileSync(file, "utf8")) as { harness?: number; custodian?: number };
      out.set(entry.slice(0, -4), s);
    } catch {
      // being written: read again later
    }
  }
  return out;
}

type Pod = { harness: number; custodian: number };

/** Samples the RSS of the Orchestrator and of the pods' processes every `everyMs`. */
function rssSampler(orchestrator: number, pods: Pod[], everyMs = 250) {
  const peak = { orchestrator: 0, harnessSum: 0, custodianSum: 0 };
  const sample = () => {
    const sum = (pids: number[]) => pids.reduce((s, p) => s + (memoryMb(p, "VmRSS") || 0), 0);
    peak.orchestrator = Math.max(peak.orchestrator, memoryMb(orchestrator, "VmRSS") || 0);
    peak.harnessSum = Math.max(peak.harnessSum, sum(pods.map((p) => p.harness)));
    peak.custodianSum = Math.max(peak.custodianSum, sum(pods.map((p) => p.custodian)));
  };
  sample();
  const timer = setInterval(sample, everyMs);
  return {
    peak,
    stop: () => {
      clearInterval(timer);
      sample();
    },
  };
}

/** CPU seconds used by each kind of process between `start` and `stop`. */
function cpuMeter(orchestrator: number, pods: Pod[]) {
  const read = () => ({
    orchestrator: cpuSeconds(orchestrator),
    sched: mainThreadSched(orchestrator),
    harnesses: pods.reduce((s, p) => s + cpuSeconds(p.harness), 0),
    custodians: pods.reduce((s, p) => s + cpuSeconds(p.custodian), 0),
    bench: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
    machine: machineCpu(),
  });
  const before = read();
  return () => {
    const after = read();
    return {
      orchestrator: after.orchestrator - before.orchestrator,
      orchestratorMainRun: after.sched.run - before.sched.run,
      orchestratorMainWait: after.sched.wait - before.sched.wait,
      harnesses: after.harnesses - before.harnesses,
      custodians: after.custodians - before.custodians,
      bench: after.bench - before.bench,
      machineBusy: after.machine.busy - before.machine.busy,
      machineAll: after.machine.all - before.machine.all,
    };
  };
}

/**
 * The control: a node process that does nothing but time its own event loop, as the Orchestrator's
 * /metrics does. Its delays are the machine's (a process waiting for a core), not any code's.
 */
async function startIdleProbe() {
  const script = `const h = require("node:perf_hooks").monitorEventLoopDelay({ resolution: 10 }); h.enable();
process.stdin.setEncoding("utf8").on("data", () => { process.stdout.write(JSON.stringify({ p99: h.percentile(99), max: h.max, count: h.count }) + "\\n"); h.reset(); });
process.stdin.on("end", () => process.exit(0));`;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = createInterface({ input: child.stdout! });
  const waiting: Array<(line: string) => void> = [];
  lines.on("line", (line) => waiting.shift()?.(line));
  const report = () =>
    new Promise<{ p99: number; max: number }>((resolve) => {
      waiting.push((line) => {
        const h = JSON.parse(line) as { p99: number; max: number; count: number };
        resolve({ p99: late(h.count, h.p99), max: late(h.count, h.max) });
      });
      child.stdin!.write("report\n");
    });
  await report();
  return { report, stop: () => child.stdin!.end() };
}

/**
 * A preload that profiles the process it is loaded into (node refuses --cpu-prof in NODE_OPTIONS):
 * V8's sampling profiler from start, the profile written to `dir` as `<program>-<pid>.cpuprofile`
 * when the process exits.
 */
function profiler(tmp: string, dir: string): string {
  const file = join(tmp, "cpu-profile.cjs");
  writeFileSync(
    file,
    `const session = new (require("node:inspector").Session)();
session.connect();
session.post("Profiler.enable");
session.post("Profiler.setSamplingInterval", { interval: 500 });
session.post("Profiler.start");
process.on("exit", () => session.post("Profiler.stop", (err, r) => {
  const name = require("node:path").basename(process.argv[1] || "node", ".js") + "-" + process.pid + ".cpuprofile";
  if (!err) require("node:fs").writeFileSync(require("node:path").join(${JSON.stringify(dir)}, name), JSON.stringify(r.profile));
}));
`,
  );
  return file;
}

/** How late a timer due every 10 ms ran, in ms, from node's histogram (orchestrator/orchestrator-metrics.ts). */
const late = (count: number, ns: number) => (count > 0 ? Math.max(0, ns / 1e6 - 10) : 0);

// ---------------------------------------------------------------------------------------------
// The Machine's side

type Run = {
  tag: string;
  ws: string;
  submitted: number;
  ended?: number;
  outcome?: string;
  error?: string;
  /** Times the stream failed and was resumed after its last event (the client's contract). */
  resumes: number;
  resumedFor: string[];
};

const MAX_RESUMES = 5;

/** Submits the tagged turn on the workspace and reads its events to the end, as a Machine does:
 * a stream that fails is resumed after the last event read (clients/typescript/src/client.ts). */
async function runTurn(client: OrchestratorClient, ws: string, tag: string, steps: number): Promise<Run> {
  const run: Run = { tag, ws, submitted: performance.now(), resumes: 0, resumedFor: [] };
  try {
    const { iid } = await client.submitTurn(ws, {
      agent: "coder",
      iid: `${ws}.${tag}`,
      message: `agent-bench:${tag} read ${FILE} ${steps} times, then say done`,
      menu: [PROPOSE],
      allowed: [PROPOSE.name],
    });
    let lastEventId: number | undefined;
    while (!run.outcome) {
      try {
        for await (const e of client.turnEvents(ws, iid, lastEventId === undefined ? {} : { lastEventId })) {
          lastEventId = e.offset;
          if (e.kind !== "end") continue;
          run.ended = performance.now();
          run.outcome = e.outcome;
          if (e.error) run.error = e.error;
          break;
        }
        if (!run.outcome) throw new Error("the stream closed before the turn's end");
      } catch (err) {
        if (run.resumes >= MAX_RESUMES) throw err;
        run.resumes++;
        run.resumedFor.push(err instanceof Error ? err.message : String(err));
      }
    }
  } catch (err) {
    run.outcome = "error";
    run.error = err instanceof Error ? err.message : String(err);
  }
  return run;
}

async function metricsText(orch: LocalOrchestrator): Promise<string> {
  const res = await fetch(`${orch.url}/metrics`, { headers: { authorization: `Bearer ${orch.token}` } });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return res.text();
}

/** The Orchestrator's event-loop delay since the previous scrape, in ms: p99 and max. */
async function loopDelay(orch: LocalOrchestrator): Promise<{ p99: number; max: number }> {
  const text = await metricsText(orch);
  return {
    p99: sumMetric(text, EVENT_LOOP_DELAY, { quantile: "0.99" }) * 1000,
    max: sumMetric(text, EVENT_LOOP_DELAY_MAX) * 1000,
  };
}

/** Creates `count` workspaces at once, each with the one slot, and waits until all are ready. */
async function createReady(client: OrchestratorClient, remote: string, count: number, timeoutMs: number) {
  const body = { image: "ghcr.io/example/harness:1", branch: "bench/agents", repos: [{ slot: "app", url: remote }] };
  const names = await Promise.all(Array.from({ length: count }, async () => (await client.createWorkspace(body)).name));
  const waiting = new Set(names);
  const deadline = Date.now() + timeoutMs;
  while (waiting.size) {
    if (Date.now() > deadline) throw new Error(`${waiting.size}/${count} workspaces not ready in time`);
    for (const name of [...waiting]) {
      const v: WorkspaceView = await client.workspace(name);
      if (v.state === "ready") waiting.delete(name);
      else if (v.state === "failed" || v.state === "lost")
        throw new Error(`${name} ${v.state}: ${JSON.stringify(v.failure ?? v.lost)}`);
    }
    if (waiting.size) await sleep(500);
  }
  return names;
}

/** Destroys the workspaces and waits until the Orchestrator has stopped their pods' processes. */
async function destroy(client: OrchestratorClient, workRoot: string, names: string[]) {
  await Promise.all(names.map((n) => client.deleteWorkspace(n).catch(() => undefined)));
  const deadline = Date.now() + 120_000;
  const running = () =>
    names.some((n) => {
      const p = podPids(workRoot).get(n);
      return p !== undefined && [p.harness, p.custodian].some((pid) => pid !== undefined && alive(pid));
    });
  while (running() && Date.now() < deadline) await sleep(250);
}

// ---------------------------------------------------------------------------------------------

export async function agentsBench(kubeconfig: string): Promise<Result[]> {
  const count = Number(process.env.BENCH_AGENT_WORKSPACES ?? 50);
  const steps = Number(process.env.BENCH_AGENT_STEPS ?? 20);
  const repeats = Number(process.env.BENCH_AGENT_REPEATS ?? 10);
  const warmup = Number(process.env.BENCH_AGENT_WARMUP ?? 2);
  const cpuProf = process.env.BENCH_AGENT_CPU_PROF;
  const profileHarness = process.env.BENCH_AGENT_CPU_PROF_HARNESS === "1";
  const op = await benchOperator(kubeconfig, 3447, "bench-agents-operator");
  const ns = `agents-bench-${randomBytes(3).toString("hex")}`;
  const tmp = mkdtempSync(join(tmpdir(), "jr2-agents-bench-"));
  const workRoot = join(tmp, "orchestrator", "work");
  const cacheAgents: Agent[] = [];
  const router = new ModelRouter();
  const self = monitorEventLoopDelay({ resolution: 10 });
  self.enable();
  let probe: Awaited<ReturnType<typeof startIdleProbe>> | undefined;
  let orch: LocalOrchestrator | undefined;
  const started = new Set<number>();
  const remember = () => {
    for (const p of podPids(workRoot).values()) for (const pid of [p.harness, p.custodian]) if (pid) started.add(pid);
  };
  try {
    const remotes = join(tmp, "remotes");
    const remote = join(remotes, "app.git");
    oneCommitRepository(join(tmp, "src"), remote);
    probe = await startIdleProbe();
    const control = probe;
    await router.start(steps);
    await K8s(kind.Namespace).Apply(sandboxNamespace(ns) as kind.Namespace);
    // The installation's model provider is the router, its key held in a Secret the Custodian
    // mounts; the Harness is told to use it (test/integration/support/agent-fixtures.ts, for the router).
    await K8s(kind.Secret).Apply({ metadata: { name: "model-keys", namespace: ns }, stringData: { openai: KEY } });
    const podConfig = join(tmp, "pod.yaml");
    writeFileSync(
      podConfig,
      JSON.stringify({
        custodian: {
          providers: [{ name: "scripted", url: router.url }],
          held: [{ secret: "model-keys", key: "openai", env: "OPENAI_API_KEY", origins: [router.url] }],
        },
        harness: {
          env: [
            { name: "JR2_MODEL_PROVIDER", value: "scripted" },
            { name: "JR2_MODEL_ID", value: "scripted" },
            ...(cpuProf && profileHarness
              ? [{ name: "NODE_OPTIONS", value: `--require ${profiler(tmp, cpuProf)}` }]
              : []),
          ],
        },
      }),
    );
    cacheAgents.push(...(await startCacheAgents(tmp)));
    orch = await startLocalOrchestrator({
      kubeconfig,
      namespace: ns,
      dir: join(tmp, "orchestrator"),
      credentials: [remotes],
      reposRoot: localReposRoot(tmp),
      harness: "process",
      env: {
        [ORCHESTRATOR_ENV.podConfigFile]: podConfig,
        // A CPU profile of the Orchestrator (and, by the pod config above, perhaps of each Harness).
        ...(cpuProf ? { NODE_OPTIONS: `--require ${profiler(tmp, cpuProf)}` } : {}),
      },
    });
    const o = orch;
    const client = new OrchestratorClient({ url: o.url, token: o.token });
    const put = (ws: string) => writeFileSync(join(workRoot, ws, FILE), "hello bench\n");

    // 1. One workspace, warm: turns one after another.
    process.stderr.write(`agents: 1 workspace, ${warmup} + ${repeats} turns of ${steps} steps\n`);
    const [one] = await createReady(client, remote, 1, 120_000);
    remember();
    put(one!);
    const single: Run[] = [];
    for (let i = 0; i < warmup + repeats; i++) {
      const tag = `w${i}`;
      router.open(tag);
      const run = await runTurn(client, one!, tag, steps);
      if (run.outcome !== "completed") throw new Error(`turn ${tag} ended ${run.outcome}: ${run.error ?? ""}`);
      if (i >= warmup) single.push(run);
    }
    const measured = single.map((r) => router.turns.get(r.tag)!);
    const gaps = measured.flatMap(stepGaps);
    const toModel = single.map((r) => router.turns.get(r.tag)!.arrived[0]! - r.submitted);
    const toMachine = single.map((r) => r.ended! - router.turns.get(r.tag)!.answered.at(-1)!);
    await destroy(client, workRoot, [one!]);

    // 2. N workspaces; twice, one turn each, all at once: each workspace's first turn (its Harness
    // loads pi then), then a second on a new conversation.
    process.stderr.write(`agents: ${count} workspaces, a ${steps}-step turn each, at once, twice\n`);
    await loopDelay(o); // starts the creation's window
    await control.report();
    const c0 = performance.now();
    const names = await createReady(client, remote, count, 10 * 60_000);
    const allReady = (performance.now() - c0) / 1000;
    const creationLoop = await loopDelay(o);
    const creationProbe = await control.report();
    remember();
    const pods = names.map((n) => {
      const p = podPids(workRoot).get(n);
      if (!p?.harness || !p.custodian) throw new Error(`workspace ${n} has no local pod recorded`);
      return { harness: p.harness, custodian: p.custodian };
    });
    for (const n of names) put(n);
    const orchestratorBefore = memoryMb(o.process.pid!, "VmRSS");
    const burst = async (label: "cold" | "warm"): Promise<Result[]> => {
      for (const n of names) router.open(`${label}-${n}`);
      const sampler = rssSampler(o.process.pid!, pods);
      await loopDelay(o);
      await control.report();
      self.reset();
      const cpu = cpuMeter(o.process.pid!, pods);
      const t0 = performance.now();
      const runs = await Promise.all(names.map((n) => runTurn(client, n, `${label}-${n}`, steps)));
      const wall = (Math.max(...runs.map((r) => r.ended ?? performance.now())) - t0) / 1000;
      const used = cpu();
      const loop = await loopDelay(o);
      const idleLoop = await control.report();
      const own = { p99: late(self.count, self.percentile(99)), max: late(self.count, self.max) };
      sampler.stop();
      const completed = runs.filter((r) => r.outcome === "completed").length;
      for (const why of runs.flatMap((r) => r.resumedFor.map((w) => `${r.ws}: ${w}`)).slice(0, 5))
        process.stderr.write(`agents: ${label}: a stream resumed: ${why}\n`);
      for (const r of runs.filter((r) => r.outcome !== "completed").slice(0, 5))
        process.stderr.write(`agents: ${label}: ${r.ws} ended ${r.outcome}: ${r.error ?? ""}\n`);
      const turnOf = (r: Run) => router.turns.get(r.tag)!;
      const gaps = runs.flatMap((r) => stepGaps(turnOf(r)));
      const toModel = runs.filter((r) => turnOf(r).arrived.length).map((r) => turnOf(r).arrived[0]! - r.submitted);
      const toMachine = runs.filter((r) => r.ended).map((r) => r.ended! - turnOf(r).answered.at(-1)!);
      const m = (metric: string, value: number, unit: string, target?: string): Result => ({
        bench: B,
        metric: `${label}_${metric}`,
        value: round(value),
        unit,
        ...(target ? { target } : {}),
      });
      return [
        m("turns_completed", completed, "count", `= ${count}`),
        m("turns_failed", count - completed, "count", "= 0"),
        m(
          "stream_resumes",
          runs.reduce((n, r) => n + r.resumes, 0),
          "count",
        ),
        m("wall_seconds", wall, "s"),
        m("step_overhead_p50_ms", percentile(sorted(gaps), 50), "ms"),
        m("step_overhead_p99_ms", percentile(sorted(gaps), 99), "ms"),
        m("machine_to_model_p50_ms", percentile(sorted(toModel), 50), "ms"),
        m("machine_to_model_p99_ms", percentile(sorted(toModel), 99), "ms"),
        m("model_to_machine_p50_ms", percentile(sorted(toMachine), 50), "ms"),
        m("model_to_machine_p99_ms", percentile(sorted(toMachine), 99), "ms"),
        m("orchestrator_loop_delay_p99_ms", loop.p99, "ms"),
        m("orchestrator_loop_delay_max_ms", loop.max, "ms", "<= 100"),
        m("idle_probe_loop_delay_p99_ms", idleLoop.p99, "ms"),
        m("idle_probe_loop_delay_max_ms", idleLoop.max, "ms"),
        m("bench_loop_delay_p99_ms", own.p99, "ms"),
        m("bench_loop_delay_max_ms", own.max, "ms"),
        m("machine_cpu_busy_percent", (100 * used.machineBusy) / used.machineAll, "%"),
        m("orchestrator_cpu_seconds", used.orchestrator, "s"),
        m("orchestrator_main_thread_cpu_seconds", used.orchestratorMainRun, "s"),
        m("orchestrator_main_thread_runqueue_wait_seconds", used.orchestratorMainWait, "s"),
        m("harnesses_cpu_seconds", used.harnesses, "s"),
        m("custodians_cpu_seconds", used.custodians, "s"),
        m("bench_cpu_seconds", used.bench, "s"),
        m("orchestrator_rss_peak_mb", sampler.peak.orchestrator, "MB"),
        m("harness_rss_sum_peak_mb", sampler.peak.harnessSum, "MB"),
        m("custodian_rss_sum_peak_mb", sampler.peak.custodianSum, "MB"),
      ];
    };
    const cold = await burst("cold");
    const warm = await burst("warm");
    const orchestratorHwm = memoryMb(o.process.pid!, "VmHWM");
    const harnessHwm = sorted(pods.map((p) => memoryMb(p.harness, "VmHWM")));
    const custodianHwm = sorted(pods.map((p) => memoryMb(p.custodian, "VmHWM")));

    // Cleanup, checked: every Harness and Custodian the Orchestrator started is gone.
    await destroy(client, workRoot, names);
    remember();
    await o.stop();
    orch = undefined;
    await sleep(500);
    const leftover = [...started].filter(alive);

    const r = (metric: string, value: number, unit: string, target?: string): Result => ({
      bench: B,
      metric,
      value: round(value),
      unit,
      ...(target ? { target } : {}),
    });
    return [
      r("steps_per_turn", steps, "count"),
      r("single_turns_measured", repeats, "count"),
      r(
        "single_stream_resumes",
        single.reduce((n, x) => n + x.resumes, 0),
        "count",
      ),
      r("step_overhead_p50_ms", percentile(sorted(gaps), 50), "ms", "<= 20"),
      r("step_overhead_p99_ms", percentile(sorted(gaps), 99), "ms"),
      r("machine_to_model_p50_ms", percentile(sorted(toModel), 50), "ms"),
      r("machine_to_model_p99_ms", percentile(sorted(toModel), 99), "ms"),
      r("model_to_machine_p50_ms", percentile(sorted(toMachine), 50), "ms"),
      r("model_to_machine_p99_ms", percentile(sorted(toMachine), 99), "ms"),
      r("workspaces_at_once", count, "count"),
      r("workspaces_all_ready_seconds", allReady, "s"),
      r("creation_orchestrator_loop_delay_p99_ms", creationLoop.p99, "ms"),
      r("creation_orchestrator_loop_delay_max_ms", creationLoop.max, "ms"),
      r("creation_idle_probe_loop_delay_max_ms", creationProbe.max, "ms"),
      ...cold,
      ...warm,
      r("orchestrator_rss_before_turns_mb", orchestratorBefore, "MB"),
      r("orchestrator_rss_hwm_mb", orchestratorHwm, "MB"),
      r("harness_rss_hwm_p50_mb", percentile(harnessHwm, 50), "MB"),
      r("harness_rss_hwm_max_mb", harnessHwm.at(-1)!, "MB"),
      r(
        "harness_rss_hwm_sum_mb",
        harnessHwm.reduce((a, b) => a + b, 0),
        "MB",
      ),
      r("custodian_rss_hwm_p50_mb", percentile(custodianHwm, 50), "MB"),
      r("custodian_rss_hwm_max_mb", custodianHwm.at(-1)!, "MB"),
      r(
        "custodian_rss_hwm_sum_mb",
        custodianHwm.reduce((a, b) => a + b, 0),
        "MB",
      ),
      r("leftover_processes", leftover.length, "count", "= 0"),
    ];
  } finally {
    self.disable();
    probe?.stop();
    if (orch) {
      const client = new OrchestratorClient({ url: orch.url, token: orch.token });
      remember();
      await destroy(client, workRoot, [...podPids(workRoot).keys()]).catch(() => undefined);
      await orch.stop();
    }
    remember();
    // Whatever is still running of what the Orchestrator started here: ended by its pid.
    for (const pid of started) if (alive(pid)) killPid(pid);
    await router.stop();
    await Promise.all(cacheAgents.map((a) => a.stop()));
    await K8s(kind.Namespace)
      .Delete(ns)
      .catch(() => undefined);
    await op.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}
