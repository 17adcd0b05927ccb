// What an Agent test sets up on the control plane: the scripted model as the installation's model
// provider, its key held in a Secret the Custodian mounts, and the Harness told to use it (the pod
// config's harness.env). Answers the pod config file for JR2_POD_CONFIG_FILE. With a stand-in forge
// (test/support/stand-in-forge.ts), the example Machines' stage publishes: the forge's repository
// fenced with its push Secret, an API secret bound to its origin, its CA trusted (decision 0070).
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { CACHE_AGENT_ENV, ORCHESTRATOR_ENV } from "../../../api/env";
import {
  type Agent,
  LOCAL_NODES,
  localReposRoot,
  startCacheAgent,
  startCacheAgents,
} from "../../../dev/local-cache-agent";
import { type LocalOrchestrator, startLocalOrchestrator } from "../../../dev/local-orchestrator";
import { startScriptedModel, type ScriptedModel } from "../../../dev/scripted-model";
import { startStandInForge, type StandInForge } from "../../support/stand-in-forge";

export async function scriptedModelPodConfig(
  dir: string,
  namespace: string,
  model: ScriptedModel,
  key: string,
  extra: Record<string, unknown> = {},
) {
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
      ...extra,
    }),
  );
  return file;
}

/** The propose Machine's model script: a bash call, a `propose` pick, then the closing text. */
const proposeScript = (command: string) => [
  { toolCalls: [{ name: "bash", arguments: { command } }] },
  { toolCalls: [{ name: "propose", arguments: { summary: "wrote change.txt" } }] },
  { text: "done: the change is approved" },
];
export const PROPOSE_SCRIPT = proposeScript("echo hello > change.txt && cat change.txt");

/** The pull request's body the Agent writes beside its change (PR.md, the example's default). */
export const PR_BODY = "# wrote change.txt\n\nThe Agent made this.\n";
/** With a Repo Slot `app` on `branch`: the Agent's change committed in its worktree, and PR.md. */
export const PUBLISH_SCRIPT = (branch: string) =>
  proposeScript(
    `cd app/${branch} && echo hello > change.txt && printf '${PR_BODY.replaceAll("\n", "\\n")}' > PR.md && ` +
      "git add change.txt PR.md && git -c user.name=agent -c user.email=agent@example.invalid commit -qm 'wrote change.txt' && " +
      "cat change.txt",
  );

/** The stand-in forge's credentials and names, as the example stage sets them up. */
export const FORGE = {
  user: "jr2-bot",
  token: "ghp_pushTokenOfTheForge7a6b5c4d",
  apiToken: "forge-api-token-0e9f8a7b",
  repo: "acme/app.git",
  pullsPath: "/api/repos/acme/app/pulls",
  pushSecret: "forge-push",
  apiSecret: { secret: "forge-api", key: "authorization" },
} as const;

/**
 * The example Machine's stage, for the file's tests (beforeAll/afterAll): the scripted model with
 * PROPOSE_SCRIPT and its pod config, cache agents, and a local Orchestrator in `namespace()`. The
 * returned getters read what beforeAll made. Everything under `dir` is removed afterwards.
 */
export function useProposeStage(
  dir: string,
  namespace: () => string,
  key: string,
  first?: () => void,
  opts: { forge?: { branch: string } } = {},
) {
  const agents: Agent[] = [];
  let orch: LocalOrchestrator | undefined;
  let model: ScriptedModel | undefined;
  let forge: StandInForge | undefined;
  beforeAll(async () => {
    first?.();
    const ns = namespace();
    model = await startScriptedModel({
      apiKey: key,
      script: opts.forge ? PUBLISH_SCRIPT(opts.forge.branch) : PROPOSE_SCRIPT,
    });
    if (opts.forge) {
      forge = await startStandInForge({ user: FORGE.user, token: FORGE.token, apiToken: FORGE.apiToken });
      forge.createRepo(FORGE.repo);
      await K8s(kind.Secret).Apply(forge.pushSecret(FORGE.pushSecret, ns));
      await K8s(kind.Secret).Apply({
        metadata: { name: FORGE.apiSecret.secret, namespace: ns },
        stringData: { [FORGE.apiSecret.key]: `Bearer ${FORGE.apiToken}` },
      });
      await K8s(kind.ConfigMap).Apply({
        metadata: { name: "forge-ca", namespace: ns },
        data: { "ca.crt": forge.caPem },
      });
      const caFile = join(dir, "forge-ca.crt");
      writeFileSync(caFile, forge.caPem);
      for (const node of LOCAL_NODES)
        agents.push(
          await startCacheAgent(node, localReposRoot(dir).replace("{node}", node), {
            [CACHE_AGENT_ENV.caFile]: caFile,
          }),
        );
    } else agents.push(...(await startCacheAgents(dir)));
    await scriptedModelPodConfig(
      dir,
      ns,
      model,
      key,
      forge
        ? {
            effector: {
              secrets: [{ ...FORGE.apiSecret, origins: [forge.origin] }],
              trust: { configMap: "forge-ca", key: "ca.crt" },
            },
          }
        : {},
    );
    orch = await startLocalOrchestrator({
      kubeconfig: process.env.KUBECONFIG!,
      namespace: ns,
      dir: join(dir, "orchestrator"),
      credentials: forge ? [{ match: `${forge.identity}/acme`, secret: FORGE.pushSecret }] : [],
      reposRoot: localReposRoot(dir),
      env: { [ORCHESTRATOR_ENV.podConfigFile]: join(dir, "pod.yaml") },
    });
  }, 90_000);
  afterAll(async () => {
    await orch?.stop();
    await Promise.all(agents.map((a) => a.stop()));
    await model?.stop();
    await forge?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { orch: () => orch!, model: () => model!, forge: () => forge! };
}
