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
/** How the plain manifest is rendered: the CRDs included (kubectl apply has no crds/ step), and the
 * Orchestrator's Secret one the platform team makes, so no generated key is written into dist/. */
export const INSTALL_ARGS = ["--include-crds", "--set", "orchestrator.existingSecret=jr2-orchestrator"];

/** `helm template` of the chart as the plain manifest. */
export function renderInstallManifest(chart: string, helm = helmBin()): string {
  return execFileSync(helm, ["template", INSTALL_RELEASE, chart, ...INSTALL_ARGS], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
  });
}
