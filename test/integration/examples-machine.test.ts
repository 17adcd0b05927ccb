// The example Machine (examples/propose-machine.ts) end to end against a local Orchestrator in
// local mode, its Agent's model the scripted provider (as agent-turns.test.ts sets it up): the
// machine creates a workspace, the Agent runs bash and picks `propose`, the test approves through
// the machine's APPROVE event, the Agent finishes, and the machine destroys the workspace. And the
// client's errors and a workspace's event stream, as clients-python.test.ts checks the Python one's.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createActor, toPromise } from "xstate";
import { proposeMachine } from "../../examples/propose-machine";
import { OrchestratorClient, OrchestratorError } from "../../clients/typescript/src";
import { useProposeStage } from "./support/agent-fixtures";
import { useNamespace } from "./support/cluster";

const ns = useNamespace("example");
const tmp = mkdtempSync(join(tmpdir(), "jr2-example-"));
const KEY = "sk-scripted-real-key-7c2d";
const stage = useProposeStage(tmp, () => ns.name, KEY);

describe("the example Machine", () => {
  it("creates a workspace, holds the Agent's propose for approval, answers, lets it finish, destroys it", async () => {
    const client = new OrchestratorClient({ url: stage.orch().url, token: stage.orch().token });
    const lines: string[] = [];
    const actor = createActor(proposeMachine, {
      input: {
        client,
        workspace: { image: "ghcr.io/example/harness:1", branch: "example/propose" },
        message: "write change.txt, then propose it",
        autoApprove: false,
        readyTimeoutMs: 60_000,
        log: (line) => lines.push(line),
      },
    });
    const states: string[] = [];
    actor.subscribe((s) => {
      states.push(String(s.value));
      if (s.value === "awaitingApproval") actor.send({ type: "APPROVE", answer: "approved by a human: go on" });
    });
    actor.start();
    const output = await toPromise(actor);

    expect(output.error).toBeUndefined();
    expect(actor.getSnapshot().value).toBe("done");
    expect(states).toEqual(
      expect.arrayContaining([
        "creating",
        "provisioning",
        "turn",
        "awaitingApproval",
        "answering",
        "continuing",
        "destroying",
        "done",
      ]),
    );
    expect(output.pick).toMatchObject({ pick: "propose", args: { summary: "wrote change.txt" } });
    expect(output.answer).toBe("approved by a human: go on");
    expect(output).toMatchObject({ outcome: "completed", message: "done: the change is approved" });
    expect(lines.some((l) => l.includes("the Agent proposes"))).toBe(true);

    // The workspace is gone: the Orchestrator answers 404 or destroyed.
    const ws = output.workspace!;
    const view = await client.workspace(ws).catch((err: unknown) => err);
    if (view instanceof OrchestratorError) expect(view.status).toBe(404);
    else expect(view).toMatchObject({ state: "destroyed" });
    // The pick's answer is what the model read as the propose tool's result.
    expect(stage.model().requests.length).toBeGreaterThanOrEqual(3);
    expect(JSON.stringify(stage.model().requests.at(-1))).toContain("approved by a human: go on");
  }, 120_000);

  it("the client's errors carry the API's code and message", async () => {
    const client = new OrchestratorClient({ url: stage.orch().url, token: stage.orch().token });
    const err = await client.workspace("ws-nosuchthing").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OrchestratorError);
    expect(err).toMatchObject({ status: 404, code: "not_found" });
    const bad = await new OrchestratorClient({ url: stage.orch().url, token: "wrong" })
      .picks("ws-nosuchthing")
      .catch((e: unknown) => e);
    expect(bad).toMatchObject({ status: 401 });
  });

  it("the client streams a workspace's events from its snapshot to its end", async () => {
    const client = new OrchestratorClient({ url: stage.orch().url, token: stage.orch().token });
    const { name } = await client.createWorkspace({ image: "ghcr.io/example/harness:1", branch: "example/events" });
    expect((await client.listWorkspaces()).items.map((w) => w.name)).toContain(name);
    const seen: string[] = [];
    let deleted = false;
    for await (const item of client.workspaceEvents(name)) {
      const state = item.type === "snapshot" ? item.view.state : item.type === "transition" ? item.to : undefined;
      seen.push(item.type === "snapshot" || item.type === "transition" ? `${item.type}:${state}` : item.type);
      if (state === "ready" && !deleted) {
        deleted = true;
        await client.deleteWorkspace(name);
      }
    }
    // The server ends the stream after the final state; the loop ends with it.
    expect(seen[0]).toMatch(/^snapshot:/);
    expect(seen.some((e) => e === "transition:ready" || e === "snapshot:ready")).toBe(true);
    expect(seen.indexOf("transition:destroying")).toBeGreaterThan(0);
    expect(seen.at(-1)).toBe("transition:destroyed");
  }, 120_000);
});
