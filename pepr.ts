// The Pepr module: registers the capabilities, and in the processes that watch (the watcher
// Deployment, or `pepr dev`) applies the CRDs first, so `npx pepr deploy` alone yields a working
// operator (docs/decisions/0003).
import https from "node:https";
import { Capability, Log, PeprModule } from "pepr";
import cfg from "./package.json";
import { installCRDs } from "./lib/crd-install";
import { SandboxCapability, startSandboxWatches } from "./capabilities/sandbox";
import { AdmissionCapability } from "./capabilities/admission";
import { RepoCapability } from "./capabilities/repo";
import { metrics } from "./lib/metrics";
import { OPERATOR_ENV } from "./api/env";

const capabilities: Capability[] = [AdmissionCapability, SandboxCapability, RepoCapability];

/** Times each admission review from Pepr's before hook to its after hook (jr2_admission_duration):
 * Pepr's own pepr_mutate/pepr_validate summaries stay empty in 1.1.4. */
function admissionTiming() {
  const started = new Map<string, number>();
  return {
    beforeHook: (req: { uid: string }) => void started.set(req.uid, performance.now()),
    afterHook: (res: { uid: string }) => {
      const t = started.get(res.uid);
      if (t === undefined) return;
      started.delete(res.uid);
      metrics.admitted(performance.now() - t);
    },
  };
}

/**
 * Pepr's own info lines for each admission review it answers (1.1.4: the request log, "Incoming
 * request", "Processing ...", "... succeeded", "Check response"): six synchronous writes a review at
 * the default level. Demoted to debug; a denial, an error and a refused path keep their level.
 */
const PER_REVIEW =
  /^(Incoming request|Processing request|Processing validation request|No matching actions found|Processing (mutation|validation) action \(.*\)|Mutation action succeeded \(.*\)|Validation action complete \(.*\): allowed)$/;

function isPerReview(args: unknown[]): boolean {
  const [first, msg] = args;
  if (msg === "Check response") return (first as { res?: { allowed?: unknown } }).res?.allowed !== false;
  if (typeof msg === "string") return PER_REVIEW.test(msg);
  // The request-log middleware logs one object: {uid, method, url, status, duration}.
  const line = first as { url?: unknown; status?: unknown } | null;
  return (
    args.length === 1 &&
    typeof line?.url === "string" &&
    /^\/(mutate|validate)\//.test(line.url) &&
    typeof line.status === "number" &&
    line.status < 400
  );
}

function quietReviews() {
  const info = Log.info.bind(Log);
  Log.info = ((...args: Parameters<typeof info>) =>
    isPerReview(args) ? Log.debug(...args) : info(...args)) as typeof Log.info;
}

/**
 * The API server's webhook client keeps an idle connection 90 s (Go's http.Transport default);
 * Node's HTTPS server closes one after 5 s. So every create after a 5 s pause opened a new TLS
 * connection to the module (a handshake on each create's critical path), and a connection the
 * server closes as the client reuses it fails a call. Idle connections outlive the client's.
 */
const KEEP_ALIVE_MS = 100_000;

/** Starts Pepr's server and keeps its idle connections open longer than the API server does: Pepr
 * does not expose the server, so its one `https.createServer` call during `start` is observed. */
function startServer(module: PeprModule, port: number) {
  const node = https as { createServer: typeof https.createServer };
  const create = node.createServer;
  let server: https.Server | undefined;
  node.createServer = ((...args: unknown[]) =>
    (server = (create as (...a: unknown[]) => https.Server)(...args))) as typeof https.createServer;
  try {
    module.start(port);
  } finally {
    node.createServer = create;
  }
  if (server) server.keepAliveTimeout = KEEP_ALIVE_MS;
  else Log.warn("Pepr started no HTTPS server through https.createServer: its keep-alive stays Node's 5 s");
}

const watches = process.env.PEPR_WATCH_MODE === "true" || process.env.PEPR_MODE === "dev";

(watches ? installCRDs((msg) => Log.info(msg)) : Promise.resolve())
  .then(() => {
    // deferStart lets a local run pick its port (dev/local-operator.ts); deployed, it is 3000.
    const module = new PeprModule(cfg, capabilities, { deferStart: true, ...admissionTiming() });
    if (process.env.PEPR_MODE !== "build") {
      quietReviews();
      startServer(module, Number(process.env[OPERATOR_ENV.peprPort] ?? 3000));
    }
    // The Sandbox controller's watches: one per kind (decision 0023).
    if (watches && process.env.PEPR_MODE !== "build")
      startSandboxWatches().catch((err: unknown) => {
        Log.error({ err: String(err) }, "jr2-operator could not start its Sandbox watches");
        process.exit(1);
      });
  })
  .catch((err) => {
    Log.error({ err: String(err?.message ?? err) }, "jr2-operator could not start");
    process.exit(1);
  });
