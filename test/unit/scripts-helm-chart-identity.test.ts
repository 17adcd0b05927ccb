// The chart's identity parts (scripts/helm-chart-identity.ts, decision 0075): no file of the chart
// holds a private key, a certificate, a signing key or Pepr's API path; the keeper's Job is a hook
// Helm and Argo CD both run, its RBAC names each object it touches; cert-manager's Certificate and
// cainjector annotation when the values ask. Rendering with helm is test/node/helm-chart.test.ts's;
// no cert-manager runs in any tier, so its objects are checked as text here.
import { parseAllDocuments } from "yaml";
import { cacheAgentManifests } from "../../cache-agent/cache-agent-manifests";
import { egressManifests } from "../../egress/egress-manifests";
import { orchestratorManifests } from "../../orchestrator/orchestrator-manifests";
import { servingCertificate } from "../../lib/serving-certificate";
import { helmChart } from "../../scripts/helm-chart";
import { KEEPER, SIGNING_KEY_SECRET, backupSecrets, identityWebhook } from "../../scripts/helm-chart-identity";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;

const uuid = "0000-test";
const name = `pepr-${uuid}`;
const IMAGE = "jr2/companions:0.1.0";
const b64 = (s: string) => Buffer.from(s).toString("base64");
const API_PATH = "e".repeat(64);
const built = servingCertificate({ dnsNames: [`${name}.pepr-system.svc`] });
const deployment = (n: string) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: n, namespace: "pepr-system" },
  spec: {
    replicas: 1,
    selector: { matchLabels: { app: n } },
    template: { spec: { containers: [{ name: "server", image: "jr2/controller:0.1.0" }] } },
  },
});
const webhookConfig = (kind: string, verb: string) => ({
  apiVersion: "admissionregistration.k8s.io/v1",
  kind,
  metadata: { name },
  webhooks: [
    {
      name: `sandboxes.${name}.pepr.dev`,
      clientConfig: {
        caBundle: b64(built.caPem),
        service: { name, namespace: "pepr-system", path: `/${verb}/${API_PATH}` },
      },
      namespaceSelector: {
        matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system"] }],
      },
      rules: [
        { apiGroups: ["core.jr2.dev"], apiVersions: ["v1alpha1"], operations: ["CREATE"], resources: ["sandboxes"] },
      ],
    },
  ],
});
const moduleObjs = (): Obj[] => [
  { apiVersion: "v1", kind: "Namespace", metadata: { name: "pepr-system" } },
  {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: `${name}-api-path`, namespace: "pepr-system" },
    data: { value: b64(API_PATH) },
  },
  {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: `${name}-tls`, namespace: "pepr-system" },
    data: { "tls.crt": b64(built.certPem), "tls.key": b64(built.keyPem) },
  },
  deployment(name),
  deployment(`${name}-watcher`),
  webhookConfig("ValidatingWebhookConfiguration", "validate"),
  {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingAdmissionPolicy",
    metadata: { name: "jr2-sandbox-defaults" },
  },
];
const files = new Map(
  [
    ...helmChart({
      uuid,
      version: "0.1.0",
      description: "test",
      module: moduleObjs(),
      cacheAgent: cacheAgentManifests({ image: IMAGE, sandboxNamespaces: ["jr2-sandboxes"] }),
      orchestrator: orchestratorManifests({ image: IMAGE, workspaceNamespace: "jr2-sandboxes" }),
      egress: egressManifests({ image: IMAGE, sandboxNamespaces: ["jr2-sandboxes"] }),
      controllerImage: "jr2/controller:0.1.0",
      companionsImage: IMAGE,
      sandboxNamespaces: ["jr2-sandboxes"],
    }),
  ].filter((e): e is [string, string] => typeof e[1] === "string"),
);
/** A template's documents, the Helm actions stripped (enough to read the fixed fields). */
const docs = (file: string): Obj[] =>
  parseAllDocuments(
    files
      .get(file)!
      .replace(/^\s*\{\{-?[^}]*\}\}\s*$/gm, "")
      .replace(/\{\{[^}]*\}\}/g, "X"),
  )
    .map((d) => d.toJS())
    .filter(Boolean);

it("no file of the chart holds a PEM block, the build's pair or CA, a signing key or the API path", () => {
  const pairs = [built.certPem, built.keyPem, built.caPem].flatMap((p) => [p, b64(p), p.split("\n")[1]!]);
  for (const [f, text] of files) {
    expect([f, /-----BEGIN [A-Z ]+-----/.test(text)]).toEqual([f, false]);
    for (const literal of [...pairs, API_PATH, b64(API_PATH)]) expect([f, text.includes(literal)]).toEqual([f, false]);
    expect([f, /signingKey|signing-key: \{\{|randAlphaNum|lookup /.test(text)]).toEqual([f, false]);
  }
  const values = parseAllDocuments(files.get("values.yaml")!)[0]!.toJS() as Obj;
  expect(values.orchestrator).not.toHaveProperty("signingKey");
  expect(values.admission.certificate).toEqual({ source: "cluster", certManager: { issuerRef: {} } });
  expect(values.admission).not.toHaveProperty("renewCertificate");
});

it("the webhooks name neither a caBundle nor a path: a field no template sets survives helm upgrade", () => {
  const text = files.get("templates/module.yaml")!;
  const hook = text.split("---\n").find((d) => d.includes("kind: ValidatingWebhookConfiguration"))!;
  expect(hook).not.toMatch(/caBundle|path:/);
  expect(hook).toContain(`{{- with (include "jr2.admission.webhookAnnotations" . | fromYaml) }}`);
  expect(files.get("templates/_identity.tpl")).toContain(`cert-manager.io/inject-ca-from: pepr-system/${name}`);
  const wrongPath = webhookConfig("ValidatingWebhookConfiguration", "mutate");
  expect(() => identityWebhook(wrongPath, API_PATH, { scalar: (e) => e, block: (e) => e })).toThrow(
    /is on \/mutate\/e+, not Pepr's \/validate\//,
  );
  // The module's identity Secrets are the keeper's: the chart makes neither.
  expect(text).not.toContain(`name: ${name}-tls`);
  expect(text).not.toContain(`name: ${name}-api-path`);
});

it("the Orchestrator reads its tokens from the chart's Secret and its key from the keeper's, or both from existingSecret", () => {
  const secret = files.get("templates/orchestrator-secret.yaml")!;
  expect(secret).toContain("api-tokens:");
  expect(secret).not.toMatch(/^\s+signing-key:/m);
  const orchestrator = files.get("templates/orchestrator.yaml")!;
  expect(orchestrator).toContain(
    `name: {{ .Values.orchestrator.existingSecret | default "${SIGNING_KEY_SECRET}" | quote }}`,
  );
  expect(orchestrator).toContain(
    `name: {{ .Values.orchestrator.existingSecret | default "jr2-orchestrator" | quote }}`,
  );
  expect(orchestrator).toMatch(/projected:\n\s+defaultMode: 288/);
});

it("the keeper: a plain Job at install and each upgrade that changes what it keeps, a daily CronJob, RBAC by name", () => {
  const objs = docs("templates/keeper.yaml");
  const of = (kind: string, ns?: string) =>
    objs.filter((o) => o.kind === kind && (ns === undefined || o.metadata.namespace === ns));
  const job = of("Job")[0];
  // No hook: `helm install --wait` waits for the pods this Job lets start (decision 0075).
  expect(job.metadata.annotations).toBeUndefined();
  expect(job.metadata.name).toMatch(new RegExp(`^${KEEPER}-`));
  expect(of("CronJob")[0].spec).toMatchObject({ schedule: "17 3 * * *", concurrencyPolicy: "Forbid" });
  const pod = files.get("templates/_identity.tpl")!;
  expect(pod).toContain(`command: ["node", "/app/keeper.js"]`);
  expect(pod).toContain("readOnlyRootFilesystem: true");
  expect(pod).toContain(`serviceAccountName: ${KEEPER}`);
  // Every rule but Secret creation names its objects.
  const [inModule, system] = [of("Role", "pepr-system")[0], of("Role", "jr2-system")[0]];
  const clusterRole = of("ClusterRole")[0];
  for (const r of [...inModule.rules, ...system.rules, ...clusterRole.rules])
    if (!(r.resources[0] === "secrets" && r.verbs.join() === "create"))
      expect([r, r.resourceNames?.length > 0]).toEqual([r, true]);
  expect(inModule.rules[0].resourceNames).toEqual([`${name}-tls`, `${name}-ca`, `${name}-api-path`]);
  expect(inModule.rules[2]).toEqual({
    apiGroups: ["apps"],
    resources: ["deployments"],
    resourceNames: [name, `${name}-watcher`],
    verbs: ["get", "patch"],
  });
  expect(clusterRole.rules).toEqual([
    {
      apiGroups: ["admissionregistration.k8s.io"],
      resources: ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
      resourceNames: [name],
      verbs: ["get", "patch"],
    },
  ]);
  expect(files.get("templates/keeper.yaml")).toContain(
    `resourceNames: [{{ .Values.orchestrator.existingSecret | default "${SIGNING_KEY_SECRET}" | quote }}]`,
  );
});

it("certManager: a self-signed CA chain unless an issuer is given, a Certificate writing the TLS Secret", () => {
  const text = files.get("templates/admission-certificate.yaml")!;
  expect(text).toMatch(/^\{\{- if eq \.Values\.admission\.certificate\.source "certManager" \}\}/);
  expect(text).toContain("selfSigned: {}");
  expect(text).toContain(`secretName: ${name}-tls`);
  expect(text).toContain(`secretName: ${name}-ca`);
  expect(text).toContain(`dnsNames: ["${name}.pepr-system.svc","${name}-watcher.pepr-system.svc"]`);
  expect(text).toContain("{{- toYaml $issuer | nindent 4 }}");
});

it("the Secrets to back up: the signing key and the admission CA", () => {
  expect(backupSecrets(uuid).map((s) => `${s.namespace}/${s.name}`)).toEqual([
    `jr2-system/${SIGNING_KEY_SECRET}`,
    `pepr-system/${name}-ca`,
  ]);
});
