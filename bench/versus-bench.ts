// Benchmark (BENCH_ONLY=versus): jr2 beside agent-sandbox (v0.5.6, built from its module by
// dev/cluster/cluster.sh `binary agent-sandbox-controller`) on the same cluster, in one run, and
// where a burst's time goes on the API server.
//
// Each side: BENCH_VERSUS_SANDBOXES (default 500) cold Sandboxes as one List file through
// `kubectl create -f` (kubectl creates them one after another), in a fresh namespace, timed from
// the create's start: the create's wall and the last Sandbox's Ready condition True (a `kubectl get
// -w` of the namespace's Sandboxes, the same watch on both sides). Sides alternate jr2,
// agent-sandbox, agent-sandbox, jr2, ... for BENCH_VERSUS_ROUNDS (default 2) rounds. Only the side's
// own controller runs during it: each is started before its side and stopped after its namespace
// is gone (jr2's operator registers its admission when it starts and removes it when it stops).
//
// After the rounds, the same jr2 creates, split by what serves them: with jr2's admission removed
// and the operator running (all Ready too); with admission and no operator (the watcher stopped:
// creates only), with and without Repos; with neither (bare creates of the CRD). For every side: the API
// server's own counters over it (requests by verb and resource, each webhook's calls, the policy's
// checks, etcd requests by operation, time queued in API Priority and Fairness), per Sandbox, and
// the API server's, etcd's and the controller's CPU per Sandbox.
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { SandboxSpec } from "../api/crd";
import type { Container } from "../api/crd/generated/corev1";
import { sandboxNamespace } from "../api/sandbox-namespaces";
import { buildPod } from "../capabilities/sandbox/pod";
import { CACHE_DIR, ROOT } from "../dev/local-operator";
import * as kubectl from "../dev/kubectl";
import { running, stopper } from "../dev/child";
import { kubeRequest, paths } from "../lib/kube";
import { crForSpec } from "../test/support/crfor-sandbox";
import { admissionOf, setWebhooks } from "./admission-bench";
import { loadDelta, type Load } from "./apiserver-load";
import { controlPlanePids, cpuSeconds, etcdMetricsUrl } from "./cost";
import { benchOperator, cpuMs, earlierRunsGone, reading, type Reading, type Result } from "./sandbox-burst-bench";
import { percentile, round, sleep, sorted } from "./stats";

const B = "versus";
const JR2 = "jr2";
const AGENT = "agent-sandbox";
type Side = typeof JR2 | typeof AGENT;

/** The order of the compared sides: jr2, agent-sandbox, then agent-sandbox, jr2, ... (pure). */
export function alternation(rounds: number): Side[] {
  return Array.from({ length: rounds }, (_, r) => (r % 2 === 0 ? [JR2, AGENT] : [AGENT, JR2]) as Side[]).flat();
}

/** What the Sandbox spec says of resources and placement, dropped: 500 pods of 3 CPUs do not fit
 * this cluster's three fake nodes, no node carries crFor's node label, no priority class is made. */
const withoutResources = (c: Container): Container => {
  const { resources: _r, ...rest } = c;
  return rest;
};

/**
 * The Sandbox spec a jr2 Orchestrator's `crFor` composes (test/support/crfor-sandbox.ts), without
 * resources, placement and priority class (see withoutResources); `repos: false` also without its
 * Repos and their mounts (pure).
 */
export function benchSpec({ repos }: { repos: boolean }): SandboxSpec {
  const {
    resources: _r,
    podResources: _p,
    nodeSelector: _n,
    tolerations: _t,
    priorityClassName: _c,
    repos: repoList,
    ...spec
  } = crForSpec();
  const repoMount = (m: { name: string }) => repos || !m.name.startsWith("repo-");
  const trim = (c: Container): Container => {
    const out = withoutResources(c);
    return out.volumeMounts ? { ...out, volumeMounts: out.volumeMounts.filter(repoMount) } : out;
  };
  return {
    ...spec,
    initContainers: (spec.initContainers ?? []).map(trim),
    sidecars: (spec.sidecars ?? []).map(trim),
    ...(repos ? { repos: repoList } : {}),
  };
}

/** The Repos a `repos: true` spec names, in a namespace (admission wants each, decision 0046). */
export const benchRepos = (spec: SandboxSpec) =>
  (spec.repos ?? []).map((r) => ({
    apiVersion: "core.jr2.dev/v1alpha1",
    kind: "Repo",
    metadata: { name: r.key },
    spec: { url: r.url },
  }));

/** agent-sandbox's Sandbox with the pod jr2's operator builds from the same spec (its containers,
 * init container, volumes and contexts), so both clusters run the same pods (pure). */
export function agentSandboxFor(spec: SandboxSpec) {
  const pod = buildPod({ metadata: { name: "template", namespace: "template", uid: "template" }, spec });
  return (name: string) => ({
    apiVersion: "agents.x-k8s.io/v1beta1",
    kind: "Sandbox",
    metadata: { name },
    spec: { podTemplate: { spec: pod.spec } },
  });
}

export const jr2SandboxFor = (spec: SandboxSpec) => (name: string) => ({
  apiVersion: "core.jr2.dev/v1alpha1",
  kind: "Sandbox",
  metadata: { name },
  spec,
});

/** One List of `count` objects named s-0, s-1, ..., as `kubectl create -f` takes it (pure). */
export const listOf = (count: number, item: (name: string) => object) => ({
  apiVersion: "v1",
  kind: "List",
  items: Array.from({ length: count }, (_, i) => item(`s-${i}`)),
});

/** The ratio of two figures, two decimals; NaN where either is missing (pure). */
export const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? round(a / b) : NaN);

/** The median of figures, NaN ones left out (pure). */
export const median = (values: number[]) => percentile(sorted(values.filter(Number.isFinite)), 50);

/** The parts of the API server's time a burst is split into: requests, each webhook (by name, not
 * again in its type's total), the policy, etcd, time queued; watches and the process's CPU apart. */
const PART = /^([A-Z]+ |webhook (validating|mutating) |policy |etcd |apf wait )/;

/** Where the API server's time went between two readings, per Sandbox, the costliest first: each
 * part's calls and milliseconds; parts under 0.01 call per Sandbox left out (pure). */
export function split(before: Load, after: Load, per: number, top = 30) {
  return loadDelta(before, after, per)
    .filter((r) => PART.test(r.key) && r.count >= 0.01)
    .sort((a, b) => b.ms - a.ms || b.count - a.count)
    .slice(0, top);
}

/** Lines of `kubectl get -w -o jsonpath=<READY_LINE>`: a Sandbox's name and its Ready condition. */
const READY_LINE = '{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}';

/** Calls onReady with each name the watch's lines say is Ready (pure: fed the output as it comes). */
export function readyLines(onReady: (name: string) => void) {
  let rest = "";
  return (chunk: string) => {
    const lines = (rest + chunk).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) {
      const [name, status] = line.trim().split(" ");
      if (name && status === "True") onReady(name);
    }
  };
}

type Run = {
  label: string;
  resource: string;
  /** The namespace of a name (jr2's opted in to hold Sandboxes). */
  namespace: (name: string) => object;
  item: (name: string) => object;
  /** Wait for every Sandbox Ready (false: creates only, no controller to make them Ready). */
  ready: boolean;
  setup?: (ns: string) => Promise<void>;
  /** Before the namespace goes (admission back, say). */
  teardown?: (ns: string) => Promise<void>;
  /** The controller's processes, for their CPU. */
  controller: number[];
};

type Outcome = {
  label: string;
  applySeconds: number;
  readySeconds: number;
  from: Reading;
  to: Reading;
  controllerMs: number;
};

const SETTLE_MS = 2000;

async function namespaceGone(ns: string) {
  const deadline = Date.now() + 20 * 60_000;
  await kubeRequest("DELETE", `/api/v1/namespaces/${ns}`).catch(() => undefined);
  for (;;) {
    const gone = await kubeRequest("GET", `/api/v1/namespaces/${ns}`).then(
      () => false,
      () => true,
    );
    if (gone) return;
    if (Date.now() > deadline) throw new Error(`namespace ${ns} not gone after 20 min`);
    await sleep(1000);
  }
}

/** One side: the namespace, the watch, the create of the List, Ready, the readings; the namespace
 * deleted and gone before it returns (its controller still running, for its finalizers). */
async function side(
  kubeconfig: string,
  count: number,
  run: Run,
  pids: Map<string, number>,
  etcd?: string,
): Promise<Outcome> {
  const ns = `bench-versus-${run.label.replace(/[^a-z0-9]+/g, "-")}-${randomBytes(3).toString("hex")}`;
  const dir = join(CACHE_DIR, "bench-versus");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${ns}.json`);
  writeFileSync(file, JSON.stringify(listOf(count, run.item)));
  await kubeRequest("POST", "/api/v1/namespaces", run.namespace(ns));
  const ready = new Map<string, number>();
  const watch = spawn(kubectl.kubectlPath(), ["get", run.resource, "-n", ns, "-w", "-o", `jsonpath=${READY_LINE}`], {
    env: { ...process.env, KUBECONFIG: kubeconfig },
    stdio: ["ignore", "pipe", "ignore"],
  });
  const feed = readyLines((name) => {
    if (!ready.has(name)) ready.set(name, performance.now());
  });
  watch.stdout!.setEncoding("utf8").on("data", feed);
  const cpu = () => run.controller.reduce((n, pid) => n + cpuSeconds(pid), 0);
  try {
    await run.setup?.(ns);
    await sleep(2000); // the watch listed and watching
    const from = await reading(kubeconfig, pids, etcd);
    const c0 = cpu();
    const t0 = performance.now();
    await kubectl.run(kubeconfig, ["create", "-n", ns, "-f", file]);
    const applied = performance.now();
    const deadline = Date.now() + 15 * 60_000;
    while (run.ready && ready.size < count) {
      if (Date.now() > deadline) throw new Error(`${run.label}: only ${ready.size}/${count} Ready after 15 min`);
      await sleep(50);
    }
    const last = run.ready ? Math.max(...ready.values()) : NaN;
    await sleep(SETTLE_MS);
    const to = await reading(kubeconfig, pids, etcd);
    const outcome = {
      label: run.label,
      applySeconds: (applied - t0) / 1000,
      readySeconds: (last - t0) / 1000,
      from,
      to,
      controllerMs: (cpu() - c0) * 1000,
    };
    process.stderr.write(
      `versus ${run.label}: create ${round(outcome.applySeconds)} s, all Ready ${round(outcome.readySeconds)} s\n`,
    );
    return outcome;
  } finally {
    watch.kill();
    await run.teardown?.(ns);
    await namespaceGone(ns);
  }
}

/** agent-sandbox's Sandbox CRD from its module, served at v1beta1 without its conversion webhook:
 * its controller runs here with --enable-webhook=false, which wants conversion "None" (pure). */
export function agentCrd(yamlText: string) {
  const crd = parseAllDocuments(yamlText)[0]!.toJS() as { spec: Record<string, unknown> };
  const { conversion: _c, ...spec } = crd.spec;
  return { ...crd, spec: { ...spec, conversion: { strategy: "None" } } };
}

async function crdEstablished(name: string) {
  type Crd = { status?: { conditions?: Array<{ type: string; status: string }> } };
  for (let i = 0; i < 120; i++) {
    const crd = await kubeRequest<Crd>("GET", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
    if (crd.status?.conditions?.some((c) => c.type === "Established" && c.status === "True")) return;
    await sleep(500);
  }
  throw new Error(`CRD ${name} not Established in 60 s`);
}

/** The controller's binary, built from its pinned module if not cached yet. */
function agentBinary(): string {
  const r = spawnSync("bash", [join(ROOT, "dev", "cluster", "cluster.sh"), "binary", "agent-sandbox-controller"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  if (r.status !== 0) throw new Error(`cluster.sh binary agent-sandbox-controller exited ${r.status}`);
  return r.stdout.trim().split("\n").pop()!;
}

const AGENT_PROBE_PORT = 18081;

/** agent-sandbox's controller as a local process: its core Sandbox controller only (no
 * extensions, no webhook, no leader election), its own concurrency and client defaults. */
async function startAgent(kubeconfig: string, binary: string): Promise<{ pid: number; stop: () => Promise<void> }> {
  const dir = join(CACHE_DIR, "bench-versus");
  mkdirSync(dir, { recursive: true });
  const log = openSync(join(dir, "agent-sandbox.log"), "a");
  const child = spawn(
    binary,
    [
      "--leader-elect=false",
      "--enable-webhook=false",
      "--extensions=false",
      "--metrics-bind-address=0",
      `--health-probe-bind-address=127.0.0.1:${AGENT_PROBE_PORT}`,
    ],
    { env: { ...process.env, KUBECONFIG: kubeconfig }, stdio: ["ignore", log, log] },
  );
  const stop = stopper(child);
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (!running(child)) throw new Error(`agent-sandbox's controller exited ${child.exitCode}; see ${dir}`);
    const ok = await fetch(`http://127.0.0.1:${AGENT_PROBE_PORT}/readyz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { pid: child.pid!, stop: () => stop() };
    if (Date.now() > deadline) {
      await stop();
      throw new Error("agent-sandbox's controller not ready in 60 s");
    }
    await sleep(250);
  }
}

/** Figures of one side: its create and all-Ready, its split per Sandbox, its CPU per Sandbox. */
function sideFigures(o: Outcome, count: number): Result[] {
  const ms = (name: string) => round(cpuMs(o.from, o.to, name) / count);
  const out: Result[] = [
    { bench: B, metric: `${o.label}: create_seconds`, value: round(o.applySeconds), unit: "s" },
    ...(Number.isFinite(o.readySeconds)
      ? [{ bench: B, metric: `${o.label}: all_ready_seconds`, value: round(o.readySeconds), unit: "s" }]
      : []),
    { bench: B, metric: `${o.label}: apiserver_cpu_ms_per_sandbox`, value: ms("kube-apiserver"), unit: "ms" },
    { bench: B, metric: `${o.label}: etcd_cpu_ms_per_sandbox`, value: ms("etcd"), unit: "ms" },
    { bench: B, metric: `${o.label}: controller_cpu_ms_per_sandbox`, value: round(o.controllerMs / count), unit: "ms" },
  ];
  for (const r of split(o.from.load, o.to.load, count)) {
    out.push(
      { bench: B, metric: `${o.label}: split ${r.key} calls_per_sandbox`, value: round(r.count), unit: "count" },
      { bench: B, metric: `${o.label}: split ${r.key} ms_per_sandbox`, value: round(r.ms), unit: "ms" },
    );
  }
  return out;
}

const AGENT_CRD = "sandboxes.agents.x-k8s.io";

export async function versusBench(kubeconfig: string): Promise<Result[]> {
  await earlierRunsGone();
  const binary = agentBinary();
  await kubectl.apply(kubeconfig, [agentCrd(readFileSync(join(binary, "..", "sandboxes-crd.yaml"), "utf8"))]);
  try {
    await crdEstablished(AGENT_CRD);
    return await versusSides(kubeconfig, binary);
  } finally {
    // Gone after the run: a second kind named Sandbox on the shared cluster would be what kubectl
    // takes for a bare `sandbox` in every later test and command.
    await kubeRequest("DELETE", `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${AGENT_CRD}`).catch(
      (err: unknown) => process.stderr.write(`bench versus: ${AGENT_CRD} was not deleted: ${String(err)}\n`),
    );
  }
}

async function versusSides(kubeconfig: string, binary: string): Promise<Result[]> {
  const count = Number(process.env.BENCH_VERSUS_SANDBOXES ?? 500);
  const rounds = Number(process.env.BENCH_VERSUS_ROUNDS ?? 2);
  const pids = controlPlanePids(kubeconfig);
  const etcd = etcdMetricsUrl(pids.get("etcd")).url;
  const port = 3448;
  const plain = benchSpec({ repos: false });
  const jr2Run = (label: string, operator: number[], extra: Partial<Run> = {}): Run => ({
    label,
    resource: "sandboxes.core.jr2.dev",
    namespace: sandboxNamespace,
    item: jr2SandboxFor(plain),
    ready: true,
    controller: operator,
    ...extra,
  });
  const startJr2 = () => benchOperator(kubeconfig, port, "bench-versus-operator");
  const outcomes: Outcome[] = [];
  const order = alternation(rounds);
  for (const [i, who] of order.entries()) {
    const label = `${who} r${Math.floor(i / 2) + 1}`;
    if (who === JR2) {
      const op = await startJr2();
      try {
        await sleep(5000); // settled: watches listed
        outcomes.push(await side(kubeconfig, count, jr2Run(label, [op.watcher.pid!, op.admission.pid!]), pids, etcd));
      } finally {
        await op.stop();
      }
    } else {
      const agent = await startAgent(kubeconfig, binary);
      try {
        await sleep(5000);
        outcomes.push(
          await side(
            kubeconfig,
            count,
            {
              label,
              resource: "sandboxes.agents.x-k8s.io",
              namespace: (name) => ({ apiVersion: "v1", kind: "Namespace", metadata: { name } }),
              item: agentSandboxFor(plain),
              ready: true,
              controller: [agent.pid],
            },
            pids,
            etcd,
          ),
        );
      } finally {
        await agent.stop();
      }
    }
  }
  // The split's other sides: one operator, its admission then its watcher taken away in turn.
  const op = await startJr2();
  try {
    await sleep(5000);
    const { admission } = admissionOf(op, port);
    const both = [op.watcher.pid!, op.admission.pid!];
    outcomes.push(
      await side(
        kubeconfig,
        count,
        jr2Run("jr2 without admission", both, {
          setup: (ns) => setWebhooks(kubeconfig, ns, admission, false),
          teardown: (ns) => setWebhooks(kubeconfig, ns, admission, true),
        }),
        pids,
        etcd,
      ),
    );
    // The watcher alone stopped: admission still answers every create.
    await stopper(op.watcher)();
    outcomes.push(
      await side(kubeconfig, count, jr2Run("jr2 creates only", [op.admission.pid!], { ready: false }), pids, etcd),
    );
    const withRepos = benchSpec({ repos: true });
    outcomes.push(
      await side(
        kubeconfig,
        count,
        jr2Run("jr2 creates only with repos", [op.admission.pid!], {
          ready: false,
          item: jr2SandboxFor(withRepos),
          setup: async (ns) => {
            for (const repo of benchRepos(withRepos)) await kubeRequest("POST", paths.repos(ns), repo);
          },
        }),
        pids,
        etcd,
      ),
    );
  } finally {
    await op.stop();
  }
  outcomes.push(await side(kubeconfig, count, jr2Run("jr2 bare creates", [], { ready: false }), pids, etcd));

  const out: Result[] = [
    { bench: B, metric: "sandboxes_per_side", value: count, unit: "count" },
    { bench: B, metric: "rounds", value: rounds, unit: "count" },
  ];
  for (const o of outcomes) out.push(...sideFigures(o, count));
  const of = (who: Side) => outcomes.filter((o) => o.label.startsWith(`${who} r`));
  for (let r = 1; r <= rounds; r++) {
    const [j, a] = [of(JR2)[r - 1]!, of(AGENT)[r - 1]!];
    out.push(
      {
        bench: B,
        metric: `r${r}: create_ratio_jr2_over_agent_sandbox`,
        value: ratio(j.applySeconds, a.applySeconds),
        unit: "ratio",
      },
      {
        bench: B,
        metric: `r${r}: all_ready_ratio_jr2_over_agent_sandbox`,
        value: ratio(j.readySeconds, a.readySeconds),
        unit: "ratio",
        target: "<= 0.5",
      },
    );
  }
  const med = (who: Side, f: (o: Outcome) => number) => median(of(who).map(f));
  out.push(
    { bench: B, metric: "jr2_create_seconds_median", value: round(med(JR2, (o) => o.applySeconds)), unit: "s" },
    {
      bench: B,
      metric: "agent_sandbox_create_seconds_median",
      value: round(med(AGENT, (o) => o.applySeconds)),
      unit: "s",
    },
    { bench: B, metric: "jr2_all_ready_seconds_median", value: round(med(JR2, (o) => o.readySeconds)), unit: "s" },
    {
      bench: B,
      metric: "agent_sandbox_all_ready_seconds_median",
      value: round(med(AGENT, (o) => o.readySeconds)),
      unit: "s",
    },
    {
      bench: B,
      metric: "all_ready_ratio_jr2_over_agent_sandbox_median",
      value: ratio(
        med(JR2, (o) => o.readySeconds),
        med(AGENT, (o) => o.readySeconds),
      ),
      unit: "ratio",
      target: "<= 0.5",
    },
  );
  return out;
}
