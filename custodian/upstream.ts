// Every upstream call the Custodian makes goes through here: one undici Agent (pooled, kept alive)
// whose connector marks each connect failure, so a failure is known to have come before the
// request was sent (then `x-jr2-custodian: unreachable`, and the Orchestrator route may retry) or
// not (a plain 502). Timeouts come from the config; trust is the system roots plus an optional
// private bundle.
import { rootCertificates } from "node:tls";
import type { Readable } from "node:stream";
import { Agent, buildConnector, type Dispatcher } from "undici";
import { notSent } from "./rules";

export type UpstreamOptions = {
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  /** PEM certificates trusted beside the system roots. */
  extraCa?: string;
};

export type UpstreamRequest = {
  method: string;
  headers: Array<[string, string]>;
  body?: Buffer | Readable;
  signal?: AbortSignal;
};

export type UpstreamAnswer = Dispatcher.ResponseData;

export class Upstream {
  readonly #agent: Agent;
  /** Errors the connector gave: no byte of any request waiting on that connect was written. */
  readonly #connectFailures = new WeakSet<object>();

  constructor(opts: UpstreamOptions) {
    const base = buildConnector({
      timeout: opts.connectTimeoutMs,
      ...(opts.extraCa ? { ca: [...rootCertificates, opts.extraCa] } : {}),
    });
    const connect: buildConnector.connector = (options, callback) =>
      base(options, (err, socket) => {
        if (err) {
          this.#connectFailures.add(err);
          callback(err, null);
        } else callback(null, socket!);
      });
    this.#agent = new Agent({
      connect,
      headersTimeout: opts.headersTimeoutMs,
      bodyTimeout: opts.bodyTimeoutMs,
      keepAliveTimeout: 4_000,
    });
  }

  /** Sends one request; resolves with the status, headers and the body as a stream. */
  request(url: URL, req: UpstreamRequest): Promise<UpstreamAnswer> {
    return this.#agent.request({
      origin: url.origin,
      path: url.pathname + url.search,
      method: req.method as Dispatcher.HttpMethod,
      headers: req.headers.flat(),
      body: req.body ?? null,
      signal: req.signal,
    });
  }

  /** Whether `err` (from `request`) came before the request was sent. */
  wasNotSent(err: unknown): boolean {
    return notSent(err, typeof err === "object" && err !== null && this.#connectFailures.has(err));
  }

  close(): Promise<void> {
    return this.#agent.close();
  }
}
