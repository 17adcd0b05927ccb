// The project's images on the local cluster's loopback registry (decision 0041): `npm run images`
// pushed, each named by the digest it was pushed as, so a node holding an older image under the same
// tag still runs this one. The node tier's setup and `npm start`'s in-cluster mode
// (docs/decisions/0039-in-cluster-by-default.md) both push through here.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { COMPANIONS } from "../scripts/companion-bundle";
import { REPORT_FILE } from "../scripts/images/main";
import { MODULE_JS, ROOT } from "./local-operator";

export type ProjectImages = {
  sandbox: string;
  companions: string;
  controller: string;
  /** Each image's tag ref (what the built manifests name) to the digest ref pushed. */
  byTag: Record<string, string>;
};

/** Pushes the images to `registry`, rebuilding dist/ first when `build` says so; the refs pushed. */
export function pushProjectImages(registry: string, build: boolean): ProjectImages {
  const r = spawnSync(
    join(ROOT, "node_modules", ".bin", "tsx"),
    [join(ROOT, "scripts", "images", "main.ts"), "--registry", registry, ...(build ? ["--build"] : [])],
    { cwd: ROOT, encoding: "utf8", env: process.env },
  );
  if (r.status !== 0) throw new Error(`npm run images failed (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  const report = JSON.parse(readFileSync(REPORT_FILE, "utf8")) as {
    images: Array<{ name: string; ref: string; pushed?: string }>;
  };
  const pushed = (name: string) => {
    const ref = report.images.find((i) => i.name === name)?.pushed;
    if (!ref) throw new Error(`npm run images pushed no ${name} image (${REPORT_FILE})`);
    return ref;
  };
  const byTag = Object.fromEntries(report.images.map((i) => [i.ref, pushed(i.name)]));
  return { sandbox: pushed("sandbox"), companions: pushed("companions"), controller: pushed("controller"), byTag };
}

/** The newest source file of the bundles (the module's and the companions' code) when it is newer
 * than dist/'s oldest bundle, or dist/ is not built; undefined when dist/ is as new as every source.
 * A dependency's new version (package-lock.json alone) is what `npm run build` alone picks up. */
export function distOlderThanSources(): string | undefined {
  const bundles = join(ROOT, "dist", "companions");
  if (!existsSync(bundles)) return "dist/companions (absent)";
  if (!existsSync(MODULE_JS)) return `${MODULE_JS.slice(ROOT.length + 1)} (absent)`;
  const built = Math.min(...readdirSync(bundles).map((f) => statSync(join(bundles, f)).mtimeMs));
  const newest = { file: "", at: 0 };
  const consider = (path: string) => {
    const at = statSync(path).mtimeMs;
    if (at > newest.at) Object.assign(newest, { file: path, at });
  };
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      if (e.isDirectory()) walk(path);
      else if (e.name.endsWith(".ts")) consider(path);
    }
  };
  // scripts/: the post-build step writes the manifests and the chart from them (decision 0060).
  for (const dir of ["api", "cache-agent", "capabilities", "custodian", "harness", "lib", "orchestrator", "scripts"])
    walk(join(ROOT, dir));
  // The module's entry and its build settings (package.json's pepr section: its RBAC among them),
  // and a bundle whose entry lives elsewhere (the scripted model's, in dev/).
  for (const entry of ["pepr.ts", "package.json", ...Object.values(COMPANIONS)]) consider(join(ROOT, entry));
  return newest.at > built ? newest.file.slice(ROOT.length + 1) : undefined;
}
