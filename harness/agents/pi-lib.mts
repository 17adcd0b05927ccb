// The agent library (docs/decisions/0024, 0054): everything the Harness takes from pi, in one ES
// module. pi is ESM-only and its packages export only an `import` entry, while our TypeScript runs as
// CommonJS; so harness/agents/model.ts loads this file with `import()` at the first turn (tsx leaves
// that to Node's ESM loader, jest maps it, and the companions bundle makes it a file of its own,
// harness-pi.mjs, that costs an idle Harness nothing).
export { Agent } from "@earendil-works/pi-agent-core";
export { createModels, createProvider } from "@earendil-works/pi-ai";
// One wire protocol each, loaded on its first request.
export { anthropicMessagesApi } from "@earendil-works/pi-ai/api/anthropic-messages.lazy";
export { googleGenerativeAIApi } from "@earendil-works/pi-ai/api/google-generative-ai.lazy";
export { openAICompletionsApi } from "@earendil-works/pi-ai/api/openai-completions.lazy";
export { openAIResponsesApi } from "@earendil-works/pi-ai/api/openai-responses.lazy";
// The catalogs of the native providers: a model id as a user writes it gets pi's own facts for it
// (context window, output cap, reasoning, images, compatibility).
export { anthropicProvider } from "@earendil-works/pi-ai/providers/anthropic";
export { googleProvider } from "@earendil-works/pi-ai/providers/google";
export { openaiProvider } from "@earendil-works/pi-ai/providers/openai";
