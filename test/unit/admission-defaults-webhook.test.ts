// The Sandbox defaults as the module's mutating webhook (capabilities/admission/defaults-webhook.ts,
// decision 0059), for Kubernetes 1.34 and 1.35: one source with the policy of decision 0026, tested
// equal. On generated specs (as the API server hands them, nulls pruned) the webhook's patch stores
// exactly `withDefaults`, the function the integration tier holds the policy's result to, and asks
// nothing more of a defaulted spec (a reinvocation or a re-apply). Its configuration takes exactly
// the policy's scope: the same kinds, operations, spec-changed condition and namespaces. The
// choice between them is one input (scripts/webhooks.ts), in the manifest and the chart alike.
import fc from "fast-check";
import { parseAllDocuments } from "yaml";
import { sandboxDefaultsPatch, mutation, type JsonPatchOp } from "../../capabilities/admission/defaults-webhook";
import type { ReviewRequest } from "../../capabilities/admission/reviews";
import { sandboxDefaultsBinding, sandboxDefaultsPolicy } from "../../capabilities/admission/policy";
import { withDefaults } from "../../capabilities/rules/sandbox-rules";
import {
  SPEC_CHANGED,
  chartGuard,
  sandboxDefaultsModeFrom,
  sandboxDefaultsWebhook,
  sandboxDefaultsWebhookChartTemplate,
  scopeManifest,
  scopeWebhooks,
  withSandboxDefaults,
  withSandboxDefaultsValue,
  type WebhookConfiguration,
} from "../../scripts/webhooks";
import { crForSpec } from "../support/crfor-sandbox";
import { pruneNulls, sandboxSpec, type Obj } from "../support/held-sandboxes";

const SANDBOX_KIND = { group: "core.jr2.dev", version: "v1alpha1", kind: "Sandbox" };
const request = (spec: unknown, over: Partial<ReviewRequest> = {}): ReviewRequest => ({
  uid: "u-1",
  kind: SANDBOX_KIND,
  operation: "CREATE",
  name: "s",
  namespace: "team-a",
  object: { metadata: { name: "s", namespace: "team-a" }, spec },
  ...over,
});

/** RFC 6902 applied as the API server applies the webhook's answer; only what the webhook may send. */
function applied(object: Obj, patch: JsonPatchOp[]): Obj {
  let out = structuredClone(object);
  for (const op of patch) {
    expect(op).toMatchObject({ op: "replace", path: "/spec" });
    expect(out).toHaveProperty("spec");
    out = { ...out, spec: structuredClone(op.value) };
  }
  return out;
}

describe("the defaults webhook's patch", () => {
  it("stores exactly withDefaults of each generated spec, and asks nothing more of what it stored", () => {
    fc.assert(
      fc.property(sandboxSpec, (sent) => {
        // The API server prunes nulls from fields the CRD does not mark nullable before admission.
        const spec = pruneNulls(sent) as Obj;
        const object = { metadata: { name: "s", namespace: "team-a" }, spec };
        const stored = applied(object, sandboxDefaultsPatch(request(spec)));
        expect(stored.spec).toEqual(withDefaults(spec));
        // Reinvoked (IfNeeded) or re-applied with the defaults in: no patch.
        expect(sandboxDefaultsPatch(request(stored.spec))).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it("stores withDefaults of the Sandbox crFor composes, completing the Custodian's context", () => {
    const [op] = sandboxDefaultsPatch(request(crForSpec()));
    expect(op.value).toEqual(withDefaults(crForSpec()));
    const sidecars = (op.value as { sidecars: Obj[] }).sidecars;
    expect(sidecars.find((c) => c.name === "custodian")?.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      seccompProfile: { type: "RuntimeDefault" },
    });
  });

  it("writes nothing where the policy writes nothing: another kind, no spec, an ignored namespace, a DELETE", () => {
    const plain = { image: "ghcr.io/example/harness:1" };
    expect(sandboxDefaultsPatch(request(plain))).not.toEqual([]);
    expect(sandboxDefaultsPatch(request(plain, { kind: { group: "", version: "v1", kind: "Pod" } }))).toEqual([]);
    expect(sandboxDefaultsPatch(request(undefined))).toEqual([]);
    expect(
      sandboxDefaultsPatch(request(plain, { namespace: "kube-system", object: { metadata: {}, spec: plain } })),
    ).toEqual([]);
    expect(sandboxDefaultsPatch(request(plain, { operation: "DELETE" }))).toEqual([]);
  });

  it("refuses, rather than store a Sandbox undefaulted, when the defaults throw", () => {
    const hostile = request({ image: "x" });
    Object.defineProperty(hostile.object!, "spec", {
      get() {
        throw new Error("unreadable");
      },
    });
    expect(mutation(hostile)).toEqual({
      allowed: false,
      code: 500,
      message: expect.stringContaining("the jr2 defaults could not be written (unreadable)"),
    });
  });
});

const sandboxRule = {
  apiGroups: ["core.jr2.dev"],
  apiVersions: ["v1alpha1"],
  operations: ["CREATE", "UPDATE"],
  resources: ["sandboxes"],
};
const podRule = { apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["pods"] };
const IGNORED = ["kube-system", "pepr-system"];
const validating: WebhookConfiguration = scopeWebhooks({
  apiVersion: "admissionregistration.k8s.io/v1",
  kind: "ValidatingWebhookConfiguration",
  metadata: { name: "pepr-x" },
  webhooks: [
    {
      name: "pepr-x.pepr.dev",
      clientConfig: { caBundle: "Q0E=", service: { name: "pepr-x", namespace: "pepr-system", path: "/validate/abc" } },
      failurePolicy: "Fail",
      namespaceSelector: {
        matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: IGNORED }],
      },
      rules: [sandboxRule, podRule] as never,
      sideEffects: "None",
      timeoutSeconds: 10,
    },
  ],
});

describe("the defaults webhook's configuration", () => {
  const mutating = sandboxDefaultsWebhook(validating);
  const [hook] = mutating.webhooks;

  it("calls the module's /mutate/ path with the Sandbox webhook's endpoint and trust", () => {
    expect(mutating.kind).toBe("MutatingWebhookConfiguration");
    expect(mutating.webhooks).toHaveLength(1);
    expect(hook.clientConfig).toEqual({
      caBundle: "Q0E=",
      service: { name: "pepr-x", namespace: "pepr-system", path: "/mutate/abc" },
    });
    const local = {
      ...validating,
      webhooks: [{ ...validating.webhooks[0], clientConfig: { url: "https://127.0.0.1:1/validate/abc" } }],
    };
    expect(sandboxDefaultsWebhook(local).webhooks[0].clientConfig).toEqual({ url: "https://127.0.0.1:1/mutate/abc" });
  });

  it("takes exactly the policy's scope: kinds, operations, condition, namespaces, failure and reinvocation", () => {
    const policy = sandboxDefaultsPolicy();
    const binding = sandboxDefaultsBinding(IGNORED);
    expect(hook.rules).toEqual(policy.spec.matchConstraints.resourceRules);
    expect(hook.matchConditions).toEqual([SPEC_CHANGED]);
    expect(policy.spec.matchConditions).toContainEqual(SPEC_CHANGED);
    expect(hook.namespaceSelector).toEqual(binding.spec.matchResources.namespaceSelector);
    expect(hook.failurePolicy).toBe(policy.spec.failurePolicy);
    expect(hook.reinvocationPolicy).toBe(policy.spec.reinvocationPolicy);
    expect(hook.sideEffects).toBe("None");
  });

  it("refuses a build with no validating Sandbox webhook to stand beside", () => {
    const podsOnly = { ...validating, webhooks: validating.webhooks.filter((w) => !w.name.startsWith("sandboxes.")) };
    expect(() => withSandboxDefaults([podsOnly], "webhook")).toThrow(/no validating Sandbox webhook/);
  });
});

describe("the one input that chooses who writes the defaults", () => {
  it("is policy unless JR2_SANDBOX_DEFAULTS says webhook; anything else is refused", () => {
    expect(sandboxDefaultsModeFrom({})).toBe("policy");
    expect(sandboxDefaultsModeFrom({ JR2_SANDBOX_DEFAULTS: "webhook" })).toBe("webhook");
    expect(() => sandboxDefaultsModeFrom({ JR2_SANDBOX_DEFAULTS: "auto" })).toThrow(/"policy".*"webhook"/);
  });

  const kinds = (yaml: string) => parseAllDocuments(yaml).map((d) => (d.toJS() as { kind: string }).kind);
  const built = JSON.stringify(validating);

  it("renders the manifest with the policy, or with the webhook in its place, and switches either way", () => {
    const policy = scopeManifest(built, "policy");
    const webhook = scopeManifest(built, "webhook");
    expect(kinds(policy)).toEqual([
      "ValidatingWebhookConfiguration",
      "MutatingAdmissionPolicy",
      "MutatingAdmissionPolicyBinding",
    ]);
    expect(kinds(webhook)).toEqual(["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]);
    expect(scopeManifest(webhook, "policy")).toBe(policy);
    expect(scopeManifest(policy, "webhook")).toBe(webhook);
    expect(scopeManifest(webhook, "webhook")).toBe(webhook);
  });

  it("gives the chart both, one rendered as the sandboxDefaults value says, the build's choice its default", () => {
    const guarded = chartGuard("webhook", "kind: X\n");
    expect(guarded).toBe('{{- if eq (.Values.sandboxDefaults | default "policy") "webhook" }}\nkind: X\n{{- end }}\n');
    const values = withSandboxDefaultsValue("uuid: x\n", "webhook");
    expect(values).toMatch(/\nsandboxDefaults: webhook\n$/);
    expect(withSandboxDefaultsValue(values, "policy")).toBe(withSandboxDefaultsValue("uuid: x\n", "policy"));
  });

  it("templates the chart's webhook from the validation template, keeping its Go expressions", () => {
    const template = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {{ .Values.uuid }}
webhooks:
  - name: sandboxes.{{ .Values.uuid }}.pepr.dev
    clientConfig:
      caBundle: Q0E=
      service:
        name: {{ .Values.uuid }}
        namespace: pepr-system
        path: /validate/abc
    failurePolicy: {{ .Values.admission.failurePolicy }}
    namespaceSelector:
      matchExpressions:
        - key: kubernetes.io/metadata.name
          operator: NotIn
          values:
            - kube-system
            {{- range .Values.additionalIgnoredNamespaces }}
            - {{ . }}
            {{- end }}
    rules:
      - apiGroups: [core.jr2.dev]
        apiVersions: [v1alpha1]
        operations: [CREATE, UPDATE]
        resources: [sandboxes]
    sideEffects: None
    timeoutSeconds: {{ .Values.admission.webhookTimeout }}
    matchConditions:
      - name: spec-changed
        expression: request.operation != 'UPDATE' || object.spec != oldObject.spec
`;
    const out = sandboxDefaultsWebhookChartTemplate(template);
    expect(out).toContain("kind: MutatingWebhookConfiguration");
    expect(out).toContain("name: {{ .Values.uuid }}\n");
    expect(out).toContain("path: /mutate/abc");
    expect(out).toContain("failurePolicy: {{ .Values.admission.failurePolicy }}");
    expect(out).toContain("timeoutSeconds: {{ .Values.admission.webhookTimeout }}");
    expect(out).toContain("{{- range .Values.additionalIgnoredNamespaces }}\n");
    expect(out).toContain("reinvocationPolicy: IfNeeded");
  });
});
