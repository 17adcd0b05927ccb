// Every upstream call the Custodian makes goes through here: one node:http and one node:https
// Agent (pooled, kept alive), whose connections mark each connect failure, so a failure is known to
// have come before the request was sent (then `x-jr2-custodian: unreachable`, and the Orchestrator
// route may retry) or not (a plain 502). Timeouts come from the config; trust is the system roots
// plus an optional private bundle. Node's own client rather than undici: per small request it costs
// less CPU, and it is in Node already, so nothing is loaded with the first call
// (docs/decisions/0044-the-custodian-starts-small.md).
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import { createSecureContext, rootCertificates, type SecureContext } from "node:tls";
import { notSent } from "./rules";

export type UpstreamOptions = {
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  /** PEM certificates trusted beside the system roots. */
  extraCa?: string;
};

/** A request's way to be ended early: the Harness went away. `request` sets `end`. */
export type Gone = { yes: boolean; end?: () => void };

export type UpstreamRequest = {
  method: string;
  headers: ReadonlyArray<readonly [string, string]>;
  body?: Buffer | Readable;
  gone?: Gone;
};

export type UpstreamAnswer = {
  statusCode: number;
  /** Node's raw list: name, value, name, value... */
  rawHeaders: string[];
  body: Readable;
};

/** A failure with a code of its own; the codes are those the Harness and the rules already read
 * (api/custodian-config.ts NEVER_SENT_CODES), whichever client gave them. */
const failure = (code: string, message: string) => Object.assign(new Error(message), { code });

/** Methods whose requests go without a Content-Length when they carry no body. */
const BODILESS_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "CONNECT"]);

/** How long an idle kept-alive connection stays open (shorter when the server's Keep-Alive says so). */
const KEEP_ALIVE_MS = 4_000;

export class Upstream {
  readonly #opts: UpstreamOptions;
  #http: http.Agent | undefined;
  #https: http.Agent | undefined;
  /** Errors a connection gave before it was up: no byte of its request was written. */
  readonly #connectFailures = new WeakSet<object>();

  constructor(opts: UpstreamOptions) {
    this.#opts = opts;
  }

  /** The connection's connect timeout, and its failures before it is up marked as not sent. */
  #watch(socket: Socket, ready: "connect" | "secureConnect"): Socket {
    const timer = setTimeout(
      () => socket.destroy(failure("UND_ERR_CONNECT_TIMEOUT", `connect timeout (${this.#opts.connectTimeoutMs} ms)`)),
      this.#opts.connectTimeoutMs,
    );
    const onError = (err: Error) => {
      clearTimeout(timer);
      this.#connectFailures.add(err);
    };
    socket.once("error", onError);
    socket.once(ready, () => {
      clearTimeout(timer);
      socket.removeListener("error", onError);
    });
    return socket;
  }

  /** The Agent for plain HTTP or for TLS, made with its first request. */
  #agent(tls: boolean): http.Agent {
    // https.Agent is an http.Agent that makes TLS connections.
    if (tls) return (this.#https ??= this.#newAgent(https.Agent as typeof http.Agent, "secureConnect"));
    return (this.#http ??= this.#newAgent(http.Agent, "connect"));
  }

  #newAgent(Base: typeof http.Agent, ready: "connect" | "secureConnect"): http.Agent {
    const watch = (socket: Socket) => this.#watch(socket, ready);
    const { extraCa } = this.#opts;
    // One context for every connection: given as a CA list, it is built (every system root parsed
    // again) for each connection.
    const secureContext: SecureContext | undefined =
      ready === "secureConnect" && extraCa ? createSecureContext({ ca: [...rootCertificates, extraCa] }) : undefined;
    return new (class extends Base {
      override createConnection(...args: Parameters<http.Agent["createConnection"]>) {
        return watch(super.createConnection(...args) as Socket);
      }
    })({
      keepAlive: true,
      timeout: KEEP_ALIVE_MS,
      ...(ready === "secureConnect" ? { ALPNProtocols: ["http/1.1"] } : {}),
      ...(secureContext ? { secureContext } : {}),
    });
  }

  /** Sends one request; resolves with the status, headers and the body as a stream. */
  request(url: URL, req: UpstreamRequest): Promise<UpstreamAnswer> {
    const { headersTimeoutMs, bodyTimeoutMs } = this.#opts;
    const tls = url.protocol === "https:";
    const raw: string[] = ["host", url.host];
    let length = false;
    for (const [name, value] of req.headers) {
      raw.push(name, value);
      if (name === "content-length") length = true;
    }
    // Framed as undici framed it: a buffered body (the Harness may have sent it chunked) goes with
    // its length, as does a bodiless request whose method carries one; a streamed body of unknown
    // length goes chunked, whatever the method.
    const { body } = req;
    if (!length && (body === undefined || Buffer.isBuffer(body))) {
      if (body?.length || !BODILESS_METHODS.has(req.method)) raw.push("content-length", String(body?.length ?? 0));
    } else if (!length) raw.push("transfer-encoding", "chunked");
    return new Promise((resolve, reject) => {
      const out = (tls ? https : http).request({
        agent: this.#agent(tls),
        protocol: url.protocol,
        hostname: url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname,
        port: url.port || (tls ? 443 : 80),
        method: req.method,
        path: url.pathname + url.search,
        headers: raw,
      });
      let answered: http.IncomingMessage | undefined;
      out.on("error", (err) => {
        if (!answered) reject(err);
      });
      // Until the headers come, the connection may stay quiet at most headersTimeoutMs; then, between
      // two pieces of the body, bodyTimeoutMs, unless the answer is held back by its reader.
      out.on("socket", (socket: Socket) => {
        socket.setTimeout(headersTimeoutMs);
        const onTimeout = () => {
          if (!answered) return out.destroy(failure("UND_ERR_HEADERS_TIMEOUT", "headers timeout"));
          if (answered.isPaused() || answered.readableLength >= answered.readableHighWaterMark)
            return void socket.setTimeout(bodyTimeoutMs);
          answered.destroy(failure("UND_ERR_BODY_TIMEOUT", "body timeout"));
        };
        socket.on("timeout", onTimeout);
        out.once("close", () => socket.removeListener("timeout", onTimeout));
      });
      out.on("response", (res: http.IncomingMessage) => {
        answered = res;
        res.socket?.setTimeout(bodyTimeoutMs);
        resolve({ statusCode: res.statusCode!, rawHeaders: res.rawHeaders, body: res });
      });
      if (req.gone) {
        const end = () => out.destroy(failure("ABORT_ERR", "the Harness went away"));
        if (req.gone.yes) end();
        req.gone.end = end;
      }
      if (body === undefined) out.end();
      else if (Buffer.isBuffer(body)) out.end(body);
      else body.pipe(out);
    });
  }

  /** Whether `err` (from `request`) came before the request was sent. */
  wasNotSent(err: unknown): boolean {
    return notSent(err, typeof err === "object" && err !== null && this.#connectFailures.has(err));
  }

  close(): Promise<void> {
    this.#http?.destroy();
    this.#https?.destroy();
    return Promise.resolve();
  }
}
