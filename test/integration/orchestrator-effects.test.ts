// A Machine's Effects end to end in local mode (decisions 0070-0072): the real Orchestrator, the
// real Harness and the real Effector beside it (orchestrator/local), a stand-in forge over HTTPS
// from a private CA (git by http-backend behind Basic auth, and a pull request API). The workspace's
// Repo Slot is fenced by an entry naming the push Secret; the pod config binds an API secret to the
// forge's origin and trusts its CA. Through the API: a push of the Agent's commit, once even when
// asked twice, a conflicting reuse of its id refused; a pull request whose header spends the secret
// by reference and whose body is a Worktree file; a confined command; and at most once across an
// Orchestrator SIGKILLed between the send and the answer, the push's answer held at the forge.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { CACHE_AGENT_ENV, EFFECTOR_ENV, ORCHESTRATOR_ENV } from "../../api/env";
import { type Agent, LOCAL_NODES, localReposRoot, startCacheAgent } from "../../dev/local-cache-agent";
import { type LocalOrchestrator, startLocalOrchestrator } from "../../dev/local-orchestrator";
import { OrchestratorClient, type EffectRecord } from "../../clients/typescript/src";
import { confineBinary } from "../support/confine";
import { gitIn } from "../support/git-fixtures";
import { startStandInForge, type StandInForge } from "../support/stand-in-forge";
import { orchestratorApi } from "./support/orchestrator-api";
import { useNamespace, waitFor } from "./support/cluster";

const ns = useNamespace("effects");
const tmp = mkdtempSync(join(tmpdir(), "jr2-effects-"));
const PUSH_TOKEN = "ghp_pushTokenOfTheForge0123456789";
const API_TOKEN = "forge-api-token-5d1c0e77";
const BRANCH = "feature/effects";
const agents: Agent[] = [];
let forge: StandInForge;
let orch: LocalOrchestrator;
let ws = "";

const start = (port?: number) =>
  startLocalOrchestrator({
    ...(port !== undefined ? { port } : {}),
    kubeconfig: process.env.KUBECONFIG!,
    namespace: ns.name,
    dir: join(tmp, "orchestrator"),
    // The forge's repositories, fenced, each pushed with the push Secret.
    credentials: [{ match: `${forge.identity}/acme`, secret: "forge-push" }],
    reposRoot: localReposRoot(tmp),
    env: {
      [ORCHESTRATOR_ENV.podConfigFile]: join(tmp, "pod.yaml"),
      // No bundle here carries jr2-confine: local mode's Effector runs this one (local-effector.ts).
      [EFFECTOR_ENV.confine]: confineBinary(),
    },
  });
const client = () => new OrchestratorClient({ url: orch.url, token: orch.token });
const api = orchestratorApi(
  () => orch.url,
  () => orch.token,
);
/** The workspace's worktree of slot `app`: local mode's /work is a directory here. */
const worktree = () => join(tmp, "orchestrator", "work", ws, "app", BRANCH);
const podDir = () => join(tmp, "orchestrator", "work", `${ws}.pod`);
const commit = (file: string, text: string) => {
  writeFileSync(join(worktree(), file), text);
  gitIn(worktree(), "add", file);
  gitIn(worktree(), "commit", "-qm", `the agent's ${file}`);
  return gitIn(worktree(), "rev-parse", "HEAD");
};
const settled = (r: EffectRecord) => ({ state: r.state, error: r.error });

beforeAll(async () => {
  forge = await startStandInForge({ user: "jr2-bot", token: PUSH_TOKEN, apiToken: API_TOKEN });
  forge.createRepo("acme/app.git");
  const secret = (name: string, stringData: Record<string, string>) =>
    K8s(kind.Secret).Apply({ metadata: { name, namespace: ns.name }, stringData });
  await K8s(kind.Secret).Apply(forge.pushSecret("forge-push", ns.name));
  await secret("forge-api", { authorization: `Bearer ${API_TOKEN}` });
  await K8s(kind.ConfigMap).Apply({
    metadata: { name: "forge-ca", namespace: ns.name },
    data: { "ca.crt": forge.caPem },
  });
  writeFileSync(
    join(tmp, "pod.yaml"),
    JSON.stringify({
      effector: {
        secrets: [{ secret: "forge-api", key: "authorization", origins: [forge.origin] }],
        trust: { configMap: "forge-ca", key: "ca.crt" },
      },
    }),
  );
  // The node caches clone the forge's repository with the push Secret, trusting its CA.
  const caFile = join(tmp, "forge-ca.crt");
  writeFileSync(caFile, forge.caPem);
  for (const node of LOCAL_NODES)
    agents.push(
      await startCacheAgent(node, localReposRoot(tmp).replace("{node}", node), { [CACHE_AGENT_ENV.caFile]: caFile }),
    );
  orch = await start();
  const created = await client().createWorkspace({
    image: "ghcr.io/example/harness:1",
    branch: BRANCH,
    repos: [{ slot: "app", url: forge.url("acme/app.git") }],
    effector: { pushes: ["app"], secrets: [{ secret: "forge-api", key: "authorization" }] },
  });
  ws = created.name;
  const v = await client().waitReady(ws, { timeoutMs: 90_000 });
  expect({ state: v.state, failure: v.failure }).toEqual({ state: "ready", failure: undefined });
}, 180_000);

afterAll(async () => {
  if (ws && orch)
    await client()
      .deleteWorkspace(ws)
      .catch(() => undefined);
  await orch?.stop();
  await Promise.all(agents.map((a) => a.stop()));
  await forge?.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe("a Machine's Effects through the Orchestrator and the local Effector", () => {
  let head = "";

  it("pushes the Agent's commit to the slot's remote with the push Secret; the answer names the commit", async () => {
    head = commit("PR.md", "# Widgets, faster\n\nThe Agent made this.\n");
    const r = await client().runEffect(ws, { id: "push-1", kind: "push", slot: "app" }, { timeoutMs: 60_000 });
    expect(settled(r)).toEqual({ state: "succeeded", error: undefined });
    expect(r.result).toMatchObject({ kind: "push", commit: head, ref: `refs/heads/${BRANCH}`, forced: false });
    expect(forge.ref("acme/app.git", `refs/heads/${BRANCH}`)).toBe(head);
    const pushes = forge.pushes("acme/app.git");
    expect(pushes).toHaveLength(1);
    expect(Buffer.from(pushes[0].authorization!.replace(/^Basic /, ""), "base64").toString()).toBe(
      `jr2-bot:${PUSH_TOKEN}`,
    );
    expect(JSON.stringify(r)).not.toContain(PUSH_TOKEN);
  }, 90_000);

  it("the same id again answers the recorded result and pushes nothing", async () => {
    const first = await client().getEffect(ws, "push-1");
    const again = await client().runEffect(ws, { id: "push-1", kind: "push", slot: "app" }, { timeoutMs: 30_000 });
    expect(again.result).toEqual(first.result);
    expect(forge.pushes("acme/app.git")).toHaveLength(1);
  });

  it("another Effect under a used id is refused: 409 effect_conflict, nothing run", async () => {
    const conflict = await api<{ error: { code: string; message: string } }>("POST", `/v1/workspaces/${ws}/effects`, {
      id: "push-1",
      kind: "push",
      slot: "app",
      to: "elsewhere",
    });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe("effect_conflict");
    expect(forge.pushes()).toHaveLength(1);
    expect(forge.ref("acme/app.git", "refs/heads/elsewhere")).toBe("");
  });

  it("opens a pull request: the header's secret reaches the forge by reference, the body is a Worktree file", async () => {
    const r = await client().runEffect(
      ws,
      {
        id: "pr-1",
        kind: "http",
        method: "POST",
        url: `${forge.origin}/api/repos/acme/app/pulls`,
        headers: { authorization: { secret: "forge-api", key: "authorization" }, "content-type": "text/markdown" },
        body: { file: { slot: "app", path: "PR.md" } },
      },
      { timeoutMs: 60_000 },
    );
    expect(settled(r)).toEqual({ state: "succeeded", error: undefined });
    expect(r.result).toMatchObject({ kind: "http", status: 201 });
    expect(JSON.parse((r.result as { body: string }).body)).toMatchObject({ number: 1 });
    expect(forge.pulls()).toEqual([
      expect.objectContaining({
        method: "POST",
        path: "/api/repos/acme/app/pulls",
        authorization: `Bearer ${API_TOKEN}`,
        contentType: "text/markdown",
        body: "# Widgets, faster\n\nThe Agent made this.\n",
      }),
    ]);
    // The secret's value passed through the Effector alone: not the record, not the ledger.
    expect(JSON.stringify(r)).not.toContain(API_TOKEN);
    const ledger = await K8s(kind.ConfigMap).InNamespace(ns.name).Get(`${ws}-effects`);
    expect(JSON.stringify(ledger.data)).not.toContain(API_TOKEN);
    expect(JSON.stringify(ledger.data)).not.toContain(PUSH_TOKEN);
  }, 90_000);

  it("runs a confined command: its named secret readable, the Effector's key and push Secret not, writes only $TMPDIR", async () => {
    const effector = join(podDir(), "effector");
    const probe = [
      'check() { l=$1; shift; if "$@" >/dev/null 2>&1; then echo "$l yes"; else echo "$l no"; fi; }',
      'check named cat "$NAMED"',
      'check env test "$FORGE" = "Bearer $EXPECT"',
      'check key cat "$KEY_FILE"',
      'check push-secret cat "$PUSH_FILE"',
      `check work sh -c 'echo x > ./escape'`,
      "check tmp sh -c 'echo x > /tmp/jr2-effects-escape'",
      `check scratch sh -c 'echo x > "$TMPDIR/ok" && cat "$TMPDIR/ok"'`,
      "check read-work cat PR.md",
      "echo done",
    ].join("\n");
    const r = await client().runEffect(
      ws,
      {
        id: "cmd-1",
        kind: "command",
        argv: ["sh", "-c", probe],
        cwd: { slot: "app" },
        env: {
          FORGE: { secret: "forge-api", key: "authorization" },
          EXPECT: API_TOKEN,
          NAMED: join(effector, "secrets", "forge-api", "authorization"),
          KEY_FILE: join(effector, "own", "key"),
          PUSH_FILE: join(effector, "secrets", "@git", "forge-push", "token"),
        },
        timeoutSeconds: 30,
      },
      { timeoutMs: 60_000 },
    );
    expect(settled(r)).toEqual({ state: "succeeded", error: undefined });
    expect((r.result as { stdout: string }).stdout.trim().split("\n")).toEqual([
      "named yes",
      "env yes",
      "key no",
      "push-secret no",
      "work no",
      "tmp no",
      "scratch yes",
      "read-work yes",
      "done",
    ]);
    // The files it was refused exist: the refusal is Landlock's, not a wrong path.
    for (const f of [join(effector, "own", "key"), join(effector, "secrets", "@git", "forge-push", "token")])
      expect(readFileSync(f).length).toBeGreaterThan(0);
  }, 90_000);

  it("at most once across an Orchestrator SIGKILLed between the send and the answer: one push at the forge", async () => {
    const second = commit("NEXT.md", "more\n");
    const before = forge.pushes().length;
    const gate = forge.hold();
    await client().createEffect(ws, { id: "push-2", kind: "push", slot: "app" });
    await gate.held; // the push reached the forge, its answer kept back: the Effect is sent, unanswered
    expect((await client().getEffect(ws, "push-2")).state).toBe("sent");
    const port = Number(new URL(orch.url).port);
    await orch.stop("SIGKILL");
    gate.release();
    await waitFor(
      "the held push accepted at the forge",
      async () => forge.ref("acme/app.git", `refs/heads/${BRANCH}`),
      (ref) => ref === second,
    );
    orch = await start(port);
    const r = await waitFor(
      "push-2 settled by the restored Orchestrator",
      () => client().getEffect(ws, "push-2", { waitSeconds: 5 }),
      (e) => ["succeeded", "failed", "unknown"].includes(e.state),
      60_000,
    );
    expect(["succeeded", "unknown"]).toContain(r.state);
    if (r.state === "succeeded") expect(r.result).toMatchObject({ kind: "push", commit: second });
    expect(forge.pushes().length - before).toBe(1);
    // Asked again, it runs nothing.
    await client().createEffect(ws, { id: "push-2", kind: "push", slot: "app" });
    expect(forge.pushes().length - before).toBe(1);
  }, 120_000);
});
