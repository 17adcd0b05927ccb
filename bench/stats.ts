// What every benchmark computes: nearest-rank percentiles, two-decimal figures, a pause.

/** The p-th percentile (nearest rank) of already sorted values; NaN for none. */
export const percentile = (sorted: readonly number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] : NaN;

/** Ascending, as a copy. */
export const sorted = (values: readonly number[]) => [...values].sort((a, b) => a - b);

export const round = (n: number) => Math.round(n * 100) / 100;

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
