// The JSON merge patch (RFC 7386) that turns one status into another, or undefined when they are
// equal. Fields that disappeared are sent as null; arrays are replaced whole.
type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

const isObject = (v: unknown): v is Record<string, Json> => typeof v === "object" && v !== null && !Array.isArray(v);

export function mergePatch(from: unknown, to: unknown): Json | undefined {
  if (!isObject(from) || !isObject(to)) return deepEqual(from, to) ? undefined : ((to ?? null) as Json);
  const patch: Record<string, Json> = {};
  for (const k of Object.keys(from)) if (!(k in to) || to[k] === undefined) patch[k] = null;
  for (const [k, v] of Object.entries(to)) {
    if (v === undefined) continue;
    const d = k in from ? mergePatch(from[k], v) : v;
    if (d !== undefined) patch[k] = d;
  }
  return Object.keys(patch).length ? patch : undefined;
}

export const statusMergePatch = (from: object | undefined, to: object) => mergePatch(from ?? {}, to);

export function deepEqual(a: unknown, b: unknown): boolean {
  // Object.is: NaN equals itself (a hostile spec's NaN is the same NaN on a re-apply).
  if (a === b || Object.is(a, b)) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a).filter((k) => a[k] !== undefined);
    const kb = Object.keys(b).filter((k) => b[k] !== undefined);
    return ka.length === kb.length && ka.every((k) => deepEqual(a[k], b[k]));
  }
  return false;
}
