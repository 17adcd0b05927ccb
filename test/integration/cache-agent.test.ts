// The Repo caches end to end on the real control plane: three cache agents (one per kwok node,
// each its own process and cache root), real git against a bare repository on disk, and the
// operator holding Ready until the cache on the pod's node is present and fresh.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { RepoModel } from "../../api/crd";
import { repoIdentity, repoKey } from "../../api/repo-identity";
import { type Agent, startCacheAgent } from "../../dev/local-cache-agent";
import { startGitHttpServer } from "../support/git-http-server";
import { condition, createSandbox, getSandbox, useNamespace, waitFor } from "./support/cluster";

const ns = useNamespace("caches");
const tmp = mkdtempSync(join(tmpdir(), "jr2-caches-"));
const remote = join(tmp, "remote", "widgets.git");
const NODES = ["jr2-node-0", "jr2-node-1", "jr2-node-2"];
const agents: Agent[] = [];

const git = (args: string[], cwd?: string) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, GIT_TERMINAL_PROMPT: "0" } });

beforeAll(async () => {
  const work = join(tmp, "work");
  git(["init", "--quiet", "-b", "main", work]);
  git(
    ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "--allow-empty", "-m", "first"],
    work,
  );
  git(["clone", "--quiet", "--bare", work, remote]);
  for (const node of NODES) agents.push(await startCacheAgent(node, join(tmp, `cache-${node}`)));
}, 60_000);

afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  rmSync(tmp, { recursive: true, force: true });
});

const KEY = repoKey(repoIdentity(remote));

describe("Repo caches kept by the cache agents", () => {
  it("holds a Sandbox until the cache on its node is present, then lets it be Ready and fresh", async () => {
    await K8s(RepoModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Repo",
      metadata: { name: "widgets", namespace: ns.name },
      spec: { url: remote },
    });
    await createSandbox(ns.name, "cached", { repos: [{ key: KEY, url: remote }] });
    const ready = await waitFor(
      "the Sandbox Ready",
      () => getSandbox(ns.name, "cached"),
      (s) => s.status?.phase === "Ready",
    );
    expect(condition(ready, "ReposFresh")).toMatchObject({ status: "True" });
    const repo = await K8s(RepoModel).InNamespace(ns.name).Get("widgets");
    const node = ready.status!.nodeName!;
    expect(repo.status?.nodes?.[node]).toMatchObject({ phase: "Present", fetchedAt: expect.any(String) });
    const cache = join(tmp, `cache-${node}`, KEY);
    expect(git(["config", "--get", "gc.auto"], cache).trim()).toBe("0");
    expect(git(["config", "--get", "gc.pruneExpire"], cache).trim()).toBe("never");
    expect(git(["config", "--get", "maintenance.auto"], cache).trim()).toBe("false");
  });

  it("fetches each cache again on the Repo's interval, with no Sandbox asking", async () => {
    await K8s(RepoModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Repo",
      metadata: { name: "widgets", namespace: ns.name },
      spec: { url: remote, interval: "2s" },
    });
    const since = new Date().toISOString();
    // Three agents write their entries every two seconds: each must keep its own schedule.
    const repo = await waitFor(
      "every node's entry fetched again",
      () => K8s(RepoModel).InNamespace(ns.name).Get("widgets"),
      (r) => NODES.every((n) => (r.status?.nodes?.[n]?.fetchedAt ?? "") > since),
    );
    expect(NODES.map((n) => repo.status?.nodes?.[n]?.phase)).toEqual(["Present", "Present", "Present"]);
  });

  it("names a failed clone RepoCloneFailed, with git's own words", async () => {
    const missing = join(tmp, "remote", "no-such.git");
    await K8s(RepoModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Repo",
      metadata: { name: "missing", namespace: ns.name },
      spec: { url: missing },
    });
    const key = repoKey(repoIdentity(missing));
    await createSandbox(ns.name, "uncloned", { repos: [{ key, url: missing }] });
    const failed = await waitFor(
      "Ready=False RepoCloneFailed",
      () => getSandbox(ns.name, "uncloned"),
      (s) => condition(s, "Ready")?.reason === "RepoCloneFailed",
    );
    expect(condition(failed, "Ready")?.message).toMatch(
      new RegExp(`Repo "${key}" on node ${failed.status?.nodeName}: the clone failed: .+`),
    );
  });

  it("lets a Sandbox be Ready with ReposFresh=False when the fetch it asked for fails", async () => {
    // The remote goes away after the caches were made: every node's fetch now fails.
    renameSync(remote, `${remote}.gone`);
    // A Sandbox's ask is its creationTimestamp, whole seconds: one created in the second of the
    // last good fetch would count that fetch as its own. Let that second pass first.
    const repo = await K8s(RepoModel).InNamespace(ns.name).Get("widgets");
    const lastFetch = Math.max(...Object.values(repo.status?.nodes ?? {}).map((n) => Date.parse(n.fetchedAt ?? "0")));
    const nextSecond = Math.floor(lastFetch / 1000) * 1000 + 1000;
    if (Date.now() < nextSecond) await new Promise((r) => setTimeout(r, nextSecond - Date.now()));
    await createSandbox(ns.name, "stale", { repos: [{ key: KEY, url: remote }] });
    const stale = await waitFor(
      "Ready with ReposFresh=False",
      () => getSandbox(ns.name, "stale"),
      (s) => s.status?.phase === "Ready" && condition(s, "ReposFresh")?.status === "False",
    );
    expect(condition(stale, "ReposFresh")?.message).toMatch(
      new RegExp(`Repo "${KEY}" on node ${stale.status?.nodeName} is stale: .+`),
    );
    expect(existsSync(`${remote}.gone`)).toBe(true);
  });

  it("clones over HTTP with the token from the Repo's secretRef, and names a refused one without showing it", async () => {
    const served = join(tmp, "served");
    mkdirSync(served);
    git(["clone", "--quiet", "--bare", join(tmp, "work"), join(served, "private.git")]);
    const server = await startGitHttpServer({ root: served, user: "jr2", password: "s3cret-token-value" });
    try {
      const url = server.url("private.git");
      const key = repoKey(repoIdentity(url));
      await K8s(kind.Secret).Apply({
        metadata: { name: "git-token", namespace: ns.name },
        stringData: { username: "jr2", token: "s3cret-token-value" },
      });
      await K8s(kind.Secret).Apply({
        metadata: { name: "wrong-token", namespace: ns.name },
        stringData: { username: "jr2", token: "not-the-token-9876" },
      });
      await K8s(RepoModel).Apply({
        apiVersion: "core.jr2.dev/v1alpha1",
        kind: "Repo",
        metadata: { name: "private", namespace: ns.name },
        spec: { url, secretRef: { name: "git-token" } },
      });
      await createSandbox(ns.name, "private", { repos: [{ key, url }] });
      await waitFor(
        "the private Sandbox Ready",
        () => getSandbox(ns.name, "private"),
        (s) => s.status?.phase === "Ready",
      );
      expect(server.stats.authorized).toBeGreaterThan(0);

      // Another spelling of a different repository path, with the wrong token: refused, named, not shown.
      git(["clone", "--quiet", "--bare", join(tmp, "work"), join(served, "other.git")]);
      const other = server.url("other.git");
      await K8s(RepoModel).Apply({
        apiVersion: "core.jr2.dev/v1alpha1",
        kind: "Repo",
        metadata: { name: "other", namespace: ns.name },
        spec: { url: other, secretRef: { name: "wrong-token" } },
      });
      const repo = await waitFor(
        "every node's clone refused",
        () => K8s(RepoModel).InNamespace(ns.name).Get("other"),
        (r) => NODES.every((n) => r.status?.nodes?.[n]?.phase === "Failed"),
      );
      const error = repo.status!.nodes![NODES[0]].error!;
      expect(error).toContain('Secret "wrong-token"');
      expect(JSON.stringify(repo.status)).not.toContain("not-the-token-9876");
      expect(server.stats.refused).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
  });
});
