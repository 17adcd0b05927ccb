// The scripted model (dev/scripted-model.ts) in each native wire format, driven by the clients the
// Harness runs on: pi-ai's own implementation of each API (`@earendil-works/pi-ai/api/<api>`, which
// load the Anthropic, OpenAI and Google SDKs), called directly as pi-ai's README says (a `Model`,
// `normalizeContext`, the key passed in). A tool call and a streamed text arrive as pi's blocks, the
// usage in the wire's own fields reaches pi, the key comes in the wire's header and a wrong one is
// refused as the real API refuses it, a replayed conversation gets the next step, and per
// conversation each one plays the script from its start. The encoders' event sequences are
// test/unit/dev-scripted-model-wires.test.ts; the Chat Completions wire is dev-scripted-model.test.ts.
import type { AssistantMessage, AssistantMessageEvent, Context, Message, Model, ToolCall } from "@earendil-works/pi-ai";
import { startScriptedModel, type ScriptedModel, type ScriptStep, type WireName } from "../../dev/scripted-model";

const KEY = "sk-held-value";
const TOOL_OUTPUT = "hi from the tool";

type PiApi = "anthropic-messages" | "openai-responses" | "google-generative-ai";

/** pi-ai's API implementation: ESM-only, so imported (jest.config.js maps the subpath to its dist). */
const implementations = {
  "anthropic-messages": () => import("@earendil-works/pi-ai/api/anthropic-messages"),
  "openai-responses": () => import("@earendil-works/pi-ai/api/openai-responses"),
  "google-generative-ai": () => import("@earendil-works/pi-ai/api/google-generative-ai"),
} as const;

type Case = {
  wire: Exclude<WireName, "openai-chat">;
  api: PiApi;
  /** Where pi's client wants the base URL, from the server's origin. */
  base: (url: string) => string;
  /** The header the key travels in, and its value there. */
  keyHeader: string;
  sent: (key: string) => string;
  /** What the real API answers a request with another key, and one with none. */
  wrongKey: number;
  noKey: number;
  /** A path of another wire. */
  foreign: string;
};

const CASES: Case[] = [
  {
    wire: "anthropic",
    api: "anthropic-messages",
    // The Anthropic SDK adds /v1/messages itself.
    base: (url) => url,
    keyHeader: "x-api-key",
    sent: (key) => key,
    wrongKey: 401,
    noKey: 401,
    foreign: "/v1/chat/completions",
  },
  {
    wire: "openai-responses",
    api: "openai-responses",
    base: (url) => `${url}/v1`,
    keyHeader: "authorization",
    sent: (key) => `Bearer ${key}`,
    wrongKey: 401,
    noKey: 401,
    foreign: "/v1/messages",
  },
  {
    wire: "google",
    api: "google-generative-ai",
    // pi's Google client takes the API version in the base URL (it sets the SDK's apiVersion to "").
    base: (url) => `${url}/v1beta`,
    keyHeader: "x-goog-api-key",
    sent: (key) => key,
    // Gemini says 400 API_KEY_INVALID to a key it does not know, 403 to a request with none.
    wrongKey: 400,
    noKey: 403,
    foreign: "/v1/chat/completions",
  },
];

const running: ScriptedModel[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((m) => m.stop()));
});

async function start(c: Case, script: ScriptStep[], perConversation = false) {
  const model = await startScriptedModel({ script, wire: c.wire, apiKey: KEY, perConversation });
  running.push(model);
  return model;
}

const piModel = (c: Case, model: ScriptedModel): Model<PiApi> => ({
  id: "scripted",
  name: "scripted",
  api: c.api,
  // A name pi knows nothing of, so it guesses no behaviour from it.
  provider: "jr2",
  baseUrl: model.baseUrl,
  reasoning: false,
  input: ["text"],
  cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
  contextWindow: 128_000,
  maxTokens: 4096,
});

const bash = {
  name: "bash",
  description: "Runs a shell command",
  parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
};

const conversation = (text: string): Context => ({
  systemPrompt: "You work in a git checkout.",
  messages: [{ role: "user", content: text, timestamp: Date.now() }],
  tools: [bash],
});

/** One answer through pi's implementation of the case's API: every event, and the message. */
async function ask(c: Case, model: ScriptedModel, context: Context, apiKey = KEY) {
  const { normalizeContext } = await import("@earendil-works/pi-ai");
  const api = await implementations[c.api]();
  const stream = api.streamSimple(piModel(c, model) as never, normalizeContext(context), { apiKey });
  const events: AssistantMessageEvent[] = [];
  for await (const e of stream) events.push(e);
  const message: AssistantMessage = await stream.result();
  return { events, message };
}

const toolCalls = (m: AssistantMessage) => m.content.filter((b): b is ToolCall => b.type === "toolCall");
const text = (m: AssistantMessage) =>
  m.content
    .filter((b) => b.type === "text")
    .map((b) => (b as { text: string }).text)
    .join("");

/** The context after an answer and, for each of its tool calls, a result. */
function replayed(context: Context, answer: AssistantMessage): Context {
  const results: Message[] = toolCalls(answer).map((call) => ({
    role: "toolResult",
    toolCallId: call.id,
    toolName: call.name,
    content: [{ type: "text", text: TOOL_OUTPUT }],
    isError: false,
    timestamp: Date.now(),
  }));
  return { ...context, messages: [...context.messages, answer, ...results] };
}

const withUser = (context: Context, text: string): Context => ({
  ...context,
  messages: [...context.messages, { role: "user", content: text, timestamp: Date.now() }],
});

describe.each(CASES)("the $wire wire, through pi-ai's $api", (c) => {
  test("a tool call, then (its result sent back) a streamed text, with usage, the key in its header", async () => {
    const model = await start(c, [
      { toolCalls: [{ name: "bash", arguments: { command: "echo hi && ls -la" } }] },
      { text: "The command said hi, and the listing is what I expected, so we are done." },
    ]);
    expect(model.baseUrl).toBe(c.base(model.url));

    const first = await ask(c, model, conversation("list the files"));
    expect(first.message.errorMessage).toBeUndefined();
    expect(first.message.stopReason).toBe("toolUse");
    expect(toolCalls(first.message)).toEqual([
      expect.objectContaining({ type: "toolCall", name: "bash", arguments: { command: "echo hi && ls -la" } }),
    ]);
    expect(first.message.usage.input).toBeGreaterThan(0);
    expect(first.message.usage.output).toBeGreaterThan(0);

    const second = await ask(c, model, replayed(conversation("list the files"), first.message));
    expect(second.message.errorMessage).toBeUndefined();
    expect(second.message.stopReason).toBe("stop");
    expect(text(second.message)).toBe("The command said hi, and the listing is what I expected, so we are done.");
    expect(second.events.filter((e) => e.type === "text_delta").length).toBeGreaterThan(1);
    expect(second.message.usage.input).toBeGreaterThan(first.message.usage.input);
    expect(second.message.usage.output).toBeGreaterThan(0);

    expect(model.requests.map((r) => [r.wire, r.status, r.step, r.keyHeader, r.key])).toEqual([
      [c.wire, 200, 0, c.keyHeader, KEY],
      [c.wire, 200, 1, c.keyHeader, KEY],
    ]);
    for (const r of model.requests) expect(r.headers[c.keyHeader]).toBe(c.sent(KEY));
    // The second request carried the tool's result back.
    expect(JSON.stringify(model.requests[1]!.body)).toContain(TOOL_OUTPUT);
  });

  test("a wrong key is refused as the real API refuses it, and plays no step", async () => {
    const model = await start(c, [{ text: "never said" }]);
    const { message } = await ask(c, model, conversation("hello"), "sk-stand-in");
    expect(message.stopReason).toBe("error");
    expect(message.errorMessage).toBeTruthy();
    expect(model.requests.map((r) => [r.status, r.step, r.key])).toEqual([[c.wrongKey, undefined, "sk-stand-in"]]);
    expect(model.played).toBe(0);

    // Without any key, straight over HTTP: the status and the error shape of the real API.
    const path = model.requests[0]!.path + (model.requests[0]!.query ? `?${model.requests[0]!.query}` : "");
    const none = await fetch(`${model.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(model.requests[0]!.body),
    });
    expect(none.status).toBe(c.noKey);
    const body = (await none.json()) as Record<string, unknown>;
    if (c.wire === "anthropic") expect(body).toMatchObject({ type: "error", error: { type: "authentication_error" } });
    if (c.wire === "openai-responses") expect(body).toMatchObject({ error: { code: "invalid_api_key" } });
    if (c.wire === "google") expect(body).toMatchObject({ error: { code: 403, status: "PERMISSION_DENIED" } });
    expect(model.played).toBe(0);
  });

  test("per conversation: each conversation plays the script from its start, turn after turn", async () => {
    const model = await start(
      c,
      [
        { toolCalls: [{ name: "bash", arguments: { command: "git status" } }] },
        { text: "All clean here, nothing left to do." },
      ],
      true,
    );
    let a = conversation("check the checkout");
    let b = conversation("check the other checkout");
    const a1 = await ask(c, model, a); // step 0
    const b1 = await ask(c, model, b); // step 0: a conversation of its own
    a = replayed(a, a1.message);
    const a2 = await ask(c, model, a); // one answer in: step 1
    a = withUser(replayed(a, a2.message), "and once more");
    const a3 = await ask(c, model, a); // two answers in: step 0 again
    b = replayed(b, b1.message);
    const b2 = await ask(c, model, b); // one answer in: step 1

    for (const m of [a1, b1, a3]) expect(toolCalls(m.message).map((t) => t.name)).toEqual(["bash"]);
    for (const m of [a2, b2]) expect(text(m.message)).toBe("All clean here, nothing left to do.");
    expect(model.requests.map((r) => [r.status, r.step])).toEqual([
      [200, 0],
      [200, 0],
      [200, 1],
      [200, 0],
      [200, 1],
    ]);
    // Tool call ids stay unique across the conversations and the script's second round.
    const ids = [a1, b1, a3].flatMap((m) => toolCalls(m.message).map((t) => t.id));
    expect(new Set(ids).size).toBe(3);
  });

  test("a path of another wire is a 404 that names the wire spoken", async () => {
    const model = await start(c, [{ text: "never said" }]);
    const res = await fetch(`${model.url}${c.foreign}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(404);
    expect(await res.text()).toContain(`speaking the ${c.wire} wire`);
    expect(model.requests).toEqual([]);
  });
});

test("the google wire takes the key in its header only: a key= query parameter is refused", async () => {
  const c = CASES.find((x) => x.wire === "google")!;
  const model = await start(c, [{ text: "never said" }]);
  const res = await fetch(`${model.url}/v1beta/models/scripted:generateContent?key=${KEY}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-goog-api-key": KEY },
    body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }),
  });
  expect(res.status).toBe(403);
  expect(await res.json()).toMatchObject({
    error: { code: 403, status: "PERMISSION_DENIED", message: expect.stringContaining("x-goog-api-key") },
  });
  expect(model.played).toBe(0);
});
