// What the Custodian's tests and bench share (not a test file): throwaway CAs and serving
// certificates, a config and its values written to a temporary directory, fake upstreams on
// loopback, requests through the proxy, and the socket faults the failure words are tested on.
import { CUSTODIAN_ENV } from "../../api/env";
import { spawn, type ChildProcess } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import tls from "node:tls";
import forge from "node-forge";
import { standInFrom, type CustodianConfigInput } from "../../api/custodian-config";

// ---------------------------------------------------------------------------------------------
// Certificates

export type Pem = { certPem: string; keyPem: string };

function keyPair(): { forgePublic: forge.pki.PublicKey; forgePrivate: forge.pki.rsa.PrivateKey; keyPem: string } {
  const pair = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const keyPem = pair.privateKey.export({ type: "pkcs1", format: "pem" }).toString();
  return {
    forgePublic: forge.pki.publicKeyFromPem(pair.publicKey.export({ type: "spki", format: "pem" }).toString()),
    forgePrivate: forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey,
    keyPem,
  };
}

function certificate(publicKey: forge.pki.PublicKey, days: number): forge.pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = `01${randomBytes(8).toString("hex")}`;
  cert.validity.notBefore = new Date(Date.now() - 3600_000);
  cert.validity.notAfter = new Date(Date.now() + days * 86_400_000);
  return cert;
}

/** A CA: its certificate and RSA key in PEM. */
export function newCa(name: string): Pem & { sign: (hosts: string[]) => Pem } {
  const keys = keyPair();
  const cert = certificate(keys.forgePublic, 30);
  const subject = [{ name: "commonName", value: name }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: "basicConstraints", cA: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true },
  ]);
  cert.sign(keys.forgePrivate, forge.md.sha256.create());
  const sign = (hosts: string[]): Pem => {
    const leafKeys = keyPair();
    const leaf = certificate(leafKeys.forgePublic, 7);
    leaf.setSubject([{ name: "commonName", value: hosts[0] }]);
    leaf.setIssuer(subject);
    leaf.setExtensions([
      { name: "basicConstraints", cA: false },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: hosts.map((h) => (net.isIP(h) ? { type: 7, ip: h } : { type: 2, value: h })),
      },
    ]);
    leaf.sign(keys.forgePrivate, forge.md.sha256.create());
    return { certPem: forge.pki.certificateToPem(leaf), keyPem: leafKeys.keyPem };
  };
  return { certPem: forge.pki.certificateToPem(cert), keyPem: keys.keyPem, sign };
}

// ---------------------------------------------------------------------------------------------
// Values, Stand-ins, config on disk

/** A recognisable secret: tests grep every log line for it. */
export const secretValue = (what: string) => `${what}-${randomBytes(12).toString("hex")}`;
export const newStandIn = () => standInFrom(randomBytes(16));

export type Layout = { dir: string; configFile: string; valuesDir: string; caDir: string };

/** A Custodian process's env for `layout` (port 0: any free one), and nothing of this process's but PATH. */
export const custodianEnv = (
  layout: Layout,
  ports: { port: number; healthPort: number } = { port: 0, healthPort: 0 },
) => ({
  PATH: process.env.PATH,
  [CUSTODIAN_ENV.configFile]: layout.configFile,
  [CUSTODIAN_ENV.valuesDir]: layout.valuesDir,
  [CUSTODIAN_ENV.caDir]: layout.caDir,
  [CUSTODIAN_ENV.port]: String(ports.port),
  [CUSTODIAN_ENV.healthPort]: String(ports.healthPort),
});

/** A temporary directory holding `config.json`, `values/` and `ca/` as the pod mounts them. */
export function writeLayout(config: CustodianConfigInput, values: Record<string, string>, ca?: Pem): Layout {
  const dir = mkdtempSync(join(tmpdir(), "jr2-custodian-"));
  const valuesDir = join(dir, "values");
  const caDir = join(dir, "ca");
  mkdirSync(valuesDir);
  mkdirSync(caDir);
  for (const [name, value] of Object.entries(values)) writeFileSync(join(valuesDir, name), `${value}\n`);
  if (ca) {
    writeFileSync(join(caDir, "tls.crt"), ca.certPem);
    writeFileSync(join(caDir, "tls.key"), ca.keyPem);
  }
  const configFile = join(dir, "config.json");
  writeFileSync(configFile, JSON.stringify(config));
  return { dir, configFile, valuesDir, caDir };
}

// ---------------------------------------------------------------------------------------------
// Fake upstreams

export type Seen = { method: string; url: string; headers: http.IncomingHttpHeaders; body: string };

export type Fake = { port: number; seen: Seen[]; server: http.Server | https.Server; close: () => Promise<void> };

type Handler = (seen: Seen, res: http.ServerResponse) => void;

/** An HTTP (or, with `tlsPem`, HTTPS) server on 127.0.0.1 that records every request. */
export async function fakeUpstream(handler: Handler, tlsPem?: Pem): Promise<Fake> {
  const seen: Seen[] = [];
  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const s = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
      };
      seen.push(s);
      handler(s, res);
    });
  };
  const server = tlsPem
    ? https.createServer({ cert: tlsPem.certPem, key: tlsPem.keyPem }, onRequest)
    : http.createServer(onRequest);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { port: (server.address() as AddressInfo).port, seen, server, close: () => closeServer(server) };
}

export function closeServer(server: net.Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    (server as http.Server).closeAllConnections?.();
  });
}

/** A JSON answer. */
export const json = (
  res: http.ServerResponse,
  status: number,
  body: unknown,
  headers: http.OutgoingHttpHeaders = {},
) => {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
};

/** A TCP listener on 127.0.0.1 that counts the connections reaching it (held open until close). */
export async function connectionCounter(): Promise<{
  port: number;
  connections: () => number;
  close: () => Promise<void>;
}> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((socket) => void sockets.push(socket.on("error", () => undefined)));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => sockets.length,
    close: () => {
      sockets.forEach((socket) => socket.destroy());
      return closeServer(server);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Socket faults

/** A port nothing listens on (bound, read, closed). */
export async function closedPort(): Promise<number> {
  const s = net.createServer().listen(0, "127.0.0.1");
  await once(s, "listening");
  const port = (s.address() as AddressInfo).port;
  await closeServer(s);
  return port;
}

/** A server that reads a request's head and then resets the connection (after the request was sent). */
export async function resettingServer(): Promise<{ port: number; requests: () => number; close: () => Promise<void> }> {
  let requests = 0;
  const server = net.createServer((socket) => {
    let head = "";
    socket.on("data", (c: Buffer) => {
      head += c.toString("latin1");
      if (head.includes("\r\n\r\n")) {
        requests++;
        socket.resetAndDestroy();
      }
    });
    socket.on("error", () => undefined);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { port: (server.address() as AddressInfo).port, requests: () => requests, close: () => closeServer(server) };
}

/** A server that accepts, reads, and never answers. */
export async function silentServer(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => undefined);
    socket.resume();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      sockets.forEach((s) => s.destroy());
      return closeServer(server);
    },
  };
}

/**
 * A listening socket whose accept queue is full, so a new connect gets no answer to its SYN and
 * waits out the connect timeout. The listener lives in a child Node whose event loop is blocked
 * right after `listen` (backlog 1), so it never accepts; the queue is then filled from here.
 */
export async function fullAcceptQueue(): Promise<{ port: number; close: () => void }> {
  const script = `
    const s = require("node:net").createServer();
    s.listen({ port: 0, host: "127.0.0.1", backlog: 1 }, () => {
      process.stdout.write(s.address().port + "\\n");
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    });`;
  const child: ChildProcess = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
  const [line] = (await once(child.stdout!, "data")) as [Buffer];
  const port = Number(line.toString().trim());
  const fillers: net.Socket[] = [];
  for (let i = 0; i < 16; i++) {
    const s = net.connect(port, "127.0.0.1");
    s.on("error", () => undefined);
    fillers.push(s);
    const connected = await Promise.race([once(s, "connect").then(() => true), sleep(300).then(() => false)]);
    if (!connected) break;
  }
  return {
    port,
    close: () => {
      fillers.forEach((s) => s.destroy());
      child.kill("SIGKILL");
    },
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------
// Clients

export type Reply = { status: number; headers: http.IncomingHttpHeaders; body: string };

/** A plain HTTP request to 127.0.0.1:`port` (the Harness's side of the routes). */
export function call(
  port: number,
  path: string,
  opts: { method?: string; headers?: http.OutgoingHttpHeaders; body?: string | Buffer } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port, path, method: opts.method ?? "GET", headers: opts.headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
        );
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}

/** CONNECT through the proxy: the raw answer when refused, or a socket once established. */
export function connectThrough(
  proxyPort: number,
  authority: string,
): Promise<{ socket: net.Socket } | { refused: Reply }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: "127.0.0.1", port: proxyPort, method: "CONNECT", path: authority, agent: false });
    req.on("connect", (res, socket, head: Buffer) => {
      if (res.statusCode === 200) return resolve({ socket });
      const chunks: Buffer[] = [head];
      socket.on("data", (c: Buffer) => chunks.push(c));
      socket.on("end", () =>
        resolve({
          refused: { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() },
        }),
      );
    });
    req.on("error", reject);
    req.end();
  });
}

/** An HTTPS request through the proxy, trusting `ca` alone; the answer, the certificate's issuer
 * and that issuer's own certificate's SHA-256 fingerprint when the server sent it. */
export async function httpsThrough(
  proxyPort: number,
  host: string,
  port: number,
  ca: string,
  opts: { method?: string; path?: string; headers?: http.OutgoingHttpHeaders; body?: string } = {},
): Promise<Reply & { issuer?: string; issuerFingerprint?: string }> {
  const tunnel = await connectThrough(proxyPort, `${host}:${port}`);
  if ("refused" in tunnel) return tunnel.refused;
  const socket = tls.connect({
    socket: tunnel.socket,
    ca,
    servername: net.isIP(host) ? undefined : host,
    ALPNProtocols: ["http/1.1"],
  });
  await once(socket, "secureConnect");
  const peer = socket.getPeerCertificate(true);
  const issuer = peer.issuer?.CN;
  const issuerFingerprint = peer.issuerCertificate?.fingerprint256;
  return new Promise((resolve, reject) => {
    const req = http.request(
      // No agent: the request goes over `socket` (an agent would open its own connection).
      {
        host,
        port,
        path: opts.path ?? "/",
        method: opts.method ?? "GET",
        headers: opts.headers,
        createConnection: () => socket,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          socket.destroy();
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString(),
            issuer: Array.isArray(issuer) ? issuer[0] : issuer,
            issuerFingerprint,
          });
        });
      },
    );
    req.on("error", reject);
    req.end(opts.body);
  });
}
