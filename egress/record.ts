// Every decision recorded (docs/decisions/0051): a bounded log per Sandbox (the newest entries, the
// oldest dropped first; dropped whole when the Sandbox goes), counters for Prometheus, and a Warning
// Event `EgressRefused` on the Sandbox the first time a host is refused for it, written in the
// background so a slow API server never holds an answer. No path, no header, no credential: a log
// entry is host, port, decision, reason, bytes, time and duration.
import { EGRESS_CONNECTIONS_METRIC, type EgressDecision, type EgressLogEntry } from "../api/egress-point";
import { refKey, type SandboxRef } from "./index";

/** Hosts remembered per Sandbox for the first-refusal Event: past this, no more Events for it
 * (the log and the counters still say each refusal). */
export const REFUSED_HOSTS_MAX = 256;
/** Event writes in flight at once: past this, an Event is dropped (and counted), never queued. */
export const EVENTS_IN_FLIGHT_MAX = 64;

/** A fixed-size ring: the newest `size` entries, oldest first. */
class Ring<T> {
  readonly #items: T[] = [];
  #next = 0;
  constructor(readonly size: number) {}
  push(item: T): void {
    if (this.#items.length < this.size) this.#items.push(item);
    else this.#items[this.#next] = item;
    this.#next = (this.#next + 1) % this.size;
  }
  toArray(): T[] {
    return this.#items.length < this.size
      ? [...this.#items]
      : [...this.#items.slice(this.#next), ...this.#items.slice(0, this.#next)];
  }
}

/** Writes the EgressRefused Event for `host`; one per Sandbox and host across replicas (decision 0076). */
export type EventWriter = (ref: SandboxRef, message: string, host: string) => Promise<void>;

type Log = (level: "info" | "warn", message: string, fields?: Record<string, unknown>) => void;

export class EgressRecord {
  readonly #logs = new Map<string, Ring<EgressLogEntry>>();
  readonly #refusedHosts = new Map<string, Set<string>>();
  readonly #decisions = new Map<string, number>();
  #bytesOut = 0;
  #bytesIn = 0;
  #current = 0;
  #eventsInFlight = 0;
  #eventsWritten = 0;
  #eventsFailed = 0;
  #eventsDropped = 0;

  constructor(readonly opts: { logEntries: number; writeEvent: EventWriter; log: Log }) {}

  #count(decision: EgressDecision, reason?: string): void {
    const key = reason ? `${decision}\u0000${reason}` : decision;
    this.#decisions.set(key, (this.#decisions.get(key) ?? 0) + 1);
  }

  #append(ref: SandboxRef | undefined, entry: EgressLogEntry): void {
    if (!ref) return;
    const key = refKey(ref);
    let ring = this.#logs.get(key);
    if (!ring) this.#logs.set(key, (ring = new Ring(this.opts.logEntries)));
    ring.push(entry);
  }

  /** A refusal: counted, logged for its Sandbox (if any), and its host's first refusal said by an Event. */
  refused(ref: SandboxRef | undefined, host: string, port: number, reason: string, message: string): void {
    this.#count("refused", reason);
    this.#append(ref, {
      time: new Date().toISOString(),
      host,
      port,
      decision: "refused",
      reason,
      bytesOut: 0,
      bytesIn: 0,
      durationMs: 0,
    });
    // A limit's refusals are a flood's, not a list's: they are counted and logged, never an Event.
    if (!ref || reason === "limit") return;
    const key = refKey(ref);
    let hosts = this.#refusedHosts.get(key);
    if (!hosts) this.#refusedHosts.set(key, (hosts = new Set()));
    if (hosts.has(host) || hosts.size >= REFUSED_HOSTS_MAX) return;
    hosts.add(host);
    this.#event(ref, message, host);
  }

  /** Allowed by the list, but no connection was made. */
  unreachable(ref: SandboxRef, host: string, port: number, reason: string, durationMs: number): void {
    this.#count("unreachable", reason);
    this.#append(ref, {
      time: new Date().toISOString(),
      host,
      port,
      decision: "unreachable",
      reason,
      bytesOut: 0,
      bytesIn: 0,
      durationMs,
    });
  }

  /** An allowed connection made: counted now; logged with its bytes when it closes. */
  opened(): void {
    this.#count("allowed");
    this.#current += 1;
  }

  closed(ref: SandboxRef, host: string, port: number, started: number, bytesOut: number, bytesIn: number): void {
    this.#current = Math.max(0, this.#current - 1);
    this.#bytesOut += bytesOut;
    this.#bytesIn += bytesIn;
    this.#append(ref, {
      time: new Date(started).toISOString(),
      host,
      port,
      decision: "allowed",
      bytesOut,
      bytesIn,
      durationMs: Date.now() - started,
    });
  }

  /** A Sandbox's entries, oldest first ([] for one that has made none). */
  logOf(ref: SandboxRef): EgressLogEntry[] {
    return this.#logs.get(refKey(ref))?.toArray() ?? [];
  }

  /** A Sandbox gone: its log and its remembered hosts dropped. */
  forget(ref: SandboxRef): void {
    this.#logs.delete(refKey(ref));
    this.#refusedHosts.delete(refKey(ref));
  }

  get logs(): number {
    return this.#logs.size;
  }

  #event(ref: SandboxRef, message: string, host: string): void {
    if (this.#eventsInFlight >= EVENTS_IN_FLIGHT_MAX) {
      this.#eventsDropped += 1;
      return;
    }
    this.#eventsInFlight += 1;
    // Not awaited: the answer is already on its way.
    this.opts
      .writeEvent(ref, message, host)
      .then(
        () => (this.#eventsWritten += 1),
        (err: unknown) => {
          this.#eventsFailed += 1;
          this.opts.log("warn", "the EgressRefused Event was not written", {
            sandbox: refKey(ref),
            err: String((err as Error)?.message ?? err).slice(0, 300),
          });
        },
      )
      .finally(() => (this.#eventsInFlight -= 1));
  }

  /** Prometheus text (version 0.0.4). */
  metrics(extra: { sandboxes: number; pods: number; corrections?: number }): string {
    const lines: string[] = [];
    const m = EGRESS_CONNECTIONS_METRIC;
    lines.push(`# HELP ${m} Connections and absolute-form requests by decision (and reason).`, `# TYPE ${m} counter`);
    if (!this.#decisions.has("allowed")) lines.push(`${m}{decision="allowed"} 0`);
    for (const [key, n] of [...this.#decisions].sort()) {
      const [decision, reason] = key.split("\u0000");
      lines.push(`${m}{decision="${decision}"${reason ? `,reason="${reason}"` : ""}} ${n}`);
    }
    const one = (name: string, type: string, help: string, value: number) =>
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name} ${value}`);
    one("jr2_egress_bytes_out_total", "counter", "Bytes sent upstream on closed allowed connections.", this.#bytesOut);
    one(
      "jr2_egress_bytes_in_total",
      "counter",
      "Bytes received from upstream on closed allowed connections.",
      this.#bytesIn,
    );
    one("jr2_egress_connections_current", "gauge", "Allowed connections open now.", this.#current);
    one("jr2_egress_events_total", "counter", "EgressRefused Events written.", this.#eventsWritten);
    one(
      "jr2_egress_events_failed_total",
      "counter",
      "EgressRefused Events the API server did not take.",
      this.#eventsFailed,
    );
    one(
      "jr2_egress_events_dropped_total",
      "counter",
      "EgressRefused Events dropped: too many in flight.",
      this.#eventsDropped,
    );
    one("jr2_egress_sandboxes", "gauge", "Sandboxes the index holds.", extra.sandboxes);
    one("jr2_egress_pods", "gauge", "Sandbox pods the index holds.", extra.pods);
    one(
      "jr2_egress_watch_corrections_total",
      "counter",
      "Changes a periodic relist found that its watch had not delivered (a stalled or late watch).",
      extra.corrections ?? 0,
    );
    return lines.join("\n") + "\n";
  }
}
