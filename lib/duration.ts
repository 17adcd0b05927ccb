// Go durations (time.ParseDuration), as spec.idleTimeout and Repo spec.interval are written.
import { GO_DURATION } from "../api/crd/sources/common";

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds, or undefined when the text is not a Go duration. */
export function parseGoDuration(text: string): number | undefined {
  if (!GO_DURATION.test(text)) return undefined;
  let ms = 0;
  for (const [, n, unit] of text.matchAll(/([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(n) * UNIT_MS[unit];
  return ms;
}

/**
 * A positive Go duration from the environment, in milliseconds; `fallback` when unset or empty.
 * Throws an error naming the variable, its value and an example of a good one.
 */
export function envDuration(name: string, fallback: number, env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const ms = parseGoDuration(raw);
  if (ms === undefined || ms <= 0)
    throw new Error(`${name}=${JSON.stringify(raw)} is not a positive Go duration (say 90s, 5m or 1h)`);
  return ms;
}
