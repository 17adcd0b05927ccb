// A Machine's Agent turns end to end on the control plane (decision 0025): the
// Orchestrator in local mode runs each Sandbox's Harness and Custodian here; the Agent's model is
// the scripted provider, reached through the Custodian with a Stand-in; its pick goes through the
// Custodian to the Orchestrator with the Sandbox token; the Machine answers it over the API and
// reads the turn's events as Server-Sent Events. Then the Orchestrator is SIGKILLed mid-turn, with a
// pick outstanding, and the restored one answers it and resumes the stream from its ledger. Last,
// the Machine changes a running turn's Allowed picks, and the Agent is told at its next step.
import { orchestratorApi } from "./support/orchestrator-api";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { getPriority, tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import type { StreamEvent } from "../../api/agent-protocol";
import { ORCHESTRATOR_ENV } from "../../api/env";
import type { WorkspaceView } from "../../api/orchestrator-schemas";
import { type Agent, localReposRoot, startCacheAgents } from "../../dev/local-cache-agent";
import { type LocalOrchestrator, startLocalOrchestrator } from "../../dev/local-orchestrator";
import { startScriptedModel, type ScriptedModel } from "../../dev/scripted-model";
import { OrchestratorClient } from "../../clients/typescript/src";
import { LOCAL_POD_NICE } from "../../orchestrator/local/local-process";
import { scriptedModelPodConfig } from "./support/agent-fixtures";
import { useNamespace, waitFor } from "./support/cluster";

const ns = useNamespace("turns");
const tmp = mkdtempSync(join(tmpdir(), "jr2-turns-"));
const KEY = "sk-scripted-real-key-5b1e";
const SHELL_KEY = "sk-from-the-developers-shell-91c3";
const agents: Agent[] = [];
let orch: LocalOrchestrator;
let model: ScriptedModel;

const PROPOSE = {
  name: "propose",
  description: "Propose the change for a human's approval.",
  parameters: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] },
};

const ABANDON = { name: "abandon", description: "Give the change up." };

/** `port`: the one before a restart, so the Custodians (which reach it by address, as a pod reaches
 * its Service) find the restored Orchestrator where they found the first. */
const start = (port?: number) =>
  startLocalOrchestrator({
    ...(port !== undefined ? { port } : {}),
    kubeconfig: process.env.KUBECONFIG!,
    namespace: ns.name,
    dir: join(tmp, "orchestrator"),
    credentials: [],
    reposRoot: localReposRoot(tmp),
    // A key in the developer's shell, which must not reach the Harness (it holds a Stand-in).
    env: { [ORCHESTRATOR_ENV.podConfigFile]: join(tmp, "pod.yaml"), OPENAI_API_KEY: SHELL_KEY },
  });

const api = orchestratorApi(
  () => orch.url,
  () => orch.token,
);

/** The turn's Server-Sent Events until the stream ends (after the turn's end). */
async function events(ws: string, iid: string, lastEventId?: number): Promise<StreamEvent[]> {
  const res = await fetch(`${orch.url}/v1/workspaces/${ws}/turns/${encodeURIComponent(iid)}/events`, {
    headers: {
      authorization: `Bearer ${orch.token}`,
      ...(lastEventId !== undefined ? { "last-event-id": String(lastEventId) } : {}),
    },
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  return text
    .split("\n\n")
    .map((frame) => frame.split("\n").find((l) => l.startsWith("data: ")))
    .filter((l): l is string => l !== undefined)
    .map((l) => JSON.parse(l.slice(6)) as StreamEvent);
}

type Outstanding = { items: Array<{ iid: string; deliveryId: string; pick: string; args?: unknown }> };
const outstanding = (ws: string) => api<Outstanding>("GET", `/v1/workspaces/${ws}/picks`);

beforeAll(async () => {
  model = await startScriptedModel({
    apiKey: KEY,
    script: [
      { toolCalls: [{ name: "bash", arguments: { command: "echo hi > f.txt && cat f.txt" } }] },
      { toolCalls: [{ name: "propose", arguments: { summary: "wrote f.txt" } }] },
      { text: "done: proposed" },
      { toolCalls: [{ name: "propose", arguments: { summary: "again" } }] },
      { text: "done after the restart" },
      { toolCalls: [{ name: "propose", arguments: { summary: "third" } }] },
      { toolCalls: [{ name: "propose", arguments: { summary: "once more" } }] },
      { text: "done: abandoned" },
    ],
  });
  await scriptedModelPodConfig(tmp, ns.name, model, KEY);
  agents.push(...(await startCacheAgents(tmp)));
  orch = await start();
}, 90_000);

afterAll(async () => {
  await orch?.stop();
  await Promise.all(agents.map((a) => a.stop()));
  await model?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

describe("an Agent's turn, driven by a Machine over the Orchestrator's API", () => {
  let ws: string;
  let iid: string;

  beforeAll(async () => {
    const created = await api<{ name: string }>("POST", "/v1/workspaces", {
      image: "ghcr.io/example/harness:1",
      branch: "feature/turns",
    });
    expect(created.status).toBe(202);
    ws = created.body.name;
    await waitFor(
      "the workspace ready",
      async () => (await api<WorkspaceView>("GET", `/v1/workspaces/${ws}`)).body,
      (v) => v?.state === "ready" || v?.state === "failed",
      60_000,
    );
  }, 90_000);

  it("runs a turn: bash in /work, a pick the Machine answers, the final message, as Server-Sent Events", async () => {
    const submitted = await api<{ iid: string; admission: { offset: number; submissionId: string } }>(
      "POST",
      `/v1/workspaces/${ws}/turns`,
      { agent: "coder", message: "write f.txt, then propose it", menu: [PROPOSE], allowed: ["propose"] },
    );
    expect(submitted.status).toBe(202);
    iid = submitted.body.iid;
    expect(iid.startsWith(`${ws}.`)).toBe(true);

    // The pick reached the Orchestrator through the Custodian (with the Sandbox token: the
    // Harness-facing route refuses anything else).
    const pick = await waitFor(
      "the Agent's pick outstanding",
      () => outstanding(ws),
      (o) => o.body.items.length === 1,
      30_000,
    );
    expect(pick.body.items[0]).toMatchObject({ iid, pick: "propose", args: { summary: "wrote f.txt" } });
    const answered = await api("POST", `/v1/workspaces/${ws}/picks/${pick.body.items[0]!.deliveryId}/answer`, {
      answer: "approved: go on",
    });
    expect(answered.status).toBe(200);

    const seen = await events(ws, iid);
    expect(seen[0]).toMatchObject({ kind: "turn", submissionId: submitted.body.admission.submissionId });
    expect(seen.find((e) => e.kind === "toolResult" && e.tool === "bash")).toMatchObject({
      isError: false,
      text: expect.stringContaining("hi"),
    });
    expect(seen.find((e) => e.kind === "toolResult" && e.tool === "propose")).toMatchObject({
      text: "approved: go on",
    });
    expect(seen.at(-1)).toMatchObject({ kind: "end", outcome: "completed", message: "done: proposed" });
    expect(readFileSync(join(tmp, "orchestrator", "work", ws, "f.txt"), "utf8")).toBe("hi\n");
    // The model received the key; the Harness held only its Stand-in.
    expect(model.requests.length).toBeGreaterThanOrEqual(3);
    expect(model.requests.every((r) => r.authorization === `Bearer ${KEY}`)).toBe(true);
    // The local Harness and Custodian got the pod's env, not the Orchestrator's shell.
    const pids = JSON.parse(readFileSync(join(tmp, "orchestrator", "work", `${ws}.pod`, "local.json"), "utf8"));
    for (const pid of [pids.harness, pids.custodian]) {
      const environ = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
      expect(environ.some((e) => e.includes(SHELL_KEY) || e.includes(KEY))).toBe(false);
    }
    expect(readFileSync(`/proc/${pids.harness}/environ`, "utf8")).toMatch(/(^|\0)OPENAI_API_KEY=\S+/);
    // And at the lowest CPU priority: the control path answers first (local-process.ts).
    for (const pid of [pids.harness, pids.custodian]) expect(getPriority(pid)).toBe(LOCAL_POD_NICE);
    // The admission is kept in the cluster, owned by the Sandbox.
    const ledger = await K8s(kind.ConfigMap).InNamespace(ns.name).Get(`${ws}-turns`);
    expect(ledger.metadata?.ownerReferences?.[0]).toMatchObject({ kind: "Sandbox", name: ws });
    expect(JSON.parse(ledger.data!["turns.json"]!).conversations[iid]).toMatchObject({ agent: "coder" });
  });

  it("survives an Orchestrator SIGKILLed mid-turn: the restored one answers the pick and resumes the stream", async () => {
    const submitted = await api<{ admission: { offset: number } }>("POST", `/v1/workspaces/${ws}/turns`, {
      agent: "coder",
      iid,
      message: "propose again",
      menu: [PROPOSE],
      allowed: ["propose"],
    });
    expect(submitted.status).toBe(202);
    await waitFor(
      "the second pick outstanding",
      () => outstanding(ws),
      (o) => o.body.items.length === 1,
      30_000,
    );
    const port = Number(new URL(orch.url).port);
    await orch.stop("SIGKILL");
    orch = await start(port);
    const pick = await waitFor(
      "the restored Orchestrator's view of the pick",
      () => outstanding(ws),
      (o) => o.body.items.length === 1,
      30_000,
    );
    await api("POST", `/v1/workspaces/${ws}/picks/${pick.body.items[0]!.deliveryId}/answer`, { answer: "approved" });
    // Resumed from just before the second turn: nothing of the first, nothing lost of the second.
    const seen = await events(ws, iid, submitted.body.admission.offset - 1);
    expect(seen[0]).toMatchObject({ kind: "turn", offset: submitted.body.admission.offset });
    expect(seen.filter((e) => e.kind === "end")).toHaveLength(1);
    expect(seen.at(-1)).toMatchObject({ kind: "end", outcome: "completed", message: "done after the restart" });
    expect(existsSync(join(tmp, "orchestrator", "work", ws))).toBe(true);
  });

  it("tells a running turn of Allowed picks the Machine changed, at its next step boundary", async () => {
    const submitted = await api<{ iid: string }>("POST", `/v1/workspaces/${ws}/turns`, {
      agent: "coder",
      message: "propose, or give up",
      menu: [PROPOSE, ABANDON],
      allowed: ["propose"],
    });
    expect(submitted.status).toBe(202);
    const third = submitted.body.iid;
    const pick = await waitFor(
      "the third pick outstanding",
      () => outstanding(ws),
      (o) => o.body.items.length === 1,
      30_000,
    );
    // A Gate's answer: from now on only `abandon`; then the pick's own answer.
    // Through the typed client: the same schema the server reads.
    const client = new OrchestratorClient({ url: orch.url, token: orch.token });
    expect(await client.setAllowed(ws, third, ["abandon", "abandon"])).toEqual({ iid: third, allowed: ["abandon"] });
    await api("POST", `/v1/workspaces/${ws}/picks/${pick.body.items[0]!.deliveryId}/answer`, { answer: "noted" });

    const seen = await events(ws, third);
    expect(seen.filter((e) => e.kind === "allowed")).toEqual([expect.objectContaining({ allowed: ["abandon"] })]);
    // The model's next call had the Turn part restated; `propose` is now refused by the Harness
    // and never reaches the Orchestrator.
    const restated = model.requests.find((r) => r.step === 6);
    expect(JSON.stringify(restated?.body)).toContain(
      "The allowed picks changed while you worked. The picks allowed in this turn: `abandon`.",
    );
    expect(seen.filter((e) => e.kind === "toolResult" && e.tool === "propose").at(-1)).toMatchObject({
      isError: true,
      text: expect.stringContaining("not allowed"),
    });
    expect((await outstanding(ws)).body.items).toEqual([]);
    expect(seen.at(-1)).toMatchObject({ kind: "end", outcome: "completed", message: "done: abandoned" });
    // Refusals name what is wrong.
    const bad = await api<{ error: { message: string } }>(
      "PUT",
      `/v1/workspaces/${ws}/turns/${encodeURIComponent(third)}/allowed`,
      { allowed: ["no spaces"] },
    );
    expect(bad.status).toBe(400);
    expect(bad.body.error.message).toContain("allowed.0");
    expect((await api("PUT", `/v1/workspaces/${ws}/turns/${ws}.nope/allowed`, { allowed: [] })).status).toBe(404);
  });
});
