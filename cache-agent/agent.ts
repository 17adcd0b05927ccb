// The cache agent's Kubernetes side, one per node: it keeps one bare checkout per Repo under its
// cache root, fetches each on the Repo's interval and at once when a Sandbox on its node asks
// (created after the last fetch), and writes only its own node's entry of each Repo's
// status.nodes, so agents on different nodes never overwrite each other (seed 001 ADR-0051).
import { existsSync } from "node:fs";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { RepoModel, SandboxModel, type RepoNode } from "../capabilities/crd";
import { repoIdentity, repoKey } from "../capabilities/repo/identity";
import { parseGoDuration } from "../capabilities/shared/duration";
import { kubeRequest, paths } from "../capabilities/shared/kube";
import { consolidate, ensureCache, fetchCache, type GitCreds } from "./git";

type Log = (level: "info" | "warn", msg: string, fields?: Record<string, unknown>) => void;

type Tracked = {
  repo: RepoModel;
  key: string;
  lastFetch: number;
  interval: number;
  timer?: NodeJS.Timeout;
  /** One sync at a time per Repo: each waits for the one before. */
  chain: Promise<void>;
};

const DEFAULT_INTERVAL_MS = 5 * 60_000;

export class CacheAgent {
  readonly #repos = new Map<string, Tracked>();
  #stopped = false;

  constructor(
    readonly node: string,
    readonly root: string,
    readonly log: Log,
  ) {}

  onRepo(repo: RepoModel, deleted: boolean) {
    const name = `${repo.metadata?.namespace}/${repo.metadata?.name}`;
    const held = this.#repos.get(name);
    let key: string | undefined;
    try {
      key = deleted ? undefined : repoKey(repoIdentity(repo.spec?.url ?? ""));
    } catch (err) {
      this.log("warn", "Repo url unreadable; not cached", { repo: name, err: String((err as Error).message) });
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
    const tracked: Tracked = { repo, key, lastFetch: 0, interval, chain: held?.chain ?? Promise.resolve() };
    this.#repos.set(name, tracked);
    this.#arm(name, tracked, interval);
    // A new Repo (or a new url) is cloned at once.
    void this.sync(name);
  }

  #arm(name: string, t: Tracked, interval: number) {
    if (t.timer) clearInterval(t.timer);
    t.interval = interval;
    t.timer = setInterval(() => void this.sync(name), interval);
    t.timer.unref?.();
  }

  /** A Sandbox on this node created after a Repo's last fetch asks for a fetch now. */
  onSandbox(sbx: SandboxModel) {
    if (sbx.status?.nodeName !== this.node) return;
    const asked = Date.parse(String(sbx.metadata?.creationTimestamp ?? 0));
    for (const { key } of sbx.spec?.repos ?? []) {
      for (const [name, t] of this.#repos) {
        if (t.key === key && t.repo.metadata?.namespace === sbx.metadata?.namespace && t.lastFetch < asked)
          void this.sync(name);
      }
    }
  }

  /** Clones (or adopts) and fetches one Repo's cache, then says so on its status. Serialized per Repo. */
  sync(name: string): Promise<void> {
    const t = this.#repos.get(name);
    if (!t || this.#stopped) return Promise.resolve();
    t.chain = t.chain.then(() => this.#sync(name, t)).catch(() => undefined);
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
      const { dir, created } = await ensureCache(this.root, key, url, creds);
      const { fetchedAt } = created ? { fetchedAt: new Date() } : await fetchCache(dir, url, creds);
      t.lastFetch = fetchedAt.getTime();
      await this.#report(repo, { phase: "Present", fetchedAt: fetchedAt.toISOString() });
      await consolidate(dir);
      this.log("info", "Repo cache fetched", { repo: name, key });
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
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
    const secret = await K8s(kind.Secret).InNamespace(repo.metadata!.namespace!).Get(ref);
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

  /** Watches Repos and Sandboxes until stopped. */
  async start() {
    const repos = K8s(RepoModel).Watch((r, phase) => this.onRepo(r, phase === "DELETED"));
    const sandboxes = K8s(SandboxModel).Watch((s, phase) => {
      if (phase !== "DELETED") this.onSandbox(s);
    });
    await repos.start();
    await sandboxes.start();
    return () => {
      this.#stopped = true;
      repos.close();
      sandboxes.close();
      for (const t of this.#repos.values()) if (t.timer) clearInterval(t.timer);
    };
  }
}
