// What every wire format of the scripted model (dev/scripted-model.ts) shares: the answer a script
// step becomes, the pieces it is streamed in, the token estimate, and the shape of a wire (its
// routes, where it takes the key, its conversation, its errors and its encoder). Each wire is a
// module beside this one; the server picks one by name and knows nothing of their formats.
import type { IncomingHttpHeaders } from "node:http";

export const WIRES = ["openai-chat", "anthropic", "openai-responses", "google"] as const;
export type WireName = (typeof WIRES)[number];

/** One script step as a wire encodes it: text (null when the step has none) and tool calls, each
 * with its id and its arguments as the JSON text to send. */
export type Answer = {
  text: string | null;
  calls: Array<{ id: string; name: string; arguments: string }>;
  finish: "stop" | "tool_calls";
};

/** Estimated tokens: the prompt's, and the answer's. */
export type Usage = { input: number; output: number };

/** What the server knows of the request an answer goes to. */
export type Meta = {
  /** This answer's own id (unique per server): each wire prefixes it its own way. */
  serial: number;
  /** The model to name in the answer. */
  model: string;
  /** Seconds since the epoch. */
  created: number;
  usage: Usage;
  /** The request's parsed body. */
  body: Record<string, unknown>;
  route: Route;
};

/** A request a wire serves: a model listing, or an answer. `stream` is set when the path decides it
 * (Gemini's method, with `sse` for `alt=sse`); otherwise the body's `stream: true` does. `model` is
 * the model the path names. */
export type Route = { kind: "models" } | { kind: "answer"; stream?: boolean; sse?: boolean; model?: string };

/** An answer as the server sends it: one JSON body, or SSE frames written one at a time. */
export type Reply = { json: unknown } | { sse: string[] };

/** A refusal in the wire's own error shape. */
export type Refusal = { status: number; body: unknown };

/** Where a request carried the key: the header the wire reads it from, and the key there (a bearer
 * token without its scheme), if any. */
export type KeySeen = { header: string; value: string | undefined };

/** Why the server refuses a request, for the wire to say in its own shape. */
export type Failure = "bad-request" | "exhausted" | "no-route";

export type Wire = {
  name: WireName;
  /** The routes it serves, named in a 404's message. */
  routes: string;
  /** What a request body must be, named when one is not. */
  shape: string;
  /** What the request is on this wire, or undefined: not one of its routes. */
  route(method: string, path: string, query: URLSearchParams): Route | undefined;
  /** Where `baseUrl` points for this wire's clients, from the server's origin. */
  baseUrl(origin: string): string;
  /** The key the request carried where this wire takes it. */
  key(headers: IncomingHttpHeaders): KeySeen;
  /** The refusal, as the real API words it, of a request without `apiKey` where the wire takes it
   * (none when `apiKey` is undefined), or with a key where the wire refuses one (Gemini's `key=`
   * query parameter); undefined: it may be answered. */
  checkKey(headers: IncomingHttpHeaders, query: URLSearchParams, apiKey: string | undefined): Refusal | undefined;
  failure(kind: Failure, message: string): Refusal;
  /** The conversation the body holds (messages, input items, contents), or undefined: not a request
   * of this wire. */
  conversation(body: Record<string, unknown>): unknown[] | undefined;
  /** What the prompt's tokens are estimated from. */
  prompt(body: Record<string, unknown>): unknown;
  /** How many of the model's answers the conversation already holds. */
  answersIn(conversation: unknown[]): number;
  /** The conversation's last entry as `--log` prints it. */
  last(conversation: unknown[]): { role: unknown; content: unknown } | undefined;
  reply(answer: Answer, meta: Meta): Reply;
  /** GET models: the one model served, listed in the wire's shape. */
  models(id: string): unknown;
};

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** A rough token count (four characters a token): enough for usage to be plausible. */
export const tokens = (text: string) => Math.ceil(text.length / 4);

/** The answer's tokens: its text and its calls' names and arguments. */
export const answerTokens = (answer: Answer) =>
  tokens((answer.text ?? "") + answer.calls.map((c) => c.name + c.arguments).join(""));

/** The text in pieces as a model streams it: a word and the space after it, each. */
export function textPieces(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text ? [text] : []);
}

/** A JSON string cut in two (a client must join the pieces before it parses them). */
export function argumentPieces(json: string): string[] {
  if (json.length < 2) return [json];
  const half = Math.ceil(json.length / 2);
  return [json.slice(0, half), json.slice(half)];
}

/** A call's arguments as an object, for the wires whose whole answers carry them parsed (Anthropic's
 * `input`, Gemini's `args`); a string that is not a JSON object is sent as is, as the script asks. */
export function parsedArguments(json: string): unknown {
  try {
    const value: unknown = JSON.parse(json);
    if (isObject(value)) return value;
  } catch {
    // Sent as written, below.
  }
  return json;
}

/** One Server-Sent Event: an `event:` line when named, its `data:` line, and the blank line
 * (`eol` twice) that ends it. */
export const sseFrame = (data: unknown, event?: string, eol = "\n") =>
  `${event === undefined ? "" : `event: ${event}${eol}`}data: ${JSON.stringify(data)}${eol}${eol}`;

/** The bearer token of an `authorization` header (its raw value when it is not a bearer). */
export function bearer(authorization: string | string[] | undefined): string | undefined {
  if (typeof authorization !== "string") return undefined;
  return /^bearer\s+/i.test(authorization) ? authorization.replace(/^bearer\s+/i, "") : authorization;
}

/** A header's one value (the first, if it came more than once). */
export const header = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
};

/** The path without a trailing slash and with OpenAI's optional `/v1`, as both OpenAI wires route. */
export const openAIRoute = (path: string) => path.replace(/^\/v1(?=\/)/, "");
