// A typed client of the Orchestrator's API for a Machine written in TypeScript: every route of the
// table (api.ts, generated from the API's OpenAPI document), the workspace's and a turn's events
// as Server-Sent Events read by an async iterator. It speaks Node's own http and https, so the
// package needs nothing at run time (docs/decisions/0061-clients-beyond-typescript.md). An error
// answer becomes an OrchestratorError carrying its status, the API's error code and message. A
// refused connection is sent again within a reconnect window (30 s), and so is an idempotent call
// (GET, HEAD, PUT, DELETE) whose connection is reset before any answer, so a Machine rides through
// an Orchestrator's restart or a rollout of its replicas (decision 0079).
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import {
  ROUTES,
  type AbortReceipt,
  type AllowedSet,
  type EffectBody,
  type EffectList,
  type EffectRecord,
  type RouteId,
  type RouteTypes,
  type StreamEvent,
  type TurnSubmitted,
  type WorkspaceEvent,
  type WorkspaceView,
} from "./api";

/** What a route's body is, as a client writes it. */
export type BodyOf<R extends RouteId> = RouteTypes[R]["body"];
/** What a route answers. */
export type AnswerOf<R extends RouteId> = RouteTypes[R]["answer"];

/** One item of a workspace's event stream: first its view (`snapshot`), then each event. */
export type WorkspaceStreamItem = { type: "snapshot"; view: WorkspaceView } | WorkspaceEvent;

/** The Effect states after which nothing more happens to it. */
export const SETTLED_EFFECT_STATES: readonly string[] = ["succeeded", "failed", "unknown"];

/** The workspace states after which nothing more happens. */
export const FINAL_STATES: readonly string[] = ["lost", "failed", "destroyed"];

/** An error the API answered (`{error:{code,message}}`), or an answer this client could not read. */
export class OrchestratorError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = "OrchestratorError";
    this.status = status;
    this.code = code;
  }
}

/** The environment variable the token is read from when none is passed; the Python client's too. */
export const TOKEN_ENV = "JR2_API_TOKEN";

export type ClientOptions = {
  /** The Orchestrator's base url, e.g. http://127.0.0.1:8090. */
  url: string;
  /** An API token (a line of the installation's tokens file); when not passed, the environment's JR2_API_TOKEN. */
  token?: string;
  /** For an https url: the PEM CA bundle its certificate chains to, when not a public one. */
  ca?: string;
  /** How long a call keeps trying while the Orchestrator refuses connections, as it does while it
   * restarts (its Service has no ready endpoint), or (GET, HEAD, PUT, DELETE alone) resets them
   * before any answer, as a replica going away in a rollout may. Default 30 s; 0 tries once. */
  reconnectWindowMs?: number;
};

type Params = Record<string, string>;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Connect failures: nothing of the request was sent. An unreachable host is what a Service still
 * routing to a replica just gone gives for a moment in a rollout (decision 0079). */
const NOT_CONNECTED = ["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EHOSTDOWN"];

/** A refused (or unreachable) connection: nothing of the request was sent, so any call, a create
 * too, may be sent again. */
const refused = (err: unknown): boolean => {
  const e = err as { code?: string; syscall?: string } | undefined;
  return e?.code === "ECONNREFUSED" || (NOT_CONNECTED.includes(e?.code ?? "") && e?.syscall === "connect");
};

/** The methods a call may be sent again by after its connection was reset before any answer: the
 * server may have received it, and these mean the same sent twice (the Python client's too). */
export const IDEMPOTENT_METHODS: readonly string[] = ["GET", "HEAD", "PUT", "DELETE"];

/** A connection ended before any answer (a replica going away, decision 0079): the request may have been received. */
const reset = (err: unknown): boolean => {
  const code = (err as { code?: string } | undefined)?.code;
  return code === "ECONNRESET" || code === "EPIPE";
};

/** A route's path with its parameters filled in, each percent-encoded. */
export function pathFor(id: RouteId, params: Params = {}): string {
  return ROUTES[id].path.replace(/\{(\w+)\}/g, (_, k: string) => {
    const value = params[k];
    if (value === undefined) throw new Error(`${id}: the path needs ${k}`);
    return encodeURIComponent(value);
  });
}

export class OrchestratorClient {
  private readonly base: URL;
  private readonly agent: http.Agent | undefined;
  private readonly opts: ClientOptions;
  private readonly token: string;

  constructor(opts: ClientOptions) {
    this.opts = opts;
    const token = opts.token ?? process.env[TOKEN_ENV];
    if (!token)
      throw new Error(
        `OrchestratorClient: no token: pass \`token\`, or set ${TOKEN_ENV} to an API token (a line of the installation's tokens file)`,
      );
    this.token = token;
    this.base = new URL(opts.url.replace(/\/+$/, ""));
    const scheme = this.base.protocol;
    if (scheme !== "http:" && scheme !== "https:")
      throw new Error(`OrchestratorClient url ${opts.url}: write an http:// or https:// url`);
    if (opts.ca && scheme !== "https:")
      throw new Error(`OrchestratorClient url ${opts.url}: a CA is for an https:// url; write https://`);
    this.agent = opts.ca ? new https.Agent({ ca: opts.ca, keepAlive: true }) : undefined;
  }

  // ---- workspaces

  /** Places a workspace; answers its name (the workspace then moves on by itself). */
  createWorkspace(body: BodyOf<"createWorkspace">): Promise<AnswerOf<"createWorkspace">> {
    return this.call("createWorkspace", {}, body);
  }

  /** Every workspace this token may see. */
  listWorkspaces(): Promise<AnswerOf<"listWorkspaces">> {
    return this.call("listWorkspaces", {});
  }

  workspace(name: string): Promise<WorkspaceView> {
    return this.call("getWorkspace", { name });
  }

  /** Polls the workspace until it is ready; throws naming the failure when it ends otherwise, or
   * when `timeoutMs` passes first. */
  async waitReady(name: string, opts: { timeoutMs?: number; intervalMs?: number } = {}): Promise<WorkspaceView> {
    const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
    for (;;) {
      const view = await this.workspace(name);
      if (view.state === "ready") return view;
      if (FINAL_STATES.includes(view.state)) {
        const why = view.failure
          ? `${view.failure.stage} failed: ${view.failure.reason}: ${view.failure.message}`
          : view.lost
            ? `lost: ${view.lost.reason}: ${view.lost.message}`
            : view.state;
        throw new OrchestratorError(409, view.state, `workspace ${name} is ${view.state} (${why})`);
      }
      if (Date.now() >= deadline) {
        const wait = view.wait ? `, waiting: ${JSON.stringify(view.wait)}` : "";
        throw new OrchestratorError(408, "timeout", `workspace ${name} not ready in time: ${view.state}${wait}`);
      }
      await sleep(opts.intervalMs ?? 500);
    }
  }

  /** Ends the workspace (202: it is being destroyed). */
  deleteWorkspace(name: string): Promise<AnswerOf<"deleteWorkspace">> {
    return this.call("deleteWorkspace", { name });
  }

  /**
   * The workspace's events: first a `snapshot` of its view, then each transition, wait and renewal
   * as it happens, until a final state, when the server ends the stream. Breaking out of the loop,
   * or `signal`, closes the stream.
   */
  async *workspaceEvents(name: string, opts: { signal?: AbortSignal } = {}): AsyncGenerator<WorkspaceStreamItem> {
    for await (const frame of this.stream("workspaceEvents", { name }, {}, opts.signal)) {
      const data = readJson(frame.data, "a workspace event") as WorkspaceView | WorkspaceEvent;
      yield frame.event === "snapshot" ? { type: "snapshot", view: data as WorkspaceView } : (data as WorkspaceEvent);
    }
  }

  /** The workspace's egress list (decision 0051). */
  egress(name: string): Promise<AnswerOf<"getEgress">> {
    return this.call("getEgress", { name });
  }

  /** Replaces the workspace's egress list; in force within 2 s, with no restart. */
  setEgress(name: string, allow: string[]): Promise<AnswerOf<"setEgress">> {
    return this.call("setEgress", { name }, { allow });
  }

  /** The egress point's log of the workspace's connections, oldest first. */
  egressLog(name: string): Promise<AnswerOf<"egressLog">> {
    return this.call("egressLog", { name });
  }

  // ---- an Agent's turns and picks

  /** Gives one of the workspace's Agents a turn; answers the conversation's iid and the admission. */
  submitTurn(name: string, body: BodyOf<"submitTurn">): Promise<TurnSubmitted> {
    return this.call("submitTurn", { name }, body);
  }

  /**
   * The conversation's events (from its latest turn's admission, or after `lastEventId`: each
   * event's `offset` is its SSE id) until that turn's `end`, when the server ends the stream.
   * Breaking out of the loop, or `signal`, closes the stream. A stream that fails after it began
   * throws an OrchestratorError (code `stream`); resume by passing the last event's offset.
   */
  async *turnEvents(
    name: string,
    iid: string,
    opts: { lastEventId?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<StreamEvent> {
    const headers: Record<string, string> =
      opts.lastEventId !== undefined ? { "last-event-id": String(opts.lastEventId) } : {};
    for await (const frame of this.stream("turnEvents", { name, iid }, headers, opts.signal))
      yield readJson(frame.data, "a turn event") as StreamEvent;
  }

  /** Aborts the conversation's running turn. */
  abort(name: string, iid: string): Promise<AbortReceipt> {
    return this.call("abortTurn", { name, iid });
  }

  /** Changes the conversation's Allowed picks; its running turn is told at its next step boundary. */
  setAllowed(name: string, iid: string, allowed: string[]): Promise<AllowedSet> {
    return this.call("setAllowed", { name, iid }, { allowed });
  }

  /** The workspace's outstanding picks. */
  picks(name: string): Promise<AnswerOf<"listPicks">> {
    return this.call("listPicks", { name });
  }

  /** Answers a pick: the text the Agent's model reads as the Menu tool's result. */
  answer(name: string, deliveryId: string, answer: string): Promise<AnswerOf<"answerPick">> {
    return this.call("answerPick", { name, deliveryId }, { answer });
  }

  // ---- a Machine's Effects (run by the workspace's Effector, each at most once)

  /**
   * Asks the workspace's Effector for an Effect (a push, an http request, a credentialed command),
   * recorded before it runs. Sending the same `id` again with the same body answers its record and
   * runs nothing, so a Machine may retry a create it did not hear the answer of.
   */
  createEffect(name: string, body: EffectBody): Promise<EffectRecord> {
    return this.call("createEffect", { name }, body);
  }

  /** One Effect's record; with `waitSeconds` (at most 60) the server holds until it settles. */
  getEffect(name: string, id: string, opts: { waitSeconds?: number } = {}): Promise<EffectRecord> {
    const query = opts.waitSeconds !== undefined ? `?wait=${Math.max(0, Math.round(opts.waitSeconds))}` : "";
    return this.call("getEffect", { name, effectId: id }, undefined, query);
  }

  /** The workspace's Effects, in the order they were sent. */
  listEffects(name: string): Promise<EffectList> {
    return this.call("listEffects", { name });
  }

  /**
   * Creates the Effect (or finds it, by its id) and waits until it settles: its record, whose
   * `state` is succeeded, failed or unknown. Throws (code `timeout`) when `timeoutMs` (default 10
   * minutes) passes first; the Effect then still runs, and the same call again waits on it.
   */
  async runEffect(name: string, body: EffectBody, opts: { timeoutMs?: number } = {}): Promise<EffectRecord> {
    const deadline = Date.now() + (opts.timeoutMs ?? 600_000);
    let record = await this.createEffect(name, body);
    while (!SETTLED_EFFECT_STATES.includes(record.state)) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new OrchestratorError(408, "timeout", `Effect ${body.id} of workspace ${name} is still ${record.state}`);
      record = await this.getEffect(name, body.id, { waitSeconds: Math.min(60, Math.ceil(left / 1000)) });
    }
    return record;
  }

  // ---- the service

  /** Whether the Orchestrator serves (GET /healthz answers 200). */
  async healthy(): Promise<boolean> {
    const res = await this.send("healthz", pathFor("healthz"), {});
    res.resume();
    return res.statusCode === 200;
  }

  /** The Prometheus metrics text (an admin token's). */
  async metrics(): Promise<string> {
    return this.text("metrics");
  }

  /** The API's OpenAPI document. */
  async openapi(): Promise<Record<string, unknown>> {
    return readJson(await this.text("openapi"), "GET /v1/openapi.json") as Record<string, unknown>;
  }

  // ---- the wire

  /** One route of the table: its method and path from there; the answer's JSON. */
  private async call<R extends RouteId>(id: R, params: Params, body?: unknown, query = ""): Promise<AnswerOf<R>> {
    const { method } = ROUTES[id];
    const path = pathFor(id, params) + query;
    const res = await this.send(id, path, {}, body);
    const text = await textOf(res);
    if ((res.statusCode ?? 0) >= 400) throw errorOf(res.statusCode ?? 0, text);
    const json = readJson(text, `${method} ${path}`, res.statusCode);
    if (json === null || typeof json !== "object")
      throw new OrchestratorError(502, "unreadable", `${method} ${path} answered ${text.slice(0, 200)}, not an object`);
    return json as AnswerOf<R>;
  }

  private async text(id: RouteId): Promise<string> {
    const res = await this.send(id, pathFor(id), {});
    const text = await textOf(res);
    if ((res.statusCode ?? 0) >= 400) throw errorOf(res.statusCode ?? 0, text);
    return text;
  }

  /** A route's Server-Sent Events, frame by frame; an `error` frame (the stream failed after it
   * began) throws. */
  private async *stream(
    id: RouteId,
    params: Params,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
  ): AsyncGenerator<Frame> {
    const res = await this.send(
      id,
      pathFor(id, params),
      { accept: "text/event-stream", ...headers },
      undefined,
      signal,
    );
    if (res.statusCode !== 200) throw errorOf(res.statusCode ?? 0, await textOf(res));
    try {
      for await (const frame of sseFrames(res)) {
        if (frame.event !== "error") {
          yield frame;
          continue;
        }
        let message = frame.data;
        try {
          message = String((JSON.parse(frame.data) as { message?: unknown }).message ?? frame.data);
        } catch {
          // not JSON: the text as it came
        }
        throw new OrchestratorError(502, "stream", `the stream failed: ${message}`);
      }
    } finally {
      // A consumer that stops early (break, return, throw) closes the connection.
      if (!res.destroyed) res.destroy();
    }
  }

  /** The request sent, again (backoff 100 ms to 1 s) while the connection is refused within the
   * reconnect window, so a Machine rides through an Orchestrator's restart; likewise an idempotent
   * one (GET, HEAD, PUT, DELETE) reset before any answer, never another, which the server may have
   * received (decision 0079); and once more when a kept-alive connection the server had closed
   * loses it before any answer. */
  private async send(
    id: RouteId,
    path: string,
    headers: Record<string, string>,
    body?: unknown,
    signal?: AbortSignal,
  ): Promise<IncomingMessage> {
    const until = Date.now() + (this.opts.reconnectWindowMs ?? 30_000);
    let resent = false;
    for (let backoff = 100; ; backoff = Math.min(backoff * 2, 1_000)) {
      try {
        return await this.once(id, path, headers, body, signal);
      } catch (err) {
        if ((err as { reused?: boolean }).reused && !resent) {
          resent = true;
          continue;
        }
        const again = refused(err) || (reset(err) && IDEMPOTENT_METHODS.includes(ROUTES[id].method));
        if (!again || Date.now() + backoff > until || signal?.aborted) throw err;
        await sleep(backoff);
      }
    }
  }

  private once(
    id: RouteId,
    path: string,
    headers: Record<string, string>,
    body: unknown,
    signal: AbortSignal | undefined,
  ): Promise<IncomingMessage> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const url = new URL(this.base.pathname.replace(/\/$/, "") + path, this.base);
    const transport = url.protocol === "https:" ? https : http;
    return new Promise((resolve, reject) => {
      const req = transport.request(url, {
        method: ROUTES[id].method,
        headers: {
          authorization: `Bearer ${this.token}`,
          ...(payload !== undefined
            ? { "content-type": "application/json", "content-length": String(Buffer.byteLength(payload)) }
            : {}),
          ...headers,
        },
        ...(this.agent ? { agent: this.agent } : {}),
        ...(signal ? { signal } : {}),
      });
      req.on("response", resolve);
      req.on("error", (err: Error & { reused?: boolean }) => {
        if (req.reusedSocket && (err as { code?: string }).code === "ECONNRESET") err.reused = true;
        reject(err);
      });
      req.end(payload);
    });
  }
}

/** One SSE frame: its event name, data and id. */
export type Frame = { event: string; data: string; id?: string };

/** The frames of an event stream, as they arrive in chunks cut anywhere (mid-frame, mid-character,
 * between the two bytes of a CRLF); comment-only frames (keep-alives) skipped. */
export async function* sseFrames(body: AsyncIterable<Buffer | string>): AsyncGenerator<Frame> {
  const decoder = new TextDecoder();
  let buffer = "";
  // A chunk that ended in CR: a LF first in the next is that line end's, not an empty line of its
  // own (which would end the frame early).
  let afterCr = false;
  for await (const chunk of body) {
    let text = typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true });
    if (!text) continue;
    if (afterCr && text.startsWith("\n")) text = text.slice(1);
    afterCr = text.endsWith("\r");
    buffer += text.replace(/\r\n?/g, "\n");
    let cut: number;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = parseFrame(buffer.slice(0, cut));
      buffer = buffer.slice(cut + 2);
      if (frame) yield frame;
    }
  }
}

/** One SSE frame's fields; undefined for a frame with no data (a keep-alive comment). */
export function parseFrame(frame: string): Frame | undefined {
  let event = "message";
  let id: string | undefined;
  const data: string[] = [];
  for (const line of frame.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  return data.length ? { event, data: data.join("\n"), ...(id !== undefined ? { id } : {}) } : undefined;
}

async function textOf(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function readJson(text: string, what: string, status = 502): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new OrchestratorError(status, "unreadable", `${what} answered no JSON: ${text.slice(0, 200)}`);
  }
}

/** The API's `{error:{code,message}}` as an OrchestratorError; any other answer by its status. */
export function errorOf(status: number, text: string): OrchestratorError {
  try {
    const { error } = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (typeof error?.code === "string" && typeof error.message === "string")
      return new OrchestratorError(status, error.code, error.message);
  } catch {
    // not JSON: below
  }
  return new OrchestratorError(status, "http", `HTTP ${status}: ${text.slice(0, 200)}`);
}
