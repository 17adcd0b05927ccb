// The whole installation by Helm on the real node (docs/decisions/0060-one-install.md): the chart
// `npm run build` writes, installed by helm built from its pinned Go module, with the images
// `npm run images` pushed named by digest and every Deployment placed on the real node. Installed
// as the previous chart version (a build of its own: other pod templates; the admission identity
// the keeper made in the cluster, decision 0075); a workspace through the Orchestrator whose Agent's turn is held at a Menu
// pick; upgraded to this build's chart with changed values, so every component rolls, while
// Sandboxes are created (server-side dry runs, which admission judges as creates) the whole time:
// none refused, the workspace's Sandbox and pod the same, the held pick still there and the turn
// completed after it; then uninstalled, leaving nothing of ours but the CRDs. Every cluster-wide
// object it makes shares its name with deployed.test.ts's: both remove them before and after.
import { helmRunner } from "./helm-run";
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createActor, toPromise } from "xstate";
import { parse, parseAllDocuments } from "yaml";
import { SCRIPTED_MODEL, scriptedModelObjects, scriptedModelUrl } from "../../dev/in-cluster-model";
import { CRDS_RELEASE, helmBin } from "../../dev/helm";
import { proposeMachine } from "../../examples/propose-machine";
import { OrchestratorClient } from "../../clients/typescript/src";
import { CHART_NAME, CRDS_CHART_NAME, INSTANCE_LABEL } from "../../scripts/helm-chart";
import cfg from "../../package.json";
import {
  type Obj,
  ROOT,
  apply,
  available,
  expectProposedTurn,
  fromSetup,
  getJson,
  kubectl,
  kubectlOk,
  proposeScript,
  realNode,
  until,
  serveWidgetsRemote,
  INSTALLED,
  removeInstallation,
  SANDBOX_RESOURCE,
} from "./support";

const node = realNode();
const NODE_IP = fromSetup("JR2_REAL_NODE_IP");
const SANDBOX_IMAGE = fromSetup("JR2_NODE_SANDBOX_IMAGE");
const COMPANIONS_IMAGE = fromSetup("JR2_NODE_COMPANIONS_IMAGE");
const BY_TAG = JSON.parse(fromSetup("JR2_NODE_IMAGES_BY_TAG")) as Record<string, string>;

const RELEASE = "jr2";
const RELEASE_NS = "default";
const CHART = join(ROOT, "dist", `${CHART_NAME}-chart`);
const CRDS_CHART = join(ROOT, "dist", `${CRDS_CHART_NAME}-chart`);
const { module: MODULE, peprNamespace: PEPR_NS, system: SYSTEM, sandboxes: SANDBOXES } = INSTALLED;
const suffix = randomBytes(3).toString("hex");
const modelNs = `jr2-hmodel-${suffix}`;
const tmp = mkdtempSync(join(tmpdir(), "jr2-helm-"));
const KEY = `sk-helm-${randomBytes(16).toString("hex")}`;
const TOKEN = randomBytes(24).toString("hex");
const ORCHESTRATOR_URL = `http://jr2-orchestrator.${SYSTEM}.svc.cluster.local:8090`;
const onRealNode = {
  nodeSelector: { [node.label[0]]: node.label[1] },
  tolerations: [{ key: node.taint.key, operator: "Equal", value: node.taint.value, effect: node.taint.effect }],
};
const helm = helmBin();
let daemon: ChildProcess | undefined;
let remoteUrl = "";

const { helmRun, helmOk } = helmRunner(helm, RELEASE_NS);
/** kubectl, not blocking the loop. */
function kubectlAsync(args: string[], input: string): Promise<{ status: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.env.KUBECTL!, ["--kubeconfig", process.env.KUBECONFIG!, ...args], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    let out = "";
    p.stdout.on("data", (c) => (out += c));
    p.stderr.on("data", (c) => (out += c));
    p.on("close", (status) => resolve({ status, out }));
    p.stdin.end(input);
  });
}

/** The image the build's chart names by tag, as the digest `npm run images` pushed. */
function digestOf(tag: string): string {
  const d = BY_TAG[tag];
  if (!d)
    throw new Error(`the chart's image ${tag} is not one npm run images pushed (${Object.keys(BY_TAG).join(", ")})`);
  return d;
}

/** The pod config: the scripted model, its key held by the Custodian, Sandboxes on the real node. */
const podConfig = (extraAllow: string[] = []) => ({
  custodian: {
    providers: [{ name: "scripted", url: scriptedModelUrl(modelNs) }],
    held: [{ secret: "model-keys", key: "openai", env: "OPENAI_API_KEY", origins: [scriptedModelUrl(modelNs)] }],
  },
  harness: {
    env: [
      { name: "JR2_MODEL_PROVIDER", value: "scripted" },
      { name: "JR2_MODEL_ID", value: "scripted" },
    ],
  },
  egress: { allow: extraAllow },
  placement: onRealNode,
});

/** The values a platform team writes: images by digest, placement, the token, the pod config, the fence. */
function values(defaults: Obj, more: Obj = {}): string {
  const file = join(tmp, `values-${randomBytes(3).toString("hex")}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      images: { controller: digestOf(defaults.images.controller), companions: digestOf(defaults.images.companions) },
      placement: onRealNode,
      orchestrator: { apiTokens: [TOKEN] },
      podConfig: podConfig(),
      fence: [remoteUrl.replace(/widgets\.git$/, "")],
      // The remote is served from the real node's bridge address, an internal one: vouched for by the
      // installation (decision 0066).
      cacheAgent: { vouchedHosts: [NODE_IP] },
      ...more,
    }),
  );
  return file;
}

/**
 * The previous chart version: this chart as an earlier build would have written it, with another
 * build timestamp (it rolls the controllers' pods on upgrade). The admission identity is no part of
 * either chart: the keeper made it in the cluster at install, and the upgrade must keep it
 * (decision 0075).
 */
function previousChart(): { dir: string } {
  const dir = join(tmp, "previous-chart");
  cpSync(CHART, dir, { recursive: true });
  const chartYaml = join(dir, "Chart.yaml");
  writeFileSync(chartYaml, readFileSync(chartYaml, "utf8").replace(/^version: .*$/m, "version: 0.0.1"));
  const module = join(dir, "templates", "module.yaml");
  const stamped = readFileSync(module, "utf8").replace(/buildTimestamp: "\d+"/g, 'buildTimestamp: "1"');
  writeFileSync(module, stamped);
  return { dir };
}

/** Everything of ours on the cluster, removed and waited for: a release a stopped run left, and the
 * objects deployed.test.ts's manifests make under the same names. */
async function cleanUp() {
  // The CRDs' release alone: Helm leaves its CRDs, which the cluster's other tests share.
  for (const r of [RELEASE, CRDS_RELEASE]) await helmRun(["uninstall", r, "--ignore-not-found"]);
  removeInstallation([modelNs]);
}

const chartDefaults = () => parseAllDocuments(readFileSync(join(CHART, "values.yaml"), "utf8"))[0].toJS() as Obj;
const ready = (p: Obj) => p.status?.conditions?.find((c: Obj) => c.type === "Ready")?.status === "True";
const client = () => new OrchestratorClient({ url: ORCHESTRATOR_URL, token: TOKEN });
const tlsSecret = () => getJson(["secret", "-n", PEPR_NS, `${MODULE}-tls`]).data["tls.crt"] as string;
const apiPathSecret = () => getJson(["secret", "-n", PEPR_NS, `${MODULE}-api-path`]).data.value as string;
const webhook = () => getJson(["validatingwebhookconfiguration", MODULE]).webhooks[0].clientConfig;

async function allAvailable() {
  for (const [ns, d] of [
    [PEPR_NS, MODULE],
    [PEPR_NS, `${MODULE}-watcher`],
    [SYSTEM, "jr2-orchestrator"],
    [SYSTEM, "jr2-egress"],
  ])
    await available(ns, d);
  await until("the cache agent's DaemonSet rolled and Ready on the real node", 240_000, () => {
    const ds = getJson(["daemonset", "-n", SYSTEM, "jr2-cache-agent"]);
    const s = ds.status ?? {};
    const pods = getJson([
      "pods",
      "-n",
      SYSTEM,
      "-l",
      "app.kubernetes.io/name=jr2-cache-agent",
      "--field-selector",
      `spec.nodeName=${node.name}`,
    ]).items as Obj[];
    return s.observedGeneration >= ds.metadata.generation &&
      s.updatedNumberScheduled === s.desiredNumberScheduled &&
      pods.length === 1 &&
      ready(pods[0])
      ? true
      : undefined;
  });
}

const previous = { dir: "", crt: "", apiPath: "", signingKeyVersion: "" };

beforeAll(async () => {
  ({ url: remoteUrl, daemon } = await serveWidgetsRemote(tmp, NODE_IP));
  await cleanUp();
  Object.assign(previous, previousChart());
  kubectlOk(["create", "namespace", modelNs]);
  apply(
    ...scriptedModelObjects({
      namespace: modelNs,
      image: COMPANIONS_IMAGE,
      key: KEY,
      script: proposeScript("helm"),
      placement: onRealNode,
    }),
  );
  await available(modelNs, SCRIPTED_MODEL);
}, 600_000);

afterAll(async () => {
  daemon?.kill();
  await cleanUp();
  rmSync(tmp, { recursive: true, force: true });
}, 600_000);

describe("the whole installation by helm: install, a workspace, upgrade with it alive, uninstall", () => {
  const machine = { actor: undefined as ReturnType<typeof createActor<typeof proposeMachine>> | undefined };
  const before = { sandboxUid: "", podUid: "", workspace: "", iid: "" };

  test("helm install of the previous chart version: the module, the companions, the Secret, on the real node", async () => {
    // The CRDs first, their own release (a cluster that has them keeps them as they are).
    await helmOk(["install", CRDS_RELEASE, CRDS_CHART]);
    await helmOk(["install", RELEASE, previous.dir, "--values", values(chartDefaults())]);
    await allAvailable();
    // The module's pods; the keeper's Job pods end Completed, never Ready (decision 0075).
    for (const p of (getJson(["pods", "-n", PEPR_NS]).items as Obj[]).filter(
      (p) => !p.metadata.labels?.["batch.kubernetes.io/job-name"],
    ))
      expect([p.metadata.name, p.spec.nodeName, ready(p)]).toEqual([p.metadata.name, node.name, true]);
    expect(
      getJson(["pods", "-n", SYSTEM, "-l", "app.kubernetes.io/name=jr2-orchestrator"]).items[0].spec.nodeName,
    ).toBe(node.name);
    // The chart made the Orchestrator's Secret with the token the values list.
    const secret = getJson(["secret", "-n", SYSTEM, "jr2-orchestrator"]);
    expect(Buffer.from(secret.data["api-tokens"], "base64").toString()).toBe(`${TOKEN}\n`);
    // The keeper made the admission identity and the signing key in the cluster (decision 0075):
    // the webhooks trust the CA that signed the pair the pods serve, and call the path they answer.
    previous.crt = tlsSecret();
    previous.apiPath = apiPathSecret();
    const ca = getJson(["secret", "-n", PEPR_NS, `${MODULE}-ca`]).data["ca.crt"] as string;
    expect(webhook().caBundle).toBe(ca);
    expect(webhook().service.path).toBe(`/validate/${Buffer.from(previous.apiPath, "base64").toString()}`);
    previous.signingKeyVersion = getJson([
      "secret",
      "-n",
      SYSTEM,
      "jr2-orchestrator-signing-key",
    ]).metadata.resourceVersion;
    apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "model-keys", namespace: SANDBOXES },
      stringData: { openai: KEY },
    });
  }, 600_000);

  test("a workspace through the Orchestrator and an Agent's turn, held at its Menu pick", async () => {
    const actor = createActor(proposeMachine, {
      input: {
        client: client(),
        workspace: { image: SANDBOX_IMAGE, branch: "feature/helm", repos: [{ slot: "app", url: remoteUrl }] },
        message: "write change.txt, then propose it",
        readyTimeoutMs: 300_000,
        autoApprove: false,
        log: () => undefined,
      },
    });
    machine.actor = actor;
    actor.start();
    const held = await until("the turn held at its propose pick", 360_000, () => {
      const s = actor.getSnapshot();
      if (s.status !== "active") throw new Error(`the Machine ended: ${JSON.stringify(s.output ?? s.context.error)}`);
      return s.value === "awaitingApproval" ? s.context : undefined;
    });
    before.workspace = held.workspace!;
    before.iid = held.iid!;
    before.sandboxUid = getJson([SANDBOX_RESOURCE, "-n", SANDBOXES, before.workspace]).metadata.uid;
    const pod = getJson(["pod", "-n", SANDBOXES, before.workspace]);
    before.podUid = pod.metadata.uid;
    expect(pod.spec.nodeName).toBe(node.name);
    expect((await client().picks(before.workspace)).items.map((p) => [p.iid, p.pick])).toEqual([
      [before.iid, "propose"],
    ]);
  }, 420_000);

  test("helm upgrade to this build's chart with changed values: every component rolls, no admission refused, the workspace alive", async () => {
    const oldPods = (ns: string) => (getJson(["pods", "-n", ns]).items as Obj[]).map((p) => p.metadata.uid);
    const rolled = [...oldPods(PEPR_NS), ...oldPods(SYSTEM)];
    const hookBefore = webhook();
    // Sandboxes created the whole time, as server-side dry runs: admission judges each as a create
    // (the defaults policy and the module's webhook) and nothing is stored.
    const attempts: Array<{ status: number | null; out: string }> = [];
    let done = false;
    const creates = (async () => {
      for (let i = 0; !done; i++) {
        attempts.push(
          await kubectlAsync(
            ["create", "--dry-run=server", "-o", "name", "-f", "-"],
            JSON.stringify({
              apiVersion: "core.jr2.dev/v1alpha1",
              kind: "Sandbox",
              metadata: { name: `rollout-${i}`, namespace: SANDBOXES },
              spec: { image: SANDBOX_IMAGE },
            }),
          ),
        );
      }
    })();
    const started = Date.now();
    try {
      await helmOk([
        "upgrade",
        RELEASE,
        CHART,
        "--values",
        values(chartDefaults(), {
          podConfig: podConfig(["upgraded.egress.example:80"]),
          cacheAgent: {
            vouchedHosts: [NODE_IP],
            resources: { requests: { cpu: "60m", memory: "128Mi" }, limits: { memory: "1Gi" } },
          },
        }),
      ]);
      await allAvailable();
      // Every pod of the installation is new: nothing was left unrolled.
      await until("every old pod of the installation gone", 240_000, () =>
        [...oldPods(PEPR_NS), ...oldPods(SYSTEM)].some((uid) => rolled.includes(uid)) ? undefined : true,
      );
      // A few more after the last old pod went.
      const after = attempts.length;
      await until("five more creates after the rollout", 60_000, () =>
        attempts.length >= after + 5 ? true : undefined,
      );
    } finally {
      done = true;
      await creates;
    }
    process.stdout.write(
      `helm upgrade rollout: ${attempts.length} creates in ${((Date.now() - started) / 1000).toFixed(1)}s\n`,
    );
    const refused = attempts.filter((a) => a.status !== 0).map((a) => a.out);
    expect(refused).toEqual([]);
    expect(attempts.length).toBeGreaterThanOrEqual(10);
    // The admission identity was kept: the webhook trusts and calls what the pods serve; the
    // signing key was not rewritten (decision 0075).
    expect([tlsSecret(), apiPathSecret()]).toEqual([previous.crt, previous.apiPath]);
    expect(webhook()).toEqual(hookBefore);
    expect(getJson(["secret", "-n", SYSTEM, "jr2-orchestrator-signing-key"]).metadata.resourceVersion).toBe(
      previous.signingKeyVersion,
    );
    expect(getJson(["secret", "-n", SYSTEM, "jr2-orchestrator"]).data["api-tokens"]).toBe(
      Buffer.from(`${TOKEN}\n`).toString("base64"),
    );
    // The workspace: the same Sandbox and pod, its held pick still there after the Orchestrator rolled.
    expect(getJson([SANDBOX_RESOURCE, "-n", SANDBOXES, before.workspace]).metadata.uid).toBe(before.sandboxUid);
    expect(getJson(["pod", "-n", SANDBOXES, before.workspace]).metadata.uid).toBe(before.podUid);
    expect((await client().picks(before.workspace)).items.map((p) => [p.iid, p.pick])).toEqual([
      [before.iid, "propose"],
    ]);
    expect(parse(getJson(["configmap", "-n", SYSTEM, "jr2-orchestrator-pod"]).data["pod.yaml"]).egress).toEqual({
      allow: ["upgraded.egress.example:80"],
    });
  }, 900_000);

  test("the held turn completes after the upgrade: no turn lost", async () => {
    const actor = machine.actor!;
    actor.send({ type: "APPROVE" });
    const output = await toPromise(actor);
    expect(output.workspace).toBe(before.workspace);
    expect(output.iid).toBe(before.iid);
    expectProposedTurn(output, modelNs, "helm");
    // The Machine deleted its workspace at its end: the Sandbox goes.
    await until(`Sandbox ${before.workspace} gone`, 180_000, () =>
      kubectl(["get", SANDBOX_RESOURCE, "-n", SANDBOXES, before.workspace]).status !== 0 ? true : undefined,
    );
  }, 420_000);

  test("helm uninstall leaves nothing of ours but the CRDs (and their release)", async () => {
    await helmOk(["uninstall", RELEASE]);
    for (const ns of [PEPR_NS, SYSTEM, SANDBOXES])
      await until(`namespace ${ns} gone`, 300_000, () =>
        kubectl(["get", "namespace", ns]).status !== 0 ? true : undefined,
      );
    // Every type the API serves that can be listed, but the CRDs, which Helm keeps (crds/).
    const types = kubectlOk(["api-resources", "--verbs=list", "-o", "name"])
      .trim()
      .split("\n")
      .filter((t) => t !== "customresourcedefinitions.apiextensions.k8s.io" && !t.startsWith("events"));
    const left: string[] = [];
    for (const selector of [
      `${INSTANCE_LABEL}=${RELEASE}`,
      "app.kubernetes.io/part-of=jr2",
      "app.kubernetes.io/managed-by=jr2-operator",
      `pepr.dev/uuid=${cfg.pepr.uuid}`,
      `owner=helm,name=${RELEASE}`,
    ]) {
      const r = kubectlOk(["get", types.join(","), "-A", "-l", selector, "-o", "name"]);
      left.push(
        ...r
          .split("\n")
          .filter(Boolean)
          .map((n) => `${selector}: ${n}`),
      );
    }
    expect(left).toEqual([]);
    // The cluster-wide objects that carry no label of ours, by name.
    for (const [kind, name] of [
      ["validatingwebhookconfiguration", MODULE],
      ["mutatingadmissionpolicy", "jr2-sandbox-defaults"],
      ["mutatingadmissionpolicybinding", "jr2-sandbox-defaults"],
      ["clusterrole", MODULE],
      ["clusterrolebinding", MODULE],
    ])
      expect([kind, name, kubectl(["get", kind, name]).status]).toEqual([kind, name, 1]);
    for (const crd of ["sandboxes.core.jr2.dev", "repos.core.jr2.dev", "peprstores.pepr.dev"])
      expect(kubectl(["get", "crd", crd]).status).toBe(0);
    // Uninstalling the CRDs' release too leaves the CRDs: Helm never deletes a chart's crds/.
    await helmOk(["uninstall", CRDS_RELEASE]);
    expect(
      kubectl(["get", "secrets", "-n", RELEASE_NS, "-l", `owner=helm,name=${CRDS_RELEASE}`, "-o", "name"]).stdout,
    ).toBe("");
    for (const crd of ["sandboxes.core.jr2.dev", "repos.core.jr2.dev", "peprstores.pepr.dev"])
      expect(kubectl(["get", "crd", crd]).status).toBe(0);
  }, 600_000);
});
