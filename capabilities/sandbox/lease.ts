// The keepalive lease (decision 0014): a Sandbox is abandoned once
// spec.idleTimeout has passed since max(creation, last keepalive). Pure.
import { KEEPALIVE_ANNOTATION, DEFAULT_IDLE_TIMEOUT } from "../../api/wire";
import { parseGoDuration } from "../../lib/duration";

export type Lease = {
  /** When the Sandbox may be reaped. */
  deadline: number;
  /** The annotation's value when it is not an RFC 3339 time (it then counts as absent). */
  invalidKeepalive?: string;
};

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

export function leaseOf(sandbox: {
  metadata: { creationTimestamp?: string | Date; annotations?: Record<string, string> };
  spec: { idleTimeout?: string };
}): Lease {
  const created = new Date(sandbox.metadata.creationTimestamp ?? 0).getTime();
  const raw = sandbox.metadata.annotations?.[KEEPALIVE_ANNOTATION];
  const renewed = raw !== undefined && RFC3339.test(raw) ? Date.parse(raw) : NaN;
  const timeout =
    parseGoDuration(sandbox.spec.idleTimeout ?? DEFAULT_IDLE_TIMEOUT) ?? parseGoDuration(DEFAULT_IDLE_TIMEOUT)!;
  const since = Number.isNaN(renewed) ? created : Math.max(created, renewed);
  return {
    deadline: since + timeout,
    ...(raw !== undefined && Number.isNaN(renewed) ? { invalidKeepalive: raw } : {}),
  };
}
