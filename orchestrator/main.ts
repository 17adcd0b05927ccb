// `npm run orchestrator`: the Orchestrator's HTTP API for Machines. Reads:
//   PORT                       where the API listens (default 8090)
//   JR2_LISTEN_HOST            the address it binds (default: all in a pod, 127.0.0.1 outside one)
//   JR2_NAMESPACE              where its Sandboxes live (default: jr2-sandboxes, opted in; decision 0047)
//   JR2_SIGNING_KEY_FILE       the key Harness bearers are derived from (>= 32 bytes; required)
//   JR2_API_TOKENS_FILE        the API's bearer tokens, one a line (required); read again when it
//                              changes, a bad new file keeping the last good (api-tokens-file.ts)
//   JR2_GIT_CREDENTIALS_FILE   the fence's entries (YAML list; absent: every repo url is refused)
//   JR2_LEASE_INTERVAL         the longest gap between a workspace's keepalives (Go duration, 5m);
//                              a workspace renews at least every third of its idle timeout
//   JR2_POD_BUDGET, JR2_REPO_BUDGET   provision budgets (Go durations, 120s and 25m)
//   JR2_ATTACH_DEADLINE        the whole attach, its answer read to the end (Go duration, 10m)
//   JR2_LOCAL_HARNESS          off (default) | process | inline: outside the cluster only, run each
//                              Sandbox's Harness here (JR2_LOCAL_REPOS_ROOT with {node}, JR2_LOCAL_WORK_ROOT)
//   JR2_POD_CONFIG_FILE        what every Sandbox pod holds (orchestrator/workspaces/pod-config.ts; absent: defaults)
//   JR2_CUSTODIAN_IMAGE        the companions image: the custodian's, and the effector's by default
//   JR2_ORCHESTRATOR_URL       how a Custodian reaches this Orchestrator (default: its Service in
//                              POD_NAMESPACE, the namespace its pod runs in)
//   JR2_EGRESS_URL             the egress point's proxy as a Sandbox pod reaches it (default in a pod:
//                              its Service in POD_NAMESPACE; `off`: none; decision 0051)
//   JR2_EGRESS_ADMIN_URL       where a workspace's egress log is read (default: that Service, :9091)
//   JR2_TLS_CERT_FILE, JR2_TLS_KEY_FILE   both set: the API over TLS (PEM files, e.g. a mounted
//                              kubernetes.io/tls Secret's tls.crt and tls.key; decision 0047); read
//                              again when they change (tls-files.ts)
//   JR2_API_HTTP2              1 (default here) HTTP/2 to the API server, 0 HTTP/1.1
//   JR2_SHARD_LEASES_NAMESPACE set: one of several replicas, owning shards of the workspaces by
//                              Leases there (decision 0079); with POD_NAME (its identity) and
//                              JR2_PEER_URL (where the others forward to it). Unset: the only one
//   KUBECONFIG                 the cluster (in a pod: its service account)
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import type https from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { envDuration } from "../lib/duration";
import { DEFAULT_CACHE_ROOT, DEFAULT_SANDBOX_NAMESPACE } from "../api/wire";
import { parseCredentials } from "./workspaces/fence";
import { declaredEffectSecrets } from "./workspaces/effector-secrets";
import { startOrchestratorServer } from "./http/api-server";
import { ATTACH_DEADLINE_MS, KubeSandboxGateway, LOCAL_ATTACHES_AT_ONCE } from "./workspaces/kube-gateway";
import { ensureInstallation, podSettingsFrom, type PodSettings } from "./workspaces/installation";
import { LocalHarnesses } from "./local/local-harness";
import { OrchestratorMetrics, metricsServer } from "./orchestrator-metrics";
import { SandboxWatch } from "./workspaces/sandbox-watch";
import { PickStore } from "./agents/pick-store";
import { misbehaviourReporter } from "./agents/misbehaviour";
import { Turns } from "./agents/turns";
import { Effects } from "./effects/effects";
import type { EffectorAddress } from "./workspaces/sandbox-gateway";
import type { SandboxModel } from "../api/crd";
import { readSigningKey, sandboxTokenChecker } from "./tokens";
import { ApiTokensFile } from "./api-tokens-file";
import { TlsFiles } from "./tls-files";
import { WorkspaceRegistry } from "./workspaces/registry";
import { SoleOwnership, type Ownership, type OwnershipChange } from "./replicas/ownership";
import { ShardLeases } from "./replicas/shard-leases";
import { API_HTTP2_ENV, ORCHESTRATOR_ENV as E } from "../api/env";
import { listen, listenHost } from "../lib/http-json";
import { fail, log } from "../lib/log";

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
  env[API_HTTP2_ENV] ??= "1";
  const port = Number(env[E.port] || 8090);
  if (!Number.isInteger(port) || port < 0 || port > 65535) fail(`${E.port} is not a port number: ${env[E.port]}`);
  const metricsPort = env[E.metricsPort] ? Number(env[E.metricsPort]) : undefined;
  if (metricsPort !== undefined && !(Number.isInteger(metricsPort) && metricsPort >= 0 && metricsPort <= 65535))
    fail(`${E.metricsPort} is not a port number: ${env[E.metricsPort]}; unset it for no metrics port`);
  const host = listenHost(env[E.host]);
  const namespace = env[E.namespace] || DEFAULT_SANDBOX_NAMESPACE;
  // One of several replicas, or the only one (decision 0079). A replica's identity is its pod's name
  // and a suffix of its own process: a container restarted in the same pod is another holder, which
  // never mistakes its predecessor's Leases (and what it was doing under them) for its own.
  const leasesNamespace = env[E.shardLeasesNamespace];
  const shards = leasesNamespace
    ? new ShardLeases({
        namespace: leasesNamespace,
        identity: `${required(E.podName)}-${randomBytes(3).toString("hex")}`,
        peerUrl: required(E.peerUrl),
        log,
      })
    : undefined;
  const ownership: Ownership = shards ?? new SoleOwnership();
  const signingKey = await readSigningKey(required(E.signingKeyFile)).catch((e: Error) =>
    fail(`${E.signingKeyFile}: ${e.message}`),
  );
  const metrics = new OrchestratorMetrics();
  const tokens = await ApiTokensFile.open({
    path: required(E.apiTokensFile),
    log,
    onRead: (outcome) => metrics.apiTokensRead(outcome),
  }).catch((e: Error) => fail(`${E.apiTokensFile}: ${e.message}`));
  let credentials: ReturnType<typeof parseCredentials> = [];
  const credentialsFile = env[E.gitCredentialsFile];
  if (credentialsFile) {
    try {
      credentials = parseCredentials(readFileSync(credentialsFile, "utf8"));
    } catch (e) {
      fail(`${E.gitCredentialsFile}: ${(e as Error).message}`);
    }
  }
  // TLS when both files are given; one alone is a mistake, named.
  const certFile = env[E.tlsCertFile];
  const keyFile = env[E.tlsKeyFile];
  if (!!certFile !== !!keyFile)
    fail(
      `${certFile ? E.tlsCertFile : E.tlsKeyFile} is set without ${certFile ? E.tlsKeyFile : E.tlsCertFile}: set both, or neither`,
    );
  let tls: { cert: string; key: string } | undefined;
  /** The certificates served now: the current, then the one before it during a renewal. */
  let served: string[] = [];
  if (certFile && keyFile) {
    const readPem = (name: string, file: string) => {
      try {
        return readFileSync(file, "utf8");
      } catch (err) {
        fail(`${name}: ${file} cannot be read (${(err as NodeJS.ErrnoException).code})`);
      }
    };
    tls = { cert: readPem(E.tlsCertFile, certFile), key: readPem(E.tlsKeyFile, keyFile) };
    served = [tls.cert];
  }
  let pod: PodSettings;
  try {
    pod = podSettingsFrom(env, !!tls);
  } catch (e) {
    fail((e as Error).message);
  }
  const localMode = env[E.localHarness];
  const local = localMode && localMode !== "off" ? localMode : undefined;
  if (local && local !== "process" && local !== "inline") fail(`${E.localHarness} must be off, process or inline`);
  const harnesses = local
    ? new LocalHarnesses({
        mode: local as "process" | "inline",
        reposRoot: env[E.localReposRoot] || DEFAULT_CACHE_ROOT,
        workRoot: env[E.localWorkRoot] || join(tmpdir(), "jr2-local-work"),
        namespace,
        log,
      })
    : undefined;

  // The CA every Sandbox pod relies on, before the first one is written (its NetworkPolicies are
  // the operator's, decision 0047).
  await ensureInstallation(namespace).catch((e: Error) =>
    fail(`the installation's CA or trust ConfigMap in namespace ${namespace}: ${e.message}`),
  );
  const watch = new SandboxWatch(namespace);
  await watch.start();
  // A Harness that breaks a bound (an attach, an admission, a stream page), named where a person looks.
  const onMisbehaviour = misbehaviourReporter({ namespace, watch, count: (r) => metrics.harnessMisbehaved(r), log });
  // Local mode's Effectors run here too (orchestrator/local), when this build has them.
  const localEffector = (harnesses as { effectorAddress?: (name: string) => EffectorAddress | undefined } | undefined)
    ?.effectorAddress;
  const gateway = new KubeSandboxGateway({
    namespace,
    watch,
    signingKey,
    pod,
    attachDeadlineMs: duration(E.attachDeadline, ATTACH_DEADLINE_MS),
    onMisbehaviour,
    ...(harnesses ? { resolveEndpoint: harnesses.resolve, attachesAtOnce: LOCAL_ATTACHES_AT_ONCE } : {}),
    ...(harnesses && localEffector
      ? { resolveEffector: (s: SandboxModel) => localEffector.call(harnesses, s.metadata?.name ?? "") }
      : {}),
  });
  // A Machine's Effects: each workspace's ledger in a ConfigMap its Sandbox owns, run one after
  // another by the workspace's Effector, each at most once (decision 0070).
  let effects: Effects | undefined;
  const registry = new WorkspaceRegistry({
    ownership,
    gateway,
    watch,
    credentials,
    podConfig: pod.config,
    budgets: { podMs: duration(E.podBudget, 120_000), repoMs: duration(E.repoBudget, 25 * 60_000) },
    lease: { intervalMs: duration(E.leaseInterval, 5 * 60_000) },
    log,
    onEvent: (name, event) => {
      metrics.observe(event);
      if (event.type === "transition" && ["lost", "failed", "destroyed"].includes(event.to)) {
        effects?.stop(name);
        void harnesses?.stop(name);
      }
    },
  });
  effects = new Effects({
    ownership,
    namespace,
    gateway,
    watch,
    credentials,
    podConfig: pod.config,
    declaredOf: declaredEffectSecrets,
    // Local mode: each Sandbox's /work is a directory here, its Effector's too.
    ...(harnesses ? { workRootOf: (name: string) => harnesses.workRootOf(name) } : {}),
    onState: (kind, state) => metrics.effect(kind, state),
    log,
  });
  // Agents' turns and picks: each workspace's ledgers in ConfigMaps its Sandbox owns, read back
  // lazily; what a Sandbox sends is checked against the turns this Orchestrator admitted (decision 0042).
  const turns = new Turns({
    namespace,
    gateway,
    watch,
    onMisbehaviour,
  });
  const picks = new PickStore({ watch, turns, namespace });
  // What this replica owns changes (decision 0079): a lost shard's workspaces stop here first (their
  // actors and keepalives, their Effects workers awaited, their ledgers forgotten); a gained one's
  // are adopted as a restarted Orchestrator adopts them: actors resumed at the attach, every
  // unsettled Effect run or recovered (a `sent` one asked about, never sent blind).
  const inShards = (list: number[]) => {
    const set = new Set(list);
    return (name: string) => set.has(ownership.shardOf(name));
  };
  const moved = async ({ gained, lost }: OwnershipChange) => {
    if (lost.length) {
      const names = watch
        .all()
        .map((s) => s.metadata?.name ?? "")
        .filter((n) => n && inShards(lost)(n));
      await registry.release(lost);
      await effects!.release(names);
      turns.release(names);
      picks.release(names);
    }
    if (gained.length) {
      await registry.adopt(gained);
      void effects!.recover(inShards(gained));
    }
    metrics.shardMoves({ gained, lost });
    metrics.shardsHeld(ownership.owned().length);
  };
  ownership.onChange(moved);
  // The only replica adopts every workspace before it answers a call (restart re-attach).
  if (!shards) await moved({ gained: ownership.owned(), lost: [] });
  const server = await startOrchestratorServer(
    {
      workspaces: registry,
      checkToken: tokens.check,
      metrics: async () => metrics.render(await registry.list()),
      log,
      picks,
      turns,
      effects,
      checkSandboxToken: sandboxTokenChecker(signingKey),
      ...(tls ? { tls } : {}),
      ownership,
      // Peers are pinned to the certificates this replica serves (decision 0079).
      ...(tls ? { peerTls: () => served } : {}),
    },
    port,
    host,
  );
  const bound = (server.address() as import("node:net").AddressInfo).port;
  // The metrics with no token, on a port of their own (decision 0076).
  const metricsListener =
    metricsPort === undefined
      ? undefined
      : await listen(
          metricsServer(async () => metrics.render(await registry.list())),
          metricsPort,
          host,
        ).catch((err: Error) => fail(`${E.metricsPort}=${metricsPort}: cannot listen (${err.message})`));
  // A renewed certificate is served to the next connection, no restart (decision 0058).
  const tlsFiles =
    tls && certFile && keyFile
      ? new TlsFiles({
          certFile,
          keyFile,
          initial: tls,
          serve: (pair) => {
            (server as unknown as https.Server).setSecureContext(pair);
            served = [pair.cert, ...served.filter((c) => c !== pair.cert)].slice(0, 2);
          },
          log,
          onRead: (outcome) => metrics.tlsRead(outcome),
        })
      : undefined;
  // Outside the cluster the Custodians run here too: they reach this process on loopback.
  if (local && !env[E.selfUrl]) pod.orchestratorUrl = `${tls ? "https" : "http"}://127.0.0.1:${bound}`;
  // One of several: listening first, so a peer's forwarded call finds this replica once it holds a
  // shard; it adopts the shards its Leases bring.
  if (shards) await shards.start().catch((e: Error) => fail(`the shard Leases in ${leasesNamespace}: ${e.message}`));
  log({
    level: "info",
    message: "orchestrator listening",
    port: bound,
    ...(metricsListener ? { metricsPort: (metricsListener.address() as import("node:net").AddressInfo).port } : {}),
    host,
    scheme: tls ? "https" : "http",
    namespace,
    localHarness: local ?? "off",
    replica: ownership.identity,
  });
  const stop = async () => {
    // Several replicas: hand the shards over first (each stopped here, then its Lease given up),
    // so the others take them at once rather than after the Leases expire (decision 0079).
    await shards
      ?.stop()
      .catch((err: Error) => log({ level: "warn", message: "the shards were not handed over", detail: err.message }));
    registry.stop();
    await effects?.stopAll();
    tokens.close();
    tlsFiles?.close();
    watch.close();
    server.close();
    metricsListener?.close();
    await harnesses?.stopAll();
    process.exit(0);
  };
  process.once("SIGTERM", () => void stop());
  process.once("SIGINT", () => void stop());
}

main().catch((err: unknown) => fail(err instanceof Error ? err.message : String(err)));
