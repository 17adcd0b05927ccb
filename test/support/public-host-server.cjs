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
//            200 "public <address>:<port>"
//   tcpEcho  records each connection, echoes what it receives
//   udp      records each datagram (its first 512 bytes as text), echoes it
//   dns      UDP and TCP; records each query's name and type, answers NXDOMAIN
"use strict";
const { Buffer } = require("node:buffer");
const dgram = require("node:dgram");
const http = require("node:http");
const net = require("node:net");

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

async function main() {
  await Promise.all([
    ...(config.http ?? []).map(([h, p]) => httpServer(h, p)),
    ...(config.tcpEcho ?? []).map(([h, p]) => tcpEcho(h, p)),
    ...(config.udp ?? []).map(([h, p]) => udpRecorder(h, p)),
    ...(config.dns ? [dnsRecorder(config.dns[0], config.dns[1])] : []),
  ]);
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
}

process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
main().catch((err) => {
  process.stderr.write(`public-host-server: ${err.message}\n`);
  process.exit(1);
});
