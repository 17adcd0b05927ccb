// The webhook configurations scoped to what they guard (scripts/webhooks.ts, decision 0017):
// Sandboxes only on create or a spec change, pods only when they carry the Sandbox label, in the
// manifest and in the Helm chart's templates alike; the Sandbox defaults policy beside them,
// scoped to the namespaces the Sandbox webhook takes (decision 0026).
import { parseAllDocuments } from "yaml";
import { SANDBOX_DEFAULTS, sandboxDefaultsPolicy } from "../../capabilities/admission/policy";
import {
  CREDENTIAL_HOLDER_CONNECT,
  DEPLOYED_OPERATOR,
  POD_CONNECT_RULE,
  POD_STATUS_RULE,
  STATUS_CHANGES_METADATA,
  SANDBOX_PODS,
  SPEC_CHANGED,
  forOperator,
  ignoredNamespaces,
  notOperatorPodCreate,
  sandboxDefaultsChartTemplate,
  scopeChartTemplate,
  scopeManifest,
  scopeWebhooks,
  type WebhookConfiguration,
} from "../../scripts/webhooks";

const sandboxRule = {
  apiGroups: ["core.jr2.dev"],
  apiVersions: ["v1alpha1"],
  operations: ["CREATE", "UPDATE"],
  resources: ["sandboxes"],
};
const podCreate = {
  apiGroups: [""],
  apiVersions: ["v1"],
  operations: ["CREATE"],
  resources: ["pods", "pods/ephemeralcontainers"],
};
const podUpdate = { ...podCreate, operations: ["UPDATE"] };

const generated = (kind: WebhookConfiguration["kind"], rules: unknown[]): WebhookConfiguration => ({
  apiVersion: "admissionregistration.k8s.io/v1",
  kind,
  metadata: { name: "pepr-x" },
  webhooks: [
    {
      name: "pepr-x.pepr.dev",
      clientConfig: { url: "https://127.0.0.1:3000/validate/abc" },
      failurePolicy: "Fail",
      namespaceSelector: {
        matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system"] }],
      },
      rules: rules as never,
      sideEffects: "None",
      timeoutSeconds: 10,
    },
  ],
});

describe("scopeWebhooks", () => {
  const validating = scopeWebhooks(generated("ValidatingWebhookConfiguration", [sandboxRule, podCreate, podUpdate]));

  it("splits the one generated webhook by what it guards, keeping everything else", () => {
    expect(validating.webhooks.map((w) => w.name)).toEqual([
      "sandboxes.pepr-x.pepr.dev",
      "pods.pepr-x.pepr.dev",
      "connect.pepr-x.pepr.dev",
    ]);
    // Every other field of the generated webhook, those named here and any Pepr adds later (two it
    // does not send today stand for them), reaches both halves unchanged, as does the configuration.
    const source = generated("ValidatingWebhookConfiguration", [sandboxRule, podCreate, podUpdate]);
    const extra = { admissionReviewVersions: ["v1"], matchPolicy: "Equivalent" };
    source.webhooks[0] = { ...source.webhooks[0], ...extra } as (typeof source.webhooks)[0];
    const scoped = scopeWebhooks(source);
    const { name: _n, rules: _r, ...kept } = source.webhooks[0];
    expect(kept).toMatchObject({ failurePolicy: "Fail", timeoutSeconds: 10, sideEffects: "None", ...extra });
    for (const w of scoped.webhooks) {
      const { name: _name, rules: _rules, objectSelector: _o, matchConditions: _m, ...rest } = w;
      expect(rest).toEqual(kept);
    }
    const { webhooks: _w, ...config } = scoped;
    expect(config).toEqual({ apiVersion: source.apiVersion, kind: source.kind, metadata: source.metadata });
  });

  it("calls the Sandbox webhook on create and on a spec change only, never for pods", () => {
    const [sandboxes] = validating.webhooks;
    expect(sandboxes.rules).toEqual([sandboxRule]);
    expect(sandboxes.matchConditions).toEqual([SPEC_CHANGED]);
    expect(SPEC_CHANGED.expression).toContain("object.spec != oldObject.spec");
    expect(sandboxes.objectSelector).toBeUndefined();
  });

  // Decision 0066: a Repo's url is a network remote, judged on create and on a spec change only.
  it("gives Repos a webhook of their own, on create and on a spec change only (never their status)", () => {
    const repoRule = { ...sandboxRule, resources: ["repos"] };
    const scoped = scopeWebhooks(
      generated("ValidatingWebhookConfiguration", [sandboxRule, repoRule, podCreate, podUpdate]),
    );
    expect(scoped.webhooks.map((w) => w.name)).toEqual([
      "sandboxes.pepr-x.pepr.dev",
      "repos.pepr-x.pepr.dev",
      "pods.pepr-x.pepr.dev",
      "connect.pepr-x.pepr.dev",
    ]);
    const repos = scoped.webhooks[1];
    expect(repos.rules).toEqual([repoRule]);
    expect(repos.matchConditions).toEqual([SPEC_CHANGED]);
    expect(repos.objectSelector).toBeUndefined();
    expect(repos.failurePolicy).toBe("Fail");
    // No other webhook takes Repos, and a second pass keeps it as it is.
    expect(scoped.webhooks.filter((w) => JSON.stringify(w.rules).includes('"repos"'))).toHaveLength(1);
    expect(scopeWebhooks(scoped)).toEqual(scoped);
  });

  it("calls the pod webhook only for pods carrying the Sandbox label, never for Sandboxes", () => {
    const [, pods] = validating.webhooks;
    // And their status updates (decision 0067): the API server takes labels from pods/status too.
    expect(pods.rules).toEqual([podCreate, podUpdate, POD_STATUS_RULE]);
    expect(POD_STATUS_RULE).toEqual({
      apiGroups: [""],
      apiVersions: ["v1"],
      operations: ["UPDATE"],
      resources: ["pods/status"],
    });
    expect(pods.objectSelector).toEqual(SANDBOX_PODS);
    expect(SANDBOX_PODS).toEqual({ matchExpressions: [{ key: "sandbox.jr2.dev/name", operator: "Exists" }] });
  });

  // Decision 0067: the kubelet's status writes never wait on the module; one that changes labels or
  // annotations does. The CEL is the API server's to run (the integration tier's status patch).
  it("sends a pods/status update only when it changes the labels or annotations", () => {
    expect(STATUS_CHANGES_METADATA.expression).toBe(
      "!has(request.subResource) || request.subResource != 'status' || " +
        "(has(object.metadata.labels) ? object.metadata.labels : {}) != " +
        "(has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}) || " +
        "(has(object.metadata.annotations) ? object.metadata.annotations : {}) != " +
        "(has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {})",
    );
    // The mutating configuration judges no status.
    const mutating = scopeWebhooks(generated("MutatingWebhookConfiguration", [podCreate]));
    expect(mutating.webhooks[0].rules).toEqual([podCreate]);
    expect(mutating.webhooks[0].matchConditions).toEqual([notOperatorPodCreate(DEPLOYED_OPERATOR)]);
  });

  // Decision 0029: the reconcile holds each pod it builds to the pod guard's rules itself.
  it("skips the operator's own pod creates by its service account, and nobody else's", () => {
    const [, pods] = validating.webhooks;
    expect(DEPLOYED_OPERATOR).toBe("system:serviceaccount:pepr-system:pepr-c429e662-1716-4c8e-9246-78f6de555b19");
    expect(pods.matchConditions).toEqual([notOperatorPodCreate(DEPLOYED_OPERATOR), STATUS_CHANGES_METADATA]);
    expect(pods.matchConditions![0].expression).toBe(
      `request.operation != 'CREATE' || request.userInfo.username != "${DEPLOYED_OPERATOR}"`,
    );
  });

  // Decision 0048: no exec or attach into a credential holder, the operator's identity included.
  it("calls the connect webhook on exec and attach naming a credential holder, whoever asks", () => {
    const connect = validating.webhooks[2];
    expect(connect.rules).toEqual([POD_CONNECT_RULE]);
    expect(POD_CONNECT_RULE).toEqual({
      apiGroups: [""],
      apiVersions: ["v1"],
      operations: ["CONNECT"],
      resources: ["pods/exec", "pods/attach"],
    });
    // A CONNECT's object (PodExecOptions) has no labels: an objectSelector would never match it.
    expect(connect.objectSelector).toBeUndefined();
    expect(connect.matchConditions).toEqual([CREDENTIAL_HOLDER_CONNECT]);
    expect(CREDENTIAL_HOLDER_CONNECT.expression).toBe(
      "!has(object.container) || object.container == '' || object.container in ['custodian','effector']",
    );
    expect(forOperator(connect, "kwok-admin")).toBe(connect);
    // Only the validating configuration judges CONNECTs.
    const mutating = scopeWebhooks(generated("MutatingWebhookConfiguration", [podCreate]));
    expect(mutating.webhooks.map((w) => w.name)).toEqual(["pods.pepr-x.pepr.dev"]);
  });

  it("names another operator identity where a local run says who it is, the Sandbox webhook untouched", () => {
    const [sandboxes, pods] = validating.webhooks;
    expect(forOperator(pods, "kwok-admin").matchConditions).toEqual([
      notOperatorPodCreate("kwok-admin"),
      STATUS_CHANGES_METADATA,
    ]);
    expect(forOperator(sandboxes, "kwok-admin")).toBe(sandboxes);
    // A name with a quote stays one CEL string literal.
    expect(notOperatorPodCreate('a"b').expression).toContain('!= "a\\"b"');
  });

  it("leaves a configuration of Sandbox rules alone but for the spec condition (the mutating one)", () => {
    const mutating = scopeWebhooks(generated("MutatingWebhookConfiguration", [sandboxRule]));
    expect(mutating.webhooks).toHaveLength(1);
    expect(mutating.webhooks[0].matchConditions).toEqual([SPEC_CHANGED]);
  });

  it("refuses a rule it has no scope for, naming it", () => {
    const deployments = {
      apiGroups: ["apps"],
      apiVersions: ["v1"],
      operations: ["CREATE"],
      resources: ["deployments"],
    };
    expect(() => scopeWebhooks(generated("ValidatingWebhookConfiguration", [deployments]))).toThrow(
      /rules for deployments have no scope in scripts\/webhooks.ts/,
    );
  });

  it("is idempotent: scoping a scoped configuration changes nothing", () => {
    expect(scopeWebhooks(validating)).toEqual(validating);
  });
});

describe("scopeManifest", () => {
  it("scopes the webhook configurations and leaves every other document as it was", () => {
    const yaml = [
      "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: pepr-system\n",
      JSON.stringify(generated("ValidatingWebhookConfiguration", [sandboxRule, podCreate])),
    ].join("---\n");
    const docs = parseAllDocuments(scopeManifest(yaml)).map((d) => d.toJS());
    expect(docs[0]).toEqual({ apiVersion: "v1", kind: "Namespace", metadata: { name: "pepr-system" } });
    expect(docs[1].webhooks.map((w: { name: string }) => w.name)).toEqual([
      "sandboxes.pepr-x.pepr.dev",
      "pods.pepr-x.pepr.dev",
      "connect.pepr-x.pepr.dev",
    ]);
  });

  const built = [
    JSON.stringify(generated("ValidatingWebhookConfiguration", [sandboxRule, podCreate])),
    // A configuration left with no webhook (no capability mutates) is dropped, not applied empty.
    JSON.stringify({ ...generated("MutatingWebhookConfiguration", []), webhooks: [] }),
  ].join("---\n");

  it("adds the Sandbox defaults policy and its binding, scoped as the Sandbox webhook, and drops an empty configuration", () => {
    const docs = parseAllDocuments(scopeManifest(built)).map((d) => d.toJS());
    expect(docs.map((d) => d.kind)).toEqual([
      "ValidatingWebhookConfiguration",
      "MutatingAdmissionPolicy",
      "MutatingAdmissionPolicyBinding",
    ]);
    expect(docs[1]).toEqual(sandboxDefaultsPolicy());
    expect(docs[1].spec.matchConditions).toContainEqual(SPEC_CHANGED);
    expect(docs[2].spec.policyName).toBe(SANDBOX_DEFAULTS);
    expect(docs[2].spec.matchResources.namespaceSelector).toEqual(docs[0].webhooks[0].namespaceSelector);
  });

  it("is idempotent: the policy is written once however often the build is post-processed", () => {
    const once = scopeManifest(built);
    expect(scopeManifest(once)).toBe(once);
  });

  it("refuses to scope the binding when the build has no Sandbox webhook", () => {
    expect(() => ignoredNamespaces([generated("ValidatingWebhookConfiguration", [podCreate])])).toThrow(
      /no Sandbox webhook/,
    );
  });
});

describe("sandboxDefaultsChartTemplate", () => {
  const out = sandboxDefaultsChartTemplate(["kube-system", "pepr-system"]);

  it("skips the chart's additionalIgnoredNamespaces, as the webhooks' templates do", () => {
    expect(out).toContain(
      "            {{- range .Values.additionalIgnoredNamespaces }}\n            - {{ . }}\n            {{- end }}\n            - kube-system\n",
    );
  });

  it("renders, with values filled in, to the policy and its binding", () => {
    const rendered = out.replace(/ *\{\{- range [^}]*\}\}\n\s*- \{\{ \. \}\}\n\s*\{\{- end \}\}\n/g, "");
    const [policy, binding] = parseAllDocuments(rendered).map((d) => d.toJS());
    expect(policy).toEqual(sandboxDefaultsPolicy());
    expect(binding.spec.matchResources.namespaceSelector.matchExpressions[0].values).toEqual([
      "kube-system",
      "pepr-system",
    ]);
  });
});

describe("scopeChartTemplate", () => {
  // The shape Pepr's chart writes: Go template expressions inside YAML, a range over a list.
  const template = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {{ .Values.uuid }}
webhooks:
  - admissionReviewVersions:
      - v1
    clientConfig:
      service:
        name: {{ .Values.uuid }}
        namespace: pepr-system
        path: >-
          /validate/abc
    failurePolicy: {{ .Values.admission.failurePolicy }}
    name: {{ .Values.uuid }}.pepr.dev
    namespaceSelector:
      matchExpressions:
        - key: kubernetes.io/metadata.name
          operator: NotIn
          values:
            - kube-system
            {{- range .Values.additionalIgnoredNamespaces }}
            - {{ . }}
            {{- end }}
            - pepr-system
    rules:
      - apiGroups:
          - core.jr2.dev
        apiVersions:
          - v1alpha1
        operations:
          - CREATE
          - UPDATE
        resources:
          - sandboxes
      - apiGroups:
          - ''
        apiVersions:
          - v1
        operations:
          - CREATE
        resources:
          - pods
    sideEffects: None
    timeoutSeconds: {{ .Values.admission.webhookTimeout }}
`;
  const out = scopeChartTemplate(template, "Q0EtT0Y=");

  it("keeps every Helm expression, the range block whole at its list's indentation", () => {
    expect(out).toContain("  name: {{ .Values.uuid }}\n");
    expect(out).toContain("name: sandboxes.{{ .Values.uuid }}.pepr.dev");
    expect(out).toContain("name: pods.{{ .Values.uuid }}.pepr.dev");
    expect(out).toContain("name: connect.{{ .Values.uuid }}.pepr.dev");
    expect(out.match(/failurePolicy: \{\{ \.Values\.admission\.failurePolicy \}\}/g)).toHaveLength(3);
    expect(out.match(/timeoutSeconds: \{\{ \.Values\.admission\.webhookTimeout \}\}/g)).toHaveLength(3);
    expect(out).toContain(
      "            {{- range .Values.additionalIgnoredNamespaces }}\n            - {{ . }}\n            {{- end }}\n",
    );
    expect(out).not.toMatch(/__jr2_\d+__/);
    expect(out).not.toMatch(/&a\d|\*a\d/); // no YAML anchors: Helm users read these files
  });

  it("trusts the manifest's CA bundle, whatever bundle the template carried", () => {
    expect(out.match(/^ +caBundle: Q0EtT0Y=$/gm)).toHaveLength(3);
    // Pepr 1.1.4 templates the timeout by replacing "10" everywhere, inside the bundle too.
    const caBundle = "TFMwdExTMUNSVWQ10pUaUJEUlZKVQ==";
    const corrupted = template.replace(
      "    clientConfig:\n",
      `    clientConfig:\n      caBundle: ${caBundle.replace("10", "{{ .Values.admission.webhookTimeout }}")}\n`,
    );
    expect(corrupted).toContain("VWQ{{ .Values.admission.webhookTimeout }}pUa");
    const fixed = scopeChartTemplate(corrupted, caBundle);
    expect(fixed.match(/^ +caBundle: (.*)$/gm)).toEqual(Array(3).fill(`      caBundle: ${caBundle}`));
    expect(fixed.match(/timeoutSeconds: \{\{ \.Values\.admission\.webhookTimeout \}\}/g)).toHaveLength(3);
  });

  it("renders, with values filled in, to the scoped webhooks", () => {
    const rendered = out
      .replace(/\{\{- range [^}]*\}\}\n\s*- \{\{ \. \}\}\n\s*\{\{- end \}\}\n/g, "")
      .replaceAll("{{ .Values.uuid }}", "pepr-x")
      .replaceAll("{{ .Values.admission.failurePolicy }}", "Fail")
      .replaceAll("{{ .Values.admission.webhookTimeout }}", "10");
    const doc = parseAllDocuments(rendered)[0].toJS() as WebhookConfiguration;
    expect(doc.webhooks.map((w) => w.name)).toEqual([
      "sandboxes.pepr-x.pepr.dev",
      "pods.pepr-x.pepr.dev",
      "connect.pepr-x.pepr.dev",
    ]);
    expect(doc.webhooks[2].rules).toEqual([POD_CONNECT_RULE]);
    expect(doc.webhooks[2].failurePolicy).toBe("Fail");
    expect(doc.webhooks[0].matchConditions).toEqual([SPEC_CHANGED]);
    expect(doc.webhooks[1].objectSelector).toEqual(SANDBOX_PODS);
    expect(doc.webhooks[1].matchConditions).toEqual([notOperatorPodCreate(DEPLOYED_OPERATOR), STATUS_CHANGES_METADATA]);
    expect(doc.webhooks[1].rules).toContainEqual(POD_STATUS_RULE);
    expect(doc.webhooks[1].failurePolicy).toBe("Fail");
  });
});
