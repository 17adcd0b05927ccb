// The Harness's HTTP surface: GET /healthz for the kubelet's probe, POST /attach for the client
// that prepares the Sandbox's repositories, and the agent protocol (decision 0025, decision
// 0025): POST /agents/:name/:id admits a turn, GET /agents/:name/:id/stream?offset=N long-polls
// its events, POST /agents/:name/:id/abort ends it. Every answer is JSON; every error is
// {error:{code,message}}.
import http from "node:http";
import { attach, AttachError, checkBranchName, createMutex, execRunner, type Roots, type Runner } from "./attach-git";
import { authorized } from "./auth";
import { parseAttachBody } from "../api/attach";
import { AgentName, ConversationId, LIMITS, LONG_POLL_MS, TurnBody } from "../api/agent-protocol";
import { AgentHost, HostError } from "./agents/host";
import { listen, logRequest, pathOf, readBody, sendError, sendJson } from "../lib/http-json";
import { redact } from "../lib/redact";

/** Bodies above this are refused with 413 before they are buffered. */
export const MAX_BODY_BYTES = 1024 * 1024;

import type { LogEntry } from "../lib/log";
export type { LogEntry };
export type Log = (entry: LogEntry) => void;

export type HarnessOptions = Roots & {
  /** Hex SHA-256 of the bearer token; unset or malformed, every attach is refused. */
  tokenSha256: string | undefined;
  run?: Runner;
  log?: Log;
  /** The Agent host; absent, the agent routes answer 503 (no conversations volume configured). */
  agents?: AgentHost;
};

type Ctx = Roots & {
  tokenSha256: string | undefined;
  run: Runner;
  log: Log;
  lock: ReturnType<typeof createMutex>;
  agents?: AgentHost;
};

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

const AGENT_ROUTE = /^\/agents\/([^/]+)\/([^/]+)(\/stream|\/abort)?$/;

async function agentRoute(req: http.IncomingMessage, res: Res, ctx: Ctx, m: RegExpExecArray): Promise<void> {
  if (!authorized(req.headers.authorization, ctx.tokenSha256)) {
    return sendError(res, 401, "unauthorized", "a valid bearer token is required");
  }
  if (!ctx.agents)
    return sendError(res, 503, "no_agents", "this Harness hosts no Agents: JR2_CONVERSATIONS_DIR is unset");
  const name = AgentName.safeParse(decodeURIComponent(m[1]!));
  if (!name.success) return sendError(res, 400, "invalid", `agent name: ${name.error.issues[0]!.message}`);
  const id = ConversationId.safeParse(decodeURIComponent(m[2]!));
  if (!id.success) return sendError(res, 400, "invalid", `conversation id: ${id.error.issues[0]!.message}`);
  const [agent, conversation, action] = [name.data, id.data, m[3]];
  try {
    if (action === "/stream") {
      if (req.method !== "GET") return sendError(res, 405, "method_not_allowed", "use GET", { allow: "GET" });
      const url = new URL(req.url ?? "/", "http://harness");
      const offset = Number(url.searchParams.get("offset") ?? "0");
      if (!Number.isInteger(offset) || offset < 0)
        return sendError(res, 400, "invalid", "offset: must be a whole number from 0 (the admission's offset)");
      const wait = Number(url.searchParams.get("wait") ?? LONG_POLL_MS);
      const hold = Number.isFinite(wait) ? Math.min(Math.max(wait, 0), LONG_POLL_MS) : LONG_POLL_MS;
      // A reader that goes away stops holding; it is never an abort of the turn (decision 0025).
      const asked = Number(url.searchParams.get("limit") ?? LIMITS.pageEvents);
      const limit = Number.isInteger(asked) && asked > 0 ? Math.min(asked, LIMITS.pageEvents) : LIMITS.pageEvents;
      const gone = new AbortController();
      res.once("close", () => gone.abort());
      return sendJson(res, 200, await ctx.agents.stream(agent, conversation, offset, hold, gone.signal, limit));
    }
    if (req.method !== "POST") return sendError(res, 405, "method_not_allowed", "use POST", { allow: "POST" });
    if (action === "/abort") return sendJson(res, 200, ctx.agents.abort(agent, conversation));
    const raw = await readBody(req, MAX_TURN_BYTES);
    if (raw === undefined)
      return sendError(res, 413, "too_large", `the body exceeds ${MAX_TURN_BYTES} bytes`, { connection: "close" });
    const decoded = decodeJson(raw);
    if (!decoded.ok) return sendError(res, 400, "invalid", "body: not valid JSON");
    const body = TurnBody.safeParse(decoded.value);
    if (!body.success) {
      const message = body.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ");
      return sendError(res, 400, "invalid", message);
    }
    return sendJson(res, 202, ctx.agents.admit(agent, conversation, body.data));
  } catch (err) {
    if (err instanceof HostError) return sendError(res, err.status, err.code, err.message);
    throw err;
  }
}

/** A turn's body may carry images: larger than an attach's. */
const MAX_TURN_BYTES = 48 * 1024 * 1024;

async function route(req: http.IncomingMessage, res: Res, ctx: Ctx): Promise<void> {
  const path = pathOf(req);
  const agent = AGENT_ROUTE.exec(path);
  if (agent) return agentRoute(req, res, ctx, agent);
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
  return http.createServer(harnessHandler(opts));
}

/** The Harness's request listener, for a server bound before it loaded (lib/early-listen.ts). */
export function harnessHandler(opts: HarnessOptions): (req: http.IncomingMessage, res: Res) => void {
  const ctx: Ctx = {
    workRoot: opts.workRoot,
    reposRoot: opts.reposRoot,
    tokenSha256: opts.tokenSha256,
    run: opts.run ?? execRunner,
    log: opts.log ?? (() => undefined),
    lock: createMutex(),
    ...(opts.agents ? { agents: opts.agents } : {}),
  };
  return (req, res) => {
    logRequest(req, res, ctx.log);
    route(req, res, ctx).catch((err: unknown) => {
      ctx.log({ level: "error", message: redact(err instanceof Error ? err.message : String(err)) });
      if (!res.headersSent) sendError(res, 500, "internal", "internal error");
      else res.destroy();
    });
  };
}

/** Group-writable: the pod's other containers share the slot's files (children inherit it). */
export const HARNESS_UMASK = 0o002;

/**
 * Sets the umask git's files are created with (group-writable, for the pod's other containers;
 * children inherit it) and listens. Resolves once the port is bound.
 */
export async function startHarness(opts: HarnessOptions, port: number, host?: string): Promise<http.Server> {
  process.umask(HARNESS_UMASK);
  return listen(createHarness(opts), port, host);
}
