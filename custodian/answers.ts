// The Custodian's own answers, as JSON `{error: {code, message}}` on an HTTP response or written
// raw on a CONNECT's socket: a refusal (`x-jr2-custodian: refused`), a request not forwarded
// (502 `x-jr2-custodian: unreachable`), a failure after it may have been sent (a bare 502), and
// "not ready" (502 unreachable: nothing was sent). Every message is redacted of held values and
// Stand-ins before it leaves.
import { STATUS_CODES, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { CUSTODIAN_HEADER, REFUSED, UNREACHABLE, unreachableMessage } from "../api/custodian-config";
import { sendError } from "../lib/http-json";
import { redact } from "../lib/redact";
import type { Ctx, Trace } from "./context";
import type { EgressAnswer } from "./egress-via";
import type { ProxyRefusal } from "./rules";

export type Answer = { status: number; code: string; message: string; word?: string };

const clean = (ctx: Ctx, text: string) => redact(text, ctx.held()?.redactions ?? []);

export const refusal = (r: ProxyRefusal): Answer => ({ ...r, word: REFUSED });

export const unreachable = (detail: string): Answer => ({
  status: 502,
  code: UNREACHABLE,
  message: unreachableMessage(detail),
  word: UNREACHABLE,
});

export const failedAfterSending = (detail: string): Answer => ({
  status: 502,
  code: "upstream_failed",
  message: `the upstream failed after the request may have reached it (${detail})`,
});

/**
 * The egress point's answer (docs/decisions/0051) as the Custodian's own: its refusal is a refusal
 * (its code and message passed on, `refused`); "never reached" is `unreachable`, naming it; any
 * other answer its status, code and message, with no word.
 */
export function egressAnswer(a: EgressAnswer, target: string): Answer {
  if (a.word === UNREACHABLE)
    return unreachable(`the egress point did not reach ${target}${a.message ? `: ${a.message}` : ""}`);
  const status = a.status >= 400 && a.status <= 599 ? a.status : 502;
  return {
    status,
    code: a.code ?? (a.word === REFUSED ? "egress_refused" : "egress_failed"),
    message: a.message ?? `the egress point answered ${a.status} for ${target}`,
    ...(a.word === REFUSED ? { word: REFUSED } : {}),
  };
}

export const notReady = (ctx: Ctx): Answer => unreachable(`the Custodian is not ready: ${ctx.problems().join("; ")}`);

/** The answer on an HTTP response, and its outcome on the trace. */
export function answer(ctx: Ctx, res: ServerResponse, trace: Trace, a: Answer): void {
  trace.outcome =
    a.word === UNREACHABLE
      ? "unreachable"
      : a.word === REFUSED
        ? "refused"
        : a.status === 502
          ? "failed"
          : trace.outcome;
  if (res.headersSent) return void res.destroy();
  sendError(res, a.status, a.code, clean(ctx, a.message), a.word ? { [CUSTODIAN_HEADER]: a.word } : {});
}

/** The answer written raw on a CONNECT's socket, which is then closed. */
export function answerRaw(ctx: Ctx, socket: Duplex, trace: Trace, a: Answer): void {
  trace.outcome = a.word === UNREACHABLE ? "unreachable" : a.word === REFUSED ? "refused" : "failed";
  trace.status = a.status;
  const body = JSON.stringify({ error: { code: a.code, message: clean(ctx, a.message) } });
  const head = [
    `HTTP/1.1 ${a.status} ${STATUS_CODES[a.status] ?? "Error"}`,
    "content-type: application/json; charset=utf-8",
    `content-length: ${Buffer.byteLength(body)}`,
    "connection: close",
    ...(a.word ? [`${CUSTODIAN_HEADER}: ${a.word}`] : []),
  ];
  socket.end(`${head.join("\r\n")}\r\n\r\n${body}`);
}
