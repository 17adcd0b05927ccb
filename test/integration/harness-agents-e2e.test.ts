// Agent turns end to end with processes on loopback (decision 0025): a real Harness process hosts
// the Agent on pi; its model is the scripted provider behind a real Custodian process, which swaps
// the Harness's Stand-in for the key; its picks go through the Custodian to a recording Orchestrator
// endpoint that holds them outstanding for more than one poll. A full turn (bash in /work, a pick,
// the final message), a second turn that continues the conversation, the one-turn-at-a-time rule,
// an abort, and a Harness restart mid-turn with the conversation kept. Both run as their images run
// them: the bundles `npm run build` writes, with the libraries they load late in files beside them
// (scripts/companion-bundle.ts, decision 0044), so pi is loaded from its own file with the first turn.
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Admission, StreamEvent, StreamPage } from "../../api/agent-protocol";
import { HARNESS_ENV } from "../../api/env";
import { startScriptedModel, type ScriptedModel } from "../../dev/scripted-model";
import { bundleCompanion } from "../../scripts/companion-bundle";
import { custodianEnv, newStandIn, secretValue, writeLayout, type Layout } from "../support/custodian-fixtures";
import { eventually } from "../support/eventually";

jest.setTimeout(120_000);

const ROOT = join(__dirname, "..", "..");
const KEY = secretValue("model-key");
const TOKEN = secretValue("sandbox-token");
const BEARER = secretValue("harness-bearer");
const STAND_IN = newStandIn();
const tmp = mkdtempSync(join(tmpdir(), "jr2-agents-"));
const bundles = join(tmp, "app");
const work = join(tmp, "work");
const conversations = join(tmp, "conversations");
mkdirSync(work);

/** Lines of a child's stdout until `pattern` matches; the first group as a number. */
function portFrom(child: ChildProcess, pattern: RegExp): Promise<number> {
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (b: Buffer) => {
      out += b.toString();
      const m = pattern.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once("exit", (code) => reject(new Error(`exited (${code}) before it listened: ${out.slice(-500)}`)));
  });
}

// The Orchestrator's pick routes, recording: a pick is outstanding for two polls, then answered;
// once it is answered, the conversation's Allowed picks are none (as a Gate's answer would make them).
type Seen = { method: string; path: string; authorization?: string; body: string };
const seen: Seen[] = [];
let polls = 0;
const orchestrator = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c: Buffer) => (body += c.toString()));
  req.on("end", () => {
    const path = (req.url ?? "").split("?")[0]!;
    seen.push({ method: req.method!, path, authorization: req.headers.authorization, body });
    res.setHeader("content-type", "application/json");
    if (req.method === "POST" && /\/picks$/.test(path))
      return res.end(JSON.stringify({ outstanding: true, deliveryId: "d1" }));
    if (req.method === "GET" && /\/deliveries\/d1$/.test(path)) {
      polls++;
      // A hold that ends outstanding, twice (a short one: the test's own clock), then the answer.
      if (polls <= 2) return setTimeout(() => res.end(JSON.stringify({ state: "outstanding" })), 200);
      return res.end(JSON.stringify({ state: "answered", answer: "approved: go on" }));
    }
    if (req.method === "GET" && /\/agents\/c1\/allowed$/.test(path))
      return res.end(JSON.stringify({ allowed: polls > 2 ? [] : ["propose"] }));
    res.statusCode = 404;
    res.end(JSON.stringify({ error: { code: "not_found", message: "no such route" } }));
  });
});

let model: ScriptedModel;
let layout: Layout;
let custodian: ChildProcess;
let custodianUrl: string;
let harness: ChildProcess;
let harnessUrl: string;

async function startHarness() {
  harness = spawn(process.execPath, [join(bundles, "harness.js")], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      [HARNESS_ENV.port]: "0",
      [HARNESS_ENV.host]: "127.0.0.1",
      [HARNESS_ENV.workRoot]: work,
      [HARNESS_ENV.reposRoot]: join(tmp, "repos"),
      [HARNESS_ENV.conversationsDir]: conversations,
      [HARNESS_ENV.tokenSha256]: createHash("sha256").update(BEARER).digest("hex"),
      [HARNESS_ENV.modelProvider]: "scripted",
      [HARNESS_ENV.modelId]: "scripted",
      JR2_CUSTODIAN_URL: custodianUrl,
      // What the pod gives the Harness: the Stand-in, never the key.
      OPENAI_API_KEY: STAND_IN,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  harnessUrl = `http://127.0.0.1:${await portFrom(harness, /"message":"listening","port":(\d+)/)}`;
}

async function call<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(harnessUrl + path, {
    method,
    headers: { authorization: `Bearer ${BEARER}`, "content-type": "application/json" },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as T };
}

/** Reads the stream from `offset` until this submission's end. */
async function untilEnd(a: Admission, conversation = "c1"): Promise<StreamEvent[]> {
  const events: StreamEvent[] = [];
  let offset = a.offset;
  for (const deadline = Date.now() + 90_000; ; ) {
    if (Date.now() > deadline)
      throw new Error(`no end of turn ${a.submissionId} within 90 s; events: ${JSON.stringify(events).slice(-2000)}`);
    const page = (await call<StreamPage>("GET", `/agents/coder/${conversation}/stream?offset=${offset}&wait=5000`))
      .body;
    events.push(...page.events);
    offset = page.next;
    if (page.events.some((e) => e.kind === "end" && e.submissionId === a.submissionId)) return events;
  }
}

const PROPOSE = {
  name: "propose",
  description: "Propose the change for a human's approval.",
  parameters: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] },
};

beforeAll(async () => {
  await bundleCompanion("harness", bundles);
  await bundleCompanion("custodian", bundles);
  await new Promise<void>((r) => orchestrator.listen(0, "127.0.0.1", r));
  const orchestratorUrl = `http://127.0.0.1:${(orchestrator.address() as AddressInfo).port}`;
  model = await startScriptedModel({
    apiKey: KEY,
    script: [
      { toolCalls: [{ name: "bash", arguments: { command: "echo hi > f.txt && cat f.txt" } }] },
      { toolCalls: [{ name: "propose", arguments: { summary: "wrote f.txt" } }] },
      { text: "done: f.txt holds hi" },
      { text: "second turn, same conversation" },
      { text: "too slow to finish: aborted", delayMs: 30_000 },
      { text: "too slow to finish: the Harness dies", delayMs: 30_000 },
      { text: "after the restart" },
    ],
  });
  layout = writeLayout(
    {
      version: 1,
      orchestrator: { url: orchestratorUrl },
      providers: [{ name: "scripted", url: model.url }],
      held: [{ value: "model-key", standIn: STAND_IN, origins: [model.url], env: "OPENAI_API_KEY" }],
    },
    { JR2_SANDBOX_TOKEN: TOKEN, "model-key": KEY },
  );
  custodian = spawn(process.execPath, [join(bundles, "custodian.js")], {
    cwd: ROOT,
    env: custodianEnv(layout),
    stdio: ["ignore", "pipe", "inherit"],
  });
  custodianUrl = `http://127.0.0.1:${await portFrom(custodian, /"message":"listening","port":(\d+)/)}`;
  await startHarness();
});

afterAll(async () => {
  for (const child of [harness, custodian]) {
    if (child && child.exitCode === null) {
      child.kill("SIGKILL");
      await once(child, "exit");
    }
  }
  await model?.stop();
  orchestrator.closeAllConnections();
  orchestrator.close();
  rmSync(tmp, { recursive: true, force: true });
  rmSync(layout.dir, { recursive: true, force: true });
});

describe("an Agent's turns on the Harness", () => {
  let first: Admission;

  it("runs a full turn: bash in /work, a pick answered after more than one poll, the final message", async () => {
    const admitted = await call<Admission>("POST", "/agents/coder/c1", {
      message: "write f.txt, then propose it",
      menu: [PROPOSE],
      allowed: ["propose"],
      submissionId: "s1",
    });
    expect(admitted.status).toBe(202);
    first = admitted.body;
    expect(first).toEqual({ streamUrl: "/agents/coder/c1/stream", offset: 0, submissionId: "s1" });
    const events = await untilEnd(first);

    expect(readFileSync(join(work, "f.txt"), "utf8")).toBe("hi\n");
    const results = events.filter((e) => e.kind === "toolResult");
    expect(results[0]).toMatchObject({ tool: "bash", isError: false, text: expect.stringContaining("hi") });
    expect(events.some((e) => e.kind === "pick" && e.pick === "propose" && e.deliveryId === "d1")).toBe(true);
    expect(results[1]).toMatchObject({ tool: "propose", isError: false, text: "approved: go on" });
    expect(events.at(-1)).toMatchObject({ kind: "end", outcome: "completed", message: "done: f.txt holds hi" });

    // The pick went through the Custodian with the Sandbox token, and was polled more than once.
    const pick = seen.find((s) => s.method === "POST");
    expect(pick).toMatchObject({ path: "/v1/sandbox/agents/c1/picks", authorization: `Bearer ${TOKEN}` });
    expect(JSON.parse(pick!.body)).toMatchObject({
      pick: "propose",
      args: { summary: "wrote f.txt" },
      submissionId: "s1",
    });
    expect(seen.filter((s) => s.method === "GET" && s.path.includes("/deliveries/")).length).toBe(3);
    // The Allowed picks were read at each step boundary (after bash, after the pick), with the token.
    const reads = seen.filter((s) => s.path === "/v1/sandbox/agents/c1/allowed");
    expect(reads).toHaveLength(2);
    expect(reads.every((r) => r.authorization === `Bearer ${TOKEN}`)).toBe(true);
    // The first model call had the turn's Turn part; the read after the answer found the list
    // changed, so the next call had it restated and the stream says so.
    expect(JSON.stringify(model.requests[0]!.body)).toContain("The picks allowed in this turn: `propose`.");
    expect(JSON.stringify(model.requests[1]!.body)).not.toContain("changed while you worked");
    expect(JSON.stringify(model.requests[2]!.body)).toContain(
      "The allowed picks changed while you worked. No pick is allowed in this turn now",
    );
    expect(events.filter((e) => e.kind === "allowed")).toEqual([expect.objectContaining({ allowed: [] })]);
    // The model saw the key; the Harness held only the Stand-in.
    expect(model.requests.every((r) => r.authorization === `Bearer ${KEY}`)).toBe(true);
    // The tool result went back to the model.
    expect(JSON.stringify(model.requests[1]!.body)).toContain("hi");
  });

  it("answers the same admission for the same submission, and reads again from an old offset", async () => {
    const again = await call<Admission>("POST", "/agents/coder/c1", { message: "again", submissionId: "s1" });
    expect(again.body).toEqual(first);
    const replay = await call<StreamPage>("GET", `/agents/coder/c1/stream?offset=${first.offset}&wait=0`);
    expect(replay.body.events[0]).toMatchObject({ kind: "turn", submissionId: "s1" });
    expect(replay.body.idle).toBe(true);
  });

  it("continues the conversation on a second turn", async () => {
    const second = await call<Admission>("POST", "/agents/coder/c1", { message: "and now?", submissionId: "s2" });
    const events = await untilEnd(second.body);
    expect(events.at(-1)).toMatchObject({ outcome: "completed", message: "second turn, same conversation" });
    const sent = JSON.stringify(model.requests.at(-1)!.body);
    expect(sent).toContain("write f.txt, then propose it");
    expect(sent).toContain("and now?");
  });

  it("runs one turn at a time in the Workspace (409), and ends a turn only when aborted", async () => {
    const slow = await call<Admission>("POST", "/agents/coder/c1", { message: "take your time", submissionId: "s3" });
    expect(slow.status).toBe(202);
    const other = await call<{ error: { code: string; message: string } }>("POST", "/agents/reviewer/c2", {
      message: "me too",
    });
    expect(other.status).toBe(409);
    expect(other.body.error.message).toMatch(/one Agent runs at a time/);
    expect((await call<{ aborted: boolean }>("POST", "/agents/coder/c1/abort")).body).toEqual({ aborted: true });
    const events = await untilEnd(slow.body);
    expect(events.at(-1)).toMatchObject({ kind: "end", submissionId: "s3", outcome: "aborted" });
  });

  it("keeps the conversation across a Harness restart; the turn it cut ends failed, once", async () => {
    const cut = await call<Admission>("POST", "/agents/coder/c1", { message: "restart me", submissionId: "s4" });
    // The model's answer to it (script step 5) waits 30 s: once its request is at the model, the
    // turn is running, and the Harness dies then.
    await eventually("the cut turn's request at the model", () =>
      model.requests.some((r) => r.step === 5) ? true : undefined,
    );
    harness.kill("SIGKILL");
    await once(harness, "exit");
    await startHarness();
    const events = await untilEnd(cut.body);
    expect(events.at(-1)).toMatchObject({ kind: "end", submissionId: "s4", outcome: "failed" });
    const next = await call<Admission>("POST", "/agents/coder/c1", { message: "still there?", submissionId: "s5" });
    const after = await untilEnd(next.body);
    expect(after.at(-1)).toMatchObject({ outcome: "completed", message: "after the restart" });
    expect(JSON.stringify(model.requests.at(-1)!.body)).toContain("write f.txt, then propose it");
    const ends = readFileSync(join(conversations, "coder", "c1.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as StreamEvent)
      .filter((e) => e.kind === "end" && e.submissionId === "s4");
    expect(ends).toHaveLength(1);
    expect(existsSync(join(conversations, "coder", "c1.history.json"))).toBe(true);
  });
});
