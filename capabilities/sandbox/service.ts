// Sandbox -> its Service (pure): ClusterIP on the Harness's port, and the endpoint clients dial.
import type { kind } from "kubernetes-fluent-client";
import { HARNESS_PORT, SANDBOX_NAME_LABEL } from "../../api/wire";
import { type SandboxRef, managedLabels, ownerReference } from "./refs";

export function buildService(sandbox: SandboxRef): kind.Service {
  const { name, namespace } = sandbox.metadata;
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace, labels: managedLabels(name), ownerReferences: [ownerReference(sandbox)] },
    spec: {
      type: "ClusterIP",
      selector: { [SANDBOX_NAME_LABEL]: name },
      ports: [{ name: "http", port: HARNESS_PORT, targetPort: HARNESS_PORT, protocol: "TCP" }],
    },
  };
}

/** The address a client dials; present as soon as the Service exists (gate on phase Ready). */
export const endpointOf = (name: string, namespace: string) => `http://${name}.${namespace}.svc:${HARNESS_PORT}`;
