// Go durations as time.ParseDuration reads them (`90s`, `30m`, `1h30m`). Zod-free: the schemas
// (api/crd/sources/common.ts) and the Custodian's config (api/custodian-config.ts) both bound a
// duration with it, and lib/duration.ts reads one from the environment.

/** A Go duration as time.ParseDuration reads it. */
export const GO_DURATION = /^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$/;

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A Go duration in milliseconds, or undefined when the text is not one. */
export function goDurationMs(text: string): number | undefined {
  if (!GO_DURATION.test(text)) return undefined;
  let ms = 0;
  for (const [, n, unit] of text.matchAll(/([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(n) * UNIT_MS[unit];
  return ms;
}
