// Every upstream call the Custodian makes goes through here: one undici Agent (pooled, kept alive)
// whose connector marks each connect failure, so a failure is known to have come before the
// request was sent (then `x-jr2-custodian: unreachable`, and the Orchestrator route may retry) or
// not (a plain 502). Timeouts come from the config; trust is the system roots plus an optional
// private bundle.
import { rootCertificates } from "node:tls";
import type { Readable } from "node:stream";
import type { Agent, Dispatcher, buildConnector } from "undici";
import { once } from "../lib/once";
import { notSent } from "./rules";

// undici is loaded with the first upstream call: an idle Custodian, the common case in a pod that
// waits for its Agent, never pays for it (docs/decisions/0044-the-custodian-starts-small.md).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const undici = once((): typeof import("undici") => require("undici"));

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
  readonly #opts: UpstreamOptions;
  #agent: Agent | undefined;
  /** Errors the connector gave: no byte of any request waiting on that connect was written. */
  readonly #connectFailures = new WeakSet<object>();

  constructor(opts: UpstreamOptions) {
    this.#opts = opts;
  }

  /** The pooled Agent, made with the first request. */
  #pool(): Agent {
    if (this.#agent) return this.#agent;
    const opts = this.#opts;
    const { Agent, buildConnector } = undici();
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
    return this.#agent;
  }

  /** Sends one request; resolves with the status, headers and the body as a stream. */
  request(url: URL, req: UpstreamRequest): Promise<UpstreamAnswer> {
    return this.#pool().request({
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
    return this.#agent?.close() ?? Promise.resolve();
  }
}
