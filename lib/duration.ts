// Go durations (time.ParseDuration), as spec.idleTimeout and Repo spec.interval are written.
import { goDurationMs } from "../api/go-duration";

/** Milliseconds, or undefined when the text is not a Go duration. */
export const parseGoDuration: (text: string) => number | undefined = goDurationMs;

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
