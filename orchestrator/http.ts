// The Orchestrator's HTTP API v1 on node:http (issue 6, item 5): workspaces for Machines. The
// server holds no state of its own: it validates, authenticates and routes to an injected
// Workspaces service, and streams each workspace's events as Server-Sent Events. Every answer is
// JSON, every error `{error: {code, message}}`; a bad request never crashes it, and no header (so
// no token) is ever logged.
import http from "node:http";
import {
  FINAL_STATES,
  HttpError,
  WorkspaceName,
  parseCreateBody,
  type CreateWorkspaceBody,
  type WorkspaceEvent,
  type WorkspaceView,
} from "./api";
import { openApiDocument } from "./openapi";
import { PickBody } from "../api/agents";
import { AllowedBody, AnswerBody, waitOf, workspaceOfIid } from "./picks";
import { SubmitTurnBody, type Turns } from "./turns";
import { LONG_POLL_MS } from "../api/agents";
import type { Picks } from "./pick-store";
import { bearerOf, listen, logRequest, pathOf, readBody, sendError, sendJson } from "../lib/http-json";

/** What the API serves; the registry of workspace actors implements it. */
export interface Workspaces {
  /** Starts a workspace and answers its name. Throws HttpError to refuse (e.g. 403 for the fence). */
  create(body: CreateWorkspaceBody): Promise<string>;
  list(): Promise<WorkspaceView[]>;
  get(name: string): Promise<WorkspaceView | undefined>;
  /** Starts its destruction; false when no such workspace. */
  delete(name: string): Promise<boolean>;
  /** Every event from now on; undefined when no such workspace. Returns the unsubscribe. */
  subscribe(name: string, listener: (event: WorkspaceEvent) => void): (() => void) | undefined;
}

export type LogEntry = Record<string, unknown>;

export type ServerOptions = {
  workspaces: Workspaces;
  /** True for a valid API token (tokens.ts apiTokenChecker). */
  checkToken: (token: string) => boolean;
  /** The Prometheus text for /metrics. */
  metrics: () => string | Promise<string>;
  log?: (entry: LogEntry) => void;
  /** How often an idle event stream gets a keep-alive comment. Default 15 s. */
  keepAliveMs?: number;
  /** Agents' picks (pick-store.ts): absent, their routes answer 404. */
  picks?: Picks;
  /** Agents' turns (turns.ts): absent, their routes answer 404. */
  turns?: TurnsApi;
  /** True when `token` is the Sandbox token of workspace `name` (tokens.ts sandboxTokenChecker):
   * the Harness-facing routes' authentication, through the pod's Custodian. */
  checkSandboxToken?: (name: string, token: string) => boolean;
};

/** Bodies above this are refused with 413 before they are buffered. */
export const MAX_BODY_BYTES = 1024 * 1024;
const DEFAULT_KEEPALIVE_MS = 15_000;

type Req = http.IncomingMessage;
type Res = http.ServerResponse;
type Ctx = Required<Omit<ServerOptions, "log" | "picks" | "checkSandboxToken" | "turns">> &
  Pick<ServerOptions, "picks" | "checkSandboxToken" | "turns"> & { log: (entry: LogEntry) => void; openapi: string };

/** What the turn routes need of turns.ts. */
export type TurnsApi = Pick<Turns, "submit" | "page" | "abort" | "setAllowed">;

// ---------------------------------------------------------------------------------------------
// Answers

const methodNotAllowed = (res: Res, allow: string[]) =>
  sendError(res, 405, "method_not_allowed", `use ${allow.join(" or ")}`, { allow: allow.join(", ") });

// ---------------------------------------------------------------------------------------------
// Bodies

/** A JSON body, or an error already answered (undefined). */
async function jsonBody(req: Req, res: Res): Promise<{ value: unknown } | undefined> {
  const type = req.headers["content-type"];
  if (type !== undefined && !/^application\/json\s*(;|$)/i.test(type)) {
    sendError(res, 415, "unsupported_media_type", "the body must be application/json");
    return undefined;
  }
  const raw = await readBody(req, MAX_BODY_BYTES);
  if (raw === undefined) {
    // Close the connection rather than drain an arbitrarily long remainder.
    sendError(res, 413, "too_large", `the body exceeds ${MAX_BODY_BYTES} bytes`, { connection: "close" });
    return undefined;
  }
  try {
    return { value: JSON.parse(raw.toString("utf8")) };
  } catch {
    sendError(res, 400, "invalid", "body: not valid JSON");
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Routes

async function createWorkspace(req: Req, res: Res, ctx: Ctx): Promise<void> {
  const body = await jsonBody(req, res);
  if (!body) return;
  const parsed = parseCreateBody(body.value);
  if (!parsed.ok) return sendError(res, 400, "invalid", parsed.message);
  const name = await ctx.workspaces.create(parsed.body);
  sendJson(res, 202, { name }, { location: `/v1/workspaces/${name}` });
}

async function workspaces(req: Req, res: Res, ctx: Ctx): Promise<void> {
  if (req.method === "GET") return sendJson(res, 200, { items: await ctx.workspaces.list() });
  if (req.method === "POST") return createWorkspace(req, res, ctx);
  methodNotAllowed(res, ["GET", "POST"]);
}

async function workspace(req: Req, res: Res, ctx: Ctx, name: string): Promise<void> {
  if (req.method === "GET") {
    const view = await ctx.workspaces.get(name);
    return view ? sendJson(res, 200, view) : notFound(res, name);
  }
  if (req.method === "DELETE") {
    return (await ctx.workspaces.delete(name)) ? sendJson(res, 202, { name }) : notFound(res, name);
  }
  methodNotAllowed(res, ["GET", "DELETE"]);
}

const notFound = (res: Res, name: string) => sendError(res, 404, "not_found", `no workspace "${name}"`);

const sseFrame = (id: number, event: WorkspaceEvent | { type: "snapshot" }, data: unknown) =>
  `id: ${id}\nevent: ${event.type}\ndata: ${JSON.stringify(data)}\n\n`;

const isFinalEvent = (e: WorkspaceEvent) => e.type === "transition" && FINAL_STATES.includes(e.to);

/**
 * The workspace's events as Server-Sent Events: first a `snapshot` (its view now), then every
 * transition and wait as it happens, a keep-alive comment while idle, and the end of the stream
 * after a final state. Subscribed before the snapshot is read, so nothing falls between; events
 * heard meanwhile are held and sent after it.
 */
async function events(req: Req, res: Res, ctx: Ctx, name: string): Promise<void> {
  if (req.method !== "GET") return methodNotAllowed(res, ["GET"]);
  let id = 0;
  let held: WorkspaceEvent[] | undefined = [];
  let closed = false;
  const send = (e: WorkspaceEvent) => {
    if (closed) return;
    res.write(sseFrame(++id, e, e));
    if (isFinalEvent(e)) finish();
  };
  const unsubscribe = ctx.workspaces.subscribe(name, (e) => (held ? held.push(e) : send(e)));
  if (!unsubscribe) return notFound(res, name);
  const timer = setInterval(() => {
    if (!closed) res.write(": keep-alive\n\n");
  }, ctx.keepAliveMs);
  const stop = () => {
    closed = true;
    clearInterval(timer);
    unsubscribe();
  };
  const finish = () => {
    if (closed) return;
    stop();
    res.end();
  };
  res.on("close", finish);
  let view: WorkspaceView | undefined;
  try {
    view = await ctx.workspaces.get(name);
  } catch (err) {
    stop(); // the error handler answers 500: nothing is sent yet
    throw err;
  }
  if (closed) return; // the client left while the snapshot was read
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    // Proxies that buffer would hold every event until the stream ends.
    "x-accel-buffering": "no",
  });
  if (view) res.write(sseFrame(++id, { type: "snapshot" }, view));
  const pending = held;
  held = undefined;
  for (const e of pending) send(e);
  if (view && FINAL_STATES.includes(view.state)) finish();
}

// ---------------------------------------------------------------------------------------------
// Picks: the Harness's (Sandbox token) and the Machine's (API token)

const SANDBOX_ROUTE = /^\/v1\/sandbox\/agents\/([^/]+)\/(picks|allowed|deliveries\/([^/]+))\/?$/;

/**
 * `POST /v1/sandbox/agents/:iid/picks`, `GET .../deliveries/:id?wait=ms` and `GET .../allowed`
 * (the Allowed picks, read at each step boundary), as the Harness calls
 * them through its Custodian. The bearer must be the Sandbox token of the workspace the
 * conversation belongs to (`<workspace>.<rest>`, picks.ts); anything else is 401, naming nothing.
 */
async function sandboxRoute(req: Req, res: Res, ctx: Ctx, m: RegExpExecArray): Promise<void> {
  const iid = segmentOf(m[1]);
  const workspace = iid === undefined ? undefined : workspaceOfIid(iid);
  const token = bearerOf(req.headers.authorization);
  if (
    token === undefined ||
    workspace === undefined ||
    !ctx.checkSandboxToken ||
    !ctx.checkSandboxToken(workspace, token)
  ) {
    return sendError(res, 401, "unauthorized", "a valid Sandbox token is required", { "www-authenticate": "Bearer" });
  }
  if (!ctx.picks) return sendError(res, 404, "not_found", "picks are not served here");
  if (m[2] === "picks") {
    if (req.method !== "POST") return methodNotAllowed(res, ["POST"]);
    const body = await jsonBody(req, res);
    if (!body) return;
    const parsed = PickBody.safeParse(body.value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      return sendError(res, 400, "invalid", `${issue?.path.join(".") || "body"}: ${issue?.message}`);
    }
    const { receipt, repeated } = await ctx.picks.submit(workspace, iid!, parsed.data);
    return sendJson(res, repeated ? 200 : 202, receipt);
  }
  if (req.method !== "GET") return methodNotAllowed(res, ["GET"]);
  if (m[2] === "allowed") {
    const allowed = await ctx.picks.allowed(workspace, iid!);
    if (allowed === undefined) return sendError(res, 404, "not_found", `conversation ${iid} has no Allowed picks set`);
    return sendJson(res, 200, { allowed });
  }
  const deliveryId = segmentOf(m[3]);
  if (deliveryId === undefined) return sendError(res, 404, "not_found", "no such delivery");
  const wait = waitOf(new URL(req.url ?? "/", "http://x").searchParams.get("wait"));
  // The client leaving ends the hold (a Harness's poll cut by a reset is sent again).
  const gone = new AbortController();
  const onClose = () => gone.abort();
  res.on("close", onClose);
  try {
    const delivery = await ctx.picks.delivery(workspace, iid!, deliveryId, wait, gone.signal);
    if (!gone.signal.aborted) sendJson(res, 200, delivery);
  } finally {
    res.off("close", onClose);
  }
}

/** `GET /v1/workspaces/:name/picks` and `POST /v1/workspaces/:name/picks/:deliveryId/answer`. */
async function machinePicks(req: Req, res: Res, ctx: Ctx, name: string, deliveryId: string | undefined) {
  if (!ctx.picks) return sendError(res, 404, "not_found", "picks are not served here");
  if (deliveryId === undefined) {
    if (req.method !== "GET") return methodNotAllowed(res, ["GET"]);
    return sendJson(res, 200, { items: await ctx.picks.outstanding(name) });
  }
  if (req.method !== "POST") return methodNotAllowed(res, ["POST"]);
  const body = await jsonBody(req, res);
  if (!body) return;
  const parsed = AnswerBody.safeParse(body.value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return sendError(res, 400, "invalid", `${issue?.path.join(".") || "body"}: ${issue?.message}`);
  }
  await ctx.picks.answer(name, deliveryId, parsed.data.answer);
  sendJson(res, 200, { deliveryId, answered: true });
}

async function route(req: Req, res: Res, ctx: Ctx): Promise<void> {
  const path = pathOf(req);
  if (path === "/healthz") {
    if (req.method === "GET" || req.method === "HEAD") return sendJson(res, 200, { ok: true });
    return methodNotAllowed(res, ["GET", "HEAD"]);
  }
  // The Harness's routes carry a Sandbox token, never an API token.
  const sandbox = SANDBOX_ROUTE.exec(path);
  if (sandbox) return sandboxRoute(req, res, ctx, sandbox);
  // Everything else needs a bearer, before anything is read or said about the route.
  const token = bearerOf(req.headers.authorization);
  if (token === undefined || !ctx.checkToken(token)) {
    return sendError(res, 401, "unauthorized", "a valid bearer token is required", { "www-authenticate": "Bearer" });
  }
  if (path === "/metrics") {
    if (req.method !== "GET") return methodNotAllowed(res, ["GET"]);
    const text = await ctx.metrics();
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
    return void res.end(text);
  }
  if (path === "/v1/openapi.json") {
    if (req.method !== "GET") return methodNotAllowed(res, ["GET"]);
    res.writeHead(200, { "content-type": "application/json; charset=utf-8" });
    return void res.end(ctx.openapi);
  }
  if (path === "/v1/workspaces" || path === "/v1/workspaces/") return workspaces(req, res, ctx);
  const p = /^\/v1\/workspaces\/([^/]+)\/picks(?:\/([^/]+)\/answer)?\/?$/.exec(path);
  if (p) {
    const ws = nameOf(p[1]);
    const deliveryId = p[2] === undefined ? undefined : segmentOf(p[2]);
    if (ws === undefined || (p[2] !== undefined && deliveryId === undefined))
      return sendError(res, 404, "not_found", `no route for ${req.method} ${path}`);
    return machinePicks(req, res, ctx, ws, deliveryId);
  }
  const t = /^\/v1\/workspaces\/([^/]+)\/turns(?:\/([^/]+)\/(events|abort|allowed))?\/?$/.exec(path);
  if (t) {
    const ws = nameOf(t[1]!);
    const iid = t[2] === undefined ? undefined : segmentOf(t[2]);
    if (ws === undefined || (t[2] !== undefined && iid === undefined))
      return sendError(res, 404, "not_found", `no route for ${req.method} ${path}`);
    return turnRoutes(req, res, ctx, ws, iid, t[3] as TurnAction | undefined);
  }
  const m = /^\/v1\/workspaces\/([^/]+)(\/events)?\/?$/.exec(path);
  const name = m ? nameOf(m[1]) : undefined;
  if (!m || name === undefined) return sendError(res, 404, "not_found", `no route for ${req.method} ${path}`);
  return m[2] ? events(req, res, ctx, name) : workspace(req, res, ctx, name);
}

type TurnAction = "events" | "abort" | "allowed";

/**
 * `POST /v1/workspaces/:name/turns` (a turn for an Agent: the Harness's admission, recorded),
 * `GET .../turns/:iid/events` (the conversation's events as Server-Sent Events from the
 * admission's offset, or after `Last-Event-ID`, until that turn's end), `POST .../turns/:iid/abort`,
 * `PUT .../turns/:iid/allowed` (the conversation's Allowed picks changed; ADR-0029).
 */
async function turnRoutes(
  req: Req,
  res: Res,
  ctx: Ctx,
  name: string,
  iid: string | undefined,
  action: TurnAction | undefined,
): Promise<void> {
  if (!ctx.turns) return sendError(res, 404, "not_found", "turns are not served here");
  if (iid === undefined) {
    if (req.method !== "POST") return methodNotAllowed(res, ["POST"]);
    const body = await jsonBody(req, res);
    if (!body) return;
    const parsed = SubmitTurnBody.safeParse(body.value);
    if (!parsed.success) {
      const message = parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ");
      return sendError(res, 400, "invalid", message);
    }
    return sendJson(res, 202, await ctx.turns.submit(name, parsed.data));
  }
  if (action === "abort") {
    if (req.method !== "POST") return methodNotAllowed(res, ["POST"]);
    return sendJson(res, 200, await ctx.turns.abort(name, iid));
  }
  if (action === "allowed") {
    if (req.method !== "PUT") return methodNotAllowed(res, ["PUT"]);
    const body = await jsonBody(req, res);
    if (!body) return;
    const parsed = AllowedBody.safeParse(body.value);
    if (!parsed.success) {
      const message = parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ");
      return sendError(res, 400, "invalid", message);
    }
    return sendJson(res, 200, await ctx.turns.setAllowed(name, iid, parsed.data.allowed));
  }
  if (req.method !== "GET") return methodNotAllowed(res, ["GET"]);
  return turnEvents(req, res, ctx.turns, ctx.keepAliveMs, name, iid);
}

/** The turn's events, each with its offset as the SSE id, ending after its `end`. */
async function turnEvents(req: Req, res: Res, turns: TurnsApi, keepAliveMs: number, name: string, iid: string) {
  const last = req.headers["last-event-id"];
  let offset = last !== undefined && /^\d+$/.test(String(last)) ? Number(last) + 1 : undefined;
  const gone = new AbortController();
  res.on("close", () => gone.abort());
  // The first page before the headers: a refusal (no such conversation) is still an HTTP error.
  let { page, submissionId } = await turns.page(name, iid, offset, 0, gone.signal);
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache, no-transform",
    connection: "keep-alive",
    "x-accel-buffering": "no",
  });
  const timer = setInterval(() => res.write(": keep-alive\n\n"), keepAliveMs);
  try {
    for (;;) {
      for (const e of page.events) res.write(`id: ${e.offset}\nevent: ${e.kind}\ndata: ${JSON.stringify(e)}\n\n`);
      offset = page.next;
      if (page.events.some((e) => e.kind === "end" && e.submissionId === submissionId) || gone.signal.aborted) break;
      ({ page, submissionId } = await turns.page(name, iid, offset, LONG_POLL_MS, gone.signal));
    }
  } catch (err) {
    // Headers are out: say it on the stream; the client resumes with Last-Event-ID.
    if (!gone.signal.aborted)
      res.write(`event: error\ndata: ${JSON.stringify({ message: String((err as Error).message) })}\n\n`);
  } finally {
    clearInterval(timer);
    res.end();
  }
}

/** A path segment decoded, or undefined when it cannot be. */
function segmentOf(segment: string): string | undefined {
  try {
    const text = decodeURIComponent(segment);
    return text && !text.includes("/") ? text : undefined;
  } catch {
    return undefined;
  }
}

/** A path segment as a workspace name, or undefined (no such workspace can exist). */
function nameOf(segment: string): string | undefined {
  let text: string;
  try {
    text = decodeURIComponent(segment);
  } catch {
    return undefined;
  }
  return WorkspaceName.safeParse(text).success ? text : undefined;
}

/** The API as a request handler. Logs one line per request: method, path, status, duration. */
export function createOrchestratorServer(opts: ServerOptions): http.Server {
  const ctx: Ctx = {
    workspaces: opts.workspaces,
    checkToken: opts.checkToken,
    metrics: opts.metrics,
    log: opts.log ?? (() => undefined),
    keepAliveMs: opts.keepAliveMs ?? DEFAULT_KEEPALIVE_MS,
    openapi: JSON.stringify(openApiDocument()),
    ...(opts.picks ? { picks: opts.picks } : {}),
    ...(opts.turns ? { turns: opts.turns } : {}),
    ...(opts.checkSandboxToken ? { checkSandboxToken: opts.checkSandboxToken } : {}),
  };
  return http.createServer((req, res) => {
    logRequest(req, res, ctx.log);
    route(req, res, ctx).catch((err: unknown) => {
      if (err instanceof HttpError) {
        if (!res.headersSent) return sendError(res, err.status, err.code, err.message);
      } else {
        ctx.log({ level: "error", path: pathOf(req), message: err instanceof Error ? err.message : String(err) });
        if (!res.headersSent) return sendError(res, 500, "internal", "internal error");
      }
      res.destroy();
    });
  });
}

/** Creates the server and listens; resolves once the port is bound. */
export async function startOrchestratorServer(opts: ServerOptions, port: number, host?: string): Promise<http.Server> {
  return listen(createOrchestratorServer(opts), port, host);
}
