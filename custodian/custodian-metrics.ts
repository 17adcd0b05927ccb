// The Custodian's Prometheus text for GET /metrics: requests by route and outcome, and the time
// upstreams take to answer (to their response headers), by route. Written out by hand, as the
// Orchestrator's are. Routes are the config's (orchestrator, provider/<name>) or the proxy's kinds,
// never a host, so the series stay few.

/** How a request ended: `answered` (the upstream's status passed on), `refused` (a rule),
 * `unreachable` (not forwarded), `failed` (after it may have been sent), `local`, `not_found`. */
export type Outcome = "answered" | "refused" | "unreachable" | "failed" | "local" | "not_found";

const BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300];

type Histogram = { counts: number[]; sum: number; count: number };

export class CustodianMetrics {
  readonly #requests = new Map<string, number>();
  readonly #latency = new Map<string, Histogram>();

  request(route: string, outcome: Outcome): void {
    const key = `route="${route}",outcome="${outcome}"`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
  }

  upstream(route: string, seconds: number): void {
    let h = this.#latency.get(route);
    if (!h) this.#latency.set(route, (h = { counts: BUCKETS.map(() => 0), sum: 0, count: 0 }));
    BUCKETS.forEach((le, i) => {
      if (seconds <= le) h.counts[i]++;
    });
    h.sum += seconds;
    h.count++;
  }

  render(ready: boolean): string {
    const lines = [
      "# HELP jr2_custodian_ready 1 once the config and every held value are loaded.",
      "# TYPE jr2_custodian_ready gauge",
      `jr2_custodian_ready ${ready ? 1 : 0}`,
      "# HELP jr2_custodian_requests_total Requests, by route and outcome.",
      "# TYPE jr2_custodian_requests_total counter",
      ...[...this.#requests].map(([labels, n]) => `jr2_custodian_requests_total{${labels}} ${n}`),
      "# HELP jr2_custodian_upstream_seconds Time from sending a request upstream to its response headers.",
      "# TYPE jr2_custodian_upstream_seconds histogram",
    ];
    for (const [route, h] of this.#latency) {
      BUCKETS.forEach((le, i) =>
        lines.push(`jr2_custodian_upstream_seconds_bucket{route="${route}",le="${le}"} ${h.counts[i]}`),
      );
      lines.push(`jr2_custodian_upstream_seconds_bucket{route="${route}",le="+Inf"} ${h.count}`);
      lines.push(`jr2_custodian_upstream_seconds_sum{route="${route}"} ${h.sum}`);
      lines.push(`jr2_custodian_upstream_seconds_count{route="${route}"} ${h.count}`);
    }
    return lines.join("\n") + "\n";
  }
}
