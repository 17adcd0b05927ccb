// The installation's pod config (orchestrator/workspaces/pod-config.ts, decision 0021): the defaults, a full file,
// and each refusal naming the file, the field's path and its fix.
import {
  DEFAULT_POD_CONFIG,
  effectorImageFor,
  parsePodConfig,
  runtimeClassFor,
  type PodConfig,
} from "../../orchestrator/workspaces/pod-config";
import { WorkspaceRegistry } from "../../orchestrator/workspaces/registry";
import type { PlaceRequest, SandboxGateway } from "../../orchestrator/workspaces/sandbox-gateway";
import type { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";
import { CUSTODIAN_SLICE } from "../../orchestrator/workspaces/size";

const FILE = "/etc/jr2/pod-config.yaml";

const DEFAULTS: PodConfig = {
  custodian: { resources: { cpu: "100m", memory: "192Mi" }, providers: [], held: [], tunnel: [] },
  harness: { env: [] },
  effector: { allowedImages: [], secrets: [], requireCommands: false },
  userSeat: { netRaw: false },
  egress: { allow: [] },
  placement: {},
  runtime: { allowedClassNames: [] },
};

/** The message parsePodConfig throws for `text`, or a failure when it is accepted. */
const refusal = (text: string): string => {
  try {
    parsePodConfig(text, FILE);
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error("expected a refusal");
};

/** A file (JSON, which is YAML) holding one good held secret with `fields` put in over its own. */
const heldFile = (fields: Record<string, unknown>) =>
  JSON.stringify({
    custodian: {
      held: [{ secret: "model-keys", key: "anthropic", origins: ["https://api.anthropic.com"], ...fields }],
    },
  });

const FULL = `
custodian:
  image: registry.example.com/jr2/custodian:1.2.3
  resources:
    cpu: 250m
    memory: 256Mi
  providers:
    - name: anthropic
      url: https://api.anthropic.com
    - name: internal
      url: http://models.ml.svc:8080/v1
  held:
    - secret: model-keys
      key: anthropic
      env: ANTHROPIC_API_KEY
      origins: [https://api.anthropic.com]
      headers: [x-api-key]
    - secret: model-keys
      key: github.token
      origins:
        - https://api.github.com
        - https://uploads.github.com
  tunnel:
    - github.com
    - "*.npmjs.org"
    - registry.example.com:8443
  timeouts:
    connect: 5s
    headers: 120s
    body: 10m
effector:
  image: registry.example.com/jr2/effector:1.2.3
egress:
  allow:
    - "*.pypi.org:443"
    - files.example.com
placement:
  nodeSelector:
    jr2.dev/node: real
  tolerations:
    - key: jr2.dev/node
      operator: Equal
      value: real
      effect: NoSchedule
runtime:
  className: gvisor
  allowedClassNames: [kata]
`;

describe("the pod config", () => {
  it("is the defaults for an empty file, a comment alone, or {}", () => {
    for (const text of ["", "\n", "# nothing yet\n", "{}", "---\n"])
      expect(parsePodConfig(text, FILE)).toEqual(DEFAULTS);
  });

  it("defaults to the Custodian's slice, and no providers, held secrets or tunnel hosts", () => {
    expect(DEFAULT_POD_CONFIG).toEqual(DEFAULTS);
    expect(DEFAULT_POD_CONFIG.custodian.resources).toEqual(CUSTODIAN_SLICE);
    expect(DEFAULT_POD_CONFIG.custodian.image).toBeUndefined();
    expect(DEFAULT_POD_CONFIG.custodian.timeouts).toBeUndefined();
    expect(DEFAULT_POD_CONFIG.effector.image).toBeUndefined();
  });

  it("defaults what an empty custodian or resources leaves out", () => {
    expect(parsePodConfig("custodian: {}\n", FILE)).toEqual(DEFAULTS);
    expect(parsePodConfig("custodian:\n  resources: {}\n", FILE)).toEqual(DEFAULTS);
    expect(parsePodConfig("custodian:\n  resources:\n    cpu: 250m\n", FILE).custodian.resources).toEqual({
      cpu: "250m",
      memory: "192Mi",
    });
    expect(parsePodConfig("custodian:\n  resources:\n    memory: 1Gi\n", FILE).custodian.resources).toEqual({
      cpu: "100m",
      memory: "1Gi",
    });
  });

  it("reads a full YAML file", () => {
    expect(parsePodConfig(FULL, FILE)).toEqual({
      custodian: {
        image: "registry.example.com/jr2/custodian:1.2.3",
        resources: { cpu: "250m", memory: "256Mi" },
        providers: [
          { name: "anthropic", url: "https://api.anthropic.com" },
          { name: "internal", url: "http://models.ml.svc:8080/v1" },
        ],
        held: [
          {
            secret: "model-keys",
            key: "anthropic",
            env: "ANTHROPIC_API_KEY",
            origins: ["https://api.anthropic.com"],
            headers: ["x-api-key"],
          },
          {
            secret: "model-keys",
            key: "github.token",
            origins: ["https://api.github.com", "https://uploads.github.com"],
          },
        ],
        tunnel: ["github.com", "*.npmjs.org", "registry.example.com:8443"],
        timeouts: { connect: "5s", headers: "120s", body: "10m" },
      },
      harness: { env: [] },
      effector: {
        image: "registry.example.com/jr2/effector:1.2.3",
        allowedImages: [],
        secrets: [],
        requireCommands: false,
      },
      userSeat: { netRaw: false },
      egress: { allow: ["*.pypi.org:443", "files.example.com"] },
      placement: {
        nodeSelector: { "jr2.dev/node": "real" },
        tolerations: [{ key: "jr2.dev/node", operator: "Equal", value: "real", effect: "NoSchedule" }],
      },
      runtime: { className: "gvisor", allowedClassNames: ["kata"] },
    });
  });

  it("places pods anywhere by default, and refuses a toleration with a field a pod has not", () => {
    expect(DEFAULT_POD_CONFIG.placement).toEqual({});
    expect(refusal("placement:\n  tolerations:\n    - key: a\n      effect: Never\n")).toMatch(
      new RegExp(`^${FILE}: placement\\.tolerations\\[0\\]\\.effect: `),
    );
    expect(refusal("placement:\n  tolerations:\n    - key: a\n      nodeName: x\n")).toContain(
      "placement.tolerations[0]: ",
    );
    expect(refusal("placement:\n  nodeSelector:\n    a: [b]\n")).toContain("placement.nodeSelector.a: ");
  });

  // Decision 0048: the images that hold push credentials are the installation's.
  describe("the Effector's image", () => {
    const DIGEST = `registry.example/effector@sha256:${"a".repeat(64)}`;
    const config = (text: string) => parsePodConfig(text, FILE);

    it("is the pod config's when the create names none, and the workspace's image never", () => {
      expect(effectorImageFor(undefined, config("effector: { image: registry.example/effector:1 }"))).toEqual({
        ok: true,
        image: "registry.example/effector:1",
      });
    });

    it("is the one the create names when it is the pod config's or an allowed digest, exactly", () => {
      const c = config(`effector: { image: registry.example/effector:1, allowedImages: ["${DIGEST}"] }`);
      expect(effectorImageFor(DIGEST, c)).toEqual({ ok: true, image: DIGEST });
      expect(effectorImageFor("registry.example/effector:1", c)).toEqual({
        ok: true,
        image: "registry.example/effector:1",
      });
    });

    it("refuses another image, naming the field and the images it may name", () => {
      const c = config(`effector: { image: registry.example/effector:1, allowedImages: ["${DIGEST}"] }`);
      for (const other of ["attacker.example/effector:1", DIGEST.replace("@sha256", ":latest@sha256"), `${DIGEST} `]) {
        const r = effectorImageFor(other, c);
        expect(r.ok).toBe(false);
        expect(!r.ok && r.message).toContain(
          `effector.image: ${JSON.stringify(other)} is not an image this installation`,
        );
        expect(!r.ok && r.message).toContain(
          'leave effector.image out (the installation\'s "registry.example/effector:1")',
        );
        expect(!r.ok && r.message).toContain(DIGEST);
      }
    });

    it("refuses an Effector when the pod config names no image, naming the fix", () => {
      const none = effectorImageFor(undefined, DEFAULT_POD_CONFIG);
      expect(!none.ok && none.message).toContain("effector.image: required here");
      expect(!none.ok && none.message).toContain("ask its operator to set one");
      const named = effectorImageFor("registry.example/harness:1", DEFAULT_POD_CONFIG);
      expect(named.ok).toBe(false);
      // Only digests listed: one may be named.
      const listed = effectorImageFor(undefined, config(`effector: { allowedImages: ["${DIGEST}"] }`));
      expect(!listed.ok && listed.message).toContain(`name one of "${DIGEST}"`);
    });

    it("refuses an allowed image not pinned by digest, naming the field", () => {
      expect(refusal("effector: { allowedImages: [registry.example/effector:1] }")).toContain(
        "effector.allowedImages[0]: must be an image pinned by its digest",
      );
    });
  });

  // Decision 0055: what the Sandbox pods run under is the installation's choice.
  describe("the runtime class", () => {
    const config = (text: string) => parsePodConfig(text, FILE);
    const gvisor = config("runtime: { className: gvisor, allowedClassNames: [kata, runc.example.com] }");

    it("is none by default: the cluster's default runtime, as before, and a create may choose nothing", () => {
      expect(DEFAULT_POD_CONFIG.runtime).toEqual({ allowedClassNames: [] });
      expect(runtimeClassFor(undefined, DEFAULT_POD_CONFIG)).toEqual({ ok: true, className: undefined });
    });

    it("is the pod config's when the create names none", () => {
      expect(runtimeClassFor(undefined, gvisor)).toEqual({ ok: true, className: "gvisor" });
      expect(runtimeClassFor(undefined, config("runtime: { allowedClassNames: [kata] }"))).toEqual({
        ok: true,
        className: undefined,
      });
    });

    it("is the one the create names when it is the pod config's or an allowed one, exactly", () => {
      expect(runtimeClassFor("gvisor", gvisor)).toEqual({ ok: true, className: "gvisor" });
      expect(runtimeClassFor("kata", gvisor)).toEqual({ ok: true, className: "kata" });
      expect(runtimeClassFor("runc.example.com", gvisor)).toEqual({ ok: true, className: "runc.example.com" });
      expect(runtimeClassFor("kata", config("runtime: { allowedClassNames: [kata] }"))).toEqual({
        ok: true,
        className: "kata",
      });
    });

    it("refuses another class, naming the field, the value and the classes it may name", () => {
      for (const other of ["runc", "Gvisor", "gvisor "]) {
        const r = runtimeClassFor(other, gvisor);
        expect(r.ok).toBe(false);
        expect(!r.ok && r.message).toBe(
          `runtimeClassName: ${JSON.stringify(other)} is not a runtime class this installation lets a workspace ` +
            "choose (its pod config's runtime.className and runtime.allowedClassNames): leave runtimeClassName " +
            `out (the installation's "gvisor") or name one of "gvisor", "kata", "runc.example.com"`,
        );
      }
    });

    it("refuses any class where the pod config allows no choice, saying so and naming the default", () => {
      const none = runtimeClassFor("gvisor", DEFAULT_POD_CONFIG);
      expect(none.ok).toBe(false);
      expect(!none.ok && none.message).toContain('runtimeClassName: "gvisor" is not a runtime class');
      expect(!none.ok && none.message).toContain(
        "this installation allows no choice: leave runtimeClassName out (the cluster's default runtime)",
      );
      expect(!none.ok && none.message).toContain("runtime.allowedClassNames");
      const fixed = runtimeClassFor("kata", config("runtime: { className: gvisor }"));
      expect(!fixed.ok && fixed.message).toContain(
        `this installation allows no choice: leave runtimeClassName out (the installation's "gvisor")`,
      );
      // Naming the default itself is no choice, and is accepted.
      expect(runtimeClassFor("gvisor", config("runtime: { className: gvisor }"))).toEqual({
        ok: true,
        className: "gvisor",
      });
    });

    describe("at a workspace create, resolved once before anything is written", () => {
      /** A registry whose gateway records the place request and never answers. */
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
        const reg = new WorkspaceRegistry({
          gateway,
          watch: {} as unknown as SandboxWatch,
          credentials: [],
          podConfig,
        });
        return { reg, placed };
      };
      const body = (runtimeClassName?: string) => ({
        image: "h",
        branch: "feat",
        repos: [],
        ...(runtimeClassName ? { runtimeClassName } : {}),
      });

      it("hands the gateway the default, the class named, or none", async () => {
        const { reg, placed } = registry(gvisor);
        await reg.create(body());
        await reg.create(body("kata"));
        reg.stop();
        expect(placed.map((p) => p.runtimeClassName)).toEqual(["gvisor", "kata"]);
        const bare = registry(DEFAULT_POD_CONFIG);
        await bare.reg.create(body());
        bare.reg.stop();
        expect(bare.placed[0]).not.toHaveProperty("runtimeClassName");
      });

      it("refuses another class with a 403 runtime_class_refused naming the field, before the gateway hears it", async () => {
        const { reg, placed } = registry(gvisor);
        const create = reg.create(body("runc"));
        await expect(create).rejects.toMatchObject({ status: 403, code: "runtime_class_refused" });
        await expect(create).rejects.toThrow('runtimeClassName: "runc" is not a runtime class');
        reg.stop();
        expect(placed).toHaveLength(0);
      });
    });

    it("refuses a name that is not a RuntimeClass's, naming the field and an example", () => {
      for (const bad of ["gVisor", "-gvisor", "g_visor", "", "a".repeat(254)]) {
        expect(refusal(JSON.stringify({ runtime: { className: bad } }))).toContain(`${FILE}: runtime.className: `);
      }
      expect(refusal("runtime: { className: gVisor }")).toBe(
        `${FILE}: runtime.className: must be a RuntimeClass's name (lower-case DNS subdomain), e.g. gvisor`,
      );
      expect(refusal("runtime: { allowedClassNames: [kata, Kata] }")).toBe(
        `${FILE}: runtime.allowedClassNames[1]: must be a RuntimeClass's name (lower-case DNS subdomain), e.g. gvisor`,
      );
      expect(refusal("runtime: { class: gvisor }")).toContain(`${FILE}: runtime: `);
      expect(refusal(JSON.stringify({ runtime: { className: "a".repeat(254) } }))).toContain(
        "runtime.className: must be at most 253 characters",
      );
    });
  });

  // Decision 0048: the user seat loses NET_RAW unless the installation says otherwise.
  it("drops the user seat's NET_RAW by default, and reads the opt-out", () => {
    expect(DEFAULT_POD_CONFIG.userSeat).toEqual({ netRaw: false });
    expect(parsePodConfig("userSeat: { netRaw: true }", FILE).userSeat).toEqual({ netRaw: true });
    expect(refusal("userSeat: { netRaw: yes please }")).toContain("userSeat.netRaw: ");
  });

  it("reads the same file written as JSON", () => {
    const json = JSON.stringify(parsePodConfig(FULL, FILE));
    expect(parsePodConfig(json, FILE)).toEqual(parsePodConfig(FULL, FILE));
  });

  it("accepts the same key of two Secrets, and two keys of one Secret", () => {
    const config = parsePodConfig(
      JSON.stringify({
        custodian: {
          held: [
            { secret: "model-keys", key: "anthropic", env: "A", origins: ["https://api.anthropic.com"] },
            { secret: "other-keys", key: "anthropic", env: "B", origins: ["https://api.anthropic.com"] },
            { secret: "model-keys", key: "openai", origins: ["https://api.openai.com"] },
          ],
        },
      }),
      FILE,
    );
    expect(config.custodian.held.map((h) => `${h.secret}/${h.key}`)).toEqual([
      "model-keys/anthropic",
      "other-keys/anthropic",
      "model-keys/openai",
    ]);
  });

  describe("refusals", () => {
    it("refuses a file that is not YAML, naming the file", () => {
      const message = refusal("custodian: [unclosed\n");
      expect(message).toMatch(new RegExp(`^${FILE}: not YAML or JSON \\(`));
    });

    it("refuses a Secret name that is not a DNS subdomain, naming the field and an example", () => {
      for (const secret of ["Model_Keys", "model-keys-", "-model", "model/keys", ""]) {
        const message = refusal(heldFile({ secret }));
        expect(message).toBe(
          `${FILE}: custodian.held[0].secret: must be a Secret's name (lower-case DNS subdomain), e.g. model-keys`,
        );
      }
    });

    it("refuses a Secret key with a path or another character, naming the field and an example", () => {
      for (const key of ["an/thropic", "key with space", "a:b", ""]) {
        const message = refusal(heldFile({ key }));
        expect(message).toBe(
          `${FILE}: custodian.held[0].key: must be a Secret's key (letters, digits, '-', '_', '.'), e.g. anthropic`,
        );
      }
    });

    it("refuses an env that is not an environment variable name", () => {
      for (const env of ["1BAD", "BAD-NAME", "A B", ""]) {
        expect(refusal(heldFile({ env }))).toBe(
          `${FILE}: custodian.held[0].env: must be an environment variable name, e.g. ANTHROPIC_API_KEY`,
        );
      }
    });

    it("refuses an origin with a path, naming its index and the origin to write instead", () => {
      const message = refusal(heldFile({ origins: ["https://api.anthropic.com", "https://api.example.com/v1"] }));
      expect(message).toMatch(new RegExp(`^${FILE}: custodian\\.held\\[0\\]\\.origins\\[1\\]: `));
      expect(message).toContain("must be exactly https://api.example.com");
      expect(message).toContain("write the origin alone");
    });

    it("refuses an origin that is not a url or not http(s)", () => {
      expect(refusal(heldFile({ origins: ["api.anthropic.com"] }))).toContain("custodian.held[0].origins[0]: ");
      expect(refusal(heldFile({ origins: ["ftp://files.example.com"] }))).toContain(
        "custodian.held[0].origins[0]: must be http or https",
      );
    });

    it("refuses a held secret bound to no origin", () => {
      expect(refusal(heldFile({ origins: [] }))).toBe(
        `${FILE}: custodian.held[0].origins: must name at least one origin: a held value goes only where it is bound`,
      );
    });

    it("refuses an empty header list, saying to leave it out", () => {
      expect(refusal(heldFile({ headers: [] }))).toBe(
        `${FILE}: custodian.held[0].headers: must name at least one header, or be left out (any header)`,
      );
    });

    it("refuses an unknown top-level key, naming it", () => {
      const message = refusal("custodians:\n  image: x\n");
      expect(message).toMatch(new RegExp(`^${FILE}: the file: `));
      expect(message).toContain('"custodians"');
    });

    it("refuses an unknown key inside an entry, naming the entry", () => {
      const message = refusal(heldFile({ value: "anthropic" }));
      expect(message).toMatch(new RegExp(`^${FILE}: custodian\\.held\\[0\\]: `));
      expect(message).toContain('"value"');
    });

    it("refuses a file that is not a mapping", () => {
      expect(refusal("- a\n- b\n")).toMatch(new RegExp(`^${FILE}: the file: `));
    });

    it("refuses the same Secret and key held twice, naming both entries and the fix", () => {
      const message = refusal(
        JSON.stringify({
          custodian: {
            held: [
              { secret: "model-keys", key: "anthropic", origins: ["https://api.anthropic.com"] },
              { secret: "model-keys", key: "anthropic", origins: ["https://proxy.example.com"] },
            ],
          },
        }),
      );
      expect(message).toBe(
        `${FILE}: custodian.held[1]: repeats model-keys/anthropic (also held[0]): bind one entry to every origin instead`,
      );
    });

    it("refuses the same env for two held secrets, naming the later one", () => {
      const message = refusal(
        JSON.stringify({
          custodian: {
            held: [
              { secret: "model-keys", key: "anthropic", env: "API_KEY", origins: ["https://api.anthropic.com"] },
              { secret: "model-keys", key: "openai", env: "API_KEY", origins: ["https://api.openai.com"] },
            ],
          },
        }),
      );
      expect(message).toBe(
        `${FILE}: custodian.held[1].env: repeats an env name: the Harness holds one Stand-in per variable; give each entry its own`,
      );
    });

    it("refuses a Custodian memory under 64Mi, naming the floor", () => {
      for (const memory of ["32Mi", "63Mi", `${64 * 2 ** 20 - 1}`, "lots"]) {
        expect(refusal(`custodian:\n  resources:\n    memory: "${memory}"\n`)).toBe(
          `${FILE}: custodian.resources.memory: must be a memory quantity of at least 64Mi`,
        );
      }
      expect(parsePodConfig("custodian:\n  resources:\n    memory: 64Mi\n", FILE).custodian.resources.memory).toBe(
        "64Mi",
      );
    });

    it("refuses a Custodian cpu of nothing or not a quantity", () => {
      for (const cpu of ["0", "0m", "a lot"]) {
        expect(refusal(`custodian:\n  resources:\n    cpu: "${cpu}"\n`)).toBe(
          `${FILE}: custodian.resources.cpu: must be a CPU quantity such as 100m`,
        );
      }
    });

    it("refuses a bad provider, tunnel host and timeout by path", () => {
      expect(
        refusal("custodian:\n  providers:\n    - name: Anthropic\n      url: https://api.anthropic.com\n"),
      ).toContain("custodian.providers[0].name: must be a DNS label");
      expect(refusal("custodian:\n  tunnel: [github.com, GitHub.com]\n")).toContain(
        "custodian.tunnel[1]: must be a host in lower case",
      );
      expect(refusal("custodian:\n  timeouts:\n    connect: 5 seconds\n")).toContain(
        "custodian.timeouts.connect: must be a Go duration",
      );
    });

    it("names every bad field at once", () => {
      const message = refusal(
        JSON.stringify({
          custodian: {
            resources: { memory: "1Mi" },
            held: [{ secret: "Bad", key: "k", origins: [] }],
          },
        }),
      );
      expect(message.startsWith(`${FILE}: `)).toBe(true);
      expect(message).toContain("custodian.resources.memory: ");
      expect(message).toContain("custodian.held[0].secret: ");
      expect(message).toContain("custodian.held[0].origins: ");
      expect(message.split("; ")).toHaveLength(3);
    });
  });
});

// Decision 0068: the installation's address ranges, which the egress point reads from this file.
describe("egress.clusterRanges and egress.publicTestRanges", () => {
  it("takes CIDRs, and a public test range inside a documentation block only", () => {
    const c = parsePodConfig(
      JSON.stringify({
        egress: { clusterRanges: ["11.0.0.0/16", "fd00:10::/64"], publicTestRanges: ["198.51.100.10/32"] },
      }),
      FILE,
    );
    expect(c.egress).toEqual({
      allow: [],
      clusterRanges: ["11.0.0.0/16", "fd00:10::/64"],
      publicTestRanges: ["198.51.100.10/32"],
    });
  });

  it("refuses a range that is none and a public test range outside the documentation blocks, by field", () => {
    expect(refusal(JSON.stringify({ egress: { clusterRanges: ["10.0.0.0/40"] } }))).toMatch(
      /egress\.clusterRanges\[0\]: .*at most \/32/,
    );
    expect(refusal(JSON.stringify({ egress: { publicTestRanges: ["8.8.8.0/24"] } }))).toMatch(
      /egress\.publicTestRanges\[0\]: 8\.8\.8\.0\/24 is not inside a documentation range/,
    );
  });
});
