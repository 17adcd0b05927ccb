// The Sandbox capability's wiring: watches feed the controller's cache and queue; the controller
// (controller.ts) reconciles; the pure builders (pod.ts, service.ts, status.ts, lease.ts) decide.
// Where a Sandbox becomes Lost: status.ts `lossOf`, confirmed in controller.ts `#ensurePod`.
import { K8s } from "kubernetes-fluent-client";
import { Capability, Log, a } from "pepr";
import cfg from "../../package.json";
import { SandboxModel } from "../../api/crd";
import { MANAGED_BY, MANAGED_BY_LABEL } from "../../api/wire";
import { rulesFromEnv } from "../admission/sandbox";
import { SandboxController, type Sandbox } from "./controller";
import { gateRefusal } from "./gate";

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

// The reconcile runs admission's rules before it builds a pod (decision 0017).
const gate = { rules: rulesFromEnv(), ignoredNamespaces: IGNORED_NAMESPACES };
sandboxController.gatePods((sbx) => gateRefusal(sbx, gate));

export const SandboxCapability = new Capability({
  name: "sandbox",
  description: "Reconciles each Sandbox into one hardened Pod and one Service, and reports on its status",
});

const { When } = SandboxCapability;
const c = sandboxController;

When(SandboxModel)
  .IsCreatedOrUpdated()
  .Watch((sbx) => c.onSandbox(sbx, false));
When(SandboxModel)
  .IsDeleted()
  .Watch((sbx) => c.onSandbox(sbx, true));

// Only what the operator labels is watched and cached (decision 0006: O(Sandboxes), not O(cluster)).
When(a.Pod)
  .IsCreatedOrUpdated()
  .WithLabel(MANAGED_BY_LABEL, MANAGED_BY)
  .Watch((pod) => c.onPod(pod, false));
When(a.Pod)
  .IsDeleted()
  .WithLabel(MANAGED_BY_LABEL, MANAGED_BY)
  .Watch((pod) => c.onPod(pod, true));
When(a.Service)
  .IsCreatedOrUpdated()
  .WithLabel(MANAGED_BY_LABEL, MANAGED_BY)
  .Watch((svc) => c.onService(svc, false));
When(a.Service)
  .IsDeleted()
  .WithLabel(MANAGED_BY_LABEL, MANAGED_BY)
  .Watch((svc) => c.onService(svc, true));

/**
 * Pepr's watches skip the namespaces admission ignores, so a Sandbox stored there (with no
 * defaults and no validation) would sit with no word at all. One small watch per such namespace
 * feeds the same controller, whose gate refuses it on its status and in an Event (decision 0017).
 * Started by the watching process only (pepr.ts).
 */
export async function watchIgnoredNamespaces(): Promise<void> {
  for (const namespace of IGNORED_NAMESPACES) {
    const watcher = K8s(SandboxModel)
      .InNamespace(namespace)
      .Watch((sbx, phase) => c.onSandbox(sbx as Sandbox, phase === "DELETED"));
    await watcher
      .start()
      .catch((err: unknown) =>
        Log.warn({ namespace, err: String(err) }, "no watch on Sandboxes in an ignored namespace"),
      );
  }
}
