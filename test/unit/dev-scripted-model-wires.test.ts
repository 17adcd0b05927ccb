// The scripted model's wire encoders (dev/scripted-model/*.ts), pure: the events each sends for a
// step, in order, their frames, the refusals of a key, how a conversation's answers are counted,
// and the CLI's options. Played by pi-ai's own clients in
// test/integration/scripted-model-wires.test.ts.
import type { IncomingHttpHeaders } from "node:http";
import { parseArgs, requestLine, type RecordedRequest } from "../../dev/scripted-model";
import { anthropic, anthropicEvents, anthropicMessage } from "../../dev/scripted-model/anthropic";
import { google, googleChunks, googleResponse } from "../../dev/scripted-model/google";
import { openAIChat } from "../../dev/scripted-model/openai-chat";
import {
  openAIResponses,
  responseObject,
  responsesAnswersIn,
  responsesEvents,
} from "../../dev/scripted-model/openai-responses";
import type { Answer, Meta, Wire } from "../../dev/scripted-model/wire";

/** A step with text, then two tool calls. */
const calls: Answer = {
  text: "Let me look.",
  calls: [
    { id: "call_0_0", name: "bash", arguments: '{"command":"ls -la"}' },
    { id: "call_mine", name: "read", arguments: '{"path":"f.txt"}' },
  ],
  finish: "tool_calls",
};
const said: Answer = { text: "All done here.", calls: [], finish: "stop" };
const usage = { input: 30, output: 12 };

const meta = (body: Record<string, unknown>, route: Meta["route"] = { kind: "answer" }): Meta => ({
  serial: 7,
  model: "m1",
  created: 1_700_000_000,
  usage,
  body,
  route,
});

describe("anthropic", () => {
  test("text then two tool calls: message_start, ping, a block each, message_delta, message_stop", () => {
    const events = anthropicEvents("msg_1", "m1", calls, usage);
    expect(events.map((e) => e.event)).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    // Each event's data names its own type, as Anthropic's do.
    for (const e of events) expect(e.data.type).toBe(e.event);
    expect(events[0]!.data).toEqual({
      type: "message_start",
      message: {
        id: "msg_1",
        type: "message",
        role: "assistant",
        model: "m1",
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 30, output_tokens: 1 },
      },
    });
    expect(events[2]!.data).toEqual({
      type: "content_block_start",
      index: 0,
      content_block: { type: "text", text: "" },
    });
    const deltas = (index: number) =>
      events
        .filter((e) => e.event === "content_block_delta" && e.data.index === index)
        .map((e) => e.data.delta as Record<string, string>);
    expect(deltas(0).map((d) => d.type)).toEqual(["text_delta", "text_delta", "text_delta"]);
    expect(
      deltas(0)
        .map((d) => d.text)
        .join(""),
    ).toBe("Let me look.");
    expect(events[7]!.data).toEqual({
      type: "content_block_start",
      index: 1,
      content_block: { type: "tool_use", id: "call_0_0", name: "bash", input: {} },
    });
    expect(deltas(1).every((d) => d.type === "input_json_delta")).toBe(true);
    expect(
      JSON.parse(
        deltas(1)
          .map((d) => d.partial_json)
          .join(""),
      ),
    ).toEqual({ command: "ls -la" });
    expect(events[12]!.data).toMatchObject({
      index: 2,
      content_block: { type: "tool_use", id: "call_mine", name: "read" },
    });
    expect(
      JSON.parse(
        deltas(2)
          .map((d) => d.partial_json)
          .join(""),
      ),
    ).toEqual({ path: "f.txt" });
    expect(events.at(-2)!.data).toEqual({
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { output_tokens: 12 },
    });
  });

  test("a text answer ends its turn; the whole form carries the blocks, the input parsed", () => {
    const events = anthropicEvents("msg_2", "m1", said, usage);
    expect(events.filter((e) => e.event === "content_block_start")).toHaveLength(1);
    expect(events.at(-2)!.data).toMatchObject({ delta: { stop_reason: "end_turn" } });
    expect(anthropicMessage("msg_3", "m1", calls, usage)).toEqual({
      id: "msg_3",
      type: "message",
      role: "assistant",
      model: "m1",
      content: [
        { type: "text", text: "Let me look." },
        { type: "tool_use", id: "call_0_0", name: "bash", input: { command: "ls -la" } },
        { type: "tool_use", id: "call_mine", name: "read", input: { path: "f.txt" } },
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 30, output_tokens: 12 },
    });
  });

  test("streamed as named events: an event: line, a data: line, a blank line", () => {
    const reply = anthropic.reply(said, meta({ stream: true }));
    if (!("sse" in reply)) throw new Error("not streamed");
    expect(reply.sse[0]).toMatch(/^event: message_start\ndata: \{"type":"message_start",.*\}\n\n$/);
    expect(reply.sse.at(-1)).toBe('event: message_stop\ndata: {"type":"message_stop"}\n\n');
    expect(anthropic.reply(said, meta({}))).toEqual({ json: anthropicMessage("msg_scripted_7", "m1", said, usage) });
  });
});

describe("openai-responses", () => {
  test("text then two tool calls: every item added, streamed, done, then response.completed", () => {
    const events = responsesEvents("r1", "m1", 1_700_000_000, calls, usage);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events[2]).toMatchObject({
      output_index: 0,
      item: { id: "msg_r1", type: "message", status: "in_progress", role: "assistant", content: [] },
    });
    const text = events.filter((e) => e.type === "response.output_text.delta");
    expect(text.map((e) => e.delta).join("")).toBe("Let me look.");
    for (const e of text) expect(e).toMatchObject({ item_id: "msg_r1", output_index: 0, content_index: 0 });
    expect(events[10]).toMatchObject({
      output_index: 1,
      item: {
        id: "fc_r1_0",
        type: "function_call",
        status: "in_progress",
        arguments: "",
        call_id: "call_0_0",
        name: "bash",
      },
    });
    const args = (i: number) =>
      events
        .filter((e) => e.type === "response.function_call_arguments.delta" && e.output_index === i)
        .map((e) => e.delta)
        .join("");
    expect(JSON.parse(args(1))).toEqual({ command: "ls -la" });
    expect(JSON.parse(args(2))).toEqual({ path: "f.txt" });
    expect(events[13]).toMatchObject({ item_id: "fc_r1_0", arguments: '{"command":"ls -la"}' });
    const completed = events.at(-1)!.response as ReturnType<typeof responseObject>;
    expect(completed).toEqual(responseObject("r1", "m1", 1_700_000_000, calls, usage, "completed"));
    expect(completed.status).toBe("completed");
    expect(completed.usage).toEqual({
      input_tokens: 30,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 12,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 42,
    });
    expect(completed.output.map((o) => [o.type, o.id, o.status])).toEqual([
      ["message", "msg_r1", "completed"],
      ["function_call", "fc_r1_0", "completed"],
      ["function_call", "fc_r1_1", "completed"],
    ]);
    // The items done are the ones the completed response holds.
    expect(events.filter((e) => e.type === "response.output_item.done").map((e) => e.item)).toEqual(completed.output);
  });

  test("a tool call alone has no message item; frames are named events", () => {
    const only: Answer = { text: null, calls: calls.calls.slice(0, 1), finish: "tool_calls" };
    const events = responsesEvents("r2", "m1", 0, only, usage);
    expect(
      events.filter((e) => e.type === "response.output_item.added").map((e) => (e.item as { type: string }).type),
    ).toEqual(["function_call"]);
    const reply = openAIResponses.reply(only, meta({ stream: true }));
    if (!("sse" in reply)) throw new Error("not streamed");
    expect(reply.sse[0]).toMatch(/^event: response\.created\ndata: \{.*"sequence_number":0\}\n\n$/);
    expect(reply.sse.at(-1)).toMatch(/^event: response\.completed\n/);
  });

  test("a conversation's answers: a run of the model's items is one answer, the client's items part them", () => {
    const user = { role: "user", content: [{ type: "input_text", text: "go" }] };
    const message = { type: "message", role: "assistant", content: [] };
    const call = (id: string) => ({ type: "function_call", call_id: id, name: "bash", arguments: "{}" });
    const output = (id: string) => ({ type: "function_call_output", call_id: id, output: "ok" });
    expect(responsesAnswersIn([{ role: "system", content: "sys" }, user])).toBe(0);
    expect(responsesAnswersIn([user, message, call("a"), output("a")])).toBe(1);
    expect(responsesAnswersIn([user, call("a"), call("b"), output("a"), output("b")])).toBe(1);
    expect(responsesAnswersIn([user, call("a"), output("a"), message, user])).toBe(2);
    expect(responsesAnswersIn([user, message, user, message, call("a"), output("a"), call("b"), output("b")])).toBe(3);
    // A message straight after a call (no output between) begins another answer all the same.
    expect(responsesAnswersIn([user, call("a"), message])).toBe(2);
    // The short form of a message, without `type`.
    expect(responsesAnswersIn([user, { role: "assistant", content: "hi" }, user])).toBe(1);
  });
});

describe("google", () => {
  test("the text in pieces, the calls together in the last chunk, STOP on it, usage on every chunk", () => {
    const chunks = googleChunks("g1", "m1", calls, usage);
    expect(chunks.map((c) => c.candidates[0]!.content.parts)).toEqual([
      [{ text: "Let " }],
      [{ text: "me " }],
      [{ text: "look." }],
      [
        { functionCall: { id: "call_0_0", name: "bash", args: { command: "ls -la" } } },
        { functionCall: { id: "call_mine", name: "read", args: { path: "f.txt" } } },
      ],
    ]);
    expect(chunks.map((c) => c.candidates[0]!.finishReason)).toEqual([undefined, undefined, undefined, "STOP"]);
    for (const c of chunks) {
      expect(c.candidates[0]!.content.role).toBe("model");
      expect(c.usageMetadata.promptTokenCount).toBe(30);
      expect(c.usageMetadata.totalTokenCount).toBe(30 + c.usageMetadata.candidatesTokenCount);
    }
    expect(chunks.at(-1)!.usageMetadata).toEqual({
      promptTokenCount: 30,
      candidatesTokenCount: 12,
      totalTokenCount: 42,
    });
    const said = googleChunks("g2", "m1", { text: "All done here.", calls: [], finish: "stop" }, usage);
    expect(said.at(-1)!.candidates[0]).toMatchObject({ content: { parts: [{ text: "here." }] }, finishReason: "STOP" });
  });

  test("whole, as SSE with CRLF, or as one JSON array, as the method and alt= ask", () => {
    expect(googleResponse("g3", "m1", calls, usage).candidates[0]).toEqual({
      content: {
        role: "model",
        parts: [
          { text: "Let me look." },
          { functionCall: { id: "call_0_0", name: "bash", args: { command: "ls -la" } } },
          { functionCall: { id: "call_mine", name: "read", args: { path: "f.txt" } } },
        ],
      },
      finishReason: "STOP",
      index: 0,
    });
    const sse = google.reply(said, meta({}, { kind: "answer", stream: true, sse: true, model: "m1" }));
    if (!("sse" in sse)) throw new Error("not streamed");
    for (const frame of sse.sse) expect(frame).toMatch(/^data: \{.*\}\r\n\r\n$/);
    expect(google.reply(said, meta({}, { kind: "answer", stream: true, sse: false }))).toEqual({
      json: googleChunks("scripted-7", "m1", said, usage),
    });
    expect(google.reply(said, meta({ stream: true }, { kind: "answer", stream: false }))).toEqual({
      json: googleResponse("scripted-7", "m1", said, usage),
    });
  });

  test("its routes: the model from the path, the stream method, alt=sse", () => {
    const q = (s: string) => new URLSearchParams(s);
    expect(google.route("POST", "/v1beta/models/gemini-x:streamGenerateContent", q("alt=sse"))).toEqual({
      kind: "answer",
      stream: true,
      sse: true,
      model: "gemini-x",
    });
    expect(google.route("POST", "/v1beta/models/gemini-x:generateContent", q(""))).toMatchObject({ stream: false });
    expect(google.route("GET", "/v1beta/models", q(""))).toEqual({ kind: "models" });
    expect(google.route("POST", "/v1/chat/completions", q(""))).toBeUndefined();
  });
});

describe("the key, where each wire takes it, refused in its own words", () => {
  const check = (wire: Wire, headers: IncomingHttpHeaders, query = "") =>
    wire.checkKey(headers, new URLSearchParams(query), "sk-k");
  test.each([
    [openAIChat, { authorization: "Bearer sk-k" }, undefined],
    [openAIChat, { "api-key": "sk-k" }, undefined],
    [openAIChat, { "x-api-key": "sk-k" }, 401],
    [openAIResponses, { authorization: "Bearer sk-k" }, undefined],
    [openAIResponses, { authorization: "sk-k" }, 401],
    [anthropic, { "x-api-key": "sk-k" }, undefined],
    [anthropic, { authorization: "Bearer sk-k" }, 401],
    [anthropic, { "x-api-key": "sk-other" }, 401],
    [google, { "x-goog-api-key": "sk-k" }, undefined],
    [google, {}, 403],
    [google, { "x-goog-api-key": "sk-other" }, 400],
  ] as Array<[Wire, IncomingHttpHeaders, number | undefined]>)("%#: %s wire, %j", (wire, headers, status) => {
    expect(check(wire, headers)?.status).toBe(status);
  });

  test("the error shapes", () => {
    expect(check(anthropic, {})).toEqual({
      status: 401,
      body: { type: "error", error: { type: "authentication_error", message: "x-api-key header is required" } },
    });
    expect(check(google, { "x-goog-api-key": "sk-other" })!.body).toMatchObject({
      error: { code: 400, status: "INVALID_ARGUMENT", details: [{ reason: "API_KEY_INVALID" }] },
    });
    expect(check(openAIResponses, {})!.body).toMatchObject({ error: { code: "invalid_api_key" } });
  });

  test("a key= query parameter is refused on the google wire, even beside the right header, even unkeyed", () => {
    expect(check(google, { "x-goog-api-key": "sk-k" }, "key=sk-k")?.status).toBe(403);
    expect(google.checkKey({}, new URLSearchParams("key=x"), undefined)?.status).toBe(403);
  });

  test("with no key configured, nothing is refused", () => {
    for (const wire of [openAIChat, openAIResponses, anthropic]) {
      expect(wire.checkKey({}, new URLSearchParams(), undefined)).toBeUndefined();
    }
  });

  test("each wire records the key as it came in its header", () => {
    expect(openAIChat.key({ authorization: "Bearer sk-k" })).toEqual({ header: "authorization", value: "sk-k" });
    expect(openAIChat.key({ "api-key": "sk-k" })).toEqual({ header: "api-key", value: "sk-k" });
    expect(openAIResponses.key({})).toEqual({ header: "authorization", value: undefined });
    expect(anthropic.key({ "x-api-key": "sk-k", authorization: "Bearer x" })).toEqual({
      header: "x-api-key",
      value: "sk-k",
    });
    expect(google.key({ "x-goog-api-key": "sk-k" })).toEqual({ header: "x-goog-api-key", value: "sk-k" });
  });
});

describe("requestLine on each wire", () => {
  const record = (r: Partial<RecordedRequest>): RecordedRequest => ({
    path: "/",
    headers: {},
    authorization: undefined,
    body: {},
    status: 200,
    step: 1,
    ...r,
  });
  test("the conversation's last entry and whether the key passed, never the key", () => {
    const a = requestLine(
      record({
        wire: "anthropic",
        headers: { "x-api-key": "sk-held" },
        body: { messages: [{ role: "user", content: [{ type: "tool_result", content: "out" }] }] },
      }),
      "sk-held",
    );
    expect(a).toMatchObject({ wire: "anthropic", keyed: true, messages: 1, last: { role: "user" } });
    expect(a.last!.content).toContain("tool_result");
    expect(JSON.stringify(a)).not.toContain("sk-held");
    const r = requestLine(
      record({
        wire: "openai-responses",
        headers: { authorization: "Bearer sk-stand-in" },
        body: { input: [{ type: "function_call_output", call_id: "c", output: "hello\n" }] },
      }),
      "sk-held",
    );
    expect(r).toMatchObject({ keyed: false, last: { role: "function_call_output", content: "hello\n" } });
    const g = requestLine(
      record({
        wire: "google",
        query: "alt=sse",
        headers: { "x-goog-api-key": "sk-held" },
        body: { contents: [{ role: "user", parts: [{ text: "hi" }] }] },
      }),
      "sk-held",
    );
    expect(g).toMatchObject({ keyed: true, messages: 1, last: { role: "user", content: '[{"text":"hi"}]' } });
  });
});

describe("the CLI's options", () => {
  test("--wire picks the wire; the default is openai-chat; an unknown one is refused", () => {
    expect(parseArgs(["s.json"])).toMatchObject({ file: "s.json", wire: "openai-chat", port: 0 });
    expect(parseArgs(["s.json", "--wire", "anthropic", "--port", "8000", "--per-conversation"])).toMatchObject({
      wire: "anthropic",
      port: 8000,
      perConversation: true,
    });
    expect(() => parseArgs(["s.json", "--wire", "gemini"])).toThrow(/unknown wire: gemini/);
    expect(() => parseArgs(["s.json", "--wire"])).toThrow(/--wire: openai-chat, anthropic, openai-responses, google/);
  });
});
