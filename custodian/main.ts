// `npm run custodian`: the Custodian, the Sandbox pod's credential holder (decision 0018). Reads:
//   JR2_CUSTODIAN_CONFIG        its config (default /etc/jr2/custodian/config/config.json); a bad
//                               one ends the process at once, naming each field and its fix
//   JR2_CUSTODIAN_VALUES_DIR    the held values, one file each (default /etc/jr2/custodian/values);
//                               until every one the config names loads, /readyz answers 503
//   JR2_CUSTODIAN_CA_DIR        the Sandbox's CA, tls.crt and tls.key (default /etc/jr2/custodian/ca;
//                               decision 0037), read again when they change; absent, bound hosts
//                               are not intercepted
//   JR2_CUSTODIAN_UPSTREAM_CA   a PEM bundle trusted for upstreams beside the system roots
//   JR2_CUSTODIAN_PORT          the routes and the proxy, on 127.0.0.1 only (default 8081)
//   JR2_CUSTODIAN_HEALTH_PORT   /healthz, /readyz, /metrics (default 15021), on JR2_LISTEN_HOST
//                               (default: every interface in a pod, 127.0.0.1 outside one)
//   JR2_EXIT_WITH_PARENT        1: end when stdin closes (local mode's parent died)
// Serves until SIGTERM. Logs are JSON lines on stdout; no line holds a held value, the token or a
// Stand-in, nor any header or body.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  CA_CERT_KEY,
  CA_KEY_KEY,
  CUSTODIAN_CA_DIR,
  CUSTODIAN_CONFIG_FILE,
  CUSTODIAN_HEALTH_PORT,
  CUSTODIAN_PORT,
  CUSTODIAN_VALUES_DIR,
  parseCustodianConfigText,
  type CustodianConfig,
} from "../api/custodian-config";
import { CUSTODIAN_ENV as E } from "../api/env";
import { listenEarly } from "../lib/early-listen";
import { listenHost } from "../lib/http-json";
import { fail, log } from "../lib/log";
import { caFilesIn, type CaSource } from "./leaf";
import { Custodian } from "./custodian-server";

function portOf(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`${name} is not a port number: ${raw}`);
  return port;
}

function readConfig(file: string): CustodianConfig {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    fail(
      `${file}: cannot be read (${(err as NodeJS.ErrnoException).code}): mount the <sandbox>-custodian ConfigMap there or set ${E.configFile}`,
    );
  }
  const parsed = parseCustodianConfigText(text);
  if (!parsed.ok) fail(`${file}: ${parsed.message}`);
  return parsed.config;
}

/** The CA when both files are there, read again as they change; a half-mounted CA is an error, an
 * absent one a warning. */
function readCaFiles(dir: string, config: CustodianConfig): CaSource | undefined {
  const cert = join(dir, CA_CERT_KEY);
  const key = join(dir, CA_KEY_KEY);
  const has = [existsSync(cert), existsSync(key)];
  if (!has[0] && !has[1]) {
    if (config.held.length)
      log({ level: "warn", message: `no CA in ${dir}: the proxy refuses bound hosts (the routes still serve them)` });
    return undefined;
  }
  if (!has[0] || !has[1])
    fail(`${dir} holds ${has[0] ? CA_CERT_KEY : CA_KEY_KEY} without ${has[0] ? CA_KEY_KEY : CA_CERT_KEY}: mount both`);
  return caFilesIn(dir);
}

async function main(): Promise<void> {
  const env = process.env;
  const configFile = env[E.configFile] || CUSTODIAN_CONFIG_FILE;
  const config = readConfig(configFile);
  // The probes' port before the rest: the kubelet's first readiness probe waits for the answer
  // instead of being refused and repeated a period later (decision 0062).
  const early = await listenEarly(portOf(E.healthPort, CUSTODIAN_HEALTH_PORT), listenHost(env[E.healthHost]));
  const caDir = env[E.caDir] || CUSTODIAN_CA_DIR;
  const ca = readCaFiles(caDir, config);
  const upstreamCaFile = env[E.upstreamCa];
  let upstreamCa: string | undefined;
  if (upstreamCaFile) {
    try {
      upstreamCa = readFileSync(upstreamCaFile, "utf8");
    } catch (err) {
      fail(`${E.upstreamCa}=${upstreamCaFile}: cannot be read (${(err as NodeJS.ErrnoException).code})`);
    }
  }
  let custodian: Custodian;
  try {
    custodian = new Custodian({ config, valuesDir: env[E.valuesDir] || CUSTODIAN_VALUES_DIR, ca, upstreamCa, log });
  } catch (err) {
    fail(`${caDir}: ${(err as Error).message}`);
  }
  const ports = await custodian.start(
    portOf(E.port, CUSTODIAN_PORT),
    portOf(E.healthPort, CUSTODIAN_HEALTH_PORT),
    listenHost(env[E.healthHost]),
    early,
  );
  log({
    level: "info",
    message: "listening",
    port: ports.port,
    healthPort: ports.healthPort,
    healthHost: ports.healthHost,
    providers: config.providers.map((p) => p.name),
    orchestrator: config.orchestrator ? new URL(config.orchestrator.url).host : null,
    via: config.egress.via ?? null,
    intercepting: ca !== undefined,
  });
  const stop = () => {
    // In-flight answers get a moment; the kubelet's grace period bounds the rest.
    setTimeout(() => process.exit(0), 10_000).unref();
    custodian.stop().then(
      () => process.exit(0),
      () => process.exit(0),
    );
  };
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  if (env[E.exitWithParent] === "1") process.stdin.on("end", stop).on("error", stop).resume();
}

main().catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
