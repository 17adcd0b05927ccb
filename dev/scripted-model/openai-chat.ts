// OpenAI Chat Completions (`--wire openai-chat`, the default): POST /v1/chat/completions, answered
// whole or, with `stream: true`, as `data:` chunks shaped like OpenAI's own, which is what
// OpenAI-compatible clients parse (pi-ai's `openai-completions` provider among them): a first chunk
// with the role, `choices[0].delta.content` pieces, `choices[0].delta.tool_calls[{index, id, type,
// function: {name, arguments}}]` with the arguments split across chunks, a last chunk with
// `finish_reason` ("tool_calls" or "stop"), then `usage` when `stream_options.include_usage` asks,
// then `data: [DONE]`. The key comes as `authorization: Bearer <key>` (or Azure's `api-key`).
import type { IncomingHttpHeaders } from "node:http";
import {
  type Answer,
  argumentPieces,
  bearer,
  type Failure,
  header,
  isObject,
  type Meta,
  openAIRoute,
  type Refusal,
  sseFrame,
  textPieces,
  type Usage,
  type Wire,
} from "./wire";

/** OpenAI's error body. */
export function openAIError(status: number, message: string, type: string, code: string | null): Refusal {
  return { status, body: { error: { message, type, param: null, code } } };
}

/** Whether the request carries the key: `authorization: Bearer <key>` (or `api-key: <key>`, the
 * Azure form some clients send). */
export function keyMatches(headers: IncomingHttpHeaders, key: string): boolean {
  const auth = headers.authorization;
  if (typeof auth === "string" && /^bearer\s+/i.test(auth) && auth.replace(/^bearer\s+/i, "") === key) return true;
  return headers["api-key"] === key;
}

export const WRONG_OPENAI_KEY = openAIError(
  401,
  "Incorrect API key provided (the scripted model wants its configured key as a bearer token)",
  "invalid_request_error",
  "invalid_api_key",
);

/** The refusals both OpenAI wires make, in OpenAI's words. */
export function openAIFailure(kind: Failure, message: string): Refusal {
  switch (kind) {
    case "bad-request":
      return openAIError(400, message, "invalid_request_error", null);
    // 400 rather than a 5xx: OpenAI clients retry a 5xx, which would only repeat this.
    case "exhausted":
      return openAIError(400, message, "scripted_model_exhausted", "script_exhausted");
    case "no-route":
      return openAIError(404, message, "invalid_request_error", "unknown_url");
  }
}

export const openAIModels = (id: string) => ({
  object: "list",
  data: [{ id, object: "model", created: 0, owned_by: "jr2-scripted" }],
});

const chatUsage = (u: Usage) => ({
  prompt_tokens: u.input,
  completion_tokens: u.output,
  total_tokens: u.input + u.output,
});

/** The whole-answer form (`stream` absent or false). */
export function chatCompletion(id: string, model: string, created: number, answer: Answer, usage: Usage) {
  return {
    id,
    object: "chat.completion",
    created,
    model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: answer.text,
          ...(answer.calls.length > 0
            ? {
                tool_calls: answer.calls.map((c) => ({
                  id: c.id,
                  type: "function",
                  function: { name: c.name, arguments: c.arguments },
                })),
              }
            : {}),
        },
        logprobs: null,
        finish_reason: answer.finish,
      },
    ],
    usage: chatUsage(usage),
  };
}

/** The streamed form: the chunks, in order, without the closing `[DONE]`; `usage` last when given. */
export function chatChunks(
  id: string,
  model: string,
  created: number,
  answer: Answer,
  usage: Usage | undefined,
): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  // With include_usage, OpenAI sends `usage: null` on every chunk but the last.
  const chunk = (delta: object, finish: string | null = null) => ({
    id,
    object: "chat.completion.chunk",
    created,
    model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    ...(usage ? { usage: null } : {}),
  });
  out.push(chunk({ role: "assistant", content: "" }));
  for (const piece of textPieces(answer.text ?? "")) out.push(chunk({ content: piece }));
  answer.calls.forEach((call, index) => {
    out.push(
      chunk({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] }),
    );
    for (const piece of argumentPieces(call.arguments)) {
      out.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
    }
  });
  out.push(chunk({}, answer.finish));
  if (usage) out.push({ id, object: "chat.completion.chunk", created, model, choices: [], usage: chatUsage(usage) });
  return out;
}

export const openAIChat: Wire = {
  name: "openai-chat",
  routes: "POST /v1/chat/completions, GET /v1/models",
  shape: "a chat completion request: a JSON object with a `messages` array",
  route(method, path) {
    const route = openAIRoute(path);
    if (method === "POST" && route === "/chat/completions") return { kind: "answer" };
    if (method === "GET" && route === "/models") return { kind: "models" };
    return undefined;
  },
  baseUrl: (origin) => `${origin}/v1`,
  key(headers) {
    const auth = header(headers, "authorization");
    const azure = header(headers, "api-key");
    if (auth === undefined && azure !== undefined) return { header: "api-key", value: azure };
    return { header: "authorization", value: bearer(auth) };
  },
  checkKey: (headers, _query, apiKey) =>
    apiKey === undefined || keyMatches(headers, apiKey) ? undefined : WRONG_OPENAI_KEY,
  failure: openAIFailure,
  conversation: (body) => (Array.isArray(body.messages) ? body.messages : undefined),
  prompt: (body) => body.messages ?? [],
  answersIn: (messages) => messages.filter((m) => isObject(m) && m.role === "assistant").length,
  last(messages) {
    const last = messages.at(-1);
    return isObject(last) ? { role: last.role, content: last.content } : undefined;
  },
  reply(answer, meta: Meta) {
    const id = `chatcmpl-scripted-${meta.serial}`;
    if (meta.body.stream !== true) return { json: chatCompletion(id, meta.model, meta.created, answer, meta.usage) };
    const streamOptions = meta.body.stream_options as { include_usage?: unknown } | undefined;
    const usage = streamOptions?.include_usage === true ? meta.usage : undefined;
    const chunks = chatChunks(id, meta.model, meta.created, answer, usage);
    return { sse: [...chunks.map((c) => sseFrame(c)), "data: [DONE]\n\n"] };
  },
  models: openAIModels,
};
