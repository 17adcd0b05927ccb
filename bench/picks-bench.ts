// Benchmark: what the checks on a Sandbox's pick cost (decision 0042). The Orchestrator's HTTP
// server on loopback, its real Turns and PickStore over in-memory ledgers (no API server, so the
// figures are the route's own work), a turn admitted through a fake Harness, then BENCH_PICKS picks
// (default 2000) posted one after another with the Sandbox token, each answered before the next.
// Twice: with the checks (the pick judged against the admitted turn: its conversation, submission,
// Menu and Allowed picks, the caps and the rate) and without them (a turn source that allows every
// pick, as the route was before the checks), so `checks_added_p50_ms` is what they add at p50.
// And a forged pick's refusal, which writes nothing.
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { picksPath, streamPath } from "../api/agent-protocol";
import { startOrchestratorServer, type Workspaces } from "../orchestrator/http/api-server";
import { MemoryLedgers } from "../orchestrator/agents/ledger-store";
import { PICKS_FORMAT, PickStore, type TurnRecords } from "../orchestrator/agents/pick-store";
import { TURNS_FORMAT, Turns, type HarnessCaller } from "../orchestrator/agents/turns";
import { SubmitTurnBody } from "../api/orchestrator-schemas";
import { sandboxToken, sandboxTokenChecker } from "../orchestrator/tokens";
import type { SandboxWatch } from "../orchestrator/workspaces/sandbox-watch";
import { percentile, round, sorted } from "./stats";
import type { Result } from "./sandbox-burst-bench";

const harness: HarnessCaller = {
  async harness(_name, method, path, sent) {
    if (method === "POST") {
      const [, , agent, iid] = path.split("/").map(decodeURIComponent);
      return {
        status: 202,
        body: {
          streamUrl: streamPath(agent!, iid!),
          offset: 0,
          submissionId: (sent as { submissionId: string }).submissionId,
        },
      };
    }
    return { status: 200, body: { events: [], next: 0, idle: true } };
  },
};

const watch = {
  whenListed: async () => undefined,
  get: (name: string) => ({ metadata: { name, uid: "u1" }, status: { phase: "Ready" } }),
} as unknown as SandboxWatch;

async function run(n: number, checks: boolean): Promise<{ post: number[]; forged: number[] }> {
  const key = randomBytes(32);
  const turns = new Turns({ namespace: "bench", gateway: harness, watch, backend: new MemoryLedgers(TURNS_FORMAT) });
  const open: TurnRecords = { judgePick: async () => undefined, isRunning: async () => true };
  const picks = new PickStore({ watch, turns: checks ? turns : open, backend: new MemoryLedgers(PICKS_FORMAT) });
  const server = await startOrchestratorServer(
    {
      workspaces: { ownerOf: () => undefined } as unknown as Workspaces,
      checkToken: () => undefined,
      metrics: () => "",
      picks,
      turns,
      checkSandboxToken: sandboxTokenChecker(key),
      // The bench posts as fast as it can: its rate is not what is measured.
      sandboxRates: { picks: { perSecond: 1e9, burst: 1e9 }, reads: { perSecond: 1e9, burst: 1e9 } },
    },
    0,
    "127.0.0.1",
  );
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const iid = "ws-bench.c";
  await turns.submit(
    "ws-bench",
    SubmitTurnBody.parse({
      agent: "coder",
      iid,
      message: "bench",
      submissionId: "s1",
      menu: [{ name: "propose", description: "p" }],
      allowed: ["propose"],
    }),
  );
  const headers = { authorization: `Bearer ${sandboxToken(key, "ws-bench")}`, "content-type": "application/json" };
  const post = async (body: unknown) => {
    const t0 = performance.now();
    const res = await request(`${base}${picksPath(iid)}`, { method: "POST", headers, body: JSON.stringify(body) });
    const json = (await res.body.json()) as { deliveryId?: string };
    return { ms: performance.now() - t0, status: res.statusCode, deliveryId: json.deliveryId };
  };
  const times: number[] = [];
  const forged: number[] = [];
  try {
    for (let i = 0; i < n + 50; i++) {
      const r = await post({ pick: "propose", args: { summary: `change ${i}` }, submissionId: "s1", callId: `c${i}` });
      if (r.status !== 202) throw new Error(`pick ${i} answered ${r.status}`);
      if (i >= 50) times.push(r.ms); // the first 50 warm the JIT and the connection
      await picks.answer("ws-bench", r.deliveryId!, "ok");
      if (checks && i % 10 === 0) {
        const f = await post({ pick: "deploy", submissionId: "s1", callId: `f${i}` });
        if (f.status !== 403) throw new Error(`a forged pick answered ${f.status}`);
        if (i >= 50) forged.push(f.ms);
      }
    }
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
  return { post: times, forged };
}

export async function picksBench(): Promise<Result[]> {
  const n = Number(process.env.BENCH_PICKS ?? 2000);
  const without = await run(n, false);
  const withChecks = await run(n, true);
  const p = (xs: number[], q: number) => round(percentile(sorted(xs), q));
  const out = (metric: string, value: number, unit = "ms"): Result => ({ bench: "picks", metric, value, unit });
  return [
    out("pick_post_p50_ms_without_checks", p(without.post, 50)),
    out("pick_post_p99_ms_without_checks", p(without.post, 99)),
    out("pick_post_p50_ms", p(withChecks.post, 50)),
    out("pick_post_p99_ms", p(withChecks.post, 99)),
    out("checks_added_p50_ms", round(p(withChecks.post, 50) - p(without.post, 50))),
    out("forged_pick_refused_p50_ms", p(withChecks.forged, 50)),
    out("picks", n, "count"),
  ];
}
