// The companions' bundles (docs/decisions/0044-the-custodian-starts-small.md): one file
// per companion, except that the lazily loaded libraries (the Custodian's node-forge with its first
// leaf, the Harness's agent library with its first turn) are files of their own beside it. V8 keeps a
// script's whole source and a pre-parse of each of its functions for as long as the process
// lives, so a library bundled into custodian.js costs an idle Custodian memory even though it is
// never run; as its own file it costs nothing until it is required.
import { join } from "node:path";
import { build, type Plugin } from "esbuild";

export const COMPANIONS = {
  "cache-agent": "cache-agent/main.ts",
  custodian: "custodian/main.ts",
  harness: "harness/main.ts",
  orchestrator: "orchestrator/main.ts",
  // The egress point (docs/decisions/0051): the Sandbox pods' one way out.
  egress: "egress/main.ts",
  // The Sandbox Effector (decision 0070): the seat that runs a Machine's Effects with their secrets.
  effector: "effector/main.ts",
  // The keeper (decision 0075): makes and renews the admission certificate and the signing key.
  keeper: "keeper/main.ts",
  // The scripted model provider (decision 0025), so a cluster can serve it from a pod of the
  // companions image to Sandboxes on a real node (decision 0039): demos and tests, never a default.
  "scripted-model": "dev/scripted-model.ts",
} as const;
export type Companion = keyof typeof COMPANIONS;

/** The libraries a companion requires from a file beside its own, by the specifier it imports
 * them with: the file. A relative specifier is a module of ours, named from the repository's root in
 * LAZY_SOURCES. */
export const LAZY: Partial<Record<Companion, Record<string, string>>> = {
  custodian: { "node-forge": "custodian-forge.js" },
  // The agent library (decisions 0024, 0054): our ES-module facade of pi, imported with the first
  // turn (harness/agents/model.ts).
  // The turn runner (pi's runner, its tools, the pick client, with typebox and undici), required
  // with the first turn (decision 0062): a file of its own, so a Harness's start neither parses nor
  // evaluates it.
  // The Sandbox Effector (decision 0070): the order's schema (zod) and its Effects' code, required
  // with the first order (effector/main.ts), and undici, required with the first http Effect
  // (effector/http.ts). At rest it holds only its server, the signature check and its memory of ids.
  effector: { "./effects-late": "effector-effects.js", undici: "effector-undici.js" },
  harness: { "./pi-lib.mjs": "harness-pi.mjs", "./agents/pi-runner": "harness-runner.js" },
};

/** Where a lazy library of ours is, from the repository's root. */
const LAZY_SOURCES: Record<string, string> = {
  "./pi-lib.mjs": "./harness/agents/pi-lib.mts",
  "./agents/pi-runner": "./harness/agents/pi-runner.ts",
  "./effects-late": "./effector/effects-late.ts",
};

const ROOT = join(__dirname, "..");

/** A lazy package required as `./<file>`, resolved at run time beside the bundle. */
const beside = (lazy: Record<string, string>): Plugin => ({
  name: "jr2-lazy-beside",
  setup(build) {
    const names = Object.keys(lazy).map((n) => n.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&"));
    build.onResolve({ filter: new RegExp(`^(${names.join("|")})$`) }, (args) => ({
      path: `./${lazy[args.path]}`,
      external: true,
    }));
  },
});

const common = {
  bundle: true,
  platform: "node",
  // The Node the images and development run (docs/decisions/0052-node-24-runtime.md).
  target: "node24",
  format: "cjs",
  sourcemap: true,
  // kubernetes-fluent-client finds a kind by its class's name: a renamed class is an unknown kind.
  keepNames: true,
  logLevel: "warning",
} as const;

/** Set in every companion's process before its own code runs (the file says why). */
export const V8_FLAGS = join(ROOT, "scripts", "companion-v8-flags.ts");

/** Writes `<outdir>/<name>.js` and the files of its lazy libraries; returns every file written. */
export async function bundleCompanion(name: Companion, outdir: string): Promise<string[]> {
  const lazy = LAZY[name] ?? {};
  const out = join(outdir, `${name}.js`);
  await build({
    ...common,
    inject: [V8_FLAGS],
    entryPoints: [join(ROOT, COMPANIONS[name])],
    outfile: out,
    plugins: [beside(lazy)],
  });
  const written = [out];
  for (const [pkg, file] of Object.entries(lazy)) {
    const lib = join(outdir, file);
    // An ESM-only package (pi) is imported with `import()`, so its file is ES module (.mjs) whose
    // namespace has the package's own names; a CommonJS one is required, so its file is CommonJS.
    const esm = file.endsWith(".mjs");
    await build({
      ...common,
      format: esm ? "esm" : "cjs",
      // What the package's own CommonJS dependencies require, from inside an ES module.
      ...(esm
        ? {
            banner: {
              js: 'import { createRequire } from "node:module"; const require = createRequire(import.meta.url);',
            },
          }
        : {}),
      stdin: {
        contents: esm
          ? `export * from ${JSON.stringify(LAZY_SOURCES[pkg] ?? pkg)};`
          : `module.exports = require(${JSON.stringify(LAZY_SOURCES[pkg] ?? pkg)});`,
        resolveDir: ROOT,
      },
      outfile: lib,
      // A lazy file of ours may require another (the runner, pi): beside it too, not inlined.
      plugins: [beside(Object.fromEntries(Object.entries(lazy).filter(([p]) => p !== pkg)))],
    });
    written.push(lib);
  }
  return written;
}
