// What the cache agent may evict (pure), and the git side of eviction and adoption against real
// git in temp dirs: a cache built in a directory the kubelet made, the owner mark, pinning, and
// eviction that frees the key's path.
import { existsSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdir, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { gitIn } from "../support/git-fixtures";
import { explain } from "../../cache-agent/agent";
import { evictable, sandboxCaches, type CacheEntry } from "../../cache-agent/eviction";
import * as checkouts from "../../cache-agent/bare-checkouts";
import { cacheKeys, evictCache, ownedByAgent, pin } from "../../cache-agent/bare-checkouts";

// The remotes here are paths: git may read them as local mode lets it (decision 0066).
const ensureCache: typeof checkouts.ensureCache = (root, key, url, creds, opts = {}) =>
  checkouts.ensureCache(root, key, url, creds, { allowFile: true, ...opts });

const sh = (cwd: string, ...args: string[]) => gitIn(cwd, ...args);

describe("evictable", () => {
  const HOUR = 3_600_000;
  const now = 10 * HOUR;
  const cache = (key: string, over: Partial<CacheEntry> = {}): CacheEntry => ({
    key,
    owned: true,
    lastUsed: now - 2 * HOUR,
    ...over,
  });
  const run = (caches: CacheEntry[], mounted: string[] = [], bound: string[] = []) =>
    evictable({ caches, mounted: new Set(mounted), bound: new Set(bound), now, graceMs: HOUR });

  it("evicts an owned cache unused past the grace period", () => {
    expect(run([cache("a")])).toEqual(["a"]);
  });
  it("keeps a cache a pod on the node mounts", () => {
    expect(run([cache("a"), cache("b")], ["a"])).toEqual(["b"]);
  });
  it("keeps a cache a bound Repo wants", () => {
    expect(run([cache("a"), cache("b")], [], ["b"])).toEqual(["a"]);
  });
  it("keeps an adopted (not owned) cache", () => {
    expect(run([cache("a", { owned: false })])).toEqual([]);
  });
  it("keeps a cache used within the grace period, and drops it exactly at the boundary", () => {
    expect(run([cache("a", { lastUsed: now - HOUR + 1 })])).toEqual([]);
    expect(run([cache("a", { lastUsed: now - HOUR })])).toEqual(["a"]);
  });
});

describe("sandboxCaches: what pods on the node may mount, read from the Sandboxes (decision 0046)", () => {
  const sbx = (status: { nodeName?: string; phase?: string }, namespace = "team-a") => ({
    metadata: { namespace },
    spec: { repos: [{ key: "app-0123456789" }, { key: "lib-9876543210" }] },
    status,
  });

  it("names its own namespace's caches while placed on this node", () => {
    expect(sandboxCaches(sbx({ nodeName: "n-1", phase: "Ready" }), "n-1")).toEqual([
      "team-a/app-0123456789",
      "team-a/lib-9876543210",
    ]);
    expect(sandboxCaches(sbx({ nodeName: "n-1" }, "team-b"), "n-1")).toEqual([
      "team-b/app-0123456789",
      "team-b/lib-9876543210",
    ]);
  });

  it("names them while not yet placed (the scheduler runs ahead of the status), none once Lost unplaced", () => {
    expect(sandboxCaches(sbx({}), "n-1")).toEqual(["team-a/app-0123456789", "team-a/lib-9876543210"]);
    expect(sandboxCaches(sbx({ phase: "Pending" }), "n-1")).toHaveLength(2);
    expect(sandboxCaches(sbx({ phase: "Lost" }), "n-1")).toEqual([]);
  });

  it("names none when placed on another node, or without a namespace or Repos", () => {
    expect(sandboxCaches(sbx({ nodeName: "n-2" }), "n-1")).toEqual([]);
    expect(sandboxCaches({ spec: { repos: [{ key: "a" }] } }, "n-1")).toEqual([]);
    expect(sandboxCaches({ metadata: { namespace: "team-a" }, status: { nodeName: "n-1" } }, "n-1")).toEqual([]);
  });
});

describe("the git side of eviction and adoption", () => {
  let base: string;
  let remote: string;
  let root: string;
  beforeEach(async () => {
    base = await mkdtemp(path.join(os.tmpdir(), "jr2-evict-test-"));
    remote = path.join(base, "remote.git");
    root = path.join(base, "root");
    await mkdir(root);
    const work = path.join(base, "work");
    sh(base, "init", "--quiet", "-b", "main", work);
    sh(work, "commit", "--quiet", "--allow-empty", "-m", "first");
    sh(base, "clone", "--quiet", "--bare", work, remote);
  });
  afterEach(() => rm(base, { recursive: true, force: true }));

  it("builds a cache inside an empty directory (the kubelet's DirectoryOrCreate), keeping its inode", async () => {
    const dir = path.join(root, "k1");
    await mkdir(dir);
    const inode = (await stat(dir)).ino;
    const { created } = await ensureCache(root, "k1", remote);
    expect(created).toBe(true);
    expect((await stat(dir)).ino).toBe(inode);
    expect(sh(dir, "rev-parse", "--is-bare-repository")).toBe("true");
    expect(sh(dir, "symbolic-ref", "HEAD")).toBe("refs/heads/main");
    expect(await ownedByAgent(dir)).toBe(true);
  });

  it("empties that directory again when the clone fails, so the next try starts clean", async () => {
    const dir = path.join(root, "k2");
    await mkdir(dir);
    await expect(ensureCache(root, "k2", path.join(base, "missing.git"))).rejects.toThrow(/git fetch failed/);
    expect(await readdir(dir)).toEqual([]);
    await ensureCache(root, "k2", remote);
    expect(sh(dir, "symbolic-ref", "HEAD")).toBe("refs/heads/main");
  });

  it("bounds a clone by cloneTimeoutMs", async () => {
    // A remote that accepts the connection and never answers: git waits until the bound kills it.
    const held: ServerResponse[] = [];
    const server = createServer((_req, res) => void held.push(res));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const { port } = server.address() as AddressInfo;
    try {
      const started = Date.now();
      const err = await ensureCache(root, "k3", `http://127.0.0.1:${port}/r.git`, undefined, {
        cloneTimeoutMs: 500,
      }).catch((e) => e);
      expect(err).toMatchObject({ name: "GitError", timedOut: true });
      expect(err.message).toMatch(/timed out after \d+ ms/);
      expect(Date.now() - started).toBeLessThan(20_000);
      expect(held.length).toBeGreaterThan(0);
      expect(existsSync(path.join(root, "k3"))).toBe(false);
    } finally {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it("marks only caches it built: an adopted one is not owned", async () => {
    await ensureCache(root, "mine", remote);
    sh(root, "clone", "--quiet", "--bare", remote, "theirs");
    await ensureCache(root, "theirs", remote);
    expect(await ownedByAgent(path.join(root, "mine"))).toBe(true);
    expect(await ownedByAgent(path.join(root, "theirs"))).toBe(false);
  });

  it("pins a checkout found without a Repo: cache config set, its url left alone", async () => {
    sh(root, "clone", "--quiet", "--bare", remote, "seeded");
    const dir = path.join(root, "seeded");
    await pin(dir);
    expect(sh(dir, "config", "--get", "gc.auto")).toBe("0");
    expect(sh(dir, "config", "--get", "gc.pruneExpire")).toBe("never");
    expect(sh(dir, "config", "--get", "maintenance.auto")).toBe("false");
    expect(sh(dir, "config", "--get", "remote.origin.url")).toBe(remote);
    expect(await ownedByAgent(dir)).toBe(false);
    await mkdir(path.join(root, "plain"));
    await expect(pin(path.join(root, "plain"))).rejects.toThrow(/not a bare git repository/);
  });

  it("lists cache keys without temp or eviction dirs, and eviction frees the key's path", async () => {
    await ensureCache(root, "gone", remote);
    await mkdir(path.join(root, ".tmp-x-1"));
    expect(await cacheKeys(root)).toEqual(["gone"]);
    await evictCache(root, "gone");
    expect(existsSync(path.join(root, "gone"))).toBe(false);
    expect((await readdir(root)).filter((n) => n.startsWith(".evicted-"))).toEqual([]);
    await expect(evictCache(root, "../x")).rejects.toThrow(/not a plain directory name/);
  });
});

describe("explain", () => {
  it("names the Secret when git's words say the server refused the credentials", () => {
    const words =
      "git fetch failed (exit 128): fatal: could not read Username for 'http://h': terminal prompts disabled";
    expect(explain(words, "git-token")).toBe(
      `${words} (the server refused the credentials in Secret "git-token": check its token and username)`,
    );
  });
  it("leaves other failures, and failures without a Secret, as git said them", () => {
    expect(explain("git fetch failed (exit 128): fatal: repository not found", "s")).toBe(
      "git fetch failed (exit 128): fatal: repository not found",
    );
    expect(explain("fatal: could not read Username", undefined)).toBe("fatal: could not read Username");
  });
});
