// The unit tier's one-time setup: its start written for CI's closing line (test/summary-reporter.js,
// decision 0050), then the Node check: an older Node stops the tier here, saying what to install
// (docs/decisions/0052-node-24-runtime.md).
import { requireNode } from "../../dev/node-version";
import { tierStarted } from "../summary-reporter";

export default function globalSetup(): void {
  tierStarted("unit");
  requireNode();
}
