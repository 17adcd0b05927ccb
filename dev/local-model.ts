// The model `npm start`'s Agents ask (decision 0025): the built-in scripted provider on loopback
// by default, so the example Machine runs here with no network; or a real OpenAI-compatible
// endpoint, named by one environment variable (JR2_MODEL_URL) with its key in one file
// (JR2_MODEL_KEY_FILE, default .jr2/model-key). Either way the key goes into a Secret that the
// Custodian holds and the Harness gets a Stand-in for (decision 0021): this writes that Secret and
// the installation's pod config (JR2_POD_CONFIG_FILE) naming the provider, the held value and the
// Harness's model settings.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { request } from "undici";
import { HARNESS_ENV } from "../api/env";
import { MODEL_KIND, MODEL_KINDS, isModelKind, providerKind, type ModelKind } from "../api/model-kinds";
import type { z } from "zod";
import { PodConfig } from "../orchestrator/workspaces/pod-config";
import { ROOT } from "./local-operator";
import { SCRIPTED_MODEL_ID, type ScriptStep, startScriptedModel } from "./scripted-model";
import { type Placement, SCRIPTED_MODEL, scriptedModelObjects, scriptedModelUrl } from "./in-cluster-model";

/** What npm start reads. */
export const LOCAL_MODEL_ENV = {
  url: "JR2_MODEL_URL",
  keyFile: "JR2_MODEL_KEY_FILE",
  id: "JR2_MODEL_ID",
  /** The API JR2_MODEL_URL speaks (api/model-kinds.ts); default: the public API's at its host, else
   * openai-compatible. */
  kind: "JR2_MODEL_KIND",
  /** `1`: take a real provider's key in local process mode anyway (decision 0042). */
  allowRealKey: "JR2_LOCAL_ALLOW_REAL_KEY",
} as const;

/** Why local process mode refuses a real provider's key (decision 0042): said once, in the error. */
export const LOCAL_MODE_WARNING =
  "local process mode runs each Sandbox's Harness and Custodian as processes of yours on this machine: it " +
  "is a development convenience, not an isolation boundary, and the Agent's bash can read the model's " +
  "key, the signing key, the API tokens and the cluster's kubeconfig there (cluster-admin on that cluster)";
const DEFAULT_KEY_FILE = join(ROOT, ".jr2", "model-key");

/** The Secret holding the model's key, its key, and the Custodian's name for the provider. */
export const MODEL_SECRET = { name: "jr2-model-key", key: "api-key" };
const PROVIDER = "model";

/** A model id each kind knows, for the error that asks for one. */
const EXAMPLE_ID: Record<ModelKind, string> = {
  anthropic: "claude-sonnet-4-5",
  openai: "gpt-5",
  google: "gemini-2.5-flash",
  "openai-compatible": "the id it serves",
};

/** The demo's script, per conversation: change a file in the `app` slot, propose it, finish. The
 * example Machine (examples/propose-machine.ts) asks exactly this of its Agent. */
export const DEMO_SCRIPT: ScriptStep[] = [
  {
    toolCalls: [
      {
        name: "bash",
        arguments: { command: "echo 'Hello from the scripted Agent.' >> app/README.md && git -C app status --short" },
      },
    ],
  },
  { toolCalls: [{ name: "propose", arguments: { summary: "app/README.md now says hello" } }] },
  { text: "Done: app/README.md says hello, and the workflow has answered my proposal." },
];

export type LocalModel = {
  /** The pod config file to give the Orchestrator (JR2_POD_CONFIG_FILE). */
  podConfigFile: string;
  /** One line for the console: which model, where. */
  summary: string;
  stop(): Promise<void>;
};

/** In-cluster mode (decision 0039): the Sandboxes are pods on the real node, from these images. */
export type InCluster = {
  /** The companions image: the Custodians', and the scripted model's when it is served. */
  image: string;
  placement: Placement;
  /** Where the scripted model is served from (created, and deleted on stop). */
  modelNamespace: string;
};

const KINDS = {
  Secret: kind.Secret,
  ConfigMap: kind.ConfigMap,
  Deployment: kind.Deployment,
  Service: kind.Service,
} as const;

/** The scripted model served from the real node (dev/in-cluster-model.ts), Ready; stop deletes it. */
async function serveInCluster(o: InCluster, key: string) {
  await K8s(kind.Namespace).Apply({ metadata: { name: o.modelNamespace } });
  const objects = scriptedModelObjects({
    namespace: o.modelNamespace,
    image: o.image,
    key,
    script: DEMO_SCRIPT,
    placement: o.placement,
  }) as Array<{ kind: keyof typeof KINDS; metadata: { name: string; namespace: string } }>;
  for (const obj of objects) await K8s(KINDS[obj.kind]).Apply(obj as never, { force: true });
  const deadline = Date.now() + 180_000;
  for (;;) {
    const d = await K8s(kind.Deployment).InNamespace(o.modelNamespace).Get(SCRIPTED_MODEL);
    const s = d.status;
    if (
      (s?.observedGeneration ?? 0) >= (d.metadata?.generation ?? 1) &&
      s?.updatedReplicas === 1 &&
      s.availableReplicas === 1
    )
      break;
    if (Date.now() > deadline)
      throw new Error(
        `the scripted model (deployment ${o.modelNamespace}/${SCRIPTED_MODEL}) was not available within 180s: ` +
          `kubectl -n ${o.modelNamespace} describe pods says why`,
      );
    await new Promise((r) => setTimeout(r, 500));
  }
  const stop = async () => {
    await K8s(kind.Namespace)
      .Delete(o.modelNamespace)
      .catch(() => undefined);
  };
  return { url: scriptedModelUrl(o.modelNamespace), stop };
}

/** The model's base URL, key and id from the environment, or the scripted provider started here
 * (on loopback, or in the cluster in in-cluster mode). */
async function endpoint(env: NodeJS.ProcessEnv, processMode: boolean, inCluster?: { o: InCluster; namespace: string }) {
  const url = env[LOCAL_MODEL_ENV.url];
  if (!url && inCluster) {
    const key = `sk-scripted-${randomBytes(12).toString("hex")}`;
    const served = await serveInCluster(inCluster.o, key);
    const what = `the scripted model, served from the real node at ${served.url}`;
    return { baseUrl: `${served.url}/v1`, key, id: SCRIPTED_MODEL_ID, stop: served.stop, what };
  }
  if (!url) {
    const key = `sk-scripted-${randomBytes(12).toString("hex")}`;
    const model = await startScriptedModel({ script: DEMO_SCRIPT, apiKey: key, perConversation: true });
    return { baseUrl: model.baseUrl, key, id: SCRIPTED_MODEL_ID, stop: model.stop, what: "the scripted model" };
  }
  // A credential in the URL would be printed, and written into every Custodian's ConfigMap.
  if (/^https?:\/\/[^/]*@/.test(url))
    throw new Error(
      `${LOCAL_MODEL_ENV.url}: must not carry a credential (user:password@): put the key in the key file`,
    );
  const baseUrl = url.replace(/\/+$/, "");
  const rawKind = env[LOCAL_MODEL_ENV.kind];
  if (rawKind && !isModelKind(rawKind))
    throw new Error(`${LOCAL_MODEL_ENV.kind}=${rawKind}: must be one of ${MODEL_KINDS.join(", ")}`);
  const modelKind = rawKind && isModelKind(rawKind) ? rawKind : providerKind({ url: baseUrl });
  if (modelKind === "openai-compatible" && !/^https?:\/\/[^/]+(\/.*)?\/v1$/.test(baseUrl))
    throw new Error(
      `${LOCAL_MODEL_ENV.url}=${url}: must be an OpenAI-compatible base URL ending in /v1, e.g. http://127.0.0.1:8000/v1 ` +
        `(or name the API it speaks in ${LOCAL_MODEL_ENV.kind}: ${MODEL_KINDS.join(", ")})`,
    );
  if (modelKind !== "openai-compatible" && !env[LOCAL_MODEL_ENV.id])
    throw new Error(
      `${LOCAL_MODEL_ENV.url} is a ${modelKind} API, which lists no one model to take: set ${LOCAL_MODEL_ENV.id} to ` +
        `the model's id as ${modelKind} names it (e.g. ${EXAMPLE_ID[modelKind]})`,
    );
  // Checked once the URL is usable, and before the key is read: the refusal is the next thing to fix.
  if (processMode && env[LOCAL_MODEL_ENV.allowRealKey] !== "1")
    throw new Error(
      `${LOCAL_MODEL_ENV.url} names a real model, and ${LOCAL_MODE_WARNING}. Run on the real node ` +
        `(in-cluster mode), or set ${LOCAL_MODEL_ENV.allowRealKey}=1 to accept that`,
    );
  const keyFile = env[LOCAL_MODEL_ENV.keyFile] || DEFAULT_KEY_FILE;
  if (!existsSync(keyFile))
    throw new Error(
      `${LOCAL_MODEL_ENV.url} is set, so the model's key is read from ${keyFile}, which does not exist: ` +
        `write the key there (chmod 600; any placeholder for an endpoint that wants none), or name another ` +
        `file in ${LOCAL_MODEL_ENV.keyFile}`,
    );
  const key = readFileSync(keyFile, "utf8").trim();
  if (!key) throw new Error(`${keyFile} is empty: it must hold the model's API key`);
  const id = env[LOCAL_MODEL_ENV.id] || (await firstModel(baseUrl, key));
  const what = `${id} at ${baseUrl} (${modelKind})`;
  return { baseUrl, kind: modelKind, key, id, stop: async () => undefined, what };
}

/** The endpoint's first model (`GET /models`), for an endpoint that serves one, as vLLM does. */
async function firstModel(baseUrl: string, key: string): Promise<string> {
  const hint = `set ${LOCAL_MODEL_ENV.id} to the model's id`;
  try {
    const res = await request(`${baseUrl}/models`, {
      headers: { authorization: `Bearer ${key}` },
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    const body = (await res.body.json()) as { data?: Array<{ id?: unknown }> };
    const id = body.data?.[0]?.id;
    if (res.statusCode === 200 && typeof id === "string" && id) return id;
    throw new Error(`GET ${baseUrl}/models answered ${res.statusCode} with no model`);
  } catch (err) {
    // The error names the URL and the status, never the key.
    throw new Error(`${err instanceof Error ? err.message : String(err)}: ${hint}`);
  }
}

/** Starts (or names) the model, writes its key's Secret in `namespace` and the pod config in `dir`. */
export async function startLocalModel(o: {
  namespace: string;
  dir: string;
  env?: NodeJS.ProcessEnv;
  /** The Sandboxes' Harness and Custodian run as local processes (default); false: in pods. */
  processMode?: boolean;
  /** In-cluster mode: the Sandboxes' pods on the real node (implies processMode false). */
  inCluster?: InCluster;
  /** The pod config's runtime classes (npm start's, dev/start-mode.ts `startRuntime`); absent: none. */
  runtime?: z.input<typeof PodConfig>["runtime"];
}): Promise<LocalModel> {
  const e = await endpoint(
    o.env ?? process.env,
    o.inCluster ? false : (o.processMode ?? true),
    o.inCluster && { o: o.inCluster, namespace: o.namespace },
  );
  const origin = new URL(e.baseUrl).origin;
  const modelKind: ModelKind = ("kind" in e && e.kind) || "openai-compatible";
  const spec = MODEL_KIND[modelKind];
  // The provider is the base URL without the path the kind's client adds itself (/v1, /v1beta).
  const providerUrl =
    spec.basePath && e.baseUrl.endsWith(spec.basePath) ? e.baseUrl.slice(0, -spec.basePath.length) : e.baseUrl;
  await K8s(kind.Secret).Apply(
    { metadata: { name: MODEL_SECRET.name, namespace: o.namespace }, stringData: { [MODEL_SECRET.key]: e.key } },
    { force: true },
  );
  // The Harness asks <Custodian>/providers/model + the kind's path (harness/agents/model-settings.ts),
  // with the Stand-in in the kind's variable and header (docs/decisions/0054).
  const config: z.input<typeof PodConfig> = {
    ...(o.inCluster ? { placement: o.inCluster.placement } : {}),
    ...(o.runtime ? { runtime: o.runtime } : {}),
    custodian: {
      ...(o.inCluster ? { image: o.inCluster.image } : {}),
      providers: [{ name: PROVIDER, url: providerUrl, kind: modelKind }],
      held: [
        {
          secret: MODEL_SECRET.name,
          key: MODEL_SECRET.key,
          env: spec.keyEnv,
          origins: [origin],
          headers: [spec.keyHeader],
        },
      ],
    },
    harness: {
      env: [
        { name: HARNESS_ENV.modelProvider, value: PROVIDER },
        { name: HARNESS_ENV.modelId, value: e.id },
      ],
    },
  };
  PodConfig.parse(config); // what the Orchestrator will read: refused here first, with its words
  const podConfigFile = join(o.dir, "pod.json");
  writeFileSync(podConfigFile, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  return { podConfigFile, summary: e.what, stop: e.stop };
}
