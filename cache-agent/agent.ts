// The cache agent's Kubernetes side, one per node: it keeps one bare checkout per Repo under its
// cache root, fetches each on the Repo's interval and at once when a Sandbox on its node asks
// (created after the last fetch), and writes only its own node's entry of each Repo's
// status.nodes, so agents on different nodes never overwrite each other (decision 0010).
// A sweep adopts checkouts found without a Repo (pinned: never fetched, never evicted) and evicts
// caches no pod here mounts and no bound Repo wants, once unused for a grace period (eviction.ts).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { K8s } from "kubernetes-fluent-client";
import { RepoModel, SandboxModel, type RepoNode } from "../api/crd";
import { checkRepoUrl, repoKey } from "../api/repo-identity";
import { parseGoDuration } from "../lib/duration";
import { kubeRequest, paths } from "../lib/kube";
import { MANAGED_BY, MANAGED_BY_LABEL } from "../api/wire";
import { evictable, mountedKeys } from "./eviction";
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
} from "./bare-checkouts";

type Log = (level: "info" | "warn", msg: string, fields?: Record<string, unknown>) => void;

type Tracked = {
  repo: RepoModel;
  key: string;
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
};

const DEFAULT_INTERVAL_MS = 5 * 60_000;

export type AgentOptions = {
  /** How long a cache no pod mounts is kept before eviction. Default 1 hour. */
  evictAfterMs?: number;
  /** How often the sweep (adoption, eviction) runs. Default min(evictAfter / 2, 1 minute). */
  sweepEveryMs?: number;
  /** Passed to every clone (the 20-minute bound lives there). */
  git?: EnsureOptions;
};

export const DEFAULT_EVICT_AFTER_MS = 60 * 60_000;

export class CacheAgent {
  readonly #repos = new Map<string, Tracked>();
  /** Sandboxes placed on this node, by namespace/name: the cache keys they name. */
  readonly #placed = new Map<string, string[]>();
  /** Per cache key: when a Sandbox here last named it, or it was built. */
  readonly #lastUsed = new Map<string, number>();
  /** Per cache key: whether the agent built it (`jr2.owner`), read from git once, kept since. */
  readonly #owned = new Map<string, boolean>();
  /** Keys of checkouts adopted without a Repo. */
  readonly #pinned = new Set<string>();
  #sweeping: Promise<void> = Promise.resolve();
  #stopped = false;
  readonly #evictAfterMs: number;
  readonly #sweepEveryMs: number;

  constructor(
    readonly node: string,
    readonly root: string,
    readonly log: Log,
    readonly opts: AgentOptions = {},
  ) {
    this.#evictAfterMs = opts.evictAfterMs ?? DEFAULT_EVICT_AFTER_MS;
    this.#sweepEveryMs = opts.sweepEveryMs ?? Math.max(100, Math.min(this.#evictAfterMs / 2, 60_000));
  }

  onRepo(repo: RepoModel, deleted: boolean) {
    const name = `${repo.metadata?.namespace}/${repo.metadata?.name}`;
    const held = this.#repos.get(name);
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
      // entry, its last fetch and its running timer; re-arm only a changed interval.
      held.repo = repo;
      if (interval !== held.interval) this.#arm(name, held, interval);
      return;
    }
    if (held?.timer) clearInterval(held.timer);
    if (!key) {
      this.#repos.delete(name);
      return;
    }
    // First sight (a restarted agent): its node's entry says when it last fetched, so Sandboxes
    // created before that do not each ask again.
    const known = held ? undefined : repo.status?.nodes?.[this.node]?.fetchedAt;
    const tracked: Tracked = {
      repo,
      key,
      lastFetch: known ? Date.parse(known) || 0 : 0,
      interval,
      evicted: !held && this.#leftEvicted(repo, key),
      chain: held?.chain ?? Promise.resolve(),
    };
    this.#repos.set(name, tracked);
    this.#pinned.delete(key); // a Repo now wants it: fetched from here on
    this.#arm(name, tracked, interval);
    // A new Repo (or a new url) is cloned at once, unless it was left evicted here.
    void this.sync(name);
  }

  /**
   * Whether a Repo seen for the first time (a restarted agent) was evicted here before: unbound,
   * no cache here, no entry for this node while other nodes have one. It then waits for an ask, as
   * it would have had the agent not restarted; a brand-new Repo (no entries yet) is cloned at once.
   */
  #leftEvicted(repo: RepoModel, key: string): boolean {
    const nodes = repo.status?.nodes ?? {};
    return !repo.spec?.bound && !existsSync(join(this.root, key)) && !nodes[this.node] && Object.keys(nodes).length > 0;
  }

  #arm(name: string, t: Tracked, interval: number) {
    if (t.timer) clearInterval(t.timer);
    t.interval = interval;
    t.timer = setInterval(() => void this.sync(name), interval);
    t.timer.unref?.();
  }

  /** A Sandbox on this node created after a Repo's last fetch asks for a fetch now. */
  onSandbox(sbx: SandboxModel, deleted = false) {
    const id = `${sbx.metadata?.namespace}/${sbx.metadata?.name}`;
    if (deleted || sbx.status?.nodeName !== this.node) {
      this.#placed.delete(id);
      return;
    }
    const keys = (sbx.spec?.repos ?? []).map((r) => r.key);
    this.#placed.set(id, keys);
    const now = Date.now();
    for (const key of keys) this.#lastUsed.set(key, now);
    const asked = Date.parse(String(sbx.metadata?.creationTimestamp ?? 0));
    for (const key of keys) {
      for (const [name, t] of this.#repos) {
        if (
          t.key === key &&
          t.repo.metadata?.namespace === sbx.metadata?.namespace &&
          (t.lastFetch < asked || t.evicted)
        )
          void this.sync(name, asked);
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
    const { repo, key } = t;
    const url = repo.spec?.url ?? "";
    // The last good fetch: this agent's memory, else what its node's entry said when it started.
    const lastGood = t.lastFetch ? new Date(t.lastFetch).toISOString() : repo.status?.nodes?.[this.node]?.fetchedAt;
    try {
      const creds = await this.#creds(repo);
      // Cloning only when there is no cache yet: a fetch into a present cache never says less.
      if (!existsSync(join(this.root, key))) await this.#report(repo, { phase: "Cloning" });
      const { dir, created } = await ensureCache(this.root, key, url, creds, this.opts.git);
      if (created) {
        this.#lastUsed.set(key, Date.now());
        this.#owned.set(key, true);
      }
      const { fetchedAt } = created ? { fetchedAt: new Date() } : await fetchCache(dir, url, creds);
      t.lastFetch = fetchedAt.getTime();
      await this.#report(repo, { phase: "Present", fetchedAt: fetchedAt.toISOString() });
      // Said as the node's entry says it, before the housekeeping after it (a reader of the log
      // and of the status then agree).
      this.log("info", "Repo cache fetched", { repo: name, key });
      await consolidate(dir);
    } catch (err) {
      const message = explain(err instanceof Error ? err.message : String(err), repo.spec?.secretRef?.name);
      this.log("warn", "Repo cache not fetched", { repo: name, key, err: message });
      // Present with an error: a stale cache still serves; Failed: there is none.
      const entry: RepoNode =
        lastGood && existsSync(join(this.root, key))
          ? { phase: "Present", fetchedAt: lastGood, error: message }
          : { phase: "Failed", error: message };
      await this.#report(repo, entry).catch((e) =>
        this.log("warn", "Repo status not written", { repo: name, err: String(e) }),
      );
    }
  }

  /** The Repo's secretRef as git credentials: `token` (+ `username`) or `ssh-privatekey` (+ `known_hosts`). */
  async #creds(repo: RepoModel): Promise<GitCreds | undefined> {
    const ref = repo.spec?.secretRef?.name;
    if (!ref) return undefined;
    const secret = await kubeRequest<{ data?: Record<string, string> }>(
      "GET",
      `/api/v1/namespaces/${encodeURIComponent(repo.metadata!.namespace!)}/secrets/${encodeURIComponent(ref)}`,
    );
    const data = (k: string) => (secret.data?.[k] ? Buffer.from(secret.data[k], "base64").toString() : undefined);
    const token = data("token") ?? data("password");
    if (token) return { kind: "https-token", token, username: data("username") };
    const privateKey = data("ssh-privatekey");
    if (privateKey) return { kind: "ssh-key", privateKey, knownHosts: data("known_hosts") };
    throw new Error(`Secret ${ref} has neither "token" nor "ssh-privatekey"`);
  }

  /** This node's entry alone: a merge patch on status.nodes.<node>. */
  async #report(repo: RepoModel, entry: RepoNode) {
    const { namespace, name } = repo.metadata!;
    const path = paths.repoStatus(namespace!, name!);
    // Replace the entry whole: a field the new entry lacks (an old error) is sent as null.
    const value = { fetchedAt: null, error: null, ...entry };
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
    const wanted = new Set([...this.#repos.values()].map((t) => t.key));
    const caches = [];
    for (const key of await cacheKeys(this.root)) {
      const dir = join(this.root, key);
      // Ownership changes only when the agent builds or evicts a cache: one git call per key, ever.
      let owned = this.#owned.get(key);
      if (owned === undefined) this.#owned.set(key, (owned = await ownedByAgent(dir)));
      if (!owned && !wanted.has(key) && !this.#pinned.has(key)) await this.#pin(key, dir);
      if (!this.#lastUsed.has(key)) this.#lastUsed.set(key, now); // first seen: its grace starts now
      caches.push({ key, owned, lastUsed: this.#lastUsed.get(key)! });
    }
    const mounted = new Set([...this.#placed.values()].flat());
    const bound = new Set([...this.#repos.values()].filter((t) => t.repo.spec?.bound).map((t) => t.key));
    let candidates = evictable({ caches, mounted, bound, now, graceMs: this.#evictAfterMs });
    if (!candidates.length) return;
    // The Sandboxes' view lags the scheduler: ask the API which pods are bound here right now.
    for (const key of await this.#podMountedKeys()) {
      this.#lastUsed.set(key, now);
      candidates = candidates.filter((k) => k !== key);
    }
    for (const key of candidates) await this.#evict(key);
  }

  async #pin(key: string, dir: string) {
    try {
      await pin(dir);
      this.#pinned.add(key);
      this.log("info", "checkout without a Repo adopted (pinned: not fetched, not evicted)", { key });
    } catch (err) {
      this.log("warn", "checkout without a Repo left alone", { key, err: String((err as Error).message) });
    }
  }

  async #podMountedKeys(): Promise<string[]> {
    const q = new URLSearchParams({
      fieldSelector: `spec.nodeName=${this.node}`,
      labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY}`,
    });
    const list = await kubeRequest<{ items: Array<{ spec?: { volumes?: Array<{ name: string }> } }> }>(
      "GET",
      `/api/v1/pods?${q}`,
    );
    return list.items.flatMap(mountedKeys);
  }

  /** Evicts one cache, inside each of its Repos' sync chains, and drops this node's status entries. */
  async #evict(key: string) {
    const holders = [...this.#repos.entries()].filter(([, t]) => t.key === key);
    const run = async () => {
      if (!existsSync(join(this.root, key))) return;
      await evictCache(this.root, key);
      this.#owned.delete(key);
      this.#lastUsed.delete(key);
      this.log("info", "Repo cache evicted: no pod here mounts it and no bound Repo wants it", { key });
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
      .catch((err) => this.log("warn", "Repo cache not evicted", { key, err: String((err as Error)?.message ?? err) }));
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
      for (const t of this.#repos.values()) if (t.timer) clearInterval(t.timer);
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
