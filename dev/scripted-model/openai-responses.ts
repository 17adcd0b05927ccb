// OpenAI's Responses API (`--wire openai-responses`): POST /v1/responses, answered whole or, with
// `stream: true`, as the named events OpenAI sends, each with its `sequence_number`:
// `response.created`, `response.in_progress`, then per output item `response.output_item.added`,
// for a `message` its `response.content_part.added`, `response.output_text.delta` pieces,
// `response.output_text.done` and `response.content_part.done`, for a `function_call` (`call_id`,
// `name`, `arguments`) its `response.function_call_arguments.delta` pieces and `.done`, then
// `response.output_item.done`; last `response.completed` with the whole `response.output` and
// `response.usage`. The key comes as `authorization: Bearer <key>`; refusals are OpenAI's.
import {
  type Answer,
  argumentPieces,
  bearer,
  header,
  isObject,
  openAIRoute,
  sseFrame,
  textPieces,
  type Usage,
  type Wire,
} from "./wire";
import { openAIFailure, openAIModels, WRONG_OPENAI_KEY } from "./openai-chat";

type Event = Record<string, unknown> & { type: string };
type Status = "in_progress" | "completed";

/** The answer's output items, in order: its message (when it has text), then its function calls.
 * Item ids start `msg_` and `fc_` as OpenAI's do: pi replays a function call's id only when it does. */
function items(id: string, answer: Answer, status: Status) {
  const message =
    answer.text === null
      ? []
      : [
          {
            id: `msg_${id}`,
            type: "message",
            status,
            role: "assistant",
            content: status === "completed" ? [{ type: "output_text", text: answer.text, annotations: [] }] : [],
          },
        ];
  const calls = answer.calls.map((c, i) => ({
    id: `fc_${id}_${i}`,
    type: "function_call",
    status,
    arguments: status === "completed" ? c.arguments : "",
    call_id: c.id,
    name: c.name,
  }));
  return [...message, ...calls];
}

const responsesUsage = (u: Usage) => ({
  input_tokens: u.input,
  input_tokens_details: { cached_tokens: 0 },
  output_tokens: u.output,
  output_tokens_details: { reasoning_tokens: 0 },
  total_tokens: u.input + u.output,
});

/** The response object; `output` and `usage` filled once it is completed. */
export function responseObject(
  id: string,
  model: string,
  created: number,
  answer: Answer,
  usage: Usage,
  status: Status,
) {
  const done = status === "completed";
  return {
    id: `resp_${id}`,
    object: "response",
    created_at: created,
    status,
    error: null,
    incomplete_details: null,
    model,
    output: done ? items(id, answer, "completed") : [],
    parallel_tool_calls: true,
    usage: done ? responsesUsage(usage) : null,
  };
}

/** The streamed form: every event, in order. */
export function responsesEvents(id: string, model: string, created: number, answer: Answer, usage: Usage): Event[] {
  const out: Event[] = [];
  const push = (event: Event) => out.push({ ...event, sequence_number: out.length });
  const response = (status: Status) => responseObject(id, model, created, answer, usage, status);
  push({ type: "response.created", response: response("in_progress") });
  push({ type: "response.in_progress", response: response("in_progress") });
  const opened = items(id, answer, "in_progress");
  const done = items(id, answer, "completed");
  done.forEach((item, output_index) => {
    push({ type: "response.output_item.added", output_index, item: opened[output_index] });
    const item_id = item.id;
    if (item.type === "message") {
      const text = answer.text ?? "";
      const part = (t: string) => ({ type: "output_text", text: t, annotations: [] });
      push({ type: "response.content_part.added", item_id, output_index, content_index: 0, part: part("") });
      for (const delta of textPieces(text)) {
        push({ type: "response.output_text.delta", item_id, output_index, content_index: 0, delta, logprobs: [] });
      }
      push({ type: "response.output_text.done", item_id, output_index, content_index: 0, text, logprobs: [] });
      push({ type: "response.content_part.done", item_id, output_index, content_index: 0, part: part(text) });
    } else if ("arguments" in item) {
      for (const delta of argumentPieces(item.arguments)) {
        push({ type: "response.function_call_arguments.delta", item_id, output_index, delta });
      }
      push({ type: "response.function_call_arguments.done", item_id, output_index, arguments: item.arguments });
    }
    push({ type: "response.output_item.done", output_index, item });
  });
  push({ type: "response.completed", response: response("completed") });
  return out;
}

/** Whether an input item is the model's own output replayed. */
const isOutput = (item: unknown) =>
  isObject(item) &&
  (((item.type === "message" || item.type === undefined) && item.role === "assistant") ||
    item.type === "function_call" ||
    item.type === "reasoning");

/**
 * How many of the model's answers the input replays. An answer comes back as a run of its output
 * items (reasoning, a message, function calls), and something of the client's (a user message, the
 * calls' outputs) comes between two answers; a message after a function call in one run would begin
 * another answer, since an answer's text comes before its calls.
 */
export function responsesAnswersIn(input: unknown[]): number {
  let count = 0;
  let previous: unknown;
  for (const item of input) {
    if (isOutput(item)) {
      const continues =
        isOutput(previous) &&
        !(isObject(item) && item.role === "assistant" && isObject(previous) && previous.type === "function_call");
      if (!continues) count++;
    }
    previous = item;
  }
  return count;
}

export const openAIResponses: Wire = {
  name: "openai-responses",
  routes: "POST /v1/responses, GET /v1/models",
  shape: "a Responses request: a JSON object with an `input` (an array of items, or a string)",
  route(method, path) {
    const route = openAIRoute(path);
    if (method === "POST" && route === "/responses") return { kind: "answer" };
    if (method === "GET" && route === "/models") return { kind: "models" };
    return undefined;
  },
  baseUrl: (origin) => `${origin}/v1`,
  key: (headers) => ({ header: "authorization", value: bearer(header(headers, "authorization")) }),
  checkKey(headers, _query, apiKey) {
    if (apiKey === undefined) return undefined;
    const auth = header(headers, "authorization") ?? "";
    return /^bearer\s+/i.test(auth) && bearer(auth) === apiKey ? undefined : WRONG_OPENAI_KEY;
  },
  failure: openAIFailure,
  conversation(body) {
    if (typeof body.input === "string") return [{ role: "user", content: body.input }];
    return Array.isArray(body.input) ? body.input : undefined;
  },
  prompt: (body) => ({ instructions: body.instructions, input: body.input }),
  answersIn: responsesAnswersIn,
  last(input) {
    const last = input.at(-1);
    if (!isObject(last)) return undefined;
    // A function call's output has no role: its type stands in.
    return { role: last.role ?? last.type, content: last.content ?? last.output ?? last.arguments };
  },
  reply(answer, meta) {
    const id = `scripted_${meta.serial}`;
    if (meta.body.stream !== true) {
      return { json: responseObject(id, meta.model, meta.created, answer, meta.usage, "completed") };
    }
    return { sse: responsesEvents(id, meta.model, meta.created, answer, meta.usage).map((e) => sseFrame(e, e.type)) };
  },
  models: openAIModels,
};
