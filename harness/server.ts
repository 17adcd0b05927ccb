// The Harness's HTTP surface: GET /healthz for the kubelet's probe, POST /attach for the client
// that prepares the Sandbox's repositories. Every answer is JSON; every error is {error:{code,message}}.
import http from "node:http";
import { attach, AttachError, checkBranchName, createMutex, execRunner, type Roots, type Runner } from "./attach";
import { authorized } from "./auth";
import { parseAttachBody } from "../api/attach";
import { listen, logRequest, pathOf, readBody, sendError, sendJson } from "../lib/http-json";
import { redact } from "../lib/redact";

/** Bodies above this are refused with 413 before they are buffered. */
export const MAX_BODY_BYTES = 1024 * 1024;

export type LogEntry = Record<string, unknown>;
export type Log = (entry: LogEntry) => void;

export type HarnessOptions = Roots & {
  /** Hex SHA-256 of the bearer token; unset or malformed, every attach is refused. */
  tokenSha256: string | undefined;
  run?: Runner;
  log?: Log;
};

type Ctx = Roots & { tokenSha256: string | undefined; run: Runner; log: Log; lock: ReturnType<typeof createMutex> };

type Res = http.ServerResponse;

function decodeJson(raw: Buffer): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(raw.toString("utf8")) };
  } catch {
    return { ok: false };
  }
}

async function postAttach(req: http.IncomingMessage, res: Res, ctx: Ctx): Promise<void> {
  // Authenticate before reading the body: an anonymous caller gets nothing parsed or run.
  if (!authorized(req.headers.authorization, ctx.tokenSha256)) {
    return sendError(res, 401, "unauthorized", "a valid bearer token is required");
  }
  const raw = await readBody(req, MAX_BODY_BYTES);
  if (raw === undefined) {
    // Close the connection rather than drain an arbitrarily long remainder.
    return sendError(res, 413, "too_large", `the body exceeds ${MAX_BODY_BYTES} bytes`, { connection: "close" });
  }
  const decoded = decodeJson(raw);
  if (!decoded.ok) return sendError(res, 400, "invalid", "body: not valid JSON");
  const parsed = parseAttachBody(decoded.value);
  if (!parsed.ok) return sendError(res, 400, "invalid", parsed.message);
  const body = parsed.body;
  if (!(await checkBranchName(ctx.run, body.branch))) {
    return sendError(res, 400, "invalid", "branch: git refuses this branch name");
  }
  const warn = (message: string) => ctx.log({ level: "warn", message: redact(message) });
  try {
    sendJson(res, 200, await ctx.lock(() => attach(ctx.run, ctx, body, warn)));
  } catch (err) {
    if (!(err instanceof AttachError)) throw err;
    ctx.log({ level: "error", message: err.message });
    sendError(res, 500, "attach_failed", err.message);
  }
}

async function route(req: http.IncomingMessage, res: Res, ctx: Ctx): Promise<void> {
  const path = pathOf(req);
  if (path === "/healthz") {
    if (req.method === "GET" || req.method === "HEAD") return sendJson(res, 200, { ok: true });
    return sendError(res, 405, "method_not_allowed", "use GET", { allow: "GET, HEAD" });
  }
  if (path === "/attach") {
    if (req.method === "POST") return postAttach(req, res, ctx);
    return sendError(res, 405, "method_not_allowed", "use POST", { allow: "POST" });
  }
  sendError(res, 404, "not_found", `no route for ${req.method} ${path}`);
}

/** The Harness as a request handler over `opts`' roots. Logs one line per request, no headers. */
export function createHarness(opts: HarnessOptions): http.Server {
  const ctx: Ctx = {
    workRoot: opts.workRoot,
    reposRoot: opts.reposRoot,
    tokenSha256: opts.tokenSha256,
    run: opts.run ?? execRunner,
    log: opts.log ?? (() => undefined),
    lock: createMutex(),
  };
  return http.createServer((req, res) => {
    logRequest(req, res, ctx.log);
    route(req, res, ctx).catch((err: unknown) => {
      ctx.log({ level: "error", message: redact(err instanceof Error ? err.message : String(err)) });
      if (!res.headersSent) sendError(res, 500, "internal", "internal error");
      else res.destroy();
    });
  });
}

/**
 * Sets the umask git's files are created with (group-writable, for the pod's other containers;
 * children inherit it) and listens. Resolves once the port is bound.
 */
export async function startHarness(opts: HarnessOptions, port: number, host?: string): Promise<http.Server> {
  process.umask(0o002);
  return listen(createHarness(opts), port, host);
}
