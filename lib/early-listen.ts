// A port bound before a companion loads its code (decision 0062). The kubelet probes a container
// as soon as it sees it running; a port not yet bound refuses that probe, and the next comes a
// period later. Bound first, the probe's request waits in the server until the handler is there and
// is answered by it: Ready still means the companion serves, only sooner.
import http from "node:http";
import { listen } from "./http-json";

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

export type EarlyServer = {
  server: http.Server;
  /** Hands every request, the held ones first, to `handler` from now on. */
  serve(handler: Handler): void;
};

/** Binds `port` now; requests are held, unanswered, until `serve` is called. */
export async function listenEarly(port: number, host?: string): Promise<EarlyServer> {
  const held: Parameters<Handler>[] = [];
  const hold: Handler = (req, res) => void held.push([req, res]);
  const server = await listen(http.createServer(hold), port, host);
  return {
    server,
    serve(handler) {
      server.off("request", hold);
      server.on("request", handler);
      for (const [req, res] of held.splice(0)) handler(req, res);
    },
  };
}
