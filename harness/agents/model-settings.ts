// The Harness's model, from its environment (pure; docs/decisions/0054): the provider's kind (the
// Orchestrator writes JR2_MODEL_KIND from custodian.providers), the Custodian's route for it or a
// base url outright, the model id as the provider names it, the Stand-in of its key (the kind's env
// var unless JR2_MODEL_KEY_ENV names another), the API when the kind takes two, and the thinking
// level. What is wrong is said, never fatal: the Harness still serves attach, and each turn then
// fails with the reason.
import { HARNESS_ENV } from "../../api/env";
import { PROVIDERS_ROUTE } from "../../api/custodian-config";
import { isModelKind, MODEL_KIND, MODEL_KINDS, modelApiOf, type ModelKind } from "../../api/model-kinds";
import type { ModelEndpoint } from "./model";
import type { ThinkingLevel } from "./pi-runner";

const THINKING: readonly ThinkingLevel[] = ["off", "minimal", "low", "medium", "high"];

export type ModelSettings = { endpoint: ModelEndpoint; thinking?: ThinkingLevel; problems: string[] };

export function modelSettings(env: NodeJS.ProcessEnv, custodianUrl: string | undefined): ModelSettings {
  const problems: string[] = [];
  const rawKind = env[HARNESS_ENV.modelKind];
  let kind: ModelKind = "openai-compatible";
  if (rawKind && isModelKind(rawKind)) kind = rawKind;
  else if (rawKind)
    problems.push(`${HARNESS_ENV.modelKind}=${rawKind} is not a kind (${MODEL_KINDS.join(", ")}): speaking openai-compatible`);
  const spec = MODEL_KIND[kind];
  const provider = env[HARNESS_ENV.modelProvider];
  const baseUrl =
    env[HARNESS_ENV.modelUrl] ||
    (custodianUrl && provider ? `${custodianUrl}${PROVIDERS_ROUTE}/${provider}${spec.basePath}` : undefined);
  if (!baseUrl)
    problems.push(
      `no model: set ${HARNESS_ENV.modelProvider} (a Custodian provider) or ${HARNESS_ENV.modelUrl}; every turn fails`,
    );
  const api = modelApiOf(kind, env[HARNESS_ENV.modelApi]);
  if (typeof api !== "string") problems.push(`${HARNESS_ENV.modelApi}: ${api.problem}; speaking ${spec.api}`);
  const keyEnv = env[HARNESS_ENV.modelKeyEnv] || spec.keyEnv;
  if (!env[keyEnv]) problems.push(`${keyEnv} (the model key's Stand-in) is not set: the provider will refuse every call`);
  const rawThinking = env[HARNESS_ENV.modelThinking];
  const thinking = THINKING.find((t) => t === rawThinking);
  if (rawThinking && !thinking)
    problems.push(`${HARNESS_ENV.modelThinking}=${rawThinking} is not one of ${THINKING.join(", ")}: thinking off`);
  return {
    endpoint: {
      kind,
      api: typeof api === "string" ? api : spec.api,
      baseUrl: baseUrl ?? "http://model.invalid/v1",
      // The Stand-in; the Custodian swaps it for the key in the kind's header toward its bound origin.
      apiKey: env[keyEnv] || "none",
      id: env[HARNESS_ENV.modelId] || "default",
    },
    ...(thinking && thinking !== "off" ? { thinking } : {}),
    problems,
  };
}
