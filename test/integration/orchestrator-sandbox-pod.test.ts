// The Sandbox pod the Orchestrator composes, on the real control plane (decision
// 0021): a workspace's CR, its owned Secrets, ConfigMap and Service, the installation's CA and
// ingress policy, and the pod the operator builds, field by field against the mounts table. Then
// end to end through the local Custodian (item 3): a fake model provider receives the real key and
// a fake Orchestrator endpoint the real Sandbox token, while the Harness's env held only Stand-ins.
// The Custodian's own CA (decision 0037): an intermediate limited to the bound host, owned by the
// Sandbox and mounted by the custodian alone; the root's key in no pod; local mode intercepts with it.
import { declaredEffectSecrets } from "../../orchestrator/workspaces/effector-secrets";
import { orchestratorApi } from "./support/orchestrator-api";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPrivateKey, randomBytes, X509Certificate } from "node:crypto";
import { once } from "node:events";
import { connect as tlsConnect } from "node:tls";
import { K8s, kind } from "kubernetes-fluent-client";
import { SandboxModel } from "../../api/crd";
import type { Container, EnvVar, Volume } from "../../api/crd/generated/corev1";
import { STAND_IN } from "../../api/custodian-config";
import { ORCHESTRATOR_ENV } from "../../api/env";
import { REPO_CREDENTIAL_HOSTS_ANNOTATION, REPO_CREDENTIAL_LABEL, SANDBOX_NAME_LABEL } from "../../api/wire";
import type { WorkspaceView } from "../../api/orchestrator-schemas";
import { harnessToken, sandboxToken, signingKeyOf } from "../../orchestrator/tokens";
import { type Agent, localReposRoot, startCacheAgents } from "../../dev/local-cache-agent";
import { type LocalOrchestrator, startLocalOrchestrator } from "../../dev/local-orchestrator";
import { nameConstraintsOf } from "../support/certificates";
import { connectThrough } from "../support/custodian-fixtures";
import { gitIn } from "../support/git-fixtures";
import { useNamespace, waitFor } from "./support/cluster";
import { egressPolicy } from "../../api/sandbox-policies";

const ns = useNamespace("pod");
const tmp = mkdtempSync(join(tmpdir(), "jr2-pod-"));
const remotes = join(tmp, "remotes");
const remote = join(remotes, "widgets.git");
const MODEL_KEY = "sk-real-model-key-7f3a9c";
/** An https origin the key is bound to as well: the Custodian intercepts it, so it gets a CA. */
const BOUND_HOST = "models.example";
const PUSH_SECRET = "jr2-git-push-widgets";
/** The installation's Effector image, and a digest it lets a create name instead (decision 0048). */
const EFFECTOR_IMAGE = "ghcr.io/example/effector:1";
const ALLOWED_EFFECTOR = `ghcr.io/example/effector@sha256:${"e".repeat(64)}`;
/** A runtime class the installation lets a create choose (decision 0055); none by default, so the
 * pods of this file run under the cluster's default runtime. */
const ALLOWED_RUNTIME_CLASS = "gvisor";
/** Repos set apart for tenant team-a by its fence entry (decision 0048). */
const privateRemotes = join(tmp, "private-remotes");
/** An admin's token first (startLocalOrchestrator's own), then two tenants'. */
const TENANT_A = `tenant-a-${"a".repeat(32)}`;
const TENANT_B = `tenant-b-${"b".repeat(32)}`;
const agents: Agent[] = [];
let orch: LocalOrchestrator;

/** A fake upstream that records each request's headers and path. */
type Fake = { server: Server; url: string; seen: Array<{ path: string; headers: IncomingHttpHeaders }> };
async function fake(): Promise<Fake> {
  const seen: Fake["seen"] = [];
  const server = createServer((req, res) => {
    seen.push({ path: req.url ?? "", headers: req.headers });
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({ ok: true }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}
let provider: Fake;
let orchestratorEndpoint: Fake;

const api = orchestratorApi(
  () => orch.url,
  () => orch.token,
);

const view = async (name: string) => (await api<WorkspaceView>("GET", `/v1/workspaces/${name}`)).body;

beforeAll(async () => {
  const work = join(tmp, "work-src");
  gitIn(undefined, "init", "--quiet", "-b", "main", work);
  gitIn(work, "commit", "--quiet", "--allow-empty", "-m", "first");
  gitIn(undefined, "clone", "--quiet", "--bare", work, remote);
  provider = await fake();
  orchestratorEndpoint = await fake();
  // The held secret and the push Secret, as the installation's operator would create them.
  await K8s(kind.Secret).Apply({
    metadata: { name: "model-keys", namespace: ns.name },
    stringData: { anthropic: MODEL_KEY },
  });
  // The fence's push Secret is also its Repos' fetch credential: declared for the remotes alone
  // (decision 0046), or the cache agents would refuse to send it.
  await K8s(kind.Secret).Apply({
    metadata: {
      name: PUSH_SECRET,
      namespace: ns.name,
      labels: { [REPO_CREDENTIAL_LABEL]: "true" },
      annotations: { [REPO_CREDENTIAL_HOSTS_ANNOTATION]: `${remotes},${privateRemotes}` },
    },
    stringData: { username: "jr2", password: "push-token-not-for-the-harness" },
  });
  // The effect secret the workspace declares (the pod config's effector.secrets entry): the kubelet
  // mounts it into the Effector, and local mode's Effector reads it as the kubelet would.
  await K8s(kind.Secret).Apply({
    metadata: { name: "forge", namespace: ns.name },
    stringData: { token: "forge-token-not-for-the-harness" },
  });
  const podConfig = join(tmp, "pod.yaml");
  writeFileSync(
    podConfig,
    JSON.stringify({
      custodian: {
        image: "jr2/companions:test",
        providers: [{ name: "anthropic", url: provider.url, kind: "anthropic" }],
        held: [
          {
            secret: "model-keys",
            key: "anthropic",
            env: "ANTHROPIC_API_KEY",
            origins: [provider.url, `https://${BOUND_HOST}`],
            headers: ["x-api-key"],
          },
        ],
      },
      effector: {
        image: EFFECTOR_IMAGE,
        allowedImages: [ALLOWED_EFFECTOR],
        // Decision 0070: what an Effect may spend, bound to its origins; team-a's alone for one key.
        secrets: [
          { secret: "forge", key: "token", origins: ["https://forge.example"] },
          { secret: "forge", key: "admin", origins: ["https://forge.example"], tenants: ["team-a"] },
        ],
        requireCommands: true,
      },
      runtime: { allowedClassNames: [ALLOWED_RUNTIME_CLASS] },
    }),
  );
  mkdirSync(join(tmp, "orchestrator"), { recursive: true });
  writeFileSync(
    join(tmp, "orchestrator", "api-tokens"),
    `${randomBytes(24).toString("hex")}
${TENANT_A} team-a
${TENANT_B} team-b
`,
    { mode: 0o600 },
  );
  agents.push(...(await startCacheAgents(tmp)));
  orch = await startLocalOrchestrator({
    kubeconfig: process.env.KUBECONFIG!,
    namespace: ns.name,
    dir: join(tmp, "orchestrator"),
    credentials: [
      { match: remotes, secret: PUSH_SECRET },
      { match: privateRemotes, secret: PUSH_SECRET, tenants: ["team-a"] },
    ],
    reposRoot: localReposRoot(tmp),
    env: {
      [ORCHESTRATOR_ENV.podConfigFile]: podConfig,
      // The Custodian's Orchestrator route goes to a recording endpoint, to see the token it adds.
      [ORCHESTRATOR_ENV.selfUrl]: orchestratorEndpoint.url,
    },
  });
}, 90_000);

afterAll(async () => {
  await orch?.stop();
  await Promise.all(agents.map((a) => a.stop()));
  provider?.server.close();
  orchestratorEndpoint?.server.close();
  rmSync(tmp, { recursive: true, force: true });
});

describe("a workspace's Sandbox pod, as composed and as built", () => {
  let name: string;
  let sandbox: SandboxModel;
  let pod: kind.Pod;
  const signingKey = () => signingKeyOf(readFileSync(join(tmp, "orchestrator", "signing-key")));

  beforeAll(async () => {
    const res = await api<{ name: string }>("POST", "/v1/workspaces", {
      image: "ghcr.io/example/harness:1",
      branch: "feature/pod",
      repos: [{ slot: "app", url: remote }],
      userImage: "ghcr.io/example/user:1",
      size: { cpu: "2", memory: "2Gi", disk: "10Gi" },
      userSize: { cpu: "500m", memory: "512Mi" },
      effector: { pushes: ["app"], secrets: [{ secret: "forge", key: "token" }] },
    });
    expect(res.status).toBe(202);
    name = res.body.name;
    const ready = await waitFor(
      "the workspace ready",
      () => view(name),
      (v) => v?.state === "ready" || v?.state === "failed",
      60_000,
    );
    // A failure's view says why: compared whole, so a red run names it.
    expect({ state: ready?.state, phase: ready?.phase, failure: ready?.failure }).toEqual({
      state: "ready",
      phase: "Ready",
      failure: undefined,
    });
    sandbox = await K8s(SandboxModel).InNamespace(ns.name).Get(name);
    pod = (await K8s(kind.Pod).InNamespace(ns.name).Get()).items.find(
      (p) => p.metadata?.labels?.[SANDBOX_NAME_LABEL] === name,
    )!;
    expect(pod).toBeDefined();
  }, 90_000);

  const owner = () => ({ apiVersion: "core.jr2.dev/v1alpha1", kind: "Sandbox", name, uid: sandbox.metadata!.uid });

  // Decision 0055: a class only where the create or the pod config names one.
  it("runs under the cluster's default runtime when neither the create nor the pod config names a class", () => {
    expect(sandbox.spec).not.toHaveProperty("runtimeClassName");
    expect(pod.spec).not.toHaveProperty("runtimeClassName");
  });

  it("owns its token Secret from birth, with `data`, the Sandbox token and not the Harness bearer", async () => {
    const secret = await K8s(kind.Secret).InNamespace(ns.name).Get(`${name}-token`);
    expect(secret.metadata?.ownerReferences).toEqual([expect.objectContaining({ ...owner(), controller: true })]);
    expect(secret.metadata?.labels).toMatchObject({ "jr2.dev/sandbox": name });
    const token = Buffer.from(secret.data!.JR2_SANDBOX_TOKEN!, "base64").toString();
    expect(token).toBe(sandboxToken(signingKey(), name));
    expect(token).not.toBe(harnessToken(signingKey(), name));
    // Server-side apply owns `data`: the field reads back as applied (stringData never does).
    const managed = secret.metadata?.managedFields?.find((f) => f.manager === "jr2-orchestrator");
    expect(JSON.stringify(managed?.fieldsV1)).toContain('"f:data"');
  });

  it("owns its Custodian ConfigMap: the held value's file, origins, header and Stand-in, never a value", async () => {
    const cm = await K8s(kind.ConfigMap).InNamespace(ns.name).Get(`${name}-custodian`);
    expect(cm.metadata?.ownerReferences).toEqual([expect.objectContaining(owner())]);
    const config = JSON.parse(cm.data!["config.json"]!);
    expect(config.orchestrator).toEqual({ url: orchestratorEndpoint.url, token: "JR2_SANDBOX_TOKEN", retries: 2 });
    expect(config.providers).toEqual([{ name: "anthropic", url: provider.url, kind: "anthropic" }]);
    expect(config.held).toEqual([
      {
        value: "model-keys__anthropic",
        standIn: expect.stringMatching(STAND_IN),
        origins: [provider.url, `https://${BOUND_HOST}`],
        headers: ["x-api-key"],
        env: "ANTHROPIC_API_KEY",
      },
    ]);
    expect(cm.data!["config.json"]).not.toContain(MODEL_KEY);
  });

  it("owns the Effector's key Secret and its headless Service on :8082", async () => {
    const key = await K8s(kind.Secret).InNamespace(ns.name).Get(`${name}-effector`);
    expect(key.metadata?.ownerReferences).toEqual([expect.objectContaining(owner())]);
    expect(Object.keys(key.data ?? {})).toEqual(["key"]);
    const svc = await K8s(kind.Service).InNamespace(ns.name).Get(`${name}-effector`);
    expect(svc.metadata?.ownerReferences).toEqual([expect.objectContaining(owner())]);
    expect(svc.spec).toMatchObject({
      clusterIP: "None",
      publishNotReadyAddresses: true,
      selector: { [SANDBOX_NAME_LABEL]: name },
      ports: [expect.objectContaining({ name: "effector", port: 8082, targetPort: 8082 })],
    });
  });

  it("owns its Custodian's CA: an intermediate of the root for its bound host alone, P-256, with its key", async () => {
    const secret = await K8s(kind.Secret).InNamespace(ns.name).Get(`${name}-custodian-ca`);
    expect(secret.metadata?.ownerReferences).toEqual([expect.objectContaining({ ...owner(), controller: true })]);
    expect(secret.type).toBe("kubernetes.io/tls");
    const text = (k: string) => Buffer.from(secret.data![k]!, "base64").toString();
    const root = await K8s(kind.Secret).InNamespace(ns.name).Get("jr2-custodian-ca");
    const rootPem = Buffer.from(root.data!["tls.crt"]!, "base64").toString();
    expect(text("ca.crt")).toBe(rootPem);
    const cert = new X509Certificate(text("tls.crt"));
    expect(cert.ca).toBe(true);
    expect(cert.verify(new X509Certificate(rootPem).publicKey)).toBe(true);
    expect(cert.publicKey.asymmetricKeyDetails).toEqual({ namedCurve: "prime256v1" });
    expect(cert.checkPrivateKey(createPrivateKey(text("tls.key")))).toBe(true);
    expect(nameConstraintsOf(text("tls.crt"))).toMatchObject({ critical: true, permitted: [`DNS:${BOUND_HOST}`] });
    const days = (Date.parse(cert.validTo) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(2);
    expect(days).toBeLessThanOrEqual(7);
    // The root's key is in no pod: no volume names its Secret.
    expect(JSON.stringify(pod.spec?.volumes)).not.toContain("jr2-custodian-ca");
  });

  it("has the installation's CA (a tls Secret), its certificate for the Harness, and the operator's ingress policy", async () => {
    const ca = await K8s(kind.Secret).InNamespace(ns.name).Get("jr2-custodian-ca");
    expect(ca.type).toBe("kubernetes.io/tls");
    const cert = Buffer.from(ca.data!["tls.crt"]!, "base64").toString();
    expect(new X509Certificate(cert).ca).toBe(true);
    const trust = await K8s(kind.ConfigMap).InNamespace(ns.name).Get("jr2-ca");
    expect(trust.data).toEqual({ "ca.crt": cert });
    const policy = await K8s(kind.NetworkPolicy).InNamespace(ns.name).Get("jr2-sandbox-ingress");
    expect(policy.spec).toEqual({
      // The label the pod guard holds; the Orchestrator by its namespace's name (decision 0067).
      podSelector: { matchExpressions: [{ key: "sandbox.jr2.dev/name", operator: "Exists" }] },
      policyTypes: ["Ingress"],
      ingress: [
        {
          from: [
            {
              namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "jr2-system" } },
              podSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } },
            },
          ],
          ports: [
            { protocol: "TCP", port: 8080 },
            { protocol: "TCP", port: 8082 },
          ],
        },
      ],
    });
    // Its egress beside it (decision 0038), as written: the real node tier enforces it.
    const egress = await K8s(kind.NetworkPolicy).InNamespace(ns.name).Get("jr2-sandbox-egress");
    expect(egress.spec).toEqual(egressPolicy(ns.name).spec);
    // The policies select this Sandbox's pod.
    expect(pod.metadata?.labels?.["sandbox.jr2.dev/name"]).toBe(pod.metadata?.name);
  });

  describe("the pod: every container against the mounts table (decision 0021)", () => {
    const container = (n: string) => (pod.spec!.containers as Container[]).find((c) => c.name === n)!;
    const volumes = () => pod.spec!.volumes as Volume[];
    const reachesSecret = (v: Volume) =>
      v.secret !== undefined || (v.projected?.sources ?? []).some((s) => s.secret !== undefined);
    const secretMounts = (c: Container) =>
      (c.volumeMounts ?? []).filter((m) => reachesSecret(volumes().find((v) => v.name === m.name)!)).map((m) => m.name);

    it("has the four seats", () => {
      expect((pod.spec!.containers as Container[]).map((c) => c.name)).toEqual([
        "harness",
        "custodian",
        "user",
        "effector",
      ]);
    });

    // Decision 0048.
    it("runs the Effector on the pod config's image, under seccomp RuntimeDefault, the user seat without NET_RAW", () => {
      expect(container("effector").image).toBe(EFFECTOR_IMAGE);
      expect(pod.spec!.securityContext?.seccompProfile).toEqual({ type: "RuntimeDefault" });
      expect(container("user").securityContext).toEqual({ capabilities: { drop: ["NET_RAW"] } });
      expect(container("user").command).toBeUndefined();
    });

    it("harness: /work, /conversations, the CA certificate, /dev/shm and its Repo; no path to a held secret", () => {
      const h = container("harness");
      expect((h.volumeMounts ?? []).map((m) => [m.mountPath, m.readOnly ?? false])).toEqual([
        ["/work", false],
        ["/conversations", false],
        ["/etc/jr2/ca", true],
        ["/dev/shm", false],
        [expect.stringMatching(/^\/repos\//), true],
      ]);
      expect(secretMounts(h)).toEqual([]);
      expect(h.envFrom).toBeUndefined();
      const env = h.env as EnvVar[];
      expect(env.every((e) => e.valueFrom === undefined)).toBe(true);
      expect(env.find((e) => e.name === "ANTHROPIC_API_KEY")?.value).toMatch(STAND_IN);
      expect(env.find((e) => e.name === "JR2_CUSTODIAN_URL")?.value).toBe("http://127.0.0.1:8081");
      expect(JSON.stringify(env)).not.toContain(MODEL_KEY);
      expect(JSON.stringify(env)).not.toContain(sandboxToken(signingKey(), name));
      expect(h.resources).toEqual({
        requests: { cpu: "1400m", memory: "1344Mi", "ephemeral-storage": "10Gi" },
        limits: { cpu: "1400m", memory: "1344Mi" },
      });
    });

    it("custodian: its config, values and CA, hardened, with a /readyz probe; no working tree", () => {
      const c = container("custodian");
      expect((c.volumeMounts ?? []).map((m) => m.mountPath)).toEqual([
        "/etc/jr2/custodian/config",
        "/etc/jr2/custodian/values",
        "/etc/jr2/custodian/ca",
      ]);
      expect(secretMounts(c)).toEqual(["custodian-values", "custodian-ca"]);
      expect(volumes().find((v) => v.name === "custodian-ca")?.secret?.secretName).toBe(`${name}-custodian-ca`);
      expect(c.readinessProbe?.httpGet).toMatchObject({ path: "/readyz", port: 15021 });
      expect(c.securityContext).toMatchObject({
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ["ALL"] },
      });
      expect(c.resources).toEqual({
        requests: { cpu: "100m", memory: "192Mi" },
        limits: { memory: "192Mi" },
      });
      const values = volumes().find((v) => v.name === "custodian-values")!;
      expect(values.projected?.sources?.map((s) => s.secret?.name)).toEqual([`${name}-token`, "model-keys"]);
    });

    it("user: exactly /work and /repos/<key> read-only, its own Size, only NET_RAW dropped (decision 0048)", () => {
      const u = container("user");
      expect((u.volumeMounts ?? []).map((m) => [m.mountPath, m.readOnly ?? false])).toEqual([
        ["/work", false],
        [expect.stringMatching(/^\/repos\//), true],
      ]);
      expect(secretMounts(u)).toEqual([]);
      expect(u.securityContext).toEqual({ capabilities: { drop: ["NET_RAW"] } });
      expect(u.resources).toEqual({
        requests: { cpu: "500m", memory: "512Mi" },
        limits: { cpu: "500m", memory: "512Mi" },
      });
    });

    it("effector: /work and the Repo read-only, its key, its scratch, and the push Secret the fence entry names", () => {
      const e = container("effector");
      expect((e.volumeMounts ?? []).map((m) => m.mountPath)).toEqual([
        "/work",
        expect.stringMatching(/^\/repos\//),
        "/run/jr2/effector",
        "/run/jr2/scratch",
        "/run/jr2/secrets/forge/",
        `/run/jr2/secrets/@git/${PUSH_SECRET}/`,
      ]);
      expect(sandbox.spec?.gitCredentials).toEqual([{ name: PUSH_SECRET }]);
      // The push Secret and the effect Secret reach the effector alone.
      for (const seat of ["harness", "custodian", "user"]) {
        expect(JSON.stringify(container(seat).volumeMounts)).not.toContain("@git");
        expect(JSON.stringify(container(seat).volumeMounts)).not.toContain("effector-");
      }
    });

    // Decision 0070.
    it("effector: jr2's Effector as its command, its declared effect secret, read back from the Sandbox", () => {
      const e = container("effector");
      expect(e.command).toEqual(["/usr/bin/tini", "--", "node", "/app/effector.js"]);
      expect(e.env).toEqual(
        expect.arrayContaining([
          { name: "JR2_EFFECTOR_CONFINE", value: "/app/jr2-confine" },
          { name: "JR2_EFFECTOR_REQUIRE_COMMANDS", value: "1" },
        ]),
      );
      expect(pod.spec?.volumes?.find((v) => v.name === "effector-secret-0")?.projected?.sources).toEqual([
        { secret: { name: "forge", items: [{ key: "token", path: "token" }] } },
      ]);
      expect(declaredEffectSecrets(sandbox)).toEqual([{ secret: "forge", key: "token" }]);
    });

    it("is one Guaranteed-sized pod: the pod-level Size, fsGroup for /work", () => {
      expect(pod.spec?.securityContext?.fsGroup).toBe(2000);
      expect((pod.spec as { resources?: unknown }).resources).toEqual({
        requests: { cpu: "2", memory: "2Gi" },
        limits: { cpu: "2", memory: "2Gi" },
      });
    });
  });

  describe("through the local Custodian (npm start's local mode)", () => {
    const custodianUrl = () => {
      const line = orch.lines.find((l) => l.includes('"local custodian listening"') && l.includes(name));
      return JSON.parse(line!).url as string;
    };
    const standIn = () => (sandbox.spec!.env as EnvVar[]).find((e) => e.name === "ANTHROPIC_API_KEY")!.value!;

    it("runs beside the Harness: the provider receives the real key where the Harness sent its Stand-in", async () => {
      const res = await fetch(`${custodianUrl()}/providers/anthropic/v1/messages`, {
        method: "POST",
        headers: { "x-api-key": standIn(), "content-type": "application/json" },
        body: JSON.stringify({ hello: "world" }),
      });
      expect(res.status).toBe(200);
      const got = provider.seen.at(-1)!;
      expect(got.path).toBe("/v1/messages");
      expect(got.headers["x-api-key"]).toBe(MODEL_KEY);
      expect(JSON.stringify(await res.json())).not.toContain(MODEL_KEY);
    });

    it("adds the Sandbox token on the Orchestrator route, which the Harness never held", async () => {
      const res = await fetch(`${custodianUrl()}/orchestrator/v1/sandbox/poll`, {
        headers: { authorization: "Bearer whatever-the-harness-says" },
      });
      expect(res.status).toBe(200);
      const got = orchestratorEndpoint.seen.at(-1)!;
      expect(got.path).toBe("/v1/sandbox/poll");
      expect(got.headers.authorization).toBe(`Bearer ${sandboxToken(signingKey(), name)}`);
    });

    it("refuses the Stand-in toward a host it is not bound to, and sends nothing there", async () => {
      const before = orchestratorEndpoint.seen.length;
      const res = await fetch(`${custodianUrl()}/orchestrator/v1/leak`, { headers: { "x-api-key": standIn() } });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.headers.get("x-jr2-custodian")).toBe("refused");
      expect(orchestratorEndpoint.seen.length).toBe(before);
    });

    it("intercepts its bound host with a leaf from its own CA, which a client trusting the root alone accepts", async () => {
      const tunnel = await connectThrough(Number(new URL(custodianUrl()).port), `${BOUND_HOST}:443`);
      expect("socket" in tunnel).toBe(true);
      if (!("socket" in tunnel)) return;
      const trust = await K8s(kind.ConfigMap).InNamespace(ns.name).Get("jr2-ca");
      const socket = tlsConnect({ socket: tunnel.socket, ca: trust.data!["ca.crt"], servername: BOUND_HOST });
      await once(socket, "secureConnect");
      const peer = socket.getPeerCertificate(true);
      socket.destroy();
      expect(peer.subject.CN).toBe(BOUND_HOST);
      expect(peer.issuer.CN).toBe(`jr2 Custodian ${name}`);
    });

    it("writes no held value, token or Stand-in into any log line", () => {
      const logs = orch.lines.join("\n");
      expect(logs).toContain("local custodian listening");
      for (const secret of [MODEL_KEY, sandboxToken(signingKey(), name), standIn()]) expect(logs).not.toContain(secret);
    });
  });
});

// Decision 0048: what a create may not choose.
describe("a create refused before anything is written", () => {
  const body = (over: Record<string, unknown>) => ({
    image: "ghcr.io/example/harness:1",
    branch: "feature/refused",
    repos: [{ slot: "app", url: remote }],
    ...over,
  });
  const sandboxes = async () => (await K8s(SandboxModel).InNamespace(ns.name).Get()).items.length;

  it("names the Effector image field and the images the installation lets hold push credentials", async () => {
    const before = await sandboxes();
    const res = await api<{ error: { code: string; message: string } }>(
      "POST",
      "/v1/workspaces",
      body({ effector: { image: "attacker.example/effector:1", pushes: ["app"] } }),
    );
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("image_refused");
    expect(res.body.error.message).toContain('effector.image: "attacker.example/effector:1" is not an image');
    expect(res.body.error.message).toContain(`"${EFFECTOR_IMAGE}"`);
    expect(res.body.error.message).toContain(ALLOWED_EFFECTOR);
    expect(await sandboxes()).toBe(before);
  });

  // Decision 0055.
  // Decision 0070.
  it("refuses an effect secret the pod config lacks, or one not the tenant's, naming the field", async () => {
    const before = await sandboxes();
    const undeclared = await api<{ error: { code: string; message: string } }>(
      "POST",
      "/v1/workspaces",
      body({ effector: { secrets: [{ secret: "aws", key: "key" }] } }),
    );
    expect(undeclared.status).toBe(403);
    expect(undeclared.body.error.code).toBe("fence_refused");
    expect(undeclared.body.error.message).toContain("effector.secrets[0]: aws/key is not an effect secret");
    const other = await api<{ error: { code: string; message: string } }>(
      "POST",
      "/v1/workspaces",
      body({ effector: { secrets: [{ secret: "forge", key: "admin" }] } }),
      TENANT_B,
    );
    expect(other.status).toBe(403);
    expect(other.body.error.message).toContain('for tenant "team-b": forge/token)');
    expect(await sandboxes()).toBe(before);
  });

  it("names the runtime class field and the classes the installation lets a create choose", async () => {
    const before = await sandboxes();
    const res = await api<{ error: { code: string; message: string } }>(
      "POST",
      "/v1/workspaces",
      body({ runtimeClassName: "runc-unsandboxed" }),
    );
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe("runtime_class_refused");
    expect(res.body.error.message).toContain('runtimeClassName: "runc-unsandboxed" is not a runtime class');
    expect(res.body.error.message).toContain(
      `leave runtimeClassName out (the cluster's default runtime) or name one of "${ALLOWED_RUNTIME_CLASS}"`,
    );
    expect(await sandboxes()).toBe(before);
  });

  it("refuses tenant team-b a url under team-a's fence entry as one no entry admits, and admits team-a", async () => {
    const url = join(privateRemotes, "secret.git");
    const refused = await api<{ error: { code: string; message: string } }>(
      "POST",
      "/v1/workspaces",
      body({ repos: [{ slot: "app", url }] }),
      TENANT_B,
    );
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe("fence_refused");
    expect(refused.body.error.message).not.toContain(`${privateRemotes} (`);
    expect(refused.body.error.message).not.toMatch(/entries: [^)]*private-remotes/);
    const nowhere = await api<{ error: { code: string; message: string } }>(
      "POST",
      "/v1/workspaces",
      body({ repos: [{ slot: "app", url: join(tmp, "nowhere", "secret.git") }] }),
      TENANT_B,
    );
    expect(nowhere.status).toBe(403);
    // The same refusal as for a url nothing admits: the same entries named, the same words.
    const tail = (m: string) => m.slice(m.indexOf(": no git.credentials entry"));
    expect(tail(refused.body.error.message)).toBe(tail(nowhere.body.error.message));
    expect(tail(refused.body.error.message)).toContain(`(entries: ${remotes})`);
    const admitted = await api<{ name: string }>(
      "POST",
      "/v1/workspaces",
      body({ repos: [{ slot: "app", url }] }),
      TENANT_A,
    );
    expect(admitted.status).toBe(202);
    expect((await api("DELETE", `/v1/workspaces/${admitted.body.name}`, undefined, TENANT_A)).status).toBe(202);
  });
});
