// The model an Agent talks to (decision 0024): a pi-ai `Model` for an OpenAI-compatible
// Chat Completions endpoint (vLLM, the scripted model of dev/scripted-model.ts, a hosted provider
// reached through the Custodian), the key resolver that carries its API key, and the loader of
// pi-agent-core. In a pod the key given here is the Harness's Stand-in: the Custodian swaps it for the
// held value on the way out (decision 0018); the Harness never holds the real key.
//
// pi is ESM-only, and pi-ai's package exports name only an `import` entry. Our TypeScript runs as
// CommonJS (tsx for `npm run harness` and local mode, jest through swc, the esbuild bundle), so this
// file imports pi-ai for its types alone and loads pi-agent-core with `import()` (`agentCore()`):
// under tsx that is Node's own ESM loader, in the esbuild bundle it is inlined, and in jest swc turns
// it into a `require` of the transformed package (jest.config.js).
import type { Model, OpenAICompletionsCompat } from "@earendil-works/pi-ai";

/** An OpenAI-compatible endpoint and the model to ask there. */
export type ModelEndpoint = {
  /** The base URL an OpenAI client is given: requests go to `<baseUrl>/chat/completions`, so it
   * usually ends in `/v1`. */
  baseUrl: string;
  /** Sent as `authorization: Bearer <apiKey>`. Required and non-empty (pi-ai refuses a call without
   * a key); an endpoint that wants none takes any placeholder. */
  apiKey: string;
  /** The model id sent as `model`. */
  id: string;
  /** pi's provider name. Default `jr2`: a name pi does not know, so it never reads a key of its own
   * from the environment (`OPENAI_API_KEY` for `openai`) nor guesses compatibility from it. */
  provider?: string;
  /** Default 128k tokens. pi uses it for nothing on this path; a context manager may. */
  contextWindow?: number;
  /** The cap on one answer (sent as `max_tokens`). Default 16384. */
  maxTokens?: number;
  /** Whether the model reasons (pi then asks for reasoning per its thinking level). Default false. */
  reasoning?: boolean;
  /** Default text only. */
  input?: Array<"text" | "image">;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** Overrides of the compatibility settings below. */
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

/** The pi-ai model for an OpenAI-compatible endpoint: `api: "openai-completions"`, which pi-ai serves
 * with the OpenAI SDK's Chat Completions client pointed at `baseUrl`. */
export function openAICompatibleModel(endpoint: ModelEndpoint): Model<"openai-completions"> {
  if (!/^https?:\/\//.test(endpoint.baseUrl))
    throw new Error(`the model's base URL is not http(s): ${endpoint.baseUrl}`);
  if (!endpoint.id) throw new Error("the model id is empty");
  return {
    id: endpoint.id,
    name: endpoint.id,
    api: "openai-completions",
    provider: endpoint.provider ?? DEFAULT_PROVIDER,
    baseUrl: endpoint.baseUrl.replace(/\/+$/, ""),
    reasoning: endpoint.reasoning ?? false,
    input: endpoint.input ?? ["text"],
    // Cost is pi's bookkeeping (usage.cost); nobody here bills by it.
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    contextWindow: endpoint.contextWindow ?? 128_000,
    maxTokens: endpoint.maxTokens ?? 16_384,
    ...(endpoint.headers ? { headers: { ...endpoint.headers } } : {}),
    compat: { ...GENERIC_COMPAT, ...endpoint.compat },
  };
}

/** The model and the key resolver, as `new Agent({ initialState: { model }, getApiKey })` takes them.
 * pi asks `getApiKey(provider)` before each model call, so a key file re-read there would take
 * effect at the next step; here the key is fixed. */
export function agentModel(endpoint: ModelEndpoint): {
  model: Model<"openai-completions">;
  getApiKey: (provider: string) => string | undefined;
} {
  if (!endpoint.apiKey)
    throw new Error("the model's API key is empty (an endpoint that wants none takes a placeholder)");
  const model = openAICompatibleModel(endpoint);
  const apiKey = endpoint.apiKey;
  return { model, getApiKey: (provider) => (provider === model.provider ? apiKey : undefined) };
}

export type AgentCore = typeof import("@earendil-works/pi-agent-core");

let core: Promise<AgentCore> | undefined;
/** pi-agent-core (`Agent`, `agentLoop`, ...), loaded once. See the head of this file for why it is
 * an `import()` and not an import statement. */
export function agentCore(): Promise<AgentCore> {
  return (core ??= import("@earendil-works/pi-agent-core"));
}
