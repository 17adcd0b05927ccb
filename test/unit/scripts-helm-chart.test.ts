// The whole installation's chart as scripts/helm-chart.ts writes it (decision 0060), on a module
// manifest of the shape `pepr build` writes and the companions' own builders: where each object
// goes, which fields become values, and what it refuses. Rendering it with helm is
// test/node/helm-chart.test.ts's.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { helmBin } from "../../dev/helm";
import { EXTERNAL_METRICS, PREFLIGHT_PROBE, alertRules } from "../../scripts/helm-chart-operable";
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
    selector: { matchLabels: { app: n } },
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
  orchestrator: orchestratorManifests({ image: COMPANIONS, workspaceNamespace: "jr2-sandboxes" }),
  egress: egressManifests({ image: COMPANIONS, sandboxNamespaces: ["jr2-sandboxes"] }),
  controllerImage: CONTROLLER,
  companionsImage: COMPANIONS,
  sandboxNamespaces: ["jr2-sandboxes"],
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
  const sandboxes = namespaces.split("---\n").find((d) => d.includes("name: {{ $ns | quote }}"))!;
  expect(sandboxes).toContain("jr2.dev/sandboxes: enabled");
  expect(sandboxes).toContain("app.kubernetes.io/instance: {{ $.Release.Name | quote }}");
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
  expect(values.admission).toMatchObject({ replicas: 2, defaults: "auto", resources: { requests: { cpu: "200m" } } });
  expect(values.cacheAgent.tolerations).toEqual([{ operator: "Exists" }]);
  expect(values.orchestrator.resources).toEqual(
    (orchestratorManifests({ image: COMPANIONS }).find((o: Obj) => o.kind === "Deployment") as Obj).spec.template.spec
      .containers[0].resources,
  );
  expect(values.podConfig).toEqual({});
  expect(values.fence).toEqual([]);
  const orchestrator = files.get("templates/orchestrator.yaml")!;
  expect(orchestrator).not.toContain(COMPANIONS);
  // Twice in each of its two Deployments, with and without a TLS Secret.
  expect(orchestrator.match(/\{\{ \.Values\.images\.companions \| quote \}\}/g)?.length).toBe(4);
  expect(orchestrator).toContain(
    "{{- with (merge (dict) .Values.orchestrator.nodeSelector .Values.placement.nodeSelector) }}",
  );
  expect(files.get("templates/cache-agent.yaml")).toContain("{{- with .Values.cacheAgent.tolerations }}");
  expect(files.get("templates/module.yaml")).toContain("replicas: {{ .Values.admission.replicas }}");
  expect(files.get("templates/sandbox-defaults.yaml")).toMatch(
    /^\{\{- if eq \(include "jr2\.admission\.defaults" \.\) "policy" \}\}\n/,
  );
  // The other way, for 1.34 and 1.35 (decision 0059): the module's mutating webhook, its CA and
  // path written in the cluster like the validating one's (decision 0075).
  const webhook = files.get("templates/sandbox-defaults-webhook.yaml")!;
  expect(webhook).toMatch(/^\{\{- if eq \(include "jr2\.admission\.defaults" \.\) "webhook" \}\}\n/);
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
  expect(files.get("templates/cache-agent.yaml")).toContain('value: {{ join "," $.Values.sandboxNamespaces | quote }}');
  for (const [f, text] of files) expect([f, text.includes("JR2_LOCAL_REPO_ROOTS")]).toEqual([f, false]);
});

// Decision 0074: the chart rendered by helm (dev/helm.sh, built from its pinned module): the values
// schema refusing each typical mistake by its field, 1.34 and 1.36 renders, the install-time values.
describe("rendered by helm", () => {
  let dir = "";
  const helm = helmBin();
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "jr2-chart-"));
    for (const [f, content] of helmChart(input({ sandboxNamespaces: ["jr2-sandboxes"] }))) {
      mkdirSync(join(dir, f, ".."), { recursive: true });
      writeFileSync(join(dir, f), content);
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const run = (verb: "template" | "lint", ...args: string[]) =>
    spawnSync(helm, verb === "template" ? ["template", "jr2", dir, ...args] : ["lint", dir, ...args], {
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    });
  const render = (...args: string[]): Obj[] => {
    const r = run("template", ...args);
    if (r.status !== 0) throw new Error(r.stderr);
    return parseAllDocuments(r.stdout)
      .map((d) => d.toJS() as Obj)
      .filter(Boolean);
  };
  const kinds = (docs: Obj[]) => docs.map((d) => d.kind);

  it("writes the Sandbox defaults by webhook for 1.34, by the policy where 1.36 serves it; policy or webhook override", () => {
    const v134 = render("--kube-version", "1.34.2");
    expect(kinds(v134)).toContain("MutatingWebhookConfiguration");
    expect(kinds(v134)).not.toContain("MutatingAdmissionPolicy");
    const v136 = render(
      "--kube-version",
      "1.36.0",
      "--api-versions",
      "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
    );
    expect(kinds(v136)).toContain("MutatingAdmissionPolicy");
    expect(kinds(v136)).not.toContain("MutatingWebhookConfiguration");
    expect(kinds(render("--kube-version", "1.34.2", "--set", "admission.defaults=policy"))).toContain(
      "MutatingAdmissionPolicy",
    );
    expect(kinds(render("--kube-version", "1.36.0", "--set", "admission.defaults=webhook"))).not.toContain(
      "MutatingAdmissionPolicy",
    );
  });

  it("the egress point: its replicas and budget values, a budget not below the replicas refused; its admin port and the Orchestrator's metrics port open to the monitoring namespaces alone", () => {
    const egress = (docs: Obj[]) => docs.find((d) => d.kind === "Deployment" && d.metadata.name === "jr2-egress");
    const budget = (docs: Obj[]) =>
      docs.filter((d) => d.kind === "PodDisruptionBudget" && d.metadata.name === "jr2-egress");
    const docs = render();
    expect(egress(docs).spec.replicas).toBe(2);
    expect(budget(docs).map((d) => d.spec.minAvailable)).toEqual([1]);
    expect(egress(render("--set", "egress.replicas=3")).spec.replicas).toBe(3);
    expect(budget(render("--set", "egress.replicas=1", "--set", "egress.podDisruptionBudget=null"))).toEqual([]);
    const tooMany = run("template", "--set", "egress.replicas=1");
    expect([tooMany.status, tooMany.stderr]).toEqual([
      1,
      expect.stringContaining("egress.podDisruptionBudget.minAvailable (1) must be below egress.replicas (1)"),
    ]);
    // No monitoring namespace: no rule (an empty from would admit everyone); one: that namespace alone.
    const policy = (docs: Obj[], n: string) => docs.find((d) => d.kind === "NetworkPolicy" && d.metadata.name === n);
    const monitoringRules = (docs: Obj[], n: string, port: string) =>
      policy(docs, n).spec.ingress.filter(
        (r: Obj) =>
          r.ports?.some((p: Obj) => p.port === port) &&
          r.from?.some((f: Obj) => f.namespaceSelector?.matchLabels?.["kubernetes.io/metadata.name"] === "mon"),
      );
    expect(monitoringRules(docs, "jr2-egress-ingress", "admin")).toEqual([]);
    const mon = render("--set-json", 'monitoring.namespaces=["mon"]');
    expect(monitoringRules(mon, "jr2-egress-ingress", "admin")).toHaveLength(1);
    expect(monitoringRules(mon, "jr2-orchestrator-api", "metrics")).toHaveLength(1);
    expect(policy(mon, "jr2-egress-ingress").spec.ingress.length).toBe(
      policy(docs, "jr2-egress-ingress").spec.ingress.length + 1,
    );
  });

  it("makes each Sandbox namespace's objects once per namespace the value names, and the env and policies name them", () => {
    const docs = render("--set-json", 'sandboxNamespaces=["team-a","team-b"]');
    const inNs = (ns: string) =>
      docs
        .filter((d) => (d.kind === "Namespace" ? d.metadata.name : d.metadata.namespace) === ns)
        .map((d) => `${d.kind}/${d.metadata.name}`)
        .sort();
    // Each namespace's own; the Orchestrator's rights in the first alone, where its workspaces are.
    expect(inNs("team-a").map((k) => k.replace("team-a", "*"))).toEqual(
      inNs("team-b")
        .map((k) => k.replace("team-b", "*"))
        .concat("RoleBinding/jr2-orchestrator-sandboxes")
        .sort(),
    );
    expect(inNs("team-a")).toEqual(expect.arrayContaining(["Namespace/team-a", "RoleBinding/jr2-egress"]));
    expect(docs.find((d) => d.kind === "Namespace" && d.metadata.name === "team-a").metadata.labels).toMatchObject({
      "jr2.dev/sandboxes": "enabled",
    });
    expect(inNs("jr2-sandboxes")).toEqual([]);
    const env = (name: string) =>
      docs
        .filter((d) => d.kind === "Deployment" || d.kind === "DaemonSet")
        .flatMap((d) => d.spec.template.spec.containers.flatMap((c: Obj) => c.env ?? []))
        .filter((e: Obj) => e.name === name)
        .map((e: Obj) => e.value);
    expect(env("JR2_SANDBOX_NAMESPACES")).toEqual(["team-a,team-b", "team-a,team-b"]);
    expect(env("JR2_NAMESPACE")).toEqual(["team-a"]);
  });

  it("serves the API over TLS with the named Secret, and admits the callers the value names", () => {
    const docs = render(
      "--set",
      "orchestrator.tls.secretName=jr2-api-tls",
      "--set-json",
      'orchestrator.callers={"namespaces":["ci"],"podSelectors":[{"namespace":"tools","matchLabels":{"app":"bot"}}],"ingress":{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ingress"}}}}',
      "--set-json",
      'monitoring.namespaces=["monitoring"]',
    );
    const deployments = docs.filter((d) => d.kind === "Deployment" && d.metadata.name === "jr2-orchestrator");
    expect(deployments).toHaveLength(1);
    const pod = deployments[0].spec.template.spec;
    expect(pod.volumes).toContainEqual({ name: "tls", secret: { secretName: "jr2-api-tls", defaultMode: 0o440 } });
    expect(pod.containers[0].readinessProbe.httpGet.scheme).toBe("HTTPS");
    // Its replicas forward to each other over the same TLS (decision 0079).
    expect(pod.containers[0].env).toContainEqual({ name: "JR2_PEER_URL", value: "https://$(POD_IP):8090" });
    const policy = docs.find((d) => d.kind === "NetworkPolicy" && d.metadata.name === "jr2-orchestrator-api");
    const ns = (n: string) => ({ matchLabels: { "kubernetes.io/metadata.name": n } });
    expect(policy.spec.ingress[0].ports).toEqual([{ protocol: "TCP", port: 8090 }]);
    expect(policy.spec.ingress[0].from.slice(-3)).toEqual([
      { namespaceSelector: ns("ci") },
      { namespaceSelector: ns("tools"), podSelector: { matchLabels: { app: "bot" } } },
      { namespaceSelector: ns("ingress"), podSelector: {} },
    ]);
    expect(policy.spec.ingress[1]).toEqual({
      from: [{ namespaceSelector: ns("monitoring") }],
      ports: [{ protocol: "TCP", port: "metrics" }],
    });
    // Without: http, the built peers alone.
    const plain = render();
    const plainPolicy = plain.find((d) => d.kind === "NetworkPolicy" && d.metadata.name === "jr2-orchestrator-api");
    expect(plainPolicy.spec.ingress).toHaveLength(1);
    // The Sandbox pods, its own replicas (decision 0079), its own namespace's pods.
    expect(plainPolicy.spec.ingress[0].from).toHaveLength(3);
  });

  it("the Orchestrator: several replicas rolled one at a time, its budget only with more than one, refused not below them; its Leases Role and peer env (decision 0079)", () => {
    const orch = (docs: Obj[]) => docs.find((d) => d.kind === "Deployment" && d.metadata.name === "jr2-orchestrator");
    const budget = (docs: Obj[]) =>
      docs.filter((d) => d.kind === "PodDisruptionBudget" && d.metadata.name === "jr2-orchestrator");
    const docs = render();
    const d = orch(docs);
    expect(d.spec.replicas).toBe(2);
    expect(d.spec.strategy).toEqual({ type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } });
    expect(d.spec.template.spec.topologySpreadConstraints).toEqual([
      expect.objectContaining({ topologyKey: "kubernetes.io/hostname", whenUnsatisfiable: "ScheduleAnyway" }),
    ]);
    expect(d.spec.template.spec.terminationGracePeriodSeconds).toBe(30);
    expect(d.spec.template.spec.containers[0].env).toEqual(
      expect.arrayContaining([
        { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
        { name: "JR2_SHARD_LEASES_NAMESPACE", value: "$(POD_NAMESPACE)" },
        { name: "JR2_PEER_URL", value: "http://$(POD_IP):8090" },
      ]),
    );
    expect(budget(docs).map((b) => [b.metadata.namespace, b.spec])).toEqual([
      ["jr2-system", { minAvailable: 1, selector: { matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } } }],
    ]);
    const role = docs.find((r) => r.kind === "Role" && r.metadata.name === "jr2-orchestrator-leases");
    expect([role.metadata.namespace, role.rules[0].apiGroups, role.rules[0].resources]).toEqual([
      "jr2-system",
      ["coordination.k8s.io"],
      ["leases"],
    ]);
    expect(
      docs.find((r) => r.kind === "RoleBinding" && r.metadata.name === "jr2-orchestrator-leases").subjects,
    ).toEqual([{ kind: "ServiceAccount", name: "jr2-orchestrator", namespace: "jr2-system" }]);
    const three = render(
      "--set",
      "orchestrator.replicas=3",
      "--set",
      "orchestrator.podDisruptionBudget.minAvailable=2",
    );
    expect(orch(three).spec.replicas).toBe(3);
    expect(budget(three).map((b) => b.spec.minAvailable)).toEqual([2]);
    // One replica: no budget (it would block every drain), and nothing to refuse.
    const one = render("--set", "orchestrator.replicas=1");
    expect(orch(one).spec.replicas).toBe(1);
    expect(budget(one)).toEqual([]);
    expect(budget(render("--set", "orchestrator.podDisruptionBudget=null"))).toEqual([]);
    const tooMany = run("template", "--set", "orchestrator.podDisruptionBudget.minAvailable=2");
    expect([tooMany.status, tooMany.stderr]).toEqual([
      1,
      expect.stringContaining(
        "orchestrator.podDisruptionBudget.minAvailable (2) must be below orchestrator.replicas (2), or a node drain waits forever: lower it, raise orchestrator.replicas, or set orchestrator.podDisruptionBudget to null",
      ),
    ]);
    const values = parseAllDocuments(texts(helmChart(input())).get("values.yaml")!)[0].toJS() as Obj;
    expect(values.orchestrator).toMatchObject({ replicas: 2, podDisruptionBudget: { minAvailable: 1 } });
  });

  it("spreads the admission pods and keeps one through a drain; monitoring only when asked", () => {
    const docs = render();
    const pdb = docs.find((d) => d.kind === "PodDisruptionBudget" && d.metadata.namespace === "pepr-system");
    expect(pdb.spec).toEqual({ minAvailable: 1, selector: { matchLabels: { app: name } } });
    const admission = docs.find((d) => d.kind === "Deployment" && d.metadata.name === name);
    expect(admission.spec.template.spec.topologySpreadConstraints).toEqual([
      expect.objectContaining({ topologyKey: "kubernetes.io/hostname", whenUnsatisfiable: "ScheduleAnyway" }),
    ]);
    // The egress point's own budget stays (decision 0076); the admission pods' is gone.
    expect(
      render("--set", "admission.podDisruptionBudget=null").filter(
        (d) => d.kind === "PodDisruptionBudget" && d.metadata.namespace === "pepr-system",
      ),
    ).toEqual([]);
    expect(kinds(docs)).not.toContain("ServiceMonitor");
    expect(kinds(docs)).not.toContain("PrometheusRule");
    const mon = render(
      "--set",
      "monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true",
      "--set-json",
      'monitoring.serviceMonitor.labels={"release":"prometheus"}',
    );
    const monitors = mon.filter((d) => d.kind === "ServiceMonitor");
    expect(monitors.map((d) => `${d.metadata.namespace}/${d.metadata.name}`).sort()).toEqual([
      "jr2-system/jr2",
      `pepr-system/${name}`,
      `pepr-system/${name}-watcher`,
    ]);
    for (const m of monitors)
      expect(m.metadata.labels).toMatchObject({ release: "prometheus", "app.kubernetes.io/instance": "jr2" });
    const rule = mon.find((d) => d.kind === "PrometheusRule");
    expect(rule.spec.groups[0].rules.map((r: Obj) => r.alert)).toEqual(
      alertRules(name, `${name}-watcher`).map((r) => r.alert),
    );
  });

  it("refuses each typical mistake in the values, naming its field", () => {
    const mistakes: Array<[string[], RegExp]> = [
      [["--set", "admission.defaults=both"], /admission\/defaults/],
      [["--set", "admision.replicas=2"], /admision/],
      [["--set-json", 'sandboxNamespaces=["Team_A"]'], /sandboxNamespaces\/0/],
      [["--set-json", 'sandboxNamespaces=["jr2-system"]'], /sandboxNamespaces\/0/],
      [["--set-json", "sandboxNamespaces=[]"], /sandboxNamespaces/],
      [["--set", "orchestrator.tls.secret=x"], /orchestrator\/tls/],
      [["--set", "orchestrator.replicas=0"], /orchestrator\/replicas/],
      [["--set-json", 'orchestrator.podDisruptionBudget={"maxUnavailable":1}'], /orchestrator\/podDisruptionBudget/],
      [
        ["--set-json", 'orchestrator.callers.podSelectors=[{"matchLabels":{"a":"b"}}]'],
        /orchestrator\/callers\/podSelectors\/0/,
      ],
      [["--set-json", 'orchestrator.callers.namespace=["ci"]'], /orchestrator\/callers/],
      [["--set", "monitoring.serviceMonitor.interval=often"], /monitoring\/serviceMonitor\/interval/],
      [["--set", "preflight.enable=false"], /preflight/],
      [["--set-json", 'podConfig={"custodian":{"provider":[]}}'], /podConfig\/custodian/],
      [
        ["--set-json", 'podConfig={"custodian":{"providers":[{"name":"Bad Name","url":"https://x"}]}}'],
        /podConfig\/custodian\/providers\/0\/name/,
      ],
    ];
    for (const [args, field] of mistakes) {
      const r = run("template", ...args);
      expect([args.join(" "), r.status]).toEqual([args.join(" "), 1]);
      expect([args.join(" "), r.stderr]).toEqual([args.join(" "), expect.stringMatching(field)]);
    }
    const lint = run("lint", "--set", "admission.defaults=both");
    expect(lint.status).not.toBe(0);
    expect(lint.stdout + lint.stderr).toMatch(/admission\/defaults/);
    expect(run("lint").status).toBe(0);
  });

  it("makes the preflight a test hook alone", () => {
    const docs = render();
    const hooks = docs.filter((d) => d.metadata.annotations?.["helm.sh/hook"] === "test");
    expect(hooks.map((d) => `${d.kind}/${d.metadata.name}`).sort()).toEqual([
      "Deployment/jr2-preflight-target",
      "NetworkPolicy/jr2-preflight-target",
      "Pod/jr2-preflight",
      "Service/jr2-preflight-target",
    ]);
    expect(render("--skip-tests").filter((d) => d.metadata.annotations?.["helm.sh/hook"])).toEqual([]);
    expect(render("--set", "preflight.enabled=false").filter((d) => d.metadata.annotations?.["helm.sh/hook"])).toEqual(
      [],
    );
  });
});

// The preflight's decision (decision 0074), the pure part of its program: the failing case here,
// since the shared node enforces NetworkPolicy and taking that away would end every boundary of
// the tests running beside it; the node tier runs the whole program there, passing.
describe("the preflight's verdict", () => {
  const verdict = new Function(`${PREFLIGHT_PROBE.replace(/^if \(process\.env[^\n]*$/m, "")}; return verdict;`)() as (
    permitted: string,
    denied: string[],
    after?: string,
  ) => { ok: boolean; message: string };
  it("fails, saying every boundary is gone, when the denied port answers", () => {
    const v = verdict("connected", ["connected", "connected", "connected", "connected", "connected"]);
    expect(v.ok).toBe(false);
    expect(v.message).toMatch(/does not enforce NetworkPolicy.*every one is gone/);
  });
  it("passes when the denied port is refused or times out, once the permitted one answered", () => {
    expect(verdict("connected", ["timeout"], "connected").ok).toBe(true);
    expect(verdict("connected", ["connected", "refused"], "connected").ok).toBe(true);
  });
  it("fails as proving nothing when the permitted port does not answer", () => {
    const v = verdict("timeout", []);
    expect(v.ok).toBe(false);
    expect(v.message).toMatch(/proves nothing/);
    // A target that ended after the first answer refuses both ports: not taken for a policy.
    expect(verdict("connected", ["refused"], "refused")).toMatchObject({ ok: false, message: /proves nothing/ });
  });
});

// Each alert's expression names metrics the code exports (or kube-state-metrics' named ones).
test("every alert reads a metric the code really exports", () => {
  const { readFileSync, readdirSync } = jest.requireActual<typeof import("node:fs")>("node:fs");
  const root = join(__dirname, "..", "..");
  const sources = ["lib", "orchestrator", "egress", "api"]
    .flatMap((d) =>
      (readdirSync(join(root, d), { recursive: true }) as string[])
        .filter((f) => f.endsWith(".ts"))
        .map((f) => readFileSync(join(root, d, f), "utf8")),
    )
    .join("\n");
  const PEPR_OWN = ["pepr_alerts", "pepr_errors", "pepr_cache_miss", "pepr_resync_failure_count"];
  const rules = alertRules("a", "w");
  expect(rules.length).toBeGreaterThanOrEqual(20);
  for (const r of rules) {
    const names = [...r.expr.matchAll(/\b((?:pepr|jr2|kube)_[a-z0-9_]+)\b/g)].map((m) => m[1]);
    expect([r.alert, names.length > 0]).toEqual([r.alert, true]);
    for (const n of names) {
      const exported = EXTERNAL_METRICS.includes(n)
        ? true
        : PEPR_OWN.includes(n)
          ? true
          : n.startsWith("pepr_")
            ? sources.includes(`"${n.slice("pepr_".length)}"`)
            : sources.includes(n);
      expect([r.alert, n, exported]).toEqual([r.alert, n, true]);
    }
  }
});
