// The Pepr module: registers the capabilities, and in the processes that watch (the watcher
// Deployment, or `pepr dev`) applies the CRDs first, so `npx pepr deploy` alone yields a working
// operator (docs/decisions/0003).
import { Capability, Log, PeprModule } from "pepr";
import cfg from "./package.json";
import { installCRDs } from "./lib/crd-install";
import { SandboxCapability, watchIgnoredNamespaces } from "./capabilities/sandbox";
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

const watches = process.env.PEPR_WATCH_MODE === "true" || process.env.PEPR_MODE === "dev";

(watches ? installCRDs((msg) => Log.info(msg)) : Promise.resolve())
  .then(() => {
    // deferStart lets a local run pick its port (dev/local-operator.ts); deployed, it is 3000.
    const module = new PeprModule(cfg, capabilities, { deferStart: true, ...admissionTiming() });
    if (process.env.PEPR_MODE !== "build") module.start(Number(process.env[OPERATOR_ENV.peprPort] ?? 3000));
    // Sandboxes in the namespaces admission ignores are refused on their status (decision 0017).
    if (watches && process.env.PEPR_MODE !== "build") void watchIgnoredNamespaces();
  })
  .catch((err) => {
    Log.error({ err: String(err?.message ?? err) }, "jr2-operator could not start");
    process.exit(1);
  });
