// The Harness's model from its environment (harness/agents/model-settings.ts) and the pi model it
// makes (harness/agents/model.ts modelFor): each kind's API, route, key variable and catalog facts.
import type { Model } from "@earendil-works/pi-ai";
import { MODEL_KIND, modelApiOf, providerKind } from "../../api/model-kinds";
import { modelFor } from "../../harness/agents/model";
import { modelSettings } from "../../harness/agents/model-settings";

const CUSTODIAN = "http://127.0.0.1:8081";

describe("a provider's kind", () => {
  it("is the one named, else the public API's at the url's host, else openai-compatible", () => {
    expect(providerKind({ url: "https://api.anthropic.com" })).toBe("anthropic");
    expect(providerKind({ url: "https://API.openai.com:443" })).toBe("openai");
    expect(providerKind({ url: "https://generativelanguage.googleapis.com" })).toBe("google");
    expect(providerKind({ url: "http://vllm.models.svc:8000" })).toBe("openai-compatible");
    expect(providerKind({ url: "https://api.anthropic.com", kind: "openai-compatible" })).toBe("openai-compatible");
    expect(providerKind({ url: "http://gw.internal", kind: "anthropic" })).toBe("anthropic");
  });

  it("says which API it is spoken with, and refuses one it does not speak", () => {
    expect(modelApiOf("openai", undefined)).toBe("openai-responses");
    expect(modelApiOf("openai", "openai-completions")).toBe("openai-completions");
    expect(modelApiOf("anthropic", "openai-completions")).toEqual({
      problem: "a model of kind anthropic is spoken with anthropic-messages, not openai-completions",
    });
  });
});

describe("the Harness's model settings", () => {
  it("anthropic: the Custodian's route with no version path, the key from ANTHROPIC_API_KEY", () => {
    const s = modelSettings(
      {
        JR2_MODEL_KIND: "anthropic",
        JR2_MODEL_PROVIDER: "claude",
        JR2_MODEL_ID: "claude-sonnet-4-5",
        ANTHROPIC_API_KEY: "standin",
      },
      CUSTODIAN,
    );
    expect(s).toEqual({
      endpoint: {
        kind: "anthropic",
        api: "anthropic-messages",
        baseUrl: `${CUSTODIAN}/providers/claude`,
        apiKey: "standin",
        id: "claude-sonnet-4-5",
      },
      problems: [],
    });
  });

  it("openai (Responses by default, Chat when asked), google, and openai-compatible as before kinds", () => {
    const openai = modelSettings({ JR2_MODEL_KIND: "openai", JR2_MODEL_PROVIDER: "oa", OPENAI_API_KEY: "s" }, CUSTODIAN);
    expect(openai.endpoint).toMatchObject({ api: "openai-responses", baseUrl: `${CUSTODIAN}/providers/oa/v1` });
    const chat = modelSettings(
      { JR2_MODEL_KIND: "openai", JR2_MODEL_API: "openai-completions", JR2_MODEL_PROVIDER: "oa", OPENAI_API_KEY: "s" },
      CUSTODIAN,
    );
    expect(chat.endpoint.api).toBe("openai-completions");
    const google = modelSettings(
      { JR2_MODEL_KIND: "google", JR2_MODEL_PROVIDER: "gemini", GEMINI_API_KEY: "g", JR2_MODEL_THINKING: "low" },
      CUSTODIAN,
    );
    expect(google).toMatchObject({
      endpoint: { api: "google-generative-ai", baseUrl: `${CUSTODIAN}/providers/gemini/v1beta`, apiKey: "g" },
      thinking: "low",
      problems: [],
    });
    const compatible = modelSettings({ JR2_MODEL_PROVIDER: "scripted", OPENAI_API_KEY: "k" }, CUSTODIAN);
    expect(compatible.endpoint).toMatchObject({
      kind: "openai-compatible",
      api: "openai-completions",
      baseUrl: `${CUSTODIAN}/providers/scripted/v1`,
    });
    // JR2_MODEL_KEY_ENV names another variable; JR2_MODEL_URL wins over the route.
    const direct = modelSettings(
      { JR2_MODEL_URL: "http://127.0.0.1:9000/v1", JR2_MODEL_KEY_ENV: "MY_KEY", MY_KEY: "m" },
      undefined,
    );
    expect(direct.endpoint).toMatchObject({ baseUrl: "http://127.0.0.1:9000/v1", apiKey: "m" });
  });

  it("says what is wrong, and still makes a model", () => {
    const s = modelSettings(
      { JR2_MODEL_KIND: "bedrock", JR2_MODEL_API: "nope", JR2_MODEL_THINKING: "max" },
      undefined,
    );
    expect(s.problems).toEqual([
      "JR2_MODEL_KIND=bedrock is not a kind (anthropic, openai, google, openai-compatible): speaking openai-compatible",
      "no model: set JR2_MODEL_PROVIDER (a Custodian provider) or JR2_MODEL_URL; every turn fails",
      "JR2_MODEL_API: a model of kind openai-compatible is spoken with openai-completions, not nope; speaking openai-completions",
      "OPENAI_API_KEY (the model key's Stand-in) is not set: the provider will refuse every call",
      "JR2_MODEL_THINKING=max is not one of off, minimal, low, medium, high: thinking off",
    ]);
    expect(s.endpoint).toMatchObject({ kind: "openai-compatible", baseUrl: "http://model.invalid/v1", apiKey: "none" });
  });
});

describe("the pi model", () => {
  const known = {
    id: "claude-sonnet-4-5",
    name: "Claude Sonnet 4.5",
    api: "anthropic-messages",
    provider: "anthropic",
    baseUrl: "https://api.anthropic.com",
    reasoning: true,
    input: ["text", "image"],
    cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
    contextWindow: 200_000,
    maxTokens: 64_000,
  } satisfies Model<"anthropic-messages">;

  it("keeps pi's catalog facts for a native model, with our url, provider and no cost", () => {
    const m = modelFor(
      { kind: "anthropic", baseUrl: `${CUSTODIAN}/providers/claude/`, apiKey: "s", id: "claude-sonnet-4-5" },
      known,
    );
    expect(m).toMatchObject({
      id: "claude-sonnet-4-5",
      name: "Claude Sonnet 4.5",
      api: "anthropic-messages",
      provider: "anthropic",
      baseUrl: `${CUSTODIAN}/providers/claude`,
      reasoning: true,
      input: ["text", "image"],
      contextWindow: 200_000,
      maxTokens: 64_000,
      cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
    });
  });

  it("an id pi does not know gets the defaults; a kind's API it does not speak is refused", () => {
    const m = modelFor({ kind: "google", baseUrl: "http://h/v1beta", apiKey: "s", id: "gemini-next" });
    expect(m).toMatchObject({ api: "google-generative-ai", provider: "google", reasoning: false, maxTokens: 16_384 });
    expect(() =>
      modelFor({ kind: "anthropic", api: "openai-responses", baseUrl: "http://h", apiKey: "s", id: "x" }),
    ).toThrow("a model of kind anthropic is spoken with anthropic-messages, not openai-responses");
    // Each kind's key header, the Custodian's rule (api/model-kinds.ts).
    expect(Object.fromEntries(Object.entries(MODEL_KIND).map(([k, v]) => [k, v.keyHeader]))).toEqual({
      anthropic: "x-api-key",
      openai: "authorization",
      google: "x-goog-api-key",
      "openai-compatible": "authorization",
    });
  });
});
