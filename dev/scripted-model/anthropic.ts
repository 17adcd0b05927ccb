// Anthropic's Messages API (`--wire anthropic`): POST /v1/messages, answered whole or, with
// `stream: true`, as the named events Anthropic sends: `message_start` (the message, empty, with
// `usage.input_tokens`), `ping`, per content block a `content_block_start`, its
// `content_block_delta`s (`text_delta` pieces, or `input_json_delta` pieces of a `tool_use` block's
// input, which starts as `{}`) and `content_block_stop`, then `message_delta` (`stop_reason`
// `tool_use` or `end_turn`, `usage.output_tokens`) and `message_stop`. The key comes in
// `x-api-key`; refusals are Anthropic's `{type: "error", error: {type, message}}`. The Anthropic SDK
// (pi-ai's `anthropic-messages`) posts to /v1/messages?beta=true: the query is ignored.
import {
  type Answer,
  argumentPieces,
  type Failure,
  header,
  isObject,
  parsedArguments,
  type Refusal,
  sseFrame,
  textPieces,
  type Usage,
  type Wire,
} from "./wire";

type Event = { event: string; data: Record<string, unknown> };

export function anthropicError(status: number, type: string, message: string): Refusal {
  return { status, body: { type: "error", error: { type, message } } };
}

const stopReason = (answer: Answer) => (answer.finish === "tool_calls" ? "tool_use" : "end_turn");

/** The content blocks of the whole answer: its text, then one `tool_use` per call. */
function blocks(answer: Answer) {
  return [
    ...(answer.text !== null ? [{ type: "text", text: answer.text }] : []),
    ...answer.calls.map((c) => ({ type: "tool_use", id: c.id, name: c.name, input: parsedArguments(c.arguments) })),
  ];
}

/** The whole-answer form (`stream` absent or false). */
export function anthropicMessage(id: string, model: string, answer: Answer, usage: Usage) {
  return {
    id,
    type: "message",
    role: "assistant",
    model,
    content: blocks(answer),
    stop_reason: stopReason(answer),
    stop_sequence: null,
    usage: { input_tokens: usage.input, output_tokens: usage.output },
  };
}

/** The streamed form: every event, in order. */
export function anthropicEvents(id: string, model: string, answer: Answer, usage: Usage): Event[] {
  const out: Event[] = [];
  const push = (data: Record<string, unknown> & { type: string }) => out.push({ event: data.type, data });
  push({
    type: "message_start",
    message: {
      id,
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      // Anthropic counts the first output token here already; message_delta has the total.
      usage: { input_tokens: usage.input, output_tokens: 1 },
    },
  });
  push({ type: "ping" });
  let index = 0;
  if (answer.text !== null) {
    push({ type: "content_block_start", index, content_block: { type: "text", text: "" } });
    for (const piece of textPieces(answer.text)) {
      push({ type: "content_block_delta", index, delta: { type: "text_delta", text: piece } });
    }
    push({ type: "content_block_stop", index });
    index++;
  }
  for (const call of answer.calls) {
    push({
      type: "content_block_start",
      index,
      content_block: { type: "tool_use", id: call.id, name: call.name, input: {} },
    });
    // Anthropic opens a tool's input with an empty piece before the JSON itself.
    for (const piece of ["", ...argumentPieces(call.arguments)]) {
      push({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: piece } });
    }
    push({ type: "content_block_stop", index });
    index++;
  }
  push({
    type: "message_delta",
    delta: { stop_reason: stopReason(answer), stop_sequence: null },
    usage: { output_tokens: usage.output },
  });
  push({ type: "message_stop" });
  return out;
}

function failure(kind: Failure, message: string): Refusal {
  switch (kind) {
    case "bad-request":
    case "exhausted":
      return anthropicError(400, "invalid_request_error", message);
    case "no-route":
      return anthropicError(404, "not_found_error", message);
  }
}

export const anthropic: Wire = {
  name: "anthropic",
  routes: "POST /v1/messages, GET /v1/models",
  shape: "a Messages request: a JSON object with a `messages` array",
  route(method, path) {
    if (method === "POST" && path === "/v1/messages") return { kind: "answer" };
    if (method === "GET" && path === "/v1/models") return { kind: "models" };
    return undefined;
  },
  // The Anthropic SDK adds /v1 itself.
  baseUrl: (origin) => origin,
  key: (headers) => ({ header: "x-api-key", value: header(headers, "x-api-key") }),
  checkKey(headers, _query, apiKey) {
    if (apiKey === undefined) return undefined;
    const key = header(headers, "x-api-key");
    if (key === undefined) return anthropicError(401, "authentication_error", "x-api-key header is required");
    return key === apiKey ? undefined : anthropicError(401, "authentication_error", "invalid x-api-key");
  },
  failure,
  conversation: (body) => (Array.isArray(body.messages) ? body.messages : undefined),
  prompt: (body) => ({ system: body.system, messages: body.messages }),
  answersIn: (messages) => messages.filter((m) => isObject(m) && m.role === "assistant").length,
  last(messages) {
    const last = messages.at(-1);
    return isObject(last) ? { role: last.role, content: last.content } : undefined;
  },
  reply(answer, meta) {
    const id = `msg_scripted_${meta.serial}`;
    if (meta.body.stream !== true) return { json: anthropicMessage(id, meta.model, answer, meta.usage) };
    return { sse: anthropicEvents(id, meta.model, answer, meta.usage).map((e) => sseFrame(e.data, e.event)) };
  },
  models: (id) => ({
    data: [{ type: "model", id, display_name: id, created_at: "1970-01-01T00:00:00Z" }],
    has_more: false,
    first_id: id,
    last_id: id,
  }),
};
