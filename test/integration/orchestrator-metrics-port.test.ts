// The Orchestrator's metrics with no admin token (decision 0076): its process (dev/local-orchestrator.ts)
// with JR2_METRICS_PORT serves GET /metrics there to anyone (the NetworkPolicy bounds who, in the
// manifests), while the API's GET /metrics stays an admin token's. And the egress ceiling at create:
// a workspace's egress rule outside the pod config's egress.ceiling is refused before anything is
// written, naming the field path and the fix.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { ORCHESTRATOR_ENV } from "../../api/env";
import { freePort, type LocalOrchestrator, startLocalOrchestrator } from "../../dev/local-orchestrator";
import { useNamespace } from "./support/cluster";
import { orchestratorApi } from "./support/orchestrator-api";

const ns = useNamespace("metrics-port");
const tmp = mkdtempSync(join(tmpdir(), "jr2-metrics-port-"));
const TENANT_TOKEN = randomBytes(24).toString("hex");
let orch: LocalOrchestrator;
let metricsPort: number;

beforeAll(async () => {
  const dir = join(tmp, "orchestrator");
  mkdirSync(dir, { recursive: true });
  // An admin's token and a tenant's (orchestrator/tokens.ts: `<token>` and `<token> <tenant>`).
  writeFileSync(join(dir, "api-tokens"), `${randomBytes(24).toString("hex")}\n${TENANT_TOKEN} team-a\n`, {
    mode: 0o600,
  });
  const podConfig = join(tmp, "pod.yaml");
  writeFileSync(podConfig, JSON.stringify({ egress: { ceiling: ["*.example.com:443"] } }));
  metricsPort = await freePort("127.0.0.1");
  orch = await startLocalOrchestrator({
    kubeconfig: process.env.KUBECONFIG!,
    namespace: ns.name,
    dir,
    credentials: [],
    reposRoot: join(tmp, "repos"),
    env: { [ORCHESTRATOR_ENV.metricsPort]: String(metricsPort), [ORCHESTRATOR_ENV.podConfigFile]: podConfig },
  });
}, 120_000);

afterAll(async () => {
  await orch?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

const api = orchestratorApi(
  () => orch.url,
  () => orch.token,
);

describe("the Orchestrator's metrics port (decision 0076)", () => {
  it("answers GET /metrics with no token, and nothing else", async () => {
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(await res.text()).toMatch(/^# TYPE jr2_orchestrator_workspaces gauge$/m);
    expect((await fetch(`http://127.0.0.1:${metricsPort}/v1/workspaces`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { method: "POST" })).status).toBe(405);
  });

  it("keeps the API's GET /metrics an admin token's: none is 401, a tenant's 403, an admin's 200", async () => {
    expect((await api("GET", "/metrics", undefined, "")).status).toBe(401);
    const tenant = await api<{ error: { code: string; message: string } }>("GET", "/metrics", undefined, TENANT_TOKEN);
    expect(tenant.status).toBe(403);
    expect(tenant.body.error.message).toMatch(/metrics port \(9090\)/);
    const admin = await fetch(`${orch.url}/metrics`, { headers: { authorization: `Bearer ${orch.token}` } });
    expect([admin.status, (await admin.text()).includes("jr2_orchestrator_workspaces")]).toEqual([200, true]);
  });
});

describe("the egress ceiling at create (decision 0076)", () => {
  it("refuses a workspace egress rule outside the ceiling, naming the field path and the fix", async () => {
    const res = await api<{ error: { code: string; message: string } }>("POST", "/v1/workspaces", {
      image: "jr2/harness:never-run",
      branch: "feature/ceiling",
      egress: { allow: ["api.example.com:443", "evil.test:443"] },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe("invalid");
    expect(res.body.error.message).toMatch(
      /^egress\.allow\[1\]: "evil\.test:443" is outside the installation's egress ceiling \(\*\.example\.com:443\)/,
    );
    expect(res.body.error.message).toMatch(/widen the pod config's egress\.ceiling/);
    // Nothing was written: no workspace to list.
    expect((await api<{ items: unknown[] }>("GET", "/v1/workspaces")).body.items).toEqual([]);
  });
});
