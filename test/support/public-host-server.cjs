// The stand-in public host's listeners (docs/decisions/0051), run by test/node/public-host.ts inside
// the real node's network namespace jr2-public (`ip netns exec jr2-public node <this file> <config>`),
// where the documentation-range addresses live. Each request it gets is one JSON line on stdout,
// which the test reads back; `{"ready":true}` once every listener is bound. It exits when its stdin
// closes, so a test process that dies takes it along.
//
// config (argv[2], JSON): {http: [[host, port]...], tcpEcho: [[host, port]...], udp: [[host, port]...],
// dns: [host, port] | null}
//   http     plain HTTP (also on 443: the stand-in needs no TLS); records method, Host, path and the
//            Authorization header it received (a test's stand-in value, never a real secret), answers
//            200 "public <address>:<port>"; /slow-bytes/<n>/<ms> answers n bytes paced over about ms (a
//            download through the egress point that stays open across its rolling update, decision 0076)
//   tcpEcho  records each connection, echoes what it receives
//   udp      records each datagram (its first 512 bytes as text), echoes it
//   dns      UDP and TCP; records each query's name and type, answers NXDOMAIN
//   forge    {host, port, cert, key, root, token, holdMs}: a stand-in forge over HTTPS (decision 0070). Git's
//            smart HTTP for the bare repositories under `root` (real `git http-backend`): fetches
//            anonymous, a push needing Basic auth whose password is `token`; and one API route (the token
//            as Basic, Bearer or `token`), POST
//            /api/repos/<owner>/<repo>/pulls, answering 201 with the pull request's number. A push
//            (git-receive-pack) to a repository whose name starts with `held` is answered only after
//            `holdMs`. Records each request: method, path, Authorization as received (a test's value),
//            the git service, and an API request's body (its first 4 KiB).
"use strict";
const { Buffer } = require("node:buffer");
const dgram = require("node:dgram");
const http = require("node:http");
const net = require("node:net");
const https = require("node:https");
const { spawn } = require("node:child_process");
const { clearInterval, setInterval, setTimeout } = require("node:timers");
const { URL } = require("node:url");

const config = JSON.parse(process.argv[2] ?? "{}");
const record = (r) => process.stdout.write(`${JSON.stringify({ at: new Date().toISOString(), ...r })}\n`);
const peer = (addr) => (addr ?? "").replace(/^::ffff:/, "");

/** Listen and resolve once bound; reject naming the address on an error (EADDRINUSE, EADDRNOTAVAIL). */
function bound(server, host, port, what) {
  return new Promise((resolve, reject) => {
    const onError = (err) => reject(new Error(`${what} on ${host}:${port}: ${err.message}`));
    server.once("error", onError);
    const done = () => {
      server.off("error", onError);
      resolve();
    };
    if (server instanceof dgram.Socket) server.bind(port, host, done);
    else server.listen(port, host, done);
  });
}

function httpServer(host, port) {
  const server = http.createServer((req, res) => {
    record({
      kind: "http",
      local: `${host}:${port}`,
      from: peer(req.socket.remoteAddress),
      method: req.method,
      host: req.headers.host ?? null,
      path: req.url,
      authorization: req.headers.authorization ?? null,
    });
    req.resume();
    // /slow-bytes/<n>/<ms>: n bytes paced over about ms, a download that stays open a while.
    const slow = /^\/slow-bytes\/(\d+)\/(\d+)/.exec(req.url ?? "");
    if (slow) {
      const total = Math.min(Number(slow[1]), 64 * 1024 * 1024);
      const chunks = 32;
      const size = Math.ceil(total / chunks);
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": String(total) });
      let sent = 0;
      const tick = setInterval(() => {
        const n = Math.min(size, total - sent);
        if (n > 0) res.write(Buffer.alloc(n, 0x61));
        sent += n;
        if (sent >= total) {
          clearInterval(tick);
          res.end();
        }
      }, Math.max(1, Math.floor(Number(slow[2]) / chunks)));
      res.on("close", () => clearInterval(tick));
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" }).end(`public ${host}:${port}\n`);
  });
  return bound(server, host, port, "HTTP");
}

function tcpEcho(host, port) {
  const server = net.createServer((socket) => {
    record({ kind: "tcp", local: `${host}:${port}`, from: peer(socket.remoteAddress) });
    socket.on("error", () => {});
    socket.pipe(socket);
  });
  return bound(server, host, port, "TCP echo");
}

function udpRecorder(host, port) {
  const socket = dgram.createSocket("udp4");
  socket.on("message", (msg, rinfo) => {
    record({ kind: "udp", local: `${host}:${port}`, from: rinfo.address, data: msg.subarray(0, 512).toString("utf8") });
    socket.send(msg, rinfo.port, rinfo.address);
  });
  return bound(socket, host, port, "UDP recorder");
}

/** The question of a DNS query: its name (lowercase, no trailing dot), type, and where it ends. */
function question(msg) {
  if (msg.length < 12 || msg.readUInt16BE(4) < 1) return undefined;
  const labels = [];
  let i = 12;
  while (i < msg.length) {
    const len = msg[i];
    if (len === 0) break;
    if (len > 63 || i + 1 + len > msg.length) return undefined;
    labels.push(msg.subarray(i + 1, i + 1 + len).toString("latin1"));
    i += 1 + len;
  }
  if (i + 5 > msg.length) return undefined;
  return { name: labels.join(".").toLowerCase(), type: msg.readUInt16BE(i + 1), end: i + 5 };
}

/** NXDOMAIN for the query, its question echoed. */
function nxdomain(msg, q) {
  const out = Buffer.from(msg.subarray(0, q.end));
  const rd = msg[2] & 0x01;
  out[2] = 0x80 | (msg[2] & 0x78) | 0x04 | rd; // QR, the query's opcode, AA, RD as asked
  out[3] = 0x80 | 0x03; // RA, NXDOMAIN
  out.writeUInt16BE(1, 4);
  out.writeUInt16BE(0, 6);
  out.writeUInt16BE(0, 8);
  out.writeUInt16BE(0, 10);
  return out;
}

function dnsRecorder(host, port) {
  const udp = dgram.createSocket("udp4");
  udp.on("message", (msg, rinfo) => {
    const q = question(msg);
    if (!q) return;
    record({ kind: "dns", transport: "udp", from: rinfo.address, name: q.name, type: q.type });
    udp.send(nxdomain(msg, q), rinfo.port, rinfo.address);
  });
  const tcp = net.createServer((socket) => {
    let buf = Buffer.alloc(0);
    socket.on("error", () => {});
    socket.on("data", (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const msg = buf.subarray(2, 2 + buf.readUInt16BE(0));
        buf = buf.subarray(2 + msg.length);
        const q = question(msg);
        if (!q) return socket.destroy();
        record({ kind: "dns", transport: "tcp", from: peer(socket.remoteAddress), name: q.name, type: q.type });
        const answer = nxdomain(msg, q);
        const len = Buffer.alloc(2);
        len.writeUInt16BE(answer.length);
        socket.write(Buffer.concat([len, answer]));
      }
    });
  });
  return Promise.all([bound(udp, host, port, "DNS (UDP)"), bound(tcp, host, port, "DNS (TCP)")]);
}

function forge({ host, port, cert, key, root, token, holdMs }) {
  let pulls = 0;
  const server = https.createServer({ cert, key }, (req, res) => {
    const url = new URL(req.url, "https://forge");
    const service =
      url.searchParams.get("service") ?? (url.pathname.match(/\/(git-upload-pack|git-receive-pack)$/) ?? [])[1] ?? null;
    const chunks = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      chunks.push(c);
    });
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const api = url.pathname.startsWith("/api/");
      record({
        kind: "forge",
        local: `${host}:${port}`,
        from: peer(req.socket.remoteAddress),
        method: req.method,
        path: url.pathname,
        service,
        authorization: req.headers.authorization ?? null,
        body: api ? body.subarray(0, 4096).toString("utf8") : null,
        bytes: size,
      });
      const auth = req.headers.authorization ?? "";
      const basic = auth.startsWith("Basic ") ? Buffer.from(auth.slice(6), "base64").toString("utf8") : "";
      const bearer = auth.startsWith("Bearer ") || auth.startsWith("token ") ? auth.split(" ")[1] : "";
      // Fetches are anonymous (a public repository, as the cache agent clones it); a push and the API
      // need the token.
      const needsToken = api || service === "git-receive-pack";
      if (needsToken && basic.slice(basic.indexOf(":") + 1) !== token && bearer !== token) {
        res.writeHead(401, { "www-authenticate": 'Basic realm="forge"', "content-type": "text/plain" }).end("no\n");
        return;
      }
      if (api) {
        const m = url.pathname.match(/^\/api\/repos\/([^/]+)\/([^/]+)\/pulls$/);
        if (req.method !== "POST" || !m) return void res.writeHead(404).end();
        pulls += 1;
        const out = JSON.stringify({ number: pulls, url: `https://${host}:${port}/${m[1]}/${m[2]}/pull/${pulls}` });
        return void res.writeHead(201, { "content-type": "application/json" }).end(out);
      }
      const run = () => {
        const cgi = spawn("git", ["http-backend"], {
          env: {
            PATH: process.env.PATH,
            GIT_PROJECT_ROOT: root,
            GIT_HTTP_EXPORT_ALL: "1",
            REMOTE_USER: "forge",
            REQUEST_METHOD: req.method,
            PATH_INFO: decodeURIComponent(url.pathname),
            QUERY_STRING: url.search.slice(1),
            CONTENT_TYPE: req.headers["content-type"] ?? "",
            CONTENT_LENGTH: String(body.length),
            ...(req.headers["git-protocol"] ? { GIT_PROTOCOL: req.headers["git-protocol"] } : {}),
          },
          stdio: ["pipe", "pipe", "inherit"],
        });
        cgi.stdin.end(body);
        let head = Buffer.alloc(0);
        let sent = false;
        cgi.stdout.on("data", (c) => {
          if (sent) return void res.write(c);
          head = Buffer.concat([head, c]);
          const at = head.indexOf("\r\n\r\n");
          if (at < 0) return;
          const headers = {};
          let status = 200;
          for (const line of head.subarray(0, at).toString("latin1").split("\r\n")) {
            const i = line.indexOf(":");
            const name = line.slice(0, i).trim().toLowerCase();
            const value = line.slice(i + 1).trim();
            if (name === "status") status = Number(value.split(" ")[0]);
            else headers[name] = value;
          }
          res.writeHead(status, headers);
          sent = true;
          res.write(head.subarray(at + 4));
        });
        cgi.on("close", () => (sent ? res.end() : res.writeHead(500).end("http-backend said nothing\n")));
      };
      const held = service === "git-receive-pack" && req.method === "POST" && /\/held[^/]*\.git\//.test(url.pathname);
      if (held) setTimeout(run, holdMs ?? 0);
      else run();
    });
  });
  return bound(server, host, port, "forge (HTTPS)");
}

async function main() {
  await Promise.all([
    ...(config.http ?? []).map(([h, p]) => httpServer(h, p)),
    ...(config.tcpEcho ?? []).map(([h, p]) => tcpEcho(h, p)),
    ...(config.udp ?? []).map(([h, p]) => udpRecorder(h, p)),
    ...(config.dns ? [dnsRecorder(config.dns[0], config.dns[1])] : []),
    ...(config.forge ? [forge(config.forge)] : []),
  ]);
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
}

process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
main().catch((err) => {
  process.stderr.write(`public-host-server: ${err.message}\n`);
  process.exit(1);
});
