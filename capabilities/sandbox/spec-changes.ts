// What a spec change does to a live Sandbox (pure; decision 0017). A Sandbox has one pod for its
// life (decision 0013), so a field the pod is built from cannot take effect once it runs: the pod
// keeps what it was built from, and the status names each field that changed since, never
// silently. What takes effect without a pod (spec.idleTimeout moves the reap deadline) is left out.
// The pod carries a digest per field it was built from (SPEC_DIGEST_ANNOTATION), small beside the
// spec itself, enough to name what changed.
import { createHash } from "node:crypto";
import type { kind } from "kubernetes-fluent-client";
import type { Condition } from "../../api/crd";
import { CONDITION, SPEC_APPLIED_REASON } from "../../api/conditions";
import { SPEC_DIGEST_ANNOTATION } from "../../api/wire";

/** Fields a live Sandbox takes without its pod: the lease reads idleTimeout at every reconcile, the
 * egress point reads egress at each change (decision 0051). */
export const LIVE_FIELDS: ReadonlySet<string> = new Set(["idleTimeout", "egress"]);

/** JSON with object keys sorted, so equal values always digest alike. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

const digestOf = (value: unknown) => createHash("sha256").update(canonical(value)).digest("hex").slice(0, 12);

/** Per field of the spec the pod is built from, a short digest of its value. */
export function specDigest(spec: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(spec)
      .filter(([k, v]) => v !== undefined && !LIVE_FIELDS.has(k))
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([k, v]) => [k, digestOf(v)]),
  );
}

/** The pod with the digest of the spec it is built from. */
export function withSpecDigest(pod: kind.Pod, spec: Record<string, unknown>): kind.Pod {
  const annotations = { ...pod.metadata?.annotations, [SPEC_DIGEST_ANNOTATION]: JSON.stringify(specDigest(spec)) };
  return { ...pod, metadata: { ...pod.metadata, annotations } };
}

/** The spec fields (`spec.<field>`) that changed since the pod was built; undefined when the pod
 * carries no digest (made before the digest existed: nothing can be said). */
export function changedFields(spec: Record<string, unknown>, pod: kind.Pod): string[] | undefined {
  const raw = pod.metadata?.annotations?.[SPEC_DIGEST_ANNOTATION];
  if (!raw) return undefined;
  let built: Record<string, string>;
  try {
    built = JSON.parse(raw) as Record<string, string>;
  } catch {
    return undefined;
  }
  const now = specDigest(spec);
  return [...new Set([...Object.keys(built), ...Object.keys(now)])]
    .filter((k) => built[k] !== now[k])
    .sort()
    .map((k) => `spec.${k}`);
}

/** SpecApplied for a Sandbox whose pod exists; undefined when nothing can be said. */
export function specAppliedCondition(
  spec: Record<string, unknown>,
  pod: kind.Pod | undefined,
): Omit<Condition, "lastTransitionTime"> | undefined {
  if (!pod) return undefined;
  const changed = changedFields(spec, pod);
  if (changed === undefined) return undefined;
  if (!changed.length) {
    return {
      type: CONDITION.SpecApplied,
      status: "True",
      reason: SPEC_APPLIED_REASON.Applied,
      message: "the pod runs the current spec",
    };
  }
  return {
    type: CONDITION.SpecApplied,
    status: "False",
    reason: SPEC_APPLIED_REASON.PodSpecChanged,
    message:
      `${changed.join(", ")} changed after the pod was built: the pod keeps what it was built from (a Sandbox ` +
      "never gets a second pod); create a new Sandbox for the change to take effect",
  };
}
