// The Orchestrator's Prometheus text for GET /metrics: workspaces by state, transitions, waits and
// renewals, the API tokens and TLS files' reads, the shards of workspaces this replica holds and
// how often they move (decision 0079), and how late its event loop runs. Small enough to
// write out by hand rather than carry a client library. Served twice (decision 0076): on the API's
// GET /metrics to an admin token, and on a port of its own with no token at all, which the
// Orchestrator's NetworkPolicy opens to the installation's monitoring namespaces alone.
import http from "node:http";
import { monitorEventLoopDelay, type ELDHistogram } from "node:perf_hooks";
import { WORKSPACE_STATES, type WorkspaceEvent, type WorkspaceView } from "../api/orchestrator-schemas";

/** How often the event-loop monitor's timer asks to run (node's default). */
export const EVENT_LOOP_RESOLUTION_MS = 10;

export const EVENT_LOOP_DELAY = "jr2_orchestrator_event_loop_delay_seconds";
export const EVENT_LOOP_DELAY_MAX = "jr2_orchestrator_event_loop_delay_max_seconds";

/** What the event-loop lines read of node's histogram (nanoseconds). */
export type DelayHistogram = Pick<ELDHistogram, "percentile" | "max" | "count">;

/**
 * The event-loop delay lines from node's histogram. The histogram records the time between two
 * runs of a timer due every `resolutionMs`, so the delay, how late the loop ran it, is that minus
 * the resolution (never below zero). A histogram with no sample reads as zero delay.
 */
export function eventLoopDelayLines(h: DelayHistogram, resolutionMs = EVENT_LOOP_RESOLUTION_MS): string[] {
  const late = (ns: number) => (h.count > 0 ? Math.max(0, ns / 1e6 - resolutionMs) / 1000 : 0);
  return [
    `# HELP ${EVENT_LOOP_DELAY} How late the event loop ran a timer due every ${resolutionMs} ms, since the previous scrape.`,
    `# TYPE ${EVENT_LOOP_DELAY} summary`,
    `${EVENT_LOOP_DELAY}{quantile="0.5"} ${late(h.percentile(50))}`,
    `${EVENT_LOOP_DELAY}{quantile="0.99"} ${late(h.percentile(99))}`,
    `${EVENT_LOOP_DELAY}_count ${h.count}`,
    `# HELP ${EVENT_LOOP_DELAY_MAX} The longest event-loop delay since the previous scrape.`,
    `# TYPE ${EVENT_LOOP_DELAY_MAX} gauge`,
    `${EVENT_LOOP_DELAY_MAX} ${late(h.max)}`,
  ];
}

export class OrchestratorMetrics {
  readonly #transitions = new Map<string, number>();
  #waits = 0;
  #renewals = 0;
  #renewFailures = 0;
  readonly #misbehaved = new Map<string, number>();
  /** Effects entering each state, by `kind/state`. */
  readonly #effects = new Map<string, number>();
  readonly #tokenReads = { ok: 0, refused: 0 };
  #tokensRefused = false;
  readonly #tlsReads = { ok: 0, refused: 0 };
  #tlsRefused = false;
  #shardsHeld = 0;
  readonly #shardMoves = { gained: 0, lost: 0 };
  /** Sampled from construction; reset at each render (as prom-client's event-loop lag is), so each
   * scrape reports the window since the one before. Its timer does not keep the process alive. */
  readonly #loop = monitorEventLoopDelay({ resolution: EVENT_LOOP_RESOLUTION_MS });

  constructor() {
    this.#loop.enable();
  }

  observe(event: WorkspaceEvent): void {
    if (event.type === "transition") this.#transitions.set(event.to, (this.#transitions.get(event.to) ?? 0) + 1);
    else if (event.type === "wait") this.#waits++;
    else if (event.type === "renewed") this.#renewals++;
    else if (event.type === "renew_failed") this.#renewFailures++;
  }

  /** A workspace's Harness broke a bound (decision 0042); counted by reason, not by workspace (the
   * workspace is named in its Event and the log, where a label per workspace would cost series). */
  harnessMisbehaved(reason: string): void {
    this.#misbehaved.set(reason, (this.#misbehaved.get(reason) ?? 0) + 1);
  }

  /** An Effect entered a state (orchestrator/effects/effects.ts): counted by kind and state, never by
   * workspace or id (those are in the log), so the series stay few. */
  effect(kind: string, state: string): void {
    const key = `${kind}/${state}`;
    this.#effects.set(key, (this.#effects.get(key) ?? 0) + 1);
  }

  /** The API tokens file read again (api-tokens-file.ts): "refused" keeps the last good tokens, and
   * the gauge says so until a good file replaces it. */
  apiTokensRead(outcome: "ok" | "refused"): void {
    this.#tokenReads[outcome]++;
    this.#tokensRefused = outcome === "refused";
  }

  /** The API's TLS files read again (tls-files.ts), as the tokens file is. */
  tlsRead(outcome: "ok" | "refused"): void {
    this.#tlsReads[outcome]++;
    this.#tlsRefused = outcome === "refused";
  }

  /** The shards this replica holds now (decision 0079), set from each ownership change. */
  shardsHeld(count: number): void {
    this.#shardsHeld = count;
  }

  /** Shards this replica gained or lost in one ownership change: counted, so moves show as a rate. */
  shardMoves(change: { gained: readonly number[]; lost: readonly number[] }): void {
    this.#shardMoves.gained += change.gained.length;
    this.#shardMoves.lost += change.lost.length;
  }

  /** `views`: the workspaces this replica owns (registry.list()), so several replicas' gauges sum. */
  render(views: readonly WorkspaceView[]): string {
    const byState = new Map<string, number>(WORKSPACE_STATES.map((s) => [s, 0]));
    for (const v of views) byState.set(v.state, (byState.get(v.state) ?? 0) + 1);
    const lines = [
      "# HELP jr2_orchestrator_workspaces Workspaces this Orchestrator replica owns, by lifecycle state.",
      "# TYPE jr2_orchestrator_workspaces gauge",
      ...[...byState].map(([s, n]) => `jr2_orchestrator_workspaces{state="${s}"} ${n}`),
      "# HELP jr2_orchestrator_transitions_total Lifecycle transitions, by the state entered.",
      "# TYPE jr2_orchestrator_transitions_total counter",
      ...[...this.#transitions].map(([s, n]) => `jr2_orchestrator_transitions_total{to="${s}"} ${n}`),
      "# HELP jr2_orchestrator_waits_total Waits reported (a node, a quota, a Repo, a container).",
      "# TYPE jr2_orchestrator_waits_total counter",
      `jr2_orchestrator_waits_total ${this.#waits}`,
      "# HELP jr2_orchestrator_renewals_total Keepalive renewals written.",
      "# TYPE jr2_orchestrator_renewals_total counter",
      `jr2_orchestrator_renewals_total ${this.#renewals}`,
      "# HELP jr2_orchestrator_renew_failures_total Keepalive renewals that failed (retried).",
      "# TYPE jr2_orchestrator_renew_failures_total counter",
      `jr2_orchestrator_renew_failures_total ${this.#renewFailures}`,
      "# HELP jr2_orchestrator_harness_misbehaviour_total Harness answers refused: too large, too slow, not what was asked.",
      "# TYPE jr2_orchestrator_harness_misbehaviour_total counter",
      ...[...this.#misbehaved].map(([r, n]) => `jr2_orchestrator_harness_misbehaviour_total{reason="${r}"} ${n}`),
      "# HELP jr2_orchestrator_effects_total Effects entering a state (queued, sent, succeeded, failed, unknown), by kind.",
      "# TYPE jr2_orchestrator_effects_total counter",
      ...[...this.#effects].map(([k, n]) => {
        const [kind, state] = k.split("/");
        return `jr2_orchestrator_effects_total{kind="${kind}",state="${state}"} ${n}`;
      }),
      "# HELP jr2_orchestrator_api_tokens_reads_total Changes of the API tokens file read: ok (in use) or refused (the last good kept).",
      "# TYPE jr2_orchestrator_api_tokens_reads_total counter",
      `jr2_orchestrator_api_tokens_reads_total{result="ok"} ${this.#tokenReads.ok}`,
      `jr2_orchestrator_api_tokens_reads_total{result="refused"} ${this.#tokenReads.refused}`,
      "# HELP jr2_orchestrator_api_tokens_file_refused 1 while the API tokens file is refused and the last good tokens serve.",
      "# TYPE jr2_orchestrator_api_tokens_file_refused gauge",
      `jr2_orchestrator_api_tokens_file_refused ${this.#tokensRefused ? 1 : 0}`,
      "# HELP jr2_orchestrator_tls_reads_total Changes of the API's TLS certificate and key read: ok (served) or refused (the pair before kept).",
      "# TYPE jr2_orchestrator_tls_reads_total counter",
      `jr2_orchestrator_tls_reads_total{result="ok"} ${this.#tlsReads.ok}`,
      `jr2_orchestrator_tls_reads_total{result="refused"} ${this.#tlsReads.refused}`,
      "# HELP jr2_orchestrator_tls_files_refused 1 while the API's TLS files are refused and the pair before is served.",
      "# TYPE jr2_orchestrator_tls_files_refused gauge",
      `jr2_orchestrator_tls_files_refused ${this.#tlsRefused ? 1 : 0}`,
      "# HELP jr2_orchestrator_shards_held Shards of workspaces this Orchestrator replica holds (their Leases).",
      "# TYPE jr2_orchestrator_shards_held gauge",
      `jr2_orchestrator_shards_held ${this.#shardsHeld}`,
      "# HELP jr2_orchestrator_shard_moves_total Shards this replica gained or lost.",
      "# TYPE jr2_orchestrator_shard_moves_total counter",
      `jr2_orchestrator_shard_moves_total{direction="gained"} ${this.#shardMoves.gained}`,
      `jr2_orchestrator_shard_moves_total{direction="lost"} ${this.#shardMoves.lost}`,
      ...eventLoopDelayLines(this.#loop),
    ];
    this.#loop.reset();
    return lines.join("\n") + "\n";
  }

  /** Stops the event-loop monitor. */
  close(): void {
    this.#loop.disable();
  }
}

/** The metrics port's default in the manifests (container port `metrics`, decision 0076). */
export const ORCHESTRATOR_METRICS_PORT = 9090;

/** The metrics listener: GET /metrics with no bearer (the text names no workspace, tenant or token:
 * counts by state and reason only), nothing else. Its reach is the NetworkPolicy's to bound. */
export function metricsServer(render: () => string | Promise<string>): http.Server {
  return http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const refuse = (status: number, code: string, message: string) =>
      res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ error: { code, message } }));
    if (path !== "/metrics") return refuse(404, "not_found", `no route ${path}: this port serves GET /metrics only`);
    if (req.method !== "GET" && req.method !== "HEAD") return refuse(405, "method_not_allowed", "use GET");
    Promise.resolve()
      .then(render)
      .then(
        (text) => res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(text),
        () => refuse(500, "internal", "the metrics could not be rendered"),
      );
  });
}
