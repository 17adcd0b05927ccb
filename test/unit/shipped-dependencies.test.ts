// What a release ships is what package.json declares (docs/decisions/0078-a-release-ships-current-parts.md):
// every package the shipped code imports is a dependency (or an optional one), never a devDependency,
// and every package file the bundles carry belongs to a package the lock does not mark dev. The lock's
// dev flag decides what `npm ci --omit=dev` installs and what an SBOM read from the lock names, so a
// shipped package the lock calls dev would be missing from both. The shipped code is read as esbuild
// reads it: the companions' bundles (scripts/companion-bundle.ts, every entry of COMPANIONS, their
// lazy files followed in place) and the module Pepr's build bundles (pepr.ts, with Pepr's own
// dependencies left outside as its build leaves them, decision 0041's controller image carries them).
import { build, type Metafile } from "esbuild";
import { readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { join } from "node:path";
import cfg from "../../package.json";
import { COMPANIONS } from "../../scripts/companion-bundle";

const ROOT = join(__dirname, "..", "..");

type Lock = { packages: Record<string, { dev?: boolean; devOptional?: boolean }> };

/** The package a specifier names: `@scope/name` or `name`, without a subpath. Pure. */
export function packageOf(specifier: string): string {
  const parts = specifier.split("/");
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0];
}

/** Whether a specifier is a package's (not a relative path, an absolute one or a Node builtin). Pure. */
export function isPackage(specifier: string): boolean {
  if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("node:")) return false;
  return !builtinModules.includes(packageOf(specifier));
}

/** The lock path (`node_modules/a/node_modules/@s/b`) of the package holding a file esbuild read, or
 * undefined for a file of ours. Pure. */
export function lockPathOf(file: string): string | undefined {
  const marker = "node_modules/";
  const at = file.lastIndexOf(marker);
  if (at < 0) return undefined;
  const rest = file.slice(at + marker.length).split("/");
  const name = rest[0].startsWith("@") ? rest.slice(0, 2).join("/") : rest[0];
  return file.slice(0, at + marker.length) + name;
}

/** The problems of one bundle's metafile against package.json's runtime dependencies and the lock. Pure. */
export function undeclared(
  meta: Metafile,
  runtime: ReadonlySet<string>,
  lock: Lock,
  external: readonly string[] = [],
): string[] {
  const problems = new Set<string>();
  for (const [file, input] of Object.entries(meta.inputs)) {
    const ours = lockPathOf(file) === undefined;
    if (ours) {
      for (const imp of input.imports) {
        const spec = imp.original ?? imp.path;
        if (!isPackage(spec)) continue;
        const name = packageOf(spec);
        if (!runtime.has(name))
          problems.add(
            `${file} imports ${JSON.stringify(spec)}, but ${name} is not in package.json's dependencies: ` +
              `move it there (npm install --save-exact ${name}) so a release's install and SBOM carry it`,
          );
      }
    } else {
      const at = lockPathOf(file)!;
      const entry = lock.packages[at];
      if (!entry) problems.add(`${file} is in no package of package-lock.json (${at}): run npm install`);
      else if (entry.dev || entry.devOptional)
        problems.add(
          `${at} is bundled into shipped code but package-lock.json marks it dev: declare the package that ` +
            `brings it in package.json's dependencies`,
        );
    }
  }
  for (const name of external) {
    const entry = lock.packages[`node_modules/${name}`];
    if (entry?.dev || entry?.devOptional)
      problems.add(`node_modules/${name} is loaded at run time but package-lock.json marks it dev`);
  }
  return [...problems].sort();
}

const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as Lock;
const runtime = new Set([...Object.keys(cfg.dependencies), ...Object.keys(cfg.optionalDependencies ?? {})]);

async function metafileOf(entryPoints: string[], external: string[] = []): Promise<Metafile> {
  const r = await build({
    absWorkingDir: ROOT,
    entryPoints,
    external,
    bundle: true,
    platform: "node",
    target: "node24",
    write: false,
    metafile: true,
    outdir: "/nonexistent",
    logLevel: "silent",
  });
  return r.metafile;
}

describe("the shipped code's packages are declared runtime dependencies", () => {
  test("the pure parts: a specifier's package, a builtin, a file's lock path", () => {
    expect(packageOf("zod/mini")).toBe("zod");
    expect(packageOf("@earendil-works/pi-ai/providers/openai")).toBe("@earendil-works/pi-ai");
    expect(isPackage("fs")).toBe(false);
    expect(isPackage("node:fs")).toBe(false);
    expect(isPackage("./x")).toBe(false);
    expect(isPackage("yaml")).toBe(true);
    expect(lockPathOf("node_modules/kubernetes-fluent-client/node_modules/js-yaml/dist/index.js")).toBe(
      "node_modules/kubernetes-fluent-client/node_modules/js-yaml",
    );
    expect(lockPathOf("node_modules/@scope/pkg/lib/a.js")).toBe("node_modules/@scope/pkg");
    expect(lockPathOf("orchestrator/main.ts")).toBeUndefined();
  });

  test("an import of a devDependency, and a bundled file of a dev package, are each named", () => {
    const meta: Metafile = {
      inputs: {
        "egress/main.ts": {
          bytes: 1,
          imports: [
            { path: "node_modules/yaml/dist/index.js", kind: "import-statement", original: "yaml" },
            { path: "node:fs", kind: "import-statement", original: "node:fs", external: true },
            { path: "egress/index.ts", kind: "import-statement", original: "./index" },
          ],
        },
        "node_modules/yaml/dist/index.js": { bytes: 1, imports: [] },
        "node_modules/zod/index.js": { bytes: 1, imports: [] },
      },
      outputs: {},
    };
    const devLock: Lock = { packages: { "node_modules/yaml": { dev: true }, "node_modules/zod": {} } };
    expect(undeclared(meta, new Set(["zod"]), devLock)).toEqual([
      expect.stringMatching(/^egress\/main\.ts imports "yaml", but yaml is not in package\.json's dependencies/),
      expect.stringMatching(/^node_modules\/yaml is bundled into shipped code but package-lock\.json marks it dev/),
    ]);
    expect(
      undeclared(meta, new Set(["zod", "yaml"]), { packages: { "node_modules/yaml": {}, "node_modules/zod": {} } }),
    ).toEqual([]);
  });

  test("the companions' bundles", async () => {
    const meta = await metafileOf(Object.values(COMPANIONS));
    expect(Object.keys(meta.inputs).length).toBeGreaterThan(100);
    expect(undeclared(meta, runtime, lock)).toEqual([]);
  });

  test("the module Pepr's build bundles, and what its controller loads beside it", async () => {
    // Pepr's build leaves its own dependencies, pepr and @kubernetes/client-node outside the bundle.
    const pepr = JSON.parse(readFileSync(join(ROOT, "node_modules", "pepr", "package.json"), "utf8")) as {
      dependencies: Record<string, string>;
    };
    const external = [...Object.keys(pepr.dependencies), "pepr", "@kubernetes/client-node"];
    const meta = await metafileOf([join(ROOT, "pepr.ts")], external);
    expect(undeclared(meta, runtime, lock, ["pepr", "kubernetes-fluent-client", "@kubernetes/client-node"])).toEqual(
      [],
    );
  });
});
