// The Sandbox capability's wiring: watches feed the controller's cache and queue; the controller
// (controller.ts) reconciles; the pure builders (pod.ts, service.ts, status.ts, lease.ts) decide.
// Where a Sandbox becomes Lost: status.ts `lossOf`, confirmed in controller.ts `#ensurePod`.
import { Capability, a } from "pepr";
import { SandboxModel } from "../../api/crd";
import { MANAGED_BY, MANAGED_BY_LABEL } from "../../api/wire";
import { SandboxController } from "./controller";

export const sandboxController = new SandboxController();

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
