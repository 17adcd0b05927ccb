// The model an Agent talks to (decisions 0024, 0054): a pi-ai `Model` for the provider's own API
// (Anthropic Messages, OpenAI Responses or Chat, Gemini, or an OpenAI-compatible Chat Completions
// server such as vLLM or the scripted model), registered in a pi `Models` collection of its own whose
// one provider resolves the key, and the stream function the Agent calls. In a pod the key given here
// is the Harness's Stand-in: the Custodian swaps it for the held value in the one header that
// provider's API reads, on its way out (decision 0018); the Harness never holds the real key.
//
// pi is ESM-only and its packages export only an `import` entry. Our TypeScript runs as CommonJS, so
// this file imports pi for its types alone and loads the library with `import()` of ./pi-lib.mjs
// (`piLib()`): under tsx that is Node's own ESM loader, in the companions bundle a file of its own,
// and in jest a `require` of the transformed module (jest.config.js).
import type { Api, Model, OpenAICompletionsCompat } from "@earendil-works/pi-ai";
import type { StreamFn } from "@earendil-works/pi-agent-core";
import { MODEL_KIND, type ModelApi, type ModelKind } from "../../api/model-kinds";

/** A model endpoint and the model to ask there. */
export type ModelEndpoint = {
  /** The provider's kind; default `openai-compatible`. */
  kind?: ModelKind;
  /** The API spoken, when the kind takes more than one; default the kind's (api/model-kinds.ts). */
  api?: ModelApi;
  /** The base URL the API's client is given, the kind's path included (`.../v1` for OpenAI's and
   * OpenAI-compatible ones, `.../v1beta` for Gemini, none for Anthropic's). */
  baseUrl: string;
  /** The key (a Stand-in in a pod), sent in the kind's header. Required and non-empty: an endpoint
   * that wants none takes any placeholder. */
  apiKey: string;
  /** The model id as the provider names it (`claude-sonnet-4-5`, `gpt-5`, `gemini-2.5-flash`). */
  id: string;
  /** pi's provider id. Default: the kind for a native provider (so pi applies that provider's own
   * handling), `jr2` for an OpenAI-compatible one (a name pi guesses nothing from). */
  provider?: string;
  /** Overrides of what pi's catalog says of the model (or of the defaults when it knows none). */
  contextWindow?: number;
  maxTokens?: number;
  reasoning?: boolean;
  input?: Array<"text" | "image">;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** Chat Completions compatibility overrides (OpenAI-compatible servers). */
  compat?: OpenAICompletionsCompat;
};

/** What a generic OpenAI-compatible server (vLLM, SGLang, llama.cpp, Ollama, LiteLLM) accepts: the
 * system prompt as `system` (not `developer`), no `store`, no `reasoning_effort`, `max_tokens` (the
 * field every one of them reads), no `strict` in tool definitions, usage at the end of a stream. */
export const GENERIC_COMPAT: OpenAICompletionsCompat = {
  supportsStore: false,
  supportsDeveloperRole: false,
  supportsReasoningEffort: false,
  supportsUsageInStreaming: true,
  supportsStrictMode: false,
  maxTokensField: "max_tokens",
};

export const DEFAULT_PROVIDER = "jr2";

const DEFAULTS = { contextWindow: 128_000, maxTokens: 16_384 };

/**
 * The pi-ai model for an endpoint (pure). `known` is pi's catalog entry for the id, when the kind is
 * a native provider's and pi knows the model: its facts (window, output cap, reasoning, images,
 * compatibility) are kept, with our base url, provider and API put over them.
 */
export function modelFor(endpoint: ModelEndpoint, known?: Model<Api>): Model<Api> {
  if (!/^https?:\/\//.test(endpoint.baseUrl))
    throw new Error(`the model's base URL is not http(s): ${endpoint.baseUrl}`);
  if (!endpoint.id) throw new Error("the model id is empty");
  const kind = endpoint.kind ?? "openai-compatible";
  const api = endpoint.api ?? MODEL_KIND[kind].api;
  if (!MODEL_KIND[kind].apis.includes(api))
    throw new Error(`a model of kind ${kind} is spoken with ${MODEL_KIND[kind].apis.join(" or ")}, not ${api}`);
  const base = known && known.api === api ? known : undefined;
  const compat =
    kind === "openai-compatible"
      ? { ...GENERIC_COMPAT, ...endpoint.compat }
      : // OpenAI's own Chat Completions behind the Custodian's url: pi cannot tell it from the url.
        api === "openai-completions"
        ? { supportsDeveloperRole: true, ...endpoint.compat }
        : base?.compat;
  return {
    ...(base ?? {}),
    id: endpoint.id,
    name: base?.name ?? endpoint.id,
    api,
    provider: endpoint.provider ?? (kind === "openai-compatible" ? DEFAULT_PROVIDER : kind),
    baseUrl: endpoint.baseUrl.replace(/\/+$/, ""),
    reasoning: endpoint.reasoning ?? base?.reasoning ?? false,
    input: endpoint.input ?? base?.input ?? ["text"],
    // Cost is pi's bookkeeping (usage.cost); nobody here bills by it.
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: endpoint.contextWindow ?? base?.contextWindow ?? DEFAULTS.contextWindow,
    maxTokens: endpoint.maxTokens ?? base?.maxTokens ?? DEFAULTS.maxTokens,
    ...(endpoint.headers ? { headers: { ...endpoint.headers } } : {}),
    ...(compat ? { compat } : {}),
  } as Model<Api>;
}

/** Retries of a model call that failed before an answer began (the OpenAI and Anthropic SDKs' default). */
export const MODEL_RETRIES = 2;

export type AgentModel = {
  model: Model<Api>;
  /** What `new Agent({ streamFn })` takes: the collection's `streamSimple`. */
  streamFn: StreamFn;
  /** pi asks it before each model call; the key is fixed here. */
  getApiKey: (provider: string) => string | undefined;
};

/** The model, its stream function and key resolver, as `new Agent({ initialState: { model },
 * streamFn, getApiKey })` takes them. */
export async function agentModel(endpoint: ModelEndpoint): Promise<AgentModel> {
  if (!endpoint.apiKey)
    throw new Error("the model's API key is empty (an endpoint that wants none takes a placeholder)");
  const pi = await piLib();
  const kind = endpoint.kind ?? "openai-compatible";
  const catalog =
    kind === "anthropic"
      ? pi.anthropicProvider()
      : kind === "openai"
        ? pi.openaiProvider()
        : kind === "google"
          ? pi.googleProvider()
          : undefined;
  const model = modelFor(endpoint, catalog?.getModels().find((m) => m.id === endpoint.id));
  const apiKey = endpoint.apiKey;
  const implementation = {
    "anthropic-messages": pi.anthropicMessagesApi,
    "openai-responses": pi.openAIResponsesApi,
    "openai-completions": pi.openAICompletionsApi,
    "google-generative-ai": pi.googleGenerativeAIApi,
  }[model.api as ModelApi]();
  const models = pi.createModels();
  models.setProvider(
    pi.createProvider({
      id: model.provider,
      // The one key there is: pi reads no environment variable and no stored credential for it.
      auth: { apiKey: { name: "the Harness's Stand-in", resolve: async () => ({ auth: { apiKey } }) } },
      models: [model],
      api: implementation,
    }),
  );
  return {
    model,
    // pi retries nothing unless asked; the SDKs it wraps retried a dropped connection, a 408, 409,
    // 429 or 5xx twice by default, and a turn should not fail on one stale keep-alive socket.
    streamFn: ((m, context, options) =>
      models.streamSimple(m, context, { maxRetries: MODEL_RETRIES, ...options })) as StreamFn,
    getApiKey: (provider) => (provider === model.provider ? apiKey : undefined),
  };
}

export type PiLib = typeof import("./pi-lib.mjs");

let lib: Promise<PiLib> | undefined;
/** The agent library (pi-agent-core's `Agent`, pi-ai's `Models` and APIs), loaded once. See the head
 * of this file for why it is an `import()` and not an import statement. */
export function piLib(): Promise<PiLib> {
  return (lib ??= import("./pi-lib.mjs"));
}
