// The installation's word on what every Sandbox pod holds (JR2_POD_CONFIG_FILE, YAML or JSON;
// decision 0021): the Custodian's image and slice, the model providers it routes, the held secrets
// (each a key of a Secret in the Sandboxes' namespace, bound to its origins, with the env name the
// Harness gets its Stand-in under), the hosts tools may tunnel to, the Effector's image (by default
// the companions image: its command is jr2's Effector, decision 0070) and the digests a create may
// name instead (decision 0048: an image that holds push credentials is the installation's choice),
// the effect secrets an Effect may spend (each bound to origins and tenants), whether every Effector
// must confine credentialed commands, and the CA bundle it trusts (decision 0070), the `user` seat's NET_RAW opt-out (decision 0048), the base egress list
// (decision 0051; the egress point reads this same file), and where the pods run
// (a nodeSelector and tolerations, decision 0038: e.g. the local real node), and the runtime class
// they run under and the others a create may choose (decision 0055: e.g. gVisor).
// Pure: parsed once at boot; a bad file ends the Orchestrator naming each field and its fix. The
// Custodian's own config (api/custodian-config.ts) is composed from this per Sandbox (compose.ts).
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { fieldPath } from "../../api/attach";
import { EgressRules, RuntimeClassName } from "../../api/orchestrator-schemas";
import { ceilingProblems, parseCidr, parseEgressRule, publicTestRangeProblem, type Cidr } from "../../api/egress-point";
import { EnvName, HeaderName, HostPattern, Origin, Provider, Timeout } from "../../api/custodian-config";
import { Toleration } from "../../api/crd/generated/corev1";
import { TENANT_NAME } from "../tokens";
import { milliCpu, bytesOf } from "../../lib/quantity";
import { CUSTODIAN_SLICE } from "./size";

const SecretName = z
  .string()
  .max(253, "must be at most 253 characters")
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
    message: "must be a Secret's name (lower-case DNS subdomain), e.g. model-keys",
  });
const SecretKey = z
  .string()
  .max(253, "must be at most 253 characters")
  .regex(/^[-._a-zA-Z0-9]+$/, { message: "must be a Secret's key (letters, digits, '-', '_', '.'), e.g. anthropic" });
const ConfigMapName = z
  .string()
  .max(253, "must be at most 253 characters")
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
    message: "must be a ConfigMap's name (lower-case DNS subdomain), e.g. forge-ca",
  });
const ConfigMapKey = z
  .string()
  .max(253, "must be at most 253 characters")
  .regex(/^[-._a-zA-Z0-9]+$/, { message: "must be a ConfigMap's key (letters, digits, '-', '_', '.'), e.g. ca.crt" });

/** An image pinned by digest, compared exactly: a tag can be moved to other bytes. */
const DigestImage = z.string().regex(/^[^\s@]+@sha256:[0-9a-f]{64}$/, {
  message: "must be an image pinned by its digest, <name>@sha256:<64 lower-case hex>, compared exactly",
});

const Cpu = z.string().refine((s) => (milliCpu(s) ?? 0) > 0, { message: "must be a CPU quantity such as 100m" });
const Memory = z
  .string()
  .refine((s) => (bytesOf(s) ?? 0) >= 64 * 2 ** 20, { message: "must be a memory quantity of at least 64Mi" });

/** A list of address ranges (api/egress-point.ts parseCidr), each refused at its index; `check` adds a
 * rule of its own. */
const AddressRangeList = (check?: (c: Cidr) => string | undefined) =>
  z
    .array(z.string())
    .superRefine((list, ctx) =>
      list.forEach((text, i) => {
        const p = parseCidr(text);
        const why = p.ok ? check?.(p.cidr) : p.message;
        if (why) ctx.addIssue({ code: "custom", path: [i], message: why });
      }),
    )
    .optional();

const Held = z.strictObject({
  secret: SecretName.meta({ description: "The Secret (in the Sandboxes' namespace) holding the value." }),
  key: SecretKey.meta({ description: "Its key." }),
  // EnvName and Timeout are zod/mini schemas (api/custodian-config.ts): wrapped, not chained.
  env: z.optional(EnvName).meta({
    description: "The Harness's env var that gets the Stand-in, e.g. ANTHROPIC_API_KEY.",
  }),
  origins: z
    .array(Origin)
    .min(1, "must name at least one origin: a held value goes only where it is bound")
    .meta({ description: "Where the value may go, e.g. https://api.anthropic.com." }),
  headers: z.array(HeaderName).min(1, "must name at least one header, or be left out (any header)").optional(),
});

/** An effect secret (decision 0070): a key of a Secret in the Sandboxes' namespace a workspace's
 * Effector may mount when its create declares it, and the origins an http Effect may send it to. */
const EffectSecret = z.strictObject({
  secret: SecretName.meta({ description: "The Secret (in the Sandboxes' namespace) holding the value." }),
  key: SecretKey.meta({ description: "Its key." }),
  origins: z
    .array(Origin)
    .min(1, "must name at least one origin (scheme://host[:port]): an effect secret goes only where it is bound")
    .meta({
      description:
        "Where an http Effect may send it in a header, e.g. https://api.github.com. A credentialed command's " +
        "destinations are its own: confine them with the workspace's egress list.",
    }),
  tenants: z
    .array(z.string().regex(TENANT_NAME, { message: "must be a tenant's name (a DNS label), e.g. team-a" }))
    .min(1, "must name at least one tenant, or be left out (every tenant)")
    .optional()
    .meta({
      description:
        "The API-token tenants whose workspaces may declare it (decision 0048, as a fence entry's); absent: every " +
        "tenant's. An admin token may declare every entry.",
    }),
});

export const PodConfig = z
  .strictObject({
    custodian: z
      .strictObject({
        image: z.string().min(1, "must not be empty").optional().meta({
          description: "The custodian container's image (default: JR2_CUSTODIAN_IMAGE, the companions image).",
        }),
        resources: z
          .strictObject({ cpu: Cpu.default(CUSTODIAN_SLICE.cpu), memory: Memory.default(CUSTODIAN_SLICE.memory) })
          .default({ ...CUSTODIAN_SLICE }),
        providers: z.array(Provider).default([]),
        held: z.array(Held).default([]),
        tunnel: z.array(HostPattern).default([]),
        timeouts: z
          .strictObject({ connect: z.optional(Timeout), headers: z.optional(Timeout), body: z.optional(Timeout) })
          .optional(),
      })
      .default({ resources: { ...CUSTODIAN_SLICE }, providers: [], held: [], tunnel: [] }),
    harness: z
      .strictObject({
        env: z
          .array(
            z.strictObject({
              name: EnvName,
              value: z.string().max(32_768, "must be at most 32768 characters"),
            }),
          )
          .default([])
          .meta({
            description:
              "The Harness's own settings (e.g. JR2_MODEL_PROVIDER, JR2_MODEL_ID): first in its env, so the " +
              "mechanism's variables (the Custodian's address, the Stand-ins, the bearer's digest) win on a clash. " +
              "Never a credential: a credential is a held value.",
          }),
      })
      .default({ env: [] }),
    effector: z
      .strictObject({
        image: z
          .string()
          .min(1, "must not be empty")
          .optional()
          .meta({
            description:
              "The Effector's image, for every workspace with an Effector whose create names none (default: the " +
              "installation's companions image, JR2_CUSTODIAN_IMAGE). Its command is always jr2's Effector program " +
              "(node /app/effector.js, jr2-confine beside it; decision 0070), so an image with more tools must be " +
              "built FROM the companions image: add the tools, jr2's program stays its command. It holds push " +
              "credentials and effect secrets, so it is the installation's choice (decision 0048).",
          }),
        allowedImages: z
          .array(DigestImage)
          .default([])
          .meta({
            description:
              "The other images a create may name in effector.image, each pinned by digest and compared exactly, " +
              "e.g. registry.example/effector@sha256:<64 hex>; each built FROM the companions image, as image is.",
          }),
        secrets: z
          .array(EffectSecret)
          .default([])
          .meta({
            description:
              "The effect secrets (decision 0070): the keys of Secrets in the Sandboxes' namespace an Effect may " +
              "spend by reference ({secret, key}) in an http header or a command's env, each bound to the origins " +
              "an http Effect may send it to. A workspace's Effector mounts those its create declares " +
              "(effector.secrets), read-only at /run/jr2/secrets/<secret>/<key>, and no other container may.",
          }),
        requireCommands: z
          .boolean()
          .default(false)
          .meta({
            description:
              "Every Effector must be able to confine credentialed commands with Landlock (decision 0070): one " +
              "that cannot (no Landlock on its node, e.g. under gVisor) ends at start, saying why in its " +
              "termination message, and the workspace fails naming it. Default false: such an Effector refuses " +
              "credentialed commands alone, naming the node.",
          }),
        trust: z
          .strictObject({
            configMap: ConfigMapName.meta({ description: "The ConfigMap (in the Sandboxes' namespace)." }),
            key: ConfigMapKey.meta({ description: "Its key holding the PEM bundle, e.g. ca.crt." }),
          })
          .optional()
          .meta({
            description:
              "A PEM bundle the Effector trusts beside the system roots for pushes and http Effects (e.g. a " +
              "private forge's CA): mounted read-only in the effector alone at /etc/jr2/effector-ca/ca.crt.",
          }),
      })
      .default({ allowedImages: [], secrets: [], requireCommands: false }),
    userSeat: z
      .strictObject({
        netRaw: z
          .boolean()
          .default(false)
          .meta({
            description:
              "Whether the `user` seat keeps NET_RAW (raw sockets, e.g. ping), as the container runtime's default " +
              "set gives it. Default false: it is dropped, as it " +
              "would let the seat read and forge the pod's loopback traffic, the Custodian's plain HTTP among it " +
              "(decision 0048). true gives that up: the seat reads and forges every packet of the pod's network, " +
              "the held values the Custodian adds to a plain-HTTP request included, and sends packets from an " +
              "address not its own, which the egress point, judging a connection by its source address, relies on " +
              "no seat doing (decisions 0051, 0067; a TCP handshake from a forged address still never completes).",
          }),
      })
      .default({ netRaw: false }),
    egress: z
      .strictObject({
        allow: EgressRules.default([]).meta({
          description:
            "The installation's base list (decision 0051): hosts every Sandbox may reach through the egress point, " +
            "beside each workspace's own list and its Repos' remotes. The egress point adds the hosts of " +
            "custodian.providers, custodian.held origins and custodian.tunnel itself. Only an exact host of " +
            "this list (or of those) may resolve to a cluster-internal address, e.g. a model served in the cluster. " +
            "Names are resolved as absolute names: write a cluster Service in full, " +
            "<service>.<namespace>.svc.<cluster domain> (decision 0068).",
        }),
        ceiling: EgressRules.optional().meta({
          description:
            "The egress ceiling (decision 0076): rules, in the allow list's syntax, that no workspace's own rule " +
            "may pass. A create or a PUT of the egress list naming a rule outside it is refused, naming the " +
            "entry; the egress point also never opens a Sandbox's own rule outside it (a Sandbox written " +
            "directly included). The base list, custodian hosts and the Repos' remotes are the installation's " +
            "and pass. Absent: no ceiling; []: a workspace may add no rule.",
        }),
        clusterRanges: AddressRangeList().meta({
          description:
            "The cluster's own pod, service and node CIDRs (decision 0068): the egress point holds every address in " +
            "them internal, beside every address that is not public global unicast, so a workspace's list never " +
            "reaches them. Name them when they are not private ranges (e.g. public pod ranges on a cloud's VPC).",
        }),
        publicTestRanges: AddressRangeList(publicTestRangeProblem).meta({
          description:
            "For a test installation only (decision 0068): documentation-range CIDRs the egress point treats as " +
            "public, where a stand-in public host sits. A release sets none.",
        }),
      })
      .default({ allow: [] }),
    placement: z
      .strictObject({
        nodeSelector: z
          .record(
            z.string().min(1, "must not be empty").max(317, "must be a label key of at most 317 characters"),
            z.string().max(63, "must be a label value of at most 63 characters"),
          )
          .optional()
          .meta({ description: "Every Sandbox pod's nodeSelector, e.g. {jr2.dev/node: real}." }),
        tolerations: z
          .array(Toleration)
          .optional()
          .meta({ description: "Every Sandbox pod's tolerations, e.g. of the nodes set apart for Sandboxes." }),
      })
      .default({})
      .meta({
        description:
          "Where every Sandbox pod runs (decision 0038): written into each Sandbox's spec.nodeSelector and " +
          "spec.tolerations, which the operator copies to its pod. Absent: anywhere the scheduler finds.",
      }),
    runtime: z
      .strictObject({
        className: RuntimeClassName.optional().meta({
          description:
            "The RuntimeClass every Sandbox pod runs under, all four seats with it, when its create names none " +
            "(decision 0055), e.g. gvisor: written into each Sandbox's spec.runtimeClassName, which the operator " +
            "copies to its pod. The cluster must have a RuntimeClass of that name. Absent: the cluster's default runtime.",
        }),
        allowedClassNames: z
          .array(RuntimeClassName)
          .default([])
          .meta({
            description:
              "The other RuntimeClasses a create may name in runtimeClassName, e.g. [kata]. None: a create may " +
              "name only className (or leave it out).",
          }),
      })
      .default({ allowedClassNames: [] })
      .meta({
        description:
          "What the Sandbox pods run under (decision 0055): the installation's default runtime class and the " +
          "others a workspace create may choose.",
      }),
  })
  .superRefine((c, ctx) => {
    const seen = new Map<string, number>();
    c.custodian.held.forEach((h, i) => {
      const id = `${h.secret}/${h.key}`;
      if (seen.has(id))
        ctx.addIssue({
          code: "custom",
          path: ["custodian", "held", i],
          message: `repeats ${id} (also held[${seen.get(id)}]): bind one entry to every origin instead`,
        });
      seen.set(id, i);
    });
    // One entry per effect secret, and a Secret is the Effector's or the Custodian's, never both: an
    // effect Secret's volumes are the effector's alone (decision 0070), a held one's the Custodian's.
    const effect = new Map<string, number>();
    c.effector.secrets.forEach((e, i) => {
      const id = `${e.secret}/${e.key}`;
      if (effect.has(id))
        ctx.addIssue({
          code: "custom",
          path: ["effector", "secrets", i],
          message: `repeats ${id} (also secrets[${effect.get(id)}]): bind one entry to every origin instead`,
        });
      effect.set(id, i);
      if (c.custodian.held.some((h) => h.secret === e.secret))
        ctx.addIssue({
          code: "custom",
          path: ["effector", "secrets", i, "secret"],
          message:
            `${JSON.stringify(e.secret)} is also a Secret of custodian.held: the Effector's secrets are mounted in ` +
            "the effector alone, so keep them in a Secret of their own (or drop the held entry)",
        });
    });
    const envs = new Set<string>();
    c.custodian.held.forEach((h, i) => {
      if (h.env === undefined) return;
      if (envs.has(h.env))
        ctx.addIssue({
          code: "custom",
          path: ["custodian", "held", i, "env"],
          message: "repeats an env name: the Harness holds one Stand-in per variable; give each entry its own",
        });
      envs.add(h.env);
    });
  });

export type PodConfig = z.infer<typeof PodConfig>;
export type HeldSecret = PodConfig["custodian"]["held"][number];
export type EffectSecretEntry = PodConfig["effector"]["secrets"][number];

/**
 * The pod config as the Orchestrator runs it: `effector.image` left out is the installation's
 * companions image (decision 0070: the Effector is jr2's program, shipped in that image).
 */
export const withCompanionsImage = (config: PodConfig, companionsImage: string): PodConfig =>
  config.effector.image ? config : { ...config, effector: { ...config.effector, image: companionsImage } };

/**
 * The effect secrets a workspace's create declares (effector.secrets, decision 0070), judged before
 * anything is written: each must be an entry of the pod config's `effector.secrets` that `tenant`
 * (undefined: an admin) may use. A refusal names the field, the refused entries and the fix, and
 * only the entries this tenant may use.
 */
export function effectSecretsFor(
  declared: ReadonlyArray<{ secret: string; key: string }>,
  config: PodConfig,
  tenant: string | undefined,
): { ok: true; secrets: Array<{ secret: string; key: string }> } | { ok: false; message: string } {
  const usable = config.effector.secrets.filter(
    (e) => tenant === undefined || !e.tenants || e.tenants.includes(tenant),
  );
  const names = usable.map((e) => `${e.secret}/${e.key}`);
  const problems: string[] = [];
  declared.forEach((d, i) => {
    if (!usable.some((e) => e.secret === d.secret && e.key === d.key))
      problems.push(`effector.secrets[${i}]: ${d.secret}/${d.key} is not an effect secret this workspace may declare`);
  });
  if (!problems.length) return { ok: true, secrets: declared.map((d) => ({ secret: d.secret, key: d.key })) };
  return {
    ok: false,
    message:
      `${problems.join("; ")} (the pod config's effector.secrets${
        tenant === undefined ? "" : ` for tenant ${JSON.stringify(tenant)}`
      }: ${names.join(", ") || "none"}): declare one of those, or ask the installation's operators to add an ` +
      "entry to effector.secrets (decision 0070)",
  };
}

export const DEFAULT_POD_CONFIG: PodConfig = PodConfig.parse({});

/**
 * The image a workspace's Effector runs (decision 0048): the pod config's `effector.image` when the
 * create names none, else the one it names if the pod config lets it (that image, or one of
 * `effector.allowedImages` exactly). A refusal names the field and the fix.
 */
export function effectorImageFor(
  requested: string | undefined,
  config: PodConfig,
): { ok: true; image: string } | { ok: false; message: string } {
  const { image, allowedImages } = config.effector;
  const allowed = [...(image ? [image] : []), ...allowedImages];
  const choices = allowed.length
    ? `leave effector.image out${image ? ` (the installation's ${JSON.stringify(image)})` : ""}${
        allowedImages.length ? ` or name one of ${allowedImages.map((i) => JSON.stringify(i)).join(", ")}` : ""
      }`
    : "this installation names no Effector image (its pod config's effector.image): ask its operator to set one";
  if (requested === undefined) {
    if (image) return { ok: true, image };
    return {
      ok: false,
      message: `effector.image: required here, as the pod config names no default Effector image: ${choices}`,
    };
  }
  if (allowed.includes(requested)) return { ok: true, image: requested };
  return {
    ok: false,
    message:
      `effector.image: ${JSON.stringify(requested)} is not an image this installation lets hold push credentials ` +
      `(the Effector's image comes from the pod config, decision 0048): ${choices}`,
  };
}

/**
 * The runtime class a workspace's Sandbox pod runs under (decision 0055): the pod config's
 * `runtime.className` (or none: the cluster's default runtime) when the create names none, else the
 * one it names if the pod config lets it (that class, or one of `runtime.allowedClassNames`): the
 * isolation a Sandbox gets is the installation's choice, never a create's alone, so a create cannot opt
 * out of the default (not even back to the cluster's default runtime). A refusal names the field and the fix.
 */
export function runtimeClassFor(
  requested: string | undefined,
  config: PodConfig,
): { ok: true; className: string | undefined } | { ok: false; message: string } {
  const { className, allowedClassNames } = config.runtime;
  if (requested === undefined) return { ok: true, className };
  if (requested === className || allowedClassNames.includes(requested)) return { ok: true, className: requested };
  const dflt = className ? `the installation's ${JSON.stringify(className)}` : "the cluster's default runtime";
  const choices = allowedClassNames.length
    ? `leave runtimeClassName out (${dflt}) or name one of ${[...(className ? [className] : []), ...allowedClassNames]
        .map((c) => JSON.stringify(c))
        .join(", ")}`
    : `this installation allows no choice: leave runtimeClassName out (${dflt}), or ask its operator to add ` +
      "it to the pod config's runtime.allowedClassNames";
  return {
    ok: false,
    message:
      `runtimeClassName: ${JSON.stringify(requested)} is not a runtime class this installation lets a workspace ` +
      `choose (its pod config's runtime.className and runtime.allowedClassNames): ${choices}`,
  };
}

/** A workspace's own egress rules against the installation's ceiling (decision 0076): none outside
 * it, or the refusal naming each entry by its field path and the fix. */
export function egressWithinCeiling(
  allow: readonly string[],
  config: PodConfig,
  field = "egress.allow",
): { ok: true } | { ok: false; message: string } {
  const ceiling = config.egress.ceiling;
  if (!ceiling) return { ok: true };
  const rules = ceiling.map((t) => parseEgressRule(t)).flatMap((p) => (p.ok ? [p.rule] : []));
  const problems = ceilingProblems(allow, rules, field);
  return problems.length ? { ok: false, message: problems.join("; ") } : { ok: true };
}

/** The file's text (YAML or JSON; empty is the defaults). Throws naming `file`, each field and its fix. */
export function parsePodConfig(text: string, file: string): PodConfig {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new Error(`${file}: not YAML or JSON (${(err as Error).message})`);
  }
  const r = PodConfig.safeParse(doc ?? {});
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => {
    const where = i.path.length ? fieldPath(i.path) : "the file";
    // zod names an unknown key without the fix: say which keys are known there.
    if (i.code === "unrecognized_keys")
      return `${where}: ${i.message}: remove it (see orchestrator/workspaces/pod-config.ts)`;
    return `${where}: ${i.message}`;
  });
  throw new Error(`${file}: ${issues.join("; ")}`);
}
