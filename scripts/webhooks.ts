// Scopes the webhook configurations `pepr build` generates to what each guards (decision 0017).
// Pepr writes one webhook per configuration whose rules cover every binding, so each Pod CREATE
// and UPDATE in the cluster, and every Sandbox UPDATE (a keepalive renewal too), would wait on
// the module and fail while it is down. Pepr's generator cannot say otherwise, so the build's
// output is rewritten here, in one place, for the manifest and the Helm chart alike:
//   - Sandboxes: one webhook, called on CREATE and on an UPDATE that changes the spec
//     (`matchConditions`), so metadata and status writes never depend on admission; Repos the
//     same, a webhook of their own (their url is a network remote, decision 0066);
//   - Pods and their ephemeral containers: one webhook, called only for pods carrying the Sandbox
//     label (`objectSelector`; an UPDATE matches when the old or the new pod carries it, so adding
//     or removing the label is judged too), and not for the operator's own pod creates: the
//     reconcile runs the pod guard's rules on each pod it builds before writing it (decision 0029).
//     In the validating configuration also `pods/status` updates, but only those that change the
//     pod's labels or annotations (`matchConditions`): jr2's keys are the operator's (decision 0067).
//   - Exec and attach into a Sandbox pod's credential holders (decision 0048): a third webhook in
//     the validating configuration, CONNECT on pods/exec and pods/attach, which Pepr's bindings
//     cannot express. A CONNECT's object is the options (PodExecOptions), which carry no labels, so
//     an objectSelector never matches one: the webhook is called instead only when the container
//     named is a credential holder's name (or none is named), and reads the pod itself.
// The Sandbox defaults are no webhook (decision 0026): the API server writes them, a
// MutatingAdmissionPolicy (capabilities/admission/policy.ts) added here to the manifest and the
// chart, its binding scoped to the namespaces the Sandbox webhook's namespaceSelector takes.
// Where that API is not served (Kubernetes 1.34 and 1.35) one input, `sandboxDefaults` (the
// build's JR2_SANDBOX_DEFAULTS, the chart's value, the local runner's option), puts in its place
// a mutating webhook to the module with the Sandbox webhook's scope (decision 0059).
// The local runner (dev/local-operator.ts) registers the rewritten manifest's configurations and
// policy, so `npm start` and the integration tier run the same scoping as a deployment.
import { parseAllDocuments, stringify } from "yaml";
import { GROUP } from "../api/crd/sources/common";
import { CUSTODIAN, EFFECTOR, SANDBOX_NAME_LABEL } from "../api/wire";
import cfg from "../package.json";
import { SPEC_CHANGED, sandboxDefaultsBinding, sandboxDefaultsPolicy } from "../capabilities/admission/policy";

export { SPEC_CHANGED };

type Rule = { apiGroups: string[]; apiVersions: string[]; operations: string[]; resources: string[] };
export type Webhook = {
  name: string;
  rules?: Rule[];
  objectSelector?: unknown;
  matchConditions?: Array<{ name: string; expression: string }>;
  [k: string]: unknown;
};
export type WebhookConfiguration = {
  apiVersion: string;
  kind: "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration";
  metadata: { name: string; [k: string]: unknown };
  webhooks: Webhook[];
};

/** Only pods carrying the Sandbox label (in the old or the new object) reach admission. */
export const SANDBOX_PODS = { matchExpressions: [{ key: SANDBOX_NAME_LABEL, operator: "Exists" }] };

/** Who the deployed operator is to the API server: Pepr's service account for this module. */
export const DEPLOYED_OPERATOR = `system:serviceaccount:pepr-system:pepr-${cfg.pepr.uuid}`;

const OPERATOR_POD_CREATE = "not-the-operators-pod-create";

/**
 * The operator's own pod creates skip the pod webhook (decision 0029): the reconcile holds each pod
 * it builds to the pod guard's rules before writing it, and the round trip cost every Sandbox a
 * webhook call while Sandboxes were being created. Anyone else's labelled pod is judged as before.
 */
export const notOperatorPodCreate = (operator: string) => ({
  name: OPERATOR_POD_CREATE,
  expression: `request.operation != 'CREATE' || request.userInfo.username != ${JSON.stringify(operator)}`,
});

/** A scoped webhook with its operator condition naming `operator` (the local runner's own identity). */
export function forOperator<W extends Webhook>(w: W, operator: string): W {
  if (!w.matchConditions?.some((c) => c.name === OPERATOR_POD_CREATE)) return w;
  const matchConditions = w.matchConditions.map((c) =>
    c.name === OPERATOR_POD_CREATE ? notOperatorPodCreate(operator) : c,
  );
  return { ...w, matchConditions };
}

/**
 * A status update of a Sandbox pod (decision 0067): the API server takes a pod's labels and
 * annotations from `pods/status` as well (its status strategy resets the spec, not the metadata), so
 * the pod guard's rule on jr2's keys must see those updates too. The kubelet writes a pod's status
 * many times and never its metadata: only a status update that changes labels or annotations is
 * sent to the module (`STATUS_CHANGES_METADATA`), the kubelet's never wait on it.
 */
export const POD_STATUS_RULE: Rule = {
  apiGroups: [""],
  apiVersions: ["v1"],
  operations: ["UPDATE"],
  resources: ["pods/status"],
};

/** Labels and annotations as a map, empty when the object has none. */
const metadataMap = (obj: "object" | "oldObject", field: "labels" | "annotations") =>
  `(has(${obj}.metadata.${field}) ? ${obj}.metadata.${field} : {})`;

/** Every request but a status update that leaves the labels and annotations as they were. A request
 * on the pod itself carries no subResource at all (`has` first: reading it would be an error). */
export const STATUS_CHANGES_METADATA = {
  name: "not-a-status-update-of-status-alone",
  expression:
    "!has(request.subResource) || request.subResource != 'status' || " +
    (["labels", "annotations"] as const)
      .map((f) => `${metadataMap("object", f)} != ${metadataMap("oldObject", f)}`)
      .join(" || "),
};

/**
 * The CONNECTs the pod webhook judges (decision 0048): exec and attach. Not port-forward: it reaches
 * the pod's network namespace, which the Harness (open to exec, and running the Agent's code)
 * shares, so refusing it would close nothing the Harness does not reach already.
 */
export const POD_CONNECT_RULE: Rule = {
  apiGroups: [""],
  apiVersions: ["v1"],
  operations: ["CONNECT"],
  resources: ["pods/exec", "pods/attach"],
};

/**
 * Only an exec or attach naming a credential holder's container, or none (the API server then picks
 * the pod's only container), reaches the module: every other exec in the cluster never waits on it.
 */
export const CREDENTIAL_HOLDER_CONNECT = {
  name: "names-a-credential-holder",
  expression:
    "!has(object.container) || object.container == '' || " +
    `object.container in ${JSON.stringify([CUSTODIAN, EFFECTOR]).replaceAll('"', "'")}`,
};

const isSandboxRule = (r: Rule) => r.apiGroups.includes(GROUP) && r.resources.includes("sandboxes");
const isRepoRule = (r: Rule) => r.apiGroups.includes(GROUP) && r.resources.includes("repos");
const isPodRule = (r: Rule) =>
  r.apiGroups.includes("") && r.resources.some((x) => x === "pods" || x.startsWith("pods/"));

/** `<prefix>.<pepr's name>`: webhook names must be unique within a configuration. */
const named = (prefix: string, w: Webhook) => `${prefix}.${w.name}`;

/**
 * The configuration with each webhook split by what it guards. Pure; throws on a rule it does not
 * know, so a new binding cannot silently widen what admission intercepts.
 */
export function scopeWebhooks(config: WebhookConfiguration): WebhookConfiguration {
  const validating = config.kind === "ValidatingWebhookConfiguration";
  const webhooks = config.webhooks.flatMap((w) => {
    // Already scoped (a second post-build over the same output): kept as it is.
    if (["sandboxes.", "repos.", "pods.", "connect."].some((p) => w.name.startsWith(p))) return [w];
    const rules = w.rules ?? [];
    const unknown = rules.filter((r) => !isSandboxRule(r) && !isRepoRule(r) && !isPodRule(r));
    if (unknown.length) {
      throw new Error(
        `${config.kind} ${w.name}: rules for ${unknown.map((r) => r.resources.join(",")).join("; ")} have no ` +
          "scope in scripts/webhooks.ts: say which objects they guard there",
      );
    }
    const { objectSelector: _o, matchConditions: _m, ...base } = w;
    const sandboxes = rules.filter(isSandboxRule);
    const repos = rules.filter(isRepoRule);
    const pods = rules.filter(isPodRule);
    return [
      ...(sandboxes.length
        ? [{ ...base, name: named("sandboxes", w), rules: sandboxes, matchConditions: [SPEC_CHANGED] }]
        : []),
      // Repos (decision 0066): a create and a spec change only, as for Sandboxes; the cache agents'
      // status writes (repos/status) never reach the module.
      ...(repos.length ? [{ ...base, name: named("repos", w), rules: repos, matchConditions: [SPEC_CHANGED] }] : []),
      // The validating one also sees status updates that change a Sandbox pod's labels or
      // annotations (decision 0067); the same objectSelector, so only Sandbox pods' reach it.
      ...(pods.length
        ? [
            {
              ...base,
              name: named("pods", w),
              rules: validating ? [...pods, POD_STATUS_RULE] : pods,
              objectSelector: SANDBOX_PODS,
              matchConditions: [
                notOperatorPodCreate(DEPLOYED_OPERATOR),
                ...(validating ? [STATUS_CHANGES_METADATA] : []),
              ],
            },
          ]
        : []),
      // No operator condition: the operator's identity opens no credential holder (decision 0048).
      ...(pods.length && validating
        ? [
            {
              ...base,
              name: named("connect", w),
              rules: [POD_CONNECT_RULE],
              matchConditions: [CREDENTIAL_HOLDER_CONNECT],
            },
          ]
        : []),
    ];
  });
  return { ...config, webhooks };
}

const withCaBundle = (w: Webhook, caBundle: string): Webhook => ({
  ...w,
  clientConfig: { ...(w.clientConfig as Record<string, unknown>), caBundle },
});

const isWebhookConfiguration = (d: unknown): d is WebhookConfiguration => {
  const kind = (d as { kind?: string } | null)?.kind;
  return kind === "MutatingWebhookConfiguration" || kind === "ValidatingWebhookConfiguration";
};

const POLICY_KINDS = new Set(["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"]);

/**
 * Who writes the Sandbox defaults (decision 0059): `policy`, the API server's
 * MutatingAdmissionPolicy v1 (served from Kubernetes 1.36; decision 0026), or `webhook`, the
 * module's mutating webhook (1.34 and 1.35). Both write `withDefaults`. Chosen at install, not by
 * discovery: on an API server without the policy's API the manifest's policy objects cannot even
 * be applied, and a chart rendered without a cluster (`helm template`) has nothing to discover.
 */
export const SANDBOX_DEFAULTS_MODES = ["policy", "webhook"] as const;
export type SandboxDefaultsMode = (typeof SANDBOX_DEFAULTS_MODES)[number];

/** The environment variable the build and the local runner read the choice from. */
export const SANDBOX_DEFAULTS_ENV = "JR2_SANDBOX_DEFAULTS";

/** The choice from the environment: `policy` unless JR2_SANDBOX_DEFAULTS says `webhook`; anything else throws. */
export function sandboxDefaultsModeFrom(env: NodeJS.ProcessEnv = process.env): SandboxDefaultsMode {
  const v = (env[SANDBOX_DEFAULTS_ENV] ?? "").trim() || "policy";
  if (!(SANDBOX_DEFAULTS_MODES as readonly string[]).includes(v)) {
    throw new Error(
      `${SANDBOX_DEFAULTS_ENV}=${v}: say "policy" (Kubernetes 1.36 and newer) or "webhook" (1.34 and 1.35)`,
    );
  }
  return v as SandboxDefaultsMode;
}

/** The Sandbox webhook of a scoped configuration (the one whose rules are Sandboxes'). */
const sandboxWebhookOf = (config: WebhookConfiguration) =>
  config.webhooks.find((w) => (w.rules ?? []).some(isSandboxRule));

/**
 * The MutatingWebhookConfiguration that writes the Sandbox defaults: the validating Sandbox
 * webhook's scope (rules, namespaceSelector, the spec-changed condition, timeout, failurePolicy
 * Fail) and endpoint, at the module's /mutate/ path; `IfNeeded` as the policy's, so what is stored
 * keeps the defaults after another party's mutation. Pure.
 */
export function sandboxDefaultsWebhook(validating: WebhookConfiguration): WebhookConfiguration {
  const hook = sandboxWebhookOf(validating);
  if (!hook)
    throw new Error(
      `${validating.kind} ${validating.metadata.name} has no Sandbox webhook to write the defaults beside`,
    );
  const client = hook.clientConfig as { url?: string; service?: { path?: string }; [k: string]: unknown };
  const toMutate = (p: string) => {
    if (!p.includes("/validate/")) throw new Error(`the Sandbox webhook's endpoint ${p} has no /validate/ path`);
    return p.replace("/validate/", "/mutate/");
  };
  const clientConfig = client.url
    ? { ...client, url: toMutate(client.url) }
    : { ...client, service: { ...client.service, path: toMutate(client.service?.path ?? "") } };
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingWebhookConfiguration",
    metadata: { name: validating.metadata.name },
    webhooks: [{ ...hook, clientConfig, reinvocationPolicy: "IfNeeded" }],
  };
}

// A mutating configuration of Sandbox webhooks alone is the defaults' own: the module binds no
// Mutate of its own (decision 0026), so none of Pepr's could be taken for it.
export const isDefaultsWebhookConfiguration = (d: unknown) =>
  isWebhookConfiguration(d) &&
  d.kind === "MutatingWebhookConfiguration" &&
  d.webhooks.every((w) => (w.rules ?? []).some(isSandboxRule));

/**
 * A build's objects with the Sandbox defaults written as `mode` says: the policy and its binding,
 * or the mutating webhook configuration; the other's objects removed. Everything else untouched,
 * in order; idempotent. The one place the choice is made, for the manifest, the chart's default
 * and the local runner alike.
 */
export function withSandboxDefaults<T>(docs: T[], mode: SandboxDefaultsMode): T[] {
  const rest = docs.filter(
    (d) => !POLICY_KINDS.has((d as { kind?: string } | null)?.kind ?? "") && !isDefaultsWebhookConfiguration(d),
  );
  const validating = rest.find(
    (d): d is T & WebhookConfiguration =>
      isWebhookConfiguration(d) && d.kind === "ValidatingWebhookConfiguration" && !!sandboxWebhookOf(d),
  );
  if (!validating) throw new Error("the build has no validating Sandbox webhook: the defaults have no scope");
  if (mode === "webhook") return [...rest, sandboxDefaultsWebhook(validating) as T];
  return [...rest, sandboxDefaultsPolicy() as T, sandboxDefaultsBinding(ignoredNamespaces(rest)) as T];
}

/**
 * A multi-document manifest with every webhook configuration scoped (one left with no webhook
 * dropped), and the Sandbox defaults at the end: the policy and its binding, or with `webhook` the
 * module's mutating webhook (decision 0059); other documents untouched. Idempotent: defaults
 * already there are written again, once.
 */
export function scopeManifest(yaml: string, mode: SandboxDefaultsMode = "policy"): string {
  const docs = parseAllDocuments(yaml).map((doc) => ({ doc, obj: doc.toJS() as unknown }));
  const scoped = docs
    .filter(({ obj }) => !POLICY_KINDS.has((obj as { kind?: string } | null)?.kind ?? ""))
    .filter(({ obj }) => !isDefaultsWebhookConfiguration(obj))
    .flatMap(({ doc, obj }) => {
      if (!isWebhookConfiguration(obj)) return [{ text: doc.toString(), obj }];
      const config = scopeWebhooks(obj);
      return config.webhooks.length ? [{ text: stringify(config, { aliasDuplicateObjects: false }), obj: config }] : [];
    });
  const defaults = withSandboxDefaults(
    scoped.map(({ obj }) => obj),
    mode,
  ).slice(scoped.length);
  return [
    ...scoped.map(({ text }) => text),
    ...defaults.map((d) => stringify(d, { lineWidth: 0, aliasDuplicateObjects: false })),
  ]
    .map((text) => text.replace(/^---\n/, "").trimEnd())
    .join("\n---\n")
    .concat("\n");
}

/**
 * The namespaces admission ignores, as the build wrote them into the Sandbox webhook's
 * namespaceSelector (Pepr's alwaysIgnore and PEPR_ADDITIONAL_IGNORED_NAMESPACES at build time).
 */
export function ignoredNamespaces(docs: unknown[]): string[] {
  const sandboxHook = docs
    .filter(isWebhookConfiguration)
    .flatMap((c) => c.webhooks)
    .find((w) => (w.rules ?? []).some(isSandboxRule));
  const selector = sandboxHook?.namespaceSelector as
    | { matchExpressions?: Array<{ key: string; operator: string; values?: string[] }> }
    | undefined;
  const notIn = selector?.matchExpressions?.find(
    (e) => e.key === "kubernetes.io/metadata.name" && e.operator === "NotIn",
  );
  if (!notIn?.values) {
    throw new Error("the build has no Sandbox webhook with a namespaceSelector: the policy's binding has no scope");
  }
  return [...new Set(notIn.values)];
}

// The Helm chart's templates carry Go template expressions, which are not YAML. Each is swapped
// for a placeholder, the YAML scoped, and the expressions put back where their placeholders land.
const EXPRESSION = /\{\{[^}]*\}\}/g;
const RANGE_LINE = /^(\s*)\{\{-? *range [^}]*\}\}\n(\s*)- (\{\{[^}]*\}\})\n\s*\{\{-? *end *\}\}\n/m;

/**
 * The chart's template of the Sandbox defaults policy and its binding: the binding skips the
 * namespaces the webhooks skip, `.Values.additionalIgnoredNamespaces` included as they take it.
 */
export function sandboxDefaultsChartTemplate(ignored: string[]): string {
  const mark = "__jr2_ignored__";
  const binding = stringify(sandboxDefaultsBinding([mark, ...ignored]));
  const withRange = binding.replace(
    new RegExp(`^( *)- ${mark}\n`, "m"),
    (_w, indent: string) =>
      `${indent}{{- range .Values.additionalIgnoredNamespaces }}\n${indent}- {{ . }}\n${indent}{{- end }}\n`,
  );
  if (withRange === binding) throw new Error("the binding's namespace list was not found");
  return `${stringify(sandboxDefaultsPolicy(), { lineWidth: 0 })}---\n${withRange}`;
}

/** The one CA bundle a manifest's webhook configurations trust; throws unless there is exactly one. */
export function caBundleOf(docs: unknown[]): string {
  const bundles = new Set(
    docs
      .filter(isWebhookConfiguration)
      .flatMap((c) => c.webhooks)
      .map((w) => (w.clientConfig as { caBundle?: string } | undefined)?.caBundle)
      .filter((b): b is string => !!b),
  );
  if (bundles.size !== 1) throw new Error(`the build's webhooks carry ${bundles.size} CA bundles; expected one`);
  return [...bundles][0]!;
}

/**
 * A chart template (mutation-webhook.yaml or validation-webhook.yaml) with its webhooks scoped and
 * trusting `caBundle`, the manifest's. Pepr 1.1.4 templates the timeout by replacing its digits
 * ("10") everywhere in the dumped YAML, so about one build in three had them replaced inside the
 * CA bundle too, and a Helm install whose API server could not trust the webhook.
 */
export function scopeChartTemplate(template: string, caBundle: string): string {
  return transformChartTemplate(template, (doc) =>
    scopeWebhooks({ ...doc, webhooks: doc.webhooks.map((w) => withCaBundle(w, caBundle)) }),
  );
}

/**
 * The chart's template of the Sandbox defaults as a mutating webhook (decision 0059), from the
 * scoped validation template: its Sandbox webhook at the module's /mutate/ path, with every Go
 * expression the validation template carries (the uuid, failurePolicy, timeout, the ignored
 * namespaces' range). Rendered only when the chart's `sandboxDefaults` value says `webhook`.
 */
export function sandboxDefaultsWebhookChartTemplate(validationTemplate: string): string {
  return transformChartTemplate(validationTemplate, sandboxDefaultsWebhook);
}

/** The chart value that chooses who writes the Sandbox defaults, and its templates' guards. */
export const SANDBOX_DEFAULTS_VALUE = "sandboxDefaults";
export const chartGuard = (mode: SandboxDefaultsMode, body: string) =>
  `{{- if eq (.Values.${SANDBOX_DEFAULTS_VALUE} | default "policy") "${mode}" }}\n${body.trimEnd()}\n{{- end }}\n`;

/**
 * The chart's values.yaml with the `sandboxDefaults` value (the build's choice, `mode`) stated and
 * explained; an earlier statement of it replaced.
 */
export function withSandboxDefaultsValue(values: string, mode: SandboxDefaultsMode): string {
  const kept = values.replace(/^# Who writes the Sandbox defaults[^\n]*\n(#[^\n]*\n)*sandboxDefaults: .*\n/m, "");
  return (
    `${kept.trimEnd()}\n` +
    "# Who writes the Sandbox defaults (decision 0059): policy, the API server's MutatingAdmissionPolicy\n" +
    "# (Kubernetes 1.36 and newer), or webhook, the module's mutating webhook (Kubernetes 1.34 and 1.35).\n" +
    `${SANDBOX_DEFAULTS_VALUE}: ${mode}\n`
  );
}

/** A webhook configuration template, its Go expressions held aside while `transform` rewrites the YAML. */
function transformChartTemplate(
  template: string,
  transform: (doc: WebhookConfiguration) => WebhookConfiguration,
): string {
  const held: string[] = [];
  const hold = (text: string) => `__jr2_${held.push(text) - 1}__`;
  // A `range` block over a list becomes one placeholder list item, kept whole.
  let text = template;
  for (let m = RANGE_LINE.exec(text); m; m = RANGE_LINE.exec(text)) {
    text = text.replace(m[0], `${m[2]}- ${hold(m[0].trimEnd().replace(/^\s*/, ""))}\n`);
  }
  text = text.replace(EXPRESSION, (e) => hold(e));
  const doc = parseAllDocuments(text)[0].toJS() as WebhookConfiguration;
  let out = stringify(transform(doc), { lineWidth: 0, aliasDuplicateObjects: false });
  // A held range block goes back at its list item's indentation.
  out = out.replace(/^(\s*)- (["']?)__jr2_(\d+)__\2\n/gm, (whole, indent: string, _q, i: string) => {
    const block = held[Number(i)];
    if (!block.includes("range")) return whole;
    const [open, item, close] = block.split("\n").map((l) => l.trim());
    return `${indent}${open}\n${indent}${item}\n${indent}${close}\n`;
  });
  return out.replace(/(["']?)__jr2_(\d+)__\1/g, (_w, _q, i: string) => held[Number(i)]);
}
