// The keeper (decision 0075): one run, then exit (0 done, 1 failed: the next run finishes it). Reads:
//   JR2_KEEPER_MODULE                 pepr-<uuid>: the module whose identity it keeps (required)
//   JR2_KEEPER_NAMESPACE              the module's namespace (default pepr-system)
//   JR2_KEEPER_CERTIFICATE            cluster (default): it makes the CA and the serving pair;
//                                     certManager: cert-manager does, it only restarts onto them
//   JR2_KEEPER_ORCHESTRATOR_NAMESPACE the Orchestrator's namespace (default jr2-system)
//   JR2_KEEPER_SIGNING_SECRET         the Secret holding the signing key (required)
//   JR2_KEEPER_EXISTING_SECRET        true: that Secret is the team's (orchestrator.existingSecret), only checked
//   KUBECONFIG                        the cluster (in a pod: its service account)
// It logs what it did and why, never a key.
import { fail, log } from "../lib/log";
import { KEEPER_ENV, keeperConfigFrom, kubeApi } from "./run";
import { keep } from "./keeper";

let cfg;
try {
  cfg = keeperConfigFrom(process.env);
} catch (err) {
  fail((err as Error).message);
}
keep(kubeApi("jr2-keeper"), { ...cfg, say: (e) => log({ level: "info", ...e }) }).then(
  () => process.exit(0),
  (err: Error) => {
    log({ level: "error", message: err.message, module: process.env[KEEPER_ENV.module] });
    process.exit(1);
  },
);
