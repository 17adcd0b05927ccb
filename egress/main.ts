// `node /app/egress.js`: the egress point (docs/decisions/0051). Reads:
//   JR2_SANDBOX_NAMESPACES        the namespaces that hold Sandboxes (as the build read them)
//   JR2_POD_CONFIG_FILE           the installation's pod config: the base list (absent: empty)
//   JR2_EGRESS_PROXY_PORT         the proxy (default 3128)
//   JR2_EGRESS_ADMIN_PORT         /healthz, /readyz, /metrics, the logs (default 9091)
//   JR2_LISTEN_HOST               the address both bind (default every interface)
//   JR2_EGRESS_MAX_CONNECTIONS    connections one Sandbox holds open at once (default 128)
//   JR2_EGRESS_CONNECT_RATE       new connections per second per Sandbox (default 50)
//   JR2_EGRESS_CONNECT_BURST      ... in a burst (default 200)
//   JR2_EGRESS_LOG_ENTRIES        entries kept per Sandbox's log (default 500)
//   JR2_EGRESS_CONNECT_TIMEOUT    the bound on one upstream connect (Go duration, default 10s)
//   JR2_EGRESS_RELIST_INTERVAL    how often each watch lists again (Go duration, 1s to 10m, default 10s)
//   JR2_EGRESS_DRAIN_DELAY        after SIGTERM, still accepting while not ready (Go duration, default 5s)
//   JR2_EGRESS_DRAIN_BOUND        then how long open tunnels may finish (Go duration, default 30s)
//   KUBECONFIG                    the cluster (in a pod: its service account)
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import {
  EGRESS,
  EGRESS_ADMIN_PORT,
  EGRESS_DEFAULTS,
  EGRESS_ENV as E,
  EGRESS_PROXY_PORT,
  EGRESS_REFUSED_REASON,
  NO_RANGES,
  addressRangesOf,
  baseListOf,
  ceilingOf,
  type AddressRanges,
  type EgressRule,
} from "../api/egress-point";
import { API_VERSION } from "../api/crd/sources/common";
import { SANDBOX_KIND } from "../api/crd";
import { sandboxNamespacesFrom } from "../api/sandbox-namespaces";
import { envDuration } from "../lib/duration";
import { ApiError } from "../lib/api-error";
import { kubeRequest, paths } from "../lib/kube";
import { fail, jsonLog } from "../lib/log";
import { adminServer } from "./admin";
import { EgressIndex, refKey, relistInterval, watchIndex, type SandboxRef } from "./index";
import { EgressProxy } from "./proxy";
import { EgressRecord } from "./record";
import { SandboxLimits, envCount } from "./limits";

const out = jsonLog({ component: EGRESS });
const log = (level: "info" | "warn", message: string, fields: Record<string, unknown> = {}) =>
  out({ level, message, ...fields });
const env = process.env;
const orFail = <T>(f: () => T): T => {
  try {
    return f();
  } catch (err) {
    fail((err as Error).message, out);
  }
};

/** The base list and the address ranges from the pod config file; a file that is not there is an
 * empty list and no ranges. */
function installation(file: string | undefined): {
  base: EgressRule[];
  ranges: AddressRanges;
  ceiling?: EgressRule[];
} {
  if (!file) return { base: [], ranges: NO_RANGES };
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { base: [], ranges: NO_RANGES };
    fail(`${E.podConfigFile}=${file}: could not be read (${(err as Error).message})`, out);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    fail(`${file} is not YAML or JSON: ${(err as Error).message.split("\n")[0]}`, out);
  }
  try {
    const ceiling = ceilingOf(doc);
    return { base: baseListOf(doc), ranges: addressRangesOf(doc), ...(ceiling ? { ceiling } : {}) };
  } catch (err) {
    fail(`${file}: ${(err as Error).message}`, out);
  }
}

const namespaces = orFail(() => sandboxNamespacesFrom(env));
const { base, ranges, ceiling } = installation(env[E.podConfigFile]);
const limits = new SandboxLimits({
  maxConnections: orFail(() => envCount(env, E.maxConnections, EGRESS_DEFAULTS.maxConnections)),
  connectRate: orFail(() => envCount(env, E.connectRate, EGRESS_DEFAULTS.connectRate)),
  connectBurst: orFail(() => envCount(env, E.connectBurst, EGRESS_DEFAULTS.connectBurst)),
});
const logEntries = orFail(() => envCount(env, E.logEntries, EGRESS_DEFAULTS.logEntries, 100_000));
const connectTimeoutMs = orFail(() => envDuration(E.connectTimeout, EGRESS_DEFAULTS.connectTimeoutMs, env));
const relistMs = orFail(() => relistInterval(env));
const drainDelayMs = orFail(() => envDuration(E.drainDelay, EGRESS_DEFAULTS.drainDelayMs, env));
const drainBoundMs = orFail(() => envDuration(E.drainBound, EGRESS_DEFAULTS.drainBoundMs, env));
const proxyPort = orFail(() => envCount(env, E.proxyPort, EGRESS_PROXY_PORT, 65535));
const adminPort = orFail(() => envCount(env, E.adminPort, EGRESS_ADMIN_PORT, 65535));
const host = env[E.host] || undefined;

let index: EgressIndex;
const writeEvent = async (ref: SandboxRef, message: string, refusedHost: string) => {
  const uid = index.uidOf(ref);
  const stamp = new Date().toISOString();
  // Named by the Sandbox and the host: every replica refusing the same host writes the same Event,
  // and the second write's conflict is the first's success (decision 0076).
  const name = `${ref.name}.egress-refused-${createHash("sha256")
    .update(`${uid ?? refKey(ref)}\u0000${refusedHost}`)
    .digest("hex")
    .slice(0, 16)}`;
  await kubeRequest("POST", paths.events(ref.namespace), {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name, namespace: ref.namespace },
    involvedObject: {
      apiVersion: API_VERSION,
      kind: SANDBOX_KIND.kind,
      name: ref.name,
      namespace: ref.namespace,
      ...(uid ? { uid } : {}),
    },
    type: "Warning",
    reason: EGRESS_REFUSED_REASON,
    message: message.slice(0, 1024),
    source: { component: EGRESS },
    reportingComponent: `jr2.dev/egress`,
    reportingInstance: EGRESS,
    firstTimestamp: stamp,
    lastTimestamp: stamp,
    count: 1,
  }).catch((err: unknown) => {
    if (!(err instanceof ApiError && err.status === 409)) throw err;
  });
};
const record = new EgressRecord({ logEntries, writeEvent, log });
index = new EgressIndex(base, {
  ...(ceiling ? { ceiling } : {}),
  onForget: (ref) => {
    record.forget(ref);
    limits.forget(refKey(ref));
  },
  onProblems: (ref, problems) =>
    log("warn", "a Sandbox's egress list holds entries that are no rule or outside the ceiling; they open nothing", {
      sandbox: refKey(ref),
      problems,
    }),
});

let ready = false;
const admin = adminServer({ index, record, ready: () => ready });
const proxy = new EgressProxy({ index, record, limits, connectTimeoutMs, ranges });

void (async () => {
  await new Promise<void>((resolve, reject) => admin.once("error", reject).listen(adminPort, host, resolve));
  const watches = watchIndex(index, namespaces, log, relistMs);
  await watches.ready;
  // The proxy takes connections only once the index holds every Sandbox pod: before, each would be
  // refused as no Sandbox's.
  await proxy.listen(proxyPort, host);
  ready = true;
  log("info", "egress point ready", {
    namespaces,
    baseRules: base.map((r) => r.text),
    ceiling: ceiling?.map((r) => r.text) ?? "none",
    clusterRanges: ranges.cluster.map((c) => c.text),
    publicTestRanges: ranges.publicTest.map((c) => c.text),
    proxyPort,
    adminPort,
    limits: limits.config,
    logEntries,
    connectTimeoutMs,
    relistMs,
    ...index.sizes,
  });
  // A rolling update drops no Sandbox connection beyond a reconnect (decision 0076): /readyz fails
  // at once while the proxy still accepts for the drain delay (the endpoints drop this pod, and a
  // connection routed here meanwhile is served, not refused); then it stops accepting and lets open
  // tunnels finish up to the bound. The watches run to the end: a tunnel's Sandbox stays known.
  let stopping = false;
  for (const sig of ["SIGINT", "SIGTERM"] as const)
    process.once(sig, () => {
      if (stopping) return;
      stopping = true;
      ready = false;
      log("info", "draining: not ready, still accepting", { drainDelayMs, drainBoundMs });
      setTimeout(() => {
        void proxy.drain(drainBoundMs).then((left) => {
          log("info", "drained", { closedAtBound: left });
          watches.close();
          admin.close();
          process.exit(0);
        });
      }, drainDelayMs);
    });
})().catch((err: unknown) => fail(`the egress point could not start: ${String((err as Error)?.message ?? err)}`, out));
