// `npm run cache-agent`: one node's Repo cache agent. Reads:
//   NODE_NAME                 the node it serves (required; the downward API's spec.nodeName)
//   JR2_CACHE_ROOT            where the caches live (default /var/lib/jr2/repos)
//   JR2_CACHE_EVICT_AFTER     how long a cache no pod mounts is kept (Go duration, default 1h)
//   JR2_CACHE_CLONE_TIMEOUT   the bound on one clone (Go duration, default 20m)
//   JR2_SANDBOX_NAMESPACES    the opted-in namespaces: only their Repos are fetched (decision 0066)
//   JR2_CACHE_VOUCHED_HOSTS   internal git hosts the installation vouches for (host[:port], ...)
//   JR2_CACHE_MAX_REPOS       the most Repos one namespace may cache here (default 128)
//   JR2_CACHE_MAX_BYTES       the most bytes one namespace's caches may take here (default 20Gi)
//   JR2_CACHE_CA_FILE         a PEM file trusted beside the system's roots for https fetches (a
//                             private forge's CA, mounted from a ConfigMap)
//   JR2_LOCAL_REPO_ROOTS      local mode only (never in a manifest): where a Repo's url may be a
//                             path; with it and no JR2_SANDBOX_NAMESPACES, every namespace is served
//   KUBECONFIG                the cluster (in a pod: its service account)
import { mkdirSync } from "node:fs";
import { envDuration } from "../lib/duration";
import { CacheAgent, DEFAULT_EVICT_AFTER_MS } from "./agent";
import { DEFAULT_CLONE_TIMEOUT_MS } from "./bare-checkouts";
import { CACHE_AGENT_ENV, cacheRootFrom } from "../api/env";
import { cacheBoundsFrom, localRepoRootsFrom, vouchedHostsFrom } from "../api/repo-fetch-policy";
import { sandboxNamespacesFrom } from "../api/sandbox-namespaces";
import { fail, jsonLog } from "../lib/log";

const duration = (name: string, fallback: number): number => {
  try {
    return envDuration(name, fallback);
  } catch (err) {
    fail((err as Error).message);
  }
};

const node =
  process.env[CACHE_AGENT_ENV.nodeName] ||
  fail(
    `${CACHE_AGENT_ENV.nodeName} is not set: set it to the node this agent serves (the downward API's spec.nodeName)`,
  );
const root = cacheRootFrom(process.env);
const evictAfterMs = duration(CACHE_AGENT_ENV.evictAfter, DEFAULT_EVICT_AFTER_MS);
const cloneTimeoutMs = duration(CACHE_AGENT_ENV.cloneTimeout, DEFAULT_CLONE_TIMEOUT_MS);
const read = <T>(fn: () => T): T => {
  try {
    return fn();
  } catch (err) {
    fail((err as Error).message);
  }
};
const localRoots = read(() => localRepoRootsFrom(process.env));
const vouched = read(() => vouchedHostsFrom(process.env));
const bounds = read(() => cacheBoundsFrom(process.env));
// The installation's list, as its manifest writes it (decision 0066). Only local mode, whose
// runner serves every test namespace, may leave it unset to mean every namespace.
const namespaces =
  localRoots && !process.env[CACHE_AGENT_ENV.sandboxNamespaces]?.trim()
    ? undefined
    : new Set(read(() => sandboxNamespacesFrom(process.env)));
mkdirSync(root, { recursive: true });

const nodeLog = jsonLog({ node });
const log = (level: "info" | "warn", message: string, fields: Record<string, unknown> = {}) =>
  nodeLog({ level, message, ...fields });

new CacheAgent(node, root, log, {
  evictAfterMs,
  git: { cloneTimeoutMs },
  namespaces,
  localRoots,
  vouched,
  bounds,
})
  .start()
  .then((stop) => {
    log("info", "cache agent watching Repos and Sandboxes", {
      root,
      evictAfterMs,
      cloneTimeoutMs,
      namespaces: namespaces ? [...namespaces] : "every (local mode)",
      vouched: vouched.map((r) => r.text),
      ...bounds,
      ...(localRoots ? { localRoots } : {}),
    });
    for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => (stop(), process.exit(0)));
  })
  .catch((err) => {
    log("warn", "cache agent could not start", { err: String(err?.message ?? err) });
    process.exit(1);
  });
