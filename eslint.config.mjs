// Lint config: `npm run lint` (part of `npm test`) and `npx pepr build` lint every .ts file with it.
// The import boundaries below are the layout's rule (docs/decisions/0012-shared-contracts.md):
//   api/           every word on the wire; imports nothing of ours but api/
//   lib/           plumbing any workload may use; imports api/ and lib/
//   capabilities/  the Pepr module; imports api/, lib/ and capabilities/, never a companion
//   harness/, cache-agent/, custodian/, orchestrator/   the companions; each imports api/, lib/ and
//                  itself, never a capability and never another companion (one exception below)
//   dev/, scripts/, bench/, test/   tooling: may import anything; product code never imports them
import tsPlugin from "@typescript-eslint/eslint-plugin";
import tsParser from "@typescript-eslint/parser";
import js from "@eslint/js";

/** An import path reaching the top-level folder `name`: only `../` steps before it (a folder of that
 * name inside another, such as api/custodian-config.ts, is not it). */
const folder = (name) => `^(\\.\\./)+${name}(/|$)|^\\./${name}/`;

const TOOLING = ["dev", "scripts", "bench", "test", "examples"];
const COMPANIONS = ["harness", "cache-agent", "custodian", "orchestrator"];

/** A no-restricted-imports rule refusing the given top-level folders, saying why. */
const refuse = (folders, why) => [
  "error",
  { patterns: folders.map((f) => ({ regex: folder(f), message: `${why} (docs/decisions/0012-shared-contracts.md)` })) },
];

export const boundaries = [
  {
    files: ["api/**/*.ts"],
    rules: {
      "no-restricted-imports": refuse(
        ["lib", "capabilities", ...COMPANIONS, ...TOOLING],
        "api/ holds the words on the wire and imports only api/",
      ),
    },
  },
  {
    files: ["lib/**/*.ts"],
    rules: {
      "no-restricted-imports": refuse(
        ["capabilities", ...COMPANIONS, ...TOOLING],
        "lib/ is shared plumbing: it imports api/ and lib/ only",
      ),
    },
  },
  {
    files: ["capabilities/**/*.ts", "pepr.ts"],
    rules: {
      "no-restricted-imports": refuse(
        [...COMPANIONS, ...TOOLING],
        "the Pepr module never imports a companion workload or tooling",
      ),
    },
  },
  ...COMPANIONS.map((self) => ({
    files: [`${self}/**/*.ts`],
    rules: {
      "no-restricted-imports": refuse(
        ["capabilities", ...COMPANIONS.filter((c) => c !== self), ...TOOLING],
        `${self}/ imports the shared home (api/, lib/) and itself, never a capability or another companion`,
      ),
    },
  })),
  {
    // Local mode runs the real Harness beside the Orchestrator, outside any cluster: the one place a
    // companion starts another (docs/decisions/0012). The Harness never imports the Orchestrator.
    files: ["orchestrator/local/local-harness.ts"],
    rules: {
      "no-restricted-imports": refuse(
        ["capabilities", "cache-agent", "custodian", ...TOOLING],
        "orchestrator/local/local-harness.ts may start the Harness, nothing else outside the shared home",
      ),
    },
  },
];

export default [
  { ignores: ["**/node_modules", "**/dist", "api/crd/generated/**"] },
  js.configs.recommended,
  {
    // jest.config.js, the test reporter and dev/*.cjs are CommonJS run by Node.
    files: ["**/*.js", "**/*.cjs"],
    languageOptions: {
      sourceType: "commonjs",
      globals: { module: "writable", require: "readonly", process: "readonly", __dirname: "readonly" },
    },
  },
  {
    files: ["**/*.ts"],
    plugins: { "@typescript-eslint": tsPlugin },
    languageOptions: {
      parser: tsParser,
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname, sourceType: "module" },
    },
    rules: {
      ...tsPlugin.configs.recommended.rules,
      "no-undef": "off",
      "no-unused-vars": "off",
      // A zod schema and its inferred type share a name on purpose.
      "no-redeclare": "off",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-floating-promises": "error",
    },
  },
  ...boundaries,
];
