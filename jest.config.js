// Two tiers (docs/decisions/0004-jest.md). Both transform TypeScript with @swc/jest (fast, cached
// in jest's cache directory) and also transform the ESM-only packages pepr's CJS entry requires,
// which jest's module loader could not `require` before Node 24.9 (the tests now run on Node 24,
// decision 0052, but still take the transform rather than jest's own require(esm)); likewise the
// agent library the Harness runs on (pi, decision 0024) and typebox, its ESM-only schema package.
// Each tier's global setup first stops a Node older than package.json's engines (decision 0052).
const esm = [
  "kubernetes-fluent-client",
  "@kubernetes/client-node",
  "openid-client",
  "oauth4webapi",
  "jose",
  "@earendil-works",
  "typebox",
];

const swc = [
  "@swc/jest",
  {
    jsc: { parser: { syntax: "typescript" }, target: "es2022" },
    module: { type: "commonjs" },
    sourceMaps: "inline",
  },
];

const base = {
  transform: { "^.+\\.(t|mt|j|mj)s$": swc },
  transformIgnorePatterns: [`/node_modules/(?!(${esm.join("|")})/)`],
  // pi's packages export only an `import` entry: resolved with that condition.
  resolver: "<rootDir>/test/support/import-condition-resolver.js",
  // The Harness's ES-module facade of pi (harness/agents/pi-lib.mts), imported as ./pi-lib.mjs.
  moduleNameMapper: { "^(.*)/pi-lib\\.mjs$": "$1/pi-lib.mts" },
  moduleFileExtensions: ["ts", "mts", "js", "mjs", "json"],
  testEnvironment: "node",
};

/** @type {import('jest').Config} */
module.exports = {
  cacheDirectory: "<rootDir>/node_modules/.cache/jest",
  // A global option: per-project values are ignored. Waits inside tests carry their own deadlines.
  testTimeout: 60_000,
  reporters: ["default", "<rootDir>/test/summary-reporter.js"],
  projects: [
    {
      ...base,
      displayName: "unit",
      testMatch: ["<rootDir>/test/unit/**/*.test.ts"],
      globalSetup: "<rootDir>/test/unit/global-setup.ts",
    },
    {
      ...base,
      displayName: "integration",
      testMatch: ["<rootDir>/test/integration/**/*.test.ts"],
      globalSetup: "<rootDir>/test/integration/global-setup.ts",
      globalTeardown: "<rootDir>/test/integration/global-teardown.ts",
    },
    // Admission on a lone Kubernetes 1.34 API server (docs/decisions/0059-kubernetes-1-34.md): the
    // Sandbox defaults by the module's webhook, the held Sandboxes of the integration tier.
    {
      ...base,
      displayName: "kube-1.34",
      testMatch: ["<rootDir>/test/kube-1.34/**/*.test.ts"],
      globalSetup: "<rootDir>/test/kube-1.34/global-setup.ts",
      globalTeardown: "<rootDir>/test/kube-1.34/global-teardown.ts",
    },
    // The real node (docs/decisions/0040-real-node.md): fails, never skips, when it is off.
    {
      ...base,
      displayName: "node",
      testMatch: ["<rootDir>/test/node/**/*.test.ts"],
      globalSetup: "<rootDir>/test/node/global-setup.ts",
    },
  ],
};
