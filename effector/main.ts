// `effector`: the Sandbox Effector (decision 0070), the pod's
// one seat that holds the secrets Effects spend and where the Agent executes nothing. Reads
// EFFECTOR_ENV (api/env.ts): its key file, /work and /repos (read-only), its secrets, its scratch
// (HOME, and its memory of the ids it ran), jr2-confine, the trust bundle, POD_IP and NODE_NAME.
// Listens on JR2_EFFECTOR_PORT; /healthz answers 200 only once it holds its key. With
// JR2_EFFECTOR_REQUIRE_COMMANDS=1 and no Landlock it ends at start, saying why in its termination
// message. Logs JSON lines: one per Effect (id, kind, state, duration) and per refused request;
// never a secret, a header or the key.
//
// `effector connect HOST PORT` is ssh's ProxyCommand for a push over ssh (connect.ts).
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { listenEarly } from "../lib/early-listen";
import { listenHost } from "../lib/http-json";
import { log } from "../lib/log";
import { once } from "../lib/once";
import { probeConfinement, unconfinedMessage, type Confinement } from "./confinement";
import { readConfig, programFile, type EffectorConfig } from "./config";
import { connectMain } from "./connect";
import { egressFrom, trustedRoots } from "./egress";
import type { EffectsContext } from "./effects-late";
import { EffectorMetrics, NonceMemory } from "./guard";
import { EffectMemory, type Runner } from "./memory";
import { effectorHandler } from "./server";

/** Ends the process at start, the reason where the kubelet reads it (and on stderr). */
function endAtStart(message: string, code: number): never {
  try {
    writeFileSync("/dev/termination-log", message);
  } catch {
    // not in a pod, or not writable: stderr says it
  }
  process.stderr.write(`${message}\n`);
  log({ level: "error", message });
  process.exit(code);
}

/** The key's text, trimmed, or undefined while the file is not there (yet). */
function readKey(file: string): string | undefined {
  try {
    const key = readFileSync(file, "utf8").trim();
    return key.length ? key : undefined;
  } catch {
    return undefined;
  }
}

/** The order's schema and the Effects: required with the first order, from effector-effects.js
 * beside this file (docs/decisions/0044-the-custodian-starts-small.md); an idle Effector loads
 * neither zod nor undici nor the push and command code. */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- late-loaded, as decision 0044 says
const late = once(() => require("./effects-late") as typeof import("./effects-late"));

function runner(config: EffectorConfig, confinement: Confinement): Runner {
  const egress = egressFrom(process.env);
  const ca = trustedRoots(config.caFile);
  // git takes one CA file: the system roots and the installation's bundle, written once in scratch.
  let caBundleFile: string | undefined;
  if (config.caFile) {
    caBundleFile = join(config.scratch, ".jr2-ca.pem");
    writeFileSync(caBundleFile, ca.join("\n"), { mode: 0o600 });
  }
  const context: EffectsContext = {
    work: config.work,
    repos: config.repos,
    git: config.git,
    secrets: config.secrets,
    scratch: config.scratch,
    confine: config.confine,
    confinement,
    node: config.node,
    egress,
    ca,
    caBundleFile,
    connectCommand: [process.execPath, ...process.execArgv, programFile(), "connect"],
  };
  return (order) => late().runEffect(order, context);
}

async function main(): Promise<void> {
  const parsed = readConfig(process.env);
  if (!parsed.ok) endAtStart(parsed.message, 2);
  const config = parsed.config;
  const confinement = await probeConfinement(config.confine);
  if (!confinement.ok && config.requireCommands)
    endAtStart(
      `${unconfinedMessage(config.node, confinement.reason)}; the pod config requires commands (effector.requireCommands)`,
      1,
    );
  // Bound before the rest (decision 0062): the kubelet's first probe waits rather than being refused.
  const early = await listenEarly(config.port, listenHost(undefined));
  mkdirSync(config.scratch, { recursive: true });
  const metrics = new EffectorMetrics();
  const memory = new EffectMemory(config.scratch, undefined, (rec, ms) => {
    metrics.effect(rec.kind, rec.answer.state);
    log({
      level: "info",
      message: "effect",
      id: rec.id,
      kind: rec.kind,
      state: rec.answer.state,
      code: rec.answer.error?.code ?? null,
      durationMs: ms,
    });
  });
  const { interrupted } = memory.open();
  for (const id of interrupted)
    log({ level: "warn", message: "effect interrupted by the Effector's end: unknown", id });

  let key = readKey(config.keyFile);
  if (!key) {
    log({ level: "warn", message: `no key at ${config.keyFile} yet: /healthz answers 503 until it is there` });
    const wait = setInterval(() => {
      key = readKey(config.keyFile);
      if (key) {
        clearInterval(wait);
        log({ level: "info", message: "key read" });
      }
    }, 500);
  }
  const run = runner(config, confinement);
  early.serve(
    effectorHandler({
      key: () => key,
      pod: config.podIp,
      nonces: new NonceMemory(),
      metrics,
      memory,
      run,
      parseOrder: (json) => late().EffectorOrder.safeParse(json),
      log,
    }),
  );
  const address = early.server.address();
  log({
    level: "info",
    message: "listening",
    port: typeof address === "object" && address ? address.port : config.port,
    pod: config.podIp,
    confined: confinement.ok ? { abi: confinement.abi } : { reason: confinement.reason },
    trust: config.caFile && existsSync(config.caFile) ? "system+bundle" : "system",
  });
  const stop = () => {
    setTimeout(() => process.exit(0), 10_000).unref();
    early.server.close(() => process.exit(0));
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

if (process.argv[2] === "connect") connectMain(process.argv.slice(3));
else
  main().catch((err: unknown) =>
    endAtStart(`the Effector could not start: ${err instanceof Error ? err.message : String(err)}`, 2),
  );
