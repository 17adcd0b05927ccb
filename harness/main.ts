// The Harness's entry point: reads its settings from the environment, serves until SIGTERM.
// Logs are JSON lines on stdout, one per request; neither headers nor bodies are ever logged.
//
// It binds its port before it loads the rest (lib/early-listen.ts): the kubelet's first probe waits
// for the answer instead of being refused and repeated a period later. What only a turn uses (pi's
// runner, its tools, the pick client) loads with the first turn (decision 0062).
import { HARNESS_ENV } from "../api/env";
import { HARNESS_PORT, REPOS_MOUNT } from "../api/wire";
import { listenEarly } from "../lib/early-listen";
import { log } from "../lib/log";
import { once } from "../lib/once";
import type { AgentHost, TurnRunner } from "./agents/host";

function portOf(value: string | undefined): number {
  if (value === undefined || value === "") return HARNESS_PORT;
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT is not a port number: ${value}`);
  return port;
}

async function main(): Promise<void> {
  const env = process.env;
  const tokenSha256 = env[HARNESS_ENV.tokenSha256];
  // Still serve /healthz without a digest (the pod must become Ready to be diagnosed), but say why
  // every attach will be refused.
  if (!tokenSha256 || !/^[0-9a-f]{64}$/i.test(tokenSha256)) {
    log({
      level: "warn",
      message: `${HARNESS_ENV.tokenSha256} is unset or not a hex SHA-256: every attach is refused`,
    });
  }
  const workRoot = env[HARNESS_ENV.workRoot] || "/work";
  const reposRoot = env[HARNESS_ENV.reposRoot] || REPOS_MOUNT;
  const port = portOf(env[HARNESS_ENV.port]);
  const host = env[HARNESS_ENV.host] || undefined;
  const { server, serve } = await listenEarly(port, host);
  // The bound port (PORT=0 picks a free one: the Orchestrator's local mode reads it from here).
  const bound = (server.address() as import("node:net").AddressInfo).port;
  log({ level: "info", message: "listening", port: bound, host: host ?? "*", workRoot, reposRoot });
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const harness: typeof import("./harness-server") = require("./harness-server");
  process.umask(harness.HARNESS_UMASK);
  const agents = agentHost(env, workRoot);
  serve(harness.harnessHandler({ workRoot, reposRoot, tokenSha256, log, ...(agents ? { agents } : {}) }));
  const stop = () => server.close(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  // Run by a parent that may die without a word (the Orchestrator's local mode, SIGKILLed in a
  // test): its end of our stdin closing is the one signal that always arrives.
  if (env[HARNESS_ENV.exitWithParent] === "1") {
    process.stdin.on("end", stop).on("error", stop).resume();
  }
}

/** The Agent host, when the pod gave this Harness a conversations volume (decision 0025). */
function agentHost(env: NodeJS.ProcessEnv, workRoot: string): AgentHost | undefined {
  const dir = env[HARNESS_ENV.conversationsDir];
  if (!dir) return undefined;
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { HARNESS_CUSTODIAN_URL_ENV }: typeof import("../api/custodian-config") = require("../api/custodian-config");
  const { modelSettings }: typeof import("./agents/model-settings") = require("./agents/model-settings");
  const { AgentHost: Host }: typeof import("./agents/host") = require("./agents/host");
  const custodianUrl = env[HARNESS_CUSTODIAN_URL_ENV];
  const model = modelSettings(env, custodianUrl);
  for (const problem of model.problems) log({ level: "warn", message: problem });
  const runner = once(() =>
    (require("./agents/pi-runner") as typeof import("./agents/pi-runner")).piRunner({
      endpoint: model.endpoint,
      workRoot,
      ...(model.thinking ? { thinking: model.thinking } : {}),
      ...(custodianUrl ? { custodianUrl } : {}),
    }),
  );
  /* eslint-enable @typescript-eslint/no-require-imports */
  const run: TurnRunner = (turn) => runner()(turn);
  return new Host({ dir, run, log });
}

main().catch((err: unknown) => {
  log({ level: "error", message: err instanceof Error ? err.message : String(err) });
  process.exit(1);
});
