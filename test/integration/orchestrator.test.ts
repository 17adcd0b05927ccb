// The Orchestrator end to end: its HTTP API as a Machine uses it, the real operator and control
// plane, a cache agent per kwok node, a real Harness process per Sandbox (local mode) and real git.
import { orchestratorApi } from "./support/orchestrator-api";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { RepoModel, SandboxModel } from "../../api/crd";
import { KEEPALIVE_ANNOTATION } from "../../api/wire";
import type { WorkspaceEvent, WorkspaceView } from "../../api/orchestrator-schemas";
import { tokenSecretName } from "../../api/wire";
import { type Agent, localReposRoot, startCacheAgents } from "../../dev/local-cache-agent";
import { type LocalOrchestrator, startLocalOrchestrator } from "../../dev/local-orchestrator";
import { useNamespace, waitFor } from "./support/cluster";
import { gitIn } from "../support/git-fixtures";
import { ORCHESTRATOR_ENV } from "../../api/env";

const ns = useNamespace("orch");
const tmp = mkdtempSync(join(tmpdir(), "jr2-orch-"));
const remotes = join(tmp, "remotes");
const remote = join(remotes, "widgets.git");
const agents: Agent[] = [];
let orch: LocalOrchestrator;
// A git server that accepts and never answers: a Repo on it stays RepoPending (Cloning).
let hanging: Server;
const held: ServerResponse[] = [];
let hangingUrl: string;

const git = (args: string[], cwd?: string) => gitIn(cwd, ...args);

const start = () =>
  startLocalOrchestrator({
    kubeconfig: process.env.KUBECONFIG!,
    namespace: ns.name,
    dir: join(tmp, "orchestrator"),
    credentials: [remotes, hangingUrl],
    reposRoot: localReposRoot(tmp),
    env: { [ORCHESTRATOR_ENV.leaseInterval]: "1s" },
  });

const api = orchestratorApi(
  () => orch.url,
  () => orch.token,
);

const view = async (name: string) => (await api<WorkspaceView>("GET", `/v1/workspaces/${name}`)).body;
const sandbox = (name: string) => K8s(SandboxModel).InNamespace(ns.name).Get(name);
const keepalive = async (name: string) => (await sandbox(name)).metadata?.annotations?.[KEEPALIVE_ANNOTATION] ?? "";

async function create(body: Record<string, unknown>): Promise<string> {
  const res = await api<{ name: string }>("POST", "/v1/workspaces", body);
  expect(res.status).toBe(202);
  return res.body.name;
}

/** The workspace's event stream, collected until closed. */
function events(name: string) {
  const seen: WorkspaceEvent[] = [];
  const ctl = new AbortController();
  const done = (async () => {
    const res = await fetch(`${orch.url}/v1/workspaces/${name}/events`, {
      headers: { authorization: `Bearer ${orch.token}` },
      signal: ctl.signal,
    });
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = frame
          .split("\n")
          .filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).trim())
          .join("\n");
        if (data) seen.push(JSON.parse(data));
      }
    }
  })().catch(() => undefined);
  return { seen, close: () => (ctl.abort(), done) };
}

beforeAll(async () => {
  const work = join(tmp, "work-src");
  git(["init", "--quiet", "-b", "main", work]);
  git(["commit", "--quiet", "--allow-empty", "-m", "first"], work);
  git(["clone", "--quiet", "--bare", work, remote]);
  hanging = createServer((_req, res) => void held.push(res));
  await new Promise<void>((r) => hanging.listen(0, "127.0.0.1", r));
  hangingUrl = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}/`;
  agents.push(...(await startCacheAgents(tmp)));
  orch = await start();
}, 90_000);

afterAll(async () => {
  await orch?.stop();
  await Promise.all(agents.map((a) => a.stop()));
  for (const r of held) r.destroy();
  hanging?.closeAllConnections();
  hanging?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe("the Orchestrator's API", () => {
  it("answers 401 without a token and 400 naming the field of a bad body", async () => {
    expect((await api("GET", "/v1/workspaces", undefined, "")).status).toBe(401);
    expect((await api("GET", "/v1/workspaces", undefined, "wrong")).status).toBe(401);
    const bad = await api<{ error: { code: string; message: string } }>("POST", "/v1/workspaces", {
      image: "ghcr.io/example/harness:1",
      branch: "default",
      repos: [{ slot: "../up", url: remote }],
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("invalid");
    expect(bad.body.error.message).toMatch(/branch/);
    expect(bad.body.error.message).toMatch(/repos\[0\]\.slot|repos\.0\.slot/);
  });

  it("refuses a url outside the fence with nothing created", async () => {
    const res = await api<{ error: { code: string; message: string } }>("POST", "/v1/workspaces", {
      image: "ghcr.io/example/harness:1",
      branch: "feature/x",
      repos: [{ slot: "app", url: "https://example.com/someone/else.git" }],
    });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("fence_refused");
    expect(res.body.error.message).toContain(remotes);
    expect((await K8s(SandboxModel).InNamespace(ns.name).Get()).items).toHaveLength(0);
    expect((await K8s(kind.Secret).InNamespace(ns.name).Get()).items.filter((s) => s.type === "Opaque")).toHaveLength(
      0,
    );
  });

  it("refuses a url that climbs out of the fence, or carries a password, with no Repo written", async () => {
    const post = (url: string) =>
      api<{ error: { code: string; message: string } }>("POST", "/v1/workspaces", {
        image: "ghcr.io/example/harness:1",
        branch: "feature/x",
        repos: [{ slot: "app", url }],
      });
    // Under the fence's entry (the remotes dir) as written, outside it once resolved.
    const climbs = await post(`${remotes}/widgets.git/../../..`);
    expect(climbs.status).toBe(400);
    expect(climbs.body.error.message).toMatch(/^repos\[0\]\.url: climbs/);
    const encoded = await post(`${hangingUrl}acme%2F..%2F..%2Fevil`);
    expect(encoded.status).toBe(400);
    expect(encoded.body.error.message).toMatch(/^repos\[0\]\.url: .*encoded '\/'/);
    const password = await post(hangingUrl.replace("http://", "http://user:hunter2@"));
    expect(password.status).toBe(400);
    expect(password.body.error.message).toMatch(/^repos\[0\]\.url: carries a password/);
    expect(JSON.stringify(password.body)).not.toContain("hunter2");
    expect((await K8s(RepoModel).InNamespace(ns.name).Get()).items).toHaveLength(0);
    expect((await K8s(SandboxModel).InNamespace(ns.name).Get()).items).toHaveLength(0);
  });
});

describe("a workspace's life", () => {
  let name: string;

  it("is created, Ready and attached from the node's cache, its keepalive advancing", async () => {
    name = await create({
      image: "ghcr.io/example/harness:1",
      branch: "feature/x",
      repos: [{ slot: "app", url: remote }],
    });
    const ready = await waitFor(
      "the workspace ready",
      () => view(name),
      (v) => v?.state === "ready" || v?.state === "failed",
      60_000,
    );
    expect(ready).toMatchObject({ state: "ready", phase: "Ready" });
    const head = git(["rev-parse", "HEAD"], remote);
    expect(ready.attach?.repos.app).toMatchObject({ branch: "feature/x", head });
    expect(existsSync(ready.attach!.repos.app.path)).toBe(true);
    // The token Secret is owned by the CR.
    const sbx = await sandbox(name);
    const secret = await K8s(kind.Secret).InNamespace(ns.name).Get(tokenSecretName(name));
    expect(secret.metadata?.ownerReferences?.[0]).toMatchObject({ kind: "Sandbox", name, uid: sbx.metadata!.uid });
    const first = await keepalive(name);
    await waitFor(
      "the keepalive advancing",
      () => keepalive(name),
      (k) => k > first,
      15_000,
    );
  });

  it("resumes after the Orchestrator is killed while ready: the same answer, renewals go on, no second CR", async () => {
    const before = await view(name);
    await orch.stop("SIGKILL");
    orch = await start();
    const resumed = await waitFor(
      "the workspace ready again",
      () => view(name),
      (v) => v?.state === "ready",
      30_000,
    );
    expect(resumed.attach).toEqual(before.attach);
    const k = await keepalive(name);
    await waitFor(
      "renewals after the restart",
      () => keepalive(name),
      (v) => v > k,
      15_000,
    );
    const crs = (await K8s(SandboxModel).InNamespace(ns.name).Get()).items;
    expect(crs.filter((s) => s.metadata?.name === name)).toHaveLength(1);
  });

  it("is deleted, and its token Secret goes with the CR", async () => {
    expect((await api("DELETE", `/v1/workspaces/${name}`)).status).toBe(202);
    await waitFor(
      "the workspace destroyed",
      () => view(name),
      (v) => v?.state === "destroyed",
      30_000,
    );
    await waitFor(
      "the CR and its token Secret gone",
      async () => [
        ...(await K8s(SandboxModel).InNamespace(ns.name).Get()).items.map((s) => s.metadata!.name),
        ...(await K8s(kind.Secret).InNamespace(ns.name).Get()).items.map((s) => s.metadata!.name),
      ],
      (names) => !names.includes(name) && !names.includes(tokenSecretName(name)),
      60_000,
    );
  });
});

describe("waits and losses", () => {
  it("reports a lost workspace when its pod is deleted under it", async () => {
    const name = await create({ image: "ghcr.io/example/harness:1", branch: "main-work" });
    await waitFor(
      "ready",
      () => view(name),
      (v) => v?.state === "ready",
      60_000,
    );
    const stream = events(name);
    await waitFor(
      "the stream's snapshot",
      async () => stream.seen.length,
      (n) => n > 0,
    );
    const pod = (await sandbox(name)).status!.podName!;
    await K8s(kind.Pod).InNamespace(ns.name).Delete(pod);
    await waitFor(
      "a lost event",
      async () => stream.seen,
      (s) => s.some((e) => e.type === "transition" && e.to === "lost"),
      30_000,
    );
    await stream.close();
    expect((await view(name)).lost?.reason).toBeTruthy();
  });

  it("reports the scheduler's message while no node fits, then provisions when one appears", async () => {
    const name = await create({ image: "ghcr.io/example/harness:1", branch: "big", size: { cpu: "64" } });
    const waiting = await waitFor(
      "a node wait",
      () => view(name),
      (v) => v?.wait?.kind === "node",
      30_000,
    );
    expect(waiting.state).toBe("placing");
    expect((waiting.wait as { message: string }).message).toMatch(/Insufficient cpu|didn't match|nodes are available/);
    const big = "jr2-node-big";
    await K8s(kind.Node).Apply({
      metadata: {
        name: big,
        annotations: { "kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0" },
        labels: { "kubernetes.io/hostname": big, type: "kwok" },
      },
      spec: { podCIDR: "10.244.250.0/24", podCIDRs: ["10.244.250.0/24"] },
      status: {
        allocatable: { cpu: "128", memory: "512Gi", pods: "110" },
        capacity: { cpu: "128", memory: "512Gi", pods: "110" },
      },
    });
    try {
      const ready = await waitFor(
        "ready on the new node",
        () => view(name),
        (v) => v?.state === "ready",
        60_000,
      );
      expect((await sandbox(name)).status?.nodeName).toBe(big);
      expect(ready.wait).toBeUndefined();
    } finally {
      await api("DELETE", `/v1/workspaces/${name}`);
      await K8s(kind.Node).Delete(big);
    }
  });

  it("resumes a workspace killed during provisioning: held on its Repo, renewing, one CR", async () => {
    const url = `${hangingUrl}slow.git`;
    const name = await create({ image: "ghcr.io/example/harness:1", branch: "slow", repos: [{ slot: "slow", url }] });
    await waitFor(
      "held on its Repo",
      () => view(name),
      (v) => v?.state === "provisioning" && v.wait?.kind === "repo",
      30_000,
    );
    await orch.stop("SIGKILL");
    // As if it had died between the CR and what the CR owns: the restored one writes them again.
    const before = await K8s(kind.Secret).InNamespace(ns.name).Get(tokenSecretName(name));
    await K8s(kind.Secret).InNamespace(ns.name).Delete(tokenSecretName(name));
    await K8s(kind.ConfigMap).InNamespace(ns.name).Delete(`${name}-custodian`);
    orch = await start();
    const token = await waitFor(
      "the token Secret written again",
      () => K8s(kind.Secret).InNamespace(ns.name).Get(tokenSecretName(name)),
      (s) => s?.metadata?.uid !== undefined && s.metadata.uid !== before.metadata?.uid,
      30_000,
    );
    expect(token.data).toEqual(before.data);
    expect(token.metadata?.ownerReferences?.[0]?.name).toBe(name);
    await waitFor(
      "the Custodian ConfigMap written again",
      () => K8s(kind.ConfigMap).InNamespace(ns.name).Get(`${name}-custodian`),
      (c) => c?.data?.["config.json"] !== undefined,
      30_000,
    );
    const resumed = await waitFor(
      "provisioning again",
      () => view(name),
      (v) => v?.state === "provisioning",
      30_000,
    );
    expect(resumed.wait?.kind).toBe("repo");
    const k = await keepalive(name);
    await waitFor(
      "renewals after the restart",
      () => keepalive(name),
      (v) => v > k,
      15_000,
    );
    const crs = (await K8s(SandboxModel).InNamespace(ns.name).Get()).items;
    expect(crs.filter((s) => s.metadata?.name === name)).toHaveLength(1);
    await api("DELETE", `/v1/workspaces/${name}`);
  });
});
