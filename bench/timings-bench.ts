// Benchmark: the small latencies the tests once bounded with a clock (a test waits on the condition
// itself; how long it took is a figure, measured here, never a pass or a fail of the suite). Each
// target is the bound its test used to hold, so a regression past it still shows (met: false):
//   - the scripted model (dev/scripted-model.ts): a step with no delay, answered and streamed whole
//     (dev-scripted-model.test.ts's "< 380 ms");
//   - the Harness's bash tool (harness/agents/tools.ts): its timeout and an abort, each to the call's
//     end with the group killed, and a call whose background job keeps running
//     (harness-pi-agent.test.ts's "< 5 s" and "< 2.5 s");
//   - a conversation log's held read (harness/agents/log.ts), from the append to its answer
//     (harness-log.test.ts's "< 5 s");
//   - the Orchestrator's event-loop delay max (orchestrator/orchestrator-metrics.ts) over a quiet
//     50 ms window after a scrape (orchestrator-metrics.test.ts's "< 0.1 s").
// BENCH_TIMINGS_RUNS (default 20) runs of each; p50 and p99.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { startScriptedModel } from "../dev/scripted-model";
import { ConversationLog } from "../harness/agents/log";
import { bashTool } from "../harness/agents/tools";
import { EVENT_LOOP_DELAY_MAX, OrchestratorMetrics } from "../orchestrator/orchestrator-metrics";
import type { Result } from "./sandbox-burst-bench";
import { percentile, round, sleep, sorted } from "./stats";

async function times(n: number, one: () => Promise<number>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await one());
  return sorted(out);
}

const failed = (p: Promise<unknown>) =>
  p.then(
    () => {
      throw new Error("expected the call to fail");
    },
    () => undefined,
  );

export async function timingsBench(runs = Number(process.env.BENCH_TIMINGS_RUNS ?? 20)): Promise<Result[]> {
  const out: Result[] = [];
  const figure = (metric: string, values: number[], target: string, unit = "ms") => {
    out.push({ bench: "timings", metric: `${metric}_p50_${unit}`, value: round(percentile(values, 50)), unit, target });
    out.push({ bench: "timings", metric: `${metric}_p99_${unit}`, value: round(percentile(values, 99)), unit, target });
  };

  const model = await startScriptedModel({ script: [{ text: "fast" }], perConversation: true });
  try {
    figure(
      "scripted_model_undelayed_answer",
      await times(runs, async () => {
        const t = performance.now();
        const res = await fetch(`${model.baseUrl}/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ messages: [{ role: "user", content: "go" }], stream: true }),
        });
        await res.text();
        return performance.now() - t;
      }),
      "< 380",
    );
  } finally {
    await model.stop();
  }

  const root = mkdtempSync(join(tmpdir(), "jr2-timings-"));
  try {
    const timeout = 300;
    figure(
      "bash_timeout_kill_after_timeout",
      await times(Math.min(runs, 5), async () => {
        const t = performance.now();
        await failed(bashTool({ root, bashTimeoutMs: timeout }).execute("c", { command: "sleep 30 | cat" }));
        return performance.now() - t - timeout;
      }),
      "< 5000",
    );
    figure(
      "bash_abort_kill",
      await times(Math.min(runs, 5), async () => {
        const abort = new AbortController();
        const run = failed(bashTool({ root }).execute("c", { command: "sleep 30" }, abort.signal));
        await sleep(50);
        const t = performance.now();
        abort.abort();
        await run;
        return performance.now() - t;
      }),
      "< 5000",
    );
    figure(
      "bash_background_job_call",
      await times(Math.min(runs, 5), async () => {
        const t = performance.now();
        await bashTool({ root }).execute("c", { command: "sleep 3 & echo started" });
        return performance.now() - t;
      }),
      "< 2500",
    );
    let n = 0;
    figure(
      "log_held_read_wake",
      await times(runs, async () => {
        const log = new ConversationLog(join(root, `log-${n++}`, "coder", "iid.jsonl"));
        log.append({ kind: "turn", submissionId: "s1" });
        const pending = log.read(1, 60_000, () => false);
        await sleep(5);
        const t = performance.now();
        log.append({ kind: "working", note: "still working" });
        await pending;
        return performance.now() - t;
      }),
      "< 5000",
    );
  } finally {
    rmSync(root, { recursive: true, force: true });
  }

  const metrics = new OrchestratorMetrics();
  try {
    figure(
      "orchestrator_event_loop_delay_max_quiet_window",
      await times(runs, async () => {
        metrics.render([]);
        await sleep(50);
        const line = metrics
          .render([])
          .split("\n")
          .find((l) => l.startsWith(`${EVENT_LOOP_DELAY_MAX} `));
        return Number(line?.split(" ").pop());
      }),
      "< 0.1",
      "s",
    );
  } finally {
    metrics.close();
  }
  return out;
}
