// http (decision 0070): a request from the Effector through the egress point, e.g. opening a pull
// request against a forge's API (jr2 has no forge client). Header values may name a
// secret, read here from its file; a body is JSON or a Worktree file resolved inside its worktree
// (no symlink out). No redirect is followed: a redirect could carry a secret header elsewhere.
import type { Dispatcher } from "undici";
import type { z } from "zod";
import { EFFECT_LIMITS, type EffectError } from "../api/effects";
import type { HttpOrder } from "../api/effector-wire";
import type { Egress } from "./egress";
import { PathRefused, realInside, readFileInside } from "./paths";
import { readSecret, SecretUnreadable } from "./secrets";
import { once } from "../lib/once";

// undici loads with the first http Effect, from effector-undici.js beside the Effector's bundle: an
// Effector that sends none never pays for it (docs/decisions/0044-the-custodian-starts-small.md).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- late-loaded, as decision 0044 says
const undici = once(() => require("undici") as typeof import("undici"));

export type HttpOrderT = z.infer<typeof HttpOrder>;
export type HttpContext = { work: string; secrets: string; egress: Egress; ca: string[] };
export type HttpOutcome =
  | {
      state: "succeeded";
      result: {
        kind: "http";
        status: number;
        headers: Record<string, string>;
        body: string;
        bodyEncoding: "utf8" | "base64";
        truncated: boolean;
      };
    }
  | { state: "failed"; error: EffectError };

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"];
const HEADER = /^[a-z0-9!#$%&'*+.^_`|~-]+$/;
const MAX_HEADERS = 100;
const MAX_HEADER_VALUE = 8192;

const failed = (code: string, message: string): HttpOutcome => ({ state: "failed", error: { code, message } });

export function httpOrderProblem(o: HttpOrderT): string | undefined {
  if (!METHODS.includes(o.method)) return `method ${o.method} must be one of ${METHODS.join(", ")}`;
  if (!/^https?:\/\//.test(o.url) || !URL.canParse(o.url)) return "url must be an absolute http(s) url";
  if (new URL(o.url).username || new URL(o.url).password) return "url must carry no credentials: use a header";
  for (const h of Object.keys(o.headers))
    if (!HEADER.test(h) || ["host", "content-length", "connection", "transfer-encoding"].includes(h))
      return `header ${h} must be a lower-case header name the client does not set itself`;
  if (
    !Number.isInteger(o.maxResponseBytes) ||
    o.maxResponseBytes < 0 ||
    o.maxResponseBytes > EFFECT_LIMITS.maxBodyBytes
  )
    return `maxResponseBytes must be 0-${EFFECT_LIMITS.maxBodyBytes}`;
  if (!Number.isInteger(o.timeoutSeconds) || o.timeoutSeconds < 1 || o.timeoutSeconds > EFFECT_LIMITS.maxHttpSeconds)
    return `timeoutSeconds must be 1-${EFFECT_LIMITS.maxHttpSeconds}`;
  return undefined;
}

/** A body as the answer carries it: UTF-8 text when it is, else base64 (a cut character at the end
 * of a truncated body is dropped before judging). */
export function encodeBody(buf: Buffer, truncated: boolean): { body: string; bodyEncoding: "utf8" | "base64" } {
  const decoder = new TextDecoder("utf-8", { fatal: true });
  for (let cut = 0; cut <= (truncated ? 3 : 0) && cut <= buf.length; cut++) {
    try {
      return { body: decoder.decode(buf.subarray(0, buf.length - cut)), bodyEncoding: "utf8" };
    } catch {
      // try a shorter end
    }
  }
  return { body: buf.toString("base64"), bodyEncoding: "base64" };
}

/** The response's headers, bounded: the first MAX_HEADERS, each value at most MAX_HEADER_VALUE. */
export function boundHeaders(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h).slice(0, MAX_HEADERS)) {
    if (v === undefined) continue;
    out[k] = (Array.isArray(v) ? v.join(k === "set-cookie" ? "\n" : ", ") : v).slice(0, MAX_HEADER_VALUE);
  }
  return out;
}

export async function runHttp(order: HttpOrderT, ctx: HttpContext): Promise<HttpOutcome> {
  const problem = httpOrderProblem(order);
  if (problem) return failed("refused", problem);
  const url = new URL(order.url);
  const headers: Record<string, string> = {};
  let body: Buffer | undefined;
  try {
    for (const [name, value] of Object.entries(order.headers))
      headers[name] = typeof value === "string" ? value : readSecret(ctx.secrets, value);
    if (order.body && "json" in order.body) {
      body = Buffer.from(JSON.stringify(order.body.json ?? null));
      headers["content-type"] ??= "application/json";
    } else if (order.body && "file" in order.body) {
      const root = realInside(order.body.file.root, [ctx.work], "body.file.root");
      body = readFileInside(root, order.body.file.path, EFFECT_LIMITS.maxFileBytes);
    }
  } catch (err) {
    if (err instanceof PathRefused || err instanceof SecretUnreadable) return failed("refused", err.message);
    throw err;
  }
  for (const [name, v] of Object.entries(headers))
    if (/[\r\n\0]/.test(v)) return failed("refused", `header ${name}'s value holds a line break or NUL`);

  const proxy = ctx.egress.proxyFor(url);
  const tls = { ca: ctx.ca };
  const timeoutMs = order.timeoutSeconds * 1000;
  const { Agent, ProxyAgent, request } = undici();
  const dispatcher: Dispatcher = proxy
    ? new ProxyAgent({ uri: proxy, requestTls: tls, headersTimeout: timeoutMs, bodyTimeout: timeoutMs })
    : new Agent({ connect: tls, headersTimeout: timeoutMs, bodyTimeout: timeoutMs });
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    const res = await request(url, {
      method: order.method as Dispatcher.HttpMethod,
      headers,
      body,
      dispatcher,
      signal,
    });
    const kept: Buffer[] = [];
    let size = 0;
    let truncated = false;
    for await (const chunk of res.body as AsyncIterable<Buffer>) {
      const room = order.maxResponseBytes - size;
      if (chunk.length > room) {
        kept.push(chunk.subarray(0, room));
        size += room;
        truncated = true;
        break;
      }
      kept.push(chunk);
      size += chunk.length;
    }
    if (truncated) res.body.destroy();
    return {
      state: "succeeded",
      result: {
        kind: "http",
        status: res.statusCode,
        headers: boundHeaders(res.headers),
        ...encodeBody(Buffer.concat(kept), truncated),
        truncated,
      },
    };
  } catch (err) {
    if (signal.aborted)
      return failed("timeout", `no complete answer from ${url.origin} within ${order.timeoutSeconds} s`);
    const e = err as Error & { cause?: { code?: string; message?: string }; code?: string };
    // The cause's code and message name the network's failure; never a header (which holds the secret).
    const why = e.cause?.code ?? e.code ?? e.cause?.message ?? e.message;
    return failed("http_failed", `${order.method} ${url.origin}${url.pathname} failed: ${why}`);
  } finally {
    await dispatcher.destroy().catch(() => undefined);
  }
}
