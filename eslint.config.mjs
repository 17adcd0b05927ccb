// Lint config: `npm run lint` (part of `npm test`) and `npx pepr build` lint every .ts file with it.
// The import boundaries below are the layout's rule (docs/decisions/0012-shared-contracts.md):
//   api/           every word on the wire; imports nothing of ours but api/, and no framework
//   lib/           plumbing any workload may use; imports api/ and lib/, and no framework
//   capabilities/  the Pepr module; imports api/, lib/ and capabilities/, never a companion; inside
//                  it, each folder imports the shared rules (rules/) and only what CAPABILITY_FOLDERS
//                  allows, the binding table (capabilities/*.ts) all (docs/decisions/0035)
//   harness/, cache-agent/, custodian/, orchestrator/, egress/, effector/   the companions; each imports api/, lib/ and
//                  itself, never a capability and never another companion (one exception below)
//   dev/, scripts/, bench/, test/   tooling: may import anything; product code never imports them
//   clients/       the API's clients, each its own package: imports its own folder and Node's
//                  modules alone (docs/decisions/0061-clients-beyond-typescript.md)
import tsPlugin from "@typescript-eslint/eslint-plugin";
import tsParser from "@typescript-eslint/parser";
import js from "@eslint/js";

/** An import path reaching the top-level folder `name`: only `../` steps before it (a folder of that
 * name inside another, such as api/custodian-config.ts, is not it). */
const folder = (name) => `^(\\.\\./)+${name}(/|$)|^\\./${name}/`;

const TOOLING = ["dev", "scripts", "bench", "test", "examples"];
const COMPANIONS = ["harness", "cache-agent", "custodian", "orchestrator", "egress", "effector"];

const LAYOUT = "docs/decisions/0012-shared-contracts.md";
const CONTROLLERS = "docs/decisions/0035-one-controller-style.md";
const CLIENTS = "docs/decisions/0061-clients-beyond-typescript.md";

/**
 * Packages only the Pepr module may load. A companion imports lib/ and api/, so a framework there
 * would load into every companion (lib/operator-metrics.ts is given Pepr's collector instead).
 * kubernetes-fluent-client is not one: it is the Kubernetes client the companions use too, and
 * loads no Pepr.
 */
const FRAMEWORKS = ["pepr"];

/** Patterns refusing the given top-level folders, saying why. */
const folders = (names, why, decision = LAYOUT) =>
  names.map((f) => ({ regex: folder(f), message: `${why} (${decision})` }));

/** Patterns refusing the given packages (and any file inside them), saying why. */
const packages = (names, why, decision = LAYOUT) =>
  names.map((p) => ({ regex: `^${p}(/|$)`, message: `${why} (${decision})` }));

/** A no-restricted-imports rule made of these patterns. */
const refuse = (...patterns) => ["error", { patterns: patterns.flat() }];

/**
 * capabilities/: which of its folders each folder may import besides itself (decision 0035); every
 * folder of capabilities/ is listed (test/unit/boundaries.test.ts checks).
 * rules/ is the neutral home of the rules both the webhooks (admission/) and the reconcile
 * (sandbox/gate.ts) hold a Sandbox and its pod to, so neither imports the other; the Repo
 * controller adds to the Sandbox controller's pods and Ready, never the reverse. Only the binding
 * table (capabilities/bindings.ts) joins them.
 */
export const CAPABILITY_FOLDERS = {
  rules: [],
  admission: ["rules"],
  sandbox: ["rules"],
  repo: ["rules", "sandbox"],
};

/**
 * orchestrator/: which of its rooms each room may import besides itself, so no room imports one
 * that imports it back: the registry's room (workspaces/) knows neither the API nor the Agents, the
 * Agents' room (agents/) knows the workspaces, the API's room (http/) both; local/ (local mode's
 * Harness and cache) none. replicas/ (which replica owns which workspace, decision 0079) imports
 * none, so every room that acts on a workspace may ask it. Its top-level files (main.ts,
 * tokens.ts) and api/ join them.
 */
export const ORCHESTRATOR_ROOMS = {
  workspaces: ["replicas"],
  agents: ["workspaces", "replicas"],
  effects: ["workspaces", "agents", "replicas"],
  http: ["agents", "workspaces", "effects", "replicas"],
  local: [],
  replicas: [],
};

/** Patterns refusing, from a room of orchestrator/, every other room but `allowed`. */
const orchestratorRooms = (self) => {
  const refused = Object.keys(ORCHESTRATOR_ROOMS).filter((r) => r !== self && !ORCHESTRATOR_ROOMS[self].includes(r));
  if (!refused.length) return [];
  const allowed = ORCHESTRATOR_ROOMS[self];
  const why =
    `orchestrator/${self}/ imports ${allowed.length ? allowed.map((a) => `${a}/`).join(" and ") : "none"} of ` +
    "orchestrator/'s rooms, never one that imports it back: pass in what it needs";
  return [
    { regex: `^\\.\\./(${refused.join("|")})(/|$)`, message: `${why} (${LAYOUT})` },
    { regex: `^(\\.\\./)+orchestrator/(${refused.join("|")})(/|$)`, message: `${why} (${LAYOUT})` },
  ];
};

/** Patterns refusing, from a folder of capabilities/, every other part of capabilities/ but `allowed`. */
const capabilityParts = (self, allowed, why) => {
  const ok = [self, ...allowed].join("|");
  return [
    // ../<part>: a sibling folder, or a file directly in capabilities/ (the binding table).
    { regex: `^\\.\\./(?!(${ok})(/|$))[^./]`, message: `${why} (${CONTROLLERS})` },
    // ../../capabilities/<part>: the same, the long way round.
    { regex: `^(\\.\\./)+capabilities/(?!(${ok})/)`, message: `${why} (${CONTROLLERS})` },
  ];
};

/** Patterns refusing, from companion `self`, a capability, another companion and the tooling. */
const companionFolders = (self) =>
  folders(
    ["capabilities", ...COMPANIONS.filter((c) => c !== self), ...TOOLING],
    `${self}/ imports the shared home (api/, lib/) and itself, never a capability or another companion`,
  );

const NEVER_FROM_THE_MODULE = folders(
  [...COMPANIONS, ...TOOLING],
  "the Pepr module never imports a companion workload or tooling",
);

export const boundaries = [
  {
    files: ["api/**/*.ts"],
    rules: {
      "no-restricted-imports": refuse(
        folders(
          ["lib", "capabilities", ...COMPANIONS, ...TOOLING],
          "api/ holds the words on the wire and imports only api/",
        ),
        packages(FRAMEWORKS, "api/ loads no framework: every workload imports it, and Pepr is the module's alone"),
      ),
    },
  },
  {
    files: ["lib/**/*.ts"],
    rules: {
      "no-restricted-imports": refuse(
        folders(["capabilities", ...COMPANIONS, ...TOOLING], "lib/ is shared plumbing: it imports api/ and lib/ only"),
        packages(
          FRAMEWORKS,
          "lib/ loads no framework: every workload imports it, and Pepr is the module's alone (pass in what needs it)",
        ),
      ),
    },
  },
  {
    // A client builds, tests and ships on its own: nothing of the repository's, no package at run time.
    files: ["clients/**/*.ts"],
    rules: {
      "no-restricted-imports": refuse(
        folders(
          ["api", "lib", "capabilities", ...COMPANIONS, ...TOOLING],
          "clients/ build on their own: a client imports its own package and Node's modules, nothing else",
          CLIENTS,
        ),
        [
          {
            regex: "^(?!node:|\\.)",
            message: `a client needs no package at run time: Node's own modules (${CLIENTS})`,
          },
        ],
      ),
    },
  },
  {
    files: ["capabilities/**/*.ts", "pepr.ts"],
    rules: { "no-restricted-imports": refuse(NEVER_FROM_THE_MODULE) },
  },
  ...Object.entries(CAPABILITY_FOLDERS).map(([self, allowed]) => ({
    files: [`capabilities/${self}/**/*.ts`],
    rules: {
      "no-restricted-imports": refuse(
        NEVER_FROM_THE_MODULE,
        capabilityParts(
          self,
          allowed,
          allowed.length
            ? `capabilities/${self}/ imports ${allowed.map((a) => `${a}/`).join(" and ")} of capabilities/, nothing else: the binding table joins the rest`
            : `capabilities/${self}/ is the neutral home of the shared rules: it imports api/, lib/ and itself`,
        ),
        // The rules are pure and run in every process: no framework.
        self === "rules" ? packages(FRAMEWORKS, "capabilities/rules/ is pure and loads no framework", CONTROLLERS) : [],
      ),
    },
  })),
  ...COMPANIONS.map((self) => ({
    files: [`${self}/**/*.{ts,mts}`],
    rules: { "no-restricted-imports": refuse(companionFolders(self)) },
  })),
  // A later block's rule replaces an earlier one's for the same file: each room's restates its
  // companion's patterns.
  ...Object.keys(ORCHESTRATOR_ROOMS).map((room) => ({
    files: [`orchestrator/${room}/**/*.ts`],
    rules: { "no-restricted-imports": refuse(companionFolders("orchestrator"), orchestratorRooms(room)) },
  })),
  {
    // Local mode runs the real Harness beside the Orchestrator, outside any cluster: the one place a
    // companion starts another (docs/decisions/0012). The Harness never imports the Orchestrator.
    files: ["orchestrator/local/local-harness.ts"],
    rules: {
      "no-restricted-imports": refuse(
        folders(
          ["capabilities", "cache-agent", "custodian", "egress", "effector", ...TOOLING],
          "orchestrator/local/local-harness.ts may start the Harness, nothing else outside the shared home",
        ),
        orchestratorRooms("local"),
      ),
    },
  },
];

export default [
  { ignores: ["**/node_modules", "**/dist", "**/build-test", "api/crd/generated/**"] },
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
    files: ["**/*.{ts,mts}"],
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
