// A loopback git server for tests: real `git http-backend` (smart HTTP) run as a CGI behind HTTP
// Basic auth, serving the bare repositories under one directory. It counts authorized and refused
// requests, and every request that carried an Authorization header at all, so a test can prove
// that credentials reached the server, that a wrong one did not, and that none reached it.
import { spawn, type ChildProcess } from "node:child_process";
import { timingSafeEqual } from "node:crypto";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { running } from "../../dev/child";

export type GitHttpServerOptions = {
  /** Directory holding the bare repositories (`<root>/<name>` is served as `/<name>`). */
  root: string;
  user: string;
  password: string;
  /** Serve HTTPS with this certificate and key (PEM) instead of plain HTTP; `url` then names `host`
   * (default localhost, which the certificate must name). */
  tls?: { cert: string; key: string; host?: string };
};

/** Counters, updated in place as requests arrive. */
export type GitHttpStats = {
  /** Requests that carried the right credentials (each one reached http-backend). */
  authorized: number;
  /** Requests answered 401: no credentials or wrong ones. */
  refused: number;
  /** Authorized requests whose body was gzip-encoded (git compresses large negotiation bodies). */
  gzipped: number;
  /** Requests of any kind, and those that carried an Authorization header at all (right or wrong):
   * a credential that reached this server shows here, whoever it was meant for. */
  requests: number;
  withAuthorization: number;
};

export type GitHttpServer = {
  /** The credential-free url of `<root>/<repo>`. */
  url(repo: string): string;
  close(): Promise<void>;
  stats: GitHttpStats;
};

/** http-backend's header block is small; anything larger without a blank line is a broken child. */
const MAX_CGI_HEAD_BYTES = 64 * 1024;
const MAX_STDERR_CHARS = 4000;

/** Whether the Authorization header is Basic with exactly `expected` (`user:password`). */
function credentialsMatch(header: string | undefined, expected: Buffer): boolean {
  const m = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? "");
  if (!m) return false;
  const given = Buffer.from(m[1], "base64");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The CGI/1.1 environment for one request. Nothing inherited but PATH: no GIT_*, no user config. */
function cgiEnv(req: http.IncomingMessage, root: string, user: string): NodeJS.ProcessEnv {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: "1",
    GATEWAY_INTERFACE: "CGI/1.1",
    SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
    REQUEST_METHOD: req.method ?? "GET",
    // Throws on a malformed escape: the caller answers 500.
    PATH_INFO: decodeURIComponent(url.pathname),
    QUERY_STRING: url.search.slice(1),
    REMOTE_ADDR: req.socket.remoteAddress ?? "",
    REMOTE_USER: user,
    AUTH_TYPE: "Basic",
  };
  const h = req.headers;
  if (h["content-type"]) env.CONTENT_TYPE = h["content-type"];
  // Absent for a chunked body: http-backend then reads to EOF.
  if (h["content-length"]) env.CONTENT_LENGTH = h["content-length"];
  // http-backend inflates a gzip body itself when told the encoding.
  if (h["content-encoding"]) env.HTTP_CONTENT_ENCODING = h["content-encoding"];
  // Protocol v2 is negotiated through this header; a web server's usual recipe passes it on as GIT_PROTOCOL.
  const proto = h["git-protocol"];
  if (typeof proto === "string") env.GIT_PROTOCOL = env.HTTP_GIT_PROTOCOL = proto;
  return env;
}

/** Splits CGI output at the blank line ending its headers; `undefined` until that line arrives. */
function splitHead(buf: Buffer): { head: string; body: Buffer } | undefined {
  const crlf = buf.indexOf("\r\n\r\n");
  const lf = buf.indexOf("\n\n");
  if (crlf < 0 && lf < 0) return undefined;
  const [at, sep] = crlf >= 0 && (lf < 0 || crlf < lf) ? [crlf, 4] : [lf, 2];
  return { head: buf.subarray(0, at).toString("latin1"), body: buf.subarray(at + sep) };
}

/** The status (from `Status:`, default 200) and the other headers of a CGI header block. */
function parseHead(head: string): { status: number; headers: [string, string][] } {
  let status = 200;
  const headers: [string, string][] = [];
  for (const line of head.split(/\r?\n/)) {
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim();
    const value = line.slice(colon + 1).trim();
    if (name.toLowerCase() === "status") status = Number.parseInt(value, 10) || 500;
    else headers.push([name, value]);
  }
  return { status, headers };
}

function sendPlain(res: http.ServerResponse, status: number, text: string, headers: http.OutgoingHttpHeaders = {}) {
  if (res.headersSent) return void res.destroy();
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8", ...headers });
  res.end(`${text}\n`);
}

/** Runs http-backend for one authorized request: request body to its stdin, its output to the response. */
function runBackend(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  env: NodeJS.ProcessEnv,
  children: Set<ChildProcess>,
): void {
  const child = spawn("git", ["http-backend"], { env, stdio: ["pipe", "pipe", "pipe"] });
  children.add(child);
  let stderr = "";
  let pending: Buffer = Buffer.alloc(0);
  let headDone = false;

  const fail = (why: string) => {
    if (running(child)) child.kill("SIGKILL");
    sendPlain(res, 500, why);
  };
  // A client that goes away (or a response that breaks) must not leave http-backend running.
  res.on("close", () => {
    if (running(child)) child.kill("SIGKILL");
  });
  req.on("error", () => child.kill("SIGKILL"));
  child.on("error", (err) => fail(`git http-backend: ${err.message}`));
  // EPIPE when http-backend answers without reading the whole body (a refusal): harmless.
  child.stdin.on("error", () => undefined);
  req.pipe(child.stdin);
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (s: string) => {
    stderr = (stderr + s).slice(-MAX_STDERR_CHARS);
  });

  const onHeadData = (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    const split = splitHead(pending);
    if (!split) {
      if (pending.length > MAX_CGI_HEAD_BYTES) fail("git http-backend: no end to its headers");
      return;
    }
    headDone = true;
    child.stdout.off("data", onHeadData);
    const { status, headers } = parseHead(split.head);
    res.writeHead(status, headers);
    if (split.body.length > 0) res.write(split.body);
    child.stdout.pipe(res); // ends the response when http-backend closes its stdout
  };
  child.stdout.on("data", onHeadData);

  child.on("close", (code, signal) => {
    children.delete(child);
    if (!headDone && !res.writableEnded)
      fail(`git http-backend exited ${code ?? signal} before its headers: ${stderr}`);
  });
}

/** The request handler of a git server (http-backend behind Basic auth), for a server of one's own
 * (test/support/stand-in-forge.ts): its counters, and how to end the http-backends still running. */
export function gitHttpHandler(opts: Pick<GitHttpServerOptions, "root" | "user" | "password">): {
  handler: (req: http.IncomingMessage, res: http.ServerResponse) => void;
  stats: GitHttpStats;
  killChildren(): void;
} {
  const expected = Buffer.from(`${opts.user}:${opts.password}`);
  const stats: GitHttpStats = { authorized: 0, refused: 0, gzipped: 0, requests: 0, withAuthorization: 0 };
  const children = new Set<ChildProcess>();

  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    try {
      stats.requests++;
      if (req.headers.authorization !== undefined) stats.withAuthorization++;
      if (!credentialsMatch(req.headers.authorization, expected)) {
        stats.refused++;
        return sendPlain(res, 401, "authentication required", { "www-authenticate": 'Basic realm="git"' });
      }
      stats.authorized++;
      if (/gzip/i.test(req.headers["content-encoding"] ?? "")) stats.gzipped++;
      runBackend(req, res, cgiEnv(req, opts.root, opts.user), children);
    } catch (err) {
      sendPlain(res, 500, err instanceof Error ? err.message : String(err));
    }
  };
  const killChildren = () => {
    for (const child of children) if (running(child)) child.kill("SIGKILL");
  };
  return { handler, stats, killChildren };
}

/**
 * Listens on 127.0.0.1, a free port, serving `<root>/<repo>` as `url(repo)` to clients that
 * present `user`/`password` with HTTP Basic; everyone else gets 401 and a Basic challenge.
 */
export async function startGitHttpServer(opts: GitHttpServerOptions): Promise<GitHttpServer> {
  const { handler, stats, killChildren } = gitHttpHandler(opts);
  const server = opts.tls
    ? https.createServer({ cert: opts.tls.cert, key: opts.tls.key }, handler)
    : http.createServer(handler);
  // A reset connection mid-request is the client's business, not a crash of the test process.
  server.on("clientError", (_err, socket) => socket.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: (repo) =>
      opts.tls
        ? `https://${opts.tls.host ?? "localhost"}:${port}/${repo.replace(/^\/+/, "")}`
        : `http://127.0.0.1:${port}/${repo.replace(/^\/+/, "")}`,
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        killChildren();
        server.close(() => resolve());
        // git keeps its connections alive; close() alone would wait for them.
        server.closeAllConnections();
      }),
  };
}
