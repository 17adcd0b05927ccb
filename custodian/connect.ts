// The HTTPS proxy (decision 0018): a tool in the Harness container, told HTTPS_PROXY, asks
// `CONNECT host:port`. A host a held value is bound to is intercepted: TLS is ended here with a leaf
// from the Sandbox's CA (decision 0037), and each request inside is forwarded like any other (Stand-ins
// swapped, answers masked), always to the CONNECT's own host, whatever the inner Host header says.
// A host in `egress.tunnel` gets its bytes carried untouched. Any other is refused. With
// `egress.via`, any host not bound is tunnelled through the egress point instead, which alone
// decides (docs/decisions/0051): `egress.tunnel` is not read.
import type http from "node:http";
import net from "node:net";
import type { Duplex } from "node:stream";
import { type SecureContext, TLSSocket } from "node:tls";
import { answerRaw, egressAnswer, notReady, refusal, unreachable } from "./answers";
import type { Ctx, Trace } from "./context";
import { authorityOf, openTunnel, type Via } from "./egress-via";
import { CaUnusable } from "./leaf";
import { connectTarget, failureDetail, tunnelAllowed } from "./rules";

const ESTABLISHED = "HTTP/1.1 200 Connection Established\r\n\r\n";

/** The origin each intercepted TLS socket stands for (read by the inner server's requests). */
export const interceptedOrigins = new WeakMap<object, string>();

type Target = NonNullable<ReturnType<typeof connectTarget>>;

/** Ends TLS on the Harness's socket and hands it to `inner`, the server of intercepted requests. */
function intercept(socket: Duplex, head: Buffer, target: Target, inner: http.Server, context: SecureContext): void {
  socket.write(ESTABLISHED);
  if (head.length) socket.unshift(head);
  const tls = new TLSSocket(socket as net.Socket, {
    isServer: true,
    secureContext: context,
    ALPNProtocols: ["http/1.1"],
  });
  interceptedOrigins.set(tls, target.origin);
  // A client that does not trust the CA ends the handshake: nothing was read, nothing is sent.
  tls.on("error", () => socket.destroy());
  inner.emit("connection", tls);
}

/** Carries bytes both ways to `target` once connected; `unreachable` if it cannot connect in time. */
function tunnel(ctx: Ctx, socket: Duplex, head: Buffer, target: Target, trace: Trace, connectMs: number): void {
  const upstream = net.connect({ host: target.host, port: target.port });
  const timer = setTimeout(
    () => upstream.destroy(Object.assign(new Error("connect timeout"), { code: "UND_ERR_CONNECT_TIMEOUT" })),
    connectMs,
  );
  let connected = false;
  upstream.once("connect", () => {
    clearTimeout(timer);
    connected = true;
    trace.outcome = "answered";
    trace.status = 200;
    socket.write(ESTABLISHED);
    if (head.length) upstream.write(head);
    socket.pipe(upstream).pipe(socket);
  });
  upstream.on("error", (err: NodeJS.ErrnoException) => {
    clearTimeout(timer);
    if (!connected) return answerRaw(ctx, socket, trace, unreachable(`${err.code ?? "error"}: ${err.message}`));
    socket.destroy();
  });
  socket.on("error", () => upstream.destroy());
  socket.on("close", () => upstream.destroy());
  upstream.on("close", () => socket.destroy());
}

/** Pipes the Harness's socket and a connected upstream socket both ways, each ending the other. */
function splice(socket: Duplex, head: Buffer, upstream: net.Socket, early: Buffer): void {
  socket.write(ESTABLISHED);
  if (early.length) socket.write(early);
  if (head.length) upstream.write(head);
  socket.pipe(upstream).pipe(socket);
  upstream.on("error", () => socket.destroy());
  socket.on("error", () => upstream.destroy());
  socket.on("close", () => upstream.destroy());
  upstream.on("close", () => socket.destroy());
}

/** Tunnels through the egress point: its 200 is the Harness's 200, any other answer is relayed as
 * the Custodian's own (a refusal `refused`, "never reached" `unreachable`), and an egress point
 * not reached in time is `unreachable`. */
function chain(ctx: Ctx, socket: Duplex, head: Buffer, target: Target, trace: Trace, connectMs: number, via: Via) {
  trace.route = "via";
  trace.via = via.label;
  openTunnel(via, authorityOf(target.host, target.port), connectMs).then(
    (t) => {
      if (!t.ok) return answerRaw(ctx, socket, trace, egressAnswer(t.answer, trace.host!));
      // The Harness went away while the egress point was asked.
      if (socket.destroyed) return void t.socket.destroy();
      trace.outcome = "answered";
      trace.status = 200;
      splice(socket, head, t.socket, t.head);
    },
    (err: unknown) =>
      answerRaw(
        ctx,
        socket,
        trace,
        unreachable(`the egress point ${via.label} could not be reached: ${failureDetail(err)}`),
      ),
  );
}

/** The `connect` event of the Custodian's listener. */
export function onConnect(
  ctx: Ctx,
  req: http.IncomingMessage,
  socket: Duplex,
  head: Buffer,
  inner: http.Server,
  trace: Trace,
  connectMs: number,
): void {
  socket.on("error", () => socket.destroy());
  const target = connectTarget(req.url ?? "");
  if (!target) {
    return answerRaw(
      ctx,
      socket,
      trace,
      refusal({ status: 400, code: "bad_target", message: "CONNECT takes host:port, e.g. api.example.com:443" }),
    );
  }
  trace.host = `${target.host}:${target.port}`;
  const held = ctx.held();
  if (!held) return answerRaw(ctx, socket, trace, notReady(ctx));
  if (held.table.boundOrigins.has(target.origin)) {
    trace.route = "intercept";
    if (!ctx.leaves) {
      return answerRaw(
        ctx,
        socket,
        trace,
        refusal({
          status: 403,
          code: "no_ca",
          message: `${target.origin} is bound to a held value, but no CA is mounted to intercept it: mount the Sandbox's CA Secret's tls.crt and tls.key`,
        }),
      );
    }
    let context: SecureContext;
    try {
      context = ctx.leaves.contextFor(target.host);
    } catch (err) {
      if (!(err instanceof CaUnusable)) throw err;
      // Not the client's doing, and mended by the next rotation: no `refused` word.
      return answerRaw(ctx, socket, trace, { status: 503, code: err.code, message: err.message });
    }
    trace.outcome = "answered";
    trace.status = 200;
    return intercept(socket, head, target, inner, context);
  }
  if (ctx.via) return chain(ctx, socket, head, target, trace, connectMs, ctx.via);
  if (tunnelAllowed(ctx.config.egress.tunnel, target.host, target.port))
    return tunnel(ctx, socket, head, target, trace, connectMs);
  answerRaw(
    ctx,
    socket,
    trace,
    refusal({
      status: 403,
      code: "egress_refused",
      message: `${trace.host} is neither bound to a held value nor in egress.tunnel: add it to the config's egress.tunnel to reach it untouched`,
    }),
  );
}
