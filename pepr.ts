// The Pepr module: registers the capabilities, and in the processes that watch (the watcher
// Deployment, or `pepr dev`) applies the CRDs first (docs/decisions/0003; deployed, a patch of the
// CRDs the manifests carry, decision 0047), then builds the controllers and starts their watches
// (the binding table, capabilities/bindings.ts; decision 0035).
import type { RequestListener } from "node:http";
import https from "node:https";
import { Log, PeprModule, metricsCollector } from "pepr";
import cfg from "./package.json";
import { installCRDs } from "./lib/crd-install";
import { buildControllers, capabilities, startWatches } from "./capabilities/bindings";
import { apiPathFrom, reviewServer } from "./capabilities/admission/review-server";
import { optedInNamespaces } from "./capabilities/admission/namespaces";
import { repoKeys } from "./capabilities/admission/repo-keys";
import { operatorMetrics, type OperatorMetrics } from "./lib/operator-metrics";
import { OPERATOR_ENV } from "./api/env";
import { ADMISSION_DRAIN_PATH, ADMISSION_DRAIN_SECONDS } from "./api/wire";

/**
 * The API server's webhook client keeps an idle connection 90 s (Go's http.Transport default);
 * Node's HTTPS server closes one after 5 s. So every create after a 5 s pause opened a new TLS
 * connection to the module (a handshake on each create's critical path), and a connection the
 * server closes as the client reuses it fails a call. Idle connections outlive the client's.
 */
const KEEP_ALIVE_MS = 100_000;

/**
 * The admission pod's preStop GETs ADMISSION_DRAIN_PATH (scripts/module-rbac.ts) and is answered
 * after ADMISSION_DRAIN_SECONDS; from that GET on, every answer closes its connection. The API
 * server then opens new ones, which the Service sends to the pods that stay, and none of its
 * kept-alive connections is left here for SIGTERM to reset under a review (decision 0060).
 */
function drained(next: RequestListener): RequestListener {
  let draining = false;
  return (req, res) => {
    if (req.url === ADMISSION_DRAIN_PATH && req.method === "GET") {
      draining = true;
      res.setHeader("connection", "close");
      setTimeout(() => res.end("draining\n"), ADMISSION_DRAIN_SECONDS * 1000);
      return;
    }
    if (draining) res.setHeader("connection", "close");
    next(req, res);
  };
}

/**
 * Starts Pepr's server, keeps its idle connections open longer than the API server does, and in
 * the admission process answers reviews in front of Pepr's pipeline (capabilities/admission/
 * review-server.ts, decision 0028). Pepr does not expose its server, so its one `https.createServer`
 * call during `start` is observed and its request listener wrapped.
 */
function startServer(module: PeprModule, port: number, answersReviews: boolean, metrics: OperatorMetrics) {
  const node = https as { createServer: typeof https.createServer };
  const create = node.createServer;
  let server: https.Server | undefined;
  node.createServer = ((options: https.ServerOptions, app: RequestListener) =>
    (server = create(
      options,
      answersReviews ? drained(reviewServer(apiPathFrom(process.env), app, (ms) => metrics.admitted(ms))) : app,
    ))) as typeof https.createServer;
  try {
    module.start(port);
  } finally {
    node.createServer = create;
  }
  if (server) server.keepAliveTimeout = KEEP_ALIVE_MS;
  else
    Log.warn(
      "Pepr started no HTTPS server through https.createServer: its keep-alive stays Node's 5 s and " +
        "Pepr's own pipeline answers reviews (same rules, slower; decision 0028)",
    );
}

const watches = process.env.PEPR_WATCH_MODE === "true" || process.env.PEPR_MODE === "dev";

(watches ? installCRDs((msg) => Log.info(msg)) : Promise.resolve())
  .then(() => {
    // deferStart lets a local run pick its port (dev/local-operator.ts); deployed, it is 3000.
    const module = new PeprModule(cfg, capabilities(), { deferStart: true });
    if (process.env.PEPR_MODE === "build") return;
    // The operator's metrics on Pepr's collector, one set per process (lib/ loads no framework).
    const metrics = operatorMetrics(metricsCollector);
    const port = Number(process.env[OPERATOR_ENV.peprPort] ?? 3000);
    const answersReviews = process.env.PEPR_WATCH_MODE !== "true";
    startServer(module, port, answersReviews, metrics);
    // The opted-in namespaces and the Repo keys admission judges Sandbox creates by, listed before
    // the first create asks (capabilities/admission/namespaces.ts and repo-keys.ts, decisions 0067
    // and 0080); a failed list is tried again then.
    if (answersReviews)
      for (const [watched, what] of [
        [optedInNamespaces, "the opted-in namespaces"],
        [repoKeys, "the Repos"],
      ] as const)
        watched.start().catch((err: unknown) => Log.warn({ err: String(err) }, `${what} could not be listed yet`));
    // The controllers and their watches, one per kind (decisions 0023, 0035), here alone.
    if (watches)
      startWatches(buildControllers(metrics)).catch((err: unknown) => {
        Log.error({ err: String(err) }, "jr2-operator could not start its watches");
        process.exit(1);
      });
  })
  .catch((err) => {
    Log.error({ err: String(err?.message ?? err) }, "jr2-operator could not start");
    process.exit(1);
  });
