// Where a Sandbox pod may connect (decision 0038), one NetworkPolicy per Sandboxes' namespace beside
// the ingress one (installation.ts). A NetworkPolicy sees a pod, not its containers, so this is the
// union of what the pod's seats need, and nothing else of the cluster:
//
//   DNS, port 53 to any address   every seat resolves names (the Custodian its providers' and tunnel
//                                 hosts', the Effector its remotes'); the cluster's resolver is a
//                                 pod on most clusters and a node address on others.
//   the Orchestrator, :8090       the Custodian's /orchestrator route (decision 0018): its pods,
//                                 by namespace and name, as the ingress policy names them.
//   public addresses, any port    the model providers, the tunnel hosts and the git remotes live
//                                 outside the cluster; which host a credential may reach is the
//                                 Custodian's rule (decision 0018), not an address's.
//
// Not allowed: private (RFC 1918), shared (RFC 6598) and link-local addresses, where a cluster's pods,
// Services, nodes, API server and a cloud's metadata server live: the Agent runs code (decision
// 0042), and a pod of another tenant, the kubelet or the metadata server is no place for it. The
// pod's own loopback (the Harness to its Custodian) is no NetworkPolicy's business. Nor, with most
// enforcers, is the pod's own node (kube-network-policies, decision 0040, polices no traffic between
// a pod and its node).
import { MANAGED_BY, MANAGED_BY_LABEL, PART_OF_JR2, SANDBOX_EGRESS_POLICY } from "../../api/wire";
import { ORCHESTRATOR, ORCHESTRATOR_PORT } from "../orchestrator-manifests";

/** The address ranges a Sandbox pod may not reach beyond its allowed peers: the cluster's kinds of
 * address (private, shared, link-local; IPv6 unique-local and link-local). */
export const PRIVATE_V4 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"];
export const PRIVATE_V6 = ["fc00::/7", "fe80::/10"];

/** The Orchestrator's pods as a policy peer, by namespace and name: both policies name it so. */
export const orchestratorPeer = (orchestratorNamespace: string) => ({
  namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": orchestratorNamespace } },
  podSelector: { matchLabels: { "app.kubernetes.io/name": ORCHESTRATOR } },
});

/** Pure: the egress policy over every Sandbox pod of `namespace`; `orchestratorNamespace` is where
 * the Orchestrator's pods run. */
export function egressPolicy(namespace: string, orchestratorNamespace: string) {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: SANDBOX_EGRESS_POLICY, namespace, labels: { ...PART_OF_JR2 } },
    spec: {
      podSelector: { matchLabels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
      policyTypes: ["Egress"],
      egress: [
        {
          ports: [
            { protocol: "UDP", port: 53 },
            { protocol: "TCP", port: 53 },
          ],
        },
        {
          to: [orchestratorPeer(orchestratorNamespace)],
          ports: [{ protocol: "TCP", port: ORCHESTRATOR_PORT }],
        },
        {
          to: [
            { ipBlock: { cidr: "0.0.0.0/0", except: PRIVATE_V4 } },
            { ipBlock: { cidr: "::/0", except: PRIVATE_V6 } },
          ],
        },
      ],
    },
  };
}
