// Benchmark: admission round trips under load. 5,000 AdmissionReview requests at 32 concurrent
// straight to the module's /validate and /mutate endpoints, then the same number of Sandbox creates
// through the API server (server-side dry run, so the API server calls both webhooks and stores
// nothing). Reports p50/p99 of each, and the module's own server-side timing (pepr_validate).
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Agent, request } from "undici";
import cfg from "../package.json";
import { kubeRequest } from "../lib/kube";
import { ROOT, localWebhooks } from "../dev/local-operator";
import { benchOperator, scrape, sumMetric, type Result } from "./sandbox-burst";
import { percentile, round } from "./stats";

const TOTAL = Number(process.env.BENCH_ADMISSION_REQUESTS ?? 5000);
const CONCURRENCY = 32;

/** Runs `n` calls of `fn` with `c` in flight; returns each call's latency in ms, sorted. */
async function load(n: number, c: number, fn: (i: number) => Promise<void>): Promise<number[]> {
  const times: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const t = performance.now();
      await fn(i);
      times.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: c }, worker));
  return times.sort((a, b) => a - b);
}

const sandbox = (name: string, namespace: string) => ({
  apiVersion: "core.jr2.dev/v1alpha1",
  kind: "Sandbox",
  metadata: { name, namespace },
  spec: {
    image: "ghcr.io/example/harness:1",
    sidecars: [
      { name: "custodian", image: "ghcr.io/example/custodian:1" },
      { name: "effector", image: "ghcr.io/example/effector:1" },
      { name: "user", image: "ghcr.io/example/user:1" },
    ],
    repos: [{ key: "example-a1b2", url: "https://example.com/org/a.git" }],
    gitCredentials: [{ name: "push-token" }],
  },
});

const review = (kind: "mutate" | "validate", i: number) => ({
  apiVersion: "admission.k8s.io/v1",
  kind: "AdmissionReview",
  request: {
    uid: randomUUID(),
    kind: { group: "core.jr2.dev", version: "v1alpha1", kind: "Sandbox" },
    resource: { group: "core.jr2.dev", version: "v1alpha1", resource: "sandboxes" },
    requestKind: { group: "core.jr2.dev", version: "v1alpha1", kind: "Sandbox" },
    requestResource: { group: "core.jr2.dev", version: "v1alpha1", resource: "sandboxes" },
    name: `bench-${kind}-${i}`,
    namespace: "default",
    operation: "CREATE",
    userInfo: { username: "bench" },
    object: sandbox(`bench-${kind}-${i}`, "default"),
    dryRun: false,
  },
});

export async function admission(kubeconfig: string): Promise<Result[]> {
  const port = 3446;
  const op = await benchOperator(kubeconfig, port, "bench-admission");
  try {
    const manifest = readFileSync(join(ROOT, "dist", `pepr-module-${cfg.pepr.uuid}.yaml`), "utf8");
    const { apiPath } = localWebhooks(manifest, port, op.caPem);
    const agent = new Agent({ connect: { ca: op.caPem, servername: "localhost" }, connections: CONCURRENCY });
    const direct = (kind: "mutate" | "validate") => async (i: number) => {
      const res = await request(`https://127.0.0.1:${port}/${kind}/${apiPath}`, {
        method: "POST",
        dispatcher: agent,
        headers: { "content-type": "application/json" },
        body: JSON.stringify(review(kind, i)),
      });
      const body = (await res.body.json()) as { response?: { allowed?: boolean } };
      if (res.statusCode !== 200 || body.response?.allowed !== true) {
        throw new Error(`${kind} answered ${res.statusCode}: ${JSON.stringify(body).slice(0, 300)}`);
      }
    };
    const validate = await load(TOTAL, CONCURRENCY, direct("validate"));
    const mutate = await load(TOTAL, CONCURRENCY, direct("mutate"));
    const through = await load(TOTAL, CONCURRENCY, (i) =>
      kubeRequest(
        "POST",
        "/apis/core.jr2.dev/v1alpha1/namespaces/default/sandboxes?dryRun=All",
        sandbox(`bench-api-${i}`, "default"),
      ),
    );
    await agent.close();
    // The module's own timing of each review, from its arrival to its answer (Pepr's summaries).
    const metrics = await scrape(port, op.caPem);
    const server = (name: string, q: string) => round(sumMetric(metrics, name, { quantile: q }));
    const b = "admission";
    const figures = (what: string, t: number[], target?: string): Result[] => [
      { bench: b, metric: `${what}_p50_ms`, value: round(percentile(t, 50)), unit: "ms" },
      {
        bench: b,
        metric: `${what}_p99_ms`,
        value: round(percentile(t, 99)),
        unit: "ms",
        ...(target ? { target } : {}),
      },
    ];
    return [
      { bench: b, metric: "requests_each", value: TOTAL, unit: "count" },
      { bench: b, metric: "concurrency", value: CONCURRENCY, unit: "count" },
      ...figures("webhook_validate_round_trip", validate),
      ...figures("webhook_mutate_round_trip", mutate),
      // Both kinds together: jr2_admission_duration times every review the module answered.
      { bench: b, metric: "webhook_server_p50_ms", value: server("pepr_jr2_admission_duration", "0.5"), unit: "ms" },
      {
        bench: b,
        metric: "webhook_server_p99_ms",
        value: server("pepr_jr2_admission_duration", "0.99"),
        unit: "ms",
        target: "<= 10",
      },
      ...figures("api_server_dry_run_create", through),
    ];
  } finally {
    await op.stop();
  }
}
