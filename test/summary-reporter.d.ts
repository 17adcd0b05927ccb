// The types of test/summary-reporter.js's helpers, for the global setups and the unit test.
export type SummaryLine =
  | { tier: string; started: "setup" | "reporter" }
  | { tier: string; passed: number; failed: number; skipped: number };
export const SUMMARY_ENV: "JR2_TEST_SUMMARY";
export function tierStarted(tier: string, env?: NodeJS.ProcessEnv): void;
export function summarize(lines: readonly SummaryLine[], tiers: readonly string[]): string[];
export function jestTiers(): string[];
export function testTiers(): string[];
export function readLines(file: string): SummaryLine[];
