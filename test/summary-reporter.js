// Appends each jest run's totals to $JR2_TEST_SUMMARY (one JSON line per tier), so .ci/run can
// close with one plain "N passed, N failed" line for both tiers.
const { appendFileSync } = require("node:fs");

module.exports = class SummaryReporter {
  onRunComplete(_contexts, results) {
    const file = process.env.JR2_TEST_SUMMARY;
    if (!file) return;
    const line = {
      passed: results.numPassedTests,
      failed: results.numFailedTests + results.numRuntimeErrorTestSuites,
      skipped: results.numPendingTests + results.numTodoTests,
    };
    appendFileSync(file, JSON.stringify(line) + "\n");
  }
};
