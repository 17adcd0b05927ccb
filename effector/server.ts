// The Effector's routes (decision 0070): /healthz (200 once it holds its key) and /metrics, open;
// POST /v1/effects and GET /v1/effects/{id}, signed. Every answer to a verified request is signed
// back over the request's nonce, its status and the exact bytes sent.
import type http from "node:http";
import { EFFECTOR_PATHS, signAnswer, verifyRequest, SIGNATURE_HEADERS } from "../api/effector-sign";
import type { EffectorOrder } from "../api/effector-wire";
import type { Log } from "../lib/log";
import { MAX_REQUEST_BYTES, type EffectorMetrics, type NonceMemory, type RefusalReason } from "./guard";
import type { EffectMemory, Runner } from "./memory";

export type EffectorDeps = {
  /** The key's text once read; undefined before. */
  key: () => string | undefined;
  pod: string;
  nonces: NonceMemory;
  metrics: EffectorMetrics;
  memory: EffectMemory;
  run: Runner;
  /** The order's schema (zod), loaded with the first order (effector/main.ts). */
  parseOrder: (
    json: unknown,
  ) =>
    | { success: true; data: EffectorOrder }
    | { success: false; error: { issues: ReadonlyArray<{ path: PropertyKey[]; message: string }> } };
  log: Log;
  now?: () => number;
};

type Res = http.ServerResponse;

function readBounded(req: http.IncomingMessage): Promise<Buffer | undefined> {
  if (Number(req.headers["content-length"]) > MAX_REQUEST_BYTES) {
    req.resume();
    return Promise.resolve(undefined);
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > MAX_REQUEST_BYTES) over = true;
      else chunks.push(c);
    });
    req.on("end", () => resolve(over ? undefined : Buffer.concat(chunks)));
    req.on("error", () => resolve(undefined));
  });
}

const plain = (res: Res, status: number, body: string, type = "application/json") => {
  res.writeHead(status, { "content-type": type, "cache-control": "no-store" });
  res.end(body);
};

/** zod's issues as one line: each field and what it must be. */
const issuesText = (issues: ReadonlyArray<{ path: PropertyKey[]; message: string }>) =>
  issues
    .slice(0, 10)
    .map((i) => `${i.path.map(String).join(".") || "(order)"}: ${i.message}`)
    .join("; ");

export function effectorHandler(d: EffectorDeps): (req: http.IncomingMessage, res: Res) => void {
  const now = d.now ?? Date.now;
  const refuse = (req: http.IncomingMessage, res: Res, status: number, reason: RefusalReason, message: string) => {
    d.metrics.refuse(reason);
    d.log({ level: "warn", message: "request refused", reason, remote: req.socket.remoteAddress ?? null });
    plain(res, status, JSON.stringify({ error: reason, message }));
  };

  const handle = async (req: http.IncomingMessage, res: Res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method === "GET" && path === EFFECTOR_PATHS.healthz)
      return plain(res, d.key() ? 200 : 503, d.key() ? "ok\n" : "no key yet\n", "text/plain");
    if (req.method === "GET" && path === EFFECTOR_PATHS.metrics)
      return plain(res, 200, d.metrics.text(), "text/plain; version=0.0.4");

    const key = d.key();
    if (!key) return refuse(req, res, 503, "no_key", "the Effector does not hold its key yet");
    const body = await readBounded(req);
    if (body === undefined)
      return refuse(req, res, 413, "too_large", `a request body is at most ${MAX_REQUEST_BYTES} bytes`);
    if (d.nonces.full(now()))
      return refuse(req, res, 503, "nonce_memory_full", "too many requests in the signature window: try again later");
    const verdict = verifyRequest(
      key,
      { method: req.method ?? "GET", path: req.url ?? "/", body: body.toString("utf8"), headers: req.headers },
      { pod: d.pod, now: now(), seen: (n) => d.nonces.seen(n, now()) },
    );
    if (!verdict.ok) return refuse(req, res, 401, verdict.refusal, verdict.message);

    const signed = (status: number, value: unknown) => {
      const text = JSON.stringify(value);
      res.writeHead(status, {
        "content-type": "application/json",
        "cache-control": "no-store",
        [SIGNATURE_HEADERS.signature]: signAnswer(key, verdict.nonce, status, text),
      });
      res.end(text);
    };
    try {
      if (path === EFFECTOR_PATHS.effects) {
        if (req.method !== "POST") return signed(405, { error: "method_not_allowed", message: "POST an order here" });
        let json: unknown;
        try {
          json = JSON.parse(body.toString("utf8"));
        } catch {
          return signed(400, { error: "bad_order", message: "the body is not JSON: send an EffectorOrder" });
        }
        const order = d.parseOrder(json);
        if (!order.success) return signed(400, { error: "bad_order", message: issuesText(order.error.issues) });
        const out = await d.memory.submit(order.data, d.run);
        return out.status === 200
          ? signed(200, out.answer)
          : signed(out.status, { error: out.error, message: out.message });
      }
      const m = /^\/v1\/effects\/([^/]+)$/.exec(path);
      if (m) {
        if (req.method !== "GET") return signed(405, { error: "method_not_allowed", message: "GET an id here" });
        let id: string;
        try {
          id = decodeURIComponent(m[1]);
        } catch {
          return signed(400, { error: "bad_id", message: "the id is not url-encoded text" });
        }
        const known = d.memory.get(id);
        // A record as it is, marked replayed: this request ran nothing.
        return known ? signed(200, { ...known, replayed: true }) : signed(404, { error: "unknown_id" });
      }
      return signed(404, { error: "not_found", message: `no route ${req.method} ${path}` });
    } catch (err) {
      d.log({ level: "error", message: "request failed", detail: (err as Error).message });
      if (!res.headersSent) signed(500, { error: "effector_error", message: (err as Error).message });
      else res.destroy();
    }
  };
  return (req, res) => {
    handle(req, res).catch(() => res.destroy());
  };
}
