// The built-in scripted model provider (decision 0025): a model endpoint on loopback that plays a
// fixed script, so Agents run here with no network and tests know what the model will say.
// node:http only.
//
// It speaks one wire format, chosen by `wire` (`--wire`), each an encoder of its own under
// dev/scripted-model/, where each one's routes and shapes are described:
//   openai-chat        (the default) OpenAI Chat Completions: POST /v1/chat/completions
//   anthropic          Anthropic Messages: POST /v1/messages
//   openai-responses   OpenAI Responses: POST /v1/responses
//   google             Gemini: POST /v1beta/models/{model}:generateContent and :streamGenerateContent
// and lists the one model it serves (GET /v1/models; Gemini's GET /v1beta/models). One script step
// per request, in order, streamed as Server-Sent Events (`stream: true`, or Gemini's stream method)
// or answered whole; a path of another wire is a 404 that names the one it speaks.
//
// A step is an assistant text answer, or one or more tool calls (optionally after some text), with
// an optional delay before the answer starts. Usage is estimated (four characters a token) and
// reported in the wire's own fields.
//
// With `apiKey` set it refuses, in the wire's own words, any request without the key where the wire
// takes it (`authorization: Bearer <key>` for both OpenAI wires, `x-api-key` for Anthropic's,
// `x-goog-api-key` for Gemini's): what proves the Custodian swapped the Harness's Stand-in for the
// held key. Every request for an answer is recorded (headers, the key it carried, the parsed body),
// refused ones too, so a test can assert what the model was sent back (the tool results).
//
// With `perConversation`, a request's step is where its own conversation is (how many of the
// model's answers it holds), so every conversation plays the whole script, turn after turn.
//
// CLI: tsx dev/scripted-model.ts <script.json> [--wire W] [--port N] [--host ADDR] [--key-file PATH]
//        [--per-conversation] [--log]
// The file is a JSON array of steps (or {"steps": [...]}); it prints one JSON line with the URL,
// and with --log one line per request answered (requestLine). The companions image carries it
// as /app/scripted-model.js, so a cluster serves it from a pod (docs/decisions/0039-in-cluster-by-default.md).
import { readFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { anthropic } from "./scripted-model/anthropic";
import { google } from "./scripted-model/google";
import { openAIChat } from "./scripted-model/openai-chat";
import { openAIResponses } from "./scripted-model/openai-responses";
import {
  type Answer,
  answerTokens,
  isObject,
  type Refusal,
  type Route,
  textPieces,
  tokens,
  type Wire,
  WIRES,
  type WireName,
} from "./scripted-model/wire";

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

/** One request for an answer as received. `step` is the script step it was answered with
 * (0-based), absent when it was refused (a wrong key, a bad body, the script exhausted); `status` is
 * what it got. The server sets every field; `wire`, `query` and `keyHeader` are optional so that a
 * record made by hand for requestLine (a test's, from before there were wires) still is one. */
export type RecordedRequest = {
  /** The wire that received it (absent: `openai-chat`). */
  wire?: WireName;
  /** Without the query. */
  path: string;
  /** The query without its `?` ("" when none): `beta=true` from the Anthropic SDK, `alt=sse`. */
  query?: string;
  headers: IncomingHttpHeaders;
  /** The `authorization` header as received, on every wire. */
  authorization: string | undefined;
  /** The header the wire takes its key in: `authorization` (OpenAI's; `api-key` when a Chat
   * Completions request carried that alone), `x-api-key` (Anthropic's), `x-goog-api-key` (Gemini's). */
  keyHeader?: string;
  /** The key as received in that header (a bearer token without its `Bearer `), if any. */
  key?: string;
  /** The parsed JSON body (the raw text when it was not JSON). */
  body: unknown;
  status: number;
  step?: number;
};

export type ScriptedModelOptions = {
  script: ScriptStep[];
  /** The wire format it speaks. Default `openai-chat`. */
  wire?: WireName;
  /** When set, every request must carry this key where the wire takes it. */
  apiKey?: string;
  /** Default 0: any free port. */
  port?: number;
  /** Default 127.0.0.1; `0.0.0.0` when it serves a cluster from a pod (`--host`). */
  host?: string;
  /** Called with each request for an answer once it has been answered (or refused). */
  onAnswered?: (request: RecordedRequest) => void;
  /** The model id it serves (listed by GET models; echoed when a request names none). */
  model?: string;
  /** Each request gets the step its own conversation is at (the number of the model's answers it
   * already holds, modulo the script's length) instead of the next in arrival order: the script
   * is then every conversation's, and never runs out. What `npm start` plays. */
  perConversation?: boolean;
};

export type ScriptedModel = {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  /** The base URL the wire's clients (pi-ai's among them) are given: `url + "/v1"` for both OpenAI
   * wires, `url` for Anthropic's (its SDK adds /v1), `url + "/v1beta"` for Gemini's. */
  baseUrl: string;
  wire: WireName;
  port: number;
  /** Every request for an answer received, in arrival order. */
  requests: RecordedRequest[];
  /** How many steps have been played. */
  readonly played: number;
  stop(): Promise<void>;
};

export const SCRIPTED_MODEL_ID = "scripted";
const MAX_BODY = 32 * 1024 * 1024;

export { textPieces, WIRES, type WireName };

const ENCODERS: Record<WireName, Wire> = {
  "openai-chat": openAIChat,
  anthropic,
  "openai-responses": openAIResponses,
  google,
};

function send(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

const refuseWith = (res: ServerResponse, r: Refusal) => send(res, r.status, r.body);

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

export async function startScriptedModel(options: ScriptedModelOptions): Promise<ScriptedModel> {
  const script = Script.parse(options.script);
  const wireName = options.wire ?? "openai-chat";
  const wire = ENCODERS[wireName];
  if (!wire) throw new Error(`unknown wire ${JSON.stringify(wireName)}: one of ${WIRES.join(", ")}`);
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

  async function answer(req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams, route: Route) {
    const raw = await readBody(req);
    let body: unknown = raw;
    try {
      body = JSON.parse(raw);
    } catch {
      // Recorded as the raw text, refused below.
    }
    const seen = wire.key(req.headers);
    const record: RecordedRequest = {
      wire: wire.name,
      path,
      query: query.toString(),
      headers: req.headers,
      authorization: req.headers.authorization,
      keyHeader: seen.header,
      key: seen.value,
      body,
      status: 0,
    };
    requests.push(record);
    if (options.onAnswered) res.once("close", () => options.onAnswered!(record));
    const refuse = (r: Refusal) => {
      record.status = r.status;
      refuseWith(res, r);
    };
    const keyRefusal = wire.checkKey(req.headers, query, options.apiKey);
    if (keyRefusal) return refuse(keyRefusal);
    const request = isObject(body) ? body : undefined;
    const conversation = request && wire.conversation(request);
    if (!request || !conversation) return refuse(wire.failure("bad-request", `the body is not ${wire.shape}`));
    if (!options.perConversation && next >= script.length) {
      return refuse(
        wire.failure(
          "exhausted",
          `the script has ${script.length} steps and all have been played (request ${requests.length})`,
        ),
      );
    }
    const index = options.perConversation ? wire.answersIn(conversation) % script.length : next;
    next++;
    const step = script[index]!;
    record.step = index;
    record.status = 200;
    if (!(await wait(step.delayMs ?? 0, res))) return;

    // Tool call ids stay unique across a conversation that plays the script more than once.
    const scripted = answerOf(step, options.perConversation ? next - 1 : index);
    const named = route.kind === "answer" ? route.model : undefined;
    const reply = wire.reply(scripted, {
      serial: ++serial,
      model: named ?? (typeof request.model === "string" && request.model ? request.model : servedModel),
      created: Math.floor(Date.now() / 1000),
      usage: { input: tokens(JSON.stringify(wire.prompt(request))), output: answerTokens(scripted) },
      body: request,
      route,
    });
    if ("json" in reply) return send(res, 200, reply.json);
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      connection: "keep-alive",
    });
    const frames = reply.sse;
    for (const frame of frames.slice(0, -1)) res.write(frame);
    res.end(frames.at(-1));
  }

  const server = createServer((req, res) => {
    const [rawPath, rawQuery] = (req.url ?? "/").split("?", 2) as [string, string | undefined];
    const path = rawPath.replace(/\/+$/, "");
    const query = new URLSearchParams(rawQuery ?? "");
    const method = req.method ?? "GET";
    const route = wire.route(method, path, query);
    if (route?.kind === "answer") {
      answer(req, res, path, query, route).catch((err: unknown) => {
        if (res.headersSent) return res.destroy();
        refuseWith(res, wire.failure("bad-request", String(err)));
      });
      return;
    }
    if (route?.kind === "models") {
      const refusal = wire.checkKey(req.headers, query, options.apiKey);
      if (refusal) return refuseWith(res, refusal);
      return send(res, 200, wire.models(servedModel));
    }
    refuseWith(
      res,
      wire.failure(
        "no-route",
        `no route ${method} ${path}: this is a scripted model speaking the ${wire.name} wire (${wire.routes})`,
      ),
    );
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
    baseUrl: wire.baseUrl(url),
    wire: wire.name,
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

/** A script file: a JSON array of steps, or an object with `steps`. */
export function readScript(file: string): ScriptStep[] {
  const parsed: unknown = JSON.parse(readFileSync(file, "utf8"));
  return Script.parse(Array.isArray(parsed) ? parsed : isObject(parsed) ? parsed.steps : parsed);
}

/**
 * One answered request as `--log` prints it, for whoever can read only the model's log (a test of
 * a model served from a pod): whether it carried the configured key (never the key itself, nor the
 * header it carried), and the conversation's last entry, which is what the client sent back (a
 * tool's result, a person's answer).
 */
export function requestLine(r: RecordedRequest, apiKey: string | undefined) {
  const wire = ENCODERS[r.wire ?? "openai-chat"];
  const conversation = (isObject(r.body) && wire.conversation(r.body)) || [];
  const last = wire.last(conversation);
  const content = last?.content;
  return {
    message: "chat request",
    wire: wire.name,
    path: r.path,
    // Which header the key came in (never the key).
    keyHeader: r.keyHeader,
    status: r.status,
    step: r.step,
    // Whether it passed the wire's own check, from the headers it came with.
    keyed:
      apiKey === undefined
        ? undefined
        : wire.checkKey(r.headers, new URLSearchParams(r.query ?? ""), apiKey) === undefined,
    messages: conversation.length,
    last: last
      ? {
          role: last.role,
          content: (typeof content === "string" ? content : JSON.stringify(content ?? "")).slice(0, 2000),
        }
      : undefined,
  };
}

/** The CLI's options. */
export function parseArgs(argv: string[]) {
  const usage =
    "usage: tsx dev/scripted-model.ts <script.json> [--wire W] [--port N] [--host ADDR] [--key-file PATH] [--per-conversation] [--log]" +
    `\n  --wire: ${WIRES.join(", ")} (default openai-chat)`;
  let file: string | undefined;
  let port = 0;
  let host: string | undefined;
  let keyFile: string | undefined;
  let wire: WireName = "openai-chat";
  let perConversation = false;
  let log = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--port") port = Number(argv[++i]);
    else if (arg === "--host") host = argv[++i];
    else if (arg === "--log") log = true;
    else if (arg === "--per-conversation") perConversation = true;
    else if (arg === "--key-file") keyFile = argv[++i] ?? "";
    else if (arg === "--wire") {
      const w = argv[++i] ?? "";
      if (!(WIRES as readonly string[]).includes(w)) throw new Error(`${usage}\nunknown wire: ${w}`);
      wire = w as WireName;
    } else if (!arg.startsWith("--") && file === undefined) file = arg;
    else throw new Error(`${usage}\nunknown argument: ${arg}`);
  }
  if (!file) throw new Error(usage);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`--port is not a port number\n${usage}`);
  return { file, port, host, keyFile, wire, perConversation, log };
}

async function cli(argv: string[]): Promise<void> {
  const args = parseArgs(argv);
  const apiKey = args.keyFile === undefined ? undefined : readFileSync(args.keyFile, "utf8").trim();
  const script = readScript(args.file);
  const model = await startScriptedModel({
    script,
    wire: args.wire,
    apiKey,
    port: args.port,
    host: args.host,
    perConversation: args.perConversation,
    onAnswered: args.log ? (r) => process.stdout.write(`${JSON.stringify(requestLine(r, apiKey))}\n`) : undefined,
  });
  const line = { message: "scripted model listening", url: model.url, baseUrl: model.baseUrl, steps: script.length };
  process.stdout.write(`${JSON.stringify({ ...line, wire: model.wire, keyed: apiKey !== undefined })}\n`);
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
