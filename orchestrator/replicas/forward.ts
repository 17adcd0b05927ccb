// A call relayed to the replica that owns its workspace (decision 0079): any replica answers any
// call. The request goes on as it came (method, path and query, the caller's own Authorization, the
// body streamed) with FORWARDED_HEADER added, so the owner never forwards it again; the answer comes
// back as it is sent, an event stream included, with backpressure and nothing buffered. A call that
// finds no owner, or an owner that refused or let go, looks again and is sent again, bounded.
import type http from "node:http";
import { X509Certificate } from "node:crypto";
import { Readable } from "node:stream";
import type { TLSSocket } from "node:tls";
import { Agent, buildConnector, request, type Dispatcher } from "undici";
import { FORWARDED_HEADER } from "../../api/wire";
import type { Owner, Ownership } from "./ownership";

/** How long a call looks for its owner in all: a dead replica's shards are taken within about 15 s. */
export const FORWARD_BUDGET_MS = 20_000;

/** A peer replica: its identity and where its API answers. */
export type Peer = { identity: string; url: string };

/** Refused: the peer's certificate is not one this replica serves (its Secret differs). */
export class PeerCertificateRefused extends Error {
  constructor(readonly peer: string) {
    super(
      `peer ${peer}: its TLS certificate is not one this Orchestrator serves: every replica must mount the same ` +
        "serving certificate Secret (a renewal keeps the previous one a while); check the Deployment's TLS volume",
    );
  }
}

/** The leaf certificate of each PEM (its first), as DER. */
function leavesOf(pems: string[]): Buffer[] {
  const out: Buffer[] = [];
  for (const pem of pems)
    try {
      out.push(new X509Certificate(pem).raw);
    } catch {
      // not a certificate: pins nothing
    }
  return out;
}

/**
 * The dispatcher a replica reaches its peers with. With `peerTls` (the PEM certificates this replica
 * serves now: the current one and, during a renewal, the previous), an https peer is PINNED: the
 * connection is kept only when the peer's leaf certificate is one of them. A peer is reached by its
 * pod IP, which no certificate names, so a name check cannot be done; and every replica mounts the
 * same Secret, so a peer that proves it holds that very certificate's key is one of us (decision
 * 0079). The chain is therefore not verified: the pin is stricter than any CA would be.
 */
export function peerDispatcher(peerTls?: () => string[]): Dispatcher {
  if (!peerTls) return new Agent();
  const base = buildConnector({ rejectUnauthorized: false });
  const connect: buildConnector.connector = (opts, callback) =>
    base(opts, (err, socket) => {
      if (err) return callback(err, null);
      if (opts.protocol !== "https:") return callback(null, socket!);
      const raw = (socket as TLSSocket).getPeerCertificate()?.raw;
      if (raw && leavesOf(peerTls()).some((pin) => pin.equals(raw))) return callback(null, socket!);
      socket!.destroy();
      callback(new PeerCertificateRefused(`${opts.hostname}:${opts.port}`), null);
    });
  return new Agent({ connect });
}

/** Headers that describe one hop, never passed on (RFC 9110 7.6.1), and those undici sets itself. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "expect",
]);

/** `headers` without the hop-by-hop ones (those the Connection header names included). */
export function endToEnd(headers: http.IncomingHttpHeaders): Record<string, string | string[]> {
  const named = new Set(
    String(headers.connection ?? "")
      .split(",")
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined && !HOP_BY_HOP.has(k) && !named.has(k)) out[k] = v;
  return out;
}

/**
 * A request's body as sent to a peer, and kept (up to `limit` bytes) so it can be sent again from
 * its start, to another peer or served here. Past the limit it is streamed on but no longer kept:
 * the owner refuses such a body anyway (413), and it is never sent twice.
 */
class ReplayableBody {
  readonly #copied: Buffer[] = [];
  readonly #source: AsyncIterator<Buffer>;
  #bytes = 0;
  #done = false;
  /** Whether a copy has been read from the request. */
  touched = false;

  constructor(
    req: http.IncomingMessage,
    readonly limit: number,
  ) {
    this.#source = req[Symbol.asyncIterator]();
  }

  /** Whether it can be sent again from its start. */
  get replayable(): boolean {
    return this.#bytes <= this.limit;
  }

  /** The body from its start: what was kept, then the rest of the request. */
  async *stream(): AsyncGenerator<Buffer> {
    this.touched = true;
    let i = 0;
    for (;;) {
      if (i < this.#copied.length) {
        yield this.#copied[i++];
        continue;
      }
      if (this.#done) return;
      // One source, read in order: a chunk is kept before it is yielded, so an abandoned stream's
      // pending read is still there for the next.
      const next = await this.#source.next();
      if (next.done) {
        this.#done = true;
        return;
      }
      const chunk = Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value);
      this.#bytes += chunk.length;
      if (this.replayable) this.#copied.push(chunk);
      else {
        i = Number.POSITIVE_INFINITY; // past the limit: streamed, not kept
        yield chunk;
      }
    }
  }
}

/** Once `res` can take more, or is closed (the API's own streams wait the same way). */
export const drained = (res: http.ServerResponse) =>
  new Promise<void>((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
  });

export type ForwardCall = {
  ownership: Ownership;
  dispatcher: Dispatcher;
  /** The workspace the call is about; absent for a create (any replica holding a shard serves it). */
  workspace?: string;
  /** Where it goes first. */
  peer: Peer;
  /** The route may run twice without harm: it may be sent again after it may have reached a peer
   * (reset before any answer). Any call is sent again when nothing reached the peer (connection
   * refused) or the peer answered not_owner (it did nothing). */
  idempotent: boolean;
  /** A turn's event stream (ids are the turn's offsets): a break is resumed at the new owner with
   * Last-Event-ID, so the stream goes on with no repeat and no gap. */
  resumable?: boolean;
  /** Serves the call here, once this replica is the owner: `req` is the call as received, its body
   * from its start (and, resuming a turn's stream, Last-Event-ID the last id relayed). */
  serveHere: (req: http.IncomingMessage) => Promise<void>;
  /** The next peer for a call with no workspace, not among those tried (undefined: none is left). */
  nextPeer?: (tried: ReadonlySet<string>) => Peer | undefined;
  /** Bodies kept to send again up to this many bytes. */
  bodyLimit: number;
  budgetMs?: number;
  log?: (entry: Record<string, unknown>) => void;
};

/** What came of a forward: answered (or the caller left), or no owner answered: the caller is told
 * 503 unavailable, with the reason (the response is untouched then). */
export type ForwardResult = { kind: "answered" } | { kind: "unavailable"; message: string };

/** What was relayed of an answer: an event stream's last id, and whether it is one. */
type Relayed = { lastId: string | undefined; events: boolean };

/** One attempt's end. */
type Attempt =
  | { kind: "answered" }
  | { kind: "gone" } // the caller left
  | { kind: "refused"; message: string } // nothing reached the peer
  | { kind: "reset"; message: string } // it may have reached the peer; no answer came
  | { kind: "not_owner" }
  | { kind: "pinned"; message: string }
  | { kind: "broken"; message: string }; // the answer's body broke after its head was sent on

/** Errors raised before a connection carried anything: the request was not sent. */
const NOT_SENT = new Set([
  "ECONNREFUSED",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "ENOTFOUND",
  "UND_ERR_CONNECT_TIMEOUT",
]);

function codeOf(err: unknown): string | undefined {
  const e = err as { code?: string; cause?: { code?: string } };
  return e?.code ?? e?.cause?.code;
}

const BODYLESS = new Set(["GET", "HEAD", "DELETE", "OPTIONS"]);

/**
 * Relays `req` to its workspace's owner and its answer back to `res`; looks again (waitForOwner
 * with the budget left) and sends again when the owner refused, reset before answering (an
 * idempotent route only) or answered not_owner; serves here when this replica became the owner.
 */
export async function forwardCall(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  call: ForwardCall,
): Promise<ForwardResult> {
  const budget = call.budgetMs ?? FORWARD_BUDGET_MS;
  let deadline = Date.now() + budget;
  const gone = new AbortController();
  const onClose = () => gone.abort();
  res.on("close", onClose);
  const length = req.headers["content-length"];
  const hasBody =
    !BODYLESS.has(req.method ?? "GET") &&
    (length !== undefined ? length !== "0" : req.headers["transfer-encoding"] !== undefined);
  const body = hasBody ? new ReplayableBody(req, call.bodyLimit) : undefined;
  const stream: Relayed = { lastId: req.headers["last-event-id"] as string | undefined, events: false };
  const tried = new Set<string>();
  let target: Owner = { kind: "peer", ...call.peer };
  let backoff = 100;
  let why = "";
  try {
    for (;;) {
      if (gone.signal.aborted) return { kind: "answered" };
      if (target.kind === "self") {
        await call.serveHere(replayedRequest(req, body, call.resumable ? stream.lastId : undefined));
        return { kind: "answered" };
      }
      if (target.kind === "none") return unavailable(res, `no replica owns it now (${why || "it is moving"})`);
      tried.add(target.identity);
      const before = stream.lastId;
      const attempt = await attemptOnce(req, res, call, target, body, stream, gone.signal);
      switch (attempt.kind) {
        case "answered":
        case "gone":
          return { kind: "answered" };
        case "pinned":
          call.log?.({ level: "error", message: attempt.message });
          return unavailable(res, attempt.message);
        case "broken":
          if (!call.resumable || !call.workspace || !stream.events) {
            // A workspace's event stream simply ends (the client reconnects for a fresh snapshot);
            // any other answer cut short is cut short for the caller too.
            if (stream.events) res.end();
            else res.destroy();
            return { kind: "answered" };
          }
          // A stream that went on before it broke starts a new gap, with a budget of its own.
          if (stream.lastId !== before) deadline = Date.now() + budget;
          break;
        case "reset":
          if (!call.idempotent || (body && !body.replayable)) return unavailable(res, attempt.message);
          break;
        case "refused":
          if (body && !body.replayable) return unavailable(res, attempt.message);
          break;
        case "not_owner":
          break;
      }
      why = "message" in attempt ? attempt.message : `${target.identity} no longer owns it`;
      const left = deadline - Date.now();
      if (left <= 0) return unavailable(res, why);
      const was: Owner = target;
      if (call.workspace) target = await call.ownership.waitForOwner(call.workspace, left, gone.signal);
      else {
        const next = call.nextPeer?.(tried);
        target = next ? { kind: "peer", ...next } : { kind: "none" };
      }
      // The same peer again: give it a moment (its shard or port may be coming back).
      if (target.kind === "peer" && was.kind === "peer" && target.url === was.url) {
        await pause(Math.min(backoff, Math.max(0, deadline - Date.now())), gone.signal);
        backoff = Math.min(backoff * 2, 2000);
        if (Date.now() >= deadline) return unavailable(res, why);
      }
    }
  } finally {
    res.off("close", onClose);
  }
}

function unavailable(res: http.ServerResponse, message: string): ForwardResult {
  if (res.headersSent) {
    // An answer under way (a stream whose owner did not come back): it ends; the caller resumes.
    res.end();
    return { kind: "answered" };
  }
  return { kind: "unavailable", message };
}

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });

/** The call as received, to serve here: its body from its start when part was read already. */
function replayedRequest(
  req: http.IncomingMessage,
  body: ReplayableBody | undefined,
  lastEventId: string | undefined,
): http.IncomingMessage {
  // A resumed stream is a GET: it has no body, so the request itself goes on, told where to resume.
  if (lastEventId !== undefined) req.headers["last-event-id"] = lastEventId;
  if (!body?.touched) return req;
  return Object.assign(Readable.from(body.stream(), { objectMode: false }), {
    headers: req.headers,
    method: req.method,
    url: req.url,
    socket: req.socket,
  }) as unknown as http.IncomingMessage;
}

/** One request to `peer`, its answer relayed. */
async function attemptOnce(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  call: ForwardCall,
  peer: Peer,
  body: ReplayableBody | undefined,
  stream: Relayed,
  signal: AbortSignal,
): Promise<Attempt> {
  const headers = endToEnd(req.headers);
  headers[FORWARDED_HEADER] = call.ownership.identity;
  if (call.resumable && stream.lastId !== undefined) headers["last-event-id"] = stream.lastId;
  let answer: Dispatcher.ResponseData;
  try {
    answer = await request(new URL(req.url ?? "/", peer.url), {
      method: (req.method ?? "GET") as Dispatcher.HttpMethod,
      headers,
      body: body ? Readable.from(body.stream(), { objectMode: false }) : undefined,
      dispatcher: call.dispatcher,
      signal,
      // A long-poll or an event stream may be quiet a long while; the caller's leaving ends it.
      bodyTimeout: 0,
    });
  } catch (err) {
    if (signal.aborted) return { kind: "gone" };
    const message = `peer ${peer.identity} (${peer.url}): ${(err as Error).message}`;
    if (err instanceof PeerCertificateRefused) return { kind: "pinned", message: err.message };
    return NOT_SENT.has(codeOf(err) ?? "") ? { kind: "refused", message } : { kind: "reset", message };
  }
  const resumed = res.headersSent;
  if (answer.statusCode === 503 && !resumed) {
    // not_owner is a replica's word, never relayed: read it (a short JSON error) and look again.
    const text = await answer.body.text().catch(() => "");
    if (/"code"\s*:\s*"not_owner"/.test(text)) return { kind: "not_owner" };
    res.writeHead(503, endToEnd(answer.headers as http.IncomingHttpHeaders));
    res.end(text);
    return { kind: "answered" };
  }
  if (resumed) {
    // Resuming a turn's stream: its head went out already. An answer that is not the stream is said
    // on it, as the owner says a failure once its head is out.
    if (answer.statusCode !== 200) {
      const text = await answer.body.text().catch(() => "");
      if (/"code"\s*:\s*"not_owner"/.test(text)) return { kind: "not_owner" };
      res.write(`event: error\ndata: ${JSON.stringify({ message: `resuming the stream: ${text}` })}\n\n`);
      res.end();
      return { kind: "answered" };
    }
  } else {
    stream.events = String(answer.headers["content-type"] ?? "").startsWith("text/event-stream");
    res.writeHead(answer.statusCode, endToEnd(answer.headers as http.IncomingHttpHeaders));
  }
  let pending = "";
  try {
    for await (const chunk of answer.body as AsyncIterable<Buffer>) {
      if (signal.aborted) return { kind: "gone" };
      let out: string | Buffer = chunk;
      if (call.resumable) {
        // Whole events only, each id noted once sent on: a break resumes after the last one.
        pending += chunk.toString("utf8");
        const end = pending.lastIndexOf("\n\n");
        if (end < 0) continue;
        out = pending.slice(0, end + 2);
        pending = pending.slice(end + 2);
        for (const m of out.matchAll(/^id: ?(.*)$/gm)) stream.lastId = m[1];
      }
      if (!res.write(out)) await drained(res);
    }
  } catch (err) {
    if (signal.aborted) return { kind: "gone" };
    return { kind: "broken", message: `peer ${peer.identity}: the answer broke off: ${(err as Error).message}` };
  }
  res.end();
  return { kind: "answered" };
}

/** `path`'s JSON from `peer` (GET), or undefined when it does not answer 200 in `ms`. */
export async function peerJson(
  dispatcher: Dispatcher,
  peer: Peer,
  path: string,
  headers: Record<string, string>,
  ms: number,
): Promise<unknown> {
  try {
    const answer = await request(new URL(path, peer.url), {
      method: "GET",
      headers,
      dispatcher,
      signal: AbortSignal.timeout(ms),
    });
    if (answer.statusCode !== 200) {
      await answer.body.dump();
      return undefined;
    }
    return await answer.body.json();
  } catch {
    return undefined;
  }
}
