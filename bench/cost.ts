// Cost per Sandbox as work (decision 0043): API requests and writes, CPU seconds of the processes
// that serve a create, and the bytes etcd writes. Work does not change with how loaded the shared
// two cores are, where wall times do (decisions 0026 and 0027 found the round trips set by the
// machine), so a run compares with another run.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Load } from "./apiserver-load";

/** Verbs that write (apiserver_request_total's labels; server-side apply is APPLY). */
const WRITE_VERBS = new Set(["POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"]);

/**
 * Writes that come at a rate of their own whatever the work (node and leader heartbeats): left
 * out of the writes a Sandbox costs, so a longer phase does not count more of them.
 */
const HEARTBEATS = new Set(["leases", "nodes", "nodes/status"]);

/** The requests between two readings, by "VERB resource[/subresource]", per unit of work (pure). */
export function requestsPer(before: Load, after: Load, per: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, v] of after) {
    const verb = key.slice(0, key.indexOf(" "));
    if (verb !== verb.toUpperCase()) continue; // watch events, webhook calls, policy checks
    const n = (v.count - (before.get(key)?.count ?? 0)) / per;
    if (n > 0) out.set(key, n);
  }
  return out;
}

/** The writes among requests, heartbeats left out (pure). */
export function writesOf(requests: Map<string, number>): { total: number; byKey: Map<string, number> } {
  const byKey = new Map<string, number>();
  for (const [key, n] of requests) {
    const [verb, resource] = key.split(" ");
    if (WRITE_VERBS.has(verb!) && !HEARTBEATS.has(resource!)) byKey.set(key, n);
  }
  return { total: [...byKey.values()].reduce((a, b) => a + b, 0), byKey };
}

const TICK_S = 1 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim() || 100);

/** The CPU time a process has used (user + system, /proc/<pid>/stat), in seconds; NaN when gone. */
export function cpuSeconds(pid: number | undefined): number {
  return cpuTimes(pid).own;
}

/** A process's CPU time (user + system) in seconds, its own and that of the children it has waited
 * for (cutime + cstime: a git or jr2-confine it ran and reaped), from /proc/<pid>/stat; NaN when gone. */
export function cpuTimes(pid: number | undefined): { own: number; children: number } {
  if (pid === undefined) return { own: NaN, children: NaN };
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return {
      own: (Number(fields[11]) + Number(fields[12])) * TICK_S,
      children: (Number(fields[13]) + Number(fields[14])) * TICK_S,
    };
  } catch {
    return { own: NaN, children: NaN };
  }
}

/** The CPU a process has used so far, in ms: each of its threads' time on a CPU (schedstat, in ns),
 * V8's compiler and GC threads with the main one. */
export function threadCpuMs(pid: number): number {
  let ns = 0;
  for (const t of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // A thread that ended between the listing and the read: its time is gone with it.
    }
  }
  return ns / 1e6;
}

/** The local control plane's components, as kwokctl records them beside the kubeconfig
 * (dev/cluster/cluster.sh): name -> pid. Empty for a cluster elsewhere. */
export function controlPlanePids(kubeconfig: string): Map<string, number> {
  const out = new Map<string, number>();
  const dir = join(dirname(kubeconfig), "pids");
  for (const name of ["kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok-controller"]) {
    const file = join(dir, `${name}.pid`);
    if (!existsSync(file)) continue;
    const pid = Number(readFileSync(file, "utf8").trim());
    if (Number.isInteger(pid) && existsSync(`/proc/${pid}`)) out.set(name, pid);
  }
  return out;
}

/** A flag's value on a process's command line (`--name=value` or `--name value`). */
function flagOf(pid: number, name: string): string | undefined {
  const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  for (let i = 0; i < args.length; i++) {
    if (args[i] === `--${name}`) return args[i + 1];
    if (args[i]!.startsWith(`--${name}=`)) return args[i]!.slice(name.length + 3);
  }
  return undefined;
}

/** Where etcd serves its metrics over plain HTTP, or why it cannot be read here. */
export function etcdMetricsUrl(pid: number | undefined): { url?: string; why?: string } {
  if (pid === undefined) return { why: "no local etcd process (a cluster elsewhere)" };
  const given = [flagOf(pid, "listen-metrics-urls"), flagOf(pid, "listen-client-urls")].filter((u) => u);
  // Neither flag: etcd's own default, plain HTTP on the loopback.
  const urls = (given.length ? given : ["http://127.0.0.1:2379"])
    .flatMap((u) => u!.split(","))
    .filter((u) => u.startsWith("http://"));
  if (!urls.length) return { why: "etcd serves metrics over TLS only (client certificates this bench does not hold)" };
  return { url: `${urls[0]!.replace("0.0.0.0", "127.0.0.1")}/metrics` };
}

/** etcd's own counters this bench reads: bytes written to its WAL, and its database's size. */
export type EtcdReading = { walBytes: number; dbBytes: number };

/** Parses etcd's metrics text (pure). */
export function parseEtcd(text: string): EtcdReading {
  const value = (name: string) => {
    const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
    return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : NaN;
  };
  return { walBytes: value("etcd_disk_wal_write_bytes_total"), dbBytes: value("etcd_mvcc_db_total_size_in_bytes") };
}

export async function readEtcd(url: string | undefined): Promise<EtcdReading | undefined> {
  if (!url) return undefined;
  try {
    const res = await fetch(url);
    return res.ok ? parseEtcd(await res.text()) : undefined;
  } catch {
    return undefined;
  }
}

/** A figure's target as a bound, and whether the value meets it (pure). */
export function judged(value: number, op: "<=" | ">=", bound: number, note = "") {
  return {
    target: `${op} ${bound}${note ? ` ${note}` : ""}`,
    met: Number.isFinite(value) && (op === "<=" ? value <= bound : value >= bound),
  };
}

/**
 * A figure with `met` filled in where its target is one plain bound ("<= 20", "< 1 at info",
 * "<= 1.3 with no limit"), as every bench prints it; a target of several clauses is left to its
 * bench (pure).
 */
export function withVerdict<T extends { value: number; target?: string; met?: boolean }>(r: T): T {
  if (r.met !== undefined || !r.target || r.target.includes(",")) return r;
  const m = /^(<=|<|>=|>) (-?[\d.]+)\b/.exec(r.target);
  if (!m) return r;
  const bound = Number(m[2]);
  const ok = { "<=": r.value <= bound, "<": r.value < bound, ">=": r.value >= bound, ">": r.value > bound }[m[1]!];
  return { ...r, met: Number.isFinite(r.value) && !!ok };
}
