// The Orchestrator's /metrics text: the event-loop delay read from node's histogram (the pure part),
// and a loop actually held up showing in the next scrape, and not in the one after.
import {
  EVENT_LOOP_DELAY,
  EVENT_LOOP_DELAY_MAX,
  EVENT_LOOP_RESOLUTION_MS,
  eventLoopDelayLines,
  OrchestratorMetrics,
} from "../../orchestrator/orchestrator-metrics";
import { eventually } from "../support/eventually";

const value = (text: string, sample: string) => {
  const line = text.split("\n").find((l) => l.startsWith(`${sample} `));
  if (line === undefined) throw new Error(`no sample ${sample} in:\n${text}`);
  return Number(line.split(" ").pop());
};

describe("eventLoopDelayLines", () => {
  const ms = 1e6;
  const histogram = (p50: number, p99: number, max: number, count = 100) => ({
    percentile: (p: number) => (p === 50 ? p50 : p99),
    max,
    count,
  });

  it("reports how late the timer ran: the recorded interval less the resolution, in seconds", () => {
    const text = eventLoopDelayLines(histogram(10.5 * ms, 13 * ms, 160 * ms), 10).join("\n");
    expect(value(text, `${EVENT_LOOP_DELAY}{quantile="0.5"}`)).toBeCloseTo(0.0005, 9);
    expect(value(text, `${EVENT_LOOP_DELAY}{quantile="0.99"}`)).toBeCloseTo(0.003, 9);
    expect(value(text, EVENT_LOOP_DELAY_MAX)).toBeCloseTo(0.15, 9);
    expect(value(text, `${EVENT_LOOP_DELAY}_count`)).toBe(100);
    expect(text).toContain(`# TYPE ${EVENT_LOOP_DELAY} summary`);
    expect(text).toContain(`# TYPE ${EVENT_LOOP_DELAY_MAX} gauge`);
  });

  it("never reports a negative delay, and zero when there is no sample", () => {
    const early = eventLoopDelayLines(histogram(9 * ms, 9.9 * ms, 9.9 * ms), 10).join("\n");
    expect(value(early, EVENT_LOOP_DELAY_MAX)).toBe(0);
    const none = eventLoopDelayLines(histogram(0, 0, 0, 0), 10).join("\n");
    expect(value(none, `${EVENT_LOOP_DELAY}{quantile="0.99"}`)).toBe(0);
    expect(value(none, EVENT_LOOP_DELAY_MAX)).toBe(0);
  });
});

describe("OrchestratorMetrics", () => {
  it("shows a blocked event loop in the scrape after the block, then starts a new window", async () => {
    const metrics = new OrchestratorMetrics();
    try {
      // The monitor measures from one run of its timer to the next, and a scrape forgets its last
      // run, so a block shows only once the timer has run between the scrape and the block and again
      // after it. Timer order does not promise that on every try: each try is a real 120 ms block,
      // repeated until a scrape shows one, within the deadline.
      const blocked = await eventually("a scrape showing a 120 ms block", async () => {
        metrics.render([]);
        await new Promise((r) => setTimeout(r, EVENT_LOOP_RESOLUTION_MS + 1));
        const until = Date.now() + 120;
        while (Date.now() < until) {
          // held up, as a synchronous piece of work would hold it
        }
        await new Promise((r) => setImmediate(r));
        await new Promise((r) => setTimeout(r, 1));
        const text = metrics.render([]);
        return value(text, EVENT_LOOP_DELAY_MAX) >= 0.1 ? text : undefined;
      });
      expect(value(blocked, EVENT_LOOP_DELAY_MAX)).toBeGreaterThanOrEqual(0.1);
      expect(value(blocked, `${EVENT_LOOP_DELAY}_count`)).toBeGreaterThan(0);
      expect(blocked).toContain('jr2_orchestrator_workspaces{state="ready"} 0');
      // The scrape started a new window: the next, before the timer can run, holds nothing.
      // (How late an idle loop runs is a figure, not a bound: bench/timings-bench.ts.)
      const next = metrics.render([]);
      expect([value(next, EVENT_LOOP_DELAY_MAX), value(next, `${EVENT_LOOP_DELAY}_count`)]).toEqual([0, 0]);
    } finally {
      metrics.close();
    }
  });
});

// Decision 0079: what each replica holds, and how often shards move.
describe("the shard lines", () => {
  it("show the shards held and count each gained and lost", () => {
    const metrics = new OrchestratorMetrics();
    try {
      const start = metrics.render([]);
      expect(value(start, "jr2_orchestrator_shards_held")).toBe(0);
      expect(start).toContain("# TYPE jr2_orchestrator_shards_held gauge");
      expect(start).toContain("# TYPE jr2_orchestrator_shard_moves_total counter");
      metrics.shardMoves({ gained: [0, 1, 2], lost: [] });
      metrics.shardsHeld(3);
      metrics.shardMoves({ gained: [], lost: [2] });
      metrics.shardsHeld(2);
      const text = metrics.render([]);
      expect(value(text, "jr2_orchestrator_shards_held")).toBe(2);
      expect(value(text, 'jr2_orchestrator_shard_moves_total{direction="gained"}')).toBe(3);
      expect(value(text, 'jr2_orchestrator_shard_moves_total{direction="lost"}')).toBe(1);
    } finally {
      metrics.close();
    }
  });
});
