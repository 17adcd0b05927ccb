// The cache agent's Kubernetes side, one per node: it keeps one bare checkout per Repo under its
// cache root, fetches each on the Repo's interval and at once when a Sandbox on its node asks
// (created after the last fetch), and writes only its own node's entry of each Repo's
// status.nodes, so agents on different nodes never overwrite each other (decision 0010).
// A sweep adopts checkouts found without a Repo (pinned: never fetched, never evicted) and evicts
// caches no pod here mounts and no bound Repo wants, once unused for a grace period (eviction.ts).
//
// A cache is its Repo's namespace's (decision 0046): `<root>/<namespace>/<key>`, fetched with that
// namespace's Secret, and only if the Secret declares itself a credential for the url
// (credentials.ts). Which caches pods here may mount is read from the Sandboxes it watches: the
// agent lists no pods and reads Secrets only where the installation bound it.
//
// What it fetches at all (decision 0066, api/repo-fetch-policy.ts): Repos of the namespaces the
// installation opted in, whose url is a network remote whose host resolves to no internal address
// (unless the installation vouches for it), within what one namespace may cache on a node (a count
// of Repos and bytes on disk). Anything else is never handed to git, and the Repo's node entry
// says which rule it met (`reason`), with the figure and the fix.
import { existsSync } from "node:fs";
import { lookup } from "node:dns/promises";
import { mkdir, readdir, lstat, realpath } from "node:fs/promises";
import { isIP } from "node:net";
import { join } from "node:path";
import { K8s } from "kubernetes-fluent-client";
import { RepoModel, SandboxModel, type RepoNode } from "../api/crd";
import { REPO_NODE_REASON } from "../api/crd/sources/repo";
import type { EgressRule } from "../api/egress-point";
import {
  DEFAULT_CACHE_BOUNDS,
  byteRefusal,
  internalAddressRefusal,
  isLocalRepoUrl,
  localUrlRefusal,
  namespaceNotOptedIn,
  remoteEndpoint,
  repoCountRefusal,
  underDirectory,
  type CacheBounds,
} from "../api/repo-fetch-policy";
import { checkRepoUrl, repoKey } from "../api/repo-identity";
import { parseGoDuration } from "../lib/duration";
import { kubeRequest, paths } from "../lib/kube";
import { ApiError } from "../lib/api-error";
import { cacheId, evictable, sandboxCaches } from "./eviction";
import { CredentialRefused, SecretReadRefused, gitCredsOf, secretReadFailure, type SecretObject } from "./credentials";
import {
  cacheKeys,
  consolidate,
  ensureCache,
  evictCache,
  fetchCache,
  ownedByAgent,
  pin,
  type EnsureOptions,
  type GitCreds,
  type GitOptions,
} from "./bare-checkouts";

type Reason = (typeof REPO_NODE_REASON)[keyof typeof REPO_NODE_REASON];

/** A fetch the agent will not make (decision 0066): nothing is handed to git; the node entry says why. */
export class FetchRefused extends Error {
  constructor(
    readonly reason: Reason,
    message: string,
  ) {
    super(message);
  }
}

/** Bytes a directory tree takes on disk (allocated blocks), symlinks not followed; 0 when absent. */
export async function diskBytes(dir: string): Promise<number> {
  let total = 0;
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const p = join(dir, e.name);
    if (e.isDirectory()) total += await diskBytes(p);
    else {
      const st = await lstat(p).catch(() => undefined);
      if (st) total += st.blocks * 512;
    }
  }
  return total;
}

/** Every address a name resolves to, as the egress point asks (all of them, each judged). */
const resolveAll = async (host: string) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

type Log = (level: "info" | "warn", msg: string, fields?: Record<string, unknown>) => void;

type Tracked = {
  repo: RepoModel;
  key: string;
  /** `<namespace>/<key>`: the cache's path under the root, and its name in every map here. */
  id: string;
  lastFetch: number;
  interval: number;
  timer?: NodeJS.Timeout;
  /** Evicted from this node: interval fetches stop until a Sandbox here asks again. */
  evicted: boolean;
  /** One sync at a time per Repo: each waits for the one before. */
  chain: Promise<void>;
  /** A sync queued and not yet started: it serves every request made meanwhile. `plain`: an
   * interval or a new Repo asked for it; `ask`: the latest Sandbox ask it answers (ms, 0 for none). */
  queued?: { plain: boolean; ask: number };
  /** A refused Secret read is asked again on a backoff (the operator may not have granted it
   * yet, decision 0046): the attempts so far, and the timer of the next. */
  refusals?: number;
  refusedTimer?: NodeJS.Timeout;
  /** Past its namespace's count bound at its last sync: tried again when a Repo there goes. */
  overCount?: boolean;
};

const DEFAULT_INTERVAL_MS = 5 * 60_000;

export type AgentOptions = {
  /** How long a cache no pod mounts is kept before eviction. Default 1 hour. */
  evictAfterMs?: number;
  /** How often the sweep (adoption, eviction) runs. Default min(evictAfter / 2, 1 minute). */
  sweepEveryMs?: number;
  /** Passed to every clone (the 20-minute bound lives there). */
  git?: EnsureOptions;
  /** The opted-in namespaces (decision 0066): only their Repos are fetched. Undefined: every
   * namespace, which main.ts allows in local mode alone. */
  namespaces?: ReadonlySet<string>;
  /** Local mode's roots (api/repo-fetch-policy.ts localRepoRootsFrom): undefined, no local url. */
  localRoots?: readonly string[];
  /** The internal git hosts the installation vouches for. */
  vouched?: readonly EgressRule[];
  /** What one namespace may cache on this node. Default DEFAULT_CACHE_BOUNDS. */
  bounds?: CacheBounds;
  /** Name resolution (default: the system resolver, every address). */
  resolve?: (host: string) => Promise<string[]>;
  /** How often a running fetch measures its namespace's bytes against the bound. Default 2 s. */
  byteCheckEveryMs?: number;
};

export const DEFAULT_EVICT_AFTER_MS = 60 * 60_000;

export class CacheAgent {
  readonly #repos = new Map<string, Tracked>();
  /** Sandboxes that may have a pod on this node (placed here, or not yet placed), by
   * namespace/name: the caches (ids) they name (eviction.ts sandboxCaches). */
  readonly #placed = new Map<string, string[]>();
  /** Per cache id: when a Sandbox here last named it, or it was built. */
  readonly #lastUsed = new Map<string, number>();
  /** Per cache id: whether the agent built it (`jr2.owner`), read from git once, kept since. */
  readonly #owned = new Map<string, boolean>();
  /** Ids of checkouts adopted without a Repo. */
  readonly #pinned = new Set<string>();
  /** Top-level directories of the old layout (`<root>/<key>`, before decision 0046), said once. */
  readonly #oldLayout = new Set<string>();
  #sweeping: Promise<void> = Promise.resolve();
  #stopped = false;
  readonly #evictAfterMs: number;
  readonly #sweepEveryMs: number;
  readonly #bounds: CacheBounds;

  constructor(
    readonly node: string,
    readonly root: string,
    readonly log: Log,
    readonly opts: AgentOptions = {},
  ) {
    this.#evictAfterMs = opts.evictAfterMs ?? DEFAULT_EVICT_AFTER_MS;
    this.#sweepEveryMs = opts.sweepEveryMs ?? Math.max(100, Math.min(this.#evictAfterMs / 2, 60_000));
    this.#bounds = opts.bounds ?? DEFAULT_CACHE_BOUNDS;
  }

  onRepo(repo: RepoModel, deleted: boolean) {
    const namespace = repo.metadata?.namespace ?? "";
    const name = `${namespace}/${repo.metadata?.name}`;
    const held = this.#repos.get(name);
    if (!deleted && this.opts.namespaces && !this.opts.namespaces.has(namespace)) {
      // Not opted in (decision 0066): never fetched here, whatever its url; said once on its entry.
      if (held) this.#untrack(name, held);
      void this.#sayOnce(repo, REPO_NODE_REASON.NamespaceNotEnabled, namespaceNotOptedIn(namespace));
      return;
    }
    let key: string | undefined;
    try {
      // The operator's rule (its status.error says why): a url that climbs or carries a
      // credential is never fetched, so no password reaches git's command line.
      key = deleted ? undefined : repoKey(checkRepoUrl(repo.spec?.url ?? ""));
    } catch (err) {
      this.log("warn", "Repo url refused; not cached", { repo: name, err: `spec.url ${(err as Error).message}` });
    }
    const interval = parseGoDuration(repo.spec?.interval ?? "5m") ?? DEFAULT_INTERVAL_MS;
    if (held && key === held.key && repo.spec?.url === held.repo.spec?.url) {
      // The same Repo again (most often a status write, this agent's or another node's): keep the
      // entry, its last fetch and its running timer; re-arm only a changed interval. Another
      // Secret named is tried at once (a refused one's fix), not at the next interval.
      const secretChanged = repo.spec?.secretRef?.name !== held.repo.spec?.secretRef?.name;
      held.repo = repo;
      if (interval !== held.interval) this.#arm(name, held, interval);
      if (secretChanged && !held.evicted) void this.sync(name);
      return;
    }
    if (held?.timer) clearInterval(held.timer);
    if (!key) {
      if (held) this.#untrack(name, held);
      return;
    }
    // First sight (a restarted agent): its node's entry says when it last fetched, so Sandboxes
    // created before that do not each ask again.
    const known = held ? undefined : repo.status?.nodes?.[this.node]?.fetchedAt;
    const id = cacheId(repo.metadata!.namespace!, key);
    const tracked: Tracked = {
      repo,
      key,
      id,
      lastFetch: known ? Date.parse(known) || 0 : 0,
      interval,
      evicted: !held && this.#leftEvicted(repo, id),
      chain: held?.chain ?? Promise.resolve(),
    };
    this.#repos.set(name, tracked);
    this.#pinned.delete(id); // a Repo now wants it: fetched from here on
    this.#arm(name, tracked, interval);
    // A new Repo (or a new url) is cloned at once, unless it was left evicted here.
    void this.sync(name);
  }

  /** A Repo no longer fetched here: its timers stop, and a Repo of its namespace held back by the
   * count bound is tried again (the bound may now admit it). */
  #untrack(name: string, held: Tracked) {
    if (held.timer) clearInterval(held.timer);
    if (held.refusedTimer) clearTimeout(held.refusedTimer);
    this.#repos.delete(name);
    const ns = held.repo.metadata?.namespace;
    for (const [other, t] of this.#repos) if (t.overCount && t.repo.metadata?.namespace === ns) void this.sync(other);
  }

  /** Writes this node's entry for a Repo the agent does not track, only when it says something new
   * (the write comes back as a watch event: said once, never a loop). */
  async #sayOnce(repo: RepoModel, reason: Reason, message: string) {
    const now = repo.status?.nodes?.[this.node];
    if (now?.reason === reason && now.error === message && now.phase === "Failed") return;
    await this.#report(repo, { phase: "Failed", reason, error: message }).catch((e) =>
      this.log("warn", "Repo status not written", {
        repo: `${repo.metadata?.namespace}/${repo.metadata?.name}`,
        err: String(e),
      }),
    );
  }

  /**
   * Whether a Repo seen for the first time (a restarted agent) was evicted here before: unbound,
   * no cache here, no entry for this node while other nodes have one. It then waits for an ask, as
   * it would have had the agent not restarted; a brand-new Repo (no entries yet) is cloned at once.
   */
  #leftEvicted(repo: RepoModel, id: string): boolean {
    const nodes = repo.status?.nodes ?? {};
    return !repo.spec?.bound && !existsSync(join(this.root, id)) && !nodes[this.node] && Object.keys(nodes).length > 0;
  }

  #arm(name: string, t: Tracked, interval: number) {
    if (t.timer) clearInterval(t.timer);
    t.interval = interval;
    t.timer = setInterval(() => void this.sync(name), interval);
    t.timer.unref?.();
  }

  /** A Sandbox on this node created after a Repo's last fetch asks for a fetch now. One not yet
   * placed keeps its caches here from eviction, but asks for nothing until it lands here. */
  onSandbox(sbx: SandboxModel, deleted = false) {
    const sandbox = `${sbx.metadata?.namespace}/${sbx.metadata?.name}`;
    const ids = deleted ? [] : sandboxCaches(sbx, this.node);
    if (!ids.length) {
      this.#placed.delete(sandbox);
      return;
    }
    this.#placed.set(sandbox, ids);
    const now = Date.now();
    for (const id of ids) this.#lastUsed.set(id, now);
    if (sbx.status?.nodeName !== this.node) return;
    const asked = Date.parse(String(sbx.metadata?.creationTimestamp ?? 0));
    for (const id of ids) {
      for (const [name, t] of this.#repos) {
        if (t.id === id && (t.lastFetch < asked || t.evicted)) void this.sync(name, asked);
      }
    }
  }

  /**
   * Clones (or adopts) and fetches one Repo's cache, then says so on its status. Serialized per
   * Repo. `ask`: a Sandbox on this node created at that time (ms) asks for a fetch after it; none,
   * the interval or a new Repo. An evicted cache is rebuilt only for an ask.
   */
  sync(name: string, ask?: number): Promise<void> {
    const t = this.#repos.get(name);
    if (!t || this.#stopped) return Promise.resolve();
    // Coalesce: a sync that has not started yet fetches after this request, so it answers it too.
    if (t.queued) {
      if (ask === undefined) t.queued.plain = true;
      else t.queued.ask = Math.max(t.queued.ask, ask);
      return t.chain;
    }
    t.queued = { plain: ask === undefined, ask: ask ?? 0 };
    return this.#enqueue(name, t, t.queued);
  }

  #enqueue(name: string, t: Tracked, q: NonNullable<Tracked["queued"]>): Promise<void> {
    t.chain = t.chain
      .then(() => {
        t.queued = undefined;
        if (t.evicted && q.ask === 0) return; // an interval does not rebuild an evicted cache
        // Asks only, each answered by a fetch that ended after it (one that ran while they queued).
        if (!q.plain && !t.evicted && t.lastFetch >= q.ask) return;
        t.evicted = false;
        return this.#sync(name, t);
      })
      .catch(() => undefined);
    return t.chain;
  }

  async #sync(name: string, t: Tracked) {
    const { repo, key, id } = t;
    const url = repo.spec?.url ?? "";
    const namespace = repo.metadata!.namespace!;
    const nsDir = join(this.root, namespace);
    // The last good fetch: this agent's memory, else what its node's entry said when it started.
    const lastGood = t.lastFetch ? new Date(t.lastFetch).toISOString() : repo.status?.nodes?.[this.node]?.fetchedAt;
    const watch = new AbortController();
    let byteTimer: NodeJS.Timeout | undefined;
    try {
      // Before any git (decision 0066): where the url points, and what the namespace may cache.
      const where = await this.#admit(t, url, nsDir);
      // Before any git: a Secret that may not be sent to this url is never handed to git.
      const creds = await this.#creds(repo);
      // Cloning only when there is no cache yet: a fetch into a present cache never says less.
      if (!existsSync(join(this.root, id))) await this.#report(repo, { phase: "Cloning" });
      await mkdir(nsDir, { recursive: true, mode: 0o755 });
      // The byte bound holds during the fetch too: a fetch that takes the namespace past it stops.
      const { maxBytes } = this.#bounds;
      let over: number | undefined;
      byteTimer = setInterval(() => {
        void diskBytes(nsDir).then((used) => {
          if (used > maxBytes && !watch.signal.aborted) {
            over = used;
            watch.abort("the namespace's byte bound");
          }
        });
      }, this.opts.byteCheckEveryMs ?? 2000);
      byteTimer.unref?.();
      const gitOpts: GitOptions = { ...where, signal: watch.signal };
      const stopped = (err: unknown) => {
        if (over !== undefined)
          throw new FetchRefused(REPO_NODE_REASON.ByteBound, byteRefusal(namespace, over, maxBytes));
        throw err;
      };
      const { dir, created } = await ensureCache(nsDir, key, url, creds, { ...this.opts.git, ...gitOpts }).catch(
        stopped,
      );
      if (created) {
        this.#lastUsed.set(id, Date.now());
        this.#owned.set(id, true);
      }
      const { fetchedAt } = created
        ? { fetchedAt: new Date() }
        : await fetchCache(dir, url, creds, gitOpts).catch(stopped);
      clearInterval(byteTimer);
      t.lastFetch = fetchedAt.getTime();
      t.refusals = 0;
      await this.#report(repo, { phase: "Present", fetchedAt: fetchedAt.toISOString() });
      // Said as the node's entry says it, before the housekeeping after it (a reader of the log
      // and of the status then agree).
      this.log("info", "Repo cache fetched", { repo: name, key: id });
      await consolidate(dir);
    } catch (err) {
      if (byteTimer) clearInterval(byteTimer);
      const message = explain(err instanceof Error ? err.message : String(err), repo.spec?.secretRef?.name);
      this.log("warn", "Repo cache not fetched", { repo: name, key: id, err: message });
      const reason = err instanceof FetchRefused ? { reason: err.reason } : {};
      // Present with an error: a stale cache still serves; Failed: there is none.
      const entry: RepoNode =
        lastGood && existsSync(join(this.root, id))
          ? { phase: "Present", fetchedAt: lastGood, error: message, ...reason }
          : { phase: "Failed", error: message, ...reason };
      await this.#report(repo, entry).catch((e) =>
        this.log("warn", "Repo status not written", { repo: name, err: String(e) }),
      );
      if (err instanceof SecretReadRefused) this.#retryRefused(name, t);
    }
  }

  /**
   * What a fetch of this Repo may do, or FetchRefused (decision 0066), in order: a local url
   * (local mode's roots only, never under this agent's own caches), the namespace's count of Repos
   * (the oldest first), its bytes on this node, then where the url's host resolves (an internal
   * address only for a host the installation vouches for). Returns the git options that hold git
   * to it: file:// for an admitted local path, the judged address for a name.
   */
  async #admit(t: Tracked, url: string, nsDir: string): Promise<Pick<GitOptions, "allowFile" | "pin">> {
    const namespace = t.repo.metadata!.namespace!;
    const local = isLocalRepoUrl(url);
    if (local) {
      const why = localUrlRefusal(url, this.opts.localRoots);
      if (why) throw new FetchRefused(REPO_NODE_REASON.LocalUrl, `spec.url ${why}`);
      // git follows links: the directory itself, judged where it really is.
      const path = url.trim().startsWith("/") ? url.trim() : decodeURIComponent(new URL(url.trim()).pathname);
      const real = await realpath(path).catch(() => path);
      const segments = real.split("/").filter(Boolean);
      const roots = this.opts.localRoots ?? [];
      if (
        underDirectory(segments, await realpath(this.root).catch(() => this.root)) ||
        !roots.some((r) => underDirectory(segments, r))
      )
        throw new FetchRefused(
          REPO_NODE_REASON.LocalUrl,
          "spec.url is a local path inside the cache agent's own caches (or links out of the local mode's roots): name the repository itself",
        );
    }
    const { maxRepos, maxBytes } = this.#bounds;
    const siblings = [...this.#repos.values()]
      .filter((x) => x.repo.metadata?.namespace === namespace)
      .sort(
        (a, b) =>
          Date.parse(String(a.repo.metadata?.creationTimestamp ?? 0)) -
            Date.parse(String(b.repo.metadata?.creationTimestamp ?? 0)) ||
          String(a.repo.metadata?.name).localeCompare(String(b.repo.metadata?.name)),
      );
    t.overCount = siblings.indexOf(t) >= maxRepos;
    if (t.overCount)
      throw new FetchRefused(REPO_NODE_REASON.RepoCountBound, repoCountRefusal(namespace, siblings.length, maxRepos));
    const used = await diskBytes(nsDir);
    if (used >= maxBytes) throw new FetchRefused(REPO_NODE_REASON.ByteBound, byteRefusal(namespace, used, maxBytes));
    if (local) return { allowFile: true };
    const at = remoteEndpoint(url);
    let addresses: string[];
    try {
      addresses = isIP(at.host) ? [at.host] : await (this.opts.resolve ?? resolveAll)(at.host);
      if (!addresses.length) throw Object.assign(new Error("no address"), { code: "ENOTFOUND" });
    } catch (err) {
      const code = String((err as NodeJS.ErrnoException).code ?? "ENOTFOUND");
      throw new Error(`spec.url's host ${at.host} did not resolve (${code}): nothing was fetched`);
    }
    const why = internalAddressRefusal(at, addresses, this.opts.vouched ?? []);
    if (why) throw new FetchRefused(REPO_NODE_REASON.InternalAddress, `spec.url ${why}`);
    return isIP(at.host) ? {} : { pin: { scheme: at.scheme, host: at.host, port: at.port, address: addresses[0] } };
  }

  /** A refused Secret read is asked again at 1 s, doubling to 5 min: a grant the operator writes
   * right after the Repo appears (its repo-credential Role, decision 0046) is picked up within a
   * second, and a namespace that never opted in costs one read every 5 minutes. */
  #retryRefused(name: string, t: Tracked) {
    if (this.#stopped) return;
    if (t.refusedTimer) clearTimeout(t.refusedTimer);
    const delay = Math.min(1000 * 2 ** (t.refusals ?? 0), 300_000);
    t.refusals = (t.refusals ?? 0) + 1;
    t.refusedTimer = setTimeout(() => void this.sync(name), delay);
    t.refusedTimer.unref?.();
  }

  /** The Repo's secretRef as git credentials (credentials.ts): only a Secret declared a repo
   * credential for this url; a read the API refuses (a namespace that did not opt in) is said so. */
  async #creds(repo: RepoModel): Promise<GitCreds | undefined> {
    const ref = repo.spec?.secretRef?.name;
    if (!ref) return undefined;
    const namespace = repo.metadata!.namespace!;
    let secret: SecretObject;
    try {
      secret = await kubeRequest<SecretObject>(
        "GET",
        `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets/${encodeURIComponent(ref)}`,
      );
    } catch (err) {
      const why = err instanceof ApiError ? secretReadFailure(err.status, ref, namespace) : undefined;
      if (why && err instanceof ApiError && err.status === 403) throw new SecretReadRefused(why);
      throw why ? new CredentialRefused(why) : err;
    }
    return gitCredsOf(secret, ref, repo.spec?.url ?? "");
  }

  /** This node's entry alone: a merge patch on status.nodes.<node>. */
  async #report(repo: RepoModel, entry: RepoNode) {
    const { namespace, name } = repo.metadata!;
    const path = paths.repoStatus(namespace!, name!);
    // Replace the entry whole: a field the new entry lacks (an old error) is sent as null.
    const value = { fetchedAt: null, error: null, reason: null, ...entry };
    const updated = await kubeRequest<RepoModel>(
      "PATCH",
      path,
      { status: { nodes: { [this.node]: value } } },
      "application/merge-patch+json",
    );
    const t = this.#repos.get(`${namespace}/${name}`);
    if (t) t.repo = updated;
  }

  /** One sweep at a time: adopt what no Repo wants, then evict what nothing uses. */
  sweep(): Promise<void> {
    this.#sweeping = this.#sweeping
      .then(() => this.#sweep())
      .catch((err) => this.log("warn", "cache sweep failed", { err: String((err as Error)?.message ?? err) }));
    return this.#sweeping;
  }

  async #sweep() {
    const now = Date.now();
    const wanted = new Set([...this.#repos.values()].map((t) => t.id));
    const caches = [];
    for (const id of await this.#cacheIds()) {
      const dir = join(this.root, id);
      // Ownership changes only when the agent builds or evicts a cache: one git call per id, ever.
      let owned = this.#owned.get(id);
      if (owned === undefined) {
        const read = await ownedByAgent(dir);
        // A build that finished while git read (its entries still moving in, so no mark yet) has
        // set true meanwhile: that answer wins, or the cache would never be evicted.
        owned = this.#owned.get(id) ?? read;
        this.#owned.set(id, owned);
      }
      if (!owned && !wanted.has(id) && !this.#pinned.has(id)) await this.#pin(id, dir);
      if (!this.#lastUsed.has(id)) this.#lastUsed.set(id, now); // first seen: its grace starts now
      caches.push({ key: id, owned, lastUsed: this.#lastUsed.get(id)! });
    }
    // Which pods here may mount a cache: the Sandboxes placed here or not yet placed (sandboxCaches).
    const mounted = new Set([...this.#placed.values()].flat());
    const bound = new Set([...this.#repos.values()].filter((t) => t.repo.spec?.bound).map((t) => t.id));
    for (const id of evictable({ caches, mounted, bound, now, graceMs: this.#evictAfterMs })) await this.#evict(id);
  }

  /** Every `<namespace>/<key>` under the root. A top-level checkout is the old, shared layout
   * (`<root>/<key>`, before decision 0046): no pod mounts it any more, and it is left alone. */
  async #cacheIds(): Promise<string[]> {
    const ids: string[] = [];
    for (const ns of await cacheKeys(this.root)) {
      const dir = join(this.root, ns);
      if (existsSync(join(dir, "HEAD"))) {
        if (!this.#oldLayout.has(ns)) {
          this.#oldLayout.add(ns);
          this.log("info", "checkout of the old shared layout left alone: no pod mounts it; remove it by hand", {
            dir,
          });
        }
        continue;
      }
      for (const key of await cacheKeys(dir)) ids.push(cacheId(ns, key));
    }
    return ids;
  }

  async #pin(id: string, dir: string) {
    try {
      await pin(dir);
      this.#pinned.add(id);
      this.log("info", "checkout without a Repo adopted (pinned: not fetched, not evicted)", { key: id });
    } catch (err) {
      this.log("warn", "checkout without a Repo left alone", { key: id, err: String((err as Error).message) });
    }
  }

  /** Evicts one cache, inside each of its Repos' sync chains, and drops this node's status entries. */
  async #evict(id: string) {
    const holders = [...this.#repos.entries()].filter(([, t]) => t.id === id);
    const [ns, key] = id.split("/");
    const run = async () => {
      if (!existsSync(join(this.root, id))) return;
      await evictCache(join(this.root, ns), key);
      this.#owned.delete(id);
      this.#lastUsed.delete(id);
      this.log("info", "Repo cache evicted: no pod here mounts it and no bound Repo wants it", { key: id });
      for (const [name, t] of holders) {
        t.evicted = true;
        t.lastFetch = 0;
        await this.#dropEntry(t.repo).catch((e) =>
          this.log("warn", "Repo status not written", { repo: name, err: String(e) }),
        );
      }
    };
    if (!holders.length) return run();
    // Serialized with the Repo's fetches: never evicted under a running fetch.
    const [, first] = holders[0];
    first.chain = first.chain
      .then(run)
      .catch((err) =>
        this.log("warn", "Repo cache not evicted", { key: id, err: String((err as Error)?.message ?? err) }),
      );
    await first.chain;
  }

  /** Removes this node's entry from a Repo's status (merge patch null). */
  async #dropEntry(repo: RepoModel) {
    const { namespace, name } = repo.metadata!;
    await kubeRequest(
      "PATCH",
      paths.repoStatus(namespace!, name!),
      { status: { nodes: { [this.node]: null } } },
      "application/merge-patch+json",
    );
  }

  /** Watches Repos and Sandboxes until stopped; sweeps on a timer. */
  async start() {
    const repos = K8s(RepoModel).Watch((r, phase) => this.onRepo(r, phase === "DELETED"));
    const sandboxes = K8s(SandboxModel).Watch((s, phase) => this.onSandbox(s, phase === "DELETED"));
    await repos.start();
    await sandboxes.start();
    await this.sweep();
    const sweeper = setInterval(() => void this.sweep(), this.#sweepEveryMs);
    sweeper.unref?.();
    return () => {
      this.#stopped = true;
      clearInterval(sweeper);
      repos.close();
      sandboxes.close();
      for (const t of this.#repos.values()) {
        if (t.timer) clearInterval(t.timer);
        if (t.refusedTimer) clearTimeout(t.refusedTimer);
      }
    };
  }
}

/**
 * git's words, plus what they mean when a Secret was given: credentials sent as a header are not
 * git's own, so on a 401 git asks for a username it cannot prompt for, and says only that.
 */
export function explain(message: string, secret: string | undefined): string {
  if (secret && /could not read (Username|Password)|terminal prompts disabled|Authentication failed/.test(message))
    return `${message} (the server refused the credentials in Secret "${secret}": check its token and username)`;
  return message;
}
