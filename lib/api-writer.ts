// The operator's calls to the API server: every write waits for a token of the one write bucket
// (decision 0006: 100 requests/s, burst 200) and is counted by kind; whatever a client threw
// (kubernetes-fluent-client's `{ok: false, status, data}` objects too) becomes an ApiError. What
// counts the writes is passed in (lib/operator-metrics.ts on Pepr's collector, in the module), so this
// loads no framework (decision 0012).
import { hostname } from "node:os";
import { ApiError } from "./api-error";
import { kubeRequest, paths } from "./kube";
import { TokenBucket, type Lane } from "./ratelimit";
import type { OperatorMetrics } from "./operator-metrics";
import { OPERATOR_ENV } from "../api/env";

/** A limit from the environment: unset or unreadable, the default; `0`, no client-side limit. */
const envNumber = (env: NodeJS.ProcessEnv, name: string, fallback: number) => {
  const raw = env[name];
  const n = Number(raw);
  return raw !== undefined && raw.trim() !== "" && Number.isFinite(n) && n >= 0 ? n : fallback;
};

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

/** What counts the writes (lib/operator-metrics.ts). */
export type WriteMeter = Pick<OperatorMetrics, "writeWaited" | "apiWrite">;

/**
 * The operator's writes: one per process, shared by its controllers (capabilities/bindings.ts
 * builds it), so every write waits on the same bucket.
 */
export class ApiWriter {
  /** The writes' bucket, in two lanes (lib/ratelimit.ts). */
  readonly writes: TokenBucket;
  /** Events have their own bucket, so a burst of them never spends what status writes need. */
  readonly #events: TokenBucket;
  readonly #meter: WriteMeter;

  constructor(meter: WriteMeter, env: NodeJS.ProcessEnv = process.env) {
    this.#meter = meter;
    this.writes = new TokenBucket(
      envNumber(env, OPERATOR_ENV.writeQps, 100),
      envNumber(env, OPERATOR_ENV.writeBurst, 200),
    );
    this.#events = new TokenBucket(
      envNumber(env, OPERATOR_ENV.eventQps, 50),
      envNumber(env, OPERATOR_ENV.eventBurst, 100),
    );
  }

  /** Runs one write under the bucket, in its lane, counting it by kind and verb. */
  async write<T>(what: string, fn: () => Promise<T>, lane: Lane = "start"): Promise<T> {
    this.#meter.writeWaited(lane, await this.writes.take(lane));
    this.#meter.apiWrite(what);
    try {
      return await fn();
    } catch (err) {
      throw apiError(err);
    }
  }

  /** Records a Kubernetes Event on an object; best effort, never fails the caller. */
  async recordEvent(
    target: EventTarget,
    type: "Normal" | "Warning",
    reason: string,
    message: string,
    log: (err: unknown) => void,
  ): Promise<void> {
    const now = new Date().toISOString();
    try {
      await this.#events.take();
      this.#meter.apiWrite("Event.create");
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
}
