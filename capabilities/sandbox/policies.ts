// What the reconcile keeps in each namespace that holds Sandboxes besides their pods: the two
// NetworkPolicies (api/sandbox-policies.ts, decision 0047), and what it says when the namespace
// is not one the installation opted in. Pure; the controller reads, compares and writes.
import { SCHEDULED_REASON } from "../../api/conditions";
import { BUILD_ENV } from "../../api/env";
import { sandboxPolicies } from "../../api/sandbox-policies";
import { SANDBOX_NAMESPACE_ENABLED, SANDBOX_NAMESPACE_LABEL } from "../../api/wire";
import type { PodRefusal } from "./status";

/** How long a namespace's policies, once found as wanted, are taken as they are: a policy edited
 * or deleted by hand is put back within this (no watch on NetworkPolicies: decision 0047). */
export const POLICIES_CHECKED_FOR_MS = 5 * 60_000;
/** How long a namespace found not opted in is taken as such, and how soon its Sandboxes are
 * looked at again: the fix is the installation's, so no faster retry would help. */
export const NOT_ENABLED_RETRY_MS = 30_000;

export type Policy = ReturnType<typeof sandboxPolicies>[number];
type Live = { metadata?: { labels?: Record<string, string> }; spec?: unknown } | undefined;

/** JSON with keys sorted, so two specs compare by content. */
const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)))
      : x,
  );

/** Whether a policy must be written: absent, its spec not the wanted one, or a label missing. */
export function policyNeedsWrite(live: Live, wanted: Policy): boolean {
  if (!live) return true;
  if (canonical(live.spec) !== canonical(wanted.spec)) return true;
  const labels = live.metadata?.labels ?? {};
  return Object.entries(wanted.metadata.labels).some(([k, v]) => labels[k] !== v);
}

/** An API error is RBAC's refusal (not a quota's, not a webhook's): the operator's role is not bound here. */
export const isRbacRefusal = (e: { status: number; message: string }) =>
  e.status === 403 && /\bcannot \w+ resource\b/.test(e.message);

/** The status's word for a Sandbox in a namespace the installation did not opt in: the namespace
 * and the fix, never the API server's message (it names the operator's service account). */
export const namespaceNotEnabled = (namespace: string): PodRefusal => ({
  reason: SCHEDULED_REASON.NamespaceNotEnabled,
  message:
    `namespace ${namespace} is not opted in to hold Sandboxes: the operator may not create pods there. ` +
    `Label it ${SANDBOX_NAMESPACE_LABEL}=${SANDBOX_NAMESPACE_ENABLED} and add it to the installation's ` +
    `namespaces (${BUILD_ENV.sandboxNamespaces} at npm run build, which binds the operator's role there), ` +
    "then apply the manifests again",
});
