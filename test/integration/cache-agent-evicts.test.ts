// Eviction and adoption by a real cache agent process on the real control plane: a cache goes
// only when no pod on its node mounts it and no bound Repo wants it (after a short grace here);
// a checkout found without a Repo is adopted, pinned: never fetched, never evicted; an evicted
// cache comes back when a Sandbox on the node asks for it.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s } from "kubernetes-fluent-client";
import { RepoModel, SandboxModel } from "../../api/crd";
import { repoIdentity, repoKey } from "../../api/repo-identity";
import { type Agent, startCacheAgent } from "../../dev/local-cache-agent";
import { condition, createSandbox, getSandbox, useNamespace, waitFor } from "./support/cluster";
import { gitIn } from "../support/git-fixtures";
import { CACHE_AGENT_ENV } from "../../api/env";

const ns = useNamespace("eviction");
const NODE = "jr2-node-0";
const tmp = mkdtempSync(join(tmpdir(), "jr2-eviction-"));
const root = join(tmp, "cache");
let agent: Agent;

const git = (args: string[], cwd?: string) => gitIn(cwd, ...args);

/** A bare remote with one commit; returns its path (its own key). */
function remote(name: string): string {
  const work = join(tmp, `work-${name}`);
  git(["init", "--quiet", "-b", "main", work]);
  git(["commit", "--quiet", "--allow-empty", "-m", "first"], work);
  const path = join(tmp, "remotes", `${name}.git`);
  git(["clone", "--quiet", "--bare", work, path]);
  return path;
}

const keyOf = (url: string) => repoKey(repoIdentity(url));
const url = { idle: "", kept: "", used: "", seeded: "" };

async function applyRepo(name: keyof typeof url, bound = false) {
  await K8s(RepoModel).Apply({
    apiVersion: "core.jr2.dev/v1alpha1",
    kind: "Repo",
    metadata: { name, namespace: ns.name },
    spec: { url: url[name], ...(bound ? { bound } : {}) },
  });
}
const entry = async (name: string) => (await K8s(RepoModel).InNamespace(ns.name).Get(name)).status?.nodes?.[NODE];
// Each cache is its Repo's namespace's (decision 0046).
const cacheDir = (name: keyof typeof url) => join(root, ns.name, keyOf(url[name]));
/** A checkout of the old, shared layout (`<root>/<key>`), from before caches had a namespace. */
const oldLayout = () => join(root, keyOf(url.seeded));

beforeAll(async () => {
  mkdirSync(root, { recursive: true });
  for (const name of Object.keys(url) as Array<keyof typeof url>) url[name] = remote(name);
  // A checkout someone left on the node, for no Repo: cloned by hand, so not the agent's own.
  git(["clone", "--quiet", "--bare", url.seeded, cacheDir("seeded")]);
  git(["clone", "--quiet", "--bare", url.seeded, oldLayout()]);
  agent = await startCacheAgent(NODE, root, { [CACHE_AGENT_ENV.evictAfter]: "2s" });
}, 60_000);

afterAll(async () => {
  await agent?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

describe("a node's cache agent evicting and adopting", () => {
  it("adopts a checkout found without a Repo: cache config set at once", () => {
    expect(git(["config", "--get", "gc.auto"], cacheDir("seeded"))).toBe("0");
    expect(git(["config", "--get", "gc.pruneExpire"], cacheDir("seeded"))).toBe("never");
    expect(agent.lines.some((l) => l.includes("checkout without a Repo adopted"))).toBe(true);
  });

  it("leaves a checkout of the old shared layout alone: not adopted, not mounted, said once", () => {
    expect(
      agent.lines.filter((l) => l.includes("old shared layout left alone") && l.includes(oldLayout())),
    ).toHaveLength(1);
    expect(() => git(["config", "--get", "gc.pruneExpire"], oldLayout())).toThrow();
  });

  it("evicts an idle unbound cache and keeps a bound one, a mounted one and the pinned one", async () => {
    await applyRepo("idle");
    await applyRepo("kept", true);
    await applyRepo("used");
    await createSandbox(ns.name, "user", {
      repos: [{ key: keyOf(url.used), url: url.used }],
      nodeSelector: { "kubernetes.io/hostname": NODE },
    });
    await waitFor(
      "the used cache present on the node",
      () => entry("used"),
      (e) => e?.phase === "Present",
    );
    await waitFor(
      "the kept cache present on the node",
      () => entry("kept"),
      (e) => e?.phase === "Present",
    );
    // A commit the pinned checkout must never fetch.
    git(["push", "--quiet", url.seeded, "HEAD:refs/heads/later"], join(tmp, "work-seeded"));

    await waitFor(
      "the idle cache's entry gone",
      () => entry("idle"),
      (e) => e === undefined,
      30_000,
    );
    expect(existsSync(cacheDir("idle"))).toBe(false);
    // The sweep that evicted it weighed every other cache too, past its grace.
    expect(await entry("kept")).toMatchObject({ phase: "Present" });
    expect(existsSync(cacheDir("kept"))).toBe(true);
    expect(await entry("used")).toMatchObject({ phase: "Present" });
    expect(existsSync(cacheDir("used"))).toBe(true);
    expect(existsSync(cacheDir("seeded"))).toBe(true);
    expect(() => git(["rev-parse", "--verify", "--quiet", "refs/heads/later"], cacheDir("seeded"))).toThrow();
  });

  it("evicts a cache once the last Sandbox on the node naming it is gone", async () => {
    await K8s(SandboxModel).InNamespace(ns.name).Delete("user");
    await waitFor(
      "the used cache's entry gone",
      () => entry("used"),
      (e) => e === undefined,
      30_000,
    );
    expect(existsSync(cacheDir("used"))).toBe(false);
    expect(existsSync(cacheDir("kept"))).toBe(true);
  });

  it("clones an evicted cache again when a Sandbox on the node asks, and lets it be Ready", async () => {
    await createSandbox(ns.name, "returning", {
      repos: [{ key: keyOf(url.idle), url: url.idle }],
      nodeSelector: { "kubernetes.io/hostname": NODE },
    });
    const ready = await waitFor(
      "the returning Sandbox Ready",
      () => getSandbox(ns.name, "returning"),
      (s) => s.status?.phase === "Ready",
    );
    expect(condition(ready, "ReposFresh")).toMatchObject({ status: "True" });
    expect(await entry("idle")).toMatchObject({ phase: "Present" });
    expect(existsSync(cacheDir("idle"))).toBe(true);
  });

  it("after a restart fetches each Repo once, not once more per Sandbox already on its node", async () => {
    const kept = keyOf(url.kept);
    const names = ["one", "two", "three", "four"];
    for (const name of names)
      await createSandbox(ns.name, name, {
        repos: [{ key: kept, url: url.kept }],
        nodeSelector: { "kubernetes.io/hostname": NODE },
      });
    for (const name of names)
      await waitFor(
        `${name} Ready`,
        () => getSandbox(ns.name, name),
        (s) => s.status?.phase === "Ready",
      );
    const before = (await entry("kept"))!.fetchedAt!;
    await agent.stop();
    agent = await startCacheAgent(NODE, root, { [CACHE_AGENT_ENV.evictAfter]: "2s" });
    const restarted = await waitFor(
      "the restarted agent's fetch",
      () => entry("kept"),
      (e) => (e?.fetchedAt ?? "") > before,
    );
    // One more ask, after the restart: the fetch answering it is the second, and only, other one.
    // An ask is a creationTimestamp in whole seconds: the next second, so it falls after that fetch.
    const nextSecond = Math.floor(Date.parse(restarted!.fetchedAt!) / 1000) * 1000 + 1000;
    if (Date.now() < nextSecond) await new Promise((r) => setTimeout(r, nextSecond - Date.now()));
    await createSandbox(ns.name, "asker", {
      repos: [{ key: kept, url: url.kept }],
      nodeSelector: { "kubernetes.io/hostname": NODE },
    });
    await waitFor(
      "asker Ready",
      () => getSandbox(ns.name, "asker"),
      (s) => s.status?.phase === "Ready",
    );
    // The agent's log reaches this process through a pipe, apart from the status the Sandbox read.
    const fetchLines = () => agent.lines.filter((l) => l.includes('"Repo cache fetched"') && l.includes(kept));
    const fetches = await waitFor(
      "the asker's fetch in the agent's log",
      async () => fetchLines(),
      (f) => f.length >= 2,
    );
    expect(fetches).toHaveLength(2);
  });
});
