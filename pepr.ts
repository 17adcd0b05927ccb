// The Pepr module: registers the capabilities, and in the processes that watch (the watcher
// Deployment, or `pepr dev`) applies the CRDs first, so `npx pepr deploy` alone yields a working
// operator (docs/decisions/0003).
import { Capability, Log, PeprModule } from "pepr";
import cfg from "./package.json";
import { installCRDs } from "./capabilities/crd/install";
import { SandboxCapability } from "./capabilities/sandbox";
import { AdmissionCapability } from "./capabilities/admission";

const capabilities: Capability[] = [AdmissionCapability, SandboxCapability];

const watches = process.env.PEPR_WATCH_MODE === "true" || process.env.PEPR_MODE === "dev";

(watches ? installCRDs((msg) => Log.info(msg)) : Promise.resolve())
  .then(() => {
    // deferStart lets a local run pick its port (scripts/local-operator.ts); deployed, it is 3000.
    const module = new PeprModule(cfg, capabilities, { deferStart: true });
    if (process.env.PEPR_MODE !== "build") module.start(Number(process.env.JR2_PEPR_PORT ?? 3000));
  })
  .catch((err) => {
    Log.error({ err: String(err?.message ?? err) }, "jr2-operator could not start");
    process.exit(1);
  });
