// The example Machine (examples/propose-machine.ts) end to end against a local Orchestrator in
// local mode, its Agent's model the scripted provider (as agent-turns.test.ts sets it up): the
// machine creates a workspace, the Agent runs bash and picks `propose`, the test approves through
// the machine's APPROVE event, the Agent finishes, the machine publishes the approved change to a
// stand-in forge (a push of the workspace's branch and a pull request, Effects of the workspace's
// Effector, decision 0070) and destroys the workspace. And the client's errors and a workspace's
// event stream, as clients-python.test.ts checks the Python one's.
import { execFileSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createActor, toPromise } from "xstate";
import { proposeMachine } from "../../examples/propose-machine";
import { OrchestratorClient, OrchestratorError } from "../../clients/typescript/src";
import { FORGE, PR_BODY, useProposeStage } from "./support/agent-fixtures";
import { useNamespace } from "./support/cluster";

const ns = useNamespace("example");
const tmp = mkdtempSync(join(tmpdir(), "jr2-example-"));
const KEY = "sk-scripted-real-key-7c2d";
const BRANCH = "example/propose";
const stage = useProposeStage(tmp, () => ns.name, KEY, undefined, { forge: { branch: BRANCH } });

describe("the example Machine", () => {
  it("creates a workspace, holds the Agent's propose for approval, answers, lets it finish, publishes, destroys it", async () => {
    const client = new OrchestratorClient({ url: stage.orch().url, token: stage.orch().token });
    const forge = stage.forge();
    const lines: string[] = [];
    const actor = createActor(proposeMachine, {
      input: {
        client,
        workspace: {
          image: "ghcr.io/example/harness:1",
          branch: BRANCH,
          repos: [{ slot: "app", url: forge.url(FORGE.repo) }],
        },
        message: "write change.txt and PR.md, commit them, then propose it",
        autoApprove: false,
        readyTimeoutMs: 60_000,
        log: (line) => lines.push(line),
        forge: { pullsUrl: `${forge.origin}${FORGE.pullsPath}`, authorization: FORGE.apiSecret },
        effectTimeoutMs: 60_000,
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
        "pushing",
        "openingPullRequest",
        "destroying",
        "done",
      ]),
    );
    expect(output.pick).toMatchObject({ pick: "propose", args: { summary: "wrote change.txt" } });
    expect(output.answer).toBe("approved by a human: go on");
    expect(output).toMatchObject({ outcome: "completed", message: "done: the change is approved" });
    expect(lines.some((l) => l.includes("the Agent proposes"))).toBe(true);

    // Published: the forge's branch holds the Agent's commit (its change.txt), pushed once with the
    // push token; one pull request, its Authorization the API secret, its body the Agent's PR.md.
    expect(output.pushed).toMatchObject({ kind: "push", ref: `refs/heads/${BRANCH}` });
    const commit = (output.pushed as { commit: string }).commit;
    expect(forge.ref(FORGE.repo, `refs/heads/${BRANCH}`)).toBe(commit);
    const gitDir = `${forge.root}/${FORGE.repo}`;
    expect(execFileSync("git", ["--git-dir", gitDir, "show", `${commit}:change.txt`], { encoding: "utf8" })).toBe(
      "hello\n",
    );
    expect(forge.pushes(FORGE.repo)).toHaveLength(1);
    expect(output.pullRequest).toMatchObject({ kind: "http", status: 201 });
    expect(forge.pulls()).toEqual([
      expect.objectContaining({
        method: "POST",
        path: FORGE.pullsPath,
        authorization: `Bearer ${FORGE.apiToken}`,
        body: PR_BODY,
      }),
    ]);
    expect(JSON.stringify(output)).not.toContain(FORGE.apiToken);
    expect(lines.join("\n")).not.toContain(FORGE.token);

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
