// The import boundaries (eslint.config.mjs `boundaries`, docs/decisions/0012 and 0035): each
// crossing the layout forbids is refused by the linter, and each import it allows passes. ESLint
// runs in a child Node (the config is an ES module jest's loader cannot evaluate), on the rules
// alone. And what the rules promise, checked where it matters: loading lib/ and api/ loads no Pepr.
import { execFileSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { join, relative } from "node:path";

const ROOT = join(__dirname, "..", "..");

type Verdict = { filePath: string; errors: string[] };

type Linted = { verdicts: Verdict[]; capabilityFolders: string[]; orchestratorRooms: string[] };

function lint(cases: Array<{ filePath: string; code: string }>): Linted {
  const script = `
    import { ESLint } from "eslint";
    import tsParser from "@typescript-eslint/parser";
    import { CAPABILITY_FOLDERS, ORCHESTRATOR_ROOMS, boundaries } from "./eslint.config.mjs";
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
    process.stdout.write(
      JSON.stringify({
        verdicts: out,
        capabilityFolders: Object.keys(CAPABILITY_FOLDERS),
        orchestratorRooms: Object.keys(ORCHESTRATOR_ROOMS),
      }),
    );
  `;
  const stdout = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
    cwd: ROOT,
    env: { ...process.env, CASES: JSON.stringify(cases) },
    encoding: "utf8",
  });
  return JSON.parse(stdout) as Linted;
}

/** [file, import, the decision its refusal cites (0012 unless said)] */
const forbidden: Array<[string, string, string?]> = [
  // The Orchestrator's rooms (eslint.config.mjs ORCHESTRATOR_ROOMS): none imports one that imports it back.
  ["orchestrator/workspaces/probe.ts", "../http/api-server"],
  ["orchestrator/workspaces/probe.ts", "../agents/turns"],
  ["orchestrator/workspaces/probe.ts", "../../orchestrator/http/api-server"],
  ["orchestrator/agents/probe.ts", "../http/api-server"],
  ["orchestrator/local/probe.ts", "../workspaces/registry"],
  // A room's rule keeps its companion's.
  ["orchestrator/workspaces/probe.ts", "../../harness/harness-server"],
  // A client builds on its own (decision 0061): nothing of the repository's, no package.
  ["clients/typescript/src/probe.ts", "../../../api/orchestrator-routes", "0061"],
  ["clients/typescript/test/probe.ts", "../../../orchestrator/tokens", "0061"],
  ["clients/typescript/src/probe.ts", "undici", "0061"],
  ["capabilities/sandbox/probe.ts", "../../orchestrator/tokens"],
  ["capabilities/sandbox/probe.ts", "../../harness/harness-server"],
  ["capabilities/sandbox/probe.ts", "../../dev/kubectl"],
  ["pepr.ts", "./orchestrator/main"],
  ["harness/probe.ts", "../orchestrator/tokens"],
  ["harness/probe.ts", "../capabilities/sandbox/pod"],
  ["orchestrator/probe.ts", "../capabilities/repo/caches"],
  ["orchestrator/probe.ts", "../harness/harness-server"],
  ["orchestrator/probe.ts", "../cache-agent/bare-checkouts"],
  ["cache-agent/probe.ts", "../capabilities/repo/caches"],
  ["cache-agent/probe.ts", "../orchestrator/workspaces/fence"],
  ["custodian/probe.ts", "../harness/attach-git"],
  // The Effector (decision 0070) is a room of its own: api/, lib/ and itself.
  ["effector/probe.ts", "../orchestrator/tokens"],
  ["effector/probe.ts", "../custodian/egress-via"],
  ["effector/probe.ts", "../harness/attach-git"],
  ["effector/probe.ts", "../capabilities/sandbox/pod"],
  ["orchestrator/probe.ts", "../effector/server"],
  ["egress/probe.ts", "../orchestrator/workspaces/pod-config"],
  ["egress/probe.ts", "../capabilities/sandbox/pod"],
  ["api/probe.ts", "../lib/kube"],
  ["api/crd/probe.ts", "../../capabilities/sandbox/pod"],
  ["lib/probe.ts", "../capabilities/sandbox/status"],
  ["lib/probe.ts", "../orchestrator/tokens"],
  // lib/ and api/ load no framework: every workload imports them.
  ["lib/probe.ts", "pepr"],
  ["lib/probe.ts", "pepr/dist/lib"],
  ["api/probe.ts", "pepr"],
  ["api/crd/probe.ts", "pepr"],
  // Inside capabilities/: the shared rules are the neutral home; admission and the Sandbox
  // controller never import each other, the Sandbox controller never the Repo controller, and
  // only the binding table joins them (decision 0035).
  ["capabilities/sandbox/probe.ts", "../admission/reviews", "0035"],
  ["capabilities/sandbox/probe.ts", "../repo/caches", "0035"],
  ["capabilities/sandbox/probe.ts", "../bindings", "0035"],
  ["capabilities/admission/probe.ts", "../sandbox/pod", "0035"],
  ["capabilities/admission/probe.ts", "../../capabilities/repo/repo-controller", "0035"],
  ["capabilities/repo/probe.ts", "../admission/reviews", "0035"],
  ["capabilities/rules/probe.ts", "../sandbox/hardening", "0035"],
  ["capabilities/rules/probe.ts", "../admission/violations", "0035"],
  ["capabilities/rules/probe.ts", "pepr", "0035"],
  ["capabilities/rules/probe.ts", "../../orchestrator/workspaces/compose"],
];

const allowed: Array<[string, string]> = [
  ["clients/typescript/src/probe.ts", "./api"],
  ["clients/typescript/src/probe.ts", "node:http"],
  ["clients/typescript/test/probe.ts", "../src/index"],
  ["examples/probe.ts", "../clients/typescript/src"],
  ["orchestrator/http/probe.ts", "../agents/turns"],
  ["orchestrator/http/probe.ts", "../workspaces/service"],
  ["orchestrator/agents/probe.ts", "../workspaces/sandbox-watch"],
  ["orchestrator/workspaces/probe.ts", "../tokens"],
  // The API's bodies and errors are words on the wire (decision 0057): every room and a client read them from api/.
  ["orchestrator/workspaces/probe.ts", "../../api/orchestrator-schemas"],
  ["api/probe.ts", "./orchestrator-schemas"],
  ["orchestrator/workspaces/probe.ts", "./fence"],
  ["capabilities/sandbox/probe.ts", "../../api/wire"],
  ["capabilities/sandbox/probe.ts", "../../lib/queue"],
  ["harness/probe.ts", "../api/attach"],
  ["harness/probe.ts", "../lib/http-json"],
  ["orchestrator/probe.ts", "../api/conditions"],
  ["orchestrator/workspaces/probe.ts", "./fence"],
  ["orchestrator/local/local-harness.ts", "../../harness/harness-server"],
  ["cache-agent/probe.ts", "../api/repo-identity"],
  ["egress/probe.ts", "../api/egress-point"],
  ["effector/probe.ts", "../api/effector-wire"],
  ["effector/probe.ts", "../lib/redact"],
  ["effector/probe.ts", "./guard"],
  ["egress/probe.ts", "../lib/kube"],
  ["api/crd/probe.ts", "../wire"],
  ["lib/probe.ts", "../api/env"],
  ["dev/probe.ts", "../orchestrator/main"],
  ["test/unit/probe.ts", "../../capabilities/sandbox/pod"],
  ["orchestrator/probe.ts", "../api/hardening"],
  ["lib/probe.ts", "kubernetes-fluent-client"],
  ["api/crd/probe.ts", "kubernetes-fluent-client"],
  ["lib/probe.ts", "pepr-like"],
  ["pepr.ts", "pepr"],
  ["capabilities/probe.ts", "./sandbox/sandbox-controller"],
  ["capabilities/probe.ts", "./admission/reviews"],
  ["capabilities/sandbox/probe.ts", "pepr"],
  ["capabilities/sandbox/probe.ts", "../rules/sandbox-rules"],
  ["capabilities/sandbox/probe.ts", "./sandbox-controller"],
  ["capabilities/admission/probe.ts", "../rules/pods"],
  ["capabilities/repo/probe.ts", "../sandbox/status"],
  ["capabilities/repo/probe.ts", "../rules/violations"],
  ["capabilities/rules/probe.ts", "./violations"],
  ["capabilities/rules/probe.ts", "../../api/hardening"],
  ["capabilities/rules/probe.ts", "../../lib/duration"],
];

const code = (spec: string) => `import { x } from "${spec}";\nexport const y = x;\n`;

describe("import boundaries", () => {
  const { verdicts, capabilityFolders, orchestratorRooms } = lint(
    [...forbidden, ...allowed].map(([filePath, spec]) => ({ filePath, code: code(spec) })),
  );

  it.each(forbidden.map(([file, spec, decision], i) => [file, spec, decision ?? "0012", i] as const))(
    "%s may not import %s (decision %s)",
    (_file, _spec, decision, i) => {
      const v = verdicts[i];
      expect(v.errors).toHaveLength(1);
      expect(v.errors[0]).toMatch(new RegExp(`^no-restricted-imports: .*docs/decisions/${decision}-`));
    },
  );

  it.each(allowed.map((c, i) => [...c, forbidden.length + i] as const))("%s may import %s", (_file, _spec, i) => {
    expect(verdicts[i].errors).toEqual([]);
  });

  it("says, for every room of orchestrator/, which of the others it may import", () => {
    const present = readdirSync(join(ROOT, "orchestrator"), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
    expect([...orchestratorRooms].sort()).toEqual(present.sort());
  });

  it("says, for every folder of capabilities/, which of the others it may import", () => {
    const present = readdirSync(join(ROOT, "capabilities"), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
    expect([...capabilityFolders].sort()).toEqual(present.sort());
  });
});

/** Every .ts file under a folder of the repository, as a path from its root. */
const tsFiles = (dir: string): string[] =>
  readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts"))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
    .sort();

describe("lib/ and api/ load no framework", () => {
  // Required one by one in a plain Node (tsx's CommonJS loader), as a companion loads them; after
  // each, Node's module cache says whether Pepr came with it. A capability that imports Pepr is
  // required last, so the check is seen to notice Pepr when it is there.
  it("requiring any file of lib/ or api/ loads no Pepr", () => {
    const files = [...tsFiles("lib"), ...tsFiles("api")];
    const script = `
      const path = require("node:path");
      const pepr = () =>
        Object.keys(require.cache).filter((k) => k.split(path.sep).join("/").includes("/node_modules/pepr/")).length;
      const out = {};
      for (const f of JSON.parse(process.env.FILES)) {
        require("./" + f);
        out[f] = pepr();
      }
      require("./capabilities/admission/review-server.ts");
      out.control = pepr();
      console.log(JSON.stringify(out));
    `;
    const stdout = execFileSync(process.execPath, ["--require", "tsx/cjs", "-e", script], {
      cwd: ROOT,
      env: { ...process.env, FILES: JSON.stringify(files) },
      encoding: "utf8",
    });
    const loaded = JSON.parse(stdout.trim().split("\n").pop()!) as Record<string, number>;
    expect(files).toContain("lib/api-writer.ts");
    expect(files).toContain("lib/operator-metrics.ts");
    expect(loaded.control).toBeGreaterThan(0);
    expect(files.filter((f) => loaded[f] !== 0)).toEqual([]);
  }, 180_000);
});
