// The Sandbox pod the Orchestrator composes (orchestrator/workspaces/compose.ts), held to decision 0021's
// mounts table and jr2's crFor (decisions 0001, 0021): who mounts what, who holds which credential (the Harness none),
// the Size split, the owned objects, and admission and the pod builder accepting all of it.
import type { SandboxSpec } from "../../api/crd";
import type { Container, EnvVar, Volume } from "../../api/crd/generated/corev1";
import { parseCustodianConfig, STAND_IN } from "../../api/custodian-config";
import { SANDBOX_LABEL, SANDBOX_TOKEN_KEY } from "../../api/wire";
import { restrictedViolations } from "../../capabilities/rules/containers";
import { podViolations } from "../../capabilities/rules/pods";
import { sandboxNameViolations, sandboxViolations, withDefaults } from "../../capabilities/rules/sandbox-rules";
import { repoCachesContribution } from "../../capabilities/repo/caches";
import { buildPod } from "../../capabilities/sandbox/pod";
import { composeSandbox, untilListening, type ComposeInput } from "../../orchestrator/workspaces/compose";
import { parsePodConfig } from "../../orchestrator/workspaces/pod-config";
import type { PlaceRequest } from "../../orchestrator/workspaces/sandbox-gateway";
import { effectorKey, harnessToken, sandboxToken, tokenDigest } from "../../orchestrator/tokens";

const KEY = Buffer.alloc(32, 7);
const NAME = "ws-0123456789";
const OPERATOR = "system:serviceaccount:pepr-system:jr2-operator";

const POD = parsePodConfig(
  `
custodian:
  providers: [{ name: anthropic, url: "https://api.anthropic.com" }]
  held:
    - { secret: model-keys, key: anthropic, env: ANTHROPIC_API_KEY, origins: ["https://api.anthropic.com"], headers: [x-api-key] }
    - { secret: model-keys, key: openai, env: OPENAI_API_KEY, origins: ["https://api.openai.com"] }
  tunnel: ["*.github.com"]
harness:
  env:
    - { name: JR2_MODEL_PROVIDER, value: anthropic }
    - { name: HTTPS_PROXY, value: "http://elsewhere:3128" }
    - { name: JR2_HARNESS_TOKEN_SHA256, value: "0000" }
`,
  "pod.yaml",
);

const req = (over: Partial<PlaceRequest> = {}): PlaceRequest => ({
  name: NAME,
  image: "registry.example/harness:1",
  repos: [
    { slot: "app", url: "https://github.com/acme/app", identity: "github.com/acme/app", key: "app-1", bound: false },
    { slot: "lib", url: "https://github.com/acme/lib", identity: "github.com/acme/lib", key: "lib-2", bound: false },
  ],
  userImage: "registry.example/user:1",
  size: { cpu: "2", memory: "4Gi", disk: "20Gi" },
  userSize: { cpu: "500m", memory: "1Gi" },
  effector: { image: "registry.example/effector:1", gitCredentials: ["jr2-git-push-acme"] },
  idleTimeout: "45m",
  labels: { run: "r1", workflow: "wf" },
  ...over,
});

const input = (over: Partial<ComposeInput> = {}): ComposeInput => ({
  req: req(),
  namespace: "jr2",
  signingKey: KEY,
  pod: POD,
  custodianImage: "jr2/companions:1",
  orchestratorUrl: "http://jr2-orchestrator.jr2-system.svc:8090",
  now: Date.parse("2026-12-01T00:00:00Z"),
  ...over,
});

const composed = composeSandbox(input());
const spec = composed.sandbox.spec as SandboxSpec;
const sidecar = (name: string) => spec.sidecars!.find((c) => c.name === name)!;
const mountNames = (c: Pick<Container, "volumeMounts">) => (c.volumeMounts ?? []).map((m) => m.name).sort();
const volume = (name: string) => spec.volumes!.find((v) => v.name === name)!;

/** Every Secret a volume reaches (directly or projected). */
const secretsOf = (v: Volume): string[] => [
  ...(v.secret?.secretName ? [v.secret.secretName] : []),
  ...(v.projected?.sources ?? []).flatMap((s) => (s.secret?.name ? [s.secret.name] : [])),
];

describe("the Sandbox CR the Orchestrator composes", () => {
  it("is admitted as written and after the defaults, and the defaults change nothing it states", () => {
    expect(sandboxNameViolations(NAME)).toEqual([]);
    expect(sandboxViolations(spec)).toEqual([]);
    const d = withDefaults(structuredClone(spec));
    expect(sandboxViolations(d)).toEqual([]);
    expect(d.sidecars!.find((c) => c.name === "custodian")).toEqual(sidecar("custodian"));
  });

  it("keeps jr2's labels and annotations: run, workflow, the keepalive", () => {
    expect(composed.sandbox.metadata).toMatchObject({
      name: NAME,
      namespace: "jr2",
      labels: { "jr2.dev/run": "r1", "jr2.dev/workflow": "wf" },
      annotations: { "jr2.dev/keepalive": "2026-12-01T00:00:00.000Z" },
    });
    expect(spec.idleTimeout).toBe("45m");
  });

  it("is the same every time (a re-provision re-applies the same bytes)", () => {
    const again = composeSandbox(input());
    expect(again.sandbox).toStrictEqual(composed.sandbox);
    expect(again.owned("u-1")).toStrictEqual(composed.owned("u-1"));
  });

  describe("the mounts table (decision 0021)", () => {
    it("harness: /work, /conversations and the CA certificate; none of the Custodian's volumes", () => {
      expect(spec.volumeMounts).toEqual([
        { name: "work", mountPath: "/work" },
        { name: "conversations", mountPath: "/conversations" },
        { name: "jr2-ca", mountPath: "/etc/jr2/ca", readOnly: true },
      ]);
      expect(volume("jr2-ca")).toEqual({
        name: "jr2-ca",
        configMap: { name: "jr2-ca", items: [{ key: "ca.crt", path: "ca.crt" }] },
      });
    });

    it("custodian: its config, its values and its own CA with its key, nothing of the working tree", () => {
      expect(mountNames(sidecar("custodian"))).toEqual(["custodian-ca", "custodian-config", "custodian-values"]);
      expect(sidecar("custodian").volumeMounts).toEqual([
        { name: "custodian-config", mountPath: "/etc/jr2/custodian/config", readOnly: true },
        { name: "custodian-values", mountPath: "/etc/jr2/custodian/values", readOnly: true },
        { name: "custodian-ca", mountPath: "/etc/jr2/custodian/ca", readOnly: true },
      ]);
      expect(volume("custodian-config").configMap?.name).toBe(`${NAME}-custodian`);
      expect(volume("custodian-values").projected?.sources).toEqual([
        { secret: { name: `${NAME}-token`, items: [{ key: SANDBOX_TOKEN_KEY, path: SANDBOX_TOKEN_KEY }] } },
        {
          secret: {
            name: "model-keys",
            items: [
              { key: "anthropic", path: "model-keys__anthropic" },
              { key: "openai", path: "model-keys__openai" },
            ],
          },
        },
      ]);
      // Its own intermediate (decision 0037), never the installation root's Secret.
      expect(volume("custodian-ca").secret).toEqual({
        secretName: `${NAME}-custodian-ca`,
        defaultMode: 0o440,
        items: [
          { key: "tls.crt", path: "tls.crt" },
          { key: "tls.key", path: "tls.key" },
        ],
      });
      expect(spec.volumes!.flatMap(secretsOf)).not.toContain("jr2-custodian-ca");
    });

    it("custodian: no CA where no held value is bound to an https origin (nothing to intercept)", () => {
      const bare = composeSandbox(input({ pod: parsePodConfig("", "empty.yaml") })).sandbox.spec as SandboxSpec;
      expect(bare.volumes!.map((v) => v.name)).not.toContain("custodian-ca");
      const custodian = bare.sidecars!.find((c) => c.name === "custodian")!;
      expect(mountNames(custodian)).toEqual(["custodian-config", "custodian-values"]);
    });

    it("user: /work and each /repos/<key> read-only, and nothing else; only NET_RAW dropped (decision 0048)", () => {
      expect(sidecar("user").volumeMounts).toEqual([
        { name: "work", mountPath: "/work" },
        { name: "repo-app-1", mountPath: "/repos/app-1", readOnly: true },
        { name: "repo-lib-2", mountPath: "/repos/lib-2", readOnly: true },
      ]);
      expect(sidecar("user").securityContext).toEqual({ capabilities: { drop: ["NET_RAW"] } });
      expect(sidecar("user")).not.toHaveProperty("command");
      expect(sidecar("user")).not.toHaveProperty("args");
      expect(sidecar("user").image).toBe("registry.example/user:1");
    });

    it("effector: /work and the Repos read-only, its key, its scratch; its push Secrets by spec.gitCredentials", () => {
      expect(sidecar("effector").volumeMounts).toEqual([
        { name: "work", mountPath: "/work", readOnly: true },
        { name: "repo-app-1", mountPath: "/repos/app-1", readOnly: true },
        { name: "repo-lib-2", mountPath: "/repos/lib-2", readOnly: true },
        { name: "effector-own", mountPath: "/run/jr2/effector", readOnly: true },
        { name: "effector-scratch", mountPath: "/run/jr2/scratch" },
      ]);
      expect(secretsOf(volume("effector-own"))).toEqual([`${NAME}-effector`]);
      expect(spec.gitCredentials).toEqual([{ name: "jr2-git-push-acme" }]);
      // The image the create resolved from the pod config (decision 0048), never the workspace's.
      expect(sidecar("effector").image).toBe("registry.example/effector:1");
      expect(sidecar("effector").ports).toEqual([{ name: "effector", containerPort: 8082, protocol: "TCP" }]);
    });

    it("no container but the custodian mounts a volume that reaches a Secret (the effector its own key)", () => {
      const secretVolumes = new Set(spec.volumes!.filter((v) => secretsOf(v).length).map((v) => v.name));
      const reach = (c: Pick<Container, "volumeMounts">) => mountNames(c).filter((n) => secretVolumes.has(n));
      expect(reach(spec)).toEqual([]);
      expect(reach(sidecar("user"))).toEqual([]);
      expect(reach(sidecar("effector"))).toEqual(["effector-own"]);
      expect(reach(sidecar("custodian")).sort()).toEqual(["custodian-ca", "custodian-values"]);
    });
  });

  describe("the Harness's env: the Custodian's address and a Stand-in for every credential, no credential", () => {
    const env = spec.env as EnvVar[];
    const value = (n: string) => env.find((e) => e.name === n)?.value;

    it("points every client at the Custodian on loopback, and trusts the installation CA", () => {
      expect(value("JR2_CUSTODIAN_URL")).toBe("http://127.0.0.1:8081");
      expect(value("HTTPS_PROXY")).toBe("http://127.0.0.1:8081");
      expect(value("NODE_EXTRA_CA_CERTS")).toBe("/etc/jr2/ca/ca.crt");
      expect(value("JR2_CONVERSATIONS_DIR")).toBe("/conversations");
    });

    it("holds each held value's Stand-in, matching the Custodian's config, and the bearer's digest last", () => {
      const config = composed.custodianConfig;
      expect(value("ANTHROPIC_API_KEY")).toMatch(STAND_IN);
      expect(value("ANTHROPIC_API_KEY")).toBe(config.held.find((h) => h.env === "ANTHROPIC_API_KEY")?.standIn);
      expect(value("OPENAI_API_KEY")).toBe(config.held.find((h) => h.env === "OPENAI_API_KEY")?.standIn);
      expect(env[env.length - 1]).toEqual({
        name: "JR2_HARNESS_TOKEN_SHA256",
        value: tokenDigest(harnessToken(KEY, NAME)),
      });
    });

    it("tells the Harness the kind of the provider its model names, from custodian.providers", () => {
      // No kind written: api.anthropic.com's host makes it anthropic (api/model-kinds.ts).
      expect(env.filter((e) => e.name === "JR2_MODEL_KIND")).toEqual([{ name: "JR2_MODEL_KIND", value: "anthropic" }]);
      const pod = parsePodConfig(
        `
custodian:
  providers: [{ name: gw, url: "https://gateway.example", kind: google }]
harness:
  env: [{ name: JR2_MODEL_PROVIDER, value: gw }, { name: JR2_MODEL_KIND, value: openai }]
`,
        "pod.yaml",
      );
      const other = (composeSandbox(input({ pod })).sandbox.spec as SandboxSpec).env as EnvVar[];
      // The composition owns it: the passthrough's own value is dropped.
      expect(other.filter((e) => e.name === "JR2_MODEL_KIND")).toEqual([{ name: "JR2_MODEL_KIND", value: "google" }]);
      const none = parsePodConfig(`harness: { env: [{ name: JR2_MODEL_PROVIDER, value: missing }] }`, "pod.yaml");
      const bare = (composeSandbox(input({ pod: none })).sandbox.spec as SandboxSpec).env as EnvVar[];
      expect(bare.some((e) => e.name === "JR2_MODEL_KIND")).toBe(false);
    });

    it("puts the installation's passthrough first, and never lets it choose a variable the composition owns", () => {
      expect(env[0]).toEqual({ name: "JR2_MODEL_PROVIDER", value: "anthropic" });
      expect(env.filter((e) => e.name === "HTTPS_PROXY")).toEqual([
        { name: "HTTPS_PROXY", value: "http://127.0.0.1:8081" },
      ]);
      expect(env.filter((e) => e.name === "JR2_HARNESS_TOKEN_SHA256")).toHaveLength(1);
    });

    it("carries no secret: no valueFrom, no envFrom, neither token", () => {
      expect(env.every((e) => e.valueFrom === undefined)).toBe(true);
      expect(spec.envFrom).toBeUndefined();
      const values = env.map((e) => e.value);
      expect(values).not.toContain(sandboxToken(KEY, NAME));
      expect(values).not.toContain(harnessToken(KEY, NAME));
    });

    it("differs per Sandbox: another Sandbox's Stand-ins are not this one's", () => {
      const other = composeSandbox(input({ req: req({ name: "ws-other" }) })).custodianConfig;
      const mine = new Set(composed.custodianConfig.held.map((h) => h.standIn));
      for (const h of other.held) expect(mine.has(h.standIn)).toBe(false);
    });
  });

  describe("the Size split (decisions 0015, 0056): requests equal limits but the Custodian's CPU, the parts sum to the pod", () => {
    it("gives the Custodian its slice, the User Container its Size and the Harness the rest", () => {
      expect(spec.podResources).toEqual({ requests: { cpu: "2", memory: "4Gi" }, limits: { cpu: "2", memory: "4Gi" } });
      // Its CPU a request alone (decision 0056); the pod's limit bounds it.
      expect(sidecar("custodian").resources).toEqual({
        requests: { cpu: "100m", memory: "192Mi" },
        limits: { memory: "192Mi" },
      });
      expect(sidecar("user").resources).toEqual({
        requests: { cpu: "500m", memory: "1Gi" },
        limits: { cpu: "500m", memory: "1Gi" },
      });
      expect(spec.resources).toEqual({
        requests: { cpu: "1400m", memory: "2880Mi", "ephemeral-storage": "20Gi" },
        limits: { cpu: "1400m", memory: "2880Mi" },
      });
      expect(spec.shmSize).toBe("720Mi");
    });
  });

  describe("the custodian container", () => {
    const c = sidecar("custodian");
    it("runs the companions image's custodian, hardened as stated, non-root by a numeric uid", () => {
      expect(c.image).toBe("jr2/companions:1");
      expect(c.command).toEqual(["node", "/app/custodian.js"]);
      expect(restrictedViolations(c.securityContext, "custodian")).toEqual([]);
      expect(c.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532, readOnlyRootFilesystem: true });
    });
    it("holds the pod's Ready on its /readyz (config and values loaded)", () => {
      expect(c.readinessProbe).toEqual({
        httpGet: { path: "/readyz", port: 15021 },
        periodSeconds: 1,
        timeoutSeconds: 2,
      });
    });
    it("ends its start only once its probes' port is bound, so the kubelet's first probe is answered (decision 0063)", () => {
      expect(c.lifecycle).toEqual({ postStart: { exec: { command: untilListening(15021) } } });
      expect(c.lifecycle?.postStart?.exec?.command?.[2]).toContain("/dev/tcp/127.0.0.1/15021");
    });
  });

  describe("the objects it owns", () => {
    const owned = composed.owned("uid-1");
    const get = (kind: string, name: string) => owned.find((o) => o.kind === kind && o.metadata.name === name)!;

    it("are the token Secret, the Custodian ConfigMap, the Effector key Secret and Service, each owned and labelled", () => {
      expect(owned.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
        `Secret/${NAME}-token`,
        `ConfigMap/${NAME}-custodian`,
        `Secret/${NAME}-effector`,
        `Service/${NAME}-effector`,
      ]);
      for (const o of owned) {
        expect(o.metadata.labels).toEqual({ [SANDBOX_LABEL]: NAME });
        expect(o.metadata.ownerReferences).toEqual([
          {
            apiVersion: "core.jr2.dev/v1alpha1",
            kind: "Sandbox",
            name: NAME,
            uid: "uid-1",
            controller: true,
            blockOwnerDeletion: false,
          },
        ]);
      }
    });

    it("the token Secret carries `data` (never stringData): the Sandbox token, not the Harness bearer", () => {
      const secret = get("Secret", `${NAME}-token`) as unknown as {
        data: Record<string, string>;
        stringData?: unknown;
      };
      expect(secret.stringData).toBeUndefined();
      const token = Buffer.from(secret.data[SANDBOX_TOKEN_KEY]!, "base64").toString();
      expect(token).toBe(sandboxToken(KEY, NAME));
      expect(token).not.toBe(harnessToken(KEY, NAME));
    });

    it("the ConfigMap carries the Custodian's config: names, hosts and Stand-ins, never a value", () => {
      const cm = get("ConfigMap", `${NAME}-custodian`) as unknown as { data: Record<string, string> };
      const parsed = parseCustodianConfig(JSON.parse(cm.data["config.json"]!));
      expect(parsed.ok).toBe(true);
      expect(parsed.ok && parsed.config).toEqual(composed.custodianConfig);
      expect(composed.custodianConfig.orchestrator).toEqual({
        url: "http://jr2-orchestrator.jr2-system.svc:8090",
        token: SANDBOX_TOKEN_KEY,
        retries: 2,
      });
      expect(composed.custodianConfig.held.map((h) => [h.value, h.origins])).toEqual([
        ["model-keys__anthropic", ["https://api.anthropic.com"]],
        ["model-keys__openai", ["https://api.openai.com"]],
      ]);
      expect(cm.data["config.json"]).not.toContain(sandboxToken(KEY, NAME));
    });

    it("the Effector's key Secret and its headless Service on :8082", () => {
      const key = get("Secret", `${NAME}-effector`) as unknown as { data: Record<string, string> };
      expect(Buffer.from(key.data.key!, "base64").toString()).toBe(effectorKey(KEY, NAME));
      expect(get("Service", `${NAME}-effector`)).toMatchObject({
        spec: {
          clusterIP: "None",
          publishNotReadyAddresses: true,
          selector: { "sandbox.jr2.dev/name": NAME },
          ports: [{ name: "effector", port: 8082, targetPort: 8082, protocol: "TCP" }],
        },
      });
    });
  });

  describe("a workspace with no User Container, no Effector and no Size", () => {
    const bare = composeSandbox(
      input({ req: req({ userImage: undefined, effector: undefined, size: undefined, userSize: undefined }) }),
    );
    const s = bare.sandbox.spec as SandboxSpec;
    it("still has its Custodian (always there, with its slice) and owns just the token and the config", () => {
      expect(s.sidecars!.map((c) => c.name)).toEqual(["custodian"]);
      expect(s.podResources).toBeUndefined();
      expect(s.resources).toBeUndefined();
      expect(s.gitCredentials).toBeUndefined();
      expect(bare.owned("u").map((o) => o.kind)).toEqual(["Secret", "ConfigMap"]);
      expect(sandboxViolations(s)).toEqual([]);
    });
  });

  describe("the installation's placement (decision 0038)", () => {
    const placement = {
      nodeSelector: { "jr2.dev/node": "real" },
      tolerations: [{ key: "jr2.dev/node", operator: "Equal" as const, value: "real", effect: "NoSchedule" as const }],
    };
    const placed = composeSandbox(input({ pod: { ...POD, placement } })).sandbox.spec as SandboxSpec;

    it("writes the pod config's nodeSelector and tolerations into the spec, and the operator's pod carries them", () => {
      expect(placed.nodeSelector).toEqual(placement.nodeSelector);
      expect(placed.tolerations).toEqual(placement.tolerations);
      expect(sandboxViolations(placed)).toEqual([]);
      const pod = buildPod({ metadata: { name: NAME, namespace: "jr2", uid: "u-1" }, spec: withDefaults(placed) });
      expect(pod.spec!.nodeSelector).toEqual(placement.nodeSelector);
      expect(pod.spec!.tolerations).toEqual(placement.tolerations);
      expect(podViolations(pod, OPERATOR, OPERATOR)).toEqual([]);
    });

    it("leaves both out by default: the scheduler places the pod anywhere", () => {
      expect(spec).not.toHaveProperty("nodeSelector");
      expect(spec).not.toHaveProperty("tolerations");
    });
  });

  // Decision 0055: one runtime class for the pod, so all four seats run under it.
  describe("the runtime class the create resolved", () => {
    const classed = composeSandbox(input({ req: req({ runtimeClassName: "gvisor" }) })).sandbox.spec as SandboxSpec;

    it("is written as spec.runtimeClassName, admitted, and the operator's pod runs every seat under it", () => {
      expect(classed.runtimeClassName).toBe("gvisor");
      expect(sandboxViolations(classed)).toEqual([]);
      const s = withDefaults(structuredClone(classed));
      expect(s.runtimeClassName).toBe("gvisor");
      const pod = buildPod({ metadata: { name: NAME, namespace: "jr2", uid: "u-1" }, spec: s });
      expect(pod.spec!.runtimeClassName).toBe("gvisor");
      expect((pod.spec!.containers as Container[]).map((c) => c.name)).toEqual([
        "harness",
        "custodian",
        "user",
        "effector",
      ]);
      expect(podViolations(pod, OPERATOR, OPERATOR)).toEqual([]);
    });

    it("is left out when the create resolved none: the cluster's default runtime", () => {
      expect(spec).not.toHaveProperty("runtimeClassName");
    });

    it("is the request's, not the pod config's: the create resolved it once (runtimeClassFor)", () => {
      const pod = { ...POD, runtime: { className: "gvisor", allowedClassNames: [] } };
      expect(composeSandbox(input({ pod })).sandbox.spec).not.toHaveProperty("runtimeClassName");
    });
  });

  describe("the pod the operator builds from it", () => {
    const repoView = (key: string) => ({ name: key, key, nodes: { "node-a": { phase: "Present" as const } } });
    const s = withDefaults(structuredClone(spec));
    const pod = buildPod({ metadata: { name: NAME, namespace: "jr2", uid: "u-1" }, spec: s }, [
      repoCachesContribution(s, repoView, "jr2")!,
    ]);
    const containers = (pod.spec!.containers ?? []) as Container[];
    const c = (name: string) => containers.find((x) => x.name === name)!;

    it("passes the pod guard", () => {
      expect(podViolations(pod, OPERATOR, OPERATOR)).toEqual([]);
    });

    // Decision 0048.
    it("has seccomp RuntimeDefault at pod level and the user seat without NET_RAW", () => {
      expect(pod.spec!.securityContext?.seccompProfile).toEqual({ type: "RuntimeDefault" });
      expect(c("user").securityContext).toEqual({ capabilities: { drop: ["NET_RAW"] } });
    });

    it("keeps the user seat's NET_RAW where the pod config opts out, and still passes the pod guard", () => {
      const optOut = { ...POD, userSeat: { netRaw: true } };
      const composed = withDefaults(
        structuredClone(composeSandbox(input({ pod: optOut })).sandbox.spec) as typeof spec,
      );
      const built = buildPod({ metadata: { name: NAME, namespace: "jr2", uid: "u-1" }, spec: composed }, [
        repoCachesContribution(composed, repoView, "jr2")!,
      ]);
      const user = (built.spec!.containers as Container[]).find((x) => x.name === "user")!;
      expect(user.securityContext).toEqual({ capabilities: { drop: [] } });
      expect(podViolations(built, OPERATOR, OPERATOR)).toEqual([]);
    });

    it("projects the push Secret into the effector alone, and mounts the Repo caches read-only everywhere", () => {
      const git = (x: Container) =>
        (x.volumeMounts ?? []).filter((m) => m.mountPath.startsWith("/run/jr2/secrets/@git"));
      expect(git(c("effector")).map((m) => m.mountPath)).toEqual(["/run/jr2/secrets/@git/jr2-git-push-acme/"]);
      for (const name of ["harness", "custodian", "user"]) expect(git(c(name))).toEqual([]);
      const repos = containers.flatMap((x) => (x.volumeMounts ?? []).filter((m) => m.name.startsWith("repo-")));
      expect(repos.length).toBe(6); // harness (the operator's), user, effector: two each
      for (const m of repos) expect(m.readOnly).toBe(true);
      expect(c("custodian").volumeMounts!.some((m) => m.name.startsWith("repo-") || m.name === "work")).toBe(false);
    });
  });

  // Decision 0051.
  describe("with an egress point: every seat's way out is the egress point, and the pod finds it without DNS", () => {
    const EGRESS = {
      proxyUrl: "http://jr2-egress.jr2-system.svc:3128",
      hostAliases: [
        { ip: "10.96.0.40", hostnames: ["jr2-egress.jr2-system.svc"] },
        { ip: "10.96.0.41", hostnames: ["jr2-orchestrator.jr2-system.svc"] },
      ],
    };
    const withEgress = composeSandbox(input({ egress: EGRESS, req: req({ egressAllow: ["*.pypi.org:443"] }) }));
    const s = withEgress.sandbox.spec as SandboxSpec;
    const seat = (name: string) => (s.sidecars ?? []).find((c) => c.name === name)!;
    const envOf = (c: { env?: Array<{ name: string; value?: string }> }) =>
      Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));

    it("writes the workspace's list as spec.egress.allow, and the Services' addresses as hostAliases", () => {
      expect(s.egress).toEqual({ allow: ["*.pypi.org:443"] });
      expect(s.hostAliases).toEqual(EGRESS.hostAliases);
      // No list at the create: none on the CR, the base list alone applies.
      expect((composeSandbox(input({ egress: EGRESS })).sandbox.spec as SandboxSpec).egress).toBeUndefined();
    });

    it("chains the Custodian through the egress point, and keeps its tunnel list for a Custodian without one", () => {
      expect(withEgress.custodianConfig.egress).toEqual({ tunnel: ["*.github.com"], via: EGRESS.proxyUrl });
      expect(composed.custodianConfig.egress).toEqual({ tunnel: ["*.github.com"] });
    });

    it("gives the user seat and the Effector the egress point as their proxy, and the Harness its Custodian", () => {
      for (const name of ["user", "effector"]) {
        const env = envOf(seat(name));
        for (const v of ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY"])
          expect([name, v, env[v]]).toEqual([name, v, EGRESS.proxyUrl]);
        expect(env.NO_PROXY).toBe("127.0.0.1,localhost,::1");
      }
      expect(envOf({ env: s.env as Array<{ name: string; value?: string }> }).HTTPS_PROXY).toBe(
        "http://127.0.0.1:8081",
      );
      // Without an egress point, the user seat states no env of its own.
      expect(
        ((composed.sandbox.spec as SandboxSpec).sidecars ?? []).find((c) => c.name === "user")!.env,
      ).toBeUndefined();
    });

    it("is admitted, and its pod carries the hostAliases and the annotation the node's guard reads", () => {
      const spec2 = withDefaults(structuredClone(s));
      expect(sandboxViolations(spec2)).toEqual([]);
      const pod = buildPod({ metadata: { name: NAME, namespace: "jr2", uid: "u-1" }, spec: spec2 });
      expect(pod.spec!.hostAliases).toEqual(EGRESS.hostAliases);
      expect(pod.metadata!.annotations).toEqual({ "sandbox.jr2.dev/name": NAME });
      expect(podViolations(pod, OPERATOR, OPERATOR)).toEqual([]);
    });
  });
});
