// The kube-1.34 tier's one-time setup (decision 0059): a lone Kubernetes 1.34 API server with its
// own etcd, CA, ports and state (dev/cluster/apiserver.sh; kube-apiserver built from its Go module
// and cached by version), apart from the shared local cluster, and the built module running here
// against it with the Sandbox defaults as its webhook, as a 1.34 installation registers them. It
// never skips: anything that cannot be set up fails the run with the reason.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { CACHE_DIR, ROOT, startLocalOperator, type LocalOperator } from "../../dev/local-operator";
import { distOlderThanSources } from "../../dev/project-images";
import { OPERATOR_ENV } from "../../api/env";
import { tierStarted } from "../summary-reporter";
import { requireNode } from "../../dev/node-version";

export const TIER = "kube-1.34";
export const APISERVER_SH = join(ROOT, "dev", "cluster", "apiserver.sh");

type Held = { operator?: LocalOperator };
const held = globalThis as typeof globalThis & { __jr2k134?: Held };

function step<T>(what: string, fn: () => T): T {
  const started = Date.now();
  const out = fn();
  process.stdout.write(`[${TIER} setup] ${what}: ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  return out;
}

/** The cached kubectl (built when missing), so the tier needs no `cluster up` before it. */
function kubectlBinary(): string {
  const r = spawnSync("bash", [join(ROOT, "dev", "cluster", "cluster.sh"), "binary", "kubectl"], { encoding: "utf8" });
  const path = r.stdout.trim().split("\n").pop() ?? "";
  if (r.status !== 0 || !path) throw new Error(`no kubectl (exit ${r.status}):\n${r.stderr}`);
  return path;
}

function apiServerUp(): string {
  const r = spawnSync("bash", [APISERVER_SH, "up", "kube-1.34"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  const last = r.stdout.trim().split("\n").pop() ?? "";
  const m = /^KUBECONFIG=(.+)$/.exec(last);
  if (r.status !== 0 || !m)
    throw new Error(`the 1.34 API server did not come up (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  process.stdout.write(r.stderr);
  return m[1];
}

export default async function globalSetup() {
  // First, so a setup that throws still shows in CI's closing line (test/summary-reporter.js).
  tierStarted(TIER);
  requireNode();
  // Its own API server, never the shared cluster's: KUBECONFIG from the caller is not read.
  process.env.KUBECTL ||= step("kubectl", kubectlBinary);
  const kubeconfig = step("1.34 API server up", apiServerUp);
  process.env.KUBECONFIG = kubeconfig;
  try {
    await startModule(kubeconfig);
  } catch (err) {
    // Jest runs no teardown after a failed setup: the API server is stopped here.
    spawnSync("bash", [APISERVER_SH, "down", "kube-1.34"], { stdio: "ignore" });
    throw err;
  }
}

async function startModule(kubeconfig: string) {
  // npm test builds in the integration tier just before; built again only when a source is newer.
  const stale = distOlderThanSources();
  if (stale)
    step(`module build (dist/ older than ${stale})`, () => {
      const r = spawnSync("npm", ["run", "build", "--silent"], { cwd: ROOT, encoding: "utf8" });
      if (r.status !== 0) throw new Error(`npm run build failed:\n${r.stdout}\n${r.stderr}`);
    });
  const t0 = Date.now();
  const operator = await startLocalOperator({
    kubeconfig,
    stateDir: join(CACHE_DIR, "kube-1.34-operator"),
    port: Number(process.env.JR2_KUBE134_OPERATOR_PORT ?? 3643),
    logs: "file",
    logLevel: "debug",
    sandboxDefaults: "webhook",
    env: { [OPERATOR_ENV.minIdleTimeout]: "1s" },
  });
  held.__jr2k134 = { operator };
  process.stdout.write(
    `[${TIER} setup] operator up: ${((Date.now() - t0) / 1000).toFixed(1)}s (log ${operator.logFile})\n`,
  );
}
