// The operator's Prometheus metrics on the module's own /metrics endpoint.
import { request } from "node:https";
import { createSandbox, useNamespace, waitFor, waitPhase } from "./support/cluster";

const ns = useNamespace("metrics");

function scrape(): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port: Number(process.env.JR2_OPERATOR_PORT),
        path: "/metrics",
        ca: process.env.JR2_OPERATOR_CA,
        servername: "localhost",
      },
      (res) => {
        let body = "";
        res.on("data", (c) => (body += c));
        res.on("end", () =>
          res.statusCode === 200 ? resolve(body) : reject(new Error(`/metrics: ${res.statusCode}`)),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const sample = (text: string, name: string, labels: string) =>
  Number(
    text
      .split("\n")
      .find((l) => l.startsWith(`${name}{`) && l.includes(labels))
      ?.split(" ")
      .pop() ?? NaN,
  );

describe("the operator's metrics", () => {
  it("count reconciles, writes by kind, Sandboxes by phase, and time reconciles", async () => {
    const before = await scrape();
    await createSandbox(ns.name, "counted");
    await waitPhase(ns.name, "counted", "Ready");
    const after = await waitFor(
      "the metrics to show the new Sandbox",
      scrape,
      (t) =>
        sample(t, "pepr_jr2_api_writes", 'what="Pod.create"') >
        (sample(before, "pepr_jr2_api_writes", 'what="Pod.create"') || 0),
    );
    expect(sample(after, "pepr_jr2_api_writes", 'what="Service.create"')).toBeGreaterThanOrEqual(1);
    expect(sample(after, "pepr_jr2_api_writes", 'what="Sandbox.status"')).toBeGreaterThanOrEqual(1);
    expect(sample(after, "pepr_jr2_reconciles", 'controller="sandbox",result="success"')).toBeGreaterThanOrEqual(1);
    expect(sample(after, "pepr_jr2_sandboxes", 'phase="Ready"')).toBeGreaterThanOrEqual(1);
    expect(after).toMatch(/^pepr_jr2_queue_depth\{queue="sandbox"\} \d+$/m);
    expect(after).toMatch(/^pepr_jr2_reconcile_duration_count \d+$/m);
    // Time spent waiting on the write limiter (decision 0020): every write observed, waited or not.
    expect(after).toMatch(/^pepr_jr2_write_wait_count \d+$/m);
    expect(Number(/^pepr_jr2_write_wait_count (\d+)$/m.exec(after)![1])).toBeGreaterThanOrEqual(3);
  });
});
