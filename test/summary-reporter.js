// CI's closing line (.ci/run): each tier's totals in $JR2_TEST_SUMMARY, one JSON line per event,
// and what became of a tier that never reported them. Jest builds its reporters only after the
// global setup, so a setup that throws reaches no reporter: each tier's global setup writes its own
// `started` line first (tierStarted), the reporter writes `started` again as its first test file
// starts (the setup passed) and the totals at onRunComplete. The cluster tier (test/cluster/
// supervision.sh, no jest) writes the same three lines itself. Run as a program, it prints the
// summary of a file for every tier npm test runs.
const { appendFileSync, existsSync, readFileSync } = require("node:fs");
const { join } = require("node:path");

const SUMMARY_ENV = "JR2_TEST_SUMMARY";

function append(line, env = process.env) {
  const file = env[SUMMARY_ENV];
  if (file) appendFileSync(file, JSON.stringify(line) + "\n");
}

/** A tier's global setup began (its first act, before anything that may throw). */
function tierStarted(tier, env = process.env) {
  append({ tier, started: "setup" }, env);
}

const count = (l) => `${l.passed} passed, ${l.failed} failed` + (l.skipped ? `, ${l.skipped} skipped` : "");

/**
 * The closing lines: one per tier in `tiers` (and any other that wrote a line), then the totals.
 * A tier's word: its counts; "setup failed, 0 run" when only its setup began; "stopped before its
 * totals" when it ran past the setup and never reported; "not run" when it never began.
 */
function summarize(lines, tiers) {
  const names = [...new Set([...tiers, ...lines.map((l) => l.tier).filter(Boolean)])];
  const words = names.map((tier) => {
    const mine = lines.filter((l) => l.tier === tier);
    const totals = mine.filter((l) => typeof l.passed === "number");
    if (totals.length) {
      const sum = (k) => totals.reduce((n, l) => n + (l[k] ?? 0), 0);
      return {
        tier,
        ran: true,
        text: count({ passed: sum("passed"), failed: sum("failed"), skipped: sum("skipped") }),
      };
    }
    if (mine.some((l) => l.started === "reporter")) return { tier, text: "stopped before its totals, none counted" };
    if (mine.some((l) => l.started === "setup")) return { tier, text: "setup failed, 0 run" };
    return { tier, text: "not run" };
  });
  const ran = words.filter((w) => w.ran);
  // Only a tier's totals count: a line that names no tier is counted under none, so not in the sum.
  const totals = lines.filter((l) => typeof l.passed === "number" && l.tier);
  const sum = (k) => totals.reduce((n, l) => n + (l[k] ?? 0), 0);
  const short = words.filter((w) => !w.ran).map((w) => `${w.tier}: ${w.text}`);
  return [
    ...words.map((w) => `${w.tier}: ${w.text}`),
    `tests: ${count({ passed: sum("passed"), failed: sum("failed"), skipped: sum("skipped") })} in ${ran.length} of ${words.length} tiers` +
      (short.length ? ` (${short.join("; ")})` : ""),
  ];
}

/** The jest tiers, in the order npm test runs them (jest.config.js's projects). */
function jestTiers() {
  return require(join(__dirname, "..", "jest.config.js")).projects.map((p) => p.displayName);
}

/**
 * The tiers npm test runs, in its order: each `npm run test:<tier>` of package.json's test script
 * (the jest projects by their displayName, and the cluster tier, a script), so a tier added there is
 * named in the closing line, as "not run" at least.
 */
function testTiers() {
  const script = require(join(__dirname, "..", "package.json")).scripts.test;
  return [...script.matchAll(/npm run test:(\S+)/g)].map((m) => m[1]);
}

/** The lines of a summary file; none when it was never written. */
function readLines(file) {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));
}

/** A project's name as jest.config.js gives it (displayName is a string there, an object once read). */
const nameOf = (config) => {
  const d = config?.displayName;
  return typeof d === "string" ? d : (d?.name ?? "all");
};

class SummaryReporter {
  // Jest gives a reporter no project names before its tests start (its global config does not carry
  // --selectProjects), so the tier is read from each test file's project.
  #began = new Set();

  onTestFileStart(test) {
    const tier = nameOf(test?.context?.config);
    if (this.#began.has(tier)) return;
    this.#began.add(tier);
    append({ tier, started: "reporter" });
  }

  onRunComplete(contexts, results) {
    // npm test runs one project a run, so a run is a tier; a run of several is counted under their names joined.
    const names = [...new Set([...(contexts ?? [])].map((c) => nameOf(c.config)))];
    append({
      tier: names.length ? names.join("+") : "all",
      passed: results.numPassedTests,
      failed: results.numFailedTests + results.numRuntimeErrorTestSuites,
      skipped: results.numPendingTests + results.numTodoTests,
    });
  }
}

module.exports = SummaryReporter;
module.exports.SUMMARY_ENV = SUMMARY_ENV;
module.exports.tierStarted = tierStarted;
module.exports.summarize = summarize;
module.exports.jestTiers = jestTiers;
module.exports.testTiers = testTiers;
module.exports.readLines = readLines;

if (require.main === module) {
  process.stdout.write(summarize(readLines(process.argv[2]), testTiers()).join("\n") + "\n");
}
