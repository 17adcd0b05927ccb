// The whole installation's chart as `npm run build` writes it (docs/decisions/0060-one-install.md),
// rendered by helm built from its pinned Go module (dev/helm.sh): with its defaults it is the
// manifests the build writes (the module's and the companions', nothing typed twice); the plain
// manifest dist/jr2-install.yaml is its render; and each value lands where it says. In the node
// tier because its global setup builds dist/ from the checked-out sources; it uses no cluster.
import { execFileSync, spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { builtManifests } from "../../dev/deployed";
import { CRDS_RELEASE, INSTALL_ARGS, INSTALL_RELEASE, helmBin, renderInstallManifest } from "../../dev/helm";
import { KEEPER, SYSTEM_NS } from "../../scripts/helm-chart-identity";
import {
  CHART_NAME,
  CONFIG_CHECKSUM,
  CRDS_CHART_NAME,
  INSTANCE_LABEL,
  ORCHESTRATOR_SECRET,
} from "../../scripts/helm-chart";
import cfg from "../../package.json";
import { type Obj, ROOT, fromSetup, kubectl, kubectlOk, realNode } from "./support";

const DIST = join(ROOT, "dist");
const CHART = join(DIST, `${CHART_NAME}-chart`);
const CRDS_CHART = join(DIST, `${CRDS_CHART_NAME}-chart`);
const MODULE = `pepr-${cfg.pepr.uuid}`;
const helm = helmBin();

const docsOf = (text: string): Obj[] =>
  parseAllDocuments(text)
    .map((d) => d.toJS() as Obj)
    .filter(Boolean);
/** `helm template` of the chart with extra arguments; its objects. */
const render = (...args: string[]): Obj[] =>
  docsOf(
    execFileSync(helm, ["template", INSTALL_RELEASE, CHART, ...args], {
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    }),
  );
const id = (o: Obj) => `${o.kind} ${o.metadata.namespace ?? ""}/${o.metadata.name}`;
const find = (docs: Obj[], kind: string, name: string) => {
  const o = docs.find((d) => d.kind === kind && d.metadata.name === name);
  if (!o) throw new Error(`no ${kind} ${name} in the render (${docs.map(id).join(", ")})`);
  return o;
};
const podSpec = (docs: Obj[], kind: string, name: string) => find(docs, kind, name).spec.template.spec;

test("dist/jr2-install.yaml is the chart rendered as the plain manifest, byte for byte", () => {
  expect(readFileSync(join(DIST, "jr2-install.yaml"), "utf8")).toBe(renderInstallManifest(CRDS_CHART, CHART, helm));
});

test("with its defaults the chart is the manifests the build writes, plus only its release label and config checksums", () => {
  const rendered = docsOf(readFileSync(join(DIST, "jr2-install.yaml"), "utf8"));
  /** What the chart adds and nothing else: each object's release label, a pod's config checksum. */
  const plain = (o: Obj) => {
    const d = structuredClone(o);
    expect([id(o), d.metadata.labels?.[INSTANCE_LABEL]]).toEqual([
      id(o),
      o.kind === "CustomResourceDefinition" ? undefined : INSTALL_RELEASE,
    ]);
    delete d.metadata.labels?.[INSTANCE_LABEL];
    if (d.metadata.labels && !Object.keys(d.metadata.labels).length) delete d.metadata.labels;
    // The chart's spread of the admission pods over nodes (decision 0074).
    if (d.kind === "Deployment" && d.metadata.name === MODULE) delete d.spec.template.spec.topologySpreadConstraints;
    const ann = d.spec?.template?.metadata?.annotations;
    if (ann) {
      delete ann[CONFIG_CHECKSUM];
      if (!Object.keys(ann).length) delete d.spec.template.metadata.annotations;
    }
    return d;
  };
  // Applying the manifests merges a Namespace that several of them name: one object, every label.
  const expected = new Map<string, Obj>();
  for (const o of builtManifests(DIST)) {
    const had = expected.get(id(o));
    if (had && o.kind !== "Namespace") throw new Error(`${id(o)} is in two manifests`);
    expected.set(
      id(o),
      had ? { ...o, metadata: { ...o.metadata, labels: { ...had.metadata.labels, ...o.metadata.labels } } } : o,
    );
  }
  // The chart's own: the admission pods' PodDisruptionBudget (decision 0074).
  const own = rendered.filter((o) => o.kind === "PodDisruptionBudget" && o.metadata.namespace === "pepr-system");
  expect(own.map(id)).toEqual([`PodDisruptionBudget pepr-system/${MODULE}`]);
  // The admission identity is the keeper's, made in the cluster (decision 0075): the module's TLS and
  // API-path Secrets are not in the chart, its webhooks name no caBundle or path, the Orchestrator
  // reads its two keys through a projected volume; the keeper's own objects are the chart's.
  for (const k of [`Secret pepr-system/${MODULE}-tls`, `Secret pepr-system/${MODULE}-api-path`]) expected.delete(k);
  for (const o of expected.values())
    if (o.kind.endsWith("WebhookConfiguration"))
      for (const w of o.webhooks) {
        delete w.clientConfig.caBundle;
        delete w.clientConfig.service.path;
      }
  const got = new Map(
    rendered
      .filter(
        (o) =>
          !own.includes(o) &&
          ((o.metadata.name !== KEEPER && !o.metadata.name.startsWith(`${KEEPER}-`)) || o.kind === "Namespace"),
      )
      .map((o) => [id(o), plain(o)]),
  );
  const orchestratorVolumes = (o: Obj) => o.spec.template.spec.volumes.filter((v: Obj) => v.name !== "secret");
  for (const m of [expected, got]) {
    const o = m.get(`Deployment ${SYSTEM_NS}/jr2-orchestrator`)!;
    o.spec.template.spec.volumes = orchestratorVolumes(o);
  }
  // The chart's own object: the Orchestrator's Secret, here named, not made (INSTALL_ARGS).
  expect([...got.keys()].sort()).toEqual([...expected.keys()].sort());
  for (const [k, o] of expected) expect([k, got.get(k)]).toEqual([k, o]);
  expect(INSTALL_ARGS).toContain(`orchestrator.existingSecret=${ORCHESTRATOR_SECRET}`);
});

test("images, placement, resources and replicas come from the values, the cache agent placed by its own", () => {
  const controller = "registry.test/jr2/controller@sha256:" + "a".repeat(64);
  const companions = "registry.test/jr2/companions@sha256:" + "b".repeat(64);
  const docs = render(
    "--set-string",
    `images.controller=${controller},images.companions=${companions}`,
    "--set-string",
    "placement.nodeSelector.pool=agents,admission.nodeSelector.zone=a",
    "--set-json",
    'placement.tolerations=[{"key":"agents","operator":"Exists","effect":"NoSchedule"}]',
    "--set-json",
    'cacheAgent.nodeSelector={"cache":"yes"}',
    "--set",
    "admission.replicas=3",
    "--set-json",
    'orchestrator.resources={"requests":{"cpu":"1","memory":"2Gi"}}',
  );
  const pool = { key: "agents", operator: "Exists", effect: "NoSchedule" };
  for (const [kind, name, selector] of [
    ["Deployment", MODULE, { pool: "agents", zone: "a" }],
    ["Deployment", `${MODULE}-watcher`, { pool: "agents" }],
    ["Deployment", "jr2-orchestrator", { pool: "agents" }],
    ["Deployment", "jr2-egress", { pool: "agents" }],
  ] as const) {
    const pod = podSpec(docs, kind, name);
    expect([name, pod.nodeSelector, pod.tolerations]).toEqual([name, selector, [pool]]);
    const image = name.startsWith("pepr-") ? controller : companions;
    for (const c of pod.containers) expect([name, c.image]).toEqual([name, image]);
  }
  const agent = podSpec(docs, "DaemonSet", "jr2-cache-agent");
  expect([agent.nodeSelector, agent.tolerations, agent.containers[0].image]).toEqual([
    { cache: "yes" },
    [{ operator: "Exists" }],
    companions,
  ]);
  const orchestrator = podSpec(docs, "Deployment", "jr2-orchestrator").containers[0];
  // The Custodian runs from the companions image too, so it is named by the same value.
  expect(orchestrator.env.find((e: Obj) => e.name === "JR2_CUSTODIAN_IMAGE").value).toBe(companions);
  // Helm merges a map value into the default: the requests replaced, the default limit kept.
  expect(orchestrator.resources).toEqual({ requests: { cpu: "1", memory: "2Gi" }, limits: { memory: "1Gi" } });
  expect(find(docs, "Deployment", MODULE).spec.replicas).toBe(3);
});

test("the pod config and the fence are values; a change of either rolls the Orchestrator, of the pod config the egress point", () => {
  const podConfig = { egress: { allow: ["example.test:443"] }, harness: { env: [{ name: "A", value: "1" }] } };
  const base = render();
  const changed = render("--set-json", `podConfig=${JSON.stringify(podConfig)}`);
  const fenced = render("--set-json", 'fence=["https://git.example.test/team/"]');
  expect(docsOf(find(changed, "ConfigMap", "jr2-orchestrator-pod").data["pod.yaml"])[0]).toEqual(podConfig);
  expect(docsOf(find(fenced, "ConfigMap", "jr2-orchestrator-fence").data["git-credentials.yaml"])[0]).toEqual([
    "https://git.example.test/team/",
  ]);
  const sum = (docs: Obj[], name: string) =>
    find(docs, "Deployment", name).spec.template.metadata.annotations[CONFIG_CHECKSUM] as string;
  expect(sum(changed, "jr2-orchestrator")).not.toBe(sum(base, "jr2-orchestrator"));
  expect(sum(changed, "jr2-egress")).not.toBe(sum(base, "jr2-egress"));
  expect(sum(fenced, "jr2-orchestrator")).not.toBe(sum(base, "jr2-orchestrator"));
  expect(sum(fenced, "jr2-egress")).toBe(sum(base, "jr2-egress"));
});

test("the Orchestrator's Secret: made with the tokens (the keeper makes the signing key), or an existing one named and none made", () => {
  const made = render("--set-json", 'orchestrator.apiTokens=["t1","t2"]');
  const secret = find(made, "Secret", ORCHESTRATOR_SECRET);
  expect(Buffer.from(secret.data["api-tokens"], "base64").toString()).toBe("t1\nt2\n");
  expect(secret.data["signing-key"]).toBeUndefined();
  const volume = (docs: Obj[]) =>
    podSpec(docs, "Deployment", "jr2-orchestrator")
      .volumes.find((v: Obj) => v.name === "secret")
      .projected.sources.map((s: Obj) => [s.secret.name, s.secret.items[0].key]);
  expect(volume(made)).toEqual([
    [ORCHESTRATOR_SECRET, "api-tokens"],
    ["jr2-orchestrator-signing-key", "signing-key"],
  ]);
  const theirs = render("--set", "orchestrator.existingSecret=team-jr2");
  expect(theirs.some((d) => d.kind === "Secret" && d.metadata.name === ORCHESTRATOR_SECRET)).toBe(false);
  expect(volume(theirs)).toEqual([
    ["team-jr2", "api-tokens"],
    ["team-jr2", "signing-key"],
  ]);
});

test("admission.defaults chooses who writes the Sandbox defaults: auto the policy where the cluster serves it, else the module's mutating webhook (1.34, 1.35); policy or webhook as written; anything else is refused", () => {
  // auto (decision 0074): the policy where MutatingAdmissionPolicy v1 is served on 1.36 or newer.
  const served = ["--api-versions", "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"];
  const docs = render(...served);
  expect(find(docs, "MutatingAdmissionPolicy", "jr2-sandbox-defaults").spec.failurePolicy).toBe("Fail");
  find(docs, "MutatingAdmissionPolicyBinding", "jr2-sandbox-defaults");
  expect(docs.filter((d) => d.kind === "MutatingWebhookConfiguration")).toEqual([]);
  expect(render("--set", "admission.defaults=policy").map((d) => d.kind)).toContain("MutatingAdmissionPolicy");
  for (const webhook of [
    render(),
    render("--kube-version", "1.34.2"),
    render(...served, "--set", "admission.defaults=webhook"),
  ]) {
    expect(webhook.filter((d) => d.kind.startsWith("MutatingAdmissionPolicy"))).toEqual([]);
    const mutating = webhook.filter((d) => d.kind === "MutatingWebhookConfiguration");
    expect(mutating).toHaveLength(1);
    const validating = webhook.find((d) => d.kind === "ValidatingWebhookConfiguration")!;
    for (const w of mutating[0].webhooks) {
      // Neither a path nor a CA: the keeper writes both, as for the validating webhooks (decision 0075).
      expect([w.clientConfig.service.path, w.clientConfig.caBundle]).toEqual([undefined, undefined]);
      expect(validating.webhooks[0].clientConfig.caBundle).toBeUndefined();
      expect(w.rules.some((r: Obj) => r.resources.includes("sandboxes"))).toBe(true);
    }
  }
  const other = spawnSync(helm, ["template", INSTALL_RELEASE, CHART, "--set", "admission.defaults=both"], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
  expect(other.status).not.toBe(0);
  expect(other.stderr).toMatch(/admission\.defaults|defaults/);
});

test("the CRDs are their own chart's crds/, which Helm never deletes, and the chart makes none", () => {
  expect(render().filter((d) => d.kind === "CustomResourceDefinition")).toEqual([]);
  const crds = (...args: string[]) =>
    docsOf(
      execFileSync(helm, ["template", CRDS_RELEASE, CRDS_CHART, ...args], {
        encoding: "utf8",
        maxBuffer: 64 * 1024 * 1024,
      }),
    );
  // crds/, not templates/: rendered only when asked, as Helm installs them, before any template.
  expect(crds()).toEqual([]);
  expect(
    crds("--include-crds")
      .map((d) => `${d.kind} ${d.metadata.name}`)
      .sort(),
  ).toEqual(
    ["peprstores.pepr.dev", "repos.core.jr2.dev", "sandboxes.core.jr2.dev"].map((n) => `CustomResourceDefinition ${n}`),
  );
});

// Decision 0075: what a render holds is what the values pass, never a key, certificate or path.
test("no render holds a PEM block, the build's serving pair, CA or API path, or a signing key", () => {
  const built = builtManifests(DIST).filter((o) => o.kind === "Secret" && o.metadata.name.startsWith(MODULE));
  const tls = built.find((o) => o.metadata.name === `${MODULE}-tls`)!.data;
  const apiPath = built.find((o) => o.metadata.name === `${MODULE}-api-path`)!.data.value as string;
  const literals = [tls["tls.crt"], tls["tls.key"], apiPath, Buffer.from(apiPath, "base64").toString()];
  for (const args of [
    [],
    ["--set", "admission.certificate.source=certManager"],
    ["--set", "admission.defaults=webhook"],
    ["--set", "orchestrator.existingSecret=team-jr2"],
  ]) {
    const text = execFileSync(helm, ["template", INSTALL_RELEASE, CHART, ...args], {
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    });
    expect([args, /-----BEGIN/.test(text), /signing-key: /.test(text)]).toEqual([args, false, false]);
    for (const l of literals) expect([args, text.includes(l)]).toEqual([args, false]);
  }
  expect(readFileSync(join(DIST, "jr2-install.yaml"), "utf8")).not.toMatch(/-----BEGIN|caBundle/);
});

test("certManager: the Certificate and its self-signed chain, or the team's issuer; cainjector's annotation", () => {
  const own = render("--set", "admission.certificate.source=certManager");
  expect(find(own, "Certificate", MODULE).spec).toMatchObject({
    secretName: `${MODULE}-tls`,
    issuerRef: { name: "jr2-admission-ca", kind: "Issuer" },
  });
  expect(find(own, "Issuer", "jr2-admission-selfsigned").spec).toEqual({ selfSigned: {} });
  expect(find(own, "ValidatingWebhookConfiguration", MODULE).metadata.annotations).toEqual({
    "cert-manager.io/inject-ca-from": `pepr-system/${MODULE}`,
  });
  const theirs = render(
    "--set",
    "admission.certificate.source=certManager",
    "--set-json",
    'admission.certificate.certManager.issuerRef={"name":"corp-ca","kind":"ClusterIssuer","group":"cert-manager.io"}',
  );
  expect(find(theirs, "Certificate", MODULE).spec.issuerRef).toEqual({
    name: "corp-ca",
    kind: "ClusterIssuer",
    group: "cert-manager.io",
  });
  expect(theirs.filter((d) => d.kind === "Issuer")).toEqual([]);
  expect(render().filter((d) => d.apiVersion?.startsWith("cert-manager.io"))).toEqual([]);
  expect(find(render(), "ValidatingWebhookConfiguration", MODULE).metadata.annotations).toBeUndefined();
});

// The preflight (decision 0074) on the real node, whose network plugin enforces NetworkPolicy
// (dev/cluster/go/netpol): `helm test` of a release of the chart's preflight alone (its test hooks,
// in the release's own namespace; nothing else of the chart installed, so it runs beside any
// installation) passes,
// its permitted port answered and its denied one not. The failing verdict is the unit tier's
// (test/unit/scripts-helm-chart.test.ts): taking enforcement away here would open every other
// test's boundaries on the shared node.
describe("the preflight on the real node", () => {
  const release = "jr2-preflight-test";
  const dir = mkdtempSync(join(tmpdir(), "jr2-preflight-"));
  // A namespace of its own: the preflight's objects go in the release's.
  const ns = `jr2-preflight-${Date.now().toString(36)}`;
  const kube = () => ["--kubeconfig", process.env.KUBECONFIG!, "--namespace", ns];
  beforeAll(() => {
    for (const f of [
      "Chart.yaml",
      "values.yaml",
      "values.schema.json",
      "templates/_helpers.tpl",
      "templates/preflight.yaml",
    ]) {
      mkdirSync(join(dir, f, ".."), { recursive: true });
      copyFileSync(join(CHART, f), join(dir, f));
    }
    kubectlOk(["create", "namespace", ns]);
  });
  afterAll(() => {
    spawnSync(helm, ["uninstall", release, ...kube()], { encoding: "utf8" });
    // Hooks are no release's objects: the namespace takes the probe Pod and a failed run's rest.
    kubectl(["delete", "namespace", ns, "--wait=false"]);
    rmSync(dir, { recursive: true, force: true });
  });

  test("helm test passes: the cluster enforces NetworkPolicy", () => {
    const node = realNode();
    const placement = {
      nodeSelector: { [node.label[0]]: node.label[1] },
      tolerations: [{ key: node.taint.key, operator: "Equal", value: node.taint.value, effect: node.taint.effect }],
    };
    const install = spawnSync(
      helm,
      [
        "install",
        release,
        dir,
        ...kube(),
        "--set-string",
        `images.companions=${fromSetup("JR2_NODE_COMPANIONS_IMAGE")}`,
        "--set-json",
        `placement=${JSON.stringify(placement)}`,
      ],
      { encoding: "utf8" },
    );
    expect([install.status, install.stderr]).toEqual([0, ""]);
    const run = spawnSync(helm, ["test", release, ...kube(), "--timeout", "5m", "--logs"], { encoding: "utf8" });
    expect([run.status, run.stdout + run.stderr]).toEqual([
      0,
      expect.stringContaining("jr2 preflight: NetworkPolicy is enforced"),
    ]);
  }, 360_000);
});
