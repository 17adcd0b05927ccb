// The Repo boundary (decision 0066), on the real control plane with real cache agents and real git:
// tenant B cannot have a node copy tenant A's cache through a file url (admission refuses it,
// naming spec.url and the fix; an agent refuses it again, and copies nothing); an agent fetches only
// Repos of the namespaces its installation opted in, never connects to an internal address the
// installation does not vouch for (a listener records that nothing arrived), and holds each
// namespace to a count of Repos and to bytes on disk, its node entry naming the bound, its figure
// and the fix.
//
// The integration operator runs as the local runner starts it, with local mode's roots (the temp
// directory: the other tests' remotes are paths there), so the local url refused here lies outside
// them, as a node's cache root does. Each agent runs under a node name of its own, so their entries
// never meet; "cluster" agents run without local mode, as the DaemonSet does.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s } from "kubernetes-fluent-client";
import { RepoModel } from "../../api/crd";
import { CACHE_AGENT_ENV, LOCAL_REPO_ROOTS_ENV } from "../../api/env";
import { repoIdentity, repoKey } from "../../api/repo-identity";
import { type Agent, startCacheAgent } from "../../dev/local-cache-agent";
import { freePort } from "../../dev/local-orchestrator";
import { gitIn } from "../support/git-fixtures";
import { applyRepo, useNamespace, waitFor } from "./support/cluster";

const tenantA = useNamespace("boundary-a");
const tenantB = useNamespace("boundary-b");
const notOptedIn = useNamespace("boundary-out");
const internal = useNamespace("boundary-internal");
const counted = useNamespace("boundary-count");
const weighed = useNamespace("boundary-bytes");
const tmp = mkdtempSync(join(tmpdir(), "jr2-boundary-"));

let daemon: ChildProcess | undefined;
let remote = "";
/** A listener no Repo may reach: every connection it takes is recorded. */
let recorder: Server | undefined;
let recorderPort = 0;
let recorded = 0;
const agents: Agent[] = [];

type Entry = { phase?: string; reason?: string; error?: string } | undefined;

const entryOf = (namespace: string, name: string, node: string, done: (e: Entry) => boolean) =>
  waitFor(
    `Repo ${namespace}/${name}'s entry for ${node}`,
    () => K8s(RepoModel).InNamespace(namespace).Get(name),
    (r) => done(r.status?.nodes?.[node]),
  ).then((r) => r.status!.nodes![node]);

/** An agent as its DaemonSet runs it: no local mode, the installation's namespaces and vouched hosts. */
const clusterAgent = (node: string, namespaces: string[], env: Record<string, string> = {}) =>
  startCacheAgent(node, join(tmp, `cache-${node}`), {
    [LOCAL_REPO_ROOTS_ENV]: "",
    [CACHE_AGENT_ENV.sandboxNamespaces]: namespaces.join(","),
    [CACHE_AGENT_ENV.vouchedHosts]: remote.replace(/^git:\/\/([^/]+)\/.*$/, "$1"),
    ...env,
  });

beforeAll(async () => {
  // A one-commit repository served over git:// on loopback, as a vouched internal git host.
  const work = join(tmp, "src");
  gitIn(undefined, "init", "--quiet", "-b", "main", work);
  writeFileSync(join(work, "README"), "widgets\n");
  gitIn(work, "add", "README");
  gitIn(work, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "first");
  gitIn(undefined, "clone", "--quiet", "--bare", work, join(tmp, "remotes", "widgets.git"));
  gitIn(undefined, "clone", "--quiet", "--bare", work, join(tmp, "remotes", "gadgets.git"));
  const port = await freePort("127.0.0.1");
  daemon = spawn(
    "git",
    ["daemon", "--reuseaddr", "--export-all", `--base-path=${join(tmp, "remotes")}`, "--listen=127.0.0.1"].concat([
      `--port=${port}`,
      join(tmp, "remotes"),
    ]),
    { stdio: "ignore" },
  );
  remote = `git://127.0.0.1:${port}/widgets.git`;
  await waitFor(
    "git daemon serving",
    async () => {
      try {
        return gitIn(undefined, "ls-remote", remote, "HEAD");
      } catch {
        return "";
      }
    },
    (out) => out.length > 0,
  );
  recorder = createServer((socket) => {
    recorded++;
    socket.destroy();
  });
  recorderPort = await freePort("127.0.0.1");
  await new Promise<void>((resolve) => recorder!.listen(recorderPort, "127.0.0.1", resolve));
}, 60_000);

afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  daemon?.kill();
  await new Promise((resolve) => recorder?.close(resolve) ?? resolve(undefined));
  rmSync(tmp, { recursive: true, force: true });
});

describe("tenant B and tenant A's cache through a file url (item 1)", () => {
  const NODE = "boundary-local";
  let root = "";
  let key = "";

  beforeAll(async () => {
    // Tenant A's cache, fetched by an agent in local mode (whose roots hold its cache root too).
    root = join(tmp, `cache-${NODE}`);
    // Local mode, but only these two namespaces: it must not reach the other tests' Repos.
    agents.push(
      await startCacheAgent(NODE, root, {
        [CACHE_AGENT_ENV.sandboxNamespaces]: [tenantA.name, tenantB.name].join(","),
      }),
    );
    await applyRepo(tenantA.name, "private", remote);
    key = repoKey(repoIdentity(remote));
    await entryOf(tenantA.name, "private", NODE, (e) => e?.phase === "Present");
    expect(existsSync(join(root, tenantA.name, key, "HEAD"))).toBe(true);
  }, 60_000);

  it("refuses at admission B's Repo naming A's cache on the node, naming spec.url and the fix; nothing is stored", async () => {
    for (const url of [
      `file:///var/lib/jr2/repos/${tenantA.name}/${key}`,
      `/var/lib/jr2/repos/${tenantA.name}/${key}`,
    ]) {
      const err = await applyRepo(tenantB.name, "stolen", url).then(
        () => undefined,
        (e: { data?: { message?: string }; message?: string }) => e.data?.message ?? e.message,
      );
      expect(err).toContain(`Repo ${tenantB.name}/stolen refused: spec.url: is a local path`);
      expect(err).toContain("give the repository's network url");
    }
    const stored = await K8s(RepoModel)
      .InNamespace(tenantB.name)
      .Get("stolen")
      .then(
        () => true,
        (e: { status?: number }) => (e.status === 404 ? false : Promise.reject(e)),
      );
    expect(stored).toBe(false);
  });

  it("an agent refuses a file url into its own caches, even where local mode admits the path, and copies nothing", async () => {
    // Admitted: the integration operator's local roots (the temp directory) hold this agent's root.
    await applyRepo(tenantB.name, "inside", `file://${join(root, tenantA.name, key)}`);
    const entry = await entryOf(tenantB.name, "inside", NODE, (e) => e?.phase === "Failed");
    expect(entry).toMatchObject({ phase: "Failed", reason: "LocalUrl" });
    expect(entry?.error).toContain("inside the cache agent's own caches");
    expect(existsSync(join(root, tenantB.name))).toBe(false);
  });

  it("an agent outside local mode (as deployed) refuses every local url, and copies nothing", async () => {
    const node = "boundary-cluster-local";
    agents.push(await clusterAgent(node, [tenantA.name, tenantB.name]));
    await applyRepo(tenantB.name, "path", join(tmp, "remotes", "widgets.git"));
    const entry = await entryOf(tenantB.name, "path", node, (e) => e?.phase === "Failed");
    expect(entry).toMatchObject({ phase: "Failed", reason: "LocalUrl" });
    expect(entry?.error).toContain("spec.url is a local path");
    expect(existsSync(join(tmp, `cache-${node}`, tenantB.name))).toBe(false);
    // The same agent fetches a network url of B's (a new Repo: one other nodes already hold waits
    // for a Sandbox here to ask): it is the url it refused, not the namespace.
    await applyRepo(tenantB.name, "network", remote);
    expect(await entryOf(tenantB.name, "network", node, (e) => e?.phase === "Present")).toMatchObject({
      phase: "Present",
    });
  });
});

describe("what a node fetches at all (item 8)", () => {
  const NODE = "boundary-cluster";

  beforeAll(async () => {
    agents.push(await clusterAgent(NODE, [internal.name, counted.name], { [CACHE_AGENT_ENV.maxRepos]: "2" }));
  }, 60_000);

  it("fetches no Repo of a namespace the installation did not opt in, and says why with the fix", async () => {
    await applyRepo(notOptedIn.name, "widgets", remote);
    const entry = await entryOf(notOptedIn.name, "widgets", NODE, (e) => e?.phase === "Failed");
    expect(entry).toMatchObject({ phase: "Failed", reason: "NamespaceNotEnabled" });
    expect(entry?.error).toContain(`namespace "${notOptedIn.name}" has not opted in to holding Sandboxes`);
    expect(entry?.error).toContain("JR2_SANDBOX_NAMESPACES");
    expect(existsSync(join(tmp, `cache-${NODE}`, notOptedIn.name))).toBe(false);
  });

  it("never connects to an internal address the installation does not vouch for, and says why", async () => {
    // The vouched host is the git daemon's address and port: the same address on another port is not.
    await applyRepo(internal.name, "by-address", `git://127.0.0.1:${recorderPort}/widgets.git`);
    await applyRepo(internal.name, "by-name", `http://localhost:${recorderPort}/widgets.git`);
    for (const name of ["by-address", "by-name"]) {
      const entry = await entryOf(internal.name, name, NODE, (e) => e?.phase === "Failed");
      expect([name, entry?.reason]).toEqual([name, "InternalAddress"]);
      expect(entry?.error).toContain(`:${recorderPort}, which resolves to an internal address`);
      expect(entry?.error).toContain("JR2_CACHE_VOUCHED_HOSTS");
    }
    expect(recorded).toBe(0);
  });

  it("caches at most the bound's count of Repos per namespace, the oldest first, and says which bound", async () => {
    for (const name of ["r1", "r2", "r3"]) await applyRepo(counted.name, name, remote);
    for (const name of ["r1", "r2"])
      expect((await entryOf(counted.name, name, NODE, (e) => e?.phase === "Present"))?.reason).toBeUndefined();
    const over = await entryOf(counted.name, "r3", NODE, (e) => e?.phase === "Failed");
    expect(over).toMatchObject({ phase: "Failed", reason: "RepoCountBound" });
    expect(over?.error).toContain(`namespace "${counted.name}" has 3 Repos`);
    expect(over?.error).toContain("at most 2 on a node (JR2_CACHE_MAX_REPOS)");
    expect(over?.error).toContain("delete Repos this namespace no longer needs");
    // A Repo gone makes room: the one held back is fetched.
    await K8s(RepoModel).InNamespace(counted.name).Delete("r1");
    await entryOf(counted.name, "r3", NODE, (e) => e?.phase === "Present" && !e.reason);
  });
});

describe("the bytes one namespace's caches may take on a node (item 8)", () => {
  const NODE = "boundary-bytes";

  beforeAll(async () => {
    agents.push(await clusterAgent(NODE, [weighed.name], { [CACHE_AGENT_ENV.maxBytes]: "1Ki" }));
  }, 60_000);

  it("fetches nothing more for a namespace at its byte bound, and says so with the figure and the fix", async () => {
    // The first clone starts under the bound (nothing cached yet) and takes the namespace past it.
    await applyRepo(weighed.name, "first", remote);
    await entryOf(weighed.name, "first", NODE, (e) => e?.phase === "Present");
    await applyRepo(weighed.name, "second", remote.replace("widgets", "gadgets"));
    const over = await entryOf(weighed.name, "second", NODE, (e) => e?.phase === "Failed");
    expect(over).toMatchObject({ phase: "Failed", reason: "ByteBound" });
    expect(over?.error).toMatch(new RegExp(`namespace "${weighed.name}"'s caches on this node take [0-9.]+ KiB`));
    expect(over?.error).toContain("at most 1.0 KiB (JR2_CACHE_MAX_BYTES)");
    expect(over?.error).toContain("Delete Repos this namespace no longer needs");
  });
});
