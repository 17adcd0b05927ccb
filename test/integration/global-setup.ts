// The integration tier's one-time setup: the real control plane (npm run cluster -- up, unless
// KUBECONFIG names a cluster), the module built and running here against it (admission + watch),
// and a small control endpoint through which a test may kill and restart the operator. It never
// skips: anything that cannot be set up fails the run with the reason.
import { spawnSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { join } from "node:path";
import { CACHE_DIR, ROOT, startLocalOperator, type LocalOperator } from "../../dev/local-operator";
import { OPERATOR_ENV } from "../../api/env";
import { tierStarted } from "../summary-reporter";
import { requireNode } from "../../dev/node-version";

type Held = { operator?: LocalOperator; control?: Server };
const held = globalThis as typeof globalThis & { __jr2?: Held };

function step<T>(what: string, fn: () => T): T {
  const started = Date.now();
  const out = fn();
  process.stdout.write(`[integration setup] ${what}: ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  return out;
}

function clusterUp(): string {
  const r = spawnSync("bash", [join(ROOT, "dev", "cluster", "cluster.sh"), "up"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  const last = r.stdout.trim().split("\n").pop() ?? "";
  const m = /^KUBECONFIG=(.+)$/.exec(last);
  if (r.status !== 0 || !m) {
    throw new Error(`the local control plane did not come up (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  }
  return m[1];
}

export default async function globalSetup() {
  // First, so a setup that throws still shows in CI's closing line (test/summary-reporter.js).
  tierStarted("integration");
  // Then the Node check: an older Node stops the tier here, saying what to install (decision 0052).
  requireNode();
  const kubeconfig = process.env.KUBECONFIG || step("cluster up", clusterUp);
  process.env.KUBECONFIG = kubeconfig;
  step("module build", () => {
    const r = spawnSync("npm", ["run", "build", "--silent"], { cwd: ROOT, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`npm run build failed:\n${r.stdout}\n${r.stderr}`);
  });

  const port = Number(process.env.JR2_TEST_OPERATOR_PORT ?? 3443);
  const start = (extraEnv: Record<string, string> = {}) =>
    startLocalOperator({
      kubeconfig,
      stateDir: join(CACHE_DIR, "test-operator"),
      port,
      logs: "file",
      logLevel: "debug",
      // The lease tests use idle timeouts of seconds; admission's floor is otherwise 1m.
      env: { [OPERATOR_ENV.minIdleTimeout]: "1s", ...extraEnv },
    });
  const t0 = Date.now();
  const state: Held = (held.__jr2 = { operator: await start() });
  process.stdout.write(
    `[integration setup] operator up: ${((Date.now() - t0) / 1000).toFixed(1)}s (log ${state.operator!.logFile})\n`,
  );
  process.env.JR2_OPERATOR_LOG = state.operator!.logFile;
  // The watcher's port: the controllers' metrics; the admission process's: the webhooks'.
  process.env.JR2_OPERATOR_PORT = String(state.operator!.watcherPort);
  process.env.JR2_ADMISSION_PORT = String(port);
  process.env.JR2_OPERATOR_CA = state.operator!.caPem;

  // POST /kill: SIGKILL, as a crash (its webhooks stay, failing closed); POST /start: a fresh operator.
  state.control = createServer((req, res) => {
    const answer = (code: number, body: string) => res.writeHead(code).end(body);
    if (req.method !== "POST") return answer(405, "POST only");
    if (req.url === "/kill") {
      const op = state.operator;
      if (!op?.running()) return answer(409, "not running");
      void op.kill().then(() => answer(200, "killed"));
      return;
    }
    // POST /start?qps=N: a slowed operator (N writes/s, no burst), for a crash in mid-burst.
    const url = new URL(req.url ?? "/", "http://control");
    if (url.pathname === "/start") {
      const qps = url.searchParams.get("qps");
      start(qps ? { [OPERATOR_ENV.writeQps]: qps, [OPERATOR_ENV.writeBurst]: "1" } : {}).then(
        (op) => {
          state.operator = op;
          process.env.JR2_OPERATOR_CA = op.caPem;
          answer(200, "started");
        },
        (err) => answer(500, String(err)),
      );
      return;
    }
    answer(404, "unknown");
  });
  await new Promise<void>((r) => state.control!.listen(0, "127.0.0.1", r));
  const address = state.control.address();
  if (!address || typeof address === "string") throw new Error("control endpoint has no port");
  process.env.JR2_TEST_CONTROL = `http://127.0.0.1:${address.port}`;
}
