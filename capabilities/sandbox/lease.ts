// The keepalive lease (decision 0014): a Sandbox is abandoned once
// spec.idleTimeout has passed since max(creation, last keepalive). Pure. This is the one place the
// lease is judged: the controller reaps by leaseOf alone, the Orchestrator only writes the keepalive
// (orchestrator/workspaces/keepalive.ts).
import { KEEPALIVE_ANNOTATION, DEFAULT_IDLE_TIMEOUT } from "../../api/wire";
import { IDLE_TIMEOUT_MAX_MS } from "../../api/crd/sources/sandbox";
import { parseGoDuration } from "../../lib/duration";

export type Lease = {
  /** When the Sandbox may be reaped: never later than now + the CRD's ceiling (168h). */
  deadline: number;
  /** The annotation's value when it is not an RFC 3339 time (it then counts as absent). */
  invalidKeepalive?: string;
};

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * The Sandbox's lease at `now`. renewed = max(creation, keepalive), where a keepalive counts from no
 * later than `seenAt`, when this operator first saw that value (KeepaliveSightings): a keepalive in
 * the future counts as the moment it arrived, not as every later now, or anyone who may annotate
 * could make a Sandbox immortal with `2100-01-01`. A writer whose clock runs ahead is thus read by
 * the operator's clock; one that runs behind only shortens its own lease. The timeout is
 * spec.idleTimeout (the CRD default, 30m, when absent or no Go duration), never more than the CRD's
 * ceiling (a stored `100000h` counts as 168h). So the deadline is at most now + 168h.
 */
export function leaseOf(
  sandbox: {
    metadata: { creationTimestamp?: string | Date; annotations?: Record<string, string> };
    spec: { idleTimeout?: string };
  },
  now: number,
  seenAt: number = now,
): Lease {
  const created = new Date(sandbox.metadata.creationTimestamp ?? 0).getTime();
  const raw = sandbox.metadata.annotations?.[KEEPALIVE_ANNOTATION];
  const renewed = raw !== undefined && RFC3339.test(raw) ? Math.min(Date.parse(raw), seenAt, now) : NaN;
  const timeout = Math.min(
    parseGoDuration(sandbox.spec.idleTimeout ?? DEFAULT_IDLE_TIMEOUT) ?? parseGoDuration(DEFAULT_IDLE_TIMEOUT)!,
    IDLE_TIMEOUT_MAX_MS,
  );
  // A creation time in the future or unreadable (the API server writes one) counts as now.
  const base = Number.isNaN(created) ? now : Math.min(created, now);
  const since = Number.isNaN(renewed) ? base : Math.max(base, renewed);
  return {
    deadline: since + timeout,
    ...(raw !== undefined && Number.isNaN(renewed) ? { invalidKeepalive: raw } : {}),
  };
}

/**
 * When the operator first saw each Sandbox's keepalive value: leaseOf's `seenAt`. One entry per
 * Sandbox, forgotten with it. After an operator restart every value counts as first seen then, which
 * can only lengthen a lease whose keepalive lies in the future, by one idle timeout per restart.
 */
export class KeepaliveSightings {
  readonly #seen = new Map<string, { value: string; at: number }>();

  /** When `value` (the annotation now, or undefined) was first seen for `key`; `now` if just now. */
  seenAt(key: string, value: string | undefined, now: number): number {
    if (value === undefined) {
      this.#seen.delete(key);
      return now;
    }
    const seen = this.#seen.get(key);
    if (seen?.value === value) return seen.at;
    this.#seen.set(key, { value, at: now });
    return now;
  }

  forget(key: string): void {
    this.#seen.delete(key);
  }

  get size(): number {
    return this.#seen.size;
  }
}
