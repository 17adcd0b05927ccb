// The two NetworkPolicies of every namespace that holds Sandboxes, kept by the operator as it
// reconciles a Sandbox there (capabilities/sandbox/policies.ts; decisions 0021, 0038, 0047). Pure.
//
// Ingress (`jr2-sandbox-ingress`): a Sandbox pod takes connections on :8080 (the Harness) and
// :8082 (the Effector) from the Orchestrator's pods alone.
//
// Egress (`jr2-sandbox-egress`): default deny (decision 0051). A NetworkPolicy sees a pod, not its
// containers, and by address, not by name, so it admits only the two jr2 peers the pod's seats
// need, and nothing else of the cluster or beyond:
//
//   the egress point, :3128       every connection out of the Sandbox (the Custodian's providers and
//                                 bound hosts, the Effector's git remotes, the tools of the Harness
//                                 and the user seat) goes through the egress point, which admits it
//                                 by name against this Sandbox's list, resolves the name itself and
//                                 records the decision (decision 0051).
//   the Orchestrator, :8090       the Custodian's /orchestrator route (decision 0018).
//
// No DNS: the pod finds both peers by hostAliases (the Orchestrator writes their Services'
// addresses), and every other name is resolved by the egress point, only once it is allowed; a
// lookup from the pod reaches no resolver, so it carries nothing out (decision 0051). No public
// address: a process that ignores HTTPS_PROXY connects to nothing. The pod's own loopback (the
// Harness to its Custodian) is no NetworkPolicy's business; the pod's own node is closed by the
// node (decision 0051: kube-network-policies polices no traffic between a pod and its node).
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
import { EGRESS, EGRESS_PROXY_PORT } from "./egress-point";

/** The egress point's pods as a policy peer (decision 0051), named as the Orchestrator's are: its
 * name in a namespace an administrator labelled part of jr2. */
export const egressPointPeer = () => ({
  namespaceSelector: { matchLabels: { ...PART_OF_JR2 } },
  podSelector: { matchLabels: { [APP_NAME_LABEL]: EGRESS } },
});

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
        { to: [egressPointPeer()], ports: [{ protocol: "TCP", port: EGRESS_PROXY_PORT }] },
        { to: [orchestratorPeer()], ports: [{ protocol: "TCP", port: ORCHESTRATOR_PORT }] },
      ],
    },
  };
}

/** Both policies of a namespace that holds Sandboxes. */
export const sandboxPolicies = (namespace: string) => [ingressPolicy(namespace), egressPolicy(namespace)];
