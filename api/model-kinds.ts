// A model provider's kind (docs/decisions/0054-native-model-providers.md): which API the Harness
// speaks to it (with pi-ai's own client for that API), the one request header its key rides in (the
// Custodian swaps the Stand-in there and refuses it anywhere else on the provider's route), the
// Harness env var that holds the key's Stand-in unless the pod config names another, and the path
// the API's client expects under the provider's url. One owner for the Custodian, the
// Orchestrator and the Harness.

export const MODEL_KINDS = ["anthropic", "openai", "google", "openai-compatible"] as const;
export type ModelKind = (typeof MODEL_KINDS)[number];

/** pi-ai's API ids (the wire protocols) a kind may be spoken with. */
export type ModelApi = "anthropic-messages" | "openai-responses" | "openai-completions" | "google-generative-ai";

export type ModelKindSpec = {
  /** The API spoken by default, and the others the kind takes (`JR2_MODEL_API`). */
  api: ModelApi;
  apis: readonly ModelApi[];
  /** The header the key rides in, lower case. */
  keyHeader: "x-api-key" | "authorization" | "x-goog-api-key";
  /** The Harness env var of the key's Stand-in when `JR2_MODEL_KEY_ENV` names none. */
  keyEnv: string;
  /** Appended to the provider's url to make the client's base url (the client adds the rest:
   * `/v1/messages`, `/responses`, `/models/<id>:streamGenerateContent`, `/chat/completions`). */
  basePath: string;
  /** The public API's host: a provider at this host with no `kind` is this kind. */
  host?: string;
};

export const MODEL_KIND: Record<ModelKind, ModelKindSpec> = {
  anthropic: {
    api: "anthropic-messages",
    apis: ["anthropic-messages"],
    keyHeader: "x-api-key",
    keyEnv: "ANTHROPIC_API_KEY",
    basePath: "",
    host: "api.anthropic.com",
  },
  openai: {
    api: "openai-responses",
    apis: ["openai-responses", "openai-completions"],
    keyHeader: "authorization",
    keyEnv: "OPENAI_API_KEY",
    basePath: "/v1",
    host: "api.openai.com",
  },
  google: {
    api: "google-generative-ai",
    apis: ["google-generative-ai"],
    keyHeader: "x-goog-api-key",
    keyEnv: "GEMINI_API_KEY",
    basePath: "/v1beta",
    host: "generativelanguage.googleapis.com",
  },
  "openai-compatible": {
    api: "openai-completions",
    apis: ["openai-completions"],
    keyHeader: "authorization",
    keyEnv: "OPENAI_API_KEY",
    basePath: "/v1",
  },
};

export const isModelKind = (s: string): s is ModelKind => (MODEL_KINDS as readonly string[]).includes(s);

/** A provider's kind: the one it names, else the kind whose public host its url is, else
 * `openai-compatible` (vLLM, a gateway, the scripted model), as before kinds were named. */
export function providerKind(p: { kind?: ModelKind | undefined; url: string }): ModelKind {
  if (p.kind) return p.kind;
  let host: string;
  try {
    host = new URL(p.url).hostname.toLowerCase();
  } catch {
    return "openai-compatible";
  }
  return MODEL_KINDS.find((k) => MODEL_KIND[k].host === host) ?? "openai-compatible";
}

/** The API a kind is spoken with: `wanted` when the kind takes it, else an error naming the choices. */
export function modelApiOf(kind: ModelKind, wanted: string | undefined): ModelApi | { problem: string } {
  const spec = MODEL_KIND[kind];
  if (!wanted) return spec.api;
  const found = spec.apis.find((a) => a === wanted);
  return found ?? { problem: `a model of kind ${kind} is spoken with ${spec.apis.join(" or ")}, not ${wanted}` };
}
