// The Orchestrator's HTTP API v1 on node:http (decision 0011): workspaces for Machines. The
// server holds no state of its own: it validates, authenticates and routes to an injected
// Workspaces service, and streams each workspace's events as Server-Sent Events. Every answer is
// JSON, every error `{error: {code, message}}`; a bad request never crashes it, and no header (so
// no token) is ever logged. With several replicas (decision 0079) any replica answers any call: one
// about a workspace another replica owns is forwarded to it (replicas/forward.ts), and a list asks
// each replica for its own.
import http from "node:http";
import https from "node:https";
import type { z } from "zod";
import {
  AllowedBody,
  AnswerBody,
  EffectBody,
  EgressList,
  FINAL_STATES,
  SubmitTurnBody,
  WorkspaceList,
  WorkspaceName,
  parseCreateBody,
  type Health,
  type WorkspaceEvent,
  type WorkspaceView,
} from "../../api/orchestrator-schemas";
import { ERRORS, HttpError, WorkspaceMoved, type ErrorCode } from "../../api/orchestrator-errors";
import { openApiDocument } from "./openapi-document";
import { LIMITS, PickBody } from "../../api/agent-protocol";
import { KeyedRateLimiter } from "../../lib/ratelimit";
import { maySee, type Principal } from "../tokens";
import { waitOf, workspaceOfIid } from "../agents/pick-ledger";
import type { Turns } from "../agents/turns";
import {
  ROUTES,
  matchPath,
  pathFor,
  segmentOf,
  type Method,
  type Param,
  type RouteId,
} from "../../api/orchestrator-routes";
import type { Picks } from "../agents/pick-store";
import type { Effects } from "../effects/effects";
import { bearerOf, listen, logRequest, pathOf, readBody, sendError, sendJson } from "../../lib/http-json";
import { fieldPath } from "../../api/field-path";
import { FORWARDED_HEADER, OWN_ONLY_HEADER } from "../../api/wire";
import { SoleOwnership, type Ownership } from "../replicas/ownership";
import { drained, forwardCall, peerDispatcher, peerJson, type Peer } from "../replicas/forward";
import type { Dispatcher } from "undici";

/** What the API serves; the registry of workspace actors implements it. */
import type { Workspaces } from "../workspaces/service";
export type { Workspaces };

import type { LogEntry } from "../../lib/log";
export type { LogEntry };

export type ServerOptions = {
  workspaces: Workspaces;
  /** A certificate and its key (PEM): the API is served over TLS (decision 0047). */
  tls?: { cert: string; key: string };
  /** Who a valid API token speaks for, undefined for any other (tokens.ts apiTokenChecker). */
  checkToken: (token: string) => Principal | undefined;
  /** The Prometheus text for /metrics. */
  metrics: () => string | Promise<string>;
  log?: (entry: LogEntry) => void;
  /** How often an idle event stream gets a keep-alive comment. Default 15 s. */
  keepAliveMs?: number;
  /** Agents' picks (pick-store.ts): absent, their routes answer 404. */
  picks?: Picks;
  /** Agents' turns (turns.ts): absent, their routes answer 404. */
  turns?: TurnsApi;
  /** A Machine's Effects (effects.ts): absent, their routes answer 404. */
  effects?: EffectsApi;
  /** True when `token` is the Sandbox token of workspace `name` (tokens.ts sandboxTokenChecker):
   * the Harness-facing routes' authentication, through the pod's Custodian. */
  checkSandboxToken?: (name: string, token: string) => boolean;
  /** Each workspace's rate on the Sandbox routes (decision 0042): picks, and reads (Allowed picks,
   * delivery polls), per second with a burst. */
  sandboxRates?: { picks: Rate; reads: Rate };
  /** Which replica owns which workspace (decision 0079): a call for one another replica owns is
   * forwarded to it. Absent: SoleOwnership, this is the only Orchestrator. */
  ownership?: Ownership;
  /** The PEM certificates this replica serves now (the current and, during a renewal, the previous):
   * a peer is accepted only when it serves one of them (forward.ts). Read at each new connection to
   * a peer: keep it cheap (answer what was read from the mounted files). Absent: peers are reached
   * over plain http, as the API is served then. */
  peerTls?: () => string[];
  /** How long a call for a workspace no replica owns waits for one. Default 15 s (a dead replica's
   * shards are taken within about that). */
  ownerWaitMs?: number;
};

export type Rate = { perSecond: number; burst: number };

/** A pick a second with a burst of 10 (a turn waits on one pick at a time, and each taken pick is
 * a ledger write); 50 reads a second with a burst of 100 (an Allowed read at each step boundary,
 * a delivery poll per 25 s hold: a read is served from memory, no write). */
export const SANDBOX_RATES = { picks: { perSecond: 1, burst: 10 }, reads: { perSecond: 50, burst: 100 } };

/** Bodies above this are refused with 413 before they are buffered. */
export const MAX_BODY_BYTES = 1024 * 1024;
const DEFAULT_KEEPALIVE_MS = 15_000;
const DEFAULT_OWNER_WAIT_MS = 15_000;

type Req = http.IncomingMessage;
type Res = http.ServerResponse;
type Ctx = Required<
  Omit<
    ServerOptions,
    "log" | "picks" | "checkSandboxToken" | "turns" | "effects" | "sandboxRates" | "tls" | "peerTls" | "ownerWaitMs"
  >
> &
  Pick<ServerOptions, "picks" | "checkSandboxToken" | "turns" | "effects"> & {
    log: (entry: LogEntry) => void;
    openapi: string;
    limiters: { picks: KeyedRateLimiter; reads: KeyedRateLimiter };
    /** Other replicas may own workspaces (an Ownership other than SoleOwnership was given). */
    replicated: boolean;
    ownerWaitMs: number;
    /** How peers are reached, made at the first forward. */
    peers: () => Dispatcher;
  };

/** What the turn routes need of turns.ts. */
export type TurnsApi = Pick<Turns, "submit" | "follow" | "abort" | "setAllowed" | "allowedFor">;

/** What the effect routes need of effects.ts. */
export type EffectsApi = Pick<Effects, "create" | "get" | "list">;

/** An error answered with its code's status from the catalogue (api/orchestrator-errors.ts,
 * decision 0057): the server answers no code the catalogue lacks. */
const fail = (res: Res, code: ErrorCode, message: string, headers?: http.OutgoingHttpHeaders) =>
  sendError(res, ERRORS[code].status, code, message, headers);

// ---------------------------------------------------------------------------------------------
// Bodies

/** How deep a body's JSON may nest (decision 0049): deeper, serializing it would exhaust the stack. */
export const MAX_JSON_DEPTH = 64;

/**
 * Where `value` nests deeper than `max` (arrays and objects), as the path to the first such place
 * (its top-level field first); undefined when it does not. Iterative: any depth is measured.
 */
export function tooDeep(value: unknown, max = MAX_JSON_DEPTH): PropertyKey[] | undefined {
  const stack: Array<{ v: unknown; path: PropertyKey[] }> = [{ v: value, path: [] }];
  while (stack.length) {
    const { v, path } = stack.pop()!;
    if (!v || typeof v !== "object") continue;
    if (path.length >= max) return path;
    const entries: Array<[PropertyKey, unknown]> = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    for (const [k, x] of entries) if (x && typeof x === "object") stack.push({ v: x, path: [...path, k] });
  }
  return undefined;
}

/** A JSON body, or an error already answered (undefined). `tooLarge` words the 413 of a body past `limit`. */
async function jsonBody(
  req: Req,
  res: Res,
  limit = MAX_BODY_BYTES,
  tooLarge = `body: more than ${limit} bytes: send a smaller one`,
): Promise<{ value: unknown; bytes: number } | undefined> {
  const type = req.headers["content-type"];
  if (type !== undefined && !/^application\/json\s*(;|$)/i.test(type)) {
    fail(res, "unsupported_media_type", "the body must be application/json");
    return undefined;
  }
  const raw = await readBody(req, limit);
  if (raw === undefined) {
    // Close the connection rather than drain an arbitrarily long remainder.
    fail(res, "too_large", tooLarge, { connection: "close" });
    return undefined;
  }
  let value: unknown;
  try {
    value = JSON.parse(raw.toString("utf8"));
  } catch {
    fail(res, "invalid", "body: not valid JSON");
    return undefined;
  }
  const deep = tooDeep(value);
  if (deep) {
    fail(
      res,
      "invalid",
      `${fieldPath(deep.slice(0, 1))}: nested more than ${MAX_JSON_DEPTH} levels deep (at ${fieldPath(deep.slice(0, 8))}...): send flatter JSON`,
    );
    return undefined;
  }
  return { value, bytes: raw.length };
}

// ---------------------------------------------------------------------------------------------
// Handlers, one per route of the table (api/orchestrator-routes.ts)

/** The route's decoded path parameters; on a Harness's route also the workspace its token is for,
 * on a Machine's who its token speaks for. */
type Params = Partial<Record<Param, string>> & { workspace?: string; principal?: Principal };
type Handler = (req: Req, res: Res, ctx: Ctx, params: Params) => Promise<void> | void;

const notFound = (res: Res, name: string) => fail(res, "not_found", `no workspace "${name}"`);

const sseFrame = (id: number, event: WorkspaceEvent | { type: "snapshot" }, data: unknown) =>
  `id: ${id}\nevent: ${event.type}\ndata: ${JSON.stringify(data)}\n\n`;

const isFinalEvent = (e: WorkspaceEvent) => e.type === "transition" && FINAL_STATES.includes(e.to);

/** A body parsed by a zod schema, or an error already answered (undefined). */
async function parsedBody<S extends z.ZodType>(req: Req, res: Res, schema: S): Promise<z.output<S> | undefined> {
  const body = await jsonBody(req, res);
  if (!body) return undefined;
  const parsed = schema.safeParse(body.value);
  if (parsed.success) return parsed.data;
  const message = parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ");
  fail(res, "invalid", message);
  return undefined;
}

/**
 * The workspace's events as Server-Sent Events: first a `snapshot` (its view now), then every
 * transition and wait as it happens, a keep-alive comment while idle, and the end of the stream
 * after a final state. Subscribed before the snapshot is read, so nothing falls between; events
 * heard meanwhile are held and sent after it.
 */
async function workspaceEvents(_req: Req, res: Res, ctx: Ctx, name: string): Promise<void> {
  let id = 0;
  let held: WorkspaceEvent[] | undefined = [];
  let closed = false;
  const send = (e: WorkspaceEvent) => {
    if (closed) return;
    res.write(sseFrame(++id, e, e));
    if (isFinalEvent(e)) finish();
  };
  const unsubscribe = ctx.workspaces.subscribe(
    name,
    (e) => (held ? held.push(e) : send(e)),
    // Moved to another replica: ended here, resumed there with a snapshot (decision 0079).
    () => finish(),
  );
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

/** The turn's events, each with its offset as the SSE id, ending after its `end` (turns.ts
 * `follow`: bounded re-polls, decision 0049). A client that reads slowly is waited for, never
 * buffered for. */
async function turnEvents(req: Req, res: Res, turns: TurnsApi, keepAliveMs: number, name: string, iid: string) {
  const last = req.headers["last-event-id"];
  if (last !== undefined && !/^\d{1,15}$/.test(String(last)))
    return fail(
      res,
      "invalid",
      "Last-Event-ID: must be the id of an event this stream sent (a whole number): send it as received, or none to read the last turn from its start",
    );
  const gone = new AbortController();
  res.on("close", () => gone.abort());
  let timer: NodeJS.Timeout | undefined;
  try {
    await turns.follow(
      name,
      iid,
      last === undefined ? {} : { lastEventId: Number(last) },
      gone.signal,
      async (page) => {
        // Headers after the first page: a refusal before it (no such conversation) is still an HTTP error.
        if (!res.headersSent) {
          res.writeHead(200, {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache, no-transform",
            connection: "keep-alive",
            "x-accel-buffering": "no",
          });
          timer = setInterval(() => res.write(": keep-alive\n\n"), keepAliveMs);
        }
        for (const e of page.events)
          if (!res.write(`id: ${e.offset}\nevent: ${e.kind}\ndata: ${JSON.stringify(e)}\n\n`)) await drained(res);
      },
    );
  } catch (err) {
    if (!res.headersSent) throw err;
    // Headers are out: say it on the stream; the client resumes with Last-Event-ID.
    if (!gone.signal.aborted)
      res.write(`event: error\ndata: ${JSON.stringify({ message: String((err as Error).message) })}\n\n`);
  } finally {
    clearInterval(timer);
    if (res.headersSent) res.end();
  }
}

/** A pick's delivery, held while outstanding up to `wait` ms; the client leaving ends the hold (a
 * Harness's poll cut by a reset is sent again). */
async function readDelivery(req: Req, res: Res, picks: Picks, workspace: string, iid: string, deliveryId: string) {
  const wait = waitOf(new URL(req.url ?? "/", "http://x").searchParams.get("wait"));
  const gone = new AbortController();
  const onClose = () => gone.abort();
  res.on("close", onClose);
  try {
    const delivery = await picks.delivery(workspace, iid, deliveryId, wait, gone.signal);
    if (!gone.signal.aborted) sendJson(res, 200, delivery);
  } finally {
    res.off("close", onClose);
  }
}

const picksOf = (res: Res, ctx: Ctx): Picks | undefined => {
  if (!ctx.picks) fail(res, "not_found", "picks are not served here");
  return ctx.picks;
};
const effectsOf = (res: Res, ctx: Ctx): EffectsApi | undefined => {
  if (!ctx.effects) fail(res, "not_found", "effects are not served here");
  return ctx.effects;
};

/** `?wait=<seconds>` of an Effect's GET, as ms (at most a minute); undefined when it is not a whole number. */
export function effectWaitOf(req: Req): number | undefined {
  const raw = new URL(req.url ?? "/", "http://x").searchParams.get("wait");
  if (raw === null) return 0;
  if (!/^\d{1,6}$/.test(raw)) return undefined;
  return Math.min(Number(raw), 60) * 1000;
}

/** An Effect's record, held (`?wait=`) until it settles, the wait ends, or the client leaves. */
async function readEffect(req: Req, res: Res, effects: EffectsApi, name: string, id: string) {
  const wait = effectWaitOf(req);
  if (wait === undefined)
    return fail(res, "invalid", "wait: must be a whole number of seconds (at most 60 are held), e.g. ?wait=30");
  const gone = new AbortController();
  const onClose = () => gone.abort();
  res.on("close", onClose);
  try {
    const record = await effects.get(name, id, wait, gone.signal);
    if (!gone.signal.aborted) sendJson(res, 200, record);
  } finally {
    res.off("close", onClose);
  }
}

const turnsOf = (res: Res, ctx: Ctx): TurnsApi | undefined => {
  if (!ctx.turns) fail(res, "not_found", "turns are not served here");
  return ctx.turns;
};

/**
 * What in a Harness's pick is past its bound (api/agent-protocol.ts LIMITS, decision 0042), named
 * by its field with the bound; undefined when nothing is. Measured before the schema is: an
 * oversized field is a 413, whatever else is wrong with it.
 */
export function pickOversize(value: unknown): string | undefined {
  if (!value || typeof value !== "object") return undefined;
  const v = value as Record<string, unknown>;
  for (const field of ["pick", "submissionId", "callId"] as const) {
    const max = field === "pick" ? 64 : LIMITS.id;
    if (typeof v[field] === "string" && (v[field] as string).length > max)
      return `${field}: ${(v[field] as string).length} characters, past the bound of ${max}: send a shorter one`;
  }
  if (v.args !== undefined) {
    const bytes = Buffer.byteLength(JSON.stringify(v.args), "utf8");
    if (bytes > LIMITS.pickArgsBytes)
      return `args: ${bytes} bytes as JSON, past the bound of ${LIMITS.pickArgsBytes}: send smaller arguments`;
  }
  return undefined;
}

const HEALTHY: Health = { ok: true };

/** How long a list waits for each peer's own list; one that does not answer in time is listed from
 * the Sandboxes (below). */
const PEER_LIST_MS = 5_000;

/**
 * The list across replicas (decision 0079): this replica's own workspaces and each peer's own (asked
 * in parallel with the caller's token, so each filters them as it would), merged by name; then, for
 * every Sandbox the watch holds that the caller may see and no replica listed (its shard moving, a
 * peer slow or gone), its view read from the Sandbox: a list during a move omits nothing.
 */
async function mergedList(req: Req, ctx: Ctx, principal: Principal, own: WorkspaceView[]): Promise<WorkspaceView[]> {
  const headers = { [OWN_ONLY_HEADER]: "1", authorization: req.headers.authorization ?? "" };
  const answers = await Promise.all(
    ctx.ownership.peers().map((p) => peerJson(ctx.peers(), p, ROUTES.listWorkspaces.path, headers, PEER_LIST_MS)),
  );
  const items = new Map(own.map((v) => [v.name, v]));
  for (const answer of answers) {
    const list = WorkspaceList.safeParse(answer);
    if (list.success) for (const v of list.data.items) if (!items.has(v.name)) items.set(v.name, v);
  }
  for (const { name, tenant } of ctx.workspaces.known?.() ?? []) {
    if (items.has(name) || !maySee(principal, tenant)) continue;
    const view = ctx.workspaces.sandboxView?.(name);
    if (view) items.set(name, view);
  }
  return [...items.values()];
}

/** Every route's handler: a route added to the table without one does not compile. The router
 * has checked the caller and decoded every parameter the route's path names. */
const HANDLERS: Record<RouteId, Handler> = {
  async createWorkspace(req, res, ctx, params) {
    const body = await jsonBody(req, res);
    if (!body) return;
    const parsed = parseCreateBody(body.value);
    if (!parsed.ok) return fail(res, "invalid", parsed.message);
    const principal = params.principal!;
    const name = await ctx.workspaces.create(parsed.body, principal.kind === "tenant" ? principal.tenant : undefined);
    sendJson(res, 202, { name }, { location: pathFor("getWorkspace", { name }) });
  },
  async listWorkspaces(req, res, ctx, { principal }) {
    const own = (await ctx.workspaces.list()).filter((v) => {
      const owner = ctx.workspaces.ownerOf(v.name);
      return owner !== null && maySee(principal!, owner);
    });
    if (!ctx.replicated || req.headers[OWN_ONLY_HEADER] !== undefined) return sendJson(res, 200, { items: own });
    sendJson(res, 200, { items: await mergedList(req, ctx, principal!, own) });
  },
  async getWorkspace(_req, res, ctx, { name }) {
    const view = await ctx.workspaces.get(name!);
    return view ? sendJson(res, 200, view) : notFound(res, name!);
  },
  async deleteWorkspace(_req, res, ctx, { name }) {
    return (await ctx.workspaces.delete(name!)) ? sendJson(res, 202, { name }) : notFound(res, name!);
  },
  workspaceEvents: (req, res, ctx, { name }) => workspaceEvents(req, res, ctx, name!),
  async getEgress(_req, res, ctx, { name }) {
    const allow = await ctx.workspaces.egress(name!);
    return allow ? sendJson(res, 200, { allow }) : notFound(res, name!);
  },
  async setEgress(req, res, ctx, { name }) {
    const body = await parsedBody(req, res, EgressList);
    if (!body) return;
    return (await ctx.workspaces.setEgress(name!, body.allow)) ? sendJson(res, 200, body) : notFound(res, name!);
  },
  async egressLog(_req, res, ctx, { name }) {
    const entries = await ctx.workspaces.egressLog(name!);
    return entries ? sendJson(res, 200, { entries }) : notFound(res, name!);
  },
  async submitTurn(req, res, ctx, { name }) {
    const turns = turnsOf(res, ctx);
    if (!turns) return;
    const body = await parsedBody(req, res, SubmitTurnBody);
    if (body) sendJson(res, 202, await turns.submit(name!, body));
  },
  async turnEvents(req, res, ctx, { name, iid }) {
    const turns = turnsOf(res, ctx);
    if (turns) await turnEvents(req, res, turns, ctx.keepAliveMs, name!, iid!);
  },
  async abortTurn(_req, res, ctx, { name, iid }) {
    const turns = turnsOf(res, ctx);
    if (turns) sendJson(res, 200, await turns.abort(name!, iid!));
  },
  async setAllowed(req, res, ctx, { name, iid }) {
    const turns = turnsOf(res, ctx);
    if (!turns) return;
    const body = await parsedBody(req, res, AllowedBody);
    if (body) sendJson(res, 200, await turns.setAllowed(name!, iid!, body.allowed));
  },
  async listPicks(_req, res, ctx, { name }) {
    const picks = picksOf(res, ctx);
    if (picks) sendJson(res, 200, { items: await picks.outstanding(name!) });
  },
  async answerPick(req, res, ctx, { name, deliveryId }) {
    const picks = picksOf(res, ctx);
    if (!picks) return;
    const body = await parsedBody(req, res, AnswerBody);
    if (!body) return;
    await picks.answer(name!, deliveryId!, body.answer);
    sendJson(res, 200, { deliveryId, answered: true });
  },
  async createEffect(req, res, ctx, { name }) {
    const effects = effectsOf(res, ctx);
    if (!effects) return;
    const body = await parsedBody(req, res, EffectBody);
    if (!body) return;
    const { record, created } = await effects.create(name!, body);
    sendJson(res, created ? 202 : 200, record, {
      location: pathFor("getEffect", { name: name!, effectId: record.id }),
    });
  },
  async listEffects(_req, res, ctx, { name }) {
    const effects = effectsOf(res, ctx);
    if (effects) sendJson(res, 200, { items: await effects.list(name!) });
  },
  async getEffect(req, res, ctx, { name, effectId }) {
    const effects = effectsOf(res, ctx);
    if (effects) await readEffect(req, res, effects, name!, effectId!);
  },
  async takePick(req, res, ctx, { iid, workspace }) {
    const picks = picksOf(res, ctx);
    if (!picks) return;
    // Read up to the API's body bound, so a pick past its own bound is refused naming its field.
    const raw = await jsonBody(
      req,
      res,
      MAX_BODY_BYTES,
      `body: more than ${MAX_BODY_BYTES} bytes; a pick's args are at most ${LIMITS.pickArgsBytes} bytes as JSON and its body ${LIMITS.pickBodyBytes}: send smaller arguments`,
    );
    if (!raw) return;
    const oversize =
      pickOversize(raw.value) ??
      (raw.bytes > LIMITS.pickBodyBytes
        ? `body: ${raw.bytes} bytes, past the bound of ${LIMITS.pickBodyBytes}: send a smaller pick`
        : undefined);
    if (oversize) return fail(res, "too_large", oversize);
    const parsed = PickBody.safeParse(raw.value);
    if (!parsed.success) {
      const message = parsed.error.issues.map((i) => `${i.path.join(".") || "body"}: ${i.message}`).join("; ");
      return fail(res, "invalid", message);
    }
    const body = parsed.data;
    const { receipt, repeated } = await picks.submit(workspace!, iid!, body);
    sendJson(res, repeated ? 200 : 202, receipt);
  },
  async readAllowed(_req, res, ctx, { iid, workspace }) {
    const turns = turnsOf(res, ctx);
    if (!turns) return;
    const now = await turns.allowedFor(workspace!, iid!);
    if (now === undefined) return fail(res, "not_found", `conversation ${iid} has no running turn`);
    sendJson(res, 200, now);
  },
  async readDelivery(req, res, ctx, { iid, deliveryId, workspace }) {
    const picks = picksOf(res, ctx);
    if (picks) await readDelivery(req, res, picks, workspace!, iid!, deliveryId!);
  },
  healthz: (_req, res) => sendJson(res, 200, HEALTHY),
  // The GET's status and headers with no body (decision 0077): a load balancer's probe reads nothing.
  healthzHead(_req, res) {
    res.writeHead(200, {
      "content-type": "application/json; charset=utf-8",
      "content-length": Buffer.byteLength(JSON.stringify(HEALTHY)),
      "cache-control": "no-store",
    });
    res.end();
  },
  async metrics(_req, res, ctx, { principal }) {
    // Here an admin's; a scraper reads the same text on the metrics port with no token (decision 0076).
    if (principal?.kind !== "admin")
      return fail(
        res,
        "forbidden",
        "the metrics are an admin token's to read here; a scraper reads them with no token on the metrics port (9090)",
      );
    const text = await ctx.metrics();
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
    res.end(text);
  },
  openapi(_req, res, ctx) {
    res.writeHead(200, { "content-type": "application/json; charset=utf-8" });
    res.end(ctx.openapi);
  },
};

// ---------------------------------------------------------------------------------------------
// The router

/** The order an Allow header lists methods in. */
const METHOD_ORDER: Method[] = ["GET", "HEAD", "POST", "PUT", "DELETE"];

/** A raw path segment as the parameter it stands for, or undefined (then no such object exists).
 * A workspace name must be one the API could have made. */
function paramOf(param: Param, raw: string): string | undefined {
  const text = segmentOf(raw);
  if (param !== "name" || text === undefined) return text;
  return WorkspaceName.safeParse(text).success ? text : undefined;
}

const unauthorized = (res: Res, message: string) =>
  fail(res, "unauthorized", message, { "www-authenticate": "Bearer" });

/** The routes that may run twice without harm, whatever their method: a pick again answers its
 * delivery, an Effect's id runs once, an abort of an aborted turn aborts nothing. A forward that
 * may have reached the owner but had no answer is sent again only for these and the GETs, PUTs and
 * DELETEs (forward.ts); a create never is. */
const REPEATABLE = new Set<RouteId>(["takePick", "createEffect", "abortTurn"]);
const repeatable = (id: RouteId | undefined, method: string | undefined) =>
  (id !== undefined && REPEATABLE.has(id)) || ["GET", "HEAD", "PUT", "DELETE"].includes(method ?? "");

/** How many times a read cut by a move is placed again before the caller is told to retry. */
const MAX_MOVES = 3;

/** Whole seconds a caller waits before calling again about a workspace that is moving. */
const MOVING_RETRY_AFTER_S = 2;

const moving = (res: Res, what: string) =>
  fail(
    res,
    "unavailable",
    `${what} is moving between Orchestrator replicas and none owns it now: retry after ${MOVING_RETRY_AFTER_S} seconds`,
    { "retry-after": String(MOVING_RETRY_AFTER_S) },
  );

/**
 * Where a call about `workspace` is served (decision 0079): here when this replica owns it, else
 * forwarded to its owner; when no replica owns it now (its shard moving), once one does, waiting up
 * to ownerWaitMs, else 503 unavailable. A forwarded call is served only by the owner: a replica
 * that no longer owns the workspace answers not_owner and the forwarder looks again (forward.ts).
 * Nothing is read about the workspace here: that is the owner's, the tenant check included.
 */
async function placed(
  req: Req,
  res: Res,
  ctx: Ctx,
  workspace: string,
  id: RouteId | undefined,
  serve: (req: Req) => Promise<void>,
  moves = 0,
): Promise<void> {
  const notOwner = () =>
    fail(
      res,
      "not_owner",
      `workspace ${workspace}: replica ${ctx.ownership.identity} does not own it now: look up its owner again`,
    );
  // A read cut by the workspace's move before anything was sent (a turn's stream before its first
  // page) is placed again: the forwarder looks again on not_owner, a caller here is forwarded.
  const serveHere = async (r: Req) => {
    try {
      await serve(r);
    } catch (err) {
      if (!(err instanceof WorkspaceMoved) || res.headersSent || req.method !== "GET" || moves >= MAX_MOVES) throw err;
      if (req.headers[FORWARDED_HEADER] !== undefined) return notOwner();
      return placed(req, res, ctx, workspace, id, serve, moves + 1);
    }
  };
  // Served only once adopted here (ownerOf says self); held but still adopting, the forwarder looks again.
  if (req.headers[FORWARDED_HEADER] !== undefined)
    return ctx.ownership.ownerOf(workspace).kind === "self" ? serveHere(req) : notOwner();
  let owner = ctx.ownership.ownerOf(workspace);
  if (owner.kind === "none") {
    const gone = new AbortController();
    const onClose = () => gone.abort();
    res.on("close", onClose);
    try {
      owner = await ctx.ownership.waitForOwner(workspace, ctx.ownerWaitMs, gone.signal);
    } finally {
      res.off("close", onClose);
    }
    if (gone.signal.aborted) return;
  }
  if (owner.kind === "self") return serveHere(req);
  if (owner.kind === "none") return moving(res, `workspace ${workspace}`);
  const result = await forwardCall(req, res, {
    ownership: ctx.ownership,
    dispatcher: ctx.peers(),
    workspace,
    peer: owner,
    idempotent: repeatable(id, req.method),
    resumable: id === "turnEvents",
    serveHere,
    bodyLimit: MAX_BODY_BYTES,
    log: ctx.log,
  });
  if (result.kind === "unavailable") {
    // The details (peer addresses) are the operators', not the caller's.
    ctx.log({ level: "warn", path: pathOf(req), message: `forwarding: ${result.message}` });
    moving(res, `workspace ${workspace}`);
  }
}

/** A create (decision 0079): served by a replica that holds a shard (the registry names the
 * workspace in one it holds), else forwarded to a peer; never sent twice once it may have arrived. */
async function placedCreate(req: Req, res: Res, ctx: Ctx, serve: (req: Req) => Promise<void>): Promise<void> {
  if (ctx.ownership.owned().length > 0) return serve(req);
  if (req.headers[FORWARDED_HEADER] !== undefined)
    return fail(res, "not_owner", `replica ${ctx.ownership.identity} holds no shard now: ask another replica`);
  const first = ctx.ownership.peers()[0];
  if (!first) return moving(res, "every workspace");
  const result = await forwardCall(req, res, {
    ownership: ctx.ownership,
    dispatcher: ctx.peers(),
    peer: first,
    nextPeer: (tried) => ctx.ownership.peers().find((p: Peer) => !tried.has(p.identity)),
    idempotent: false,
    serveHere: serve,
    bodyLimit: MAX_BODY_BYTES,
    log: ctx.log,
  });
  if (result.kind === "unavailable") {
    ctx.log({ level: "warn", path: pathOf(req), message: `forwarding a create: ${result.message}` });
    moving(res, "every workspace");
  }
}

/**
 * Who may call is settled first, before anything is read or said about the route: a Harness's
 * route needs the Sandbox token of the workspace its conversation belongs to (`<workspace>.<rest>`,
 * pick-ledger.ts), anything but the health check an API token, an unknown path included. An
 * unauthenticated call is answered here, never forwarded. Then the call goes where its workspace
 * is owned (placed, decision 0079), before anything about the workspace is read.
 */
async function route(req: Req, res: Res, ctx: Ctx): Promise<void> {
  const path = pathOf(req);
  const match = matchPath(path);
  const auth = match?.entry.auth ?? "api";
  const token = bearerOf(req.headers.authorization);
  const params: Params = {};
  if (auth === "sandbox") {
    const iid = paramOf("iid", match!.raw.iid);
    const workspace = iid === undefined ? undefined : workspaceOfIid(iid);
    // The token's signature is checked here; whether its workspace exists is its owner's to say.
    if (token === undefined || workspace === undefined || !ctx.checkSandboxToken?.(workspace, token))
      return unauthorized(res, "a valid Sandbox token is required");
    params.workspace = workspace;
    const id = match!.entry.routes.find((r) => r.method === req.method)?.id;
    return placed(req, res, ctx, workspace, id, (r) => routeOwned(r, res, ctx, path, match, params));
  } else if (auth === "api") {
    const principal = token === undefined ? undefined : ctx.checkToken(token);
    if (!principal) return unauthorized(res, "a valid bearer token is required");
    params.principal = principal;
  }
  return routeOwned(req, res, ctx, path, match, params);
}

/** The rest of the route, once the caller is known; a Harness's call here is at its workspace's owner. */
async function routeOwned(
  req: Req,
  res: Res,
  ctx: Ctx,
  path: string,
  match: ReturnType<typeof matchPath>,
  params: Params,
): Promise<void> {
  if (params.workspace !== undefined) {
    const workspace = params.workspace;
    // A token is valid only for a workspace this Orchestrator knows (decision 0049).
    if (ctx.workspaces.ownerOf(workspace) === null) return unauthorized(res, "a valid Sandbox token is required");
    // Each workspace's own budget on these routes: its flood is its own 429s, no one else's wait.
    const limiter = match!.entry.routes.some((r) => r.id === "takePick") ? ctx.limiters.picks : ctx.limiters.reads;
    const waitMs = limiter.tryTake(workspace);
    if (waitMs > 0)
      return fail(res, "rate_limited", `workspace ${workspace}'s Sandbox calls are over their rate: retry later`, {
        "retry-after": String(Math.ceil(waitMs / 1000)),
      });
  }
  const noRoute = () => fail(res, "not_found", `no route for ${req.method} ${path}`);
  if (!match) return noRoute();
  for (const [param, raw] of Object.entries(match.raw) as Array<[Param, string]>) {
    const value = paramOf(param, raw);
    if (value === undefined) return noRoute();
    params[param] = value;
  }
  const found = match.entry.routes.find((r) => r.method === req.method);
  const serve = (r: Req) => routeServe(r, res, ctx, match, params, found?.id);
  if (params.name !== undefined && params.principal) return placed(req, res, ctx, params.name, found?.id, serve);
  if (found?.id === "createWorkspace") return placedCreate(req, res, ctx, serve);
  return serve(req);
}

/** The route served here, by the workspace's owner. */
async function routeServe(
  req: Req,
  res: Res,
  ctx: Ctx,
  match: NonNullable<ReturnType<typeof matchPath>>,
  params: Params,
  id: RouteId | undefined,
): Promise<void> {
  // A workspace this Orchestrator does not know (a labelled Sandbox it did not create included) and
  // another tenant's answer the same 404, before the method or the body is looked at: one answer,
  // nothing learned about what exists (decision 0049).
  if (params.name !== undefined && params.principal) {
    const owner = ctx.workspaces.ownerOf(params.name);
    if (owner === null || !maySee(params.principal, owner)) return notFound(res, params.name);
  }
  if (id === undefined) {
    const allow = match.entry.routes
      .map((r) => r.method)
      .sort((a, b) => METHOD_ORDER.indexOf(a) - METHOD_ORDER.indexOf(b));
    return fail(res, "method_not_allowed", `use ${allow.join(" or ")}`, { allow: allow.join(", ") });
  }
  return HANDLERS[id](req, res, ctx, params);
}

/** The API as a request handler. Logs one line per request: method, path, status, duration. */
export function createOrchestratorServer(opts: ServerOptions): http.Server {
  let dispatcher: Dispatcher | undefined;
  const ctx: Ctx = {
    workspaces: opts.workspaces,
    checkToken: opts.checkToken,
    metrics: opts.metrics,
    log: opts.log ?? (() => undefined),
    keepAliveMs: opts.keepAliveMs ?? DEFAULT_KEEPALIVE_MS,
    ownership: opts.ownership ?? new SoleOwnership(),
    replicated: opts.ownership !== undefined && !(opts.ownership instanceof SoleOwnership),
    ownerWaitMs: opts.ownerWaitMs ?? DEFAULT_OWNER_WAIT_MS,
    peers: () => (dispatcher ??= peerDispatcher(opts.peerTls)),
    openapi: JSON.stringify(openApiDocument()),
    limiters: {
      picks: new KeyedRateLimiter(
        (opts.sandboxRates ?? SANDBOX_RATES).picks.perSecond,
        (opts.sandboxRates ?? SANDBOX_RATES).picks.burst,
      ),
      reads: new KeyedRateLimiter(
        (opts.sandboxRates ?? SANDBOX_RATES).reads.perSecond,
        (opts.sandboxRates ?? SANDBOX_RATES).reads.burst,
      ),
    },
    ...(opts.picks ? { picks: opts.picks } : {}),
    ...(opts.turns ? { turns: opts.turns } : {}),
    ...(opts.effects ? { effects: opts.effects } : {}),
    ...(opts.checkSandboxToken ? { checkSandboxToken: opts.checkSandboxToken } : {}),
  };
  const handler: http.RequestListener = (req, res) => {
    logRequest(req, res, ctx.log);
    route(req, res, ctx).catch((err: unknown) => {
      if (err instanceof HttpError) {
        if (!res.headersSent) return fail(res, err.code, err.message);
      } else {
        ctx.log({ level: "error", path: pathOf(req), message: err instanceof Error ? err.message : String(err) });
        if (!res.headersSent) return fail(res, "internal", "internal error");
      }
      res.destroy();
    });
  };
  // An https.Server serves requests exactly as an http.Server does (it is one over TLS).
  const server = opts.tls
    ? (https.createServer({ cert: opts.tls.cert, key: opts.tls.key }, handler) as unknown as http.Server)
    : http.createServer(handler);
  server.on("close", () => void dispatcher?.destroy().catch(() => undefined));
  return server;
}

/** Creates the server and listens; resolves once the port is bound. */
export async function startOrchestratorServer(opts: ServerOptions, port: number, host?: string): Promise<http.Server> {
  return listen(createOrchestratorServer(opts), port, host);
}
