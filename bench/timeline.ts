// Where a warm workspace's create -> ready goes on the real node, from what the cluster
// records: one timeline per pod, marks in ms since the epoch, each taken from the source with the
// finest clock that has it. All of them run on this machine, so one clock:
//   watches      this process's kubectl watches (ms as delivered): the Sandbox, what the
//                Orchestrator writes beside it, the pod, its conditions and each container's
//                state and readiness as the kubelet reports them, the Service, the Repo's fetch.
//   containerd   its log (ns): the pod sandbox (pause, CNI, the node guard) asked and up, each
//                container created and started.
//   kubelet      its log (µs): the pod's first volume (it has the pod), and when it observed every
//                container running (its PLEG saw them; the start-up latency tracker's line).
//   containers   the pod's own log lines (ms): the Harness listening, the first /healthz it
//                answered (a kubelet probe) and the /attach; the Custodian listening.
//   Orchestrator its log lines (ms): each transition of the workspace.
// Condition timestamps (1 s) are not used: every step above is seen finer. Pure but for watchJson.
import { spawn } from "node:child_process";
import { closeSync, existsSync, fstatSync, openSync, readSync, statSync } from "node:fs";
import { createInterface } from "node:readline";
import { kubectlPath } from "../dev/kubectl";

export type Marks = Record<string, number>;

/** Marks by pod (or Sandbox: one name), the first sighting of each kept. */
export class Timelines {
  readonly #marks = new Map<string, Marks>();

  mark(name: string, key: string, at: number): void {
    if (!Number.isFinite(at)) return;
    const m = this.#marks.get(name) ?? {};
    if (m[key] === undefined) m[key] = at;
    this.#marks.set(name, m);
  }

  get(name: string): Marks {
    return this.#marks.get(name) ?? {};
  }
}

/**
 * Every object of `resource` in `ns` as kubectl's watch delivers it, with when this process got it.
 * With --output-watch-events kubectl prints each event as one line of JSON.
 */
export function watchJson(
  kubeconfig: string,
  resource: string,
  ns: string,
  on: (type: string, obj: KubeObject, at: number) => void,
  extra: string[] = [],
): () => void {
  const child = spawn(
    kubectlPath(),
    ["get", resource, "-n", ns, "--watch", "--output-watch-events", "-o", "json", ...extra],
    { env: { ...process.env, KUBECONFIG: kubeconfig }, stdio: ["ignore", "pipe", "ignore"] },
  );
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const at = Date.now();
    try {
      const e = JSON.parse(line) as { type: string; object: KubeObject };
      on(e.type, e.object, at);
    } catch {
      // not an event
    }
  });
  return () => child.kill("SIGTERM");
}

export type KubeObject = {
  metadata?: { name?: string; labels?: Record<string, string>; creationTimestamp?: string };
  spec?: { nodeName?: string };
  status?: {
    nodeName?: string;
    phase?: string;
    conditions?: Array<{ type: string; status: string }>;
    containerStatuses?: Array<{ name: string; ready?: boolean; state?: { running?: { startedAt?: string } } }>;
    nodes?: Record<string, { fetchedAt?: string }>;
  };
};

/** A pod as the watch delivers it: bound, each condition True, each container running and ready. */
export function markPod(t: Timelines, pod: KubeObject, at: number): void {
  const name = pod.metadata?.name;
  if (!name) return;
  t.mark(name, "pod", at);
  if (pod.spec?.nodeName) t.mark(name, "bound", at);
  for (const c of pod.status?.conditions ?? []) if (c.status === "True") t.mark(name, `cond:${c.type}`, at);
  for (const c of pod.status?.containerStatuses ?? []) {
    if (c.state?.running) t.mark(name, `running:${c.name}`, at);
    if (c.ready) t.mark(name, `ready:${c.name}`, at);
  }
}

/** A Sandbox as the watch delivers it: seen, placed on a node (status.nodeName), Ready. */
export function markSandbox(t: Timelines, sbx: KubeObject, at: number): void {
  const name = sbx.metadata?.name;
  if (!name) return;
  t.mark(name, "sandbox", at);
  if (sbx.status?.nodeName) t.mark(name, "sbx_node", at);
  for (const c of sbx.status?.conditions ?? []) if (c.status === "True") t.mark(name, `sbx:${c.type}`, at);
}

/** The size of a log file now (0 when absent): where the next run's lines start. */
export const logSize = (file: string) => (existsSync(file) ? statSync(file).size : 0);

/** What a log file gained since `from`. */
export function logSince(file: string, from: number): string {
  if (!existsSync(file)) return "";
  const fd = openSync(file, "r");
  try {
    const size = fstatSync(fd).size;
    if (size <= from) return "";
    const buf = Buffer.alloc(size - from);
    readSync(fd, buf, 0, buf.length, from);
    return buf.toString("utf8");
  } finally {
    closeSync(fd);
  }
}

/** An RFC 3339 time with any number of fractional digits, in ms (Date.parse takes three at most). */
export const isoMs = (s: string) => Date.parse(s.replace(/(\.\d{3})\d*/, "$1"));

/**
 * containerd's log lines about one pod (logfmt, its own escaping of quotes): the pod sandbox asked
 * for (`sandbox_req`) and up, and per container `create:`, `created:`, `start:` and `started:`.
 * The last attempt counts: a sandbox asked for again starts the containers over.
 */
export function containerdMarks(text: string, ns: string, pod: string): Marks {
  const m: Marks = {};
  const q = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const runPod = new RegExp(
    `RunPodSandbox for name:\\\\"${q(pod)}\\\\" uid:\\\\"[^\\\\]*\\\\" namespace:\\\\"${q(ns)}\\\\"(?:.*?returns sandbox id \\\\"([0-9a-f]+)\\\\")?`,
  );
  let sandbox: string | undefined;
  const names = new Map<string, string>();
  for (const line of text.split("\n")) {
    const time = /^time="([^"]+)"/.exec(line);
    if (!time) continue;
    const at = isoMs(time[1]);
    const run = runPod.exec(line);
    if (run) {
      if (run[1]) {
        sandbox = run[1];
        m.sandbox_up = at;
      } else {
        for (const k of Object.keys(m)) delete m[k];
        names.clear();
        m.sandbox_req = at;
      }
      continue;
    }
    if (!sandbox) continue;
    const create =
      /CreateContainer within sandbox \\"([0-9a-f]+)\\" for (?:container )?name:\\"([^\\]+)\\"(?:.*returns container id \\"([0-9a-f]+)\\")?/.exec(
        line,
      );
    if (create && create[1] === sandbox) {
      if (create[3]) {
        names.set(create[3], create[2]);
        m[`created:${create[2]}`] ??= at;
      } else m[`create:${create[2]}`] ??= at;
      continue;
    }
    const start = /StartContainer for \\"([0-9a-f]+)\\"( returns successfully)?/.exec(line);
    const c = start && names.get(start[1]);
    if (c) m[`${start[2] ? "started" : "start"}:${c}`] ??= at;
  }
  const started = Object.keys(m).filter((k) => k.startsWith("started:"));
  if (started.length) m.containers_up = Math.max(...started.map((k) => m[k]));
  return m;
}

/** A klog header's time (`I1206 09:28:18.320097`, local time, no year) in ms. */
function klogMs(line: string, year: number): number | undefined {
  const h = /^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{3})/.exec(line);
  if (!h) return undefined;
  const [, mo, d, hh, mm, ss, ms] = h.map(Number);
  return new Date(year, mo - 1, d, hh, mm, ss, ms).getTime();
}

/**
 * The kubelet's log lines about one pod: `kl_volumes`, its first volume (the kubelet has the pod and
 * starts on its mounts; a pod with no volume has none), and `kl_running`, when it observed every
 * container running (pod_startup_latency_tracker's observedRunningTime: after its PLEG saw them).
 */
export function kubeletMarks(text: string, ns: string, pod: string, year = new Date().getFullYear()): Marks {
  const m: Marks = {};
  const ref = ` pod="${ns}/${pod}"`;
  for (const line of text.split("\n")) {
    if (!line.includes(ref)) continue;
    if (m.kl_volumes === undefined && line.includes("VerifyControllerAttachedVolume started")) {
      const at = klogMs(line, year);
      if (at !== undefined) m.kl_volumes = at;
    }
    if (line.includes('"Observed pod startup duration"')) {
      const r = /observedRunningTime="(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?) \+0000 UTC/.exec(line);
      if (r) m.kl_running = isoMs(`${r[1]}T${r[2]}Z`);
    }
  }
  return m;
}

/**
 * A companion's JSON log lines (lib/log.ts: each with its time) as marks under `prefix`:
 * `listening`, the Custodian's `ready` (its values loaded), the first /healthz answered 200
 * (`probe_ok`: the Harness logs every request as it ends, the kubelet's probes included), and the
 * first /attach (`attach_end`, and `attach_start` from its duration).
 */
export function containerLogMarks(text: string, prefix: string): Marks {
  const m: Marks = {};
  for (const line of text.split("\n")) {
    let e: { time?: string; message?: string; path?: string; status?: number; ms?: number };
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    const at = e.time ? Date.parse(e.time) : NaN;
    if (!Number.isFinite(at)) continue;
    const set = (k: string, v: number) => (m[`${prefix}:${k}`] ??= v);
    if (e.message === "listening" || e.message === "ready") set(e.message, at);
    if (e.path === "/healthz" && e.status === 200) set("probe_ok", at);
    if (e.path === "/attach") {
      set("attach_end", at);
      set("attach_start", at - (e.ms ?? 0));
    }
  }
  return m;
}

/** The Orchestrator's transitions of one workspace (its log lines `workspace <state>`), `orch:<state>`. */
export function orchestratorMarks(lines: readonly string[], workspace: string): Marks {
  const m: Marks = {};
  for (const line of lines) {
    if (!line.includes(workspace)) continue;
    try {
      const e = JSON.parse(line) as { time?: string; message?: string; workspace?: string };
      const state = /^workspace (\w+)$/.exec(e.message ?? "")?.[1];
      if (e.workspace === workspace && state && e.time) m[`orch:${state}`] ??= Date.parse(e.time);
    } catch {
      // not a JSON line
    }
  }
  return m;
}

/** A span of a timeline: `name` from mark `from` to mark `to`. */
export type Span = readonly [name: string, from: string, to: string];

/** Each span's length in ms; NaN where a mark is missing. */
export const spans = (m: Marks, list: readonly Span[]): Record<string, number> =>
  Object.fromEntries(list.map(([name, from, to]) => [name, (m[to] ?? NaN) - (m[from] ?? NaN)]));

/** The warm workspace's create -> ready as consecutive parts: they add up to the total. */
export const WORKSPACE_PARTS: readonly Span[] = [
  // POST /v1/workspaces sent -> the Sandbox on the watch: the Orchestrator's answer, its compose,
  // the Repo made sure of, the Sandbox's POST through admission.
  ["create", "post", "sandbox"],
  // -> the pod on the watch: the operator's watch, its reconcile, the pod's POST.
  ["operator", "sandbox", "pod"],
  ["schedule", "pod", "bound"],
  // -> containerd asked for the pod sandbox: the kubelet's watch, admission, the volumes.
  ["kubelet", "bound", "sandbox_req"],
  // pause, the CNI, the node guard.
  ["pod_sandbox", "sandbox_req", "sandbox_up"],
  // each container created and started, one after the other (`containers_up`: the last started).
  ["containers", "sandbox_up", "containers_up"],
  // -> the kubelet observed them all running (its start-up latency tracker's time).
  ["pleg", "containers_up", "kl_running"],
  // -> pod Ready on the watch: each container's boot and its readiness probe (each every 1 s; each
  // companion binds its port first and answers the probe it held once it serves, decision 0062).
  ["probes", "kl_running", "cond:Ready"],
  // -> the Sandbox Ready on the watch: the operator's status, held while a Repo is not fetched.
  ["sandbox_ready", "cond:Ready", "sbx:Ready"],
  // -> the Orchestrator's `attaching`: its own watch.
  ["orchestrator_sees", "sbx:Ready", "orch:attaching"],
  // -> `ready`: the Harness's /attach through the Sandbox's Service.
  ["attach", "orch:attaching", "orch:ready"],
  // -> this process saw `ready`: the workspace's event stream, as a waiting Machine reads it.
  ["client_sees", "orch:ready", "done"],
];

/** Spans within and across the parts: what each part is made of. */
export const WORKSPACE_DETAILS: readonly Span[] = [
  ["api_answer", "post", "orch:placing"],
  ["place_writes", "orch:placing", "sandbox"],
  // The token Secret and the Custodian's ConfigMap, written one after the other after the Sandbox.
  ["owned_writes", "sandbox", "owned"],
  ["service", "sandbox", "service"],
  // The operator's status naming the node: the cache agent's ask for a fetch.
  ["placed_status", "bound", "sbx_node"],
  // Negative: the fetch came before the ask (a new Repo is cloned at once).
  ["repo_fetch", "sbx_node", "repo_seen"],
  // Negative: the fetch was in before the pod was Ready (it held nothing).
  ["repo_after_pod_ready", "cond:Ready", "repo_seen"],
  ["kubelet_admit", "bound", "kl_volumes"],
  ["volumes", "kl_volumes", "sandbox_req"],
  ["harness_start", "create:harness", "started:harness"],
  ["custodian_start", "create:custodian", "started:custodian"],
  ["harness_boot", "started:harness", "harness:listening"],
  ["custodian_boot", "started:custodian", "custodian:listening"],
  // The Harness's port bound -> the first probe it answered: the rest of its load (the probe waits
  // for it, decision 0062), and a period if a probe was missed.
  ["harness_probe_wait", "harness:listening", "harness:probe_ok"],
  ["harness_ready_seen", "harness:probe_ok", "ready:harness"],
  ["custodian_ready_seen", "custodian:listening", "ready:custodian"],
  ["harness_attach", "harness:attach_start", "harness:attach_end"],
];

/** The plain pod's create -> Ready, in the same parts as far as it has them. */
export const PLAIN_PARTS: readonly Span[] = [
  ["create", "post", "pod"],
  ["schedule", "pod", "bound"],
  ["kubelet", "bound", "sandbox_req"],
  ["pod_sandbox", "sandbox_req", "sandbox_up"],
  ["containers", "sandbox_up", "containers_up"],
  // No probe: Ready with the status that says every container runs (the kubelet's own line about
  // it comes seconds later for these pods, so its PLEG is not told apart here).
  ["ready", "containers_up", "cond:Ready"],
];
