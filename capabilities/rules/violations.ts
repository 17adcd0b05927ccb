// A refusal's unit: where (a field path) and what to do about it. Messages name fields and Secret
// names, never values.
export type Violation = { path: string; message: string };

export const violation = (path: string, message: string): Violation => ({ path, message });

/** One line per violation, all at once, so one round trip shows everything to fix. */
export const describe = (what: string, vs: Violation[]) =>
  `${what} refused: ${vs.map((v) => `${v.path}: ${v.message}`).join("; ")}`;

// Hostile input is `unknown`: these read it without ever throwing.
export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
export const asArray = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
export const asObject = (v: unknown): Record<string, unknown> => (isObject(v) ? v : {});
export const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
