// The egress point's proxy (docs/decisions/0051): the Sandbox pods' one way out. A connection is
// the Sandbox's whose pod holds its source address; its target (a CONNECT's host:port, or an
// absolute-form http:// request's host and port) is checked against that Sandbox's list before
// any name is resolved; an allowed name is resolved here, an internal address refused unless the
// installation's base list names the host exactly, and the connection made to the address resolved
// here (the Sandbox's own idea of the name never counts). Each Sandbox has its own limits
// (limits.ts), and every decision goes to the record (record.ts).
import { HOP_BY_HOP_HEADERS } from "../api/wire";
import { lookup as dnsLookup } from "node:dns/promises";
import {
  STATUS_CODES,
  createServer,
  request as httpRequest,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import { connect, type Socket } from "node:net";
import {
  EGRESS_HEADER,
  EGRESS_REFUSED,
  EGRESS_UNREACHABLE,
  NO_RANGES,
  isInternalAddress,
  type AddressRanges,
  matchEgress,
  normaliseHost,
} from "../api/egress-point";
import { refKey, type CompiledList, type SandboxRef } from "./index";
import type { SandboxLimits } from "./limits";
import type { EgressRecord } from "./record";

export type Resolve = (host: string) => Promise<string[]>;

/**
 * The system resolver, asked for the absolute name (`host.`), so no search domain of the pod's
 * resolv.conf is tried first: with ClusterFirst's `ndots:5`, `github.com` would otherwise be asked
 * as `github.com.<ns>.svc.cluster.local`, ..., and whoever may create a namespace or Service with a
 * searched name would choose where an allowed name goes (decision 0068). `localhost` is loopback
 * (RFC 6761), as /etc/hosts says (its entry does not match the dotted name).
 */
export const absoluteResolve: Resolve = async (host) => {
  if (host === "localhost" || host.endsWith(".localhost")) return ["127.0.0.1", "::1"];
  return (await dnsLookup(`${host.replace(/\.$/, "")}.`, { all: true, verbatim: true })).map((a) => a.address);
};

export type ProxyOptions = {
  index: { lookup(ip: string): { ref: SandboxRef; list: CompiledList } | undefined };
  record: EgressRecord;
  limits: SandboxLimits;
  connectTimeoutMs: number;
  /** Name resolution (default: absoluteResolve, every address). */
  resolve?: Resolve;
  /** The installation's cluster ranges and public test ranges (its pod config's egress). */
  ranges?: AddressRanges;
};

/** Headers of one hop: never passed on, either way. */
const HOP_BY_HOP: ReadonlySet<string> = new Set([...HOP_BY_HOP_HEADERS, EGRESS_HEADER]);

type Refusal = { status: number; code: string; header: string; message: string };
type Allowed = { ref: SandboxRef; host: string; port: number; addresses: string[]; release(): void };

const fixOf = (ref: SandboxRef) =>
  `add it to the workspace's egress list (PUT /v1/workspaces/${ref.name}/egress) or to spec.egress.allow`;

/** The words of a refusal for a host not on a Sandbox's list (the answer and the Event alike). */
export const notListedMessage = (ref: SandboxRef, host: string, port: number) =>
  `${hostPort(host, port)} is not in Sandbox ${ref.namespace}/${ref.name}'s egress list: ${fixOf(ref)}`;

const hostPort = (host: string, port: number) => `${host.includes(":") ? `[${host}]` : host}:${port}`;

/** The source address as the index holds pod IPs (an IPv4 client of a dual-stack listener is ::ffff:a.b.c.d). */
export const sourceOf = (socket: Socket) => (socket.remoteAddress ?? "").replace(/^::ffff:/, "");

/** The first address of `addresses` that takes a connection to `port` within `timeoutMs`. */
export function connectFirst(addresses: readonly string[], port: number, timeoutMs: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    let i = 0;
    const attempt = (lastErr?: Error) => {
      if (i >= addresses.length) return reject(lastErr ?? new Error("no address"));
      const socket = connect({ host: addresses[i++], port });
      const timer = setTimeout(() => {
        socket.destroy();
        const e = Object.assign(new Error(`connect timed out after ${timeoutMs} ms`), { code: "ETIMEDOUT" });
        attempt(e);
      }, timeoutMs);
      socket.once("connect", () => {
        clearTimeout(timer);
        socket.removeAllListeners("error");
        resolve(socket);
      });
      socket.once("error", (err) => {
        clearTimeout(timer);
        socket.destroy();
        attempt(err);
      });
    };
    attempt();
  });
}

export class EgressProxy {
  readonly server: Server;
  readonly #resolve: Resolve;

  constructor(readonly opts: ProxyOptions) {
    this.#resolve = opts.resolve ?? absoluteResolve;
    this.server = createServer((req, res) => void this.#onRequest(req, res));
    this.server.on(
      "connect",
      (req: IncomingMessage, socket: Socket, head: Buffer) => void this.#onConnect(req, socket, head),
    );
    this.server.on("clientError", (_err, socket: Socket) => socket.destroy());
  }

  /** Who asks, and may it reach host:port? Takes a limit slot when allowed (release() gives it back). */
  async #decide(source: string, rawHost: string, port: number): Promise<Allowed | Refusal> {
    const { index, record, limits } = this.opts;
    const found = index.lookup(source);
    const shown = rawHost.slice(0, 253);
    if (!found) {
      record.refused(undefined, shown, port, "not_a_sandbox", "");
      return {
        status: 403,
        code: "not_a_sandbox",
        header: EGRESS_REFUSED,
        message: `${source} is no Sandbox pod's address: the egress point serves the Sandbox pods of the namespaces that hold Sandboxes`,
      };
    }
    const { ref, list } = found;
    const host = normaliseHost(rawHost);
    if (host === undefined) {
      return {
        status: 400,
        code: "bad_target",
        header: EGRESS_REFUSED,
        message: `${JSON.stringify(shown)} is not a host name or an IP literal: ask for host:port`,
      };
    }
    const key = refKey(ref);
    const admitted = limits.admit(key);
    if (admitted !== "ok") {
      const { maxConnections, connectRate, connectBurst } = limits.config;
      const message =
        admitted === "connections"
          ? `Sandbox ${key} holds ${maxConnections} connections open, the most one Sandbox may: close some, or raise the installation's limit`
          : `Sandbox ${key} opens connections faster than ${connectRate}/s (burst ${connectBurst}): slow down, or raise the installation's limit`;
      record.refused(ref, host, port, "limit", message);
      return { status: 429, code: "egress_limit", header: EGRESS_REFUSED, message };
    }
    const release = () => limits.release(key);
    if (!matchEgress(list.base, host, port) && !matchEgress(list.own, host, port)) {
      release();
      const message = notListedMessage(ref, host, port);
      record.refused(ref, host, port, "not_listed", message);
      return { status: 403, code: "egress_refused", header: EGRESS_REFUSED, message };
    }
    let addresses: string[];
    const literal = /^[0-9.]+$/.test(host) || host.includes(":");
    const started = Date.now();
    try {
      addresses = literal ? [host] : await this.#resolve(host);
      if (!addresses.length) throw Object.assign(new Error("no address"), { code: "ENOTFOUND" });
    } catch (err) {
      release();
      const code = String((err as NodeJS.ErrnoException).code ?? "ENOTFOUND");
      record.unreachable(ref, host, port, "dns", Date.now() - started);
      return {
        status: 502,
        code: "unreachable",
        header: EGRESS_UNREACHABLE,
        message:
          `${host} did not resolve (${code}): nothing was sent (names are looked up as absolute names: ` +
          "a cluster Service is <service>.<namespace>.svc.<cluster domain>, e.g. .svc.cluster.local)",
      };
    }
    // Every address judged, not only the first: a name that mixes public and internal answers is
    // refused, so no resolver's order decides where a workspace's rule reaches.
    const ranges = this.opts.ranges ?? NO_RANGES;
    if (addresses.some((a) => isInternalAddress(a, ranges)) && !matchEgress(list.vouched, host, port)) {
      release();
      const message =
        `${hostPort(host, port)} resolves to an internal address, which only the installation's base list reaches ` +
        "(an exact host in the pod config's egress.allow): a workspace's or Sandbox's list never does";
      record.refused(ref, host, port, "internal", message);
      return { status: 403, code: "egress_refused", header: EGRESS_REFUSED, message };
    }
    return { ref, host, port, addresses, release };
  }

  async #onConnect(req: IncomingMessage, client: Socket, head: Buffer): Promise<void> {
    client.on("error", () => client.destroy());
    const target = /^(?:\[([^\]]+)\]|([^:[\]]+)):([0-9]{1,5})$/.exec(req.url ?? "");
    const port = Number(target?.[3]);
    if (!target || port < 1 || port > 65535)
      return rawAnswer(client, {
        status: 400,
        code: "bad_target",
        header: EGRESS_REFUSED,
        message: "CONNECT takes host:port (an IPv6 literal in brackets), e.g. CONNECT api.example.com:443",
      });
    const verdict = await this.#decide(sourceOf(client), target[1] ?? target[2], port);
    if ("status" in verdict) return rawAnswer(client, verdict);
    const started = Date.now();
    let upstream: Socket;
    try {
      upstream = await connectFirst(verdict.addresses, port, this.opts.connectTimeoutMs);
    } catch (err) {
      verdict.release();
      return this.#unreachable(client, verdict, err as NodeJS.ErrnoException, started);
    }
    if (client.destroyed) {
      upstream.destroy();
      verdict.release();
      return;
    }
    this.opts.record.opened();
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      client.destroy();
      upstream.destroy();
      verdict.release();
      this.opts.record.closed(verdict.ref, verdict.host, port, started, upstream.bytesWritten, upstream.bytesRead);
    };
    upstream.on("error", finish).on("close", finish);
    client.on("error", finish).on("close", finish);
    client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.length) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  }

  #unreachable(client: Socket | ServerResponse, v: Allowed, err: NodeJS.ErrnoException, started: number) {
    const code = err.code ?? "ECONNRESET";
    this.opts.record.unreachable(
      v.ref,
      v.host,
      v.port,
      code === "ETIMEDOUT" ? "timeout" : "connect",
      Date.now() - started,
    );
    const refusal = {
      status: 502,
      code: "unreachable",
      header: EGRESS_UNREACHABLE,
      message: `${hostPort(v.host, v.port)} could not be reached (${code}): nothing was sent`,
    };
    if ("writeHead" in client) jsonAnswer(client, refusal);
    else rawAnswer(client, refusal);
  }

  async #onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = req.url ?? "";
    let url: URL | undefined;
    try {
      url = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? new URL(raw) : undefined;
    } catch {
      url = undefined;
    }
    if (!url)
      return jsonAnswer(res, {
        status: 400,
        code: "not_a_proxy_request",
        header: EGRESS_REFUSED,
        message:
          "the egress point is a proxy: send CONNECT host:port, or an absolute-form request (GET http://host/path)",
      });
    if (url.protocol !== "http:")
      return jsonAnswer(res, {
        status: 400,
        code: "not_a_proxy_request",
        header: EGRESS_REFUSED,
        message: `${url.protocol}// is reached by CONNECT host:port, not an absolute-form request`,
      });
    const port = url.port ? Number(url.port) : 80;
    const verdict = await this.#decide(sourceOf(req.socket), url.hostname.replace(/^\[|\]$/g, ""), port);
    if ("status" in verdict) return jsonAnswer(res, verdict);
    const started = Date.now();
    let socket: Socket;
    try {
      socket = await connectFirst(verdict.addresses, port, this.opts.connectTimeoutMs);
    } catch (err) {
      verdict.release();
      return this.#unreachable(res, verdict, err as NodeJS.ErrnoException, started);
    }
    this.opts.record.opened();
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      socket.destroy();
      verdict.release();
      this.opts.record.closed(verdict.ref, verdict.host, port, started, socket.bytesWritten, socket.bytesRead);
    };
    const upstream = httpRequest({
      method: req.method,
      path: `${url.pathname}${url.search}`,
      headers: { ...passOn(req.headers), host: url.host },
      setHost: false,
      createConnection: () => socket,
    });
    upstream.on("response", (up) => {
      res.writeHead(up.statusCode ?? 502, passOn(up.headers));
      up.pipe(res);
      up.on("error", finish);
    });
    upstream.on("error", () => {
      // The request may have reached the host: no `unreachable` header, so no client repeats it on our word.
      if (!res.headersSent)
        res.writeHead(502, { "content-type": "application/json" }).end(
          JSON.stringify({
            error: { code: "upstream_failed", message: `${hostPort(verdict.host, port)} broke off the exchange` },
          }),
        );
      else res.destroy();
      finish();
    });
    res.on("close", finish);
    req.on("error", finish);
    req.pipe(upstream);
  }

  listen(port: number, host?: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(port, host, () => {
        this.server.off("error", reject);
        resolve((this.server.address() as { port: number }).port);
      });
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /** Stops accepting, closes idle keep-alive connections (their next request goes to another
   * replica), and lets every open tunnel and request finish for up to `boundMs`, then closes what is
   * left (decision 0076). Resolves to how many were still open at the bound. */
  drain(boundMs: number): Promise<number> {
    return new Promise((resolve) => {
      const bound = setTimeout(() => {
        this.server.getConnections((_err, left) => {
          this.server.closeAllConnections();
          resolve(left ?? 0);
        });
      }, boundMs);
      this.server.close(() => {
        clearTimeout(bound);
        resolve(0);
      });
      this.server.closeIdleConnections();
    });
  }
}

/** The headers a hop passes on: none of one hop's, none the Connection header names. */
function passOn(headers: IncomingMessage["headers"]): Record<string, string | string[]> {
  const named = new Set(
    String(headers.connection ?? "")
      .split(",")
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined || HOP_BY_HOP.has(k) || named.has(k) || k === "host") continue;
    out[k] = v;
  }
  return out;
}

const body = (r: Refusal) => JSON.stringify({ error: { code: r.code, message: r.message } });

function jsonAnswer(res: ServerResponse, r: Refusal): void {
  const text = body(r);
  res
    .writeHead(r.status, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(text),
      [EGRESS_HEADER]: r.header,
    })
    .end(text);
}

function rawAnswer(socket: Socket, r: Refusal): void {
  const text = body(r);
  socket.end(
    `HTTP/1.1 ${r.status} ${STATUS_CODES[r.status]}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(text)}\r\n${EGRESS_HEADER}: ${r.header}\r\nconnection: close\r\n\r\n${text}`,
  );
}
