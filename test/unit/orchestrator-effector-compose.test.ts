// The Sandbox Effector as jr2's program (decision 0070): the pod config's effector.secrets,
// requireCommands and trust (refusals name the field and the fix), the companions image as the
// default image, a create's declared effect secrets judged before anything is written, the
// effector container and volumes compose.ts writes for them, the declared list read back from the
// Sandbox, and the rules that keep the Effector's volumes the effector's alone.
import type { SandboxSpec } from "../../api/crd";
import type { Container, EnvVar, Volume } from "../../api/crd/generated/corev1";
import { parseCreateBody } from "../../api/orchestrator-schemas";
import { podViolations } from "../../capabilities/rules/pods";
import { sandboxViolations, withDefaults } from "../../capabilities/rules/sandbox-rules";
import { buildPod } from "../../capabilities/sandbox/pod";
import { composeSandbox, EFFECTOR_COMMAND, type ComposeInput } from "../../orchestrator/workspaces/compose";
import { declaredEffectSecrets } from "../../orchestrator/workspaces/effector-secrets";
import { podSettingsFrom } from "../../orchestrator/workspaces/installation";
import {
  DEFAULT_POD_CONFIG,
  effectSecretsFor,
  effectorImageFor,
  parsePodConfig,
  withCompanionsImage,
  type PodConfig,
} from "../../orchestrator/workspaces/pod-config";
import { WorkspaceRegistry } from "../../orchestrator/workspaces/registry";
import type { PlaceRequest, SandboxGateway } from "../../orchestrator/workspaces/sandbox-gateway";
import type { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";

const FILE = "/etc/jr2/pod/pod.yaml";
const OPERATOR = "system:serviceaccount:pepr-system:jr2-operator";
const NAME = "ws-0123456789";

const POD_TEXT = `
custodian:
  held: [{ secret: model-keys, key: anthropic, origins: ["https://api.anthropic.com"] }]
effector:
  secrets:
    - { secret: forge, key: token, origins: ["https://api.github.com", "https://git.example.com:8443"] }
    - { secret: forge, key: app-key, origins: ["https://api.github.com"], tenants: [team-a] }
    - { secret: deploy.keys, key: npm, origins: ["https://registry.npmjs.org"] }
  requireCommands: true
  trust: { configMap: forge-ca, key: ca.crt }
`;
const POD = parsePodConfig(POD_TEXT, FILE);

/** The message parsePodConfig throws for `text`, or a failure when it is accepted. */
const refusal = (text: string): string => {
  try {
    parsePodConfig(text, FILE);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error("expected a refusal");
};

describe("the pod config's effector fields (decision 0070)", () => {
  it("reads effect secrets with their origins and tenants, requireCommands and the trust bundle", () => {
    expect(POD.effector).toEqual({
      allowedImages: [],
      secrets: [
        { secret: "forge", key: "token", origins: ["https://api.github.com", "https://git.example.com:8443"] },
        { secret: "forge", key: "app-key", origins: ["https://api.github.com"], tenants: ["team-a"] },
        { secret: "deploy.keys", key: "npm", origins: ["https://registry.npmjs.org"] },
      ],
      requireCommands: true,
      trust: { configMap: "forge-ca", key: "ca.crt" },
    });
  });

  it("defaults to no effect secrets, commands not required, no trust bundle and no image of its own", () => {
    expect(DEFAULT_POD_CONFIG.effector).toEqual({ allowedImages: [], secrets: [], requireCommands: false });
  });

  it("refuses an effect secret bound to no origin, or to an origin with a path, naming the field", () => {
    expect(refusal("effector: { secrets: [{ secret: forge, key: token, origins: [] }] }")).toBe(
      `${FILE}: effector.secrets[0].origins: must name at least one origin (scheme://host[:port]): an effect ` +
        "secret goes only where it is bound",
    );
    expect(
      refusal('effector: { secrets: [{ secret: forge, key: token, origins: ["https://api.github.com/repos"] }] }'),
    ).toContain(`${FILE}: effector.secrets[0].origins[0]: `);
    expect(refusal("effector: { secrets: [{ secret: forge, key: token }] }")).toContain(
      "effector.secrets[0].origins: ",
    );
  });

  it("refuses a bad Secret name, key or tenant, and an unknown key, each by its field", () => {
    const o = 'origins: ["https://api.github.com"]';
    expect(refusal(`effector: { secrets: [{ secret: Forge, key: token, ${o} }] }`)).toContain(
      "effector.secrets[0].secret: must be a Secret's name (lower-case DNS subdomain)",
    );
    expect(refusal(`effector: { secrets: [{ secret: forge, key: a/b, ${o} }] }`)).toContain(
      "effector.secrets[0].key: must be a Secret's key",
    );
    expect(refusal(`effector: { secrets: [{ secret: forge, key: t, ${o}, tenants: [Team_A] }] }`)).toContain(
      "effector.secrets[0].tenants[0]: must be a tenant's name (a DNS label), e.g. team-a",
    );
    expect(refusal(`effector: { secrets: [{ secret: forge, key: t, ${o}, tenants: [] }] }`)).toContain(
      "effector.secrets[0].tenants: must name at least one tenant, or be left out (every tenant)",
    );
    expect(refusal(`effector: { secrets: [{ secret: forge, key: t, ${o}, env: X }] }`)).toContain(
      "effector.secrets[0]: ",
    );
  });

  it("refuses the same Secret and key twice, and a Secret the Custodian also holds, naming the fix", () => {
    const o = 'origins: ["https://api.github.com"]';
    expect(
      refusal(`effector: { secrets: [{ secret: forge, key: t, ${o} }, { secret: forge, key: t, ${o} }] }`),
    ).toContain("effector.secrets[1]: repeats forge/t (also secrets[0]): bind one entry to every origin instead");
    expect(
      refusal(
        `custodian: { held: [{ secret: forge, key: other, ${o} }] }\n` +
          `effector: { secrets: [{ secret: forge, key: t, ${o} }] }`,
      ),
    ).toContain(
      'effector.secrets[0].secret: "forge" is also a Secret of custodian.held: the Effector\'s secrets are mounted ' +
        "in the effector alone, so keep them in a Secret of their own",
    );
  });

  it("refuses a trust bundle without its key or with a bad ConfigMap name, and a requireCommands not boolean", () => {
    expect(refusal("effector: { trust: { configMap: forge-ca } }")).toContain("effector.trust.key: ");
    expect(refusal("effector: { trust: { configMap: Forge_CA, key: ca.crt } }")).toContain(
      "effector.trust.configMap: must be a ConfigMap's name",
    );
    expect(refusal('effector: { requireCommands: "yes" }')).toContain("effector.requireCommands: ");
  });
});

describe("the Effector's default image: the companions image", () => {
  it("fills effector.image from the companions image when the pod config names none, and keeps one it names", () => {
    expect(withCompanionsImage(DEFAULT_POD_CONFIG, "jr2/companions:1").effector.image).toBe("jr2/companions:1");
    const named = parsePodConfig("effector: { image: registry.example/effector:2 }", FILE);
    expect(withCompanionsImage(named, "jr2/companions:1").effector.image).toBe("registry.example/effector:2");
  });

  it("is JR2_CUSTODIAN_IMAGE as the Orchestrator loads its pod config (the manifest sets its own image)", () => {
    const settings = podSettingsFrom({ JR2_CUSTODIAN_IMAGE: "ghcr.io/acme/jr2-companions:0.9.0" });
    expect(settings.config.effector.image).toBe("ghcr.io/acme/jr2-companions:0.9.0");
    expect(effectorImageFor(undefined, settings.config)).toEqual({
      ok: true,
      image: "ghcr.io/acme/jr2-companions:0.9.0",
    });
    // Nothing set (local use): the build's local tag, as the Custodian's.
    expect(podSettingsFrom({}).config.effector.image).toBe("jr2/companions:local");
  });
});

describe("a create's effect secrets", () => {
  it("default to none, and a ref named twice is refused by its path", () => {
    const ok = parseCreateBody({ image: "h", branch: "feat", effector: {} });
    expect(ok.ok && ok.body.effector?.secrets).toEqual([]);
    const twice = parseCreateBody({
      image: "h",
      branch: "feat",
      effector: {
        secrets: [
          { secret: "forge", key: "token" },
          { secret: "forge", key: "token" },
        ],
      },
    });
    expect(twice.ok).toBe(false);
    expect(!twice.ok && JSON.stringify(twice)).toContain("effector.secrets[1]");
  });

  it("are entries of effector.secrets the tenant may use; a refusal names the field, the entries and the fix", () => {
    expect(effectSecretsFor([{ secret: "forge", key: "token" }], POD, "team-b")).toEqual({
      ok: true,
      secrets: [{ secret: "forge", key: "token" }],
    });
    expect(effectSecretsFor([{ secret: "forge", key: "app-key" }], POD, "team-a").ok).toBe(true);
    // An admin may declare every entry.
    expect(effectSecretsFor([{ secret: "forge", key: "app-key" }], POD, undefined).ok).toBe(true);
    const other = effectSecretsFor([{ secret: "forge", key: "app-key" }], POD, "team-b");
    expect(other).toEqual({
      ok: false,
      message:
        "effector.secrets[0]: forge/app-key is not an effect secret this workspace may declare (the pod config's " +
        'effector.secrets for tenant "team-b": forge/token, deploy.keys/npm): declare one of those, or ask the ' +
        "installation's operators to add an entry to effector.secrets (decision 0070)",
    });
    const unknown = effectSecretsFor(
      [
        { secret: "forge", key: "token" },
        { secret: "aws", key: "key" },
      ],
      POD,
      "x",
    );
    expect(!unknown.ok && unknown.message).toMatch(/^effector\.secrets\[1\]: aws\/key is not an effect secret/);
  });

  describe("at a workspace create, judged before anything is written", () => {
    const registry = (podConfig: PodConfig) => {
      const placed: PlaceRequest[] = [];
      const never = () => new Promise<never>(() => undefined);
      const gateway = {
        place: (req: PlaceRequest) => (placed.push(req), never()),
        provision: never,
        attach: never,
        renew: async () => undefined,
        continuity: async () => ({ kind: "present" as const }),
        destroy: async () => undefined,
      } as unknown as SandboxGateway;
      const reg = new WorkspaceRegistry({ gateway, watch: {} as unknown as SandboxWatch, credentials: [], podConfig });
      return { reg, placed };
    };
    const pod = withCompanionsImage(POD, "jr2/companions:1");
    const body = (secrets: Array<{ secret: string; key: string }>) =>
      parseCreateBody({ image: "h", branch: "feat", effector: { secrets } });
    const create = (reg: WorkspaceRegistry, secrets: Array<{ secret: string; key: string }>, tenant?: string) => {
      const b = body(secrets);
      if (!b.ok) throw new Error("bad body");
      return reg.create(b.body, tenant);
    };

    it("hands the gateway the declared secrets and the companions image", async () => {
      const { reg, placed } = registry(pod);
      await create(reg, [{ secret: "forge", key: "token" }], "team-a");
      await create(reg, []);
      reg.stop();
      expect(placed[0].effector).toEqual({
        image: "jr2/companions:1",
        gitCredentials: [],
        secrets: [{ secret: "forge", key: "token" }],
      });
      expect(placed[1].effector).toEqual({ image: "jr2/companions:1", gitCredentials: [] });
    });

    it("refuses an undeclared secret and one the tenant may not use with a 403, placing nothing", async () => {
      const { reg, placed } = registry(pod);
      const undeclared = create(reg, [{ secret: "aws", key: "key" }]);
      await expect(undeclared).rejects.toMatchObject({ status: 403, code: "fence_refused" });
      await expect(undeclared).rejects.toThrow("effector.secrets[0]: aws/key is not an effect secret");
      const tenant = create(reg, [{ secret: "forge", key: "app-key" }], "team-b");
      await expect(tenant).rejects.toMatchObject({ status: 403, code: "fence_refused" });
      await expect(tenant).rejects.toThrow('for tenant "team-b": forge/token, deploy.keys/npm');
      reg.stop();
      expect(placed).toHaveLength(0);
    });
  });
});

// ---------------------------------------------------------------------------------------------
// The composition

const req = (over: Partial<PlaceRequest> = {}): PlaceRequest => ({
  name: NAME,
  image: "registry.example/harness:1",
  repos: [
    { slot: "app", url: "https://github.com/acme/app", identity: "github.com/acme/app", key: "app-1", bound: false },
  ],
  userImage: "registry.example/user:1",
  effector: {
    image: "jr2/companions:1",
    gitCredentials: ["jr2-git-push-acme"],
    secrets: [
      { secret: "forge", key: "token" },
      { secret: "deploy.keys", key: "npm" },
      { secret: "forge", key: "app-key" },
    ],
  },
  labels: { run: "r1", workflow: "wf" },
  ...over,
});
const input = (over: Partial<ComposeInput> = {}): ComposeInput => ({
  req: req(),
  namespace: "jr2",
  signingKey: Buffer.alloc(32, 7),
  pod: POD,
  custodianImage: "jr2/companions:1",
  orchestratorUrl: "http://jr2-orchestrator.jr2-system.svc:8090",
  now: Date.parse("2026-12-01T00:00:00Z"),
  ...over,
});
const specOf = (i: ComposeInput) => composeSandbox(i).sandbox.spec as SandboxSpec;
const spec = specOf(input());
const seat = (s: SandboxSpec, name: string) => (s.sidecars ?? []).find((c) => c.name === name)!;
const volume = (s: SandboxSpec, name: string) => (s.volumes ?? []).find((v) => v.name === name);
const envOf = (c: Container) => Object.fromEntries((c.env ?? []).map((e: EnvVar) => [e.name, e.value ?? e.valueFrom]));

describe("the effector the Orchestrator composes (decision 0070)", () => {
  const effector = seat(spec, "effector");

  it("runs jr2's Effector program from the image, under tini", () => {
    expect(effector.command).toEqual(["/usr/bin/tini", "--", "node", "/app/effector.js"]);
    expect(EFFECTOR_COMMAND).toEqual(effector.command);
    expect(effector.image).toBe("jr2/companions:1");
  });

  it("projects each declared Secret's keys into a volume of its own, 0400", () => {
    expect(volume(spec, "effector-secret-0")).toEqual({
      name: "effector-secret-0",
      projected: {
        defaultMode: 0o400,
        sources: [
          {
            secret: {
              name: "forge",
              items: [
                { key: "token", path: "token" },
                { key: "app-key", path: "app-key" },
              ],
            },
          },
        ],
      },
    });
    expect(volume(spec, "effector-secret-1")?.projected?.sources).toEqual([
      { secret: { name: "deploy.keys", items: [{ key: "npm", path: "npm" }] } },
    ]);
  });

  it("mounts them read-only at /run/jr2/secrets/<secret>/, beside (never inside) the other mounts", () => {
    expect(effector.volumeMounts).toEqual([
      { name: "work", mountPath: "/work", readOnly: true },
      { name: "repo-app-1", mountPath: "/repos/app-1", readOnly: true },
      { name: "effector-own", mountPath: "/run/jr2/effector", readOnly: true },
      { name: "effector-scratch", mountPath: "/run/jr2/scratch" },
      { name: "effector-secret-0", mountPath: "/run/jr2/secrets/forge/", readOnly: true },
      { name: "effector-secret-1", mountPath: "/run/jr2/secrets/deploy.keys/", readOnly: true },
      { name: "effector-ca", mountPath: "/etc/jr2/effector-ca", readOnly: true },
    ]);
    const paths = effector.volumeMounts!.map((m) => m.mountPath.replace(/\/$/, ""));
    for (const a of paths) for (const b of paths) if (a !== b) expect(b.startsWith(`${a}/`)).toBe(false);
  });

  it("mounts the trust bundle's one key as ca.crt, and names it, the confiner and the requirement in its env", () => {
    expect(volume(spec, "effector-ca")).toEqual({
      name: "effector-ca",
      configMap: { name: "forge-ca", items: [{ key: "ca.crt", path: "ca.crt" }] },
    });
    expect(envOf(effector)).toMatchObject({
      JR2_EFFECTOR_PORT: "8082",
      JR2_EFFECTOR_SECRETS: "/run/jr2/secrets",
      JR2_EFFECTOR_GIT: "/run/jr2/secrets/@git",
      JR2_EFFECTOR_CONFINE: "/app/jr2-confine",
      JR2_EFFECTOR_REQUIRE_COMMANDS: "1",
      JR2_EFFECTOR_CA_FILE: "/etc/jr2/effector-ca/ca.crt",
      POD_NAME: { fieldRef: { fieldPath: "metadata.name" } },
      POD_IP: { fieldRef: { fieldPath: "status.podIP" } },
      NODE_NAME: { fieldRef: { fieldPath: "spec.nodeName" } },
    });
  });

  it("keeps its readiness on /healthz :8082 every second, its start done once :8082 accepts, its end in its termination message, no limit of its own", () => {
    expect(effector.readinessProbe).toEqual({
      httpGet: { path: "/healthz", port: 8082 },
      periodSeconds: 1,
      timeoutSeconds: 2,
    });
    // The kubelet probes the moment a start is done: the start waits for the port (decision 0063).
    expect(effector.lifecycle?.postStart?.exec?.command?.join(" ")).toContain("/dev/tcp/127.0.0.1/8082");
    expect(effector.terminationMessagePolicy).toBe("FallbackToLogsOnError");
    expect(effector.resources).toBeUndefined();
  });

  it("states neither the requirement nor a trust bundle the pod config leaves out, and no secret volume for none", () => {
    const plain = specOf(
      input({ pod: DEFAULT_POD_CONFIG, req: req({ effector: { image: "e:1", gitCredentials: [] } }) }),
    );
    const env = envOf(seat(plain, "effector"));
    expect(env).not.toHaveProperty("JR2_EFFECTOR_REQUIRE_COMMANDS");
    expect(env).not.toHaveProperty("JR2_EFFECTOR_CA_FILE");
    expect(env.JR2_EFFECTOR_CONFINE).toBe("/app/jr2-confine");
    expect((plain.volumes ?? []).map((v) => v.name).filter((n) => n.startsWith("effector-"))).toEqual([
      "effector-own",
      "effector-scratch",
    ]);
  });

  it("leaves a workspace with no Effector as it was: no effector container, volume or owned key", () => {
    const none = composeSandbox(input({ req: req({ effector: undefined }) }));
    const s = none.sandbox.spec as SandboxSpec;
    expect((s.sidecars ?? []).map((c) => c.name)).toEqual(["custodian", "user"]);
    expect((s.volumes ?? []).some((v) => v.name.startsWith("effector-"))).toBe(false);
    expect(none.owned("u").map((o) => o.kind)).toEqual(["Secret", "ConfigMap"]);
    expect(declaredEffectSecrets(none.sandbox)).toEqual([]);
  });

  it("is read back from the Sandbox: declaredEffectSecrets answers what the create declared", () => {
    expect(declaredEffectSecrets(composeSandbox(input()).sandbox)).toEqual([
      { secret: "forge", key: "token" },
      { secret: "forge", key: "app-key" },
      { secret: "deploy.keys", key: "npm" },
    ]);
    // As the watch holds it, after the admission's defaults.
    expect(declaredEffectSecrets({ spec: withDefaults(structuredClone(spec)) })).toHaveLength(3);
    // A volume of the family the effector does not mount at its Secret's path is no declaration.
    const moved = structuredClone(spec);
    seat(moved, "effector").volumeMounts!.find((m) => m.name === "effector-secret-1")!.mountPath = "/elsewhere";
    expect(declaredEffectSecrets({ spec: moved })).toEqual([
      { secret: "forge", key: "token" },
      { secret: "forge", key: "app-key" },
    ]);
  });

  it("is admitted, and the operator's pod from it passes the pod guard with the volumes in the effector alone", () => {
    expect(sandboxViolations(spec)).toEqual([]);
    const s = withDefaults(structuredClone(spec));
    expect(sandboxViolations(s)).toEqual([]);
    const pod = buildPod({ metadata: { name: NAME, namespace: "jr2", uid: "u-1" }, spec: s });
    expect(podViolations(pod, OPERATOR, OPERATOR)).toEqual([]);
    for (const c of pod.spec!.containers as Container[]) {
      const family = (c.volumeMounts ?? []).filter((m) => m.name.startsWith("effector-"));
      expect([c.name, family.length > 0]).toEqual([c.name, c.name === "effector"]);
    }
  });
});

// ---------------------------------------------------------------------------------------------
// The rules: the Effector's volumes are the effector's alone

describe("the Effector's volumes in another container (decision 0070)", () => {
  const mountIn = (s: SandboxSpec, who: "harness" | "user" | "custodian", volumeName: string) => {
    const copy = structuredClone(s);
    const m = { name: volumeName, mountPath: "/stolen", readOnly: true };
    if (who === "harness") copy.volumeMounts = [...(copy.volumeMounts ?? []), m];
    else seat(copy, who).volumeMounts = [...(seat(copy, who).volumeMounts ?? []), m];
    return copy;
  };
  const FIX = 'only the "effector" container may (decision 0070): remove it from this container';

  it("refuses an effect Secret's volume mounted in the harness or the user seat, naming the field and the fix", () => {
    expect(sandboxViolations(mountIn(spec, "harness", "effector-secret-0"))).toEqual([
      {
        path: "spec.volumeMounts[3]",
        message:
          'mounts "effector-secret-0", one of the Effector\'s volumes (its key, scratch, effect secrets or trust ' +
          `bundle): ${FIX}`,
      },
    ]);
    const user = sandboxViolations(mountIn(spec, "user", "effector-secret-1"));
    expect(user.map((v) => v.path)).toEqual(["spec.sidecars[1].volumeMounts[2]"]);
    expect(user[0].message).toContain(FIX);
  });

  it("refuses the key, the scratch and the trust bundle elsewhere too, the Custodian included", () => {
    for (const name of ["effector-own", "effector-scratch", "effector-ca"])
      expect(sandboxViolations(mountIn(spec, "custodian", name)).map((v) => v.path)).toEqual([
        "spec.sidecars[0].volumeMounts[3]",
      ]);
  });

  it("refuses another way to an effect Secret: a volume of its own, env.valueFrom, envFrom", () => {
    const s = structuredClone(spec);
    s.volumes = [...(s.volumes ?? []), { name: "mine", secret: { secretName: "forge" } } as Volume];
    s.volumeMounts = [...(s.volumeMounts ?? []), { name: "mine", mountPath: "/mine" }];
    const user = seat(s, "user");
    user.env = [{ name: "T", valueFrom: { secretKeyRef: { name: "deploy.keys", key: "npm" } } }];
    user.envFrom = [{ secretRef: { name: "forge" } }];
    expect(sandboxViolations(s)).toEqual([
      { path: "spec.volumeMounts[3]", message: `reaches Secret "forge", which the Effector's volumes carry: ${FIX}` },
      {
        path: "spec.sidecars[1].env[0].valueFrom.secretKeyRef",
        message: `reaches Secret "deploy.keys", which the Effector's volumes carry: ${FIX}`,
      },
      {
        path: "spec.sidecars[1].envFrom[0].secretRef",
        message: `reaches Secret "forge", which the Effector's volumes carry: ${FIX}`,
      },
    ]);
  });

  it("refuses the same in a pod, whoever builds it (the pod guard)", () => {
    const s = withDefaults(structuredClone(spec));
    const pod = buildPod({ metadata: { name: NAME, namespace: "jr2", uid: "u-1" }, spec: s });
    const harness = (pod.spec!.containers as Container[]).find((c) => c.name === "harness")!;
    harness.volumeMounts = [...(harness.volumeMounts ?? []), { name: "effector-secret-0", mountPath: "/x" }];
    const user = (pod.spec!.containers as Container[]).find((c) => c.name === "user")!;
    user.env = [{ name: "T", valueFrom: { secretKeyRef: { name: "forge", key: "token" } } }];
    const v = podViolations(pod, OPERATOR, OPERATOR);
    expect(v.map((x) => x.path)).toEqual([
      `spec.containers[0].volumeMounts[${harness.volumeMounts.length - 1}]`,
      "spec.containers[2].env[0].valueFrom.secretKeyRef",
    ]);
    for (const x of v) expect(x.message).toContain(FIX);
  });
});
