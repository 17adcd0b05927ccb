// Helm, built from its pinned Go module by dev/helm.sh (decision 0060), and the plain manifest
// rendered from the chart: what `npm run build` writes to dist/jr2-install.yaml and what its drift
// test renders again.
import { execFileSync } from "node:child_process";
import { join } from "node:path";

const ROOT = join(__dirname, "..");

/** The helm binary's path, built on first use and cached by version (dev/helm.sh). */
export function helmBin(): string {
  return execFileSync("bash", [join(ROOT, "dev", "helm.sh")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  }).trim();
}

/** The release name the plain manifest is rendered as (its objects' app.kubernetes.io/instance). */
export const INSTALL_RELEASE = "jr2";
/** The CRDs' release, installed first. */
export const CRDS_RELEASE = "jr2-crds";
/** How the plain manifest is rendered: the Orchestrator's Secret one the platform team makes, so no
 * generated key is written into dist/; and no \`helm test\` hook (the preflight, decision 0074). */
export const INSTALL_ARGS = [
  "--set",
  "orchestrator.existingSecret=jr2-orchestrator",
  "--skip-tests",
  // For a cluster that serves the Sandbox defaults' policy, as the build's own manifest (decision 0074).
  "--api-versions",
  "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy",
];

/** `helm template` of the CRDs' chart, then of the chart, as the plain manifest: CRDs first. */
export function renderInstallManifest(crdsChart: string, chart: string, helm = helmBin()): string {
  const template = (args: string[]) =>
    execFileSync(helm, ["template", ...args], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
  return template([CRDS_RELEASE, crdsChart, "--include-crds"]) + template([INSTALL_RELEASE, chart, ...INSTALL_ARGS]);
}
