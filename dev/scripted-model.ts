// The built-in scripted model provider (decision 0025): an OpenAI-compatible Chat Completions endpoint on
// loopback that plays a fixed script, so Agents run here with no network and tests know what the
// model will say. node:http only.
//
//   POST /v1/chat/completions   one script step per request, in order: streamed as Server-Sent
//                               Events (`stream: true`) or answered whole
//   GET  /v1/models             the one model it serves
//
// A step is an assistant text answer, or one or more tool calls (optionally after some text), with
// an optional delay before the answer starts. The chunks are shaped like OpenAI's own, which is what
// OpenAI-compatible clients parse (pi-ai's `openai-completions` provider among them): a first chunk
// with the role, `choices[0].delta.content` pieces, `choices[0].delta.tool_calls[{index, id, type,
// function: {name, arguments}}]` with the arguments split across chunks, a last chunk with
// `finish_reason` ("tool_calls" or "stop"), then `usage` when `stream_options.include_usage` asks,
// then `data: [DONE]`.
//
// With `apiKey` set it refuses (401, OpenAI's error shape) any request without `authorization:
// Bearer <key>`: what proves the Custodian swapped the Harness's Stand-in for the held key. Every
// chat request it receives is recorded (headers, the `authorization` it carried, the parsed body),
// refused ones too, so a test can assert what the model was sent back (the tool results).
//
// With `perConversation`, a request's step is where its own conversation is (how many assistant
// answers it holds), so every conversation plays the whole script, turn after turn.
//
// CLI: tsx dev/scripted-model.ts <script.json> [--port N] [--host ADDR] [--key-file PATH]
//        [--per-conversation] [--log]
// The file is a JSON array of steps (or {"steps": [...]}); it prints one JSON line with the URL,
// and with --log one line per chat request answered (requestLine). The companions image carries it
// as /app/scripted-model.js, so a cluster serves it from a pod (docs/decisions/0039-in-cluster-by-default.md).
import { readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";

/** One tool call a step makes: `arguments` an object (sent as its JSON) or a string sent as is
 * (a malformed one included, for tests of what a client does with it). */
export const ScriptedToolCall = z.strictObject({
  name: z.string().min(1),
  arguments: z.union([z.record(z.string(), z.unknown()), z.string()]),
  /** The call's id; default `call_<step>_<index>`. */
  id: z.string().min(1).optional(),
});
export type ScriptedToolCall = z.infer<typeof ScriptedToolCall>;

const delayMs = z.number().int().min(0).optional();
/** One answer of the model: text, or tool calls (with optional text before them). `delayMs` waits
 * before the answer starts (before the response headers). */
export const ScriptStep = z.union([
  z.strictObject({ text: z.string(), delayMs }),
  z.strictObject({ toolCalls: z.array(ScriptedToolCall).min(1), text: z.string().optional(), delayMs }),
]);
export type ScriptStep = z.infer<typeof ScriptStep>;
export const Script = z.array(ScriptStep);

/** One chat request as received. `step` is the script step it was answered with (0-based), absent
 * when it was refused (a wrong key, a bad body, the script exhausted); `status` is what it got. */
export type RecordedRequest = {
  path: string;
  headers: IncomingHttpHeaders;
  authorization: string | undefined;
  /** The parsed JSON body (the raw text when it was not JSON). */
  body: unknown;
  status: number;
  step?: number;
};

export type ScriptedModelOptions = {
  script: ScriptStep[];
  /** When set, every request must carry `authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Default 0: any free port. */
  port?: number;
  /** Default 127.0.0.1; `0.0.0.0` when it serves a cluster from a pod (`--host`). */
  host?: string;
  /** Called with each chat request once it has been answered (or refused). */
  onAnswered?: (request: RecordedRequest) => void;
  /** The model id it serves (listed by /v1/models; echoed when a request names none). */
  model?: string;
  /** Each request gets the step its own conversation is at (the number of assistant answers it
   * already holds, modulo the script's length) instead of the next in arrival order: the script
   * is then every conversation's, and never runs out. What `npm start` plays. */
  perConversation?: boolean;
};

export type ScriptedModel = {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** `url + "/v1"`: the base URL an OpenAI-compatible client is given. */
  baseUrl: string;
  port: number;
  /** Every chat request received, in arrival order. */
  requests: RecordedRequest[];
  /** How many steps have been played. */
  readonly played: number;
  stop(): Promise<void>;
};

export const SCRIPTED_MODEL_ID = "scripted";
const MAX_BODY = 32 * 1024 * 1024;

type OpenAIError = { status: number; message: string; type: string; code: string | null };

function sendError(res: ServerResponse, e: OpenAIError): void {
  const body = JSON.stringify({ error: { message: e.message, type: e.type, param: null, code: e.code } });
  res.writeHead(e.status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function sendJson(res: ServerResponse, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error(`request body over ${MAX_BODY} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A rough token count (four characters a token): enough for `usage` to be plausible. */
const tokens = (text: string) => Math.ceil(text.length / 4);

/** The text in pieces as a model streams it: a word and the space after it, each. */
export function textPieces(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text ? [text] : []);
}

/** A JSON string cut in two (a client must join the pieces before it parses them). */
function argumentPieces(json: string): string[] {
  if (json.length < 2) return [json];
  const half = Math.ceil(json.length / 2);
  return [json.slice(0, half), json.slice(half)];
}

type Answer = {
  text: string | null;
  calls: Array<{ id: string; name: string; arguments: string }>;
  finish: "stop" | "tool_calls";
};

function answerOf(step: ScriptStep, index: number): Answer {
  if ("toolCalls" in step) {
    return {
      text: step.text ?? null,
      calls: step.toolCalls.map((c, i) => ({
        id: c.id ?? `call_${index}_${i}`,
        name: c.name,
        arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments),
      })),
      finish: "tool_calls",
    };
  }
  return { text: step.text, calls: [], finish: "stop" };
}

function usageOf(body: Record<string, unknown>, answer: Answer) {
  const prompt = tokens(JSON.stringify(body.messages ?? []));
  const completion = tokens((answer.text ?? "") + answer.calls.map((c) => c.name + c.arguments).join(""));
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** The whole-answer form (`stream` absent or false). */
function completion(id: string, model: string, created: number, answer: Answer, usage: object) {
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
    usage,
  };
}

/** The streamed form: the chunks, in order, without the closing `[DONE]`. */
function chunks(
  id: string,
  model: string,
  created: number,
  answer: Answer,
  usage: object | undefined,
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
  if (usage) out.push({ id, object: "chat.completion.chunk", created, model, choices: [], usage });
  return out;
}

/** Whether the request carries the key: `authorization: Bearer <key>` (or `api-key: <key>`, the
 * Azure form some clients send). */
function keyMatches(headers: IncomingHttpHeaders, key: string): boolean {
  const auth = headers.authorization;
  if (typeof auth === "string" && /^bearer\s+/i.test(auth) && auth.replace(/^bearer\s+/i, "") === key) return true;
  return headers["api-key"] === key;
}

const WRONG_KEY: OpenAIError = {
  status: 401,
  message: "Incorrect API key provided (the scripted model wants its configured key as a bearer token)",
  type: "invalid_request_error",
  code: "invalid_api_key",
};

export async function startScriptedModel(options: ScriptedModelOptions): Promise<ScriptedModel> {
  const script = Script.parse(options.script);
  const servedModel = options.model ?? SCRIPTED_MODEL_ID;
  const requests: RecordedRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let next = 0;
  let serial = 0;

  const wait = (ms: number, res: ServerResponse) =>
    new Promise<boolean>((resolve) => {
      if (ms <= 0) return resolve(true);
      const timer = setTimeout(() => {
        timers.delete(timer);
        res.off("close", onClose);
        resolve(true);
      }, ms);
      const onClose = () => {
        clearTimeout(timer);
        timers.delete(timer);
        resolve(false);
      };
      timers.add(timer);
      res.once("close", onClose);
    });

  async function chat(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const raw = await readBody(req);
    let body: unknown = raw;
    try {
      body = JSON.parse(raw);
    } catch {
      // Recorded as the raw text, refused below.
    }
    const record: RecordedRequest = {
      path,
      headers: req.headers,
      authorization: req.headers.authorization,
      body,
      status: 0,
    };
    requests.push(record);
    if (options.onAnswered) res.once("close", () => options.onAnswered!(record));
    const refuse = (e: OpenAIError) => {
      record.status = e.status;
      sendError(res, e);
    };
    if (options.apiKey !== undefined && !keyMatches(req.headers, options.apiKey)) return refuse(WRONG_KEY);
    const request = isObject(body) ? body : undefined;
    if (!request || !Array.isArray(request.messages)) {
      return refuse({
        status: 400,
        message: "the body is not a chat completion request: a JSON object with a `messages` array",
        type: "invalid_request_error",
        code: null,
      });
    }
    if (!options.perConversation && next >= script.length) {
      // 400 rather than a 5xx: OpenAI clients retry a 5xx, which would only repeat this.
      return refuse({
        status: 400,
        message: `the script has ${script.length} steps and all have been played (request ${requests.length})`,
        type: "scripted_model_exhausted",
        code: "script_exhausted",
      });
    }
    const index = options.perConversation ? answersIn(request.messages) % script.length : next;
    next++;
    const step = script[index]!;
    record.step = index;
    record.status = 200;
    if (!(await wait(step.delayMs ?? 0, res))) return;

    // Tool call ids stay unique across a conversation that plays the script more than once.
    const answer = answerOf(step, options.perConversation ? next - 1 : index);
    const id = `chatcmpl-scripted-${++serial}`;
    const model = typeof request.model === "string" && request.model ? request.model : servedModel;
    const created = Math.floor(Date.now() / 1000);
    const usage = usageOf(request, answer);
    if (request.stream !== true) return sendJson(res, completion(id, model, created, answer, usage));

    const streamOptions = request.stream_options as { include_usage?: unknown } | undefined;
    const withUsage = streamOptions?.include_usage === true;
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    for (const c of chunks(id, model, created, answer, withUsage ? usage : undefined)) {
      res.write(`data: ${JSON.stringify(c)}\n\n`);
    }
    res.end("data: [DONE]\n\n");
  }

  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!.replace(/\/+$/, "");
    const route = path.replace(/^\/v1(?=\/)/, "");
    if (req.method === "POST" && route === "/chat/completions") {
      chat(req, res, path).catch((err: unknown) => {
        if (res.headersSent) return res.destroy();
        sendError(res, { status: 400, message: String(err), type: "invalid_request_error", code: null });
      });
      return;
    }
    if (req.method === "GET" && route === "/models") {
      if (options.apiKey !== undefined && !keyMatches(req.headers, options.apiKey)) return sendError(res, WRONG_KEY);
      return sendJson(res, {
        object: "list",
        data: [{ id: servedModel, object: "model", created: 0, owned_by: "jr2-scripted" }],
      });
    }
    sendError(res, {
      status: 404,
      message: `no route ${req.method} ${path}: this is a scripted model (POST /v1/chat/completions, GET /v1/models)`,
      type: "invalid_request_error",
      code: "unknown_url",
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    baseUrl: `${url}/v1`,
    port,
    requests,
    get played() {
      return next;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        timers.clear();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** How many assistant answers a conversation already holds. */
const answersIn = (messages: unknown[]) => messages.filter((m) => isObject(m) && m.role === "assistant").length;

/** A script file: a JSON array of steps, or an object with `steps`. */
export function readScript(file: string): ScriptStep[] {
  const parsed: unknown = JSON.parse(readFileSync(file, "utf8"));
  return Script.parse(Array.isArray(parsed) ? parsed : isObject(parsed) ? parsed.steps : parsed);
}

/**
 * One answered request as `--log` prints it, for whoever can read only the model's log (a test of
 * a model served from a pod): whether it carried the configured key (never the key itself, nor the
 * authorization it carried), and the conversation's last message, which is what the client sent
 * back (a tool's result, a person's answer).
 */
export function requestLine(r: RecordedRequest, apiKey: string | undefined) {
  const messages = isObject(r.body) && Array.isArray(r.body.messages) ? r.body.messages : [];
  const last: unknown = messages.at(-1);
  const content = isObject(last) ? last.content : undefined;
  return {
    message: "chat request",
    path: r.path,
    status: r.status,
    step: r.step,
    keyed: apiKey === undefined ? undefined : keyMatches(r.headers, apiKey),
    messages: messages.length,
    last: isObject(last)
      ? {
          role: last.role,
          content: (typeof content === "string" ? content : JSON.stringify(content ?? "")).slice(0, 2000),
        }
      : undefined,
  };
}

async function cli(argv: string[]): Promise<void> {
  const usage =
    "usage: tsx dev/scripted-model.ts <script.json> [--port N] [--host ADDR] [--key-file PATH] [--per-conversation] [--log]";
  let file: string | undefined;
  let port = 0;
  let host: string | undefined;
  let apiKey: string | undefined;
  let perConversation = false;
  let log = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--port") port = Number(argv[++i]);
    else if (arg === "--host") host = argv[++i];
    else if (arg === "--log") log = true;
    else if (arg === "--per-conversation") perConversation = true;
    else if (arg === "--key-file") apiKey = readFileSync(argv[++i] ?? "", "utf8").trim();
    else if (!arg.startsWith("--") && file === undefined) file = arg;
    else throw new Error(`${usage}\nunknown argument: ${arg}`);
  }
  if (!file) throw new Error(usage);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port is not a port number\n${usage}`);
  const script = readScript(file);
  const model = await startScriptedModel({
    script,
    apiKey,
    port,
    host,
    perConversation,
    onAnswered: log ? (r) => process.stdout.write(`${JSON.stringify(requestLine(r, apiKey))}\n`) : undefined,
  });
  const line = { message: "scripted model listening", url: model.url, baseUrl: model.baseUrl, steps: script.length };
  process.stdout.write(`${JSON.stringify({ ...line, keyed: apiKey !== undefined })}\n`);
  const stop = () => void model.stop().then(() => process.exit(0));
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
}

// The CLI when this file is the program run (not when a bundle or a test has it inside).
if (require.main === module && /scripted-model\.[cm]?[jt]s$/.test(__filename)) {
  cli(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
