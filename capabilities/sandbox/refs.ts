// Labels and owner references every object the operator creates for a Sandbox carries.
import { API_VERSION } from "../../api/crd/sources/common";
import { MANAGED_BY, MANAGED_BY_LABEL, SANDBOX_NAME_LABEL } from "../../api/wire";

/** The part of a Sandbox the builders need to name and own what they build. */
export type SandboxRef = { metadata: { name: string; namespace: string; uid: string } };

/** The operator's informers select on the first label (decision 0006: it caches only what it labels). */
export const managedLabels = (name: string): Record<string, string> => ({
  [MANAGED_BY_LABEL]: MANAGED_BY,
  [SANDBOX_NAME_LABEL]: name,
});

/** controller: true, so the garbage collector takes the pod and Service with the Sandbox. */
export const ownerReference = (sandbox: SandboxRef) => ({
  apiVersion: API_VERSION,
  kind: "Sandbox",
  name: sandbox.metadata.name,
  uid: sandbox.metadata.uid,
  controller: true,
});
