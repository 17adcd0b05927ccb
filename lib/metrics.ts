// The operator's Prometheus metrics, on the module's own /metrics endpoint through Pepr's
// collector (names get Pepr's `pepr_` prefix). Pepr's counters take no labels, so counts that need
// one (reconciles by result, writes by kind) are gauges that only ever grow.
import { metricsCollector } from "pepr";

const RECONCILES = "jr2_reconciles";
const RECONCILE_SECONDS = "jr2_reconcile_duration";
const PHASES = "jr2_sandboxes";
const DEPTH = "jr2_queue_depth";
const WRITES = "jr2_api_writes";
const ADMISSION = "jr2_admission_duration";
const WRITE_WAIT = "jr2_write_wait";
const WRITE_WAIT_TOTAL = "jr2_write_wait_ms_total";
const FINISH = "jr2_finish_latency";

let registered = false;
function register() {
  if (registered) return;
  registered = true;
  metricsCollector.addGauge(RECONCILES, "Reconciles by controller and result (a count)", ["controller", "result"]);
  metricsCollector.addSummary(RECONCILE_SECONDS, "Reconcile duration in milliseconds");
  metricsCollector.addGauge(PHASES, "Sandboxes by phase", ["phase"]);
  metricsCollector.addGauge(DEPTH, "Keys waiting in a work queue", ["queue"]);
  metricsCollector.addGauge(WRITES, "API writes by kind and verb (a count)", ["what"]);
  metricsCollector.addSummary(ADMISSION, "Admission review processing in milliseconds, from its arrival to its answer");
  metricsCollector.addSummary(WRITE_WAIT, "Milliseconds a write waited on the write limiter (decision 0020)");
  metricsCollector.addSummary(
    FINISH,
    "Milliseconds from the pod event that finishes a Sandbox (Ready, ended, gone) to its status write",
  );
  metricsCollector.addGauge(WRITE_WAIT_TOTAL, "Milliseconds writes waited on the limiter, by lane (a count)", ["lane"]);
}

export const metrics = {
  reconciled(controller: string, result: string, ms: number) {
    register();
    metricsCollector.incGauge(RECONCILES, { controller, result });
    metricsCollector.observeEnd(performance.now() - ms, RECONCILE_SECONDS);
  },
  admitted(ms: number) {
    register();
    metricsCollector.observeEnd(performance.now() - ms, ADMISSION);
  },
  apiWrite(what: string) {
    register();
    metricsCollector.incGauge(WRITES, { what });
  },
  /** A finishing status written; `since` is when its pod event arrived (performance.now()). */
  finished(since: number) {
    register();
    metricsCollector.observeEnd(since, FINISH);
  },
  /** A write waited `ms` for its token in `lane`. */
  writeWaited(lane: string, ms: number) {
    register();
    metricsCollector.observeEnd(performance.now() - ms, WRITE_WAIT);
    if (ms > 0) metricsCollector.incGauge(WRITE_WAIT_TOTAL, { lane }, ms);
  },
  queueDepth(queue: string, depth: number) {
    register();
    // incGauge only adds: add the difference from what was last reported.
    const last = depths.get(queue) ?? 0;
    depths.set(queue, depth);
    // Even a zero difference: it makes the series exist from the first reconcile on.
    metricsCollector.incGauge(DEPTH, { queue }, depth - last);
  },
  /** A Sandbox moved from one phase (undefined: not counted yet) to another (undefined: gone). */
  phase(from: string | undefined, to: string | undefined) {
    register();
    if (from === to) return;
    if (from !== undefined) bump(from, -1);
    if (to !== undefined) bump(to, 1);
  },
};

const depths = new Map<string, number>();

function bump(phase: string, by: number) {
  metricsCollector.incGauge(PHASES, { phase }, by);
}
