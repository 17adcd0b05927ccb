// The JSON-over-HTTP plumbing the companions' small servers share (the Harness, the Orchestrator):
// an answer, an error as `{error: {code, message}}`, and a body read with a size limit.
import type http from "node:http";

export function sendJson(
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: http.OutgoingHttpHeaders = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
    ...headers,
  });
  res.end(text);
}

export function sendError(
  res: http.ServerResponse,
  status: number,
  code: string,
  message: string,
  headers?: http.OutgoingHttpHeaders,
): void {
  sendJson(res, status, { error: { code, message } }, headers);
}

/** The body, or undefined once it exceeds `limit` (the rest is discarded, not buffered). */
export function readBody(req: http.IncomingMessage, limit: number): Promise<Buffer | undefined> {
  if (Number(req.headers["content-length"]) > limit) return Promise.resolve(undefined);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      req.off("data", onData);
      req.resume();
      resolve(undefined);
    };
    req.on("data", onData);
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/**
 * The address a companion's server binds. In a pod (the kubelet sets KUBERNETES_SERVICE_HOST) it
 * serves the pod's network, as a pod's server does; anywhere else it binds loopback, so a local
 * run never opens a port to the machine's network (docs/decisions/0012). `stated` wins.
 */
export function listenHost(stated: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (stated) return stated;
  return env.KUBERNETES_SERVICE_HOST ? "0.0.0.0" : "127.0.0.1";
}

/** The token of `Authorization: Bearer <token>`, or undefined for any other shape. */
export function bearerOf(header: string | undefined): string | undefined {
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header ?? "");
  return m?.[1];
}

/** Listens; resolves once the port is bound, rejects if it cannot be. */
export function listen(server: http.Server, port: number, host?: string): Promise<http.Server> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server);
    });
  });
}

/** The request's path; the query string is dropped everywhere: nothing reads it, and it is no place to log. */
export const pathOf = (req: http.IncomingMessage) => (req.url ?? "/").split("?")[0];

/** One access-log line per request once it is answered: method, path, status, duration. Never headers or bodies. */
export function logRequest(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  log: (e: Record<string, unknown>) => void,
) {
  const started = process.hrtime.bigint();
  res.on("close", () => {
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    log({ method: req.method, path: pathOf(req), status: res.statusCode, ms: Math.round(ms * 10) / 10 });
  });
}

/** An answer that went past what its reader takes: the reader stopped and closed the connection. */
export class AnswerTooLarge extends Error {
  constructor(readonly limit: number) {
    super(`the answer exceeds ${limit} bytes`);
  }
}

/**
 * A response body's text, read up to `limit` bytes: past it the body is destroyed (the connection
 * closes, nothing more is buffered) and AnswerTooLarge is thrown. For answers from a peer that is
 * not trusted to be brief (a Sandbox's Harness, decision 0042).
 */
export async function boundedText(
  body: AsyncIterable<Buffer | Uint8Array> & { destroy(err?: Error): unknown },
  limit: number,
): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of body) {
    bytes += chunk.length;
    if (bytes > limit) {
      const err = new AnswerTooLarge(limit);
      body.destroy(err);
      throw err;
    }
    chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString("utf8");
}
