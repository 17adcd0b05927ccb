// What an Agent test sets up on the control plane: the scripted model as the installation's model
// provider, its key held in a Secret the Custodian mounts, and the Harness told to use it (the pod
// config's harness.env). Answers the pod config file for JR2_POD_CONFIG_FILE.
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { ORCHESTRATOR_ENV } from "../../../api/env";
import { type Agent, localReposRoot, startCacheAgents } from "../../../dev/local-cache-agent";
import { type LocalOrchestrator, startLocalOrchestrator } from "../../../dev/local-orchestrator";
import { startScriptedModel, type ScriptedModel } from "../../../dev/scripted-model";

export async function scriptedModelPodConfig(dir: string, namespace: string, model: ScriptedModel, key: string) {
  await K8s(kind.Secret).Apply({ metadata: { name: "model-keys", namespace }, stringData: { openai: key } });
  const file = join(dir, "pod.yaml");
  writeFileSync(
    file,
    JSON.stringify({
      custodian: {
        providers: [{ name: "scripted", url: model.url }],
        held: [{ secret: "model-keys", key: "openai", env: "OPENAI_API_KEY", origins: [model.url] }],
      },
      harness: {
        env: [
          { name: "JR2_MODEL_PROVIDER", value: "scripted" },
          { name: "JR2_MODEL_ID", value: "scripted" },
        ],
      },
    }),
  );
  return file;
}

/** The propose Machine's model script: a bash call, a `propose` pick, then the closing text. */
export const PROPOSE_SCRIPT = [
  { toolCalls: [{ name: "bash", arguments: { command: "echo hello > change.txt && cat change.txt" } }] },
  { toolCalls: [{ name: "propose", arguments: { summary: "wrote change.txt" } }] },
  { text: "done: the change is approved" },
];

/**
 * The example Machine's stage, for the file's tests (beforeAll/afterAll): the scripted model with
 * PROPOSE_SCRIPT and its pod config, cache agents, and a local Orchestrator in `namespace()`. The
 * returned getters read what beforeAll made. Everything under `dir` is removed afterwards.
 */
export function useProposeStage(dir: string, namespace: () => string, key: string, first?: () => void) {
  const agents: Agent[] = [];
  let orch: LocalOrchestrator | undefined;
  let model: ScriptedModel | undefined;
  beforeAll(async () => {
    first?.();
    model = await startScriptedModel({ apiKey: key, script: PROPOSE_SCRIPT });
    await scriptedModelPodConfig(dir, namespace(), model, key);
    agents.push(...(await startCacheAgents(dir)));
    orch = await startLocalOrchestrator({
      kubeconfig: process.env.KUBECONFIG!,
      namespace: namespace(),
      dir: join(dir, "orchestrator"),
      credentials: [],
      reposRoot: localReposRoot(dir),
      env: { [ORCHESTRATOR_ENV.podConfigFile]: join(dir, "pod.yaml") },
    });
  }, 90_000);
  afterAll(async () => {
    await orch?.stop();
    await Promise.all(agents.map((a) => a.stop()));
    await model?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return { orch: () => orch!, model: () => model! };
}
