// The egress point's admin listener (docs/decisions/0051), reached by the Orchestrator's pods only
// (its NetworkPolicy): /healthz, /readyz (once every watch's first list is in the index),
// /metrics (Prometheus text) and one Sandbox's log at api/egress-point.ts egressLogPath.
import { createServer, type Server, type ServerResponse } from "node:http";
import { EGRESS_LOG_PATH } from "../api/egress-point";
import type { EgressIndex } from "./index";
import type { EgressRecord } from "./record";

const json = (res: ServerResponse, status: number, body: unknown) =>
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));

export function adminServer(o: { index: EgressIndex; record: EgressRecord; ready: () => boolean }): Server {
  return createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET") return json(res, 405, { error: { code: "method_not_allowed", message: "GET only" } });
    if (path === "/healthz") return res.writeHead(200).end("ok");
    if (path === "/readyz")
      return o.ready() ? res.writeHead(200).end("ready") : res.writeHead(503).end("the first lists are not in yet");
    if (path === "/metrics")
      return res.writeHead(200, { "content-type": "text/plain; version=0.0.4" }).end(o.record.metrics(o.index.sizes));
    const m = EGRESS_LOG_PATH.exec(path);
    if (m) {
      let ref: { namespace: string; name: string };
      try {
        ref = { namespace: decodeURIComponent(m[1]), name: decodeURIComponent(m[2]) };
      } catch {
        return json(res, 400, {
          error: { code: "bad_path", message: "the path's namespace or name is badly encoded" },
        });
      }
      if (!o.index.has(ref))
        return json(res, 404, {
          error: {
            code: "not_found",
            message: `the egress point knows no Sandbox ${ref.namespace}/${ref.name}: it may be gone (its log went with it) or in a namespace that does not hold Sandboxes`,
          },
        });
      return json(res, 200, { entries: o.record.logOf(ref) });
    }
    return json(res, 404, {
      error: {
        code: "not_found",
        message: `no route ${path}: /healthz, /readyz, /metrics, /v1/sandboxes/{namespace}/{name}/egress/log`,
      },
    });
  });
}
