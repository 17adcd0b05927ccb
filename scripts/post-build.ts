// Runs after `pepr build` (npm run build): puts both CRDs into the build output, for those who
// deploy from the manifest or the Helm chart rather than letting the module apply them; bundles
// the companion workloads (one file each, for the companions image: see Dockerfile) and renders
// their manifests (dist/jr2-<name>.yaml); writes the whole installation's Helm chart
// (dist/jr2-chart/) and the plain manifest rendered from it (dist/jr2-install.yaml, decision 0060).
// JR2_COMPANION_IMAGE names the image they run.
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, stringify } from "yaml";
import { cacheAgentManifests } from "../cache-agent/cache-agent-manifests";
import { egressManifests } from "../egress/egress-manifests";
import { orchestratorManifests } from "../orchestrator/orchestrator-manifests";
import cfg from "../package.json";
import { sandboxNamespacesFrom } from "../api/sandbox-namespaces";
import { cacheBoundsFrom, vouchedHostsFrom } from "../api/repo-fetch-policy";
import { CACHE_AGENT_ENV } from "../api/env";
import {
  moduleHoldsChartTemplate,
  moduleNamespacesChartTemplate,
  moduleServiceAccount,
  peprStoreCrd,
  restrictModuleManifest,
  restrictedChartDeployment,
  restrictedChartValues,
} from "./module-rbac";
import { COMPANIONS, bundleCompanion, type Companion } from "./companion-bundle";
import { renderAll } from "./crd-yaml";
import { CHART_NAME, CRDS_CHART_NAME, crdsChart, helmChart } from "./helm-chart";
import { renderInstallManifest } from "../dev/helm";
import { applyTlsSwap, servingTlsSwap, tlsSecretOf } from "./serving-tls";
import {
  caBundleOf,
  chartGuard,
  ignoredNamespaces,
  sandboxDefaultsChartTemplate,
  sandboxDefaultsModeFrom,
  sandboxDefaultsWebhookChartTemplate,
  scopeChartTemplate,
  scopeManifest,
  withSandboxDefaultsValue,
} from "./webhooks";

const dist = join(__dirname, "..", "dist");
const uuid = cfg.pepr.uuid;
const manifest = join(dist, `pepr-module-${uuid}.yaml`);
const chart = join(dist, `${uuid}-chart`);
if (!existsSync(manifest)) throw new Error(`${manifest} is missing: run \`npx pepr build\` first`);
// `pepr build` exits 0 when its TypeScript compile fails, leaving an earlier build in dist/; the
// prebuild step removed the module, so its absence here is that failure.
const moduleJs = join(dist, `pepr-${uuid}.js`);
if (!existsSync(moduleJs)) throw new Error(`pepr build wrote no ${moduleJs}: it failed (its errors are above)`);

// The namespaces that hold Sandboxes (JR2_SANDBOX_NAMESPACES): each gets its opt-in label and
// the components' RoleBindings, in every manifest rendered here (decision 0047).
const sandboxNamespaces = sandboxNamespacesFrom(process.env);
// Pepr's store CRD beside the module's: the deployed controller may patch it, not create it.
const crds = [...renderAll(), { file: "crds/peprstores.pepr.dev.yaml", text: stringify(peprStoreCrd()) }];
mkdirSync(join(dist, "crds"), { recursive: true });
if (existsSync(chart)) mkdirSync(join(chart, "crds"), { recursive: true });
for (const { file, text } of crds) {
  const name = file.split("/").pop()!;
  writeFileSync(join(dist, "crds", name), text);
  if (existsSync(chart)) copyFileSync(join(dist, "crds", name), join(chart, "crds", name));
}

// The manifest gets the CRDs first, so `kubectl apply -f` creates them before anything uses them.
const body = readFileSync(manifest, "utf8");
if (!body.includes("kind: CustomResourceDefinition")) {
  writeFileSync(manifest, crds.map((c) => c.text.trimEnd()).join("\n---\n") + "\n---\n" + body);
}
// Each webhook scoped to what it guards (scripts/webhooks.ts, decision 0017), in the manifest
// and in the chart's templates alike; the Sandbox defaults beside them: the policy and its binding
// (decision 0026), or with JR2_SANDBOX_DEFAULTS=webhook, for Kubernetes 1.34 and 1.35, the
// module's mutating webhook (decision 0059).
const defaultsMode = sandboxDefaultsModeFrom(process.env);
const scoped = scopeManifest(readFileSync(manifest, "utf8"), defaultsMode);
// The webhook certificate: ECDSA in place of Pepr's RSA-2048, the same names, swapped in the
// manifest (scripts/serving-tls.ts, decision 0032).
const swap = servingTlsSwap(scoped, uuid);
let final = scoped;
if (swap) {
  const swapped = applyTlsSwap(scoped, swap);
  if (swapped.replaced !== swap.size)
    throw new Error(`${manifest}: the TLS swap found ${swapped.replaced} of ${swap.size} values`);
  final = swapped.text;
}
// The module's rights narrowed and its controller pods restricted (scripts/module-rbac.ts,
// decision 0047), and what its identity writes held by two ValidatingAdmissionPolicies (0069).
final = restrictModuleManifest(final, sandboxNamespaces);
writeFileSync(manifest, final);
// The chart follows the manifest, the one output Pepr writes without text replacement (decision
// 0032): its webhooks scoped alike and trusting the manifest's CA, its TLS Secret the manifest's.
const built = parseAllDocuments(final).map((d) => d.toJS() as { kind?: string });
// Pepr writes no mutation template (no capability mutates) but leaves an earlier build's: the
// Sandbox defaults' webhook, the only mutating one, has a template of its own below.
rmSync(join(chart, "templates", "mutation-webhook.yaml"), { force: true });
const validation = join(chart, "templates", "validation-webhook.yaml");
if (existsSync(validation))
  writeFileSync(validation, scopeChartTemplate(readFileSync(validation, "utf8"), caBundleOf(built)));
if (existsSync(chart)) {
  // Both ways of writing the Sandbox defaults, one rendered as the `sandboxDefaults` value says
  // (decision 0059); the value defaults to this build's choice.
  writeFileSync(
    join(chart, "templates", "sandbox-defaults-policy.yaml"),
    chartGuard("policy", sandboxDefaultsChartTemplate(ignoredNamespaces(built))),
  );
  writeFileSync(
    join(chart, "templates", "sandbox-defaults-webhook.yaml"),
    chartGuard("webhook", sandboxDefaultsWebhookChartTemplate(readFileSync(validation, "utf8"))),
  );
  writeFileSync(join(chart, "templates", "tls-secret.yaml"), stringify(tlsSecretOf(built, uuid), { lineWidth: 0 }));
  writeFileSync(
    join(chart, "templates", "sandbox-namespaces.yaml"),
    moduleNamespacesChartTemplate(sandboxNamespaces, moduleServiceAccount(built)),
  );
  // What the module's own identity writes, held by the API server (decision 0069).
  writeFileSync(
    join(chart, "templates", "module-policies.yaml"),
    moduleHoldsChartTemplate(moduleServiceAccount(built), sandboxNamespaces),
  );
  const values = join(chart, "values.yaml");
  writeFileSync(values, withSandboxDefaultsValue(restrictedChartValues(readFileSync(values, "utf8")), defaultsMode));
  for (const template of ["admission-deployment.yaml", "watcher-deployment.yaml"]) {
    const file = join(chart, "templates", template);
    if (existsSync(file)) writeFileSync(file, restrictedChartDeployment(readFileSync(file, "utf8")));
  }
}
console.log(
  `CRDs added to ${manifest}${existsSync(chart) ? ` and ${chart}/crds` : ""}: ${readdirSync(join(dist, "crds")).join(", ")}`,
);

const image = process.env.JR2_COMPANION_IMAGE || `jr2/companions:${cfg.version}`;
const render = (objects: Array<Record<string, unknown>>) => objects.map((o) => stringify(o)).join("---\n");
// The installation's own words for its cache agents (decision 0066): the internal git hosts it
// vouches for and what one namespace may cache, from the build's environment (read as the agent
// reads them, so a bad entry stops the build, not the agents).
const vouchedHosts = vouchedHostsFrom(process.env).map((r) => r.text);
cacheBoundsFrom(process.env);
const cacheAgent = cacheAgentManifests({
  image,
  sandboxNamespaces,
  vouchedHosts,
  maxRepos: Number(process.env[CACHE_AGENT_ENV.maxRepos]?.trim()) || undefined,
  maxBytes: process.env[CACHE_AGENT_ENV.maxBytes]?.trim() || undefined,
});
writeFileSync(join(dist, "jr2-cache-agent.yaml"), render(cacheAgent));
// The Orchestrator's Sandboxes in the first opted-in namespace.
const orchestratorOptions = { image, workspaceNamespace: sandboxNamespaces[0] };
const orchestrator = orchestratorManifests(orchestratorOptions);
writeFileSync(join(dist, "jr2-orchestrator.yaml"), render(orchestrator));
// The egress point (docs/decisions/0051), in the companions' namespace the Orchestrator's manifest makes.
const egress = egressManifests({ image, sandboxNamespaces });
writeFileSync(join(dist, "jr2-egress.yaml"), render(egress));

// The whole installation as one chart and its CRDs' chart, from the same objects, and the plain
// manifest rendered from them (decision 0060). Each chart's directory is written afresh, so no file
// of an earlier layout stays.
const wholeChart = join(dist, `${CHART_NAME}-chart`);
const crdsChartDir = join(dist, `${CRDS_CHART_NAME}-chart`);
const controllerImage = parseAllDocuments(final)
  .map((d) => d.toJS() as { kind?: string; spec?: { template?: { spec?: { containers?: Array<{ image: string }> } } } })
  .find((d) => d?.kind === "Deployment")?.spec?.template?.spec?.containers?.[0]?.image;
if (!controllerImage) throw new Error(`${manifest} has no controller Deployment`);
const chartInput = {
  uuid,
  version: cfg.version,
  description: cfg.description,
  module: parseAllDocuments(final)
    .map((d) => d.toJS())
    .filter(Boolean),
  cacheAgent,
  orchestrator,
  egress,
  controllerImage,
  companionsImage: image,
  // The chart makes these per entry of its sandboxNamespaces value (decision 0074).
  sandboxNamespaces,
  orchestratorOptions,
};
for (const [dir, files] of [
  [crdsChartDir, crdsChart(chartInput)],
  [wholeChart, helmChart(chartInput)],
] as const) {
  rmSync(dir, { recursive: true, force: true });
  for (const [file, content] of files) {
    mkdirSync(join(dir, file, ".."), { recursive: true });
    writeFileSync(join(dir, file), content);
  }
}
writeFileSync(join(dist, "jr2-install.yaml"), renderInstallManifest(crdsChartDir, wholeChart));
console.log(`the whole installation: charts ${crdsChartDir} and ${wholeChart}, plain manifest dist/jr2-install.yaml`);

// The companions: one bundle each (their lazy libraries beside them), and their manifests. The
// directory is written afresh: the image copies every file in it, so none may be left from an
// earlier build's layout.
void (async () => {
  rmSync(join(dist, "companions"), { recursive: true, force: true });
  for (const name of Object.keys(COMPANIONS) as Companion[]) await bundleCompanion(name, join(dist, "companions"));
  console.log(
    `companions bundled into ${join(dist, "companions")}; manifests dist/jr2-cache-agent.yaml, dist/jr2-orchestrator.yaml, dist/jr2-egress.yaml (image ${image})`,
  );
})().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
