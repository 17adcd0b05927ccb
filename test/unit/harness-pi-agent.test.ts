// pi (decision 0024) runs an Agent's turn loop against the scripted model over real HTTP: the model
// calls bash, the tool runs for real in a temp dir, its result goes back to the model, the model
// answers; the key arrives as a bearer token. Then the working tools alone (harness/agents/tools.ts):
// confined to their root, edit's one-occurrence rule, bash's timeout, abort and output cut.
import { readdirSync, readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { mkdir, mkdtemp, readFile, realpath, rm, symlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { AgentEvent, AgentTool } from "@earendil-works/pi-agent-core";
import type { AssistantMessage, ToolResultMessage } from "@earendil-works/pi-ai";
import { startScriptedModel, type ScriptedModel, type ScriptStep } from "../../dev/scripted-model";
import { agentModel, modelFor, piLib } from "../../harness/agents/model";
import {
  bashTool,
  editTool,
  OutsideRoot,
  readTool,
  resolveInRoot,
  workingTools,
  writeTool,
} from "../../harness/agents/tools";
import { eventually } from "../support/eventually";

/** The live (not zombie) processes of process group `pgid`, from /proc. */
function live(pgid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces, so read after its closing parenthesis.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(pgrp) === pgid && state !== "Z") out.push(Number(entry));
  }
  return out;
}
const groupGone = (pgid: number) =>
  eventually(`process group ${pgid} gone`, () => (live(pgid).length === 0 ? true : undefined));

let tmp: string;
let root: string;
let outside: string;
const running: ScriptedModel[] = [];

beforeEach(async () => {
  tmp = await realpath(await mkdtemp(path.join(os.tmpdir(), "pi-agent-")));
  root = path.join(tmp, "work");
  outside = path.join(tmp, "outside");
  await mkdir(root);
  await mkdir(outside);
  await writeFile(path.join(outside, "secret.txt"), "not yours\n");
});
afterEach(async () => {
  await Promise.all(running.splice(0).map((m) => m.stop()));
  await rm(tmp, { recursive: true, force: true });
});

async function scripted(script: ScriptStep[], apiKey?: string): Promise<ScriptedModel> {
  const model = await startScriptedModel({ script, apiKey });
  running.push(model);
  return model;
}

/** An Agent on the scripted model with the given tools, and every event it emits. */
async function agentOn(model: ScriptedModel, tools: AgentTool[], apiKey = "sk-test") {
  const { Agent } = await piLib();
  const { model: piModel, streamFn, getApiKey } = await agentModel({ baseUrl: model.baseUrl, apiKey, id: "scripted" });
  const events: AgentEvent[] = [];
  const agent = new Agent({
    initialState: { systemPrompt: "You work in a git checkout.", model: piModel, tools },
    streamFn,
    getApiKey,
  });
  agent.subscribe((e) => {
    events.push(e);
  });
  return { agent, events };
}

/** The event types in order, a run of message_update (streamed deltas) shown once. */
const shape = (events: AgentEvent[]) =>
  events
    .map((e) =>
      e.type === "message_start" || e.type === "message_end"
        ? `${e.type}:${(e.message as { role: string }).role}`
        : e.type,
    )
    .filter((t, i, all) => !(t === "message_update" && all[i - 1] === "message_update"));

type Sent = {
  model: string;
  stream: boolean;
  messages: Array<Record<string, unknown>>;
  tools?: Array<{ type: string; function: { name: string; parameters: unknown } }>;
} & Record<string, unknown>;

describe("an Agent from pi-agent-core on the scripted model", () => {
  test("a full loop: bash runs for real, its result goes back, the model answers", async () => {
    const model = await scripted(
      [
        { toolCalls: [{ name: "bash", arguments: { command: "echo hi > f.txt && cat f.txt" } }] },
        { text: "f.txt holds hi." },
      ],
      "sk-test",
    );
    const { agent, events } = await agentOn(model, [bashTool({ root })]);
    await agent.prompt("Write hi into f.txt and show it.");

    // The tool ran in the root.
    expect(await readFile(path.join(root, "f.txt"), "utf8")).toBe("hi\n");

    // Two model calls, each with the key as a bearer token.
    expect(model.requests.map((r) => [r.status, r.step, r.authorization])).toEqual([
      [200, 0, "Bearer sk-test"],
      [200, 1, "Bearer sk-test"],
    ]);
    const [first, second] = model.requests.map((r) => r.body as Sent);
    // What pi sends: a streamed request with usage asked, our compat (system role, max_tokens, no
    // store, no strict), the tool's JSON Schema.
    expect(first).toMatchObject({
      model: "scripted",
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 16384,
      messages: [
        { role: "system", content: "You work in a git checkout." },
        { role: "user", content: [{ type: "text", text: "Write hi into f.txt and show it." }] },
      ],
    });
    expect(first).not.toHaveProperty("store");
    expect(first.tools).toEqual([
      {
        type: "function",
        function: {
          name: "bash",
          description: expect.stringContaining("bash command line"),
          parameters: {
            type: "object",
            required: ["command"],
            properties: { command: expect.objectContaining({ type: "string" }), timeout: expect.any(Object) },
          },
        },
      },
    ]);
    // The second request carries the assistant's call and the tool's output back.
    expect(second.messages.slice(2)).toEqual([
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "call_0_0",
            type: "function",
            function: { name: "bash", arguments: JSON.stringify({ command: "echo hi > f.txt && cat f.txt" }) },
          },
        ],
      },
      { role: "tool", content: "hi\n", tool_call_id: "call_0_0" },
    ]);

    // The events pi emitted, in order.
    expect(shape(events)).toEqual([
      "agent_start",
      "turn_start",
      "message_start:user",
      "message_end:user",
      "message_start:assistant",
      "message_update",
      "message_end:assistant",
      "tool_execution_start",
      "tool_execution_end",
      "message_start:toolResult",
      "message_end:toolResult",
      "turn_end",
      "turn_start",
      "message_start:assistant",
      "message_update",
      "message_end:assistant",
      "turn_end",
      "agent_end",
    ]);
    const start = events.find((e) => e.type === "tool_execution_start")!;
    expect(start).toEqual({
      type: "tool_execution_start",
      toolCallId: "call_0_0",
      toolName: "bash",
      args: { command: "echo hi > f.txt && cat f.txt" },
    });
    const end = events.find((e) => e.type === "tool_execution_end")!;
    expect(end).toMatchObject({
      toolCallId: "call_0_0",
      toolName: "bash",
      isError: false,
      result: { content: [{ type: "text", text: "hi\n" }], details: { exitCode: 0, timedOut: false } },
    });
    const ends = events.filter((e) => e.type === "message_end").map((e) => e.message);
    const call = ends[1] as AssistantMessage;
    expect(call).toMatchObject({
      role: "assistant",
      api: "openai-completions",
      provider: "jr2",
      model: "scripted",
      stopReason: "toolUse",
      content: [
        { type: "toolCall", id: "call_0_0", name: "bash", arguments: { command: "echo hi > f.txt && cat f.txt" } },
      ],
    });
    const result = ends[2] as ToolResultMessage;
    expect(result).toMatchObject({ role: "toolResult", toolCallId: "call_0_0", toolName: "bash", isError: false });
    // The streamed text arrived as deltas.
    const deltas = events.flatMap((e) =>
      e.type === "message_update" && e.assistantMessageEvent.type === "text_delta"
        ? [e.assistantMessageEvent.delta]
        : [],
    );
    expect(deltas.join("")).toBe("f.txt holds hi.");
    expect(deltas.length).toBeGreaterThan(1);

    // The final message, and the transcript the next turn would continue.
    const final = agent.state.messages.at(-1) as AssistantMessage;
    expect(final).toMatchObject({
      role: "assistant",
      stopReason: "stop",
      content: [{ type: "text", text: "f.txt holds hi." }],
    });
    expect(final.usage.totalTokens).toBeGreaterThan(0);
    // pi 1.6's transcript opens with the system message: the prompt and the tools declared.
    expect(agent.state.messages.map((m) => (m as { role: string }).role)).toEqual([
      "system",
      "user",
      "assistant",
      "toolResult",
      "assistant",
    ]);
    expect(agent.state.errorMessage).toBeUndefined();
    expect(agent.state.isStreaming).toBe(false);
  });

  test("a second prompt continues the conversation", async () => {
    const model = await scripted([{ text: "first" }, { text: "second" }]);
    const { agent } = await agentOn(model, []);
    await agent.prompt("one");
    await agent.prompt("two");
    const sent = (model.requests[1]!.body as Sent).messages;
    expect(sent.map((m) => [m.role, m.content])).toEqual([
      ["system", "You work in a git checkout."],
      ["user", [{ type: "text", text: "one" }]],
      ["assistant", "first"],
      ["user", [{ type: "text", text: "two" }]],
    ]);
  });

  test("a key the endpoint does not take ends the turn with the provider's 401, sent as given", async () => {
    const model = await scripted([{ text: "never" }], "sk-held-value");
    const { agent } = await agentOn(model, [], "sk-stand-in");
    await agent.prompt("hello");
    expect(model.requests.map((r) => [r.status, r.authorization])).toEqual([[401, "Bearer sk-stand-in"]]);
    const final = agent.state.messages.at(-1) as AssistantMessage;
    expect(final.stopReason).toBe("error");
    expect(final.errorMessage).toMatch(/401/);
    expect(agent.state.errorMessage).toMatch(/401/);
  });

  test("a tool that throws is an error result the model is sent", async () => {
    await writeFile(path.join(root, "a.txt"), "alpha\n");
    const model = await scripted([
      { toolCalls: [{ name: "edit", arguments: { path: "a.txt", oldText: "beta", newText: "gamma" } }] },
      { text: "I see." },
    ]);
    const { agent, events } = await agentOn(model, workingTools({ root }));
    await agent.prompt("edit it");
    const end = events.find((e) => e.type === "tool_execution_end");
    expect(end).toMatchObject({ isError: true, toolName: "edit" });
    const back = (model.requests[1]!.body as Sent).messages.at(-1)!;
    expect(back).toMatchObject({ role: "tool", tool_call_id: "call_0_0" });
    expect(back.content).toMatch(/oldText does not occur in a\.txt/);
  });

  test("several working tools in one message run in the model's order", async () => {
    const model = await scripted([
      {
        toolCalls: [
          { name: "write", arguments: { path: "notes/n.txt", content: "one two\n" } },
          { name: "edit", arguments: { path: "notes/n.txt", oldText: "two", newText: "three" } },
          { name: "read", arguments: { path: "notes/n.txt" } },
          { name: "bash", arguments: { command: "wc -w < notes/n.txt" } },
        ],
      },
      { text: "done" },
    ]);
    const { agent } = await agentOn(model, workingTools({ root }));
    await agent.prompt("go");
    const back = (model.requests[1]!.body as Sent).messages.filter((m) => m.role === "tool");
    expect(back.map((m) => [m.tool_call_id, m.content])).toEqual([
      ["call_0_0", "wrote 8 bytes to notes/n.txt"],
      ["call_0_1", "replaced 1 occurrence in notes/n.txt"],
      ["call_0_2", "one three\n"],
      ["call_0_3", "2\n"],
    ]);
  });

  test("abort ends the turn while the model is still thinking", async () => {
    const model = await scripted([{ text: "too late", delayMs: 30_000 }]);
    const { agent } = await agentOn(model, []);
    const run = agent.prompt("hello");
    await eventually("the turn's request at the model", () => model.requests.length === 1 || undefined);
    agent.abort();
    await run;
    expect((agent.state.messages.at(-1) as AssistantMessage).stopReason).toBe("aborted");
  });
});

describe("a model call that fails before an answer begins", () => {
  /** A hop in front of the scripted model that cuts the first `drops` requests' connections, unanswered. */
  async function cutting(model: ScriptedModel, drops: number) {
    let seen = 0;
    const server = http.createServer((req, res) => {
      if (seen++ < drops) {
        req.socket.destroy();
        return;
      }
      const up = http.request(`${model.url}${req.url}`, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      req.pipe(up);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as AddressInfo).port;
    return { baseUrl: `http://127.0.0.1:${port}/v1`, seen: () => seen, close: () => server.close() };
  }

  async function turn(baseUrl: string) {
    const { Agent } = await piLib();
    const { model: piModel, streamFn, getApiKey } = await agentModel({ baseUrl, apiKey: "sk-test", id: "scripted" });
    const agent = new Agent({ initialState: { systemPrompt: "s", model: piModel, tools: [] }, streamFn, getApiKey });
    await agent.prompt("hello");
    return agent.state.messages.at(-1) as AssistantMessage;
  }

  test("is tried again, as the providers' SDKs did by default: a dropped connection does not fail the turn", async () => {
    const model = await scripted([{ text: "answered after two drops" }], "sk-test");
    const hop = await cutting(model, 2);
    try {
      const last = await turn(hop.baseUrl);
      expect(last).toMatchObject({ stopReason: "stop", content: [{ type: "text", text: "answered after two drops" }] });
      expect(hop.seen()).toBe(3);
      expect(model.requests).toHaveLength(1);
    } finally {
      hop.close();
    }
  });

  test("twice at most: a third drop ends the turn with the connection's error", async () => {
    const model = await scripted([{ text: "never" }], "sk-test");
    const hop = await cutting(model, 3);
    try {
      const last = await turn(hop.baseUrl);
      expect(last.stopReason).toBe("error");
      expect(hop.seen()).toBe(3);
      expect(model.requests).toHaveLength(0);
    } finally {
      hop.close();
    }
  });
});

describe("the model for an OpenAI-compatible endpoint", () => {
  test("its fields, and what is refused", async () => {
    const model = modelFor({ baseUrl: "http://127.0.0.1:8081/models/qwen/v1/", apiKey: "x", id: "qwen" });
    expect(model).toMatchObject({
      id: "qwen",
      api: "openai-completions",
      provider: "jr2",
      baseUrl: "http://127.0.0.1:8081/models/qwen/v1",
      reasoning: false,
      input: ["text"],
      compat: { supportsDeveloperRole: false, supportsStore: false, maxTokensField: "max_tokens" },
    });
    expect(() => modelFor({ baseUrl: "127.0.0.1:1/v1", apiKey: "x", id: "m" })).toThrow(/not http/);
    await expect(agentModel({ baseUrl: "http://h/v1", apiKey: "", id: "m" })).rejects.toThrow(/key is empty/);
    const { getApiKey } = await agentModel({ baseUrl: "http://h/v1", apiKey: "k", id: "m" });
    expect([getApiKey("jr2"), getApiKey("openai")]).toEqual(["k", undefined]);
  });
});

describe("the working tools", () => {
  const text = (r: { content: Array<{ type: string; text?: string }> }) => r.content.map((c) => c.text).join("");

  test("paths outside the root are refused, symlinks resolved", async () => {
    await writeFile(path.join(root, "in.txt"), "inside\n");
    await symlink(outside, path.join(root, "out-dir"));
    await symlink(path.join(outside, "secret.txt"), path.join(root, "out-file"));
    await symlink(path.join(root, "in.txt"), path.join(root, "in-link"));
    await symlink(path.join(outside, "missing.txt"), path.join(root, "dangling"));
    for (const p of [
      "../outside/secret.txt",
      path.join(outside, "secret.txt"),
      "/etc/passwd",
      "out-dir/secret.txt",
      "out-file",
      "a/../../outside",
    ]) {
      await expect(resolveInRoot(root, p)).rejects.toBeInstanceOf(OutsideRoot);
    }
    // Writing through a link that points out creates nothing outside.
    await expect(resolveInRoot(root, "out-dir/new.txt")).rejects.toBeInstanceOf(OutsideRoot);
    await expect(resolveInRoot(root, "dangling")).rejects.toThrow(/symlink whose target does not exist/);
    // Inside: relative, absolute, through a link that stays inside, not yet existing.
    expect(await resolveInRoot(root, "in.txt")).toBe(path.join(root, "in.txt"));
    expect(await resolveInRoot(root, path.join(root, "in.txt"))).toBe(path.join(root, "in.txt"));
    expect(await resolveInRoot(root, "in-link")).toBe(path.join(root, "in.txt"));
    expect(await resolveInRoot(root, "new/dir/f.txt")).toBe(path.join(root, "new/dir/f.txt"));
    expect(await resolveInRoot(root, ".")).toBe(root);
    // A root reached through a link is its real path.
    await symlink(root, path.join(tmp, "root-link"));
    expect(await resolveInRoot(path.join(tmp, "root-link"), "in.txt")).toBe(path.join(root, "in.txt"));

    const read = readTool({ root });
    const write = writeTool({ root });
    await expect(read.execute("c", { path: "out-file" })).rejects.toThrow("out-file is outside the working directory");
    await expect(write.execute("c", { path: "out-dir/x.txt", content: "x" })).rejects.toThrow(/outside/);
    await expect(readFile(path.join(outside, "x.txt"))).rejects.toThrow(/ENOENT/);
    await expect(
      editTool({ root }).execute("c", { path: "../outside/secret.txt", oldText: "not", newText: "now" }),
    ).rejects.toThrow(/outside/);
    expect(await readFile(path.join(outside, "secret.txt"), "utf8")).toBe("not yours\n");
  });

  test("read: whole, by lines, cut when long, and clear failures", async () => {
    await writeFile(path.join(root, "l.txt"), "1\n2\n3\n4\n5");
    const read = readTool({ root, maxOutputChars: 20 });
    expect(text(await read.execute("c", { path: "l.txt" }))).toBe("1\n2\n3\n4\n5");
    expect(text(await read.execute("c", { path: "l.txt", offset: 2, limit: 2 }))).toBe("2\n3");
    await expect(read.execute("c", { path: "l.txt", offset: 9 })).rejects.toThrow(/has 5 lines/);
    await writeFile(path.join(root, "big.txt"), "x".repeat(100));
    const big = await read.execute("c", { path: "big.txt" });
    expect(text(big)).toBe(`${"x".repeat(20)}\n[truncated: 80 more characters: read on with offset and limit]`);
    expect(big.details.truncated).toBe(true);
    await expect(read.execute("c", { path: "nope.txt" })).rejects.toThrow("nope.txt does not exist");
    await mkdir(path.join(root, "d"));
    await expect(read.execute("c", { path: "d" })).rejects.toThrow("d is a directory");
  });

  test("write makes the directories and replaces content", async () => {
    const write = writeTool({ root });
    const r = await write.execute("c", { path: "a/b/c.txt", content: "héllo" });
    expect(text(r)).toBe("wrote 6 bytes to a/b/c.txt");
    await write.execute("c", { path: "a/b/c.txt", content: "bye" });
    expect(await readFile(path.join(root, "a/b/c.txt"), "utf8")).toBe("bye");
  });

  test("edit replaces exactly one occurrence, or says why not and leaves the file alone", async () => {
    const file = path.join(root, "e.txt");
    await writeFile(file, "let a = 1;\nlet b = 1;\nlet c = 2;\n");
    const edit = editTool({ root });
    expect(text(await edit.execute("c", { path: "e.txt", oldText: "c = 2", newText: "c = $& + 3" }))).toBe(
      "replaced 1 occurrence in e.txt",
    );
    // `$&` stays as written (no String.replace patterns).
    expect(await readFile(file, "utf8")).toBe("let a = 1;\nlet b = 1;\nlet c = $& + 3;\n");
    await expect(edit.execute("c", { path: "e.txt", oldText: " = 1;", newText: " = 0;" })).rejects.toThrow(
      "oldText occurs 2 times in e.txt: include more of the text around it to pick one",
    );
    await expect(edit.execute("c", { path: "e.txt", oldText: "let d", newText: "x" })).rejects.toThrow(
      "oldText does not occur in e.txt",
    );
    await expect(edit.execute("c", { path: "e.txt", oldText: "", newText: "x" })).rejects.toThrow(/oldText is empty/);
    await expect(edit.execute("c", { path: "none.txt", oldText: "a", newText: "b" })).rejects.toThrow(
      "none.txt does not exist",
    );
    expect(await readFile(file, "utf8")).toBe("let a = 1;\nlet b = 1;\nlet c = $& + 3;\n");
    // Overlapping occurrences count too.
    await writeFile(file, "aaa");
    await expect(edit.execute("c", { path: "e.txt", oldText: "aa", newText: "b" })).rejects.toThrow(/occurs 2 times/);
  });

  test("bash: in the root, stdout and stderr together, a non-zero exit is an error", async () => {
    const bash = bashTool({ root });
    expect(text(await bash.execute("c", { command: "pwd" }))).toBe(`${root}\n`);
    expect(text(await bash.execute("c", { command: "echo out; echo err >&2" }))).toBe("out\nerr\n");
    expect(text(await bash.execute("c", { command: "true" }))).toBe("(no output)");
    await expect(bash.execute("c", { command: "echo nope; exit 3" })).rejects.toThrow("nope\n\n[exit 3]");
  });

  test("bash: the timeout kills the whole group, and so does an abort", async () => {
    // The group is bash's pid (it runs detached); `sleep 30 | cat` puts two more processes in it.
    const timedOut = path.join(root, "timed-out.pid");
    const bash = bashTool({ root, bashTimeoutMs: 300 });
    await expect(bash.execute("c", { command: `echo $$ > ${timedOut}; echo started; sleep 30 | cat` })).rejects.toThrow(
      "started\n\n[killed after 0.3 s]",
    );
    await groupGone(Number(await readFile(timedOut, "utf8")));
    await expect(bash.execute("c", { command: "sleep 30", timeout: 0.2 })).rejects.toThrow(/killed after 0.2 s/);
    const aborted = path.join(root, "aborted.pid");
    const abort = new AbortController();
    const run = bashTool({ root }).execute("c", { command: `echo $$ > ${aborted}; sleep 30 | cat` }, abort.signal);
    // Aborted once the command runs (its pid written), not after a guessed while.
    const pgid = await eventually(
      "the aborted command's pid",
      async () => Number((await readFile(aborted, "utf8").catch(() => "")).trim()) || undefined,
    );
    expect(live(pgid).length).toBeGreaterThan(0);
    abort.abort();
    await expect(run).rejects.toThrow(/^aborted/);
    await groupGone(pgid);
  });

  test("bash: a background job does not hold the call", async () => {
    const pidFile = path.join(root, "background.pid");
    const r = await bashTool({ root }).execute("c", { command: `sleep 30 & echo $! > ${pidFile}; echo started` });
    expect(text(r)).toBe("started\n");
    // The call answered while its background job still runs (how soon is bench/timings-bench.ts's).
    const pid = Number(await readFile(pidFile, "utf8"));
    expect(() => process.kill(pid, 0)).not.toThrow();
    process.kill(pid, "SIGKILL");
  });

  test("bash: long output keeps its tail and says what was cut", async () => {
    const bash = bashTool({ root, maxOutputChars: 100 });
    const r = await bash.execute("c", { command: "for i in $(seq 1 5000); do echo line$i; done" });
    const out = text(r);
    expect(out).toMatch(/^\[truncated: the first \d+ characters are not shown\]\n/);
    expect(out.endsWith("line5000\n")).toBe(true);
    const shown = out.slice(out.indexOf("\n") + 1);
    expect(shown.length).toBe(100);
    const total = Array.from({ length: 5000 }, (_, i) => `line${i + 1}\n`).join("").length;
    expect(out).toContain(`the first ${total - 100} characters`);
    expect(r.details.truncated).toBe(true);
  });

  test("workingTools: the four, by name", () => {
    expect(workingTools({ root }).map((t) => t.name)).toEqual(["read", "write", "edit", "bash"]);
  });
});
