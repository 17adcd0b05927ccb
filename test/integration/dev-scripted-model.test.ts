// The scripted model provider (dev/scripted-model.ts) over real HTTP: the chunks an OpenAI-compatible
// client parses, streamed and whole, the key check, the recorded requests, the per-step delay and
// the CLI. The full loop through pi against it is test/unit/harness-pi-agent.test.ts.
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { startScriptedModel, type ScriptedModel, type ScriptStep } from "../../dev/scripted-model";
import { eventually } from "../support/eventually";

const ROOT = path.join(__dirname, "..", "..");
const running: ScriptedModel[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((m) => m.stop()));
});

async function start(script: ScriptStep[], apiKey?: string): Promise<ScriptedModel> {
  const model = await startScriptedModel({ script, apiKey });
  running.push(model);
  return model;
}

type Chunk = {
  id: string;
  object: string;
  model: string;
  choices: Array<{
    index: number;
    delta: {
      role?: string;
      content?: string;
      tool_calls?: Array<{
        index: number;
        id?: string;
        type?: string;
        function: { name?: string; arguments?: string };
      }>;
    };
    finish_reason: string | null;
  }>;
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
};

const chat = (model: ScriptedModel, body: object, headers: Record<string, string> = {}) =>
  fetch(`${model.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

/** The SSE body as its `data:` payloads: the chunks, and whether it ended with `[DONE]`. */
async function sse(res: Response): Promise<{ chunks: Chunk[]; done: boolean; raw: string }> {
  const raw = await res.text();
  const events = raw.split("\n\n").filter((e) => e.length > 0);
  for (const e of events) expect(e.startsWith("data: ")).toBe(true);
  const payloads = events.map((e) => e.slice("data: ".length));
  const done = payloads.at(-1) === "[DONE]";
  return { chunks: payloads.filter((p) => p !== "[DONE]").map((p) => JSON.parse(p) as Chunk), done, raw };
}

const messages = [{ role: "user", content: "go" }];

describe("streaming", () => {
  test("a text answer: a role chunk, content pieces, finish_reason stop, usage when asked, [DONE]", async () => {
    const model = await start([{ text: "All done: the file says hi." }]);
    const res = await chat(model, {
      model: "m1",
      messages,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const { chunks, done } = await sse(res);
    expect(done).toBe(true);
    for (const c of chunks) {
      expect(c.object).toBe("chat.completion.chunk");
      expect(c.model).toBe("m1");
      expect(c.id).toBe(chunks[0]!.id);
    }
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "" });
    const content = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? "")).join("");
    expect(content).toBe("All done: the file says hi.");
    // Streamed in pieces, as a model does.
    expect(chunks.filter((c) => c.choices[0]?.delta.content).length).toBeGreaterThan(3);
    const finishes = chunks.flatMap((c) => c.choices.map((ch) => ch.finish_reason)).filter((f) => f !== null);
    expect(finishes).toEqual(["stop"]);
    // Usage last, on a chunk with no choices; null on the others.
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({
      prompt_tokens: expect.any(Number),
      completion_tokens: expect.any(Number),
      total_tokens: last.usage!.prompt_tokens + last.usage!.completion_tokens,
    });
    for (const c of chunks.slice(0, -1)) expect(c.usage).toBeNull();
  });

  test("without include_usage there is no usage at all", async () => {
    const model = await start([{ text: "hi" }]);
    const { chunks, done } = await sse(await chat(model, { messages, stream: true }));
    expect(done).toBe(true);
    for (const c of chunks) expect("usage" in c).toBe(false);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("stop");
    expect(chunks.at(-1)!.model).toBe("scripted");
  });

  test("tool calls: index, id, type and name first, the arguments in pieces, finish_reason tool_calls", async () => {
    const model = await start([
      {
        text: "Let me look.",
        toolCalls: [
          { name: "bash", arguments: { command: "echo hi > f.txt && cat f.txt" } },
          { name: "read", arguments: { path: "f.txt" }, id: "call_mine" },
        ],
      },
    ]);
    const { chunks, done } = await sse(await chat(model, { messages, stream: true }));
    expect(done).toBe(true);
    const deltas = chunks.flatMap((c) => c.choices.map((ch) => ch.delta));
    expect(
      deltas
        .map((d) => d.content ?? "")
        .join("")
        .trim(),
    ).toBe("Let me look.");
    const calls = deltas.flatMap((d) => d.tool_calls ?? []);
    // The opening piece of each call carries everything but the arguments.
    const openings = calls.filter((c) => c.id !== undefined);
    expect(openings).toEqual([
      { index: 0, id: "call_0_0", type: "function", function: { name: "bash", arguments: "" } },
      { index: 1, id: "call_mine", type: "function", function: { name: "read", arguments: "" } },
    ]);
    for (const index of [0, 1]) {
      const pieces = calls.filter((c) => c.index === index && c.id === undefined);
      expect(pieces.length).toBe(2);
      for (const p of pieces) expect(Object.keys(p.function)).toEqual(["arguments"]);
    }
    const args = (index: number) =>
      JSON.parse(
        calls
          .filter((c) => c.index === index)
          .map((c) => c.function.arguments ?? "")
          .join(""),
      ) as unknown;
    expect(args(0)).toEqual({ command: "echo hi > f.txt && cat f.txt" });
    expect(args(1)).toEqual({ path: "f.txt" });
    expect(chunks.at(-1)!.choices[0]).toEqual({
      index: 0,
      delta: {},
      logprobs: null,
      finish_reason: "tool_calls",
    });
  });

  test("string arguments are sent exactly as written", async () => {
    const model = await start([{ toolCalls: [{ name: "bash", arguments: '{"command": "ls"' }] }]);
    const { chunks } = await sse(await chat(model, { messages, stream: true }));
    const joined = chunks
      .flatMap((c) => c.choices.flatMap((ch) => ch.delta.tool_calls ?? []))
      .map((c) => c.function.arguments ?? "")
      .join("");
    expect(joined).toBe('{"command": "ls"');
  });
});

describe("whole answers (stream absent or false)", () => {
  test("text, then tool calls, as chat.completion objects with usage", async () => {
    const model = await start([
      { text: "hello there" },
      { toolCalls: [{ name: "bash", arguments: { command: "true" } }] },
    ]);
    const first = await chat(model, { model: "m", messages });
    expect(first.status).toBe(200);
    expect(first.headers.get("content-type")).toBe("application/json");
    const a = (await first.json()) as Record<string, unknown>;
    expect(a).toMatchObject({
      object: "chat.completion",
      model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: "hello there" }, finish_reason: "stop" }],
      usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number) },
    });
    const b = (await (await chat(model, { messages, stream: false })).json()) as {
      choices: Array<{ message: Record<string, unknown>; finish_reason: string }>;
    };
    expect(b.choices[0]).toEqual({
      index: 0,
      message: {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "call_1_0", type: "function", function: { name: "bash", arguments: '{"command":"true"}' } }],
      },
      logprobs: null,
      finish_reason: "tool_calls",
    });
  });
});

describe("the script, the record, the key", () => {
  test("steps advance per request, each request's body is recorded, and the end of the script is a clear 400", async () => {
    const model = await start([{ text: "one" }, { text: "two" }]);
    const toolResult = { role: "tool", tool_call_id: "call_0_0", content: "hi\n" };
    await (await chat(model, { messages })).json();
    await (await chat(model, { messages: [...messages, toolResult] })).json();
    const third = await chat(model, { messages });
    expect(third.status).toBe(400);
    expect(await third.json()).toEqual({
      error: {
        message: expect.stringContaining("all have been played"),
        type: "scripted_model_exhausted",
        param: null,
        code: "script_exhausted",
      },
    });
    expect(model.played).toBe(2);
    expect(model.requests.map((r) => [r.step, r.status])).toEqual([
      [0, 200],
      [1, 200],
      [undefined, 400],
    ]);
    expect(model.requests[1]!.body).toEqual({ messages: [...messages, toolResult] });
    expect(model.requests[0]!.path).toBe("/v1/chat/completions");
  });

  test("per conversation: each request plays its own conversation's next step, and the script never runs out", async () => {
    const model = await startScriptedModel({
      script: [{ toolCalls: [{ name: "bash", arguments: { command: "true" } }] }, { text: "done" }],
      perConversation: true,
    });
    running.push(model);
    const answered = { role: "assistant", content: "x" };
    const result = { role: "tool", tool_call_id: "c", content: "" };
    const calls = [
      [...messages], // a new conversation: step 0
      [...messages], // another new one: step 0 again
      [...messages, answered, result], // one answer in: step 1
      [...messages, answered, result, answered, { role: "user", content: "again" }], // two: step 0
    ];
    const ids: string[] = [];
    for (const m of calls) {
      const body = (await (await chat(model, { messages: m })).json()) as {
        choices: Array<{ message: { tool_calls?: Array<{ id: string }> } }>;
      };
      ids.push(...(body.choices[0]!.message.tool_calls ?? []).map((c) => c.id));
    }
    expect(model.requests.map((r) => [r.step, r.status])).toEqual([
      [0, 200],
      [0, 200],
      [1, 200],
      [0, 200],
    ]);
    expect(new Set(ids).size).toBe(3);
  });

  test("with a key: a request without it or with another is refused 401, recorded, and plays no step", async () => {
    const model = await start([{ text: "ok" }], "sk-held-value");
    const none = await chat(model, { messages });
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ error: { code: "invalid_api_key", type: "invalid_request_error" } });
    const wrong = await chat(model, { messages }, { authorization: "Bearer sk-stand-in" });
    expect(wrong.status).toBe(401);
    expect(model.played).toBe(0);
    const right = await chat(model, { messages }, { authorization: "Bearer sk-held-value" });
    expect(right.status).toBe(200);
    expect(model.requests.map((r) => [r.authorization, r.status, r.step])).toEqual([
      [undefined, 401, undefined],
      ["Bearer sk-stand-in", 401, undefined],
      ["Bearer sk-held-value", 200, 0],
    ]);
    expect(model.requests[2]!.headers["content-type"]).toBe("application/json");
    // The models list wants the key too.
    expect((await fetch(`${model.baseUrl}/models`)).status).toBe(401);
  });

  test("a body that is not a chat request is refused 400 and recorded as its text", async () => {
    const model = await start([{ text: "ok" }]);
    const res = await fetch(`${model.baseUrl}/chat/completions`, { method: "POST", body: "not json" });
    expect(res.status).toBe(400);
    expect(model.requests[0]!.body).toBe("not json");
    expect(model.played).toBe(0);
  });

  test("a step's delay holds its answer back at least that long", async () => {
    const model = await start([{ text: "slow", delayMs: 400 }]);
    const t = performance.now();
    await (await chat(model, { messages, stream: true })).text();
    // A floor, never a ceiling: a busy machine only makes it later (bench/timings-bench.ts has the
    // time an undelayed step takes).
    expect(performance.now() - t).toBeGreaterThanOrEqual(395);
  });

  test("a step without a delay is answered while an earlier step's delay still holds its own", async () => {
    // Stopped here (a held request ends only with the model), not by afterEach.
    const model = await startScriptedModel({ script: [{ text: "slow", delayMs: 60_000 }, { text: "fast" }] });
    let slowSettled = false;
    const slow = chat(model, { messages, stream: true }).then(
      (r) => r.text(),
      () => "reset",
    );
    void slow.finally(() => (slowSettled = true));
    await eventually("the delayed request at the model", () => model.requests.length === 1 || undefined);
    const fast = await sse(await chat(model, { messages, stream: true }));
    expect(fast.chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("fast");
    expect(slowSettled).toBe(false);
    await model.stop();
    expect(await slow).toBe("reset");
  });

  test("GET /v1/models lists the model; an unknown route is a 404", async () => {
    const model = await start([]);
    const list = await fetch(`${model.baseUrl}/models`);
    expect(await list.json()).toEqual({
      object: "list",
      data: [{ id: "scripted", object: "model", created: 0, owned_by: "jr2-scripted" }],
    });
    expect((await fetch(`${model.url}/v1/embeddings`, { method: "POST", body: "{}" })).status).toBe(404);
  });

  test("a malformed script is refused at start", async () => {
    await expect(startScriptedModel({ script: [{ toolCalls: [] }] as unknown as ScriptStep[] })).rejects.toThrow();
    await expect(startScriptedModel({ script: [{ say: "x" }] as unknown as ScriptStep[] })).rejects.toThrow();
  });

  test("stop() ends a request held in a delay and frees the port", async () => {
    const model = await startScriptedModel({ script: [{ text: "never", delayMs: 60_000 }] });
    const pending = chat(model, { messages }).then(
      (r) => r.status,
      () => "reset",
    );
    await eventually("the request at the model", () => model.requests.length === 1 || undefined);
    await model.stop();
    expect(await pending).toBe("reset");
    await expect(fetch(`${model.baseUrl}/models`)).rejects.toThrow();
  });
});

test("the CLI serves a script file with a key from a file and says where", async () => {
  const dir = await mkdtemp(path.join(os.tmpdir(), "scripted-model-"));
  try {
    await writeFile(path.join(dir, "script.json"), JSON.stringify({ steps: [{ text: "from the file" }] }));
    await writeFile(path.join(dir, "key"), "sk-cli\n");
    const child = spawn(
      path.join(ROOT, "node_modules", ".bin", "tsx"),
      [path.join(ROOT, "dev", "scripted-model.ts"), path.join(dir, "script.json"), "--key-file", path.join(dir, "key")],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      const line = await new Promise<string>((resolve, reject) => {
        let out = "";
        child.stdout.on("data", (b: Buffer) => {
          out += b.toString();
          if (out.includes("\n")) resolve(out.split("\n")[0]!);
        });
        child.once("exit", (code) => reject(new Error(`exited ${code} before listening`)));
      });
      const said = JSON.parse(line) as { url: string; baseUrl: string; steps: number; keyed: boolean };
      expect(said).toMatchObject({ message: "scripted model listening", steps: 1, keyed: true });
      expect(said.baseUrl).toBe(`${said.url}/v1`);
      const res = await fetch(`${said.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: "Bearer sk-cli" },
        body: JSON.stringify({ messages }),
      });
      const body = (await res.json()) as { choices: Array<{ message: { content: string } }> };
      expect(body.choices[0]!.message.content).toBe("from the file");
    } finally {
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
