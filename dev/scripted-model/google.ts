// Google's Gemini API (`--wire google`): POST /v1beta/models/{model}:generateContent answered whole,
// :streamGenerateContent?alt=sse as `data:` chunks of the same shape, each a
// `{candidates: [{content: {role: "model", parts}, finishReason?}], usageMetadata}`: the text in
// pieces, the function calls (`{functionCall: {id, name, args}}`) together in one chunk, and
// `finishReason: "STOP"` on the last (Gemini has no reason of its own for calls). Without `alt=sse`
// the chunks come as one JSON array, as Gemini sends them. The key comes in `x-goog-api-key`,
// never as a `key=` query parameter (refused here, though Gemini takes one: a key in a URL ends up
// in logs, and a Custodian swaps the header alone); refusals are Google's `{error: {code, message,
// status}}`, with Gemini's statuses: 403 without a key, 400 API_KEY_INVALID with another.
import {
  type Answer,
  type Failure,
  header,
  isObject,
  parsedArguments,
  type Refusal,
  textPieces,
  tokens,
  type Usage,
  type Wire,
} from "./wire";

type Part = { text: string } | { functionCall: { id: string; name: string; args: unknown } };

export function googleError(code: number, status: string, message: string, details?: unknown[]): Refusal {
  return { status: code, body: { error: { code, message, status, ...(details ? { details } : {}) } } };
}

const API_KEY_INVALID = googleError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", [
  {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    reason: "API_KEY_INVALID",
    domain: "googleapis.com",
    metadata: { service: "generativelanguage.googleapis.com" },
  },
]);

const NO_KEY = googleError(
  403,
  "PERMISSION_DENIED",
  "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
);

const KEY_IN_QUERY = googleError(
  403,
  "PERMISSION_DENIED",
  "the scripted model takes the API key in the x-goog-api-key header only, never as the key= query parameter",
);

const callParts = (answer: Answer): Part[] =>
  answer.calls.map((c) => ({ functionCall: { id: c.id, name: c.name, args: parsedArguments(c.arguments) } }));

/** One GenerateContentResponse: these parts, the finish reason when it is the last, and the usage
 * so far (`candidates` the answer's tokens sent until now). */
function chunk(id: string, model: string, parts: Part[], last: boolean, usage: Usage, sent: number) {
  return {
    candidates: [{ content: { role: "model", parts }, ...(last ? { finishReason: "STOP" } : {}), index: 0 }],
    usageMetadata: { promptTokenCount: usage.input, candidatesTokenCount: sent, totalTokenCount: usage.input + sent },
    modelVersion: model,
    responseId: id,
  };
}

/** The whole-answer form (:generateContent). */
export function googleResponse(id: string, model: string, answer: Answer, usage: Usage) {
  const parts: Part[] = [...(answer.text !== null ? [{ text: answer.text }] : []), ...callParts(answer)];
  return chunk(id, model, parts.length > 0 ? parts : [{ text: "" }], true, usage, usage.output);
}

/** The streamed form (:streamGenerateContent): every chunk, in order. */
export function googleChunks(id: string, model: string, answer: Answer, usage: Usage) {
  const groups: Part[][] = textPieces(answer.text ?? "").map((text) => [{ text }]);
  if (answer.calls.length > 0) groups.push(callParts(answer));
  if (groups.length === 0) groups.push([{ text: "" }]);
  let text = "";
  return groups.map((parts, i) => {
    const last = i === groups.length - 1;
    for (const p of parts) if ("text" in p) text += p.text;
    return chunk(id, model, parts, last, usage, last ? usage.output : tokens(text));
  });
}

function failure(kind: Failure, message: string): Refusal {
  switch (kind) {
    case "bad-request":
      return googleError(400, "INVALID_ARGUMENT", message);
    case "exhausted":
      return googleError(400, "FAILED_PRECONDITION", message);
    case "no-route":
      return googleError(404, "NOT_FOUND", message);
  }
}

const ANSWER = /^\/(v1beta|v1)\/models\/([^/:]+):(generateContent|streamGenerateContent)$/;

export const google: Wire = {
  name: "google",
  routes:
    "POST /v1beta/models/{model}:generateContent, POST /v1beta/models/{model}:streamGenerateContent?alt=sse, GET /v1beta/models",
  shape: "a generateContent request: a JSON object with a `contents` array",
  route(method, path, query) {
    const answer = ANSWER.exec(path);
    if (method === "POST" && answer) {
      const stream = answer[3] === "streamGenerateContent";
      return {
        kind: "answer",
        stream,
        sse: stream && query.get("alt") === "sse",
        model: decodeURIComponent(answer[2]!),
      };
    }
    if (method === "GET" && /^\/(v1beta|v1)\/models$/.test(path)) return { kind: "models" };
    return undefined;
  },
  // pi's Google client takes the API version in its base URL.
  baseUrl: (origin) => `${origin}/v1beta`,
  key: (headers) => ({ header: "x-goog-api-key", value: header(headers, "x-goog-api-key") }),
  checkKey(headers, query, apiKey) {
    if (query.has("key")) return KEY_IN_QUERY;
    if (apiKey === undefined) return undefined;
    const key = header(headers, "x-goog-api-key");
    if (key === undefined) return NO_KEY;
    return key === apiKey ? undefined : API_KEY_INVALID;
  },
  failure,
  conversation: (body) => (Array.isArray(body.contents) ? body.contents : undefined),
  prompt: (body) => ({ systemInstruction: body.systemInstruction, contents: body.contents }),
  answersIn: (contents) => contents.filter((c) => isObject(c) && c.role === "model").length,
  last(contents) {
    const last = contents.at(-1);
    return isObject(last) ? { role: last.role, content: last.parts } : undefined;
  },
  reply(answer, meta) {
    const id = `scripted-${meta.serial}`;
    const route = meta.route.kind === "answer" ? meta.route : undefined;
    if (!route?.stream) return { json: googleResponse(id, meta.model, answer, meta.usage) };
    const chunks = googleChunks(id, meta.model, answer, meta.usage);
    // Gemini ends each event with CRLF CRLF.
    if (route.sse) return { sse: chunks.map((c) => `data: ${JSON.stringify(c)}\r\n\r\n`) };
    return { json: chunks };
  },
  models: (id) => ({
    models: [
      {
        name: `models/${id}`,
        version: "scripted",
        displayName: id,
        supportedGenerationMethods: ["generateContent", "streamGenerateContent"],
      },
    ],
  }),
};
