// The operator's Prometheus metrics, on the collector they are given: in the module, Pepr's (its
// /metrics endpoint; names get Pepr's `pepr_` prefix), which pepr.ts passes in, so lib/ loads no
// framework and a companion may import any of it (decision 0012). Pepr's counters take no labels,
// so counts that need one (reconciles by result, writes by kind) are gauges that only ever grow.

/** The part of a metrics collector these use; Pepr's `metricsCollector` has it. */
export type Collector = {
  addGauge(name: string, help: string, labelNames?: string[]): void;
  addSummary(name: string, help: string): void;
  incGauge(name: string, labels?: Record<string, string>, value?: number): void;
  observeEnd(startTime: number, name?: string): void;
};

const RECONCILES = "jr2_reconciles";
const RECONCILE_SECONDS = "jr2_reconcile_duration";
const PHASES = "jr2_sandboxes";
const DEPTH = "jr2_queue_depth";
const WRITES = "jr2_api_writes";
const ADMISSION = "jr2_admission_duration";
const WRITE_WAIT = "jr2_write_wait";
const WRITE_WAIT_TOTAL = "jr2_write_wait_ms_total";
const FINISH = "jr2_finish_latency";

export type OperatorMetrics = ReturnType<typeof operatorMetrics>;

/** The operator's metrics on `collector`: one per process, as a collector takes each name once. */
export function operatorMetrics(collector: Collector) {
  let registered = false;
  const register = () => {
    if (registered) return;
    registered = true;
    collector.addGauge(RECONCILES, "Reconciles by controller and result (a count)", ["controller", "result"]);
    collector.addSummary(RECONCILE_SECONDS, "Reconcile duration in milliseconds");
    collector.addGauge(PHASES, "Sandboxes by phase", ["phase"]);
    collector.addGauge(DEPTH, "Keys waiting in a work queue", ["queue"]);
    collector.addGauge(WRITES, "API writes by kind and verb (a count)", ["what"]);
    collector.addSummary(ADMISSION, "Admission review processing in milliseconds, from its arrival to its answer");
    collector.addSummary(WRITE_WAIT, "Milliseconds a write waited on the write limiter (decision 0020)");
    collector.addSummary(
      FINISH,
      "Milliseconds from the pod event that finishes a Sandbox (Ready, ended, gone) to its status write",
    );
    collector.addGauge(WRITE_WAIT_TOTAL, "Milliseconds writes waited on the limiter, by lane (a count)", ["lane"]);
  };
  const depths = new Map<string, number>();
  const bump = (phase: string, by: number) => collector.incGauge(PHASES, { phase }, by);

  return {
    reconciled(controller: string, result: string, ms: number) {
      register();
      collector.incGauge(RECONCILES, { controller, result });
      collector.observeEnd(performance.now() - ms, RECONCILE_SECONDS);
    },
    admitted(ms: number) {
      register();
      collector.observeEnd(performance.now() - ms, ADMISSION);
    },
    apiWrite(what: string) {
      register();
      collector.incGauge(WRITES, { what });
    },
    /** A finishing status written; `since` is when its pod event arrived (performance.now()). */
    finished(since: number) {
      register();
      collector.observeEnd(since, FINISH);
    },
    /** A write waited `ms` for its token in `lane`. */
    writeWaited(lane: string, ms: number) {
      register();
      collector.observeEnd(performance.now() - ms, WRITE_WAIT);
      if (ms > 0) collector.incGauge(WRITE_WAIT_TOTAL, { lane }, ms);
    },
    queueDepth(queue: string, depth: number) {
      register();
      // incGauge only adds: add the difference from what was last reported.
      const last = depths.get(queue) ?? 0;
      depths.set(queue, depth);
      // Even a zero difference: it makes the series exist from the first reconcile on.
      collector.incGauge(DEPTH, { queue }, depth - last);
    },
    /** A Sandbox moved from one phase (undefined: not counted yet) to another (undefined: gone). */
    phase(from: string | undefined, to: string | undefined) {
      register();
      if (from === to) return;
      if (from !== undefined) bump(from, -1);
      if (to !== undefined) bump(to, 1);
    },
  };
}
