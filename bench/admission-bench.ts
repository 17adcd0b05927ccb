// Benchmark: what admission adds to a create, and admission round trips under load.
//
// 1. Side by side, in one run: BENCH_ADMISSION_CREATES (default 500) Sandboxes created one after
//    another through the API server with admission registered (the webhook configurations and the
//    Sandbox defaults policy, decision 0026), and as many with all of it absent, the operator running throughout (its reconciles load both sides alike). The two
//    sides alternate in blocks of BENCH_ADMISSION_BLOCK (default 25) creates, in the order
//    with, without, without, with, ..., so a shared machine's drift falls on both. Reports each
//    side's p50/p99 and the difference (admission_added_p50_ms, _p99_ms), with the API server's own
//    timing of each webhook call (apiserver_admission_webhook_admission_duration_seconds) and of the
//    policy (apiserver_mutating_admission_policy_check_duration_seconds) beside
//    the module's (pepr_jr2_admission_duration), and the lines the module logged per review.
//    The same side by side with server-side dry runs (quiet_*): admission runs whole, nothing is
//    stored, so no reconcile of an earlier create competes for the two cores; what admission itself
//    adds, apart from what the rest of the cluster does meanwhile. Each side also as work: the API
//    server's CPU per create, what admission adds to it, and the module's own CPU per review.
//    Before them, on the quiet cluster, 8 dry-run creates each after a 6 s pause beside as many
//    back to back, with admission and without: what a pause costs admission, such as reopening
//    the API server's connection to the webhook (idle_added_p50_ms). BENCH_ADMISSION_IDLE=0: not run.
// 2. 5,000 AdmissionReview requests at 32 concurrent straight to the module's /validate endpoint
//    (it has no mutating one), then the same number of Sandbox creates through the API server
//    (server-side dry run: the policy defaults, the webhook judges, nothing is stored). Reports
//    p50/p99 of each.
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Agent, request } from "undici";
import cfg from "../package.json";
import { DEFAULT_FS_GROUP } from "../api/wire";
import { SANDBOX_DEFAULTS } from "../capabilities/admission/policy";
import { kubeRequest, paths } from "../lib/kube";
import { ApiError } from "../lib/api-error";
import { CACHE_DIR, ROOT, localWebhooks, startLocalOperator, type LocalOperator } from "../dev/local-operator";
import * as kubectl from "../dev/kubectl";
import { earlierRunsGone, scrape, sumMetric, type Result } from "./sandbox-burst-bench";
import { apiServerLoad, type Load } from "./apiserver-load";
import { controlPlanePids, cpuSeconds } from "./cost";
import { percentile, round, sleep, sorted } from "./stats";
import { sandboxNamespace } from "../api/sandbox-namespaces";

const TOTAL = Number(process.env.BENCH_ADMISSION_REQUESTS ?? 5000);
const CONCURRENCY = 32;
const CREATES = Number(process.env.BENCH_ADMISSION_CREATES ?? 500);
const BLOCK = Number(process.env.BENCH_ADMISSION_BLOCK ?? 25);

/** Runs `n` calls of `fn` with `c` in flight; returns each call's latency in ms, sorted. */
async function load(n: number, c: number, fn: (i: number) => Promise<void>): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const t = performance.now();
      await fn(i);
      times.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: c }, worker));
  return times.sort((a, b) => a - b);
}

const sandbox = (name: string, namespace: string) => ({
  apiVersion: "core.jr2.dev/v1alpha1",
  kind: "Sandbox",
  metadata: { name, namespace },
  spec: {
    image: "ghcr.io/example/harness:1",
    sidecars: [
      { name: "custodian", image: "ghcr.io/example/custodian:1" },
      { name: "effector", image: "ghcr.io/example/effector:1" },
      { name: "user", image: "ghcr.io/example/user:1" },
    ],
    repos: [{ key: "example-a1b2", url: "https://example.com/org/a.git" }],
    gitCredentials: [{ name: "push-token" }],
  },
});

const review = (kind: "validate", i: number, namespace: string) => ({
  apiVersion: "admission.k8s.io/v1",
  kind: "AdmissionReview",
  request: {
    uid: randomUUID(),
    kind: { group: "core.jr2.dev", version: "v1alpha1", kind: "Sandbox" },
    resource: { group: "core.jr2.dev", version: "v1alpha1", resource: "sandboxes" },
    requestKind: { group: "core.jr2.dev", version: "v1alpha1", kind: "Sandbox" },
    requestResource: { group: "core.jr2.dev", version: "v1alpha1", resource: "sandboxes" },
    name: `bench-${kind}-${i}`,
    namespace,
    operation: "CREATE",
    userInfo: { username: "bench" },
    object: sandbox(`bench-${kind}-${i}`, namespace),
    dryRun: false,
  },
});

/** What admission registers: the webhook configurations and the Sandbox defaults policy with its binding. */
export type Admission = Array<{ kind: string; metadata: { name: string } }>;

/** The local operator's admission as the build registers it (policies first), re-pointed at it. */
export function admissionOf(op: LocalOperator, port: number): { apiPath: string; admission: Admission } {
  const manifest = readFileSync(join(ROOT, "dist", `pepr-module-${cfg.pepr.uuid}.yaml`), "utf8");
  const { apiPath, webhooks, policies } = localWebhooks(manifest, port, op.caPem, op.operator);
  return { apiPath, admission: [...policies, ...webhooks] };
}

const sandboxesPath = (ns: string, dryRun = false) => `${paths.sandboxes(ns)}${dryRun ? "?dryRun=All" : ""}`;

/** The Sandbox a person applies (examples/sandbox.yaml). */
const applied = (name: string, namespace: string) => ({
  apiVersion: "core.jr2.dev/v1alpha1",
  kind: "Sandbox",
  metadata: { name, namespace },
  spec: {
    image: "ghcr.io/example/harness:1",
    idleTimeout: "30m",
    resources: { limits: { cpu: "1", memory: "1Gi" } },
    sidecars: [{ name: "custodian", image: "ghcr.io/example/custodian:1" }],
  },
});

/**
 * Whether the API server applies admission, asked with two dry runs (nothing stored): the policy
 * writes the default fsGroup into a plain Sandbox, the validating webhook refuses a hostPath volume.
 * The API server learns of configuration changes through informers, so callers poll this.
 */
async function webhooksCalled(ns: string): Promise<{ mutating: boolean; validating: boolean }> {
  const plain = await kubeRequest<{ spec?: { fsGroup?: number } }>(
    "POST",
    sandboxesPath(ns, true),
    applied("jr2-bench-probe", ns),
  );
  const mutating = plain.spec?.fsGroup === DEFAULT_FS_GROUP;
  const hostPath = { ...applied("jr2-bench-probe", ns) };
  hostPath.spec = { ...hostPath.spec, volumes: [{ name: "probe", hostPath: { path: "/" } }] } as typeof hostPath.spec;
  const validating = await kubeRequest("POST", sandboxesPath(ns, true), hostPath).then(
    () => false,
    (err: unknown) => {
      if (err instanceof ApiError && /admission webhook/.test(err.message)) return true;
      throw err;
    },
  );
  return { mutating, validating };
}

/** Runs `fn` in a fresh opted-in namespace (admission refuses a Sandbox create anywhere else,
 * decision 0067), deleted after. */
async function inSandboxNamespace<T>(prefix: string, fn: (ns: string) => Promise<T>): Promise<T> {
  const ns = `${prefix}-${randomUUID().slice(0, 6)}`;
  await kubeRequest("POST", "/api/v1/namespaces", sandboxNamespace(ns));
  try {
    return await fn(ns);
  } finally {
    await kubeRequest("DELETE", `/api/v1/namespaces/${ns}`).catch(() => undefined);
  }
}

/** Registers or removes admission (policy before binding, binding removed first) and waits until the
 * API server acts on it, probed with dry runs in `ns` (an opted-in namespace). */
export async function setWebhooks(kubeconfig: string, ns: string, webhooks: Admission, present: boolean) {
  if (present) await kubectl.apply(kubeconfig, webhooks);
  else
    for (const w of [...webhooks].reverse())
      await kubectl.run(kubeconfig, ["delete", w.kind.toLowerCase(), w.metadata.name, "--ignore-not-found"]);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const called = await webhooksCalled(ns);
    if (called.mutating === present && called.validating === present) return;
    if (Date.now() > deadline)
      throw new Error(`the API server did not see the webhooks ${present ? "added" : "removed"}`);
    await sleep(100);
  }
}

/**
 * Part 1: `count` creates one after another on each side, in alternating blocks (with, without,
 * without, with, ...). Leaves the webhooks registered, as it found them.
 */
export async function sideBySide(
  kubeconfig: string,
  webhooks: Admission,
  count: number,
  { dryRun, admissionPid }: { dryRun: boolean; admissionPid?: number } = { dryRun: false },
): Promise<Result[]> {
  // CPU as work (decision 0043): the API server's and the module's, each block's to its side.
  const apiserverPid = controlPlanePids(kubeconfig).get("kube-apiserver");
  const cpuNow = async () => ({
    apiserver:
      apiserverPid !== undefined
        ? cpuSeconds(apiserverPid)
        : ((await apiServerLoad(kubeconfig)).get("process cpu")?.seconds ?? NaN),
    module: cpuSeconds(admissionPid),
  });
  const cpu = { with: { apiserver: 0, module: 0 }, without: { apiserver: 0, module: 0 } };
  const times = { with: [] as number[], without: [] as number[] };
  let before: Load = new Map();
  let after: Load | undefined;
  await inSandboxNamespace("bench-admission", async (ns) => {
    // A few creates first: the API server's and the module's first calls pay for warming up.
    await setWebhooks(kubeconfig, ns, webhooks, true);
    for (let i = 0; i < 10; i++) await kubeRequest("POST", sandboxesPath(ns, dryRun), applied(`warm-${i}`, ns));
    before = await apiServerLoad(kubeconfig);
    const blocks = Math.ceil(count / BLOCK) * 2;
    let present = true;
    for (let b = 0; b < blocks; b++) {
      const withWebhooks = b % 4 === 0 || b % 4 === 3;
      if (withWebhooks !== present) {
        await setWebhooks(kubeconfig, ns, webhooks, withWebhooks);
        present = withWebhooks;
      }
      const side = withWebhooks ? times.with : times.without;
      const n = Math.min(BLOCK, count - side.length);
      const c0 = await cpuNow();
      for (let i = 0; i < n; i++) {
        const name = `${withWebhooks ? "w" : "o"}-${side.length}`;
        const t = performance.now();
        await kubeRequest("POST", sandboxesPath(ns, dryRun), applied(name, ns));
        side.push(performance.now() - t);
      }
      const c1 = await cpuNow();
      const spent = cpu[withWebhooks ? "with" : "without"];
      spent.apiserver += c1.apiserver - c0.apiserver;
      spent.module += c1.module - c0.module;
      // The webhook calls counted are the with side's alone: read before the next toggle.
      if (withWebhooks && side.length === count) after = await apiServerLoad(kubeconfig);
    }
    if (!present) await setWebhooks(kubeconfig, ns, webhooks, true);
  });
  const w = sorted(times.with);
  const o = sorted(times.without);
  // The API server's own timing of the with side's calls (its counters, bench/apiserver-load.ts).
  const meanMs = (key: string) => {
    const [b0, b1] = [before.get(key), (after ?? before).get(key)];
    const calls = (b1?.count ?? 0) - (b0?.count ?? 0);
    return round((((b1?.seconds ?? 0) - (b0?.seconds ?? 0)) / Math.max(1, calls)) * 1000);
  };
  const perCreate = (seconds: number) => round((seconds * 1000) / count);
  const b = "admission";
  // Dry runs (quiet_*): admission whole (policy, webhook, schema) with nothing stored, so no
  // reconcile, scheduler or kwok work of earlier creates shares the two cores with the one measured.
  const q = dryRun ? "quiet_" : "";
  return [
    { bench: b, metric: `${q}sequential_creates_each_side`, value: count, unit: "count" },
    { bench: b, metric: `${q}create_with_webhooks_p50_ms`, value: round(percentile(w, 50)), unit: "ms" },
    { bench: b, metric: `${q}create_with_webhooks_p99_ms`, value: round(percentile(w, 99)), unit: "ms" },
    { bench: b, metric: `${q}create_without_webhooks_p50_ms`, value: round(percentile(o, 50)), unit: "ms" },
    { bench: b, metric: `${q}create_without_webhooks_p99_ms`, value: round(percentile(o, 99)), unit: "ms" },
    {
      bench: b,
      metric: `${q}admission_added_p50_ms`,
      value: round(percentile(w, 50) - percentile(o, 50)),
      unit: "ms",
      target: "<= 5",
    },
    {
      bench: b,
      metric: `${q}admission_added_p99_ms`,
      value: round(percentile(w, 99) - percentile(o, 99)),
      unit: "ms",
      target: "<= 15",
    },
    // The API server's own timing of its webhook calls (mean, every call of the with side, the
    // operator's pod creates included): the round trip as it sees it.
    { bench: b, metric: `${q}apiserver_validating_call_mean_ms`, value: meanMs("webhook validating"), unit: "ms" },
    // CPU per create as work (decision 0043): the API server's on each side, what admission adds
    // to it, and the module's own per review (the with side's; it answers none on the other).
    {
      bench: b,
      metric: `${q}apiserver_cpu_ms_per_create_with_webhooks`,
      value: perCreate(cpu.with.apiserver),
      unit: "ms",
    },
    {
      bench: b,
      metric: `${q}apiserver_cpu_ms_per_create_without_webhooks`,
      value: perCreate(cpu.without.apiserver),
      unit: "ms",
    },
    {
      bench: b,
      metric: `${q}apiserver_cpu_ms_added_by_admission_per_create`,
      value: perCreate(cpu.with.apiserver - cpu.without.apiserver),
      unit: "ms",
    },
    // Each create on the with side is one review (the Sandbox's; the operator's pod creates skip
    // the webhook, decision 0029); the probes between blocks fall outside the blocks' CPU.
    ...(admissionPid !== undefined
      ? [{ bench: b, metric: `${q}admission_module_cpu_ms_per_review`, value: perCreate(cpu.with.module), unit: "ms" }]
      : []),
    // The API server's timing of the Sandbox defaults policy, per check (decision 0026).
    {
      bench: b,
      metric: `${q}apiserver_defaults_policy_mean_ms`,
      value: meanMs(`policy ${SANDBOX_DEFAULTS}`),
      unit: "ms",
    },
  ];
}

/**
 * Waits until no namespace is being deleted: a namespace an earlier bench or test left, its
 * Sandboxes and pods being collected, keeps both cores busy and would be counted as admission.
 */
async function quietCluster(timeoutMs = 10 * 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const list = await kubeRequest<{ items: { metadata: { name: string }; status?: { phase?: string } }[] }>(
      "GET",
      "/api/v1/namespaces",
    );
    const deleting = list.items.filter((n) => n.status?.phase === "Terminating").map((n) => n.metadata.name);
    if (!deleting.length) return;
    if (Date.now() > deadline) throw new Error(`namespaces still being deleted: ${deleting.join(", ")}`);
    await sleep(2000);
  }
}

const IDLE_MS = 6_000;
const IDLE_CREATES = 8;

/**
 * Part 1b: what a pause costs admission. The API server keeps an idle webhook connection 90 s; a
 * server that closes it sooner (Node's default: 5 s) makes the next create open a new TLS
 * connection. Dry-run creates (nothing stored, nothing reconciled), each after a 6 s pause, against
 * as many back to back, with admission registered and then without it: a pause slows every create
 * a little (caches, the API server's own connections), so what admission adds after a pause is the
 * difference of the two differences. Leaves admission registered, as it found it.
 */
async function afterIdle(kubeconfig: string, webhooks: Admission): Promise<Result[]> {
  return inSandboxNamespace("bench-admission-idle", (ns) => idleSides(kubeconfig, webhooks, ns));
}

async function idleSides(kubeconfig: string, webhooks: Admission, ns: string): Promise<Result[]> {
  const create = async (name: string) => {
    const t = performance.now();
    await kubeRequest("POST", sandboxesPath(ns, true), applied(name, ns));
    return performance.now() - t;
  };
  const side = async () => {
    const idle: number[] = [];
    const busy: number[] = [];
    for (let i = 0; i < IDLE_CREATES; i++) {
      await sleep(IDLE_MS);
      idle.push(await create(`idle-${i}`));
      busy.push(await create(`busy-${i}`));
    }
    return [percentile(sorted(idle), 50), percentile(sorted(busy), 50)];
  };
  const [i50, b50] = await side();
  await setWebhooks(kubeconfig, ns, webhooks, false);
  const [oi50, ob50] = await side().finally(() => setWebhooks(kubeconfig, ns, webhooks, true));
  const b = "admission";
  return [
    { bench: b, metric: "dry_run_create_after_6s_idle_p50_ms", value: round(i50), unit: "ms" },
    { bench: b, metric: "dry_run_create_back_to_back_p50_ms", value: round(b50), unit: "ms" },
    { bench: b, metric: "without_admission_after_6s_idle_p50_ms", value: round(oi50), unit: "ms" },
    { bench: b, metric: "without_admission_back_to_back_p50_ms", value: round(ob50), unit: "ms" },
    { bench: b, metric: "idle_added_p50_ms", value: round(i50 - b50 - (oi50 - ob50)), unit: "ms", target: "<= 1" },
  ];
}

export async function admission(kubeconfig: string): Promise<Result[]> {
  // A run right after a burst measured the deletion of its thousands of pods too (real creates
  // 34 ms instead of 18-25 ms without admission).
  await earlierRunsGone();
  const port = 3446;
  // At the default log level (info, as deployed and as `npm start` runs it), unlike the other
  // benches: what a review costs includes what it logs.
  const op = await startLocalOperator({
    kubeconfig,
    stateDir: join(CACHE_DIR, "bench-admission"),
    port,
    logs: "file",
    logLevel: process.env.BENCH_LOG_LEVEL ?? "info",
  });
  try {
    const { apiPath, admission: webhooks } = admissionOf(op, port);
    const lines = () => (op.logFile ? readFileSync(op.logFile, "utf8").split("\n").length : NaN);
    const linesBefore = lines();
    // First, on a quiet cluster: the sequential creates leave a namespace of them being deleted.
    await quietCluster();
    // BENCH_ADMISSION_IDLE=0 leaves out the pauses (about two minutes) when only the rest is wanted.
    const idle = process.env.BENCH_ADMISSION_IDLE === "0" ? [] : await afterIdle(kubeconfig, webhooks);
    const admissionPid = op.admission.pid;
    const quiet = await sideBySide(kubeconfig, webhooks, CREATES, { dryRun: true, admissionPid });
    const sequential = await sideBySide(kubeconfig, webhooks, CREATES, { dryRun: false, admissionPid });
    // The module's own time per review during the sequential creates (Pepr's summary so far), and
    // the lines it logged per review answered (reconciles' lines included).
    const afterSequential = await scrape(port, op.caPem);
    const reviews = sumMetric(afterSequential, "pepr_jr2_admission_duration_count");
    const linesPerReview = round((lines() - linesBefore) / Math.max(1, reviews));
    const serverSequential = (q: string) =>
      round(sumMetric(afterSequential, "pepr_jr2_admission_duration", { quantile: q }));
    const agent = new Agent({ connect: { ca: op.caPem, servername: "localhost" }, connections: CONCURRENCY });
    const directNs = `bench-admission-direct-${randomUUID().slice(0, 6)}`;
    const direct = (kind: "validate") => async (i: number) => {
      const res = await request(`https://127.0.0.1:${port}/${kind}/${apiPath}`, {
        method: "POST",
        dispatcher: agent,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(review(kind, i, directNs)),
      });
      const body = (await res.body.json()) as { response?: { allowed?: boolean } };
      if (res.statusCode !== 200 || body.response?.allowed !== true) {
        throw new Error(`${kind} answered ${res.statusCode}: ${JSON.stringify(body).slice(0, 300)}`);
      }
    };
    // The Repo the bench's Sandboxes name (admission wants one of their namespace, decision 0046),
    // named by its key as the Orchestrator names its Repos: one LIST by name per review.
    const repo = { apiVersion: "core.jr2.dev/v1alpha1", kind: "Repo", metadata: { name: "example-a1b2" } };
    // In an opted-in namespace of its own: admission refuses a Sandbox create anywhere else (decision 0067).
    await kubeRequest("POST", "/api/v1/namespaces", sandboxNamespace(directNs));
    await kubeRequest("POST", paths.repos(directNs), {
      ...repo,
      spec: { url: "https://example.com/org/a.git" },
    }).catch((err: unknown) => {
      if (!(err instanceof ApiError && err.status === 409)) throw err;
    });
    const validate = await load(TOTAL, CONCURRENCY, direct("validate"));
    const through = await load(TOTAL, CONCURRENCY, (i) =>
      kubeRequest("POST", sandboxesPath(directNs, true), sandbox(`bench-api-${i}`, directNs)),
    );
    await agent.close();
    await kubeRequest("DELETE", `/api/v1/namespaces/${directNs}`).catch(() => undefined);
    // The module's own timing of each review, from its arrival to its answer (Pepr's summaries).
    const metrics = await scrape(port, op.caPem);
    const server = (name: string, q: string) => round(sumMetric(metrics, name, { quantile: q }));
    const b = "admission";
    const figures = (what: string, t: number[], target?: string): Result[] => [
      { bench: b, metric: `${what}_p50_ms`, value: round(percentile(t, 50)), unit: "ms" },
      {
        bench: b,
        metric: `${what}_p99_ms`,
        value: round(percentile(t, 99)),
        unit: "ms",
        ...(target ? { target } : {}),
      },
    ];
    return [
      ...sequential,
      ...quiet,
      ...idle,
      { bench: b, metric: "sequential_webhook_server_p50_ms", value: serverSequential("0.5"), unit: "ms" },
      { bench: b, metric: "sequential_webhook_server_p99_ms", value: serverSequential("0.99"), unit: "ms" },
      {
        bench: b,
        metric: "log_lines_per_review",
        value: linesPerReview,
        unit: "count",
        target: `< 1 at ${process.env.BENCH_LOG_LEVEL ?? "info"}`,
      },
      { bench: b, metric: "requests_each", value: TOTAL, unit: "count" },
      { bench: b, metric: "concurrency", value: CONCURRENCY, unit: "count" },
      ...figures("webhook_validate_round_trip", validate),
      // Both kinds together: jr2_admission_duration times every review the module answered.
      { bench: b, metric: "webhook_server_p50_ms", value: server("pepr_jr2_admission_duration", "0.5"), unit: "ms" },
      {
        bench: b,
        metric: "webhook_server_p99_ms",
        value: server("pepr_jr2_admission_duration", "0.99"),
        unit: "ms",
        target: "<= 10",
      },
      ...figures("api_server_dry_run_create", through),
    ];
  } finally {
    await op.stop();
  }
}
