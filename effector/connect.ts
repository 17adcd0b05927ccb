// `effector connect HOST PORT`: ssh's ProxyCommand for a push over ssh (decision 0051: the pod's
// one way out is the egress point, an HTTP CONNECT proxy). Opens a tunnel to HOST:PORT through
// HTTPS_PROXY (or straight there when none is set or NO_PROXY names the host) and joins it to
// stdin and stdout. Exits 1 with a line on stderr when the tunnel cannot be opened.
import net from "node:net";
import { egressFrom } from "./egress";

const MAX_HEAD = 16 * 1024;

export function connectMain(args: string[], env: NodeJS.ProcessEnv = process.env): void {
  const [host, port] = args;
  if (!host || !/^\d{1,5}$/.test(port ?? "")) {
    process.stderr.write("jr2 effector connect: usage: connect HOST PORT\n");
    process.exit(2);
  }
  const die = (why: string) => {
    process.stderr.write(`jr2 effector connect: ${host}:${port}: ${why}\n`);
    process.exit(1);
  };
  const target = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
  const proxy = egressFrom(env).proxyFor(new URL(`ssh://${target}`));
  const join = (sock: net.Socket, rest?: Buffer) => {
    if (rest?.length) process.stdout.write(rest);
    process.stdin.pipe(sock);
    sock.pipe(process.stdout);
    sock.on("close", () => process.exit(0));
    sock.on("error", (e) => die(e.message));
  };
  if (!proxy) {
    const sock = net.connect(Number(port), host, () => join(sock));
    sock.once("error", (e) => die(e.message));
    return;
  }
  const p = new URL(proxy);
  const sock = net.connect(Number(p.port || 80), p.hostname, () => {
    sock.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  });
  sock.once("error", (e) => die(`the egress point ${p.host}: ${e.message}`));
  let head = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf("\r\n\r\n");
    if (end < 0) {
      if (head.length > MAX_HEAD) die("the egress point's answer has no end");
      return;
    }
    sock.off("data", onData);
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString("latin1"))?.[1];
    if (status !== "200") die(`the egress point refused the tunnel (${status ?? "no status"})`);
    join(sock, head.subarray(end + 4));
  };
  sock.on("data", onData);
}
