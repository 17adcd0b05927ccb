// The two NetworkPolicies of every namespace that holds Sandboxes, kept by the operator as it
// reconciles a Sandbox there (capabilities/sandbox/policies.ts; decisions 0021, 0038, 0047). Pure.
//
// Ingress (`jr2-sandbox-ingress`): a Sandbox pod takes connections on :8080 (the Harness) and
// :8082 (the Effector) from the Orchestrator's pods alone.
//
// Egress (`jr2-sandbox-egress`): a NetworkPolicy sees a pod, not its containers, so this is the
// union of what the pod's seats need, and nothing else of the cluster:
//
//   DNS, port 53 to any address   every seat resolves names (the Custodian its providers' and tunnel
//                                 hosts', the Effector its remotes'); the cluster's resolver is a
//                                 pod on most clusters and a node address on others.
//   the Orchestrator, :8090       the Custodian's /orchestrator route (decision 0018): its pods,
//                                 as the ingress policy names them.
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
//
// The Orchestrator's pods, wherever the installation runs them: the pods named `jr2-orchestrator`
// in a namespace labelled `app.kubernetes.io/part-of: jr2` (the companions' namespace, as their
// manifests write it). A namespace's labels are its administrator's, so a tenant cannot pass a
// pod of its own namespace off as the Orchestrator by labelling the pod (decision 0047).
import {
  APP_NAME_LABEL,
  EFFECTOR_PORT,
  HARNESS_PORT,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  ORCHESTRATOR_NAME,
  ORCHESTRATOR_PORT,
  PART_OF_JR2,
  SANDBOX_EGRESS_POLICY,
  SANDBOX_INGRESS_POLICY,
  SANDBOX_NAMESPACE_ENABLED,
  SANDBOX_NAMESPACE_LABEL,
} from "./wire";

/** The address ranges a Sandbox pod may not reach beyond its allowed peers: the cluster's kinds of
 * address (private, shared, link-local; IPv6 unique-local and link-local). */
export const PRIVATE_V4 = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16"];
export const PRIVATE_V6 = ["fc00::/7", "fe80::/10"];

/** The Orchestrator's pods as a policy peer: both policies name it so. */
export const orchestratorPeer = () => ({
  namespaceSelector: { matchLabels: { ...PART_OF_JR2 } },
  podSelector: { matchLabels: { [APP_NAME_LABEL]: ORCHESTRATOR_NAME } },
});

/** Every Sandbox pod of an opted-in namespace, as a peer (the Orchestrator's API policy admits
 * their Custodians). */
export const sandboxPodsPeer = () => ({
  namespaceSelector: { matchLabels: { [SANDBOX_NAMESPACE_LABEL]: SANDBOX_NAMESPACE_ENABLED } },
  podSelector: { matchLabels: { [MANAGED_BY_LABEL]: MANAGED_BY } },
});

const sandboxPods = () => ({ matchLabels: { [MANAGED_BY_LABEL]: MANAGED_BY } });

/** The ingress policy over every Sandbox pod of `namespace`. */
export function ingressPolicy(namespace: string) {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: SANDBOX_INGRESS_POLICY, namespace, labels: { ...PART_OF_JR2 } },
    spec: {
      podSelector: sandboxPods(),
      policyTypes: ["Ingress"],
      ingress: [
        {
          from: [orchestratorPeer()],
          ports: [
            { protocol: "TCP", port: HARNESS_PORT },
            { protocol: "TCP", port: EFFECTOR_PORT },
          ],
        },
      ],
    },
  };
}

/** The egress policy over every Sandbox pod of `namespace`. */
export function egressPolicy(namespace: string) {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: SANDBOX_EGRESS_POLICY, namespace, labels: { ...PART_OF_JR2 } },
    spec: {
      podSelector: sandboxPods(),
      policyTypes: ["Egress"],
      egress: [
        {
          ports: [
            { protocol: "UDP", port: 53 },
            { protocol: "TCP", port: 53 },
          ],
        },
        {
          to: [orchestratorPeer()],
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

/** Both policies of a namespace that holds Sandboxes. */
export const sandboxPolicies = (namespace: string) => [ingressPolicy(namespace), egressPolicy(namespace)];
