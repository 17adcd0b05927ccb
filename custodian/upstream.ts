// Every upstream call the Custodian makes goes through here: one node:http and one node:https
// Agent (pooled, kept alive), whose connections mark each connect failure, so a failure is known to
// have come before the request was sent (then `x-jr2-custodian: unreachable`, and the Orchestrator
// route may retry) or not (a plain 502). Timeouts come from the config; trust is the system roots
// plus an optional private bundle. Node's own client rather than undici: per small request it costs
// less CPU, and it is in Node already, so nothing is loaded with the first call
// (docs/decisions/0044-the-custodian-starts-small.md). With an egress point (`egress.via`,
// docs/decisions/0051), a request not marked `direct` goes through it: https over a tunnel its
// CONNECT opened (TLS with the real host, as direct), http as an absolute-form request to it; two
// more Agents, their connections pooled per origin as the direct ones are.
import http from "node:http";
import https from "node:https";
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import { createSecureContext, rootCertificates, type SecureContext } from "node:tls";
import {
  authorityOf,
  EGRESS_HEADER,
  egressAnswerOf,
  openTunnel,
  readAnswer,
  type EgressAnswer,
  type Via,
} from "./egress-via";
import { notSent } from "./rules";

export type UpstreamOptions = {
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  /** PEM certificates trusted beside the system roots. */
  extraCa?: string;
  /** The egress point every request not `direct` goes through. */
  via?: Via;
};

/** A request's way to be ended early: the Harness went away. `request` sets `end`. */
export type Gone = { yes: boolean; end?: () => void };

export type UpstreamRequest = {
  method: string;
  headers: ReadonlyArray<readonly [string, string]>;
  body?: Buffer | Readable;
  gone?: Gone;
  /** Straight to its host even with an egress point (the Orchestrator's route: the pod's policy
   * lets it through, docs/decisions/0051). */
  direct?: boolean;
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

/** The egress point refused the request's host: nothing was sent, and nothing is tried again. */
export const EGRESS_REFUSED = "JR2_EGRESS_REFUSED";
/** The egress point answered in place of the upstream, which never got the request. */
export const EGRESS_UNREACHABLE = "JR2_EGRESS_UNREACHABLE";

/** The egress point's answer, when it is what `err` (from `request`) carries. */
export const egressOf = (err: unknown): EgressAnswer | undefined => (err as { egress?: EgressAnswer } | null)?.egress;

/** The egress point's answer as a failure: its refusal `EGRESS_REFUSED`, any other answer (the
 * upstream was never reached) `EGRESS_UNREACHABLE`. */
const egressFailure = (a: EgressAnswer, target: string): Error & { code: string; egress: EgressAnswer } =>
  Object.assign(
    new Error(`the egress point answered ${a.status} for ${target}${a.message ? `: ${a.message}` : ""}`),
    a.word === "refused"
      ? { code: EGRESS_REFUSED, egress: a }
      : { code: EGRESS_UNREACHABLE, egress: { ...a, word: "unreachable" as const } },
  );

/** Methods whose requests go without a Content-Length when they carry no body. */
const BODILESS_METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "CONNECT"]);

/** How long an idle kept-alive connection stays open (shorter when the server's Keep-Alive says so). */
const KEEP_ALIVE_MS = 4_000;

export class Upstream {
  readonly #opts: UpstreamOptions;
  #http: http.Agent | undefined;
  #https: http.Agent | undefined;
  #viaHttp: http.Agent | undefined;
  #viaHttps: http.Agent | undefined;
  /** Errors a connection gave before it was up: no byte of its request was written. */
  readonly #connectFailures = new WeakSet<object>();

  constructor(opts: UpstreamOptions) {
    this.#opts = opts;
  }

  /** The connection's connect timeout (what is left of it), and its failures before it is up
   * marked as not sent. */
  #watch(socket: Socket, ready: "connect" | "secureConnect", ms = this.#opts.connectTimeoutMs): Socket {
    const timer = setTimeout(
      () => socket.destroy(failure("UND_ERR_CONNECT_TIMEOUT", `connect timeout (${this.#opts.connectTimeoutMs} ms)`)),
      ms,
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

  /** The Agent for plain HTTP or for TLS, direct or through the egress point, made with its first request. */
  #agent(tls: boolean, via: Via | undefined): http.Agent {
    // https.Agent is an http.Agent that makes TLS connections.
    if (via && tls) return (this.#viaHttps ??= this.#newAgent(https.Agent as typeof http.Agent, "secureConnect", via));
    if (via) return (this.#viaHttp ??= this.#newAgent(http.Agent, "connect", via));
    if (tls) return (this.#https ??= this.#newAgent(https.Agent as typeof http.Agent, "secureConnect"));
    return (this.#http ??= this.#newAgent(http.Agent, "connect"));
  }

  #newAgent(Base: typeof http.Agent, ready: "connect" | "secureConnect", via?: Via): http.Agent {
    const watch = (socket: Socket, ms?: number) => this.#watch(socket, ready, ms);
    const { extraCa, connectTimeoutMs } = this.#opts;
    const connectFailures = this.#connectFailures;
    // One context for every connection: given as a CA list, it is built (every system root parsed
    // again) for each connection.
    const secureContext: SecureContext | undefined =
      ready === "secureConnect" && extraCa ? createSecureContext({ ca: [...rootCertificates, extraCa] }) : undefined;
    type Args = Parameters<http.Agent["createConnection"]>;
    const Direct = class extends Base {
      override createConnection(...args: Args) {
        return watch(super.createConnection(...args) as Socket);
      }
    };
    // Through the egress point, TLS: the tunnel is asked for first (Node's Agent takes a connection
    // given later, to its callback), then TLS is spoken over it exactly as it is direct (the host's
    // name, the same trust). The connect timeout covers the CONNECT and the handshake together.
    const Tunnelled = class extends Base {
      override createConnection(options: Args[0], done?: Args[1]) {
        const started = Date.now();
        const authority = authorityOf(String(options.host), String(options.port));
        const fail = (err: Error) => {
          connectFailures.add(err);
          done!(err, undefined as never);
        };
        openTunnel(via!, authority, connectTimeoutMs).then((t) => {
          if (!t.ok) return fail(egressFailure(t.answer, authority));
          // A TLS server speaks only after the client: bytes before that are no TLS.
          if (t.head.length) {
            t.socket.destroy();
            return fail(failure("ECONNRESET", `${authority} sent bytes before the TLS handshake`));
          }
          t.socket.on("error", () => undefined);
          const left = Math.max(1, connectTimeoutMs - (Date.now() - started));
          done!(null, watch(super.createConnection({ ...options, socket: t.socket } as Args[0]) as Socket, left));
        }, fail);
        return undefined;
      }
    };
    // Through the egress point, plain http: each connection to it carries one origin's requests
    // (absolute-form), so an egress point that decides per connection is never asked for one host
    // and given another's.
    const PerOrigin = class extends Direct {
      override getName(options?: Args[0]) {
        return `${super.getName(options)}|${(options as { jr2Origin?: string } | undefined)?.jr2Origin ?? ""}`;
      }
    };
    const Agent = !via ? Direct : ready === "secureConnect" ? Tunnelled : PerOrigin;
    return new Agent({
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
    const via = req.direct ? undefined : this.#opts.via;
    const hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
    return new Promise((resolve, reject) => {
      const out = (tls ? https : http).request({
        agent: this.#agent(tls, via),
        protocol: url.protocol,
        // Plain http through the egress point: to it, the whole url as the target (absolute-form).
        ...(via && !tls
          ? { hostname: via.host, port: via.port, path: url.href, jr2Origin: url.origin }
          : { hostname, port: url.port || (tls ? 443 : 80), path: url.pathname + url.search }),
        method: req.method,
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
        // The egress point's own answer to an absolute-form request, in place of the upstream's:
        // its mark on its own status only, so an upstream's 200 is never read as one.
        const mark = via && !tls ? res.headers[EGRESS_HEADER] : undefined;
        if ((mark === "refused" && res.statusCode === 403) || (mark === "unreachable" && res.statusCode === 502)) {
          void readAnswer(res, Buffer.alloc(0)).then((body) => {
            res.destroy();
            const err = egressFailure(egressAnswerOf(res.statusCode ?? 0, res.headers, body), url.host);
            // Not forwarded to the upstream, refused or not (refused is never tried again: wasRefused).
            this.#connectFailures.add(err);
            reject(err);
          });
          return;
        }
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

  /** Whether `err` (from `request`) came before the request was sent: a refusal by the egress
   * point did too, but is not worth sending again (`wasRefused`). */
  wasNotSent(err: unknown): boolean {
    return notSent(err, typeof err === "object" && err !== null && this.#connectFailures.has(err));
  }

  /** Whether the egress point refused `err`'s request: never sent, never tried again. */
  wasRefused(err: unknown): boolean {
    return (err as { code?: unknown } | null)?.code === EGRESS_REFUSED;
  }

  close(): Promise<void> {
    for (const agent of [this.#http, this.#https, this.#viaHttp, this.#viaHttps]) agent?.destroy();
    return Promise.resolve();
  }
}
