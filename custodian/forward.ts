// One request forwarded upstream and its answer passed back (decision 0018). The Stand-ins are
// swapped for their secrets only toward their bound origin (else the request is refused, never
// sent); the Sandbox token, when the route adds it, goes as the bearer. An answer to a request that
// carried a held value is asked for unencoded and masked on its way back. A failure before the
// request was sent is `unreachable` (retried first when the route allows); any other is a bare 502;
// an upstream's own status (a stopping Orchestrator's 503) passes through unchanged. Through the
// egress point (docs/decisions/0051), its refusal is the Custodian's refusal, sent once.
import type http from "node:http";
import { performance } from "node:perf_hooks";
import type { Duplex, Readable } from "node:stream";
import { createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { answer, egressAnswer, failedAfterSending, refusal, unreachable } from "./answers";
import type { Ctx, Held, Trace } from "./context";
import { maskInto, maskText } from "./mask";
import { answerHeaders, failureDetail, substitute, withoutHeader, type Header, type KeyHeader } from "./rules";
import { egressOf, type Gone, type UpstreamAnswer } from "./upstream";

export type Exchange = {
  url: URL;
  /** End-to-end headers, after the route's own changes. */
  headers: Header[];
  /** A buffer when the route may retry; the request itself when it streams. */
  body: Buffer | Readable | undefined;
  /** Attempts after the first, made only when the request was never sent. */
  retries: number;
  /** The bearer the route adds (the Sandbox token), replacing any the Harness sent. */
  bearer?: string;
  /** Straight to the upstream even with an egress point (the Orchestrator's route). */
  direct?: boolean;
  /** A provider route's key header: Stand-ins ride there alone (api/model-kinds.ts). */
  keyHeader?: KeyHeader;
};

const BACKOFF_MS = 100;

/** The decoder for an encoding the Custodian can read, null for none, undefined for one it cannot. */
function decoderFor(encoding: string): (() => Duplex) | null | undefined {
  const e = encoding.trim().toLowerCase();
  if (e === "" || e === "identity") return null;
  if (e === "gzip" || e === "x-gzip") return createGunzip;
  if (e === "deflate") return createInflate;
  if (e === "br") return createBrotliDecompress;
  return undefined;
}

/** The headers that leave: Stand-ins swapped, the bearer set, an unencoded answer asked for when a held value goes. */
function outgoing(
  ex: Exchange,
  held: Held,
): { headers: Header[]; carries: boolean } | { refused: ReturnType<typeof refusal> } {
  const sub = substitute(ex.headers, ex.url.origin, held.table, ex.keyHeader);
  if (!sub.ok) return { refused: refusal(sub) };
  let headers = sub.headers;
  if (ex.bearer !== undefined)
    headers = [...withoutHeader(headers, "authorization"), ["authorization", `Bearer ${ex.bearer}`]];
  const carries = sub.used.length > 0 || ex.bearer !== undefined;
  if (carries) headers = [...withoutHeader(headers, "accept-encoding"), ["accept-encoding", "identity"]];
  return { headers, carries };
}

/** The upstream's answer, after `retries` more tries of a request that was never sent. */
async function send(ctx: Ctx, ex: Exchange, method: string, headers: Header[], gone: Gone): Promise<UpstreamAnswer> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await ctx.upstream.request(ex.url, { method, headers, body: ex.body, gone, direct: ex.direct });
    } catch (err) {
      const again = ctx.upstream.wasNotSent(err) && !ctx.upstream.wasRefused(err);
      if (gone.yes || attempt >= ex.retries || !again) throw err;
      await new Promise((r) => setTimeout(r, BACKOFF_MS * 2 ** attempt));
    }
  }
}

/** Passes the answer back: headers cleaned (and masked), the body streamed (decoded and masked when it must be). */
function relay(ctx: Ctx, res: http.ServerResponse, trace: Trace, up: UpstreamAnswer, carries: boolean): void {
  const held = ctx.held()!;
  let headers = answerHeaders(up.rawHeaders);
  let decoding: Duplex | undefined;
  if (carries) {
    const encoding = headers.find(([n]) => n === "content-encoding")?.[1] ?? "";
    const decoder = decoderFor(encoding);
    if (decoder === undefined) {
      up.body.destroy();
      return answer(
        ctx,
        res,
        trace,
        failedAfterSending(
          `the answer is encoded as ${encoding.slice(0, 40)}, which the Custodian cannot read to mask held values`,
        ),
      );
    }
    if (decoder) {
      headers = headers.filter(([n]) => n !== "content-encoding" && n !== "content-length");
      decoding = decoder();
    }
    headers = headers.map(([n, v]) => [n, maskText(v, held.masks)]);
  }
  trace.outcome = "answered";
  res.writeHead(up.statusCode, headers.flat());
  pipeAnswer(up.body, decoding, carries ? held.masks : undefined, res);
}

/**
 * Streams `body` (through `decoder`, masking `masks` when given) into `res`, with backpressure;
 * once any side failed or went away, every stream is torn down (the upstream or the Harness went
 * away mid-answer: the Harness sees its answer cut short). Piped by hand rather than with
 * stream.pipeline, which builds an Error and a DOMException with their stacks for every answer it
 * finishes, a third of the Custodian's own CPU per small request
 * (docs/decisions/0044-the-custodian-starts-small.md).
 */
function pipeAnswer(
  body: Readable,
  decoder: Duplex | undefined,
  masks: readonly Buffer[] | undefined,
  res: http.ServerResponse,
): void {
  let settled = false;
  const settle = (failed: boolean) => {
    if (settled) return;
    settled = true;
    if (failed) {
      res.destroy();
      body.destroy();
      decoder?.destroy();
    }
  };
  const fail = () => settle(true);
  body.on("error", fail);
  decoder?.on("error", fail);
  res.on("error", fail);
  res.on("close", () => settle(!res.writableFinished));
  const last: Readable = decoder ? body.pipe(decoder) : body;
  if (masks) maskInto(last, res, masks);
  else last.pipe(res);
}

/** Forwards `ex` for `req` and answers `res`. */
export async function forward(
  ctx: Ctx,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  trace: Trace,
  ex: Exchange,
): Promise<void> {
  trace.host = ex.url.host;
  if (ctx.via && !ex.direct) trace.via = ctx.via.label;
  const held = ctx.held()!;
  const out = outgoing(ex, held);
  if ("refused" in out) {
    req.resume();
    return answer(ctx, res, trace, out.refused);
  }
  const gone: Gone = { yes: false };
  res.on("close", () => {
    if (res.writableFinished) return;
    gone.yes = true;
    gone.end?.();
  });
  const started = performance.now();
  let up: UpstreamAnswer;
  try {
    up = await send(ctx, ex, req.method ?? "GET", out.headers, gone);
  } catch (err) {
    if (gone.yes) return;
    const egress = egressOf(err);
    if (egress) return answer(ctx, res, trace, egressAnswer(egress, ex.url.host));
    const detail = failureDetail(err);
    return answer(ctx, res, trace, ctx.upstream.wasNotSent(err) ? unreachable(detail) : failedAfterSending(detail));
  }
  ctx.metrics.upstream(trace.route, (performance.now() - started) / 1000);
  relay(ctx, res, trace, up, out.carries);
}
