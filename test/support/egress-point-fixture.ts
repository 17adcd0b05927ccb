// A small real HTTP proxy on loopback standing in for the egress point (docs/decisions/0051) in
// the Custodian's tests and bench (not a test file): `CONNECT host:port` tunnels, absolute-form
// plain-HTTP requests forwarded, each recorded. It gives the egress point's wire answers: a refused
// host 403 `{"error":{"code":"egress_refused",...}}` with `x-jr2-egress: refused`, a host it could
// not reach (or was told to call so) 502 with `x-jr2-egress: unreachable`. It decides nothing else:
// every other host is allowed.
import { once } from "node:events";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { closeServer } from "./custodian-fixtures";

export const EGRESS_HEADER = "x-jr2-egress";

export type EgressPointOptions = {
  /** Hosts (`host:port`) answered 403 refused. */
  refuse?: readonly string[];
  /** Hosts (`host:port`) answered 502 unreachable without trying. */
  unreachable?: readonly string[];
  /** Hosts (`host:port`) answered a 502 without the egress point's mark (it may have reached them). */
  failed?: readonly string[];
};

export type ProxiedRequest = { method: string; url: string; headers: http.IncomingHttpHeaders };

export type EgressPoint = {
  port: number;
  /** `http://127.0.0.1:<port>`: what `egress.via` names. */
  url: string;
  /** Every CONNECT's `host:port`, in order. */
  connects: string[];
  /** Every absolute-form request, in order. */
  requests: ProxiedRequest[];
  /** Every byte the Harness's side sent into a tunnel, in order (what the egress point could read). */
  tunnelled: () => Buffer;
  /** How many connections reached the proxy. */
  connections: () => number;
  close: () => Promise<void>;
};

const refusedBody = (target: string) =>
  JSON.stringify({
    error: {
      code: "egress_refused",
      message: `${target} is not on this Sandbox's egress list: add it to the Sandbox's spec.egress.allow`,
    },
  });

const unreachableBody = (target: string, why: string) =>
  JSON.stringify({ error: { code: "unreachable", message: `the egress point could not reach ${target} (${why})` } });

/** The raw head and body of an answer on a CONNECT's socket, which is then closed. */
function raw(status: number, mark: string | undefined, body: string): string {
  return [
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}`,
    "content-type: application/json",
    `content-length: ${Buffer.byteLength(body)}`,
    ...(mark ? [`${EGRESS_HEADER}: ${mark}`] : []),
    "connection: close",
    "",
    body,
  ].join("\r\n");
}

/** Host and port of `host:port` (an IPv6 literal in brackets). */
function split(authority: string): { host: string; port: number } {
  const m = /^\[?(.*?)\]?:([0-9]+)$/.exec(authority)!;
  return { host: m[1], port: Number(m[2]) };
}

export async function egressPoint(opts: EgressPointOptions = {}): Promise<EgressPoint> {
  const connects: string[] = [];
  const requests: ProxiedRequest[] = [];
  const tunnelled: Buffer[] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const refused = new Set(opts.refuse ?? []);
  const unreachable = new Set(opts.unreachable ?? []);
  const failed = new Set(opts.failed ?? []);
  const agent = new http.Agent({ keepAlive: true });

  const server = http.createServer((req, res) => {
    requests.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers });
    let url: URL;
    try {
      url = new URL(req.url ?? "");
    } catch {
      res.writeHead(400, { "content-type": "application/json" });
      return res.end(JSON.stringify({ error: { code: "bad_request", message: "absolute-form only" } }));
    }
    const target = `${url.hostname}:${url.port || 80}`;
    const answer = (status: number, mark: string, body: string) => {
      req.resume();
      res.writeHead(status, { "content-type": "application/json", [EGRESS_HEADER]: mark });
      res.end(body);
    };
    if (refused.has(target)) return answer(403, "refused", refusedBody(target));
    if (unreachable.has(target)) return answer(502, "unreachable", unreachableBody(target, "told to"));
    const headers = { ...req.headers };
    delete headers["proxy-connection"];
    const out = http.request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ""),
        port: url.port || 80,
        method: req.method,
        path: url.pathname + url.search,
        headers,
        agent,
      },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      },
    );
    out.on("error", (err: NodeJS.ErrnoException) => {
      if (!res.headersSent) answer(502, "unreachable", unreachableBody(target, err.code ?? "error"));
      else res.destroy();
    });
    req.pipe(out);
  });
  server.on("connection", (socket: net.Socket) => {
    connections++;
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  server.on("connect", (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
    const target = req.url ?? "";
    connects.push(target);
    socket.on("error", () => undefined);
    if (refused.has(target)) return void socket.end(raw(403, "refused", refusedBody(target)));
    if (unreachable.has(target)) return void socket.end(raw(502, "unreachable", unreachableBody(target, "told to")));
    if (failed.has(target))
      return void socket.end(
        raw(502, undefined, JSON.stringify({ error: { code: "upstream_failed", message: `${target} failed` } })),
      );
    const { host, port } = split(target);
    const upstream = net.connect({ host, port });
    let established = false;
    upstream.on("error", (err: NodeJS.ErrnoException) => {
      if (established) return void socket.destroy();
      socket.end(raw(502, "unreachable", unreachableBody(target, err.code ?? "error")));
    });
    upstream.once("connect", () => {
      established = true;
      socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) {
        tunnelled.push(head);
        upstream.write(head);
      }
      socket.on("data", (c: Buffer) => tunnelled.push(c));
      socket.pipe(upstream).pipe(socket);
      socket.on("close", () => upstream.destroy());
      upstream.on("close", () => socket.destroy());
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    connects,
    requests,
    tunnelled: () => Buffer.concat(tunnelled),
    connections: () => connections,
    close: () => {
      agent.destroy();
      sockets.forEach((s) => s.destroy());
      return closeServer(server);
    },
  };
}
