// CI's closing line (.ci/run, test/summary-reporter.js): each tier's counts, and a tier whose global
// setup failed, or that never began, said as such rather than left out of a clean count. One test
// runs jest itself on a tier whose global setup throws, the case the design rests on: jest then
// calls no reporter at all, so only the setup's own `started` line tells what happened. The cluster
// tier (test/cluster/supervision.sh) is run with a stand-in cluster.sh whose `up` fails, and one
// whose cluster has none of its components, to see both failures reach the closing line.
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jestTiers, readLines, summarize, testTiers, type SummaryLine } from "../summary-reporter";

const ROOT = join(__dirname, "..", "..");
const TIERS = ["unit", "integration", "node"];
const started = (tier: string, by: "setup" | "reporter"): SummaryLine => ({ tier, started: by });
const totals = (tier: string, passed: number, failed = 0, skipped = 0): SummaryLine => ({
  tier,
  passed,
  failed,
  skipped,
});

describe("summarize", () => {
  it("counts each tier that reported, and all of them in the totals", () => {
    const lines = [
      started("unit", "reporter"),
      totals("unit", 900),
      started("integration", "setup"),
      started("integration", "reporter"),
      totals("integration", 300, 2),
      started("node", "setup"),
      started("node", "reporter"),
      totals("node", 40, 0, 1),
    ];
    expect(summarize(lines, TIERS)).toEqual([
      "unit: 900 passed, 0 failed",
      "integration: 300 passed, 2 failed",
      "node: 40 passed, 0 failed, 1 skipped",
      "tests: 1240 passed, 2 failed, 1 skipped in 3 of 3 tiers",
    ]);
  });

  it("says a tier's setup failed, and the tiers after it never ran, instead of a clean count", () => {
    const lines = [started("unit", "reporter"), totals("unit", 900), started("integration", "setup")];
    expect(summarize(lines, TIERS)).toEqual([
      "unit: 900 passed, 0 failed",
      "integration: setup failed, 0 run",
      "node: not run",
      "tests: 900 passed, 0 failed in 1 of 3 tiers (integration: setup failed, 0 run; node: not run)",
    ]);
  });

  it("tells a tier that stopped after its setup, before reporting, from one whose setup failed", () => {
    const lines = [totals("unit", 5), started("integration", "setup"), started("integration", "reporter")];
    expect(summarize(lines, TIERS)[1]).toBe("integration: stopped before its totals, none counted");
  });

  it("says every tier did not run when nothing was written (lint or npm ci failed first)", () => {
    expect(summarize([], TIERS)).toEqual([
      "unit: not run",
      "integration: not run",
      "node: not run",
      "tests: 0 passed, 0 failed in 0 of 3 tiers (unit: not run; integration: not run; node: not run)",
    ]);
  });

  it("names the tiers jest.config.js runs, in npm test's order", () => {
    expect(jestTiers()).toEqual(["unit", "integration", "kube-1.34", "node"]);
  });

  it("names every tier npm test runs, the cluster tier after the jest ones", () => {
    expect(testTiers()).toEqual([...jestTiers(), "cluster"]);
  });

  it("counts the cluster tier as a jest tier, and says it when it never ran", () => {
    const tiers = ["node", "cluster"];
    expect(
      summarize(
        [totals("node", 40), started("cluster", "setup"), started("cluster", "reporter"), totals("cluster", 2)],
        tiers,
      ),
    ).toEqual([
      "node: 40 passed, 0 failed",
      "cluster: 2 passed, 0 failed",
      "tests: 42 passed, 0 failed in 2 of 2 tiers",
    ]);
    expect(summarize([totals("node", 40, 1)], tiers)).toEqual([
      "node: 40 passed, 1 failed",
      "cluster: not run",
      "tests: 40 passed, 1 failed in 1 of 2 tiers (cluster: not run)",
    ]);
  });

  it("counts no line that names no tier", () => {
    const untiered = { passed: 2, failed: 0, skipped: 0 } as unknown as SummaryLine;
    expect(summarize([totals("unit", 1), untiered], ["unit"])).toEqual([
      "unit: 1 passed, 0 failed",
      "tests: 1 passed, 0 failed in 1 of 1 tiers",
    ]);
  });
});

describe("the cluster tier's lines, written by test/cluster/supervision.sh", () => {
  const dir = mkdtempSync(join(tmpdir(), "jr2-ci-cluster-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** supervision.sh run with a stand-in cluster.sh (`script`, bash): its exit and the lines it wrote. */
  const supervision = (name: string, script: string) => {
    const standIn = join(dir, `${name}.sh`);
    writeFileSync(standIn, `#!/usr/bin/env bash\n${script}\n`);
    chmodSync(standIn, 0o755);
    const file = join(dir, `${name}.jsonl`);
    const run = spawnSync("bash", [join(ROOT, "test", "cluster", "supervision.sh")], {
      encoding: "utf8",
      env: { ...process.env, JR2_TEST_SUMMARY: file, JR2_SUPERVISION_CLUSTER_SH: standIn, TMPDIR: dir },
      timeout: 30_000,
    });
    return { status: run.status, lines: readLines(file), output: run.stdout + run.stderr };
  };

  it("a cluster that never comes up: its setup's line alone, so the closing line says its setup failed", () => {
    const run = supervision("never-up", 'case $1 in up) echo "no kube-apiserver" >&2; exit 1 ;; *) exit 0 ;; esac');
    expect(run.status).not.toBe(0);
    expect(run.lines).toEqual([{ tier: "cluster", started: "setup" }]);
    expect(summarize([totals("node", 40), ...run.lines], ["node", "cluster"])).toEqual([
      "node: 40 passed, 0 failed",
      "cluster: setup failed, 0 run",
      "tests: 40 passed, 0 failed in 1 of 2 tiers (cluster: setup failed, 0 run)",
    ]);
  });

  it("a test that fails: counted failed, the one after it skipped, and the closing line counts both", () => {
    // Up, and its status says so, but none of its components has a pid file: (a) fails at once.
    const run = supervision(
      "no-components",
      [
        "case $1 in",
        "  status) echo 'supervisor: running (stand-in)' ;;",
        "  env) echo 'KUBECONFIG=/nonexistent KUBECTL=false' ;;",
        "esac",
        "exit 0",
      ].join("\n"),
    );
    expect([run.status, run.output]).toEqual([1, expect.stringContaining("FAILED")]);
    expect(run.lines).toEqual([
      { tier: "cluster", started: "setup" },
      { tier: "cluster", started: "reporter" },
      { tier: "cluster", passed: 0, failed: 1, skipped: 1 },
    ]);
    expect(summarize(run.lines, ["cluster"])).toEqual([
      "cluster: 0 passed, 1 failed, 1 skipped",
      "tests: 0 passed, 1 failed, 1 skipped in 1 of 1 tiers",
    ]);
  });
});

describe("the reporter and a tier's setup, run by jest", () => {
  const dir = mkdtempSync(join(tmpdir(), "jr2-ci-summary-"));
  const reporter = join(ROOT, "test", "summary-reporter.js");
  const file = join(dir, "summary.jsonl");
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  beforeAll(() => {
    writeFileSync(
      join(dir, "setup.js"),
      `module.exports = async () => { require(${JSON.stringify(reporter)}).tierStarted("broken"); throw new Error("setup broke"); };\n`,
    );
    writeFileSync(join(dir, "a.test.js"), 'test("runs", () => expect(1).toBe(1));\n');
    const project = (name: string, setup: boolean) => ({
      displayName: name,
      rootDir: dir,
      testMatch: [join(dir, "*.test.js")],
      ...(setup ? { globalSetup: join(dir, "setup.js") } : {}),
    });
    writeFileSync(
      join(dir, "jest.config.js"),
      `module.exports = ${JSON.stringify({
        rootDir: dir,
        cacheDirectory: join(dir, "cache"),
        reporters: [reporter],
        projects: [project("fine", false), project("broken", true)],
      })};\n`,
    );
  });

  const jest = (project: string) =>
    spawnSync(
      process.execPath,
      [
        join(ROOT, "node_modules", "jest", "bin", "jest.js"),
        "-c",
        join(dir, "jest.config.js"),
        "--selectProjects",
        project,
      ],
      { cwd: dir, encoding: "utf8", env: { ...process.env, JR2_TEST_SUMMARY: file } },
    );

  it("a tier that runs: the reporter names it by its project, its start and then its totals", () => {
    expect(jest("fine").status).toBe(0);
    expect(readLines(file)).toEqual([
      { tier: "fine", started: "reporter" },
      { tier: "fine", passed: 1, failed: 0, skipped: 0 },
    ]);
  }, 60_000);

  it("a tier whose setup throws reaches no reporter: its setup's own line makes the summary say so", () => {
    const run = jest("broken");
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain("setup broke");
    // Only the setup's line was added: the reporter was never built, so wrote neither a start nor totals.
    expect(readLines(file).slice(2)).toEqual([{ tier: "broken", started: "setup" }]);
    expect(summarize(readLines(file), ["fine", "broken", "later"])).toEqual([
      "fine: 1 passed, 0 failed",
      "broken: setup failed, 0 run",
      "later: not run",
      "tests: 1 passed, 0 failed in 1 of 3 tiers (broken: setup failed, 0 run; later: not run)",
    ]);
  }, 60_000);
});
