// Deployed as users deploy it (docs/decisions/0039-in-cluster-by-default.md): the manifests
// `npm run build` writes (the module with its webhooks, CRDs and RBAC; the cache agent's DaemonSet;
// the Orchestrator's Deployment) applied to the cluster with the images `npm run images` pushed,
// placed on the real node (dev/deployed.ts). The module runs in-cluster as Pepr deploys it,
// admission and watcher; the cache agent runs on the real node; the Orchestrator runs as a pod and
// is reached at its Service. Through them: a workspace on the real node, attached from the
// DaemonSet's cache of a repository served by `git daemon`, and an Agent's turn with a Menu pick,
// the model served from a pod (dev/in-cluster-model.ts). Each service account's RBAC is checked
// with `kubectl auth can-i --list`. Afterwards every cluster-wide object it made (the webhooks, the
// defaults policy, the roles) is removed, so the next module to run here is the only one.
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createActor, toPromise } from "xstate";
import { SCRIPTED_MODEL, scriptedModelObjects, scriptedModelUrl } from "../../dev/in-cluster-model";
import { builtManifests, onTheRealNode } from "../../dev/deployed";
import { freePort } from "../../dev/local-orchestrator";
import { proposeMachine } from "../../examples/propose-machine";
import { OrchestratorClient } from "../../orchestrator/http/orchestrator-client";
import cfg from "../../package.json";
import { DEFAULT_SANDBOX_NAMESPACE } from "../../api/wire";
import { gitIn } from "../support/git-fixtures";
import {
  type Obj,
  available,
  expectProposedTurn,
  fromSetup,
  proposeScript,
  ROOT,
  apply,
  getJson,
  kubectl,
  kubectlOk,
  realNode,
  until,
} from "./support";

const node = realNode();
const need = fromSetup;
const NODE_IP = need("JR2_REAL_NODE_IP");
const SANDBOX_IMAGE = need("JR2_NODE_SANDBOX_IMAGE");
const COMPANIONS_IMAGE = need("JR2_NODE_COMPANIONS_IMAGE");
const BY_TAG = JSON.parse(need("JR2_NODE_IMAGES_BY_TAG")) as Record<string, string>;

const MODULE = `pepr-${cfg.pepr.uuid}`;
const PEPR_NS = "pepr-system";
/** The companions' manifests' namespace: the Orchestrator and the cache agents. */
const SYSTEM = "jr2-system";
/** Where the deployed Orchestrator's Sandboxes live (its manifest's default, decision 0047). */
const SANDBOXES = DEFAULT_SANDBOX_NAMESPACE;
const suffix = randomBytes(3).toString("hex");
const modelNs = `jr2-dmodel-${suffix}`;
const tmp = mkdtempSync(join(tmpdir(), "jr2-deployed-"));
const remotes = join(tmp, "remotes");
const SCRIPTED_KEY = `sk-deployed-${randomBytes(16).toString("hex")}`;
const TOKEN = randomBytes(24).toString("hex");
const SCRIPT = proposeScript("deployed");
const onRealNode = {
  nodeSelector: { [node.label[0]]: node.label[1] },
  tolerations: [{ key: node.taint.key, operator: "Equal", value: node.taint.value, effect: node.taint.effect }],
};
let daemon: ChildProcess | undefined;
let remoteUrl = "";
const ORCHESTRATOR_URL = `http://jr2-orchestrator.${SYSTEM}.svc.cluster.local:8090`;
const ready = (p: Obj) => p.status?.conditions?.find((c: Obj) => c.type === "Ready")?.status === "True";

/** The Orchestrator's installation config, as a platform team fills in the manifests' two
 * ConfigMaps: its fence (the remote) and its pod config (the model, its key, the real node). */
function configured(docs: Obj[]): Obj[] {
  const podConfig = {
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
    placement: onRealNode,
  };
  const data: Record<string, Record<string, string>> = {
    "jr2-orchestrator-fence": {
      "git-credentials.yaml": `- ${JSON.stringify(remoteUrl.replace(/widgets\.git$/, ""))}\n`,
    },
    "jr2-orchestrator-pod": { "pod.yaml": JSON.stringify(podConfig) },
  };
  return docs.map((d) => (d.kind === "ConfigMap" && data[d.metadata.name] ? { ...d, data: data[d.metadata.name] } : d));
}

beforeAll(async () => {
  // The remote, served by real git over git:// where the real node's pods reach this machine.
  const work = join(tmp, "src");
  gitIn(undefined, "init", "--quiet", "-b", "main", work);
  writeFileSync(join(work, "README"), "widgets\n");
  gitIn(work, "add", "README");
  gitIn(work, "commit", "--quiet", "-m", "first widget");
  gitIn(undefined, "clone", "--quiet", "--bare", work, join(remotes, "widgets.git"));
  const port = await freePort(NODE_IP);
  daemon = spawn(
    "git",
    [
      "daemon",
      "--reuseaddr",
      "--export-all",
      `--base-path=${remotes}`,
      `--listen=${NODE_IP}`,
      `--port=${port}`,
      remotes,
    ],
    { stdio: "ignore" },
  );
  remoteUrl = `git://${NODE_IP}:${port}/widgets.git`;
  await until("git daemon serving", 20_000, () =>
    gitIn(undefined, "ls-remote", remoteUrl, "HEAD").length > 0 ? true : undefined,
  );

  // From nothing: what a run stopped before its cleanup left (an Orchestrator holding another
  // run's token, a module of another build) is removed first.
  cleanUp();
  kubectlOk(["create", "namespace", modelNs]);
  const docs = configured(onTheRealNode(builtManifests(join(ROOT, "dist")), BY_TAG, onRealNode));
  kubectlOk(
    ["apply", "--server-side", "--force-conflicts", "-f", "-"],
    JSON.stringify({ apiVersion: "v1", kind: "List", items: docs }),
  );
  apply(
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "jr2-orchestrator", namespace: SYSTEM },
      stringData: { "signing-key": randomBytes(32).toString("hex"), "api-tokens": `${TOKEN}\n` },
    },
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "model-keys", namespace: SANDBOXES },
      stringData: { openai: SCRIPTED_KEY },
    },
    ...scriptedModelObjects({
      namespace: modelNs,
      sandboxNamespace: SANDBOXES,
      image: COMPANIONS_IMAGE,
      key: SCRIPTED_KEY,
      script: SCRIPT,
      placement: onRealNode,
    }),
  );
  for (const [ns, d] of [
    [PEPR_NS, MODULE],
    [PEPR_NS, `${MODULE}-watcher`],
    [SYSTEM, "jr2-orchestrator"],
    [modelNs, SCRIPTED_MODEL],
  ])
    await available(ns, d);
  await until("the cache agent Ready on the real node", 120_000, () =>
    getJson([
      "pods",
      "-n",
      SYSTEM,
      "-l",
      "app.kubernetes.io/name=jr2-cache-agent",
      "--field-selector",
      `spec.nodeName=${node.name}`,
    ]).items.some(ready)
      ? true
      : undefined,
  );
}, 600_000);

/** Everything this test applies, deleted and waited for: Sandboxes first, while the watcher that
 * finishes them still runs; then the namespaces and the cluster-wide objects. */
function cleanUp() {
  if (kubectl(["get", "namespace", SANDBOXES]).status === 0)
    kubectl(["delete", "sandboxes", "--all", "-n", SANDBOXES, "--timeout=120s"]);
  for (const ns of [SANDBOXES, SYSTEM, PEPR_NS, modelNs])
    kubectl(["delete", "namespace", ns, "--ignore-not-found", "--timeout=180s"]);
  kubectl(["delete", "validatingwebhookconfiguration,mutatingwebhookconfiguration", MODULE, "--ignore-not-found"]);
  kubectl([
    "delete",
    "mutatingadmissionpolicy,mutatingadmissionpolicybinding",
    "jr2-sandbox-defaults",
    "--ignore-not-found",
  ]);
  kubectl(["delete", "clusterrole,clusterrolebinding", MODULE, "jr2-cache-agent", "--ignore-not-found"]);
}

afterAll(async () => {
  daemon?.kill();
  cleanUp();
  rmSync(tmp, { recursive: true, force: true });
}, 600_000);

describe("the manifests npm run build writes, deployed with the images npm run images pushed", () => {
  test("the module runs in-cluster on the real node, admission and watcher, from the controller image", () => {
    const pods = getJson(["pods", "-n", PEPR_NS]).items as Obj[];
    expect(pods.length).toBe(3); // two admission replicas and the watcher
    for (const p of pods) {
      expect([p.metadata.name, p.spec.nodeName, ready(p)]).toEqual([p.metadata.name, node.name, true]);
      expect(p.status.containerStatuses[0].imageID).toContain(
        BY_TAG[Object.keys(BY_TAG).find((t) => t.includes("/controller:"))!].split("@")[1],
      );
    }
    // The webhooks name the module's Service, which the API server reaches on the real node.
    const hooks = getJson(["validatingwebhookconfiguration", MODULE]).webhooks as Obj[];
    for (const h of hooks) expect(h.clientConfig.service).toMatchObject({ namespace: PEPR_NS, name: MODULE });
  });

  test("its admission answers from the pod: a Sandbox that breaks a rule is refused with the field and the fix", () => {
    const bad = kubectl(
      ["apply", "-f", "-"],
      JSON.stringify({
        apiVersion: "core.jr2.dev/v1alpha1",
        kind: "Sandbox",
        metadata: { name: "refused", namespace: SANDBOXES },
        spec: { image: SANDBOX_IMAGE, securityContext: { privileged: true } },
      }),
    );
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toMatch(/denied the request/);
    expect(bad.stderr).toMatch(/spec\.securityContext\.privileged/);
  });

  test("its admission holds the production idleTimeout floor (1m): the deployed module sets no JR2_MIN_IDLE_TIMEOUT", () => {
    const apply = (name: string, idleTimeout: string) =>
      kubectl(
        ["apply", "--dry-run=server", "-f", "-"],
        JSON.stringify({
          apiVersion: "core.jr2.dev/v1alpha1",
          kind: "Sandbox",
          metadata: { name, namespace: SYSTEM },
          spec: { image: SANDBOX_IMAGE, idleTimeout },
        }),
      );
    // A server-side dry run is admitted or refused by the webhook as a create is, and stores nothing.
    const short = apply("short-idle", "59s");
    expect(short.status).not.toBe(0);
    expect(short.stderr).toMatch(/denied the request/);
    expect(short.stderr).toMatch(/spec\.idleTimeout: .*between 1m and 168h/);
    expect(apply("minute-idle", "1m")).toMatchObject({ status: 0 });
  });

  test("a workspace through the deployed Orchestrator: its Sandbox a pod on the real node, attached from the DaemonSet's cache", async () => {
    const client = new OrchestratorClient({ url: ORCHESTRATOR_URL, token: TOKEN });
    const { name } = await client.createWorkspace({
      image: SANDBOX_IMAGE,
      branch: "feature/deployed",
      repos: [{ slot: "app", url: remoteUrl }],
    });
    const view = await until(`workspace ${name} ready`, 300_000, async () => {
      const v = await client.workspace(name);
      // Ready or ended: a failure's view says why.
      return ["ready", "failed", "lost"].includes(v.state) ? v : undefined;
    });
    expect({ state: view.state, failure: view.failure }).toEqual({ state: "ready", failure: undefined });
    expect(view.phase).toBe("Ready");
    const pod = getJson(["pod", "-n", SANDBOXES, name]);
    expect(pod.spec.nodeName).toBe(node.name);
    const key = getJson(["sandbox", "-n", SANDBOXES, name]).spec.repos[0].key as string;
    const log = kubectlOk([
      "exec",
      "-n",
      SANDBOXES,
      name,
      "-c",
      "harness",
      "--",
      "git",
      "-c",
      "safe.directory=*",
      "-C",
      "/work/app/default",
      "log",
      "--format=%s",
    ]);
    expect(log.trim()).toBe("first widget");
    // The cache the pod mounts is the DaemonSet's, on this machine's default cache root.
    expect(kubectlOk(["exec", "-n", SANDBOXES, name, "-c", "harness", "--", "ls", `/repos/${key}`])).toMatch(/HEAD/);
    await client.deleteWorkspace(name);
  }, 330_000);
  test("an Agent's turn with a Menu pick through it, the model in the cluster given the held key", async () => {
    const client = new OrchestratorClient({ url: ORCHESTRATOR_URL, token: TOKEN });
    const actor = createActor(proposeMachine, {
      input: {
        client,
        workspace: { image: SANDBOX_IMAGE, branch: "feature/turn", repos: [{ slot: "app", url: remoteUrl }] },
        message: "write change.txt, then propose it",
        readyTimeoutMs: 300_000,
        log: () => undefined,
      },
    });
    actor.start();
    const output = await toPromise(actor);
    expectProposedTurn(output, modelNs, "deployed");
  }, 420_000);

  describe("each service account's RBAC, as kubectl auth can-i --list reads it", () => {
    /** `kubectl auth can-i --list` as the service account: resource -> verbs. */
    const rights = (namespace: string, sa: string, where: string) => {
      const out = kubectlOk(["auth", "can-i", "--list", `--as=system:serviceaccount:${namespace}:${sa}`, "-n", where]);
      const table: Record<string, string[]> = {};
      for (const line of out.trim().split("\n").slice(1)) {
        const m = /^(\S+)\s+(?:\[[^\]]*\]\s+)*\[([^\]]*)\]\s*$/.exec(line.trim());
        if (m) table[m[1]] = [...(table[m[1]] ?? []), ...m[2].split(/\s+/).filter(Boolean)];
      }
      return table;
    };
    const can = (namespace: string, sa: string, verb: string, resource: string, where: string) =>
      kubectl([
        "auth",
        "can-i",
        verb,
        resource,
        `--as=system:serviceaccount:${namespace}:${sa}`,
        "-n",
        where,
      ]).stdout.trim();

    test("the Orchestrator: Sandboxes and their Secrets, ConfigMaps and Services in the Sandbox namespace, no pods, nothing elsewhere", () => {
      const r = rights(SYSTEM, "jr2-orchestrator", SANDBOXES);
      expect(r["sandboxes.core.jr2.dev"]).toEqual(
        expect.arrayContaining(["get", "list", "watch", "create", "patch", "delete"]),
      );
      for (const [verb, resource] of [
        ["create", "pods"],
        ["exec", "pods"],
        ["list", "secrets"],
        ["create", "deployments"],
      ])
        expect([verb, resource, can(SYSTEM, "jr2-orchestrator", verb, resource, SANDBOXES)]).toEqual([
          verb,
          resource,
          "no",
        ]);
      expect(can(SYSTEM, "jr2-orchestrator", "get", "secrets", "default")).toBe("no");
      // Not its own namespace either, where its signing key and tokens are.
      expect(can(SYSTEM, "jr2-orchestrator", "get", "secrets", SYSTEM)).toBe("no");
      expect(can(SYSTEM, "jr2-orchestrator", "create", "sandboxes.core.jr2.dev", "default")).toBe("no");
    });

    test("the cache agent: Repos and their status, Sandboxes read, one Secret at a time, pods listed; nothing written but Repo status", () => {
      const r = rights(SYSTEM, "jr2-cache-agent", SYSTEM);
      expect(r["repos.core.jr2.dev/status"]).toEqual(expect.arrayContaining(["get", "patch"]));
      for (const [verb, resource] of [
        ["list", "secrets"],
        ["create", "pods"],
        ["patch", "sandboxes.core.jr2.dev"],
        ["delete", "repos.core.jr2.dev"],
      ])
        expect([verb, resource, can(SYSTEM, "jr2-cache-agent", verb, resource, "default")]).toEqual([
          verb,
          resource,
          "no",
        ]);
    });

    test("the module: what its reconcilers and webhooks need, not every verb on everything", () => {
      const r = rights(PEPR_NS, MODULE, "default");
      expect(r["*.*"]).toBeUndefined();
      // Pods and Services are written where Sandboxes live alone (decision 0047); pods are read
      // everywhere (its watch, and the exec guard's get, decision 0048).
      expect(r["pods"]?.sort()).toEqual(["get", "list", "watch"]);
      expect(rights(PEPR_NS, MODULE, SANDBOXES)["pods"]?.sort()).toEqual(["create", "get", "list", "watch"]);
      expect(r["sandboxes.core.jr2.dev/status"]).toEqual(expect.arrayContaining(["patch"]));
      for (const [verb, resource] of [
        ["get", "secrets"],
        ["create", "deployments"],
        ["create", "clusterrolebindings"],
        ["delete", "namespaces"],
        // The garbage collector deletes a Sandbox's pod and Service, not the module.
        ["delete", "pods"],
        ["patch", "pods"],
      ])
        expect([verb, resource, can(PEPR_NS, MODULE, verb, resource, "default")]).toEqual([verb, resource, "no"]);
    });

    test("nothing runs as root but the cache agent, whose cache root is a root-owned hostPath", () => {
      for (const ns of [PEPR_NS, SYSTEM])
        for (const p of getJson(["pods", "-n", ns]).items as Obj[]) {
          if (p.spec.nodeName !== node.name) continue;
          for (const c of p.spec.containers as Obj[]) {
            const uid = c.securityContext?.runAsUser ?? p.spec.securityContext?.runAsUser;
            const nonRoot = c.securityContext?.runAsNonRoot ?? p.spec.securityContext?.runAsNonRoot;
            const root = uid === 0 || (uid === undefined && nonRoot !== true);
            expect([p.metadata.name, c.name, root]).toEqual([p.metadata.name, c.name, c.name === "cache-agent"]);
          }
        }
    });
  });
});
