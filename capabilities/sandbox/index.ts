// The Sandbox capability's wiring: watches feed the controller's cache and queue; the controller
// (controller.ts) reconciles; the pure builders (pod.ts, service.ts, status.ts, lease.ts) decide.
// Where a Sandbox becomes Lost: status.ts `lossOf`, confirmed in controller.ts `#ensurePod`.
import { K8s, WatchEvent } from "kubernetes-fluent-client";
import { WatchPhase } from "kubernetes-fluent-client/dist/fluent/shared-types";
import { Capability, Log, a } from "pepr";
import cfg from "../../package.json";
import { SandboxModel } from "../../api/crd";
import { MANAGED_BY, MANAGED_BY_LABEL } from "../../api/wire";
import { podRulesFromEnv } from "../rules/pods";
import { rulesFromEnv } from "../rules/sandbox";
import { SandboxController, type Sandbox } from "./controller";
import { builtPodRefusal, gateRefusal } from "./gate";

export const sandboxController = new SandboxController();

/** The namespaces admission ignores: Pepr's alwaysIgnore and PEPR_ADDITIONAL_IGNORED_NAMESPACES. */
export const IGNORED_NAMESPACES: readonly string[] = [
  ...new Set([
    ...cfg.pepr.alwaysIgnore.namespaces,
    ...(process.env.PEPR_ADDITIONAL_IGNORED_NAMESPACES ?? "")
      .split(",")
      .map((n) => n.trim())
      .filter(Boolean),
  ]),
];

// The reconcile runs admission's rules before it builds a pod (decision 0017), and the pod guard's
// on the pod it built before writing it (decision 0029).
const gate = { rules: rulesFromEnv(), ignoredNamespaces: IGNORED_NAMESPACES };
const podRules = podRulesFromEnv();
sandboxController.gatePods({
  spec: (sbx) => gateRefusal(sbx, gate),
  pod: (sbx, pod) => builtPodRefusal(sbx, pod, podRules),
});

export const SandboxCapability = new Capability({
  name: "sandbox",
  description: "Reconciles each Sandbox into one hardened Pod and one Service, and reports on its status",
});

const c = sandboxController;

/** Pepr's watch settings (its PEPR_* variables and defaults), so these watches behave as its own do. */
const int = (name: string, fallback: number) => {
  const n = Number.parseInt(process.env[name] ?? "", 10);
  return Number.isFinite(n) ? n : fallback;
};
const watchConfig = () => ({
  resyncFailureMax: int("PEPR_RESYNC_FAILURE_MAX", 5),
  resyncDelaySec: int("PEPR_RESYNC_DELAY_SECONDS", 5),
  lastSeenLimitSeconds: int("PEPR_LAST_SEEN_LIMIT_SECONDS", 300),
  relistIntervalSec: int("PEPR_RELIST_INTERVAL_SECONDS", 600),
});

/**
 * One watch per kind, every phase, in the watching process only (pepr.ts). Not Pepr's
 * `When(...).IsCreatedOrUpdated()` and `.IsDeleted()`: each of those is a watch of its own, and each
 * watch keeps a copy of every object it sees, so a kind watched twice was held three times (the
 * deletes' watch, managedFields and all, besides the one this controller caches). Decision 0023.
 *
 * Sandboxes are watched in every namespace, the ones admission ignores included: the controller's
 * gate refuses those on their status (decision 0017). Pods and Services only as the operator
 * labels them (decision 0006: O(Sandboxes), not O(cluster)).
 */
export async function startSandboxWatches(): Promise<void> {
  const cfg = watchConfig();
  const deleted = (phase: WatchPhase) => phase === WatchPhase.Deleted;
  const watchers = [
    K8s(SandboxModel).Watch((sbx, phase) => c.onSandbox(sbx as Sandbox, deleted(phase)), cfg),
    K8s(a.Pod)
      .WithLabel(MANAGED_BY_LABEL, MANAGED_BY)
      .Watch((pod, phase) => c.onPod(pod, deleted(phase)), cfg),
    K8s(a.Service)
      .WithLabel(MANAGED_BY_LABEL, MANAGED_BY)
      .Watch((svc, phase) => c.onService(svc, deleted(phase)), cfg),
  ];
  for (const w of watchers) {
    // As Pepr does: a watch that gave up leaves the controller blind, so the process ends and its
    // Deployment starts a new one.
    w.events.on(WatchEvent.GIVE_UP, (err: unknown) => {
      Log.error({ err: String(err) }, "a Sandbox watch gave up: exiting so the process restarts");
      process.exit(1);
    });
  }
  await Promise.all(watchers.map((w) => w.start()));
}
