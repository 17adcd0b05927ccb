// Which Repo urls a node may fetch, and what one namespace may cache (decision 0066). Pure: the
// admission review of Repos and the cache agents read the same rules, so admission never admits a
// url the agent then fetches where it should not, nor refuses one the agent would take.
//
// - A Repo's url is a network remote (https, http, ssh, git). A local path or file:// url reads
//   the node's own disk as root: another namespace's cache, anything the agent mounts. It is
//   refused, except in local mode (LOCAL_REPO_ROOTS_ENV), and there only under the directories it
//   names. No built manifest or chart sets that switch.
// - git itself refuses every other protocol: `protocol.allow=never` and an allowlist
//   (gitProtocolConfig), so no url, submodule or redirect reaches file://, ext:: or fd::.
// - A remote's host may not resolve to an internal address (api/egress-point.ts isInternalAddress,
//   as the egress point judges) unless the installation vouches for it (vouchedHostsFrom).
// - One namespace may cache at most `maxRepos` Repos and `maxBytes` bytes on a node.
import { isAbsolute, resolve as resolvePath } from "node:path";
import { isInternalAddress, matchEgress, parseEgressRule, type EgressRule } from "./egress-point";
import { CACHE_AGENT_ENV, LOCAL_REPO_ROOTS_ENV } from "./env";
import { RepoUrlError, repoUrlLocation } from "./repo-identity";

/** The protocols the cache agent's git may speak: every network remote jr2 names (git:// too:
 * an unauthenticated read, as public git daemons serve). Never file (the node's disk), ext (a
 * command) or fd. */
export const GIT_PROTOCOLS = ["https", "http", "ssh", "git"] as const;

/**
 * The `-c` arguments every network git command of the agent carries: every protocol refused, then
 * the allowlist; file:// only in local mode, for a url its roots admit (`allowFile`). Given on the
 * command line, after any config file, so no repository's or system's config widens it.
 */
export function gitProtocolConfig(allowFile = false): string[] {
  return [
    ...["-c", "protocol.allow=never"],
    ...GIT_PROTOCOLS.flatMap((p) => ["-c", `protocol.${p}.allow=always`]),
    ...["-c", `protocol.file.allow=${allowFile ? "always" : "never"}`],
  ];
}

/** A path, or a url whose scheme names file (file://, git+file://), however else it is written. */
const LOCAL_SPELLING = /^\s*(\/|[a-z0-9.-]*\+?file(\+[a-z0-9.-]*)?:\/\/)/i;

/** Whether a url names the local disk (a path or a file:// url), as the one reading
 * (api/repo-identity.ts) takes it; one it refuses to read is local when it is spelled as one. */
export function isLocalRepoUrl(url: string): boolean {
  try {
    return repoUrlLocation(url).scheme === "file";
  } catch (err) {
    if (err instanceof RepoUrlError) return LOCAL_SPELLING.test(url);
    throw err;
  }
}

/** The path segments of a local url (a trailing `.git` kept: the directory git reads). */
function localSegments(url: string): string[] {
  const text = url.trim();
  const path = text.startsWith("/") ? text : decodeURIComponent(text.replace(/^[a-z+]*file:\/\//i, ""));
  return path.split("/").filter((s) => s !== "" && s !== ".");
}

const segmentsOf = (dir: string) => resolvePath(dir).split("/").filter(Boolean);

/** Whether `segments` lie under (or are) the directory `dir`, by whole segments. */
export const underDirectory = (segments: readonly string[], dir: string): boolean => {
  const root = segmentsOf(dir);
  return root.length <= segments.length && root.every((s, i) => segments[i] === s);
};

/** Local mode's roots from LOCAL_REPO_ROOTS_ENV: undefined when unset (a cluster: no local url).
 * Throws naming the variable and the fix when an entry is not an absolute path. */
export function localRepoRootsFrom(env: NodeJS.ProcessEnv): string[] | undefined {
  const raw = env[LOCAL_REPO_ROOTS_ENV];
  if (raw === undefined || raw.trim() === "") return undefined;
  const roots = raw
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const [i, r] of roots.entries())
    if (!isAbsolute(r))
      throw new Error(`${LOCAL_REPO_ROOTS_ENV}[${i}]: ${JSON.stringify(r)} is not an absolute path: write e.g. /tmp`);
  return roots;
}

const NETWORK_FIX =
  "give the repository's network url (https://host/org/repo.git, ssh://git@host/org/repo.git or git@host:org/repo.git)";

/**
 * Why a Repo's url may not be fetched as a local path, or undefined when it is a network url (or,
 * in local mode, a path under one of `roots`). The words follow `spec.url`; the url is never
 * quoted (it may carry a password).
 */
export function localUrlRefusal(url: string, roots: readonly string[] | undefined): string | undefined {
  if (!isLocalRepoUrl(url)) return undefined;
  if (!roots)
    return (
      "is a local path (a path or file:// url), which would have every node's cache agent copy that " +
      `directory of the node's own disk, another namespace's cache included: ${NETWORK_FIX}`
    );
  const segments = localSegments(url);
  if (!segments.includes("..") && roots.some((r) => underDirectory(segments, r))) return undefined;
  return (
    `is a local path outside the local mode's roots (${LOCAL_REPO_ROOTS_ENV}=${roots.join(",")}): ` +
    `put the repository under one of them, or ${NETWORK_FIX}`
  );
}

// ---------------------------------------------------------------------------------------------
// Where a remote points

/** A remote's host and port as git will connect to them (default ports filled in). */
export type RemoteEndpoint = { scheme: string; host: string; port: number };

const DEFAULT_PORTS: Record<string, number> = { https: 443, http: 80, ssh: 22, git: 9418 };

/** The host (lowercased, brackets dropped from an IPv6 literal) and port a network url reaches. */
export function remoteEndpoint(url: string): RemoteEndpoint {
  const loc = repoUrlLocation(url);
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(loc.host);
  if (!m) throw new RepoUrlError("names no host: give host[:port]");
  const host = m[1].replace(/^\[|\]$/g, "");
  return { scheme: loc.scheme, host, port: m[2] ? Number(m[2]) : (DEFAULT_PORTS[loc.scheme] ?? 0) };
}

/**
 * The internal git hosts the installation vouches for, from CACHE_AGENT_ENV.vouchedHosts: each an
 * exact name or IP literal, with an optional port (the egress point's rule syntax), as its base
 * list's exact rules are the only ones that reach an internal address. A wildcard is refused: a
 * vouch names the host. Throws naming the variable, the entry and the fix.
 */
export function vouchedHostsFrom(env: NodeJS.ProcessEnv): EgressRule[] {
  const name = CACHE_AGENT_ENV.vouchedHosts;
  const rules: EgressRule[] = [];
  for (const [i, text] of (env[name] ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .entries()) {
    const p = parseEgressRule(text);
    if (!p.ok) throw new Error(`${name}[${i}]: ${p.message}`);
    if (p.rule.kind === "wildcard")
      throw new Error(`${name}[${i}]: ${JSON.stringify(text)} is a wildcard: vouch for each internal git host by name`);
    rules.push(p.rule);
  }
  return rules;
}

/** Why a remote may not be reached from a node, given every address its host resolved to, or
 * undefined. Internal addresses only for a host (and port) the installation vouches for. */
export function internalAddressRefusal(
  at: RemoteEndpoint,
  addresses: readonly string[],
  vouched: readonly EgressRule[],
): string | undefined {
  const internal = addresses.filter((a) => isInternalAddress(a));
  if (!internal.length) return undefined;
  if (matchEgress(vouched, at.host, at.port)) return undefined;
  const hostPort = at.host.includes(":") ? `[${at.host}]:${at.port}` : `${at.host}:${at.port}`;
  return (
    `names ${hostPort}, which resolves to an internal address (${internal.join(", ")}): the cache agent reaches ` +
    "an internal git host only when the installation vouches for it. Give the repository's public url, or have " +
    `the installation add the host to ${CACHE_AGENT_ENV.vouchedHosts} (the cache agent's manifest; a tenant cannot)`
  );
}

// ---------------------------------------------------------------------------------------------
// What one namespace may cache on a node

export type CacheBounds = { maxRepos: number; maxBytes: number };

export const DEFAULT_CACHE_BOUNDS: CacheBounds = { maxRepos: 128, maxBytes: 20 * 2 ** 30 };

const UNITS: Record<string, number> = {
  "": 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
};

/** A byte count as Kubernetes writes a quantity: `10Gi`, `500M`, `1048576`. Undefined if not one. */
export function parseBytes(text: string): number | undefined {
  const m = /^([0-9]+)(k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(text.trim());
  return m ? Number(m[1]) * UNITS[m[2] ?? ""] : undefined;
}

/** The bounds from the agent's environment; unset, the defaults. Throws naming the variable. */
export function cacheBoundsFrom(env: NodeJS.ProcessEnv): CacheBounds {
  const repos = env[CACHE_AGENT_ENV.maxRepos]?.trim();
  const bytes = env[CACHE_AGENT_ENV.maxBytes]?.trim();
  const out = { ...DEFAULT_CACHE_BOUNDS };
  if (repos) {
    if (!/^[0-9]+$/.test(repos) || Number(repos) < 1)
      throw new Error(`${CACHE_AGENT_ENV.maxRepos}=${repos}: write a whole number of Repos, at least 1`);
    out.maxRepos = Number(repos);
  }
  if (bytes) {
    const n = parseBytes(bytes);
    if (n === undefined || n < 1)
      throw new Error(`${CACHE_AGENT_ENV.maxBytes}=${bytes}: write a byte count, e.g. 10Gi or 500Mi`);
    out.maxBytes = n;
  }
  return out;
}

/** A byte count as people read it (binary units, one decimal). */
export function humanBytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
}

/** The node entry's words when a namespace has more Repos than it may cache here. */
export const repoCountRefusal = (namespace: string, count: number, max: number) =>
  `namespace "${namespace}" has ${count} Repos, and one namespace may cache at most ${max} on a node ` +
  `(${CACHE_AGENT_ENV.maxRepos}); this one is past the bound (the oldest are cached first): delete Repos this ` +
  "namespace no longer needs, or have the installation raise the bound";

/** The node entry's words when a namespace's caches on a node take the most bytes they may. */
export const byteRefusal = (namespace: string, used: number, max: number) =>
  `namespace "${namespace}"'s caches on this node take ${humanBytes(used)}, and one namespace may take at most ` +
  `${humanBytes(max)} (${CACHE_AGENT_ENV.maxBytes}): nothing more is fetched for it here until they take less. ` +
  "Delete Repos this namespace no longer needs (their caches go once no pod mounts them), or have the " +
  "installation raise the bound";

/** The node entry's words for a Repo of a namespace the installation did not opt in. */
export const namespaceNotOptedIn = (namespace: string) =>
  `namespace "${namespace}" has not opted in to holding Sandboxes, so no node caches its Repos: add it to the ` +
  `installation's ${CACHE_AGENT_ENV.sandboxNamespaces} and apply the rebuilt manifests, or keep the Repo in a ` +
  "namespace that has";
