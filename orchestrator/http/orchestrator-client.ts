// A typed client of the Orchestrator's API (decision 0025), for a Machine written in TypeScript:
// workspaces (create, read, wait until ready, delete; their egress list and log), an Agent's turns (submit, the events as
// Server-Sent Events, abort, the Allowed picks) and its Menu picks (list, answer). It speaks undici's `request`; every
// body it sends and every answer it reads goes through the same zod schemas the server uses
// (api/orchestrator-schemas.ts, api/agent-protocol.ts), so there is no second copy of a type to drift. An
// error answer becomes an OrchestratorError carrying its status, code and message.
import { Agent, request, type Dispatcher } from "undici";
import { z } from "zod";
import { StreamEvent } from "../../api/agent-protocol";
import {
  AbortReceipt,
  AllowedBody,
  AllowedSet,
  AnswerBody,
  AnswerReceipt,
  Created,
  CreateWorkspaceBody,
  EgressList,
  EgressLog,
  ErrorBody,
  FINAL_STATES,
  PickList,
  SubmitTurnBody,
  TurnSubmitted,
  WorkspaceView,
} from "../../api/orchestrator-schemas";
import { ROUTES, pathFor, type ParamsFor, type RouteId } from "../../api/orchestrator-routes";

export { AbortReceipt, AllowedSet, TurnSubmitted };

/** An error the API answered (`{error:{code,message}}`), or an answer this client could not read. */
export class OrchestratorError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "OrchestratorError";
  }
}

export type ClientOptions = {
  /** The Orchestrator's base url, e.g. http://127.0.0.1:8090. */
  url: string;
  /** An API token (one line of JR2_API_TOKENS_FILE). */
  token: string;
  /** For an https url: the PEM CA bundle its certificate chains to, when not a public one. */
  ca?: string;
  /** How long a call keeps trying while the Orchestrator refuses connections, as it does while it
   * restarts (its Service has no ready endpoint). Default 30 s; 0 tries once. */
  reconnectWindowMs?: number;
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A refused connection: nothing of the request was sent, so any call, a create too, may be sent again. */
const refused = (err: unknown): boolean => {
  const e = err as { code?: string; cause?: { code?: string } };
  return e?.code === "ECONNREFUSED" || e?.cause?.code === "ECONNREFUSED";
};

export class OrchestratorClient {
  private readonly base: string;

  private readonly dispatcher: Dispatcher | undefined;

  constructor(private readonly opts: ClientOptions) {
    this.base = opts.url.replace(/\/+$/, "");
    const scheme = new URL(this.base).protocol;
    if (scheme !== "http:" && scheme !== "https:")
      throw new Error(`OrchestratorClient url ${opts.url}: write an http:// or https:// url`);
    if (opts.ca && scheme !== "https:")
      throw new Error(`OrchestratorClient url ${opts.url}: a CA is for an https:// url; write https://`);
    this.dispatcher = opts.ca ? new Agent({ connect: { ca: opts.ca } }) : undefined;
  }

  /** Places a workspace; answers its name (the workspace then moves on by itself). */
  async createWorkspace(body: z.input<typeof CreateWorkspaceBody>): Promise<Created> {
    return this.call("createWorkspace", {}, Created, CreateWorkspaceBody.parse(body));
  }

  async workspace(name: string): Promise<WorkspaceView> {
    return this.call("getWorkspace", { name }, WorkspaceView);
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
  async deleteWorkspace(name: string): Promise<Created> {
    return this.call("deleteWorkspace", { name }, Created);
  }

  /** Gives one of the workspace's Agents a turn; answers the conversation's iid and the admission. */
  /** The workspace's egress list (decision 0051). */
  async egress(name: string): Promise<EgressList> {
    return this.call("getEgress", { name }, EgressList);
  }

  /** Replaces the workspace's egress list; in force within 2 s, with no restart. */
  async setEgress(name: string, allow: string[]): Promise<EgressList> {
    return this.call("setEgress", { name }, EgressList, EgressList.parse({ allow }));
  }

  /** The egress point's log of the workspace's connections, oldest first. */
  async egressLog(name: string): Promise<EgressLog> {
    return this.call("egressLog", { name }, EgressLog);
  }

  async submitTurn(name: string, body: z.input<typeof SubmitTurnBody>): Promise<TurnSubmitted> {
    return this.call("submitTurn", { name }, TurnSubmitted, SubmitTurnBody.parse(body));
  }

  /** Aborts the conversation's running turn. */
  async abort(name: string, iid: string): Promise<AbortReceipt> {
    return this.call("abortTurn", { name, iid }, AbortReceipt);
  }

  /** Changes the conversation's Allowed picks; its running turn is told at its next step boundary. */
  async setAllowed(name: string, iid: string, allowed: string[]): Promise<AllowedSet> {
    return this.call("setAllowed", { name, iid }, AllowedSet, AllowedBody.parse({ allowed }));
  }

  /** The workspace's outstanding picks. */
  async picks(name: string): Promise<z.infer<typeof PickList>> {
    return this.call("listPicks", { name }, PickList);
  }

  /** Answers a pick: the text the Agent's model reads as the Menu tool's result. */
  async answer(name: string, deliveryId: string, answer: string): Promise<z.infer<typeof AnswerReceipt>> {
    return this.call("answerPick", { name, deliveryId }, AnswerReceipt, AnswerBody.parse({ answer }));
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
  ): AsyncGenerator<StreamEvent, void, undefined> {
    const res = await this.send(`${this.base}${pathFor("turnEvents", { name, iid })}`, {
      method: ROUTES.turnEvents.method,
      headers: {
        ...this.headers(),
        accept: "text/event-stream",
        ...(opts.lastEventId !== undefined ? { "last-event-id": String(opts.lastEventId) } : {}),
      },
      ...(opts.signal ? { signal: opts.signal } : {}),
      ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
    });
    if (res.statusCode !== 200) throw await errorOf(res.statusCode, await res.body.text());
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for await (const chunk of res.body) {
        buffer += decoder.decode(chunk as Buffer, { stream: true }).replace(/\r\n?/g, "\n");
        let cut: number;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = parseFrame(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
          if (!frame) continue;
          if (frame.event === "error") {
            let message = frame.data;
            try {
              message = String((JSON.parse(frame.data) as { message?: unknown }).message ?? frame.data);
            } catch {
              // not JSON: the text as it came
            }
            throw new OrchestratorError(502, "stream", `the turn's stream failed: ${message}`);
          }
          yield readAs(StreamEvent, JSON.parse(frame.data), "a turn event");
        }
      }
    } finally {
      // A consumer that stops early (break, return, throw) closes the connection.
      if (!res.body.destroyed) res.body.destroy();
    }
  }

  /** undici's request, sent again (backoff 100 ms to 1 s) while the connection is refused, within
   * the reconnect window: a Machine rides through an Orchestrator's restart. */
  private async send(url: string, init: Parameters<typeof request>[1]): ReturnType<typeof request> {
    const until = Date.now() + (this.opts.reconnectWindowMs ?? 30_000);
    for (let backoff = 100; ; backoff = Math.min(backoff * 2, 1_000)) {
      try {
        return await request(url, init);
      } catch (err) {
        if (!refused(err) || Date.now() + backoff > until || (init?.signal as AbortSignal | undefined)?.aborted)
          throw err;
        await sleep(backoff);
      }
    }
  }

  private headers(): Record<string, string> {
    return { authorization: `Bearer ${this.opts.token}` };
  }

  /** One route of the table, its method and path from there (api/orchestrator-routes.ts). */
  private async call<R extends RouteId, S extends z.ZodType>(id: R, params: ParamsFor<R>, schema: S, body?: unknown) {
    const { method } = ROUTES[id];
    const path = pathFor(id, params);
    const res = await this.send(this.base + path, {
      method,
      headers: { ...this.headers(), ...(body !== undefined ? { "content-type": "application/json" } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      ...(this.dispatcher ? { dispatcher: this.dispatcher } : {}),
    });
    const text = await res.body.text();
    if (res.statusCode >= 400) throw await errorOf(res.statusCode, text);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new OrchestratorError(
        res.statusCode,
        "unreadable",
        `${method} ${path} answered no JSON: ${text.slice(0, 200)}`,
      );
    }
    return readAs(schema, json, `${method} ${path}`);
  }
}

/** One SSE frame's event name and data; undefined for a comment-only frame (a keep-alive). */
function parseFrame(frame: string): { event: string; data: string; id?: string } | undefined {
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

function readAs<S extends z.ZodType>(schema: S, json: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(json);
  if (!parsed.success)
    throw new OrchestratorError(
      502,
      "unreadable",
      `${what}: the answer does not match its schema: ${parsed.error.message}`,
    );
  return parsed.data;
}

async function errorOf(status: number, text: string): Promise<OrchestratorError> {
  try {
    const parsed = ErrorBody.safeParse(JSON.parse(text));
    if (parsed.success) return new OrchestratorError(status, parsed.data.error.code, parsed.data.error.message);
  } catch {
    // not JSON: below
  }
  return new OrchestratorError(status, "http", `HTTP ${status}: ${text.slice(0, 200)}`);
}
