// The whole installation's chart as scripts/helm-chart.ts writes it (decision 0060), on a module
// manifest of the shape `pepr build` writes and the companions' own builders: where each object
// goes, which fields become values, and what it refuses. Rendering it with helm is
// test/node/helm-chart.test.ts's.
import { parseAllDocuments } from "yaml";
import { cacheAgentManifests } from "../../cache-agent/cache-agent-manifests";
import { egressManifests } from "../../egress/egress-manifests";
import { orchestratorManifests } from "../../orchestrator/orchestrator-manifests";
import { type ChartInput, crdsChart, helmChart } from "../../scripts/helm-chart";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;

const uuid = "0000-test";
const name = `pepr-${uuid}`;
const CONTROLLER = "jr2/controller:0.1.0";
const COMPANIONS = "jr2/companions:0.1.0";
const b64 = (s: string) => Buffer.from(s).toString("base64");
const API_PATH = "f".repeat(64);
const deployment = (n: string, image = CONTROLLER) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: n, namespace: "pepr-system" },
  spec: {
    replicas: n === name ? 2 : 1,
    template: {
      metadata: { annotations: { buildTimestamp: "1" } },
      spec: { containers: [{ name: "server", image, resources: { requests: { cpu: "200m" } } }] },
    },
  },
});
const moduleObjects = (): Obj[] => [
  {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: "sandboxes.core.jr2.dev" },
  },
  { apiVersion: "v1", kind: "Namespace", metadata: { name: "pepr-system", labels: { "pepr.dev": "" } } },
  {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: "jr2-sandboxes", labels: { "jr2.dev/sandboxes": "enabled" } },
  },
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
    data: { "tls.crt": b64("BUILT CRT"), "tls.key": b64("BUILT KEY") },
  },
  deployment(`${name}-watcher`),
  deployment(name),
  {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingWebhookConfiguration",
    metadata: { name },
    webhooks: [
      {
        name: `sandboxes.${name}.pepr.dev`,
        clientConfig: {
          caBundle: b64("BUILT CA"),
          service: { name, namespace: "pepr-system", path: `/validate/${API_PATH}` },
        },
        namespaceSelector: {
          matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "NotIn", values: ["kube-system"] }],
        },
        rules: [
          {
            apiGroups: ["core.jr2.dev"],
            apiVersions: ["v1alpha1"],
            operations: ["CREATE", "UPDATE"],
            resources: ["sandboxes"],
          },
        ],
      },
    ],
  },
  {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingAdmissionPolicy",
    metadata: { name: "jr2-sandbox-defaults" },
  },
];
const input = (over: Partial<ChartInput> = {}): ChartInput => ({
  uuid,
  version: "0.1.0",
  description: "test",
  module: moduleObjects(),
  cacheAgent: cacheAgentManifests({ image: COMPANIONS, sandboxNamespaces: ["jr2-sandboxes"] }),
  orchestrator: orchestratorManifests({ image: COMPANIONS }),
  egress: egressManifests({ image: COMPANIONS, sandboxNamespaces: ["jr2-sandboxes"] }),
  controllerImage: CONTROLLER,
  companionsImage: COMPANIONS,
  ...over,
});

/** A chart's text files (the module's code is its one binary file). */
const texts = (files: Map<string, string | Buffer>) =>
  new Map([...files].filter((e): e is [string, string] => typeof e[1] === "string"));

test("the CRDs are their own chart's crds/; each Namespace once, with every builder's labels", () => {
  const files = texts(helmChart(input()));
  for (const [f, text] of files) expect([f, text.includes("CustomResourceDefinition")]).toEqual([f, false]);
  const crds = crdsChart(input());
  expect([...crds.keys()].sort()).toEqual(["Chart.yaml", "crds/sandboxes.core.jr2.dev.yaml"]);
  const namespaces = files.get("templates/namespaces.yaml")!;
  expect(namespaces.match(/^kind: Namespace$/gm)?.length).toBe(3);
  // jr2-sandboxes: named by the module and all three companions, once.
  const sandboxes = namespaces.split("---\n").find((d) => d.includes("name: jr2-sandboxes"))!;
  expect(sandboxes).toContain("jr2.dev/sandboxes: enabled");
  expect(sandboxes).toContain("app.kubernetes.io/instance: {{ .Release.Name | quote }}");
});

test("the module's code is the chart's one binary file, rendered into its Secret", () => {
  const withCode = [
    ...moduleObjects(),
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: `${name}-module`, namespace: "pepr-system" },
      data: { "module-abc.js.gz": b64("GZIPPED CODE") },
    },
  ];
  const files = helmChart(input({ module: withCode }));
  expect(files.get("files/module-abc.js.gz")).toEqual(Buffer.from("GZIPPED CODE"));
  expect(files.get("templates/module.yaml")).toContain(
    'module-abc.js.gz: {{ .Files.Get "files/module-abc.js.gz" | b64enc }}',
  );
  expect(files.get("templates/module.yaml")).not.toContain(b64("GZIPPED CODE"));
});

test("no template holds the build's certificate, key, CA or path: the keeper makes them in the cluster (decision 0075)", () => {
  const files = texts(helmChart(input()));
  for (const [f, text] of files)
    for (const literal of [b64("BUILT CRT"), b64("BUILT KEY"), b64("BUILT CA"), API_PATH, b64(API_PATH)])
      expect([f, text.includes(literal)]).toEqual([f, false]);
  const module = files.get("templates/module.yaml")!;
  expect(module).not.toContain("caBundle");
  expect(module).not.toContain(`name: ${name}-tls\n`);
  expect(module).not.toContain("lookup");
});

test("images, resources, placement and replicas become values whose defaults are the objects' own", () => {
  const files = texts(helmChart(input()));
  const values = parseAllDocuments(files.get("values.yaml")!)[0].toJS() as Obj;
  expect(values.images).toEqual({ controller: CONTROLLER, companions: COMPANIONS });
  expect(values.admission).toMatchObject({ replicas: 2, defaults: "policy", resources: { requests: { cpu: "200m" } } });
  expect(values.cacheAgent.tolerations).toEqual([{ operator: "Exists" }]);
  expect(values.orchestrator.resources).toEqual(
    (orchestratorManifests({ image: COMPANIONS }).find((o: Obj) => o.kind === "Deployment") as Obj).spec.template.spec
      .containers[0].resources,
  );
  expect(values.podConfig).toEqual({});
  expect(values.fence).toEqual([]);
  const orchestrator = files.get("templates/orchestrator.yaml")!;
  expect(orchestrator).not.toContain(COMPANIONS);
  expect(orchestrator.match(/\{\{ \.Values\.images\.companions \| quote \}\}/g)?.length).toBe(2);
  expect(orchestrator).toContain(
    "{{- with (merge (dict) .Values.orchestrator.nodeSelector .Values.placement.nodeSelector) }}",
  );
  expect(files.get("templates/cache-agent.yaml")).toContain("{{- with .Values.cacheAgent.tolerations }}");
  expect(files.get("templates/module.yaml")).toContain("replicas: {{ .Values.admission.replicas }}");
  expect(files.get("templates/sandbox-defaults.yaml")).toMatch(
    /^\{\{- if eq \.Values\.admission\.defaults "policy" \}\}\n/,
  );
  // The other way, for 1.34 and 1.35 (decision 0059): the module's mutating webhook, its CA and
  // path written in the cluster like the validating one's (decision 0075).
  const webhook = files.get("templates/sandbox-defaults-webhook.yaml")!;
  expect(webhook).toMatch(/^\{\{- if eq \.Values\.admission\.defaults "webhook" \}\}\n/);
  expect(webhook).toContain("kind: MutatingWebhookConfiguration");
  expect(webhook).not.toContain("caBundle");
  expect(webhook).not.toContain(b64("BUILT CA"));
});

test("a build that writes the defaults by webhook makes webhook the chart's default, the policy still a choice", () => {
  const webhookBuild = moduleObjects().filter((o) => o.kind !== "MutatingAdmissionPolicy");
  const files = texts(helmChart(input({ module: webhookBuild })));
  const values = parseAllDocuments(files.get("values.yaml")!)[0].toJS() as Obj;
  expect(values.admission.defaults).toBe("webhook");
  expect(files.get("templates/sandbox-defaults.yaml")).toContain("kind: MutatingAdmissionPolicy");
  expect(files.get("templates/sandbox-defaults-webhook.yaml")).toContain("kind: MutatingWebhookConfiguration");
});

test("it refuses a workload that runs another image than the build's, an unknown Deployment, an object made twice", () => {
  const other = moduleObjects().map((o) =>
    o.kind === "Deployment" && o.metadata.name === name ? deployment(name, "other/image:1") : o,
  );
  expect(() => helmChart(input({ module: other }))).toThrow(
    /runs other\/image:1, not the build's jr2\/controller:0\.1\.0/,
  );
  expect(() => helmChart(input({ module: [...moduleObjects(), deployment("stray")] }))).toThrow(/unknown Deployment/);
  const twice = orchestratorManifests({ image: COMPANIONS });
  expect(() =>
    helmChart(
      input({
        egress: [
          ...egressManifests({ image: COMPANIONS, sandboxNamespaces: ["jr2-sandboxes"] }),
          twice.find((o: Obj) => o.kind === "Service")!,
        ],
      }),
    ),
  ).toThrow(/made twice/);
});

// Decision 0066: the internal git hosts the installation vouches for are the chart's value, and
// no template or value carries the local mode's switch.
test("the cache agent's vouched hosts are a value; the chart never carries the local mode's switch", () => {
  const files = texts(
    helmChart(
      input({
        cacheAgent: cacheAgentManifests({
          image: COMPANIONS,
          sandboxNamespaces: ["jr2-sandboxes"],
          vouchedHosts: ["git.internal:9418"],
        }),
      }),
    ),
  );
  const values = parseAllDocuments(files.get("values.yaml")!)[0].toJS() as Obj;
  expect(values.cacheAgent.vouchedHosts).toEqual(["git.internal:9418"]);
  expect(files.get("templates/cache-agent.yaml")).toContain(
    'value: {{ join "," .Values.cacheAgent.vouchedHosts | quote }}',
  );
  expect(files.get("templates/cache-agent.yaml")).toContain("value: jr2-sandboxes");
  for (const [f, text] of files) expect([f, text.includes("JR2_LOCAL_REPO_ROOTS")]).toEqual([f, false]);
});
