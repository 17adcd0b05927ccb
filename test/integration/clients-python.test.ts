// The Python client (clients/python) against a local Orchestrator in local mode, its Agent's model
// the scripted provider, as examples-machine.test.ts sets it up for the TypeScript example: the
// Python example Machine (a python3 process) creates a workspace, the Agent runs bash and picks
// `propose`, the test approves through the machine's stdin, the Agent finishes, the machine publishes
// the approved change to a stand-in forge (a push and a pull request, Effects of the workspace's
// Effector, decision 0070) and destroys the workspace; and the client (a context manager, its token
// from JR2_API_TOKEN) raises each error as its code's class, carrying the API's code, and a
// workspace's events stream from its snapshot to its end (docs/decisions/0061-clients-beyond-typescript.md,
// decision 0077).
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OrchestratorClient, OrchestratorError } from "../../clients/typescript/src";
import { python3 } from "../support/python3";
import { FORGE, PR_BODY, useProposeStage } from "./support/agent-fixtures";
import { useNamespace } from "./support/cluster";

const ROOT = join(__dirname, "..", "..");
const PYTHON_CLIENT = join(ROOT, "clients", "python");
const ns = useNamespace("pyclient");
const tmp = mkdtempSync(join(tmpdir(), "jr2-pyclient-"));
const KEY = "sk-scripted-real-key-5e1a";
let python: string;
const BRANCH = "example/propose";
// First: without python3 the file fails in beforeAll, naming what to install.
const stage = useProposeStage(
  tmp,
  () => ns.name,
  KEY,
  () => (python = python3()),
  { forge: { branch: BRANCH } },
);

const pythonEnv = () => ({
  ...process.env,
  PYTHONPATH: PYTHON_CLIENT,
  PYTHONDONTWRITEBYTECODE: "1",
  PYTHONUNBUFFERED: "1",
  JR2_API_TOKEN: stage.orch().token,
});

type Ran = { code: number | null; lines: string[]; stderr: string };

/** Runs python3 with `args`, told each line it prints (and its stdin, to answer with). */
function runPython(args: string[], onLine: (line: string, stdin: NodeJS.WritableStream) => void = () => {}) {
  return new Promise<Ran>((resolve, reject) => {
    const child = spawn(python, args, { env: pythonEnv(), stdio: ["pipe", "pipe", "pipe"] });
    const lines: string[] = [];
    let partial = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      partial += chunk;
      const parts = partial.split("\n");
      partial = parts.pop()!;
      for (const line of parts) {
        lines.push(line);
        onLine(line, child.stdin);
      }
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), 110_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      if (partial) lines.push(partial);
      resolve({ code, lines, stderr });
    });
  });
}

/** Runs the Python example Machine; approves its pick through stdin when it prints it. */
const runExample = (answer: string) =>
  runPython(
    [
      join(PYTHON_CLIENT, "examples", "propose_machine.py"),
      "--url",
      stage.orch().url,
      "--repo",
      stage.forge().url(FORGE.repo),
      "--forge-pulls-url",
      `${stage.forge().origin}${FORGE.pullsPath}`,
      "--forge-secret",
      `${FORGE.apiSecret.secret}/${FORGE.apiSecret.key}`,
      "--image",
      "ghcr.io/example/harness:1",
      "--message",
      "write change.txt and PR.md, commit them, then propose it",
      "--ask",
      "--ready-timeout",
      "60",
    ],
    (line, stdin) => {
      if (line.includes("the Agent proposes")) stdin.write(`approve ${answer}\n`);
    },
  );

describe("the Python client", () => {
  it("runs the example Machine: creates a workspace, holds the propose for approval, answers, lets it finish, publishes, destroys it", async () => {
    const { code, lines, stderr } = await runExample("approved by a human: go on");
    const states = lines.filter((l) => l.startsWith("-> ")).map((l) => l.slice(3));
    const output = JSON.parse(lines.slice(lines.indexOf("{")).join("\n")) as Record<string, unknown>;
    if (code !== 0) throw new Error(`the Python example exited ${code}:\n${lines.join("\n")}\n${stderr}`);

    expect(output.error).toBeUndefined();
    expect(states).toEqual([
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
    ]);
    expect(output.pick).toMatchObject({ pick: "propose", args: { summary: "wrote change.txt" } });
    expect(output.answer).toBe("approved by a human: go on");
    expect(output).toMatchObject({ outcome: "completed", message: "done: the change is approved" });
    expect(lines.some((l) => l.includes("the Agent proposes"))).toBe(true);

    // Published: the forge's branch holds the Agent's commit (its change.txt), pushed once; one pull
    // request, its Authorization the API secret, its body the Agent's PR.md.
    const forge = stage.forge();
    expect(output.pushed).toMatchObject({ kind: "push", ref: `refs/heads/${BRANCH}` });
    const commit = (output.pushed as { commit: string }).commit;
    expect(forge.ref(FORGE.repo, `refs/heads/${BRANCH}`)).toBe(commit);
    expect(
      execFileSync("git", ["--git-dir", join(forge.root, FORGE.repo), "show", `${commit}:change.txt`], {
        encoding: "utf8",
      }),
    ).toBe("hello\n");
    expect(forge.pushes(FORGE.repo)).toHaveLength(1);
    expect(output.pull_request).toMatchObject({ kind: "http", status: 201 });
    expect(forge.pulls()).toEqual([
      expect.objectContaining({
        method: "POST",
        path: FORGE.pullsPath,
        authorization: `Bearer ${FORGE.apiToken}`,
        body: PR_BODY,
      }),
    ]);
    expect(lines.join("\n")).not.toContain(FORGE.apiToken);

    // The workspace is gone: the Orchestrator answers 404 or destroyed.
    const client = new OrchestratorClient({ url: stage.orch().url, token: stage.orch().token });
    const view = await client.workspace(output.workspace as string).catch((err: unknown) => err);
    if (view instanceof OrchestratorError) expect(view.status).toBe(404);
    else expect(view).toMatchObject({ state: "destroyed" });
    // The pick's answer is what the model read as the propose tool's result.
    expect(stage.model().requests.length).toBeGreaterThanOrEqual(3);
    expect(JSON.stringify(stage.model().requests.at(-1))).toContain("approved by a human: go on");
  }, 120_000);

  it("raises the API's errors as their codes' classes, and streams a workspace's events to their end", async () => {
    const script = `
import json, sys
from jr2_orchestrator import Jr2Error, OrchestratorClient

url = sys.argv[1]
# The token from the environment (JR2_API_TOKEN); the connections closed at the block's end.
with OrchestratorClient(url) as client:
  out = {}

  def error(call):
      try:
          call()
      except Jr2Error as err:
          return {"class": type(err).__name__, "status": err.status, "code": err.code, "message": err.message}
      return None

  out["missing"] = error(lambda: client.workspace("ws-nosuchthing"))
  with OrchestratorClient(url, "wrong") as stranger:
      out["unauthorized"] = error(lambda: stranger.picks("ws-nosuchthing"))
  out["invalid"] = error(lambda: client.create_workspace({"image": "ghcr.io/example/harness:1", "branch": "-bad"}))
  doc = client.openapi()
  out["openapi"] = doc["openapi"]
  out["sandbox_paths"] = [p for p in doc["paths"] if "/sandbox/" in p]
  out["healthy"] = client.healthy()

  name = client.create_workspace({"image": "ghcr.io/example/harness:1", "branch": "example/events"})["name"]
  out["listed"] = name in [w["name"] for w in client.list_workspaces()["items"]]
  seen = []
  deleted = False
  deleted_answer = None
  with client.workspace_events(name) as events:
      for item in events:
          if item["type"] == "snapshot":
              seen.append("snapshot:" + item["view"]["state"])
              ready = item["view"]["state"] == "ready"
          elif item["type"] == "transition":
              seen.append("transition:" + item["to"])
              ready = item["to"] == "ready"
          else:
              seen.append(item["type"])
              ready = False
          if ready and not deleted:
              deleted = True
              deleted_answer = client.delete_workspace(name)
  out["events"] = seen
  out["deleted"] = deleted_answer
print(json.dumps(out))
`;
    const run = await runPython(["-c", script, stage.orch().url]);
    if (run.code !== 0) throw new Error(`the Python probe exited ${run.code}:\n${run.lines.join("\n")}\n${run.stderr}`);
    const out = JSON.parse(run.lines.join("\n")) as {
      missing: unknown;
      unauthorized: unknown;
      invalid: { status: number; code: string; message: string };
      openapi: string;
      sandbox_paths: string[];
      healthy: boolean;
      deleted: unknown;
      listed: boolean;
      events: string[];
    };

    expect(out.missing).toEqual({
      class: "NotFoundError",
      status: 404,
      code: "not_found",
      message: 'no workspace "ws-nosuchthing"',
    });
    expect(out.unauthorized).toMatchObject({ class: "UnauthorizedError", status: 401, code: "unauthorized" });
    expect(out.invalid).toMatchObject({ class: "InvalidError", status: 400, code: "invalid" });
    expect(out.invalid.message).toMatch(/branch/);
    expect(out.openapi).toBe("3.1.0");
    // The served document is the public one: no Harness's route (decision 0077).
    expect(out.sandbox_paths).toEqual([]);
    expect(out.healthy).toBe(true);
    expect(out.deleted).toEqual({ name: expect.stringMatching(/^ws-/) });
    expect(out.listed).toBe(true);
    // A snapshot first; the workspace reaches ready, then is destroyed, and the stream ends there.
    expect(out.events[0]).toMatch(/^snapshot:/);
    expect(out.events.some((e) => e === "transition:ready" || e === "snapshot:ready")).toBe(true);
    expect(out.events.at(-1)).toBe("transition:destroyed");
    expect(out.events.indexOf("transition:destroying")).toBeGreaterThan(0);
  }, 120_000);
});
