// The Custodian's listeners (decision 0018). On 127.0.0.1 only: the routes the Harness calls
// (`/orchestrator/...` with the Sandbox token added, `/providers/<name>/...` with Stand-ins swapped)
// and the proxy its tools use (CONNECT, and absolute-form `http://` requests). On the probes' port:
// /healthz, /readyz (200 once the config and every held value are loaded) and /metrics, nothing
// else. One JSON log line per request: method, route, host, status, ms; never a path, a header or
// a body.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { performance } from "node:perf_hooks";
import { timeoutsMs, type CustodianConfig } from "../api/custodian-config";
import { MODEL_KIND, providerKind } from "../api/model-kinds";
import { readBody, sendJson, listen } from "../lib/http-json";
import type { EarlyServer } from "../lib/early-listen";
import { redact } from "../lib/redact";
import { answer, notReady, refusal } from "./answers";
import { interceptedOrigins, onConnect } from "./connect";
import type { Ctx, Held, Log, Trace } from "./context";
import { viaOf } from "./egress-via";
import { forward, type Exchange } from "./forward";
import { LeafIssuer, type CaSource } from "./leaf";
import { CustodianMetrics } from "./custodian-metrics";
import {
  endToEnd,
  hasDotSegment,
  heldTable,
  joinUrl,
  routeOf,
  tunnelAllowed,
  withoutHeader,
  type KeyHeader,
  type Route,
} from "./rules";
import { Upstream } from "./upstream";
import { loadValues } from "./values";

/** The Orchestrator route buffers its body (so a request never sent can be sent again): picks and polls are small. */
export const MAX_ORCHESTRATOR_BODY = 1024 * 1024;
/** The loopback address, the only one the routes and the proxy ever bind. */
export const LOOPBACK = "127.0.0.1";

export type CustodianOptions = {
  config: CustodianConfig;
  valuesDir: string;
  /** The Sandbox's CA (decision 0037), fixed or read again as its files change; without it a bound
   * host's CONNECT is refused (the routes still work). */
  ca?: CaSource;
  /** PEM certificates trusted for upstreams beside the system roots. */
  upstreamCa?: string;
  log?: Log;
  /** How often values that are missing or unusable are read again (default 1 s). */
  retryEveryMs?: number;
};

export type Ports = { port: number; healthPort: number; healthHost: string };

const hasBody = (req: http.IncomingMessage) =>
  req.headers["transfer-encoding"] !== undefined ||
  (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");

const notFound = (what: string) => refusal({ status: 404, code: "not_found", message: what });
const badPath = refusal({ status: 400, code: "bad_path", message: "the path must not hold '.' or '..' segments" });

export class Custodian {
  readonly #ctx: Ctx;
  readonly #opts: CustodianOptions;
  #held?: Held;
  #problems: string[] = ["the held values are not read yet"];
  #timer?: NodeJS.Timeout;
  readonly #servers: http.Server[] = [];
  readonly #inner: http.Server;
  readonly #connectMs: number;

  constructor(opts: CustodianOptions) {
    this.#opts = opts;
    const t = timeoutsMs(opts.config);
    this.#connectMs = t.connect;
    const via = viaOf(opts.config.egress.via);
    this.#ctx = {
      config: opts.config,
      ...(via ? { via } : {}),
      upstream: new Upstream({
        connectTimeoutMs: t.connect,
        headersTimeoutMs: t.headers,
        bodyTimeoutMs: t.body,
        extraCa: opts.upstreamCa,
        via,
      }),
      metrics: new CustodianMetrics(),
      log: opts.log ?? (() => undefined),
      ...(opts.ca ? { leaves: this.#leafIssuer(opts.ca, opts.log) } : {}),
      held: () => this.#held,
      problems: () => this.#problems,
    };
    this.#inner = http.createServer((req, res) => this.#serve(req, res, "inner"));
  }

  /** The leaf issuer, which logs each CA it changes to and warns of one past its end. */
  #leafIssuer(ca: CaSource, log: Log = () => undefined): LeafIssuer {
    const said = (c: LeafIssuer["ca"], message: string) =>
      log({
        level: c.notAfter <= Date.now() ? "warn" : "info",
        message,
        caNotAfter: new Date(c.notAfter).toISOString(),
      });
    const issuer = new LeafIssuer(ca, { onChange: (c) => said(c, "the CA changed: leaves are signed by the new one") });
    said(issuer.ca, "intercepting bound hosts with the mounted CA");
    return issuer;
  }

  get ready(): boolean {
    return this.#held !== undefined;
  }

  /** Reads the held values; until all load, tries again every `retryEveryMs`. Resolves with readiness. */
  async load(): Promise<boolean> {
    const loaded = await loadValues(this.#opts.valuesDir, this.#opts.config);
    if (!loaded.ok) {
      if (loaded.problems.join() !== this.#problems.join())
        this.#ctx.log({ level: "warn", message: "not ready", problems: loaded.problems });
      this.#problems = loaded.problems;
      this.#timer = setTimeout(() => void this.load(), this.#opts.retryEveryMs ?? 1000);
      this.#timer.unref();
      return false;
    }
    const { config } = this.#opts;
    const table = heldTable(config, loaded.values);
    const token = config.orchestrator ? loaded.values.get(config.orchestrator.token) : undefined;
    const values = [...loaded.values.values()];
    this.#held = {
      table,
      token,
      masks: values.map((v) => Buffer.from(v, "latin1")),
      redactions: [...values, ...config.held.map((h) => h.standIn)],
    };
    this.#problems = [];
    this.#ctx.log({ level: "info", message: "ready", held: config.held.length, token: token !== undefined });
    return true;
  }

  /**
   * Loads, then listens: the routes on 127.0.0.1:`port`, the probes on `healthHost`:`healthPort`,
   * or on `early`, the probes' port bound before this process loaded (lib/early-listen.ts), whose
   * held probes this answers from now on.
   */
  async start(port: number, healthPort: number, healthHost: string, early?: EarlyServer): Promise<Ports> {
    await this.load();
    const main = http.createServer((req, res) => this.#serve(req, res, "main"));
    main.on("connect", (req: http.IncomingMessage, socket, head: Buffer) => this.#connect(req, socket, head));
    const onHealth = (req: http.IncomingMessage, res: http.ServerResponse) => this.#serve(req, res, "health");
    const health = early?.server ?? http.createServer(onHealth);
    this.#servers.push(main, health);
    await listen(main, port, LOOPBACK);
    if (early) early.serve(onHealth);
    else await listen(health, healthPort, healthHost);
    return {
      port: (main.address() as AddressInfo).port,
      healthPort: (health.address() as AddressInfo).port,
      healthHost,
    };
  }

  /** Stops listening, ends idle connections, and closes the upstream pool. */
  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    await Promise.all(
      [...this.#servers, this.#inner].map(
        (s) =>
          new Promise<void>((resolve) => {
            s.close(() => resolve());
            s.closeIdleConnections();
            if (!s.listening) resolve();
          }),
      ),
    );
    await this.#ctx.upstream.close();
  }

  /** One request: traced, routed, answered. */
  #serve(req: http.IncomingMessage, res: http.ServerResponse, listener: "main" | "health" | "inner"): void {
    const trace: Trace = { route: listener === "inner" ? "intercept" : "unknown", outcome: "not_found" };
    const started = performance.now();
    res.on("close", () => this.#record(req.method ?? "", trace, res.statusCode, started));
    this.#route(req, res, listener, trace).catch((err: unknown) => {
      const message = `request failed: ${(err as Error)?.message ?? String(err)}`;
      this.#ctx.log({ level: "error", message: redact(message, this.#held?.redactions ?? []).slice(0, 300) });
      if (!res.headersSent) answer(this.#ctx, res, trace, { status: 500, code: "internal", message: "internal error" });
      else res.destroy();
    });
  }

  #connect(req: http.IncomingMessage, socket: import("node:stream").Duplex, head: Buffer): void {
    const trace: Trace = { route: "tunnel", outcome: "not_found" };
    const started = performance.now();
    socket.once("close", () => this.#record("CONNECT", trace, trace.status ?? 0, started));
    onConnect(this.#ctx, req, socket, head, this.#inner, trace, this.#connectMs);
  }

  #record(method: string, trace: Trace, status: number, started: number): void {
    const ms = Math.round((performance.now() - started) * 10) / 10;
    this.#ctx.metrics.request(trace.route, trace.outcome);
    this.#ctx.log({
      level: "info",
      method,
      route: trace.route,
      ...(trace.host ? { host: trace.host } : {}),
      ...(trace.via ? { via: trace.via } : {}),
      status,
      ms,
    });
  }

  async #route(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    listener: "main" | "health" | "inner",
    trace: Trace,
  ): Promise<void> {
    if (listener === "inner") return this.#intercepted(req, res, trace);
    const route = routeOf(req.url ?? "/");
    if (route.kind === "local") return this.#local(route.name, res, trace);
    if (listener === "health" || route.kind === "unknown") {
      req.resume();
      trace.outcome = "not_found";
      return answer(this.#ctx, res, trace, {
        status: 404,
        code: "not_found",
        message: `no route for ${req.method} here`,
      });
    }
    if (!this.#held) {
      req.resume();
      trace.route = route.kind === "provider" ? `provider/${route.name}` : route.kind;
      return answer(this.#ctx, res, trace, notReady(this.#ctx));
    }
    const exchange = await this.#exchange(req, route, trace);
    if ("status" in exchange) {
      req.resume();
      return answer(this.#ctx, res, trace, exchange);
    }
    return forward(this.#ctx, req, res, trace, exchange);
  }

  /** The exchange a forwarding route makes of a request, or the Custodian's own answer. */
  async #exchange(req: http.IncomingMessage, route: Exclude<Route, { kind: "local" | "unknown" }>, trace: Trace) {
    const { config } = this.#opts;
    const headers = endToEnd(req.rawHeaders);
    if (route.kind === "orchestrator") {
      trace.route = "orchestrator";
      const o = config.orchestrator;
      if (!o) return notFound("no Orchestrator is configured for this Custodian");
      const url = hasDotSegment(route.rest) ? undefined : joinUrl(o.url, route.rest);
      if (!url) return badPath;
      const body = hasBody(req) ? await readBody(req, MAX_ORCHESTRATOR_BODY) : undefined;
      if (hasBody(req) && body === undefined) {
        return refusal({
          status: 413,
          code: "too_large",
          message: `a request to the Orchestrator is at most ${MAX_ORCHESTRATOR_BODY} bytes`,
        });
      }
      const ex: Exchange = {
        url,
        headers: withoutHeader(headers, "authorization"),
        body,
        retries: o.retries,
        bearer: this.#held!.token,
        // The pod's policy lets the Orchestrator through: never via the egress point (docs/decisions/0051).
        direct: true,
      };
      return ex;
    }
    if (route.kind === "provider") {
      trace.route = `provider/${route.name}`;
      const p = config.providers.find((x) => x.name === route.name);
      if (!p)
        return notFound(
          `no provider is named ${route.name} (configured: ${config.providers.map((x) => x.name).join(", ") || "none"})`,
        );
      const url = hasDotSegment(route.rest) ? undefined : joinUrl(p.url, route.rest);
      if (!url) return badPath;
      const keyHeader = keyHeaderOf(p);
      return { url, headers, body: hasBody(req) ? req : undefined, retries: 0, keyHeader } satisfies Exchange;
    }
    trace.route = "proxy";
    const url = route.url;
    const port = Number(url.port) || (url.protocol === "http:" ? 80 : 443);
    const bound = this.#held!.table.boundOrigins.has(url.origin);
    // Through an egress point, it alone decides where (docs/decisions/0051): egress.tunnel is not read.
    if (
      !bound &&
      !this.#ctx.via &&
      !tunnelAllowed(config.egress.tunnel, url.hostname, port, url.protocol === "http:")
    ) {
      trace.host = url.host;
      return refusal({
        status: 403,
        code: "egress_refused",
        message: `${url.host} is neither bound to a held value nor in egress.tunnel: add it to the config's egress.tunnel to reach it`,
      });
    }
    return { url, headers, body: hasBody(req) ? req : undefined, retries: 0 } satisfies Exchange;
  }

  /** A request inside an intercepted CONNECT: always to the CONNECT's own origin. */
  async #intercepted(req: http.IncomingMessage, res: http.ServerResponse, trace: Trace): Promise<void> {
    const origin = interceptedOrigins.get(req.socket);
    const url = origin && (req.url ?? "").startsWith("/") ? joinUrl(origin, req.url!) : undefined;
    if (!url || !this.#held) {
      req.resume();
      return answer(this.#ctx, res, trace, !this.#held ? notReady(this.#ctx) : badPath);
    }
    const headers = endToEnd(req.rawHeaders);
    return forward(this.#ctx, req, res, trace, { url, headers, body: hasBody(req) ? req : undefined, retries: 0 });
  }

  #local(name: "healthz" | "readyz" | "metrics", res: http.ServerResponse, trace: Trace): void {
    trace.route = "local";
    trace.outcome = "local";
    if (name === "healthz") return sendJson(res, 200, { ok: true });
    if (name === "readyz") {
      return this.ready
        ? sendJson(res, 200, { ready: true })
        : sendJson(res, 503, { ready: false, problems: this.#problems });
    }
    const text = this.#ctx.metrics.render(this.ready);
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4", "content-length": Buffer.byteLength(text) });
    res.end(text);
  }
}

/** A provider's key header (api/model-kinds.ts), worked out once per provider of a loaded config:
 * a provider without a kind is judged by its url's host, which is not parsed again per request. */
const keyHeaders = new WeakMap<CustodianConfig["providers"][number], KeyHeader>();
function keyHeaderOf(p: CustodianConfig["providers"][number]): KeyHeader {
  let k = keyHeaders.get(p);
  if (!k) {
    const kind = providerKind(p);
    k = { header: MODEL_KIND[kind].keyHeader, provider: p.name, kind };
    keyHeaders.set(p, k);
  }
  return k;
}
