// Environment variables that cross a process boundary: one workload (or its manifest, or the
// process that spawns it) writes them and another reads them. Each name is defined here once and
// both sides import it (docs/decisions/0012-shared-contracts.md).
import { COMPANION_NAMESPACE, DEFAULT_CACHE_ROOT } from "./wire";

/** The address a companion's server binds (lib/http-json.ts listenHost). */
const LISTEN_HOST = "JR2_LISTEN_HOST";

/** The Harness (harness/main.ts); written by the Sandbox's CR, the operator's pod and local mode. */
export const HARNESS_ENV = {
  /** The SHA-256 (hex) of the Harness's bearer: the pod never holds the bearer itself. */
  tokenSha256: "JR2_HARNESS_TOKEN_SHA256",
  workRoot: "JR2_WORK_ROOT",
  reposRoot: "JR2_REPOS_ROOT",
  /** `1`: end when stdin closes (a local-mode parent that dies without a word). */
  exitWithParent: "JR2_EXIT_WITH_PARENT",
  port: "PORT",
  /** Unset: every interface (the pod's Service must reach it); local mode says 127.0.0.1. */
  host: LISTEN_HOST,
  /** Where it keeps its conversations (decision 0025), a volume of its own. */
  conversationsDir: "JR2_CONVERSATIONS_DIR",
  /** The model its Agents ask (docs/decisions/0054): the Custodian's provider route by name
   * (`<JR2_CUSTODIAN_URL>/providers/<name>` + the kind's path), or a base url outright; the model's
   * id as the provider names it; and the env var holding the key's Stand-in (default: the kind's,
   * e.g. ANTHROPIC_API_KEY). */
  modelProvider: "JR2_MODEL_PROVIDER",
  modelUrl: "JR2_MODEL_URL",
  modelId: "JR2_MODEL_ID",
  modelKeyEnv: "JR2_MODEL_KEY_ENV",
  /** The provider's kind (api/model-kinds.ts): the Orchestrator writes it from custodian.providers;
   * default openai-compatible. */
  modelKind: "JR2_MODEL_KIND",
  /** The API to speak when the kind takes more than one (openai: openai-responses or openai-completions). */
  modelApi: "JR2_MODEL_API",
  /** How hard a reasoning model thinks: off (default), minimal, low, medium, high. */
  modelThinking: "JR2_MODEL_THINKING",
} as const;

/** The Sandbox Effector (decision 0021): where its mounts are. */
export const EFFECTOR_ENV = {
  port: "JR2_EFFECTOR_PORT",
  work: "JR2_EFFECTOR_WORK",
  repos: "JR2_EFFECTOR_REPOS",
  key: "JR2_EFFECTOR_KEY",
  secrets: "JR2_EFFECTOR_SECRETS",
  git: "JR2_EFFECTOR_GIT",
  scratch: "JR2_EFFECTOR_SCRATCH",
  /** "1": the pod config requires credentialed commands, so an Effector that cannot confine them
   * (no Landlock) ends at start, saying why in its termination message (decision 0070). */
  requireCommands: "JR2_EFFECTOR_REQUIRE_COMMANDS",
  /** The jr2-confine binary (default: beside the Effector's bundle, /app/jr2-confine). */
  confine: "JR2_EFFECTOR_CONFINE",
  /** A PEM bundle trusted beside the system roots for pushes and http Effects (pod config effector.trust). */
  ca: "JR2_EFFECTOR_CA_FILE",
  /** The downward API's pod name, address (what a signed request must be meant for) and node (what a
   * Landlock refusal names). */
  podName: "POD_NAME",
  podIp: "POD_IP",
  node: "NODE_NAME",
} as const;

/** The build (`npm run build`, scripts/post-build.ts): the namespaces that hold Sandboxes,
 * comma-separated (default DEFAULT_SANDBOX_NAMESPACE). Each gets the opt-in label and the
 * components' RoleBindings in the rendered manifests (decision 0045). */
export const BUILD_ENV = {
  sandboxNamespaces: "JR2_SANDBOX_NAMESPACES",
} as const;

/** The cache agent (cache-agent/main.ts); written by its DaemonSet and the local runner. */
export const CACHE_AGENT_ENV = {
  nodeName: "NODE_NAME",
  cacheRoot: "JR2_CACHE_ROOT",
  evictAfter: "JR2_CACHE_EVICT_AFTER",
  cloneTimeout: "JR2_CACHE_CLONE_TIMEOUT",
  /** The opted-in namespaces, comma-separated, as the build read them (api/sandbox-namespaces.ts):
   * only their Repos are fetched (decision 0066). Its DaemonSet writes the build's list. */
  sandboxNamespaces: BUILD_ENV.sandboxNamespaces,
  /** Internal git hosts the installation vouches for (`host`, `host:port` or an IP literal,
   * comma-separated): the only internal addresses a Repo's url may reach (decision 0066). */
  vouchedHosts: "JR2_CACHE_VOUCHED_HOSTS",
  /** The most Repos one namespace may have cached on a node (default 128). */
  maxRepos: "JR2_CACHE_MAX_REPOS",
  /** The most bytes one namespace's caches may take on a node's disk (a quantity, default 20Gi). */
  maxBytes: "JR2_CACHE_MAX_BYTES",
  /** A PEM file of certificates trusted beside the system's for https fetches (a private forge's
   * CA), e.g. a ConfigMap the installation mounts into the DaemonSet. */
  caFile: "JR2_CACHE_CA_FILE",
} as const;

/**
 * Local mode's switch (decision 0066): directories under which a Repo's url may be a local path
 * (absolute, comma-separated). Set only by the local runners (dev/local-operator.ts,
 * dev/local-cache-agent.ts) for `npm start` and the test tiers that run the module and the agents
 * as processes; no built manifest or chart ever carries it, so in a cluster a Repo's url is a
 * network remote, refused by admission and by the agent's git otherwise.
 */
export const LOCAL_REPO_ROOTS_ENV = "JR2_LOCAL_REPO_ROOTS";

/** Where the node caches live: `JR2_CACHE_ROOT`, unset or empty the default. The operator (the
 * pods' mounts, the pod guard) and the cache agents read it through this one function, so the two
 * sides cannot disagree on what an empty value means. */
export const cacheRootFrom = (env: NodeJS.ProcessEnv): string => env[CACHE_AGENT_ENV.cacheRoot] || DEFAULT_CACHE_ROOT;

/** The operator (the Pepr module). */
export const OPERATOR_ENV = {
  /** Where the node caches live, as the pods mount them: the cache agents must agree. */
  cacheRoot: CACHE_AGENT_ENV.cacheRoot,
  writeQps: "JR2_WRITE_QPS",
  writeBurst: "JR2_WRITE_BURST",
  eventQps: "JR2_EVENT_QPS",
  eventBurst: "JR2_EVENT_BURST",
  minIdleTimeout: "JR2_MIN_IDLE_TIMEOUT",
  /** The module's port when run locally (deployed it is 3000). */
  peprPort: "JR2_PEPR_PORT",
  /** Where the companions run (the egress point and the Orchestrator): the Sandbox namespaces'
   * policies admit their pods in this namespace alone (default COMPANION_NAMESPACE, as every
   * manifest and the chart install them; decision 0067). */
  companionNamespace: "JR2_COMPANION_NAMESPACE",
} as const;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The companions' namespace as the operator reads it: JR2_COMPANION_NAMESPACE, unset or empty the
 * default; a value that is no namespace name throws, naming the variable and the fix. */
export function companionNamespaceFrom(env: NodeJS.ProcessEnv): string {
  const v = (env[OPERATOR_ENV.companionNamespace] ?? "").trim();
  if (!v) return COMPANION_NAMESPACE;
  if (!DNS_LABEL.test(v))
    throw new Error(
      `${OPERATOR_ENV.companionNamespace}=${JSON.stringify(v)} is no namespace name: name the namespace the ` +
        `Orchestrator and the egress point run in (a DNS label; default ${COMPANION_NAMESPACE})`,
    );
  return v;
}

/** The Orchestrator (orchestrator/main.ts); written by its Deployment and the local runner. */
export const ORCHESTRATOR_ENV = {
  port: "PORT",
  /** The address to bind; unset: every interface in a pod, loopback outside one. */
  host: LISTEN_HOST,
  namespace: "JR2_NAMESPACE",
  signingKeyFile: "JR2_SIGNING_KEY_FILE",
  apiTokensFile: "JR2_API_TOKENS_FILE",
  gitCredentialsFile: "JR2_GIT_CREDENTIALS_FILE",
  leaseInterval: "JR2_LEASE_INTERVAL",
  podBudget: "JR2_POD_BUDGET",
  repoBudget: "JR2_REPO_BUDGET",
  /** The whole attach's deadline, its answer included (Go duration; decision 0049). */
  attachDeadline: "JR2_ATTACH_DEADLINE",
  localHarness: "JR2_LOCAL_HARNESS",
  localReposRoot: "JR2_LOCAL_REPOS_ROOT",
  localWorkRoot: "JR2_LOCAL_WORK_ROOT",
  /** The Sandbox pod's composition (orchestrator/workspaces/pod-config.ts): YAML or JSON; absent, the defaults. */
  podConfigFile: "JR2_POD_CONFIG_FILE",
  /** The companions image: the `custodian` container's and, by default, the `effector`'s (jr2's Effector,
   * decision 0070); the pod config's custodian.image and effector.image may name others. */
  custodianImage: "JR2_CUSTODIAN_IMAGE",
  /** How a Custodian reaches this Orchestrator (default: its Service in POD_NAMESPACE). */
  selfUrl: "JR2_ORCHESTRATOR_URL",
  /** The Orchestrator's own namespace (the Deployment's fieldRef), for its Service's url. */
  podNamespace: "POD_NAMESPACE",
  /** The egress point's proxy, as a Sandbox pod reaches it (default in the cluster: its Service in
   * POD_NAMESPACE; `off`: none, the Sandboxes' tools then reach nothing; decision 0051). */
  egressUrl: "JR2_EGRESS_URL",
  /** The egress point's admin listener, where the Orchestrator reads a workspace's egress log. */
  egressAdminUrl: "JR2_EGRESS_ADMIN_URL",
  /** Both set: the API is served over TLS with this certificate and key (PEM files; decision 0047). */
  tlsCertFile: "JR2_TLS_CERT_FILE",
  /** The port serving GET /metrics with no token (decision 0076); unset: none (the API's admin /metrics stays). */
  metricsPort: "JR2_METRICS_PORT",
  tlsKeyFile: "JR2_TLS_KEY_FILE",
  /** Set: this Orchestrator is one of several, owning shards of the workspaces by Leases kept in
   * this namespace (its own; decision 0079). Unset: it is the only one and owns every workspace. */
  shardLeasesNamespace: "JR2_SHARD_LEASES_NAMESPACE",
  /** This replica's identity among the others (the Deployment's fieldRef metadata.name). */
  podName: "POD_NAME",
  /** Where the other replicas reach this one's API (e.g. `https://$(POD_IP):8090`): a call for a
   * workspace this replica owns is forwarded there (decision 0079). */
  peerUrl: "JR2_PEER_URL",
} as const;

/** A client of the Orchestrator's API (examples/): the PEM CA its https url's certificate chains to. */
export const ORCHESTRATOR_CLIENT_ENV = { caFile: "JR2_ORCHESTRATOR_CA_FILE" } as const;

/** The Custodian (custodian/main.ts); written by the Sandbox pod's `custodian` container (api/custodian-config.ts
 * holds the defaults: the ports, the mounts' paths). */
export const CUSTODIAN_ENV = {
  /** The loopback listener's port (routes and proxy; always 127.0.0.1), default 8081. */
  port: "JR2_CUSTODIAN_PORT",
  /** The probes' listener (/healthz, /readyz, /metrics), default 15021. */
  healthPort: "JR2_CUSTODIAN_HEALTH_PORT",
  /** The probes' address; unset: every interface in a pod (the kubelet probes the pod's IP), loopback outside. */
  healthHost: LISTEN_HOST,
  /** The config file (the `<sandbox>-custodian` ConfigMap's `config.json`). */
  configFile: "JR2_CUSTODIAN_CONFIG",
  /** The directory of held values, one file each (the Sandbox token, the held secrets). */
  valuesDir: "JR2_CUSTODIAN_VALUES_DIR",
  /** The directory of the installation CA's `tls.crt` and `tls.key` (interception needs both). */
  caDir: "JR2_CUSTODIAN_CA_DIR",
  /** A PEM bundle trusted for upstream hosts beside the system roots (a private CA). */
  upstreamCa: "JR2_CUSTODIAN_UPSTREAM_CA",
  /** `1`: end when stdin closes (local mode's parent, as the Harness does). */
  exitWithParent: "JR2_EXIT_WITH_PARENT",
} as const;

/** Any workload's API client (lib/kube.ts): `1` speaks HTTP/2 to the API server. */
export const API_HTTP2_ENV = "JR2_API_HTTP2";
