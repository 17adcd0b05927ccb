// Sandbox -> its Service (pure): headless on the Harness's port, and the endpoint clients dial.
import type { kind } from "kubernetes-fluent-client";
import { HARNESS_PORT, SANDBOX_NAME_LABEL } from "../../api/wire";
import { type SandboxRef, managedLabels, ownerReference } from "./refs";

/** The Service's spec (pure): the same for the operator and for the bench's plain baseline. */
export const serviceSpec = (name: string): NonNullable<kind.Service["spec"]> => ({
  // Headless (decision 0030): the name resolves to the pod's own address, and the
  // API server allocates no virtual IP, which is what held a burst's Sandboxes back.
  clusterIP: "None",
  // The name resolves while the pod has an address, as a virtual IP's did: a client that dials
  // the moment Ready is written, or while the Harness restarts, is refused, never sent an NXDOMAIN
  // its resolver caches (decision 0021: jr2's Orchestrator does the same for the Effector's Service).
  publishNotReadyAddresses: true,
  selector: { [SANDBOX_NAME_LABEL]: name },
  ports: [{ name: "http", port: HARNESS_PORT, targetPort: HARNESS_PORT, protocol: "TCP" }],
});

export function buildService(sandbox: SandboxRef): kind.Service {
  const { name, namespace } = sandbox.metadata;
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace, labels: managedLabels(name), ownerReferences: [ownerReference(sandbox)] },
    spec: serviceSpec(name),
  };
}

/** The address a client dials; present as soon as the Service exists (gate on phase Ready). */
export const endpointOf = (name: string, namespace: string) => `http://${name}.${namespace}.svc:${HARNESS_PORT}`;
