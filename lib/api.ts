// The operator's calls to the API server: every write waits for a token of the one write bucket
// (decision 0006: 100 requests/s, burst 200) and is counted by kind; whatever a client threw
// (kubernetes-fluent-client's `{ok: false, status, data}` objects too) becomes an ApiError.
import { hostname } from "node:os";
import { ApiError } from "./api-error";
import { kubeRequest, paths } from "./kube";
import { TokenBucket, type Lane } from "./ratelimit";
import { metrics } from "./metrics";
import { OPERATOR_ENV } from "../api/env";

/** A limit from the environment: unset or unreadable, the default; `0`, no client-side limit. */
const envNumber = (name: string, fallback: number) => {
  const raw = process.env[name];
  const n = Number(raw);
  return raw !== undefined && raw.trim() !== "" && Number.isFinite(n) && n >= 0 ? n : fallback;
};

/** The operator's writes, in two lanes (lib/ratelimit.ts); events have their own bucket, so a burst
 * of them never spends what status writes need. */
export const writes = new TokenBucket(envNumber(OPERATOR_ENV.writeQps, 100), envNumber(OPERATOR_ENV.writeBurst, 200));
const eventWrites = new TokenBucket(envNumber(OPERATOR_ENV.eventQps, 50), envNumber(OPERATOR_ENV.eventBurst, 100));

export { ApiError };

/** An ApiError from whatever kubernetes-fluent-client threw. */
export function apiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as { status?: number; statusText?: string; data?: unknown; message?: string };
  if (typeof e?.status === "number") {
    const data = statusOf(e.data);
    return new ApiError(
      e.status,
      data?.reason ?? e.statusText ?? `HTTP${e.status}`,
      data?.message ?? e.statusText ?? "",
    );
  }
  return new ApiError(0, "TransportError", e?.message ?? String(err));
}

type Status = { reason?: string; message?: string };

/** The API server's Status object, whether the client parsed it or not. */
function statusOf(data: unknown): Status | undefined {
  if (typeof data !== "string") return data as Status | undefined;
  try {
    return JSON.parse(data) as Status;
  } catch {
    return { message: data };
  }
}

export const isNotFound = (err: unknown) => apiError(err).status === 404;
export const isConflict = (err: unknown) => apiError(err).status === 409;

/** Runs one write under the bucket, in its lane, counting it by kind and verb. */
export async function write<T>(what: string, fn: () => Promise<T>, lane: Lane = "start"): Promise<T> {
  metrics.writeWaited(lane, await writes.take(lane));
  metrics.apiWrite(what);
  try {
    return await fn();
  } catch (err) {
    throw apiError(err);
  }
}

/** A GET that answers undefined for 404. */
export async function getOrUndefined<T>(fn: () => Promise<T>): Promise<T | undefined> {
  try {
    return await fn();
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw apiError(err);
  }
}

export type EventTarget = { apiVersion: string; kind: string; name: string; namespace: string; uid?: string };

const INSTANCE = hostname();

/** Records a Kubernetes Event on an object; best effort, never fails the caller. */
export async function recordEvent(
  target: EventTarget,
  type: "Normal" | "Warning",
  reason: string,
  message: string,
  log: (err: unknown) => void,
): Promise<void> {
  const now = new Date().toISOString();
  try {
    await eventWrites.take();
    metrics.apiWrite("Event.create");
    await kubeRequest("POST", paths.events(target.namespace), {
      apiVersion: "v1",
      kind: "Event",
      metadata: { generateName: `${target.name}.`, namespace: target.namespace },
      involvedObject: { ...target },
      type,
      reason,
      message: message.slice(0, 1024),
      source: { component: "jr2-operator" },
      reportingComponent: "jr2.dev/operator",
      reportingInstance: INSTANCE,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    });
  } catch (err) {
    log(apiError(err));
  }
}
