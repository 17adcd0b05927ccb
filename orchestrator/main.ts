// `npm run orchestrator`: the Orchestrator's HTTP API for Machines. Reads:
//   PORT                       where the API listens (default 8090)
//   JR2_NAMESPACE              where its Sandboxes live (default: default)
//   JR2_SIGNING_KEY_FILE       the key Harness bearers are derived from (>= 32 bytes; required)
//   JR2_API_TOKENS_FILE        the API's bearer tokens, one a line (required)
//   JR2_GIT_CREDENTIALS_FILE   the fence's entries (YAML list; absent: every repo url is refused)
//   JR2_LEASE_INTERVAL         how often each workspace's keepalive is renewed (Go duration, 5m)
//   JR2_POD_BUDGET, JR2_REPO_BUDGET   provision budgets (Go durations, 120s and 25m)
//   JR2_LOCAL_HARNESS          off (default) | process | inline: outside the cluster only, run each
//                              Sandbox's Harness here (JR2_LOCAL_REPOS_ROOT with {node}, JR2_LOCAL_WORK_ROOT)
//   JR2_API_HTTP2              1 (default here) HTTP/2 to the API server, 0 HTTP/1.1
//   KUBECONFIG                 the cluster (in a pod: its service account)
import { readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { envDuration } from "../capabilities/shared/duration";
import { DEFAULT_CACHE_ROOT } from "../capabilities/repo/caches";
import { parseCredentials } from "./fence";
import { startOrchestratorServer } from "./http";
import { KubeSandboxPort } from "./kube-port";
import { LocalHarnesses } from "./local-harness";
import { OrchestratorMetrics } from "./metrics";
import { SandboxWatch } from "./sandbox-watch";
import { apiTokenChecker, readApiTokens, readSigningKey } from "./tokens";
import { WorkspaceRegistry } from "./workspaces";

const log = (entry: Record<string, unknown>) =>
  process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...entry })}\n`);

function fail(message: string): never {
  log({ level: "error", message });
  process.exit(2);
}

const duration = (name: string, fallback: number): number => {
  try {
    return envDuration(name, fallback);
  } catch (err) {
    fail((err as Error).message);
  }
};

function required(name: string): string {
  return process.env[name] || fail(`${name} is not set: see the README's Orchestrator section`);
}

async function main() {
  const env = process.env;
  // HTTP/2 to the API server unless told otherwise (decision 0008): read by the pooled client.
  env.JR2_API_HTTP2 ??= "1";
  const port = Number(env.PORT || 8090);
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`PORT is not a port number: ${env.PORT}`);
  const namespace = env.JR2_NAMESPACE || "default";
  const signingKey = await readSigningKey(required("JR2_SIGNING_KEY_FILE")).catch((e: Error) =>
    fail(`JR2_SIGNING_KEY_FILE: ${e.message}`),
  );
  const tokens = await readApiTokens(required("JR2_API_TOKENS_FILE")).catch((e: Error) =>
    fail(`JR2_API_TOKENS_FILE: ${e.message}`),
  );
  if (!tokens.length) fail("JR2_API_TOKENS_FILE holds no token: every request would be refused");
  let credentials: ReturnType<typeof parseCredentials> = [];
  if (env.JR2_GIT_CREDENTIALS_FILE) {
    try {
      credentials = parseCredentials(readFileSync(env.JR2_GIT_CREDENTIALS_FILE, "utf8"));
    } catch (e) {
      fail(`JR2_GIT_CREDENTIALS_FILE: ${(e as Error).message}`);
    }
  }
  const local = env.JR2_LOCAL_HARNESS && env.JR2_LOCAL_HARNESS !== "off" ? env.JR2_LOCAL_HARNESS : undefined;
  if (local && local !== "process" && local !== "inline") fail(`JR2_LOCAL_HARNESS must be off, process or inline`);
  const harnesses = local
    ? new LocalHarnesses({
        mode: local as "process" | "inline",
        reposRoot: env.JR2_LOCAL_REPOS_ROOT || DEFAULT_CACHE_ROOT,
        workRoot: env.JR2_LOCAL_WORK_ROOT || join(tmpdir(), "jr2-local-work"),
      })
    : undefined;

  const watch = new SandboxWatch(namespace);
  await watch.start();
  const kubePort = new KubeSandboxPort({
    namespace,
    watch,
    signingKey,
    credentials,
    ...(harnesses ? { resolveEndpoint: harnesses.resolve } : {}),
  });
  const metrics = new OrchestratorMetrics();
  const registry = new WorkspaceRegistry({
    port: kubePort,
    watch,
    credentials,
    budgets: { podMs: duration("JR2_POD_BUDGET", 120_000), repoMs: duration("JR2_REPO_BUDGET", 25 * 60_000) },
    lease: { intervalMs: duration("JR2_LEASE_INTERVAL", 5 * 60_000) },
    log,
    onEvent: (name, event) => {
      metrics.observe(event);
      if (event.type === "transition" && ["lost", "failed", "destroyed"].includes(event.to)) void harnesses?.stop(name);
    },
  });
  await registry.restore();
  const server = await startOrchestratorServer(
    {
      workspaces: registry,
      checkToken: apiTokenChecker(tokens),
      metrics: async () => metrics.render(await registry.list()),
      log,
    },
    port,
  );
  const bound = (server.address() as import("node:net").AddressInfo).port;
  log({ level: "info", message: "orchestrator listening", port: bound, namespace, localHarness: local ?? "off" });
  const stop = () => {
    registry.stop();
    watch.close();
    server.close();
    void harnesses?.stopAll().finally(() => process.exit(0));
    if (!harnesses) process.exit(0);
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

main().catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
