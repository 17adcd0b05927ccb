// The Sandbox defaults as the module's mutating webhook, for API servers that do not serve
// MutatingAdmissionPolicy v1 (Kubernetes 1.34 and 1.35; decision 0059). Where the policy is
// served (1.36 and newer) the API server writes the defaults itself (policy.ts, decision 0026) and
// this endpoint is never called: which of the two an installation registers is one input,
// `sandboxDefaults` (scripts/webhooks.ts). Both write `withDefaults` (rules/sandbox-rules.ts): here
// it is called, not re-expressed, so the webhook cannot drift from the pod builder's defaults; the
// policy's CEL is held to the same function by test/integration/admission-policy.test.ts.
import { Log } from "pepr";
import cfg from "../../package.json";
import { deepEqual } from "../../lib/patch";
import { withDefaults } from "../rules/sandbox-rules";
import { GROUP } from "../../api/crd/sources/common";
import type { ReviewRequest } from "./reviews";

/** One RFC 6902 operation: the webhook writes only whole-spec replacements. */
export type JsonPatchOp = { op: "replace"; path: "/spec"; value: unknown };

/** A mutating review's answer: allowed, with the patch when there is one, or refused. */
export type Mutation = { allowed: true; patch?: JsonPatchOp[] } | { allowed: false; code: number; message: string };

/** Namespaces admission ignores as built (package.json pepr.alwaysIgnore): the webhook's namespaceSelector skips them too. */
const IGNORED = new Set(cfg.pepr.alwaysIgnore.namespaces);

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The patch that stores `withDefaults` of the request's Sandbox spec, or none when the spec already
 * carries every default (a re-apply of a defaulted spec, or a reinvocation). Pure. The policy's match
 * conditions are kept: a Sandbox without a spec, another kind, or an ignored namespace gets nothing.
 * A whole-spec `replace`, not field-by-field `add`s: the value is exactly what `withDefaults` returns,
 * and the API server's schema validation, after all mutation, judges its types as it would the policy's.
 */
export function sandboxDefaultsPatch(req: ReviewRequest): JsonPatchOp[] {
  if (req.kind.group !== GROUP || req.kind.kind !== "Sandbox") return [];
  if (req.operation !== "CREATE" && req.operation !== "UPDATE") return [];
  const namespace = req.object?.metadata?.namespace ?? req.namespace;
  if (namespace && IGNORED.has(namespace)) return [];
  const spec = req.object?.spec;
  if (!isObject(spec)) return [];
  const defaulted = withDefaults(spec);
  return deepEqual(defaulted, spec) ? [] : [{ op: "replace", path: "/spec", value: defaulted }];
}

/**
 * The answer to a mutating review. A thrown error refuses the request (the webhook's failurePolicy
 * is Fail, as the policy's is): a Sandbox is never stored without its defaults because they failed.
 */
export function mutation(req: ReviewRequest): Mutation {
  try {
    const patch = sandboxDefaultsPatch(req);
    return patch.length ? { allowed: true, patch } : { allowed: true };
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    const what = `${req.kind.kind} ${req.namespace ?? ""}/${req.name || req.object?.metadata?.name || "(generated)"}`;
    Log.error({ err: reason }, `the defaults of ${what} failed`);
    return { allowed: false, code: 500, message: `${what} refused: the jr2 defaults could not be written (${reason})` };
  }
}
