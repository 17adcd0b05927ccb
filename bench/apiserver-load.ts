// What the API server served during a stretch of a benchmark, from its own /metrics: requests by
// verb and resource with the time it spent on them, and watch events sent by kind. The sandbox-burst
// bench prints it per Sandbox and per plain pod, so where the control plane's CPU goes is visible
// beside the figures (decision 0020: the cluster, not the operator, is the bottleneck on two cores).
import * as kubectl from "../dev/kubectl";

/** Counters by a readable key: "POST pods", "PATCH sandboxes/status", "watch pods", "webhook validating",
 * "webhook validating <name>" (each webhook's calls, by its name's first label), "policy <name>" (a MutatingAdmissionPolicy's
 * checks), "etcd <operation> <resource>" (the API server's requests to etcd), "apf wait <priority level>"
 * (time requests queued in API Priority and Fairness), "process cpu" (its CPU seconds). */
export type Load = Map<string, { count: number; seconds: number }>;

const LABELS = /(\w+)="([^"]*)"/g;

function labelsOf(line: string): Record<string, string> {
  const out: Record<string, string> = {};
  const inner = line.slice(line.indexOf("{") + 1, line.lastIndexOf("}"));
  for (const m of inner.matchAll(LABELS)) out[m[1]] = m[2];
  return out;
}

/** A webhook's name up to its first dot: Pepr names each "<resource>.pepr-<module uuid>.pepr.dev". */
const webhookName = (name = "") => name.split(".")[0];

/** Parses the counters this file reads out of the API server's metrics text (pure). */
export function parseLoad(text: string): Load {
  const load: Load = new Map();
  const add = (key: string, count: number, seconds: number) => {
    const v = load.get(key) ?? { count: 0, seconds: 0 };
    v.count += count;
    v.seconds += seconds;
    load.set(key, v);
  };
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (!Number.isFinite(value)) continue;
    if (line.startsWith("apiserver_request_total{")) {
      const l = labelsOf(line);
      if (!l.resource || l.verb === "WATCH") continue;
      add(`${l.verb} ${l.resource}${l.subresource ? `/${l.subresource}` : ""}`, value, 0);
    } else if (line.startsWith("apiserver_request_duration_seconds_sum{")) {
      const l = labelsOf(line);
      if (!l.resource || l.verb === "WATCH") continue;
      add(`${l.verb} ${l.resource}${l.subresource ? `/${l.subresource}` : ""}`, 0, value);
    } else if (line.startsWith("process_cpu_seconds_total ")) {
      // The API server's own CPU (decision 0043): what a create costs it, on any cluster.
      add("process cpu", 0, value);
    } else if (line.startsWith("apiserver_watch_events_total{")) {
      add(`watch ${labelsOf(line).resource}`, value, 0);
    } else if (line.startsWith("apiserver_mutating_admission_policy_check_duration_seconds_count{")) {
      add(`policy ${labelsOf(line).policy}`, value, 0);
    } else if (line.startsWith("apiserver_mutating_admission_policy_check_duration_seconds_sum{")) {
      add(`policy ${labelsOf(line).policy}`, 0, value);
    } else if (line.startsWith("apiserver_admission_webhook_admission_duration_seconds_count{")) {
      const l = labelsOf(line);
      add(`webhook ${l.type}`, value, 0);
      add(`webhook ${l.type} ${webhookName(l.name)}`, value, 0);
    } else if (line.startsWith("apiserver_admission_webhook_admission_duration_seconds_sum{")) {
      const l = labelsOf(line);
      add(`webhook ${l.type}`, 0, value);
      add(`webhook ${l.type} ${webhookName(l.name)}`, 0, value);
    } else if (line.startsWith("etcd_request_duration_seconds_count{")) {
      const l = labelsOf(line);
      add(`etcd ${l.operation} ${l.resource}`, value, 0);
    } else if (line.startsWith("etcd_request_duration_seconds_sum{")) {
      const l = labelsOf(line);
      add(`etcd ${l.operation} ${l.resource}`, 0, value);
    } else if (line.startsWith("apiserver_flowcontrol_request_wait_duration_seconds_count{")) {
      add(`apf wait ${labelsOf(line).priority_level}`, value, 0);
    } else if (line.startsWith("apiserver_flowcontrol_request_wait_duration_seconds_sum{")) {
      add(`apf wait ${labelsOf(line).priority_level}`, 0, value);
    }
  }
  return load;
}

export async function apiServerLoad(kubeconfig: string): Promise<Load> {
  return parseLoad(await kubectl.run(kubeconfig, ["get", "--raw", "/metrics"]));
}

/** The busiest keys between two readings, per unit of work, to stderr beside the figures. */
export function printLoad(what: string, before: Load, after: Load, per: number) {
  process.stderr.write(`API server, ${what}:\n  ${describeLoad(before, after, per).join("\n  ")}\n`);
}

/** Each key's calls and milliseconds between two readings, per unit of work (`per`), in the
 * order `after` holds them (pure). */
export function loadDelta(before: Load, after: Load, per: number): Array<{ key: string; count: number; ms: number }> {
  return [...after].map(([key, v]) => {
    const b = before.get(key) ?? { count: 0, seconds: 0 };
    return { key, count: (v.count - b.count) / per, ms: ((v.seconds - b.seconds) * 1000) / per };
  });
}

/** The busiest keys between two readings, per unit of work (`per`), as one line each. */
export function describeLoad(before: Load, after: Load, per: number, top = 20): string[] {
  return loadDelta(before, after, per)
    .filter((r) => r.count > 0.01)
    .sort((a, b) => b.count - a.count)
    .slice(0, top)
    .map((r) => `${r.key}: ${r.count.toFixed(2)}${r.ms > 0 ? ` (${r.ms.toFixed(1)} ms)` : ""}`);
}
