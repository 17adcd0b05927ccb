// The cache agent's git layer against real git in temp dirs: no mocks.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import * as checkouts from "../../cache-agent/bare-checkouts";
import { consolidate, GitError, objectCounts } from "../../cache-agent/bare-checkouts";
import { redact, urlWithoutCredentials } from "../../lib/redact";
import { gitIn } from "../support/git-fixtures";
import { startGitHttpServer, type GitHttpServer } from "../support/git-http-server";
import { testTls } from "../support/test-tls";

const sh = (cwd: string, ...args: string[]) => gitIn(cwd, ...args);

// Most remotes here are paths: git may read them as local mode lets it (decision 0066). The
// cluster's agent never does: see "git's own refusals" below.
const ensureCache: typeof checkouts.ensureCache = (root, key, url, creds, opts = {}) =>
  checkouts.ensureCache(root, key, url, creds, { allowFile: true, ...opts });
const fetchCache: typeof checkouts.fetchCache = (dir, url, creds, opts = {}) =>
  checkouts.fetchCache(dir, url, creds, { allowFile: true, ...opts });

const tmps: string[] = [];
afterAll(async () => {
  await Promise.all(tmps.map((d) => rm(d, { recursive: true, force: true })));
});

type World = { base: string; remote: string; work: string; root: string };

/** A bare "remote" with two commits on main, a work tree that pushes to it, an empty cache root. */
async function world(): Promise<World> {
  const base = await mkdtemp(path.join(os.tmpdir(), "jr2-cache-test-"));
  tmps.push(base);
  const w = {
    base,
    remote: path.join(base, "remote.git"),
    work: path.join(base, "work"),
    root: path.join(base, "root"),
  };
  execFileSync("mkdir", ["-p", w.root]);
  sh(base, "init", "--quiet", "--bare", "-b", "main", w.remote);
  sh(base, "clone", "--quiet", w.remote, w.work);
  sh(w.work, "checkout", "--quiet", "-b", "main");
  commit(w, "a");
  commit(w, "b");
  sh(w.work, "push", "--quiet", "origin", "main");
  return w;
}

/** Commits a file named `name` in the work tree; returns the commit id. */
function commit(w: World, name: string): string {
  execFileSync("sh", ["-c", 'printf "%s\\n" "$1" > "$2"', "sh", `${name}-${Math.random()}`, path.join(w.work, name)]);
  sh(w.work, "add", name);
  sh(w.work, "commit", "--quiet", "-m", name);
  return sh(w.work, "rev-parse", "HEAD");
}

const has = (repo: string, id: string) => {
  try {
    sh(repo, "cat-file", "-e", `${id}^{commit}`);
    return true;
  } catch {
    return false;
  }
};

describe("ensureCache", () => {
  it("creates a bare cache from a local remote, configured, HEAD on upstream's default branch", async () => {
    const w = await world();
    const { dir, created } = await ensureCache(w.root, "repo-1", w.remote);
    expect(created).toBe(true);
    expect(dir).toBe(path.join(w.root, "repo-1"));
    expect(sh(dir, "rev-parse", "--is-bare-repository")).toBe("true");
    expect(sh(dir, "config", "--get", "gc.auto")).toBe("0");
    expect(sh(dir, "config", "--get", "gc.pruneExpire")).toBe("never");
    expect(sh(dir, "config", "--get", "maintenance.auto")).toBe("false");
    expect(sh(dir, "config", "--get", "fetch.prune")).toBe("false");
    expect(sh(dir, "config", "--get", "remote.origin.url")).toBe(w.remote);
    expect(sh(dir, "rev-parse", "refs/heads/main")).toBe(sh(w.remote, "rev-parse", "main"));
    expect(sh(dir, "symbolic-ref", "HEAD")).toBe("refs/heads/main");
    expect((await readdir(w.root)).sort()).toEqual(["repo-1"]); // no temp dir left
  });

  it("adopts an existing cache: no re-clone, config (re)set, stored url without credentials", async () => {
    const w = await world();
    const { dir } = await ensureCache(w.root, "repo-1", w.remote);
    await writeFile(path.join(dir, "marker"), "x");
    sh(dir, "config", "gc.auto", "50");
    sh(dir, "config", "--unset", "maintenance.auto");

    const url = "https://someone:s3cr3t-pw@127.0.0.1:1/org/x.git";
    const again = await ensureCache(w.root, "repo-1", url);
    expect(again).toEqual({ dir, created: false });
    expect(existsSync(path.join(dir, "marker"))).toBe(true);
    expect(sh(dir, "config", "--get", "gc.auto")).toBe("0");
    expect(sh(dir, "config", "--get", "maintenance.auto")).toBe("false");
    expect(sh(dir, "config", "--get", "remote.origin.url")).toBe("https://127.0.0.1:1/org/x.git");
    expect(await readFile(path.join(dir, "config"), "utf8")).not.toContain("s3cr3t");
  });

  it("refuses a key that is not a plain directory name, and a present dir that is not a bare repo", async () => {
    const w = await world();
    await expect(ensureCache(w.root, "../escape", w.remote)).rejects.toThrow(GitError);
    await expect(ensureCache(w.root, "a/b", w.remote)).rejects.toThrow(GitError);
    execFileSync("mkdir", [path.join(w.root, "junk")]);
    // Not empty: an empty directory is one the kubelet made, and the cache is built inside it.
    await writeFile(path.join(w.root, "junk", "file"), "x");
    await expect(ensureCache(w.root, "junk", w.remote)).rejects.toThrow(/not a bare git repository/);
  });

  it("removes its temp dir when the first fetch fails", async () => {
    const w = await world();
    await expect(ensureCache(w.root, "repo-1", path.join(w.base, "missing.git"))).rejects.toThrow(GitError);
    expect(await readdir(w.root)).toEqual([]);
  });
});

// Decision 0066: whatever the agent's own checks say, git itself speaks only the network
// protocols: a path, a file:// url and a remote helper (ext::, fd::) are refused before anything
// is read or run.
describe("git's own refusals", () => {
  it("reads no path or file:// url outside local mode, and runs no ext:: or fd:: helper", async () => {
    const w = await world();
    for (const url of [w.remote, `file://${w.remote}`]) {
      const err = await checkouts.ensureCache(w.root, "local", url).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.message).toMatch(/transport 'file' not allowed/);
      expect(existsSync(path.join(w.root, "local"))).toBe(false);
    }
    const mark = path.join(w.base, "ran");
    for (const url of [`ext::sh -c touch% ${mark}`, "fd::3"]) {
      const err = await checkouts.ensureCache(w.root, "helper", url, undefined, { allowFile: true }).then(
        () => undefined,
        (e: Error) => e,
      );
      expect(err?.message).toMatch(/transport '(ext|fd)' not allowed/);
    }
    expect(existsSync(mark)).toBe(false);
    // A fetch into a cache local mode built: refused the same way.
    const { dir } = await ensureCache(w.root, "built", w.remote);
    await expect(checkouts.fetchCache(dir, w.remote)).rejects.toThrow(/transport 'file' not allowed/);
  });
});

describe("fetchCache", () => {
  it("brings a commit pushed to the remote, and keeps a branch deleted upstream", async () => {
    const w = await world();
    const { dir } = await ensureCache(w.root, "repo-1", w.remote);
    sh(w.work, "push", "--quiet", "origin", "main:side");
    await fetchCache(dir, w.remote);
    const c = commit(w, "c");
    sh(w.work, "push", "--quiet", "origin", "main", ":side");
    const before = Date.now();
    const { fetchedAt } = await fetchCache(dir, w.remote);
    expect(fetchedAt.getTime()).toBeGreaterThanOrEqual(before);
    expect(sh(dir, "rev-parse", "refs/heads/main")).toBe(c);
    expect(sh(dir, "rev-parse", "--verify", "--quiet", "refs/heads/side")).not.toBe("");
  });

  it("fetches tags", async () => {
    const w = await world();
    const { dir } = await ensureCache(w.root, "repo-1", w.remote);
    sh(w.work, "tag", "v1");
    sh(w.work, "push", "--quiet", "origin", "v1");
    await fetchCache(dir, w.remote);
    expect(sh(dir, "rev-parse", "refs/tags/v1")).toBe(sh(w.work, "rev-parse", "v1"));
  });
});

describe("the invariant: a shared clone keeps every object it borrows", () => {
  it.each(["loose", "packed"])(
    "survives a force-push upstream, a fetch and a consolidation (orphaned commit arrived %s)",
    async (arrival) => {
      const w = await world();
      const { dir } = await ensureCache(w.root, "repo-1", w.remote);
      // 1 makes every fetch land as a pack; the default (100) leaves small fetches loose.
      if (arrival === "packed") sh(dir, "config", "fetch.unpackLimit", "1");
      const a = sh(w.work, "rev-parse", "HEAD~1");
      const c = commit(w, "c");
      sh(w.work, "push", "--quiet", "origin", "main");
      await fetchCache(dir, w.remote);

      // The Harness's way: `git clone --shared <cache> <dir>`; the clone holds no objects of its own.
      const clone = path.join(w.base, "clone");
      sh(w.base, "clone", "--quiet", "--shared", "--", dir, clone);
      expect(sh(clone, "rev-parse", "HEAD")).toBe(c);
      expect(sh(clone, "count-objects", "-v")).toMatch(/^count: 0$/m);

      // Rewrite history upstream: main goes back to A and on to X; C is orphaned there.
      sh(w.work, "reset", "--quiet", "--hard", a);
      const x = commit(w, "x");
      sh(w.work, "push", "--quiet", "--force", "origin", "main");
      sh(w.remote, "reflog", "expire", "--expire=now", "--all");
      sh(w.remote, "gc", "--quiet", "--prune=now");
      expect(has(w.remote, c)).toBe(false);

      await fetchCache(dir, w.remote);
      expect(sh(dir, "rev-parse", "refs/heads/main")).toBe(x);
      const { ran } = await consolidate(dir, { maxPacks: 0, maxLoose: 0 });
      expect(ran).toBe(true);
      expect(await objectCounts(dir)).toEqual({ packs: 1, loose: 0 });

      expect(has(dir, c)).toBe(true);
      expect(has(clone, c)).toBe(true);
      sh(clone, "fsck", "--full", "--no-progress");
      sh(clone, "status", "--porcelain");
    },
  );
});

describe("consolidate", () => {
  it("does nothing below the thresholds and repacks above them", async () => {
    const w = await world();
    const { dir } = await ensureCache(w.root, "repo-1", w.remote);
    sh(dir, "config", "fetch.unpackLimit", "1");
    for (const n of ["c", "d", "e"]) {
      commit(w, n);
      sh(w.work, "push", "--quiet", "origin", "main");
      await fetchCache(dir, w.remote);
    }
    const counts = await objectCounts(dir);
    expect(counts.packs).toBeGreaterThanOrEqual(3); // the first fetch was small: loose

    expect(await consolidate(dir, { maxPacks: counts.packs, maxLoose: 5000 })).toEqual({ ran: false, before: counts });
    expect(await objectCounts(dir)).toEqual(counts);

    expect((await consolidate(dir, { maxPacks: counts.packs - 1 })).ran).toBe(true);
    expect((await objectCounts(dir)).packs).toBe(1);
    expect(existsSync(path.join(dir, "objects", "info", "commit-graph"))).toBe(true);
    expect(existsSync(path.join(dir, "packed-refs"))).toBe(true);
    sh(dir, "fsck", "--full", "--no-progress");
  });

  it("runs on loose objects past their threshold", async () => {
    const w = await world();
    const { dir } = await ensureCache(w.root, "repo-1", w.remote);
    commit(w, "c");
    sh(w.work, "push", "--quiet", "origin", "main");
    await fetchCache(dir, w.remote); // a small fetch: loose objects
    const { loose } = await objectCounts(dir);
    expect(loose).toBeGreaterThan(0);
    expect((await consolidate(dir, { maxLoose: loose })).ran).toBe(false);
    expect((await consolidate(dir, { maxLoose: loose - 1 })).ran).toBe(true);
    expect((await objectCounts(dir)).loose).toBe(0);
  });
});

describe("credentials", () => {
  const token = "tok-9f8e7d6c5b4a";
  const basic = Buffer.from(`x-access-token:${token}`).toString("base64");

  it("https: a failing fetch's error carries neither the url's password nor the token", async () => {
    const w = await world();
    const { dir } = await ensureCache(w.root, "repo-1", w.remote);
    const url = "https://user:supersecret@127.0.0.1:1/x.git";
    const err = await fetchCache(dir, url, { kind: "https-token", token }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(GitError);
    const text = `${(err as Error).message}\n${(err as Error).stack}`;
    expect(text).toMatch(/git fetch failed/);
    for (const s of ["supersecret", token, basic]) expect(text).not.toContain(s);

    const err2 = await ensureCache(w.root, "repo-2", url, { kind: "https-token", token }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err2).toBeInstanceOf(GitError);
    for (const s of ["supersecret", token, basic]) expect((err2 as Error).message).not.toContain(s);
    expect((await readdir(w.root)).sort()).toEqual(["repo-1"]);
  });

  it("https: the cache's config holds neither the token nor an Authorization header", async () => {
    const w = await world();
    const { dir } = await ensureCache(w.root, "repo-1", w.remote, { kind: "https-token", token, username: "bot" });
    await fetchCache(dir, w.remote, { kind: "https-token", token });
    const list = sh(dir, "config", "--list");
    expect(list).not.toContain(token);
    expect(list).not.toMatch(/authorization/i);
    expect(list).not.toMatch(/extraheader/i);
  });

  it("ssh: the key lives in a 0600 file in a 0700 dir that is gone afterwards; the error is redacted", async () => {
    const w = await world();
    const { dir } = await ensureCache(w.root, "repo-1", w.remote);
    const privateKey =
      "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA\n-----END OPENSSH PRIVATE KEY-----";
    for (const knownHosts of [undefined, "127.0.0.1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA\n"]) {
      const seen: { dir: string; dirMode: number; keyMode: number }[] = [];
      const err = await fetchCache(
        dir,
        "ssh://git@127.0.0.1:1/x.git",
        { kind: "ssh-key", privateKey, knownHosts },
        {
          networkTimeoutMs: 10_000,
          onSecretDir: async (d) => {
            const [ds, ks] = await Promise.all([stat(d), stat(path.join(d, "id"))]);
            seen.push({ dir: d, dirMode: ds.mode & 0o777, keyMode: ks.mode & 0o777 });
          },
        },
      ).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(GitError);
      expect((err as Error).message).toMatch(/git fetch failed/);
      expect((err as Error).message).not.toContain("c2VjcmV0LWtleS1tYXRlcmlhbA");
      expect(seen).toHaveLength(1);
      expect(seen[0].dirMode).toBe(0o700);
      expect(seen[0].keyMode).toBe(0o600);
      expect(existsSync(seen[0].dir)).toBe(false);
    }
  });
});

describe("over HTTP with basic auth", () => {
  // The server's password is the token: what a forge does with a token sent as Basic auth.
  const user = "bot";
  const token = "tok-http-3c2b1a09";
  const creds = { kind: "https-token", token, username: user } as const;
  const secretsOf = (t: string) => [t, Buffer.from(`${user}:${t}`).toString("base64")];
  const servers: GitHttpServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  /** A world whose remote is served at `url` by git http-backend, for `user`/`token` only. */
  async function served(): Promise<World & { server: GitHttpServer; url: string }> {
    const w = await world();
    const server = await startGitHttpServer({ root: w.base, user, password: token });
    servers.push(server);
    return { ...w, server, url: server.url("remote.git") };
  }

  /** Every regular file below `dir`. */
  async function filesUnder(dir: string): Promise<string[]> {
    const out: string[] = [];
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) out.push(...(await filesUnder(p)));
      else if (e.isFile()) out.push(p);
    }
    return out;
  }

  const errorOf = (p: Promise<unknown>) =>
    p.then(
      () => undefined,
      (e: unknown) => e,
    );

  it("over HTTPS from a private CA: refused by the system's roots alone, cloned once JR2_CACHE_CA_FILE names the CA", async () => {
    const w = await world();
    const tls = testTls(["localhost"]);
    const server = await startGitHttpServer({
      root: w.base,
      user,
      password: token,
      tls: { cert: tls.certPem, key: tls.keyPem },
    });
    servers.push(server);
    const url = server.url("remote.git");
    const caFile = path.join(w.base, "forge-ca.crt");
    await writeFile(caFile, tls.caPem);
    const saved = process.env.JR2_CACHE_CA_FILE;
    try {
      delete process.env.JR2_CACHE_CA_FILE;
      const refused = await errorOf(ensureCache(w.root, "repo-tls", url, creds));
      expect(String(refused)).toMatch(/certificate/i);
      process.env.JR2_CACHE_CA_FILE = caFile;
      const { dir } = await ensureCache(w.root, "repo-tls", url, creds);
      expect(sh(dir, "rev-parse", "refs/heads/main")).toBe(sh(w.remote, "rev-parse", "main"));
    } finally {
      if (saved === undefined) delete process.env.JR2_CACHE_CA_FILE;
      else process.env.JR2_CACHE_CA_FILE = saved;
    }
  });

  it("clones and fetches with a token sent as Basic auth, and writes the token nowhere", async () => {
    const w = await served();
    const { dir, created } = await ensureCache(w.root, "repo-1", w.url, creds);
    expect(created).toBe(true);
    expect(sh(dir, "rev-parse", "refs/heads/main")).toBe(sh(w.remote, "rev-parse", "main"));
    expect(sh(dir, "symbolic-ref", "HEAD")).toBe("refs/heads/main");
    expect(sh(dir, "config", "--get", "remote.origin.url")).toBe(w.url);
    // The header goes with every request, so git never needs a 401 to send it.
    expect(w.server.stats.authorized).toBeGreaterThan(0);
    expect(w.server.stats.refused).toBe(0);

    // Enough annotated tags that the fetch's want lines pass 1 KiB, which git sends gzipped.
    const c = commit(w, "c");
    for (let i = 0; i < 30; i++) sh(w.work, "tag", "-a", "-m", `t${i}`, `v${i}`);
    sh(w.work, "push", "--quiet", "origin", "main", "--tags");
    const before = w.server.stats.authorized;
    await fetchCache(dir, w.url, creds);
    expect(sh(dir, "rev-parse", "refs/heads/main")).toBe(c);
    expect(sh(dir, "rev-parse", "refs/tags/v29^{commit}")).toBe(c);
    expect(w.server.stats.authorized).toBeGreaterThan(before);
    expect(w.server.stats.gzipped).toBeGreaterThan(0);

    // Consolidation writes packed-refs; then no file of the cache may hold the token or its header.
    await consolidate(dir, { maxLoose: 0 });
    const files = await filesUnder(dir);
    for (const name of ["config", "packed-refs"]) expect(files).toContain(path.join(dir, name));
    const leaks: string[] = [];
    for (const f of files) {
      const text = (await readFile(f)).toString("latin1");
      if (secretsOf(token).some((s) => text.includes(s)) || /authorization|extraheader/i.test(text)) leaks.push(f);
    }
    expect(leaks).toEqual([]);
  });

  it("a wrong token is refused with git's words, and the error holds no secret", async () => {
    const w = await served();
    const wrong = "tok-wrong-77e6d5c4";
    const err = await errorOf(ensureCache(w.root, "repo-1", w.url, { ...creds, token: wrong }));
    expect(err).toBeInstanceOf(GitError);
    const text = `${(err as Error).message}\n${(err as Error).stack}`;
    // git 2.39 asks for a username once the server refuses a header it did not get from its
    // credential helpers; a later git or a helper-fed credential says "Authentication failed".
    expect(text).toMatch(/git fetch failed \(exit 128\): fatal: (could not read Username|Authentication failed)/);
    expect(text).toContain(`127.0.0.1:${new URL(w.url).port}`);
    for (const s of [...secretsOf(wrong), ...secretsOf(token)]) expect(text).not.toContain(s);
    expect(w.server.stats.refused).toBeGreaterThan(0);
    expect(w.server.stats.authorized).toBe(0);
    expect(await readdir(w.root)).toEqual([]); // the temp dir went with the failure

    // A good cache, then a fetch with the wrong token: refused, refs untouched.
    const { dir } = await ensureCache(w.root, "repo-1", w.url, creds);
    const main = sh(dir, "rev-parse", "refs/heads/main");
    commit(w, "c");
    sh(w.work, "push", "--quiet", "origin", "main");
    const err2 = await errorOf(fetchCache(dir, w.url, { ...creds, token: wrong }));
    expect((err2 as Error).message).toMatch(/git fetch failed/);
    for (const s of [...secretsOf(wrong), ...secretsOf(token)]) expect((err2 as Error).message).not.toContain(s);
    expect(sh(dir, "rev-parse", "refs/heads/main")).toBe(main);
  });

  it("without credentials the server refuses every request", async () => {
    const w = await served();
    await expect(ensureCache(w.root, "repo-1", w.url)).rejects.toThrow(/git fetch failed/);
    expect(w.server.stats).toMatchObject({ authorized: 0, refused: 1 });
  });

  it("a token in the url authenticates too, and the stored url drops it", async () => {
    const w = await served();
    const withToken = w.url.replace("http://", `http://${user}:${token}@`);
    const { dir } = await ensureCache(w.root, "repo-1", withToken);
    expect(sh(dir, "config", "--get", "remote.origin.url")).toBe(w.url);
    expect(await readFile(path.join(dir, "config"), "utf8")).not.toContain(token);
    // git sends url credentials only after a 401 asks for them.
    expect(w.server.stats.refused).toBeGreaterThan(0);
    expect(w.server.stats.authorized).toBeGreaterThan(0);
  });
});

describe("redact and urlWithoutCredentials", () => {
  it("removes secrets, url passwords, http(s) userinfo and Authorization values", () => {
    expect(redact("a tok-1 b tok-1", ["tok-1", ""])).toBe("a *** b ***");
    expect(redact("see https://user:pw@h/x and ssh://git:pw@h/y")).toBe("see https://***@h/x and ssh://***@h/y");
    expect(redact("https://ghp_abc@h/x")).toBe("https://***@h/x");
    expect(redact("ssh://git@h/x")).toBe("ssh://git@h/x");
    expect(redact("header: Authorization: Basic Zm9vOmJhcg==\nnext")).toBe("header: Authorization: ***\nnext");
  });

  it("strips credentials from a url to store", () => {
    expect(urlWithoutCredentials("https://u:p@h:8443/o/r.git")).toBe("https://h:8443/o/r.git");
    expect(urlWithoutCredentials("https://token@h/o/r.git")).toBe("https://h/o/r.git");
    expect(urlWithoutCredentials("ssh://git:pw@h/o/r.git")).toBe("ssh://git@h/o/r.git");
    expect(urlWithoutCredentials("ssh://git@h/o/r.git")).toBe("ssh://git@h/o/r.git");
    expect(urlWithoutCredentials("git@h:o/r.git")).toBe("git@h:o/r.git");
    expect(urlWithoutCredentials("/srv/git/r.git")).toBe("/srv/git/r.git");
  });
});
