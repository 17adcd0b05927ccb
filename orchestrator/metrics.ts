// The Orchestrator's Prometheus text for GET /metrics: workspaces by state, transitions, waits and
// renewals. Small enough to write out by hand rather than carry a client library.
import { WORKSPACE_STATES, type WorkspaceEvent, type WorkspaceView } from "./api";

export class OrchestratorMetrics {
  readonly #transitions = new Map<string, number>();
  #waits = 0;
  #renewals = 0;
  #renewFailures = 0;

  observe(event: WorkspaceEvent): void {
    if (event.type === "transition") this.#transitions.set(event.to, (this.#transitions.get(event.to) ?? 0) + 1);
    else if (event.type === "wait") this.#waits++;
    else if (event.type === "renewed") this.#renewals++;
    else if (event.type === "renew_failed") this.#renewFailures++;
  }

  render(views: readonly WorkspaceView[]): string {
    const byState = new Map<string, number>(WORKSPACE_STATES.map((s) => [s, 0]));
    for (const v of views) byState.set(v.state, (byState.get(v.state) ?? 0) + 1);
    const lines = [
      "# HELP jr2_orchestrator_workspaces Workspaces this Orchestrator holds, by lifecycle state.",
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
    ];
    return lines.join("\n") + "\n";
  }
}
