// The Repo caches end to end on the real control plane: three cache agents (one per kwok node,
// each its own process and cache root), real git against a bare repository on disk, and the
// operator holding Ready until the cache on the pod's node is present and fresh. Each cache is its
// namespace's (`<root>/<namespace>/<key>`), and a Repo's Secret is sent only when it declares
// itself a repo credential for the url (decision 0046).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { RepoModel } from "../../api/crd";
import { repoIdentity, repoKey } from "../../api/repo-identity";
import { REPO_CREDENTIAL_HOSTS_ANNOTATION, REPO_CREDENTIAL_LABEL } from "../../api/wire";
import { type Agent, startCacheAgent } from "../../dev/local-cache-agent";
import { startGitHttpServer } from "../support/git-http-server";
import { applyRepo, condition, createSandbox, getSandbox, useNamespace, waitFor } from "./support/cluster";

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

/** A Secret declared a repo credential for the given url prefixes (or, with none, undeclared). */
const repoSecret = (name: string, token: string, prefixes?: string) =>
  K8s(kind.Secret).Apply({
    metadata: {
      name,
      namespace: ns.name,
      ...(prefixes !== undefined
        ? {
            labels: { [REPO_CREDENTIAL_LABEL]: "true" },
            annotations: { [REPO_CREDENTIAL_HOSTS_ANNOTATION]: prefixes },
          }
        : {}),
    },
    stringData: { username: "jr2", token },
  });

const everyNode = (name: string, done: (entry: { phase?: string; error?: string } | undefined) => boolean) =>
  waitFor(
    `every node's entry of Repo ${name}`,
    () => K8s(RepoModel).InNamespace(ns.name).Get(name),
    (r) => NODES.every((n) => done(r.status?.nodes?.[n])),
  );

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
    // Its namespace's directory: the same key in another namespace is another cache.
    const cache = join(tmp, `cache-${node}`, ns.name, KEY);
    expect(existsSync(join(tmp, `cache-${node}`, KEY))).toBe(false);
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
    await applyRepo(ns.name, "missing", missing);
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

  it("clones over HTTP with the token from the Repo's declared Secret, and names a refused one without showing it", async () => {
    const served = join(tmp, "served");
    mkdirSync(served);
    git(["clone", "--quiet", "--bare", join(tmp, "work"), join(served, "private.git")]);
    const server = await startGitHttpServer({ root: served, user: "jr2", password: "s3cret-token-value" });
    try {
      const url = server.url("private.git");
      const key = repoKey(repoIdentity(url));
      const prefix = server.url("");
      await repoSecret("git-token", "s3cret-token-value", prefix);
      await repoSecret("wrong-token", "not-the-token-9876", prefix);
      await applyRepo(ns.name, "private", url, "git-token");
      await createSandbox(ns.name, "private", { repos: [{ key, url }] });
      await waitFor(
        "the private Sandbox Ready",
        () => getSandbox(ns.name, "private"),
        (s) => s.status?.phase === "Ready",
      );
      expect(server.stats.authorized).toBeGreaterThan(0);

      // Another spelling of a different repository path, with the wrong token: refused, named, not shown.
      git(["clone", "--quiet", "--bare", join(tmp, "work"), join(served, "other.git")]);
      await applyRepo(ns.name, "other", server.url("other.git"), "wrong-token");
      const repo = await everyNode("other", (e) => e?.phase === "Failed");
      const error = repo.status!.nodes![NODES[0]].error!;
      expect(error).toContain('Secret "wrong-token"');
      expect(JSON.stringify(repo.status)).not.toContain("not-the-token-9876");
      expect(server.stats.refused).toBeGreaterThan(0);
    } finally {
      await server.close();
    }
  });

  it("sends no undeclared Secret: the Repo's entry names the Secret, the label and the fix, and no fetch is made", async () => {
    const served = join(tmp, "served-undeclared");
    mkdirSync(served);
    git(["clone", "--quiet", "--bare", join(tmp, "work"), join(served, "private.git")]);
    const server = await startGitHttpServer({ root: served, user: "jr2", password: "undeclared-token-4242" });
    try {
      await repoSecret("undeclared", "undeclared-token-4242");
      await applyRepo(ns.name, "undeclared", server.url("private.git"), "undeclared");
      const repo = await everyNode("undeclared", (e) => e?.phase === "Failed");
      for (const n of NODES) {
        const error = repo.status!.nodes![n].error!;
        expect(error).toContain('Secret "undeclared" (spec.secretRef.name) is not declared a repo credential');
        expect(error).toContain(`${REPO_CREDENTIAL_LABEL}=true`);
        expect(error).toContain(REPO_CREDENTIAL_HOSTS_ANNOTATION);
      }
      expect(JSON.stringify(repo.status)).not.toContain("undeclared-token-4242");
      // Not with the credential, and not without it: the server saw nothing.
      expect(server.stats).toMatchObject({ requests: 0, withAuthorization: 0 });
    } finally {
      await server.close();
    }
  });

  it("never sends a declared Secret to another host: a url on another port is refused unsent", async () => {
    const servedA = join(tmp, "served-a");
    const servedB = join(tmp, "served-b");
    for (const d of [servedA, servedB]) {
      mkdirSync(d);
      git(["clone", "--quiet", "--bare", join(tmp, "work"), join(d, "app.git")]);
    }
    // B would take the same token: had the agent sent it there, B's counts would show it.
    const a = await startGitHttpServer({ root: servedA, user: "jr2", password: "host-a-token-1357" });
    const b = await startGitHttpServer({ root: servedB, user: "jr2", password: "host-a-token-1357" });
    try {
      await repoSecret("host-a", "host-a-token-1357", a.url(""));
      await applyRepo(ns.name, "on-a", a.url("app.git"), "host-a");
      await applyRepo(ns.name, "on-b", b.url("app.git"), "host-a");
      await everyNode("on-a", (e) => e?.phase === "Present");
      const refused = await everyNode("on-b", (e) => e?.phase === "Failed");
      const error = refused.status!.nodes![NODES[0]].error!;
      expect(error).toContain('is outside the url prefixes Secret "host-a" (spec.secretRef.name) may be sent to');
      expect(error).toContain(`"${a.url("")}"`);
      expect(error).toContain("add a prefix covering the url");
      expect(a.stats.authorized).toBeGreaterThan(0);
      expect(b.stats).toMatchObject({ requests: 0, withAuthorization: 0 });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});
