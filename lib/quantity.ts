// Kubernetes quantities (`500m`, `2`, `192Mi`, `1.5Gi`) read into numbers and written back, for the
// arithmetic of a Size split (orchestrator/workspaces/size.ts). Pure. Only the plain decimal spellings with a
// suffix are read (no exponent form): what the Orchestrator's own Size schema admits.

const SUFFIX: Record<string, number> = {
  "": 1,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const QUANTITY = /^(\d+(?:\.\d+)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/;

/** The quantity's value in base units (cores, bytes); undefined for a spelling not read here. */
export function quantityValue(text: string): number | undefined {
  const m = QUANTITY.exec(text.trim());
  if (!m) return undefined;
  return Number(m[1]) * SUFFIX[m[2] ?? ""]!;
}

/** `x` without the binary float's noise (8.3 * 1e9 is 8300000000.000001), so a ceiling does not
 * add a unit a decimal spelling never had. */
const exact = (x: number) => {
  const whole = Math.round(x);
  return Math.abs(x - whole) <= Math.abs(x) * 1e-12 ? whole : x;
};

/** CPU in whole millicores (Kubernetes rounds a finer one up). */
export function milliCpu(text: string): number | undefined {
  const v = quantityValue(text);
  return v === undefined ? undefined : Math.ceil(exact(v * 1e3));
}

/** Memory (or storage) in whole bytes (a fraction of a byte rounds up). */
export function bytesOf(text: string): number | undefined {
  const v = quantityValue(text);
  return v === undefined ? undefined : Math.ceil(exact(v));
}

/** Millicores as a quantity: whole cores without a suffix, else `<n>m`. */
export const formatMilliCpu = (m: number): string => (m % 1000 === 0 ? String(m / 1000) : `${m}m`);

/** Bytes as a quantity in the largest binary unit that divides them. */
export function formatBytes(bytes: number): string {
  for (const unit of ["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"]) {
    const size = SUFFIX[unit]!;
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return String(bytes);
}
