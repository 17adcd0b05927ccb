// What an Agent test sets up on the control plane: the scripted model as the installation's model
// provider, its key held in a Secret the Custodian mounts, and the Harness told to use it (the pod
// config's harness.env). Answers the pod config file for JR2_POD_CONFIG_FILE.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import type { ScriptedModel } from "../../../dev/scripted-model";

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
