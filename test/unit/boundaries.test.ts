// The import boundaries (eslint.config.mjs `boundaries`, docs/decisions/0012): each crossing the
// layout forbids is refused by the linter, and each import it allows passes. ESLint runs in a
// child Node (the config is an ES module jest's loader cannot evaluate), on the rules alone.
import { execFileSync } from "node:child_process";
import { join } from "node:path";

const ROOT = join(__dirname, "..", "..");

type Verdict = { filePath: string; errors: string[] };

function lint(cases: Array<{ filePath: string; code: string }>): Verdict[] {
  const script = `
    import { ESLint } from "eslint";
    import tsParser from "@typescript-eslint/parser";
    import { boundaries } from "./eslint.config.mjs";
    const eslint = new ESLint({
      cwd: process.cwd(),
      overrideConfigFile: true,
      overrideConfig: [{ files: ["**/*.ts"], languageOptions: { parser: tsParser } }, ...boundaries],
    });
    const cases = JSON.parse(process.env.CASES);
    const out = [];
    for (const c of cases) {
      const [r] = await eslint.lintText(c.code, { filePath: c.filePath });
      out.push({ filePath: c.filePath, errors: r.messages.map((m) => m.ruleId + ": " + m.message) });
    }
    process.stdout.write(JSON.stringify(out));
  `;
  const stdout = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd: ROOT,
    env: { ...process.env, CASES: JSON.stringify(cases) },
    encoding: "utf8",
  });
  return JSON.parse(stdout) as Verdict[];
}

const forbidden: Array<[string, string]> = [
  ["capabilities/sandbox/probe.ts", "../../orchestrator/api"],
  ["capabilities/sandbox/probe.ts", "../../harness/server"],
  ["capabilities/sandbox/probe.ts", "../../dev/kubectl"],
  ["pepr.ts", "./orchestrator/main"],
  ["harness/probe.ts", "../orchestrator/api"],
  ["harness/probe.ts", "../capabilities/sandbox/pod"],
  ["orchestrator/probe.ts", "../capabilities/repo/caches"],
  ["orchestrator/probe.ts", "../harness/server"],
  ["orchestrator/probe.ts", "../cache-agent/git"],
  ["cache-agent/probe.ts", "../capabilities/repo/caches"],
  ["cache-agent/probe.ts", "../orchestrator/fence"],
  ["custodian/probe.ts", "../harness/attach"],
  ["api/probe.ts", "../lib/kube"],
  ["api/crd/probe.ts", "../../capabilities/sandbox/pod"],
  ["lib/probe.ts", "../capabilities/sandbox/status"],
  ["lib/probe.ts", "../orchestrator/api"],
];

const allowed: Array<[string, string]> = [
  ["capabilities/sandbox/probe.ts", "../../api/wire"],
  ["capabilities/sandbox/probe.ts", "../../lib/queue"],
  ["capabilities/sandbox/probe.ts", "../repo/caches"],
  ["harness/probe.ts", "../api/attach"],
  ["harness/probe.ts", "../lib/http-json"],
  ["orchestrator/probe.ts", "../api/conditions"],
  ["orchestrator/probe.ts", "./fence"],
  ["orchestrator/local/local-harness.ts", "../../harness/server"],
  ["cache-agent/probe.ts", "../api/repo-identity"],
  ["api/crd/probe.ts", "../wire"],
  ["lib/probe.ts", "../api/env"],
  ["dev/probe.ts", "../orchestrator/main"],
  ["test/unit/probe.ts", "../../capabilities/sandbox/pod"],
];

const code = (spec: string) => `import { x } from "${spec}";\nexport const y = x;\n`;

describe("import boundaries", () => {
  const verdicts = lint([...forbidden, ...allowed].map(([filePath, spec]) => ({ filePath, code: code(spec) })));

  it.each(forbidden.map((c, i) => [...c, i] as const))("%s may not import %s", (_file, _spec, i) => {
    const v = verdicts[i];
    expect(v.errors).toHaveLength(1);
    expect(v.errors[0]).toMatch(/^no-restricted-imports: .*docs\/decisions\/0012/);
  });

  it.each(allowed.map((c, i) => [...c, forbidden.length + i] as const))("%s may import %s", (_file, _spec, i) => {
    expect(verdicts[i].errors).toEqual([]);
  });
});
