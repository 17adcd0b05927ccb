// How a refusal names a field: the spelling a client can find in its own body. Zod-free, so the
// Custodian's config parser needs no more of zod than zod/mini (docs/decisions/0044-the-custodian-starts-small.md).

/** `slots[0].key`; `body` for the whole. */
export function fieldPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return "body";
  return path.map((p, i) => (typeof p === "number" ? `[${p}]` : `${i === 0 ? "" : "."}${String(p)}`)).join("");
}
