// The cache agent's RBAC as rendered (cache-agent/cache-agent-manifests.ts, decision 0046), applied
// to the control plane and asked of the API server as its service account: no Secret read
// cluster-wide (kube-system, another namespace, the companions' own); in an opted-in Sandbox
// namespace `get` on exactly the Secrets its Repos name (the operator's Role), never jr2's own; no
// pod read anywhere. Then an agent running with that account's own token: a
// Repo in the opted-in namespace is fetched with its declared Secret; a Repo in a namespace that
// did not opt in gets the 403 said on its node's entry, with the namespace and the fix.
import { execFile, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { RepoModel } from "../../api/crd";
import { COMPANION_NAMESPACE, REPO_CREDENTIAL_HOSTS_ANNOTATION, REPO_CREDENTIAL_LABEL } from "../../api/wire";
import { CACHE_AGENT_ENV, LOCAL_REPO_ROOTS_ENV } from "../../api/env";
import { CACHE_AGENT, cacheAgentManifests } from "../../cache-agent/cache-agent-manifests";
import { kubectlPath } from "../../dev/kubectl";
import { type Agent, startCacheAgent } from "../../dev/local-cache-agent";
import { startGitHttpServer, type GitHttpServer } from "../support/git-http-server";
import { useNamespace, waitFor } from "./support/cluster";

const optedIn = useNamespace("rbac-in");
const other = useNamespace("rbac-out", { optedIn: false });
const AS = `system:serviceaccount:${COMPANION_NAMESPACE}:${CACHE_AGENT}`;
const NODE = "jr2-node-0";
const tmp = mkdtempSync(join(tmpdir(), "jr2-agent-rbac-"));

type Obj = { kind: string; metadata: { name: string; namespace?: string } };

/** The rendered RBAC: the objects an installation applies for the agent, minus its DaemonSet. */
const rbac = () =>
  (cacheAgentManifests({ image: "unused", sandboxNamespaces: [optedIn.name] }) as Obj[]).filter(
    (o) => o.kind !== "DaemonSet" && !(o.kind === "Namespace" && o.metadata.name === COMPANION_NAMESPACE),
  );

function kubectl(args: string[], input?: object): Promise<{ code: number; out: string; stdout: string }> {
  return new Promise((resolve) => {
    const child = execFile(kubectlPath(), args, (err, stdout, stderr) =>
      resolve({
        code: err ? ((err as { code?: number }).code ?? 1) : 0,
        out: (stdout + stderr).trim(),
        stdout: stdout.trim(),
      }),
    );
    child.stdin!.end(input ? JSON.stringify(input) : "");
  });
}

// The answer's first word: kubectl may add why after it ("no - RBAC: role ... not found" while the
// operator has written no Role in the namespace yet).
const canI = async (...args: string[]) =>
  (await kubectl(["auth", "can-i", ...args, `--as=${AS}`])).stdout.split(/\s/)[0];

let companionsMade = false;
beforeAll(async () => {
  // The companions' namespace may be another test's: made here only if absent, and then removed.
  companionsMade = (await kubectl(["get", "namespace", COMPANION_NAMESPACE])).code !== 0;
  if (companionsMade) await kubectl(["create", "namespace", COMPANION_NAMESPACE]);
  const applied = await kubectl(["apply", "-f", "-"], { apiVersion: "v1", kind: "List", items: rbac() });
  if (applied.code !== 0) throw new Error(`the cache agent's RBAC was not applied: ${applied.out}`);
});

afterAll(async () => {
  const cluster = rbac().filter((o) => o.kind !== "Namespace");
  await kubectl(["delete", "--ignore-not-found", "-f", "-"], { apiVersion: "v1", kind: "List", items: cluster });
  // Waited for: a later file applying into the companions' namespace must not meet it terminating.
  if (companionsMade) await kubectl(["delete", "namespace", COMPANION_NAMESPACE, "--timeout=100s"]);
  rmSync(tmp, { recursive: true, force: true });
}, 120_000);

describe("the cache agent's service account", () => {
  it("reads no Secret in kube-system, another namespace or the companions' namespace", async () => {
    for (const ns of ["kube-system", other.name, COMPANION_NAMESPACE, "default"]) {
      expect([ns, await canI("get", "secrets", "-n", ns)]).toEqual([ns, "no"]);
      expect([ns, await canI("get", "secrets/jr2-custodian-ca", "-n", ns)]).toEqual([ns, "no"]);
    }
    expect(await canI("get", "secrets", "--all-namespaces")).toBe("no");
    expect(await canI("list", "secrets", "--all-namespaces")).toBe("no");
  });

  it("gets in the opted-in namespace exactly the Secrets its Repos name, never jr2's own, and lists or watches none", async () => {
    // Nothing is granted before a Repo names it.
    expect(await canI("get", "secrets/git-grant", "-n", optedIn.name)).toBe("no");
    const named = (name: string, secret: string) =>
      K8s(RepoModel).Apply({
        apiVersion: "core.jr2.dev/v1alpha1",
        kind: "Repo",
        metadata: { name, namespace: optedIn.name },
        spec: { url: `https://git.example.com/team/${name}.git`, secretRef: { name: secret } },
      });
    await named("granted", "git-grant");
    // A Repo naming the root CA's Secret hands it to no node (the operator's Role leaves it out).
    await named("grabs-ca", "jr2-custodian-ca");
    await waitFor(
      "the operator's Role to grant git-grant",
      () => canI("get", "secrets/git-grant", "-n", optedIn.name),
      (answer) => answer === "yes",
    );
    expect(await canI("get", "secrets/jr2-custodian-ca", "-n", optedIn.name)).toBe("no");
    expect(await canI("get", "secrets/another", "-n", optedIn.name)).toBe("no");
    expect(await canI("get", "secrets", "-n", optedIn.name)).toBe("no");
    expect(await canI("list", "secrets", "-n", optedIn.name)).toBe("no");
    expect(await canI("watch", "secrets", "-n", optedIn.name)).toBe("no");
    // A Repo's credential taken away is taken from the nodes too.
    await K8s(RepoModel).InNamespace(optedIn.name).Delete("granted");
    await waitFor(
      "the operator's Role to drop git-grant",
      () => canI("get", "secrets/git-grant", "-n", optedIn.name),
      (answer) => answer === "no",
    );
    await K8s(RepoModel).InNamespace(optedIn.name).Delete("grabs-ca");
  });

  it("lists no pods anywhere", async () => {
    expect(await canI("list", "pods", "--all-namespaces")).toBe("no");
    for (const ns of [optedIn.name, other.name, "kube-system"])
      expect([ns, await canI("list", "pods", "-n", ns)]).toEqual([ns, "no"]);
  });

  it("keeps what names no credential: Repos and Sandboxes read cluster-wide, Repo status patched", async () => {
    for (const verb of ["get", "list", "watch"]) {
      expect(await canI(verb, "repos.core.jr2.dev", "--all-namespaces")).toBe("yes");
      expect(await canI(verb, "sandboxes.core.jr2.dev", "--all-namespaces")).toBe("yes");
    }
    expect(await canI("patch", "repos.core.jr2.dev", "--subresource=status", "-n", other.name)).toBe("yes");
    expect(await canI("patch", "repos.core.jr2.dev", "-n", other.name)).toBe("no");
  });

  it("labels the opted-in namespace as holding Sandboxes", async () => {
    const ns = await K8s(kind.Namespace).Get(optedIn.name);
    expect(ns.metadata?.labels?.["jr2.dev/sandboxes"]).toBe("enabled");
  });
});

describe("a cache agent with that account's own token", () => {
  let agent: Agent | undefined;
  let server: GitHttpServer | undefined;

  beforeAll(async () => {
    const served = join(tmp, "served");
    const work = join(tmp, "work");
    execFileSync("git", ["init", "--quiet", "-b", "main", work]);
    execFileSync(
      "git",
      ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "a"],
      {
        cwd: work,
      },
    );
    execFileSync("git", ["clone", "--quiet", "--bare", work, join(served, "app.git")]);
    server = await startGitHttpServer({ root: served, user: "jr2", password: "rbac-token-2468" });
    // A kubeconfig naming the API server as the tests reach it and the service account's token.
    const token = await kubectl(["create", "token", CACHE_AGENT, "-n", COMPANION_NAMESPACE, "--duration=10m"]);
    if (token.code !== 0) throw new Error(`no token for ${AS}: ${token.out}`);
    const view = JSON.parse((await kubectl(["config", "view", "--raw", "--minify", "--flatten", "-o", "json"])).stdout);
    kubeconfig = join(tmp, "agent.kubeconfig");
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: view.clusters,
        users: [{ name: "agent", user: { token: token.stdout } }],
        contexts: [{ name: "agent", context: { cluster: view.clusters[0].name, user: "agent" } }],
        "current-context": "agent",
      }),
    );
    for (const ns of [optedIn.name, other.name]) {
      await K8s(kind.Secret).Apply({
        metadata: {
          name: "git-token",
          namespace: ns,
          labels: { [REPO_CREDENTIAL_LABEL]: "true" },
          annotations: { [REPO_CREDENTIAL_HOSTS_ANNOTATION]: server.url("") },
        },
        stringData: { username: "jr2", token: "rbac-token-2468" },
      });
    }
    agent = await startCacheAgent(NODE, join(tmp, "cache"), { KUBECONFIG: kubeconfig });
  }, 60_000);

  let kubeconfig = "";

  afterAll(async () => {
    await agent?.stop();
    await server?.close();
  });

  const repo = (namespace: string) =>
    K8s(RepoModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Repo",
      metadata: { name: "app", namespace },
      spec: { url: server!.url("app.git"), secretRef: { name: "git-token" } },
    });
  const entry = (namespace: string, phase: "Present" | "Failed") =>
    waitFor(
      `Repo ${namespace}/app's entry for ${NODE} to say ${phase}`,
      () => K8s(RepoModel).InNamespace(namespace).Get("app"),
      (r) => r.status?.nodes?.[NODE]?.phase === phase,
    );

  it("fetches a Repo of the opted-in namespace with its declared Secret", async () => {
    // The agent may ask before the operator's Role grants the Secret: it asks again on a backoff.
    await repo(optedIn.name);
    expect((await entry(optedIn.name, "Present")).status?.nodes?.[NODE]).toMatchObject({ phase: "Present" });
    expect(server!.stats.authorized).toBeGreaterThan(0);
  });

  it("says a 403 on a Repo of a namespace that did not opt in, naming it and the fix, and keeps running", async () => {
    const before = server!.stats.requests;
    await repo(other.name);
    const failed = (await entry(other.name, "Failed")).status!.nodes![NODE];
    expect(failed.phase).toBe("Failed");
    expect(failed.error).toContain(
      `may not read Secret "git-token" (spec.secretRef.name) in namespace "${other.name}"`,
    );
    expect(failed.error).toContain("has not opted in to holding Sandboxes");
    expect(failed.error).toContain("JR2_SANDBOX_NAMESPACES");
    expect(server!.stats.requests).toBe(before);
    expect(agent!.process.exitCode).toBeNull();
  });

  // Decision 0066: as deployed, the agent is given the installation's list and fetches nothing of
  // another namespace: no Secret asked for, no fetch made, its entry saying why. Its RBAC is the
  // same: the list costs no read of Namespaces (rbac-matrix.test.ts).
  it("as deployed, with the installation's list, leaves a namespace not on it alone and says so", async () => {
    const node = "jr2-node-1";
    const listed = await startCacheAgent(node, join(tmp, "cache-listed"), {
      KUBECONFIG: kubeconfig,
      [LOCAL_REPO_ROOTS_ENV]: "",
      [CACHE_AGENT_ENV.sandboxNamespaces]: optedIn.name,
      [CACHE_AGENT_ENV.vouchedHosts]: "127.0.0.1",
    });
    try {
      const on = (namespace: string, name: string, phase: string) =>
        waitFor(
          `Repo ${namespace}/${name}'s entry for ${node} to say ${phase}`,
          () => K8s(RepoModel).InNamespace(namespace).Get(name),
          (r) => r.status?.nodes?.[node]?.phase === phase,
        ).then((r) => r.status!.nodes![node]);
      // A new Repo (one another node already holds waits for a Sandbox here to ask).
      await K8s(RepoModel).Apply({
        apiVersion: "core.jr2.dev/v1alpha1",
        kind: "Repo",
        metadata: { name: "app-listed", namespace: optedIn.name },
        spec: { url: server!.url("app.git"), secretRef: { name: "git-token" } },
      });
      expect(await on(optedIn.name, "app-listed", "Present")).toMatchObject({ phase: "Present" });
      const left = await on(other.name, "app", "Failed");
      expect(left).toMatchObject({ phase: "Failed", reason: "NamespaceNotEnabled" });
      expect(left.error).toContain(`namespace "${other.name}" has not opted in to holding Sandboxes`);
      expect(left.error).not.toContain("may not read Secret");
      expect(listed.process.exitCode).toBeNull();
    } finally {
      await listed.stop();
    }
  });
});
