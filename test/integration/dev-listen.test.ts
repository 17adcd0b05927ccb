// Local processes listen where the README says (docs/decisions/0012): run on this machine, the
// module (admission, metrics) and the Orchestrator bind loopback only, never every interface.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startLocalOrchestrator, type LocalOrchestrator } from "../../dev/local-orchestrator";
import { isLoopback, listeners } from "../support/listeners";
import { useNamespace } from "./support/cluster";

const ns = useNamespace("listen");
let orch: LocalOrchestrator | undefined;

afterAll(async () => {
  await orch?.stop();
});

describe("where local processes listen", () => {
  it.each([
    ["admission", "JR2_ADMISSION_PORT"],
    ["watcher", "JR2_OPERATOR_PORT"],
  ])("the module's %s binds loopback only", (_role, variable) => {
    const addresses = listeners(Number(process.env[variable]));
    expect(addresses.length).toBeGreaterThan(0);
    expect(addresses.filter((a) => !isLoopback(a))).toEqual([]);
  });

  it("the Orchestrator binds loopback only, and answers there", async () => {
    const tmp = mkdtempSync(join(tmpdir(), "jr2-listen-"));
    orch = await startLocalOrchestrator({
      kubeconfig: process.env.KUBECONFIG!,
      namespace: ns.name,
      dir: join(tmp, "orchestrator"),
      credentials: [],
      reposRoot: join(tmp, "cache-{node}"),
    });
    const port = Number(new URL(orch.url).port);
    const addresses = listeners(port);
    expect(addresses.length).toBeGreaterThan(0);
    expect(addresses.filter((a) => !isLoopback(a))).toEqual([]);
    const res = await fetch(`${orch.url}/healthz`);
    expect(res.status).toBe(200);
  });
});
