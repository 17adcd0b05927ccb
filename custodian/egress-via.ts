// The egress point as the Custodian's way out (docs/decisions/0051): with `egress.via` set, every
// connection the Custodian makes but the Orchestrator's goes through it, a `CONNECT host:port`
// for a tunnel (TLS to the real host is then spoken over it) or an absolute-form request for plain
// http. The egress point alone decides where a Sandbox may go and records it; the Custodian only
// carries its answer back in its own words: a 403 is a refusal, a 502 it marks
// `x-jr2-egress: unreachable` means it never reached the host.
import http from "node:http";
import net from "node:net";
import { viaAddress } from "../api/custodian-config";

/** The header the egress point marks its own answers with: `refused` or `unreachable`. */
export const EGRESS_HEADER = "x-jr2-egress";

/** Where the egress point listens; `label` (host:port) names it in logs and messages. */
export type Via = { host: string; port: number; label: string };

export const viaOf = (via: string | undefined): Via | undefined => {
  if (via === undefined) return undefined;
  const { host, port } = viaAddress(via);
  return { host, port, label: authorityOf(host, port) };
};

/** `host:port`, an IPv6 literal in brackets. */
export const authorityOf = (host: string, port: number | string) =>
  net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;

/** What the egress point answered instead of a tunnel or an upstream's answer: its status, its
 * word (from the status and its header) and its JSON error's code and message when it sent one. */
export type EgressAnswer = { status: number; word?: "refused" | "unreachable"; code?: string; message?: string };

/** The most of an egress point's own answer read: its JSON error is small. */
const MAX_ANSWER_BYTES = 16 * 1024;
const MAX_MESSAGE = 500;

/** The egress point's answer from its status, headers and body. */
export function egressAnswerOf(status: number, headers: http.IncomingHttpHeaders, body: Buffer): EgressAnswer {
  const mark = String(headers[EGRESS_HEADER] ?? "")
    .trim()
    .toLowerCase();
  const word = status === 403 ? "refused" : status === 502 && mark === "unreachable" ? "unreachable" : undefined;
  let code: string | undefined;
  let message: string | undefined;
  try {
    const error = (JSON.parse(body.toString("utf8")) as { error?: { code?: unknown; message?: unknown } })?.error;
    if (typeof error?.code === "string") code = error.code.slice(0, 64);
    if (typeof error?.message === "string") message = error.message.slice(0, MAX_MESSAGE);
  } catch {
    // Not JSON: the status and word stand alone.
  }
  return { status, ...(word ? { word } : {}), ...(code ? { code } : {}), ...(message ? { message } : {}) };
}

/** Reads at most MAX_ANSWER_BYTES of a body (`first` already read), until its length or its end. */
export function readAnswer(stream: NodeJS.ReadableStream, first: Buffer, length?: number): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks = [first];
    let size = first.length;
    const done = () => {
      stream.removeListener("data", onData);
      resolve(Buffer.concat(chunks).subarray(0, length ?? MAX_ANSWER_BYTES));
    };
    const onData = (c: Buffer) => {
      chunks.push(c);
      size += c.length;
      if (size >= (length ?? MAX_ANSWER_BYTES)) done();
    };
    if (size >= (length ?? MAX_ANSWER_BYTES)) return done();
    stream.on("data", onData);
    stream.once("end", done);
    stream.once("close", done);
    stream.once("error", done);
  });
}

export type Tunnel = { ok: true; socket: net.Socket; head: Buffer } | { ok: false; answer: EgressAnswer };

/** A failure with a code of its own (the codes api/custodian-config.ts NEVER_SENT_CODES reads). */
const failure = (code: string, message: string) => Object.assign(new Error(message), { code });

/**
 * Asks the egress point for a tunnel to `authority`. Its 200 gives the connected socket (and any
 * bytes the far end sent already); another answer gives the egress point's answer, its socket
 * closed. Rejects when the egress point was not reached or did not answer within `timeoutMs`
 * (`UND_ERR_CONNECT_TIMEOUT`): the connect timeout covers the whole exchange.
 */
export function openTunnel(via: Via, authority: string, timeoutMs: number): Promise<Tunnel> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: via.host,
      port: via.port,
      method: "CONNECT",
      path: authority,
      headers: { host: authority },
      agent: false,
    });
    /** The socket once the egress point answered other than 200: its body is being read. */
    let answering: net.Socket | undefined;
    const timer = setTimeout(() => {
      if (answering) return void answering.destroy();
      req.destroy(
        failure("UND_ERR_CONNECT_TIMEOUT", `the egress point ${via.label} did not answer within ${timeoutMs} ms`),
      );
    }, timeoutMs);
    req.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.once("connect", (res: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      if (res.statusCode === 200) {
        clearTimeout(timer);
        return resolve({ ok: true, socket, head });
      }
      const length = Number(res.headers["content-length"]);
      answering = socket.on("error", () => undefined);
      void readAnswer(socket, head, Number.isFinite(length) ? Math.min(length, MAX_ANSWER_BYTES) : undefined).then(
        (body) => {
          clearTimeout(timer);
          socket.destroy();
          resolve({ ok: false, answer: egressAnswerOf(res.statusCode ?? 0, res.headers, body) });
        },
      );
    });
    req.end();
  });
}
