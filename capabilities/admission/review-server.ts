// The module's review endpoint, answered in front of Pepr's HTTPS server (decision 0028). Pepr's
// own pipeline (express, its body parser and router, a request log, a filter walk over every
// binding of every capability, six log calls) made each review cost the API server about 2 ms
// more than a plain Node server answering the same review; a Sandbox create waits on it. This
// answers POST /validate/<api path> directly: read the body, judge by the table Pepr's bindings
// are made from (reviews.ts), write one response. POST /mutate/<api path> writes the Sandbox
// defaults where the installation registers them as a webhook rather than as a policy
// (defaults-webhook.ts, decision 0059). Everything else (health, metrics, a wrong path) goes on to
// Pepr's server unchanged.
import { readFileSync } from "node:fs";
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { Log } from "pepr";
import { judge, type ReviewRequest, type Verdict } from "./reviews";
import { mutation, type Mutation } from "./defaults-webhook";

/** The largest review read, as Pepr's body parser takes it (express.json limit "2mb"). */
export const MAX_REVIEW_BYTES = 2 * 1024 * 1024;

/** Where Pepr reads the path its webhooks carry: PEPR_API_PATH, or the deployed Secret's file. */
export function apiPathFrom(env: NodeJS.ProcessEnv, file = "/app/api-path/value"): string {
  const path = env.PEPR_API_PATH || readFileSync(file, "utf8").trim();
  if (!path) throw new Error(`no API path: set PEPR_API_PATH or mount it at ${file}`);
  return path;
}

class BadReview extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      // Past the limit nothing more is kept; the refusal closes the connection.
      if (size > MAX_REVIEW_BYTES)
        reject(new BadReview(413, `an AdmissionReview larger than ${MAX_REVIEW_BYTES} bytes`));
      else chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** The review's request, or why it is not one. */
export function reviewRequest(body: Buffer): ReviewRequest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    throw new BadReview(400, "the body is not JSON: send an admission.k8s.io/v1 AdmissionReview");
  }
  const request = (parsed as { request?: Partial<ReviewRequest> } | null)?.request;
  if (typeof request?.uid !== "string" || typeof request.kind?.kind !== "string" || !request.operation) {
    throw new BadReview(400, "request.uid, request.kind and request.operation are required: send an AdmissionReview");
  }
  const { group = "", version = "", kind } = request.kind;
  return { ...request, kind: { group, version, kind } } as ReviewRequest;
}

/** The AdmissionReview answering `uid` (admission.k8s.io/v1). */
export const reviewResponse = (uid: string, v: Verdict) => ({
  apiVersion: "admission.k8s.io/v1",
  kind: "AdmissionReview",
  response: v.allowed ? { uid, allowed: true } : { uid, allowed: false, status: { code: v.code, message: v.message } },
});

/** The AdmissionReview answering a mutating review: its patch, base64 JSON, when there is one. */
export const mutationResponse = (uid: string, m: Mutation) => ({
  apiVersion: "admission.k8s.io/v1",
  kind: "AdmissionReview",
  response: !m.allowed
    ? { uid, allowed: false, status: { code: m.code, message: m.message } }
    : m.patch
      ? { uid, allowed: true, patchType: "JSONPatch", patch: Buffer.from(JSON.stringify(m.patch)).toString("base64") }
      : { uid, allowed: true },
});

function send(res: ServerResponse, status: number, body: string, type: string) {
  // One write: the headers go out with the body.
  res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) }).end(body);
}

/**
 * `next` with POST /validate/<apiPath> and /mutate/<apiPath> answered here. `answered` gets each review's time in ms,
 * from its arrival to its answer. A review that cannot be read gets a 4xx, which the API server
 * treats as the webhook failing: failurePolicy Fail refuses the request.
 */
export function reviewServer(apiPath: string, next: RequestListener, answered?: (ms: number) => void): RequestListener {
  const validate = `/validate/${apiPath}`;
  const mutate = `/mutate/${apiPath}`;
  return (req, res) => {
    // The API server adds its timeout as a query (`?timeout=10s`).
    const path = (req.url ?? "").split("?", 1)[0];
    if (req.method !== "POST" || (path !== validate && path !== mutate)) return next(req, res);
    const started = performance.now();
    readBody(req)
      .then(async (body) => {
        const request = reviewRequest(body);
        let answer: object;
        if (path === mutate) {
          const m = mutation(request);
          if (m.allowed) Log.debug({ uid: request.uid, patched: !!m.patch }, "defaults written");
          else Log.info({ uid: request.uid, code: m.code, message: m.message }, "defaults refused");
          answer = mutationResponse(request.uid, m);
        } else {
          const v = await judge(request);
          if (v.allowed) Log.debug({ uid: request.uid }, "review allowed");
          else Log.info({ uid: request.uid, code: v.code, message: v.message }, "review denied");
          answer = reviewResponse(request.uid, v);
        }
        send(res, 200, JSON.stringify(answer), "application/json");
        answered?.(performance.now() - started);
      })
      .catch((err: unknown) => {
        const status = err instanceof BadReview ? err.status : 500;
        const message = err instanceof Error ? err.message : String(err);
        Log.warn({ status, err: message }, "review not answered");
        // Too large: the connection closes after the answer, rather than read an endless body.
        if (status === 413) res.shouldKeepAlive = false;
        if (!res.headersSent && !res.destroyed) send(res, status, message, "text/plain");
      });
  };
}
