// Agents' picks through the Orchestrator (decisions 0025, 0042), on the real control plane: a
// workspace is created and a Machine submits a turn, then this test plays its Harness (as its
// Custodian forwards it: the Sandbox token as the bearer) against the Orchestrator's Harness-facing
// routes, and the Machine lists and answers the picks with an API token. A pick is taken only for
// the admitted turn, on its Menu and allowed; forged ones are refused and never listed; a
// neighbour's flood and oversized picks are its own 429s and 413s. The ledger is a ConfigMap the
// Sandbox owns: a pick outstanding when the Orchestrator is SIGKILLed is answered by the restarted one.
import { orchestratorApi } from "./support/orchestrator-api";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { SandboxModel } from "../../api/crd";
import { deliveryPath, picksPath, type PickBody } from "../../api/agent-protocol";
import type { WorkspaceView } from "../../api/orchestrator-schemas";
import { LEDGER_KEY, ledgerConfigMapName, parseLedger } from "../../orchestrator/agents/pick-ledger";
import { sandboxToken, signingKeyOf } from "../../orchestrator/tokens";
import { type Agent, localReposRoot, startCacheAgents } from "../../dev/local-cache-agent";
import { type LocalOrchestrator, startLocalOrchestrator } from "../../dev/local-orchestrator";
import { gitIn } from "../support/git-fixtures";
import { useNamespace, waitFor } from "./support/cluster";

const ns = useNamespace("picks");
const tmp = mkdtempSync(join(tmpdir(), "jr2-picks-"));
const remotes = join(tmp, "remotes");
const remote = join(remotes, "widgets.git");
const agents: Agent[] = [];
let orch: LocalOrchestrator;

const start = () =>
  startLocalOrchestrator({
    kubeconfig: process.env.KUBECONFIG!,
    namespace: ns.name,
    dir: join(tmp, "orchestrator"),
    credentials: [remotes],
    reposRoot: localReposRoot(tmp),
  });

const signingKey = () => signingKeyOf(readFileSync(join(tmp, "orchestrator", "signing-key")));

type Json = Record<string, unknown> & { error?: { code: string; message: string } };
const api = orchestratorApi(
  () => orch.url,
  () => orch.token,
);
/** The Harness's calls: the token first, as the Custodian adds it. */
const call = (method: string, path: string, token: string, body?: unknown) => api<Json>(method, path, body, token);

beforeAll(async () => {
  const work = join(tmp, "work-src");
  gitIn(undefined, "init", "--quiet", "-b", "main", work);
  gitIn(work, "commit", "--quiet", "--allow-empty", "-m", "first");
  gitIn(undefined, "clone", "--quiet", "--bare", work, remote);
  agents.push(...(await startCacheAgents(tmp)));
  orch = await start();
}, 90_000);

afterAll(async () => {
  await orch?.stop();
  await Promise.all(agents.map((a) => a.stop()));
  rmSync(tmp, { recursive: true, force: true });
});

const MENU = [
  { name: "propose", description: "Propose the change." },
  { name: "reject", description: "Give it up." },
];

/** A workspace ready, with its Sandbox token. */
async function workspace(branch: string): Promise<{ name: string; token: string }> {
  const created = await api("POST", "/v1/workspaces", {
    image: "ghcr.io/example/harness:1",
    branch,
    repos: [{ slot: "app", url: remote }],
  });
  expect(created.status).toBe(202);
  const name = created.body.name as string;
  const view = await waitFor(
    "the workspace ready",
    async () => (await api("GET", `/v1/workspaces/${name}`)).body as unknown as WorkspaceView,
    (v) => v?.state === "ready" || v?.state === "failed",
    60_000,
  );
  expect(view.state).toBe("ready");
  return { name, token: sandboxToken(signingKey(), name) };
}

/** The Machine submits a turn on `iid` (its Harness admits it; this test then plays the Harness). */
async function submit(name: string, iid: string, submissionId: string, allowed = ["propose"]) {
  const r = await api("POST", `/v1/workspaces/${name}/turns`, {
    agent: "coder",
    iid,
    message: "propose a change",
    submissionId,
    menu: MENU,
    allowed,
  });
  expect([r.status, r.body]).toEqual([202, expect.objectContaining({ iid })]);
}

/** Reads the conversation's stream to its turn's end (no model answers here: the turn fails at its
 * first model call), so the Harness takes the next turn; the Orchestrator ends the turn too. */
async function turnEnded(name: string, iid: string) {
  const res = await fetch(`${orch.url}/v1/workspaces/${name}/turns/${encodeURIComponent(iid)}/events`, {
    headers: { authorization: `Bearer ${orch.token}` },
  });
  expect(res.status).toBe(200);
  expect(await res.text()).toMatch(/event: end/);
}

describe("an Agent's picks, the Harness's side and the Machine's", () => {
  let name: string;
  let token: string;
  let iid: string;
  const pick = (over: Partial<PickBody> = {}): PickBody => ({
    pick: "propose",
    args: { title: "a change" },
    submissionId: "turn-1",
    callId: "call-1",
    ...over,
  });

  beforeAll(async () => {
    ({ name, token } = await workspace("feature/picks"));
    iid = `${name}.coder-1`;
    await submit(name, iid, "turn-1");
  }, 90_000);

  it("takes a pick, holds its poll, lists it to the Machine, and delivers the Machine's answer", async () => {
    const taken = await call("POST", picksPath(iid), token, pick());
    expect(taken).toEqual({ status: 202, body: { outstanding: true, deliveryId: expect.any(String) } });
    const deliveryId = taken.body.deliveryId as string;
    // The same pick again (an unknown outcome re-sent): the same delivery.
    expect(await call("POST", picksPath(iid), token, pick())).toEqual({
      status: 200,
      body: { outstanding: true, deliveryId },
    });
    // Another pick of the same turn while it waits: 409, with a message.
    const busy = await call("POST", picksPath(iid), token, pick({ callId: "call-2" }));
    expect(busy.status).toBe(409);
    expect(busy.body.error?.message).toMatch(/outstanding/);

    const t0 = Date.now();
    expect(await call("GET", `${deliveryPath(iid, deliveryId)}?wait=300`, token)).toEqual({
      status: 200,
      body: { state: "outstanding" },
    });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);

    const list = await api("GET", `/v1/workspaces/${name}/picks`);
    expect(list.status).toBe(200);
    expect(list.body.items).toEqual([
      expect.objectContaining({ iid, deliveryId, pick: "propose", args: { title: "a change" } }),
    ]);
    // The ledger is in the cluster, owned by the Sandbox.
    const sbx = await K8s(SandboxModel).InNamespace(ns.name).Get(name);
    const cm = await K8s(kind.ConfigMap).InNamespace(ns.name).Get(ledgerConfigMapName(name));
    expect(cm.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: "Sandbox", name, uid: sbx.metadata!.uid }),
    ]);
    expect(parseLedger(cm.data?.[LEDGER_KEY]).picks).toEqual([expect.objectContaining({ deliveryId })]);

    // A poll held while the Machine answers gets the answer at once.
    const held = call("GET", `${deliveryPath(iid, deliveryId)}?wait=20000`, token);
    const answered = await api("POST", `/v1/workspaces/${name}/picks/${deliveryId}/answer`, { answer: "approved" });
    expect(answered.status).toBe(200);
    expect((await held).body).toEqual({ state: "answered", answer: "approved" });
    expect((await call("GET", `${deliveryPath(iid, deliveryId)}?wait=300`, token)).body).toEqual({
      state: "answered",
      answer: "approved",
    });
    // A second answer: 409; an unknown delivery: 404 to both sides; nothing outstanding.
    expect((await api("POST", `/v1/workspaces/${name}/picks/${deliveryId}/answer`, { answer: "x" })).status).toBe(409);
    expect((await api("POST", `/v1/workspaces/${name}/picks/d-nope/answer`, { answer: "x" })).status).toBe(404);
    expect((await call("GET", deliveryPath(iid, "d-nope"), token)).status).toBe(404);
    expect((await api("GET", `/v1/workspaces/${name}/picks`)).body.items).toEqual([]);
  });

  it("refuses forged picks with their reason, and never lists them", async () => {
    const forged: Array<[string, string, PickBody, number, string]> = [
      ["a name not on the Menu", iid, pick({ pick: "deploy", callId: "f1" }), 403, "not_on_menu"],
      ["a name on the Menu not allowed now", iid, pick({ pick: "reject", callId: "f2" }), 403, "not_allowed"],
      ["another submission", iid, pick({ submissionId: "turn-forged", callId: "f3" }), 409, "not_running"],
      ["an unknown conversation", `${name}.forged`, pick({ callId: "f4" }), 404, "unknown_conversation"],
    ];
    for (const [what, to, body, status, code] of forged) {
      const r = await call("POST", picksPath(to), token, body);
      expect([what, r.status, r.body.error?.code]).toEqual([what, status, code]);
    }
    expect((await api("GET", `/v1/workspaces/${name}/picks`)).body.items).toEqual([]);
    const cm = await K8s(kind.ConfigMap).InNamespace(ns.name).Get(ledgerConfigMapName(name));
    expect(parseLedger(cm.data?.[LEDGER_KEY]).picks.map((p) => p.callId)).toEqual(["call-1"]);
  });

  it("refuses the Harness's routes without this workspace's Sandbox token, naming nothing secret", async () => {
    for (const wrong of [orch.token, sandboxToken(signingKey(), "ws-other"), "nope"]) {
      const r = await call("POST", picksPath(iid), wrong, pick({ callId: "call-x" }));
      expect(r.status).toBe(401);
      expect(JSON.stringify(r.body)).not.toContain(token);
      expect((await call("GET", deliveryPath(iid, "d-1"), wrong)).status).toBe(401);
    }
    // The Machine's routes refuse the Sandbox token.
    expect((await call("GET", `/v1/workspaces/${name}/picks`, token)).status).toBe(401);
    expect((await api("GET", `/v1/workspaces/${name}/picks`)).body.items).toEqual([]);
  });

  it("holds a flooding, oversized neighbour to its own 429s and 413s while this workspace's pick is taken and answered", async () => {
    const noisy = await workspace("feature/noisy");
    const noisyIid = `${noisy.name}.coder-1`;
    await submit(noisy.name, noisyIid, "n-1");
    const big = await call(
      "POST",
      picksPath(noisyIid),
      noisy.token,
      pick({ submissionId: "n-1", args: "x".repeat(70_000) }),
    );
    expect([big.status, big.body.error?.message]).toEqual([
      413,
      expect.stringMatching(/^args: \d+ bytes as JSON, past the bound/),
    ]);
    const flood = Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        call("POST", picksPath(noisyIid), noisy.token, pick({ submissionId: "n-1", callId: `n${i}`, pick: "deploy" })),
      ),
    );
    // Meanwhile this workspace's next turn and its pick go through.
    await turnEnded(name, iid);
    await submit(name, iid, "turn-3");
    const taken = await call("POST", picksPath(iid), token, pick({ submissionId: "turn-3", callId: "call-3" }));
    expect(taken.status).toBe(202);
    const answer = await api("POST", `/v1/workspaces/${name}/picks/${taken.body.deliveryId}/answer`, { answer: "ok" });
    expect(answer.status).toBe(200);
    const flooded = await flood;
    expect(flooded.filter((r) => r.status === 429).length).toBeGreaterThan(0);
    expect(flooded.every((r) => r.status === 429 || r.status === 403)).toBe(true);
  });

  it("answers a pick outstanding across an Orchestrator SIGKILL through the restarted one", async () => {
    await turnEnded(name, iid);
    await submit(name, iid, "turn-2");
    const taken = await call("POST", picksPath(iid), token, pick({ submissionId: "turn-2", callId: "call-9" }));
    expect(taken.status).toBe(202);
    const deliveryId = taken.body.deliveryId as string;
    await orch.stop("SIGKILL");
    orch = await start();
    // The Harness's poll on the restored one: still outstanding, the same pick listed to the Machine.
    expect((await call("GET", `${deliveryPath(iid, deliveryId)}?wait=300`, token)).body).toEqual({
      state: "outstanding",
    });
    const list = await waitFor(
      "the outstanding pick listed by the restored Orchestrator",
      () => api("GET", `/v1/workspaces/${name}/picks`),
      (r) => r.status === 200,
      30_000,
    );
    expect(list.body.items).toEqual([expect.objectContaining({ iid, deliveryId, pick: "propose" })]);
    // Re-sent after the unknown outcome: the same delivery.
    expect(
      (await call("POST", picksPath(iid), token, pick({ submissionId: "turn-2", callId: "call-9" }))).body,
    ).toEqual({ outstanding: true, deliveryId });
    const held = call("GET", `${deliveryPath(iid, deliveryId)}?wait=20000`, token);
    expect((await api("POST", `/v1/workspaces/${name}/picks/${deliveryId}/answer`, { answer: "go on" })).status).toBe(
      200,
    );
    expect((await held).body).toEqual({ state: "answered", answer: "go on" });
    // After the turn's abort, no pick of it is taken.
    expect((await api("POST", `/v1/workspaces/${name}/turns/${iid}/abort`)).status).toBe(200);
    const late = await call("POST", picksPath(iid), token, pick({ submissionId: "turn-2", callId: "call-10" }));
    expect([late.status, late.body.error?.code]).toEqual([409, "turn_over"]);
  });
});
