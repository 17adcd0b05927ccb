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
// Which pods the policies hold: every pod carrying `sandbox.jr2.dev/name`, the label the pod guard
// holds (capabilities/rules/pods.ts): only the operator creates a pod with it, and only the operator
// sets, changes or removes it or any other jr2 label or annotation of a Sandbox pod, `pods/status`
// included. A label nobody guarded (`app.kubernetes.io/managed-by`, before decision 0067) could be
// taken off the pod by whoever may label pods there, and the pod left both policies.
//
// The peers, the egress point's and the Orchestrator's pods: their names (`app.kubernetes.io/name`)
// in the companions' namespace, chosen by `kubernetes.io/metadata.name`, which the API server sets to
// the namespace's own name. A namespace's other labels are whoever made it (a tenant allowed to
// create namespaces sets `app.kubernetes.io/part-of: jr2` on its own), and any pod of it may carry
// the name label, so a peer chosen by labels alone could be a tenant's proxy (decision 0067).
import {
  APP_NAME_LABEL,
  COMPANION_NAMESPACE,
  EFFECTOR_PORT,
  HARNESS_PORT,
  NAMESPACE_NAME_LABEL,
  ORCHESTRATOR_NAME,
  ORCHESTRATOR_PORT,
  PART_OF_JR2,
  SANDBOX_EGRESS_POLICY,
  SANDBOX_INGRESS_POLICY,
  SANDBOX_NAME_LABEL,
  SANDBOX_NAMESPACE_ENABLED,
  SANDBOX_NAMESPACE_LABEL,
} from "./wire";
import { EGRESS, EGRESS_PROXY_PORT } from "./egress-point";

/** The companions' namespace, by the name the API server gives it. */
const companionsNamespace = (companions: string) => ({ matchLabels: { [NAMESPACE_NAME_LABEL]: companions } });

/** The egress point's pods as a policy peer (decision 0051): its name in the companions' namespace. */
export const egressPointPeer = (companions: string = COMPANION_NAMESPACE) => ({
  namespaceSelector: companionsNamespace(companions),
  podSelector: { matchLabels: { [APP_NAME_LABEL]: EGRESS } },
});

/** The Orchestrator's pods as a policy peer: its name in the companions' namespace. */
export const orchestratorPeer = (companions: string = COMPANION_NAMESPACE) => ({
  namespaceSelector: companionsNamespace(companions),
  podSelector: { matchLabels: { [APP_NAME_LABEL]: ORCHESTRATOR_NAME } },
});

/** Every Sandbox pod: the label only the operator puts on a pod and nobody else changes (decision 0067). */
export const sandboxPods = () => ({ matchExpressions: [{ key: SANDBOX_NAME_LABEL, operator: "Exists" }] });

/**
 * Every Sandbox pod of an opted-in namespace, as a peer (the Orchestrator's API policy admits their
 * Custodians, the egress point's its proxy port). The namespace by its opt-in label, which is no
 * tenant's to set in a namespace it merely works in (a Namespace is cluster-scoped); one who may
 * label namespaces gains nothing by it: the pods are chosen by the Sandbox label, which only the
 * operator puts on a pod, and the deployed operator creates pods only where the installation bound
 * its role (decisions 0047, 0067).
 */
export const sandboxPodsPeer = () => ({
  namespaceSelector: { matchLabels: { [SANDBOX_NAMESPACE_LABEL]: SANDBOX_NAMESPACE_ENABLED } },
  podSelector: sandboxPods(),
});

/** The ingress policy over every Sandbox pod of `namespace`; the Orchestrator in `companions`. */
export function ingressPolicy(namespace: string, companions: string = COMPANION_NAMESPACE) {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: SANDBOX_INGRESS_POLICY, namespace, labels: { ...PART_OF_JR2 } },
    spec: {
      podSelector: sandboxPods(),
      policyTypes: ["Ingress"],
      ingress: [
        {
          from: [orchestratorPeer(companions)],
          ports: [
            { protocol: "TCP", port: HARNESS_PORT },
            { protocol: "TCP", port: EFFECTOR_PORT },
          ],
        },
      ],
    },
  };
}

/** The egress policy over every Sandbox pod of `namespace`; its peers in `companions`. */
export function egressPolicy(namespace: string, companions: string = COMPANION_NAMESPACE) {
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "NetworkPolicy",
    metadata: { name: SANDBOX_EGRESS_POLICY, namespace, labels: { ...PART_OF_JR2 } },
    spec: {
      podSelector: sandboxPods(),
      policyTypes: ["Egress"],
      egress: [
        { to: [egressPointPeer(companions)], ports: [{ protocol: "TCP", port: EGRESS_PROXY_PORT }] },
        { to: [orchestratorPeer(companions)], ports: [{ protocol: "TCP", port: ORCHESTRATOR_PORT }] },
      ],
    },
  };
}

/** Every pod of the named namespaces (their kubernetes.io/metadata.name label), e.g. a monitoring
 * namespace's scraper (decision 0076). Never call it with none: a rule with an empty `from` admits everyone. */
export const namespacesPeer = (namespaces: readonly string[]) => ({
  namespaceSelector: {
    matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values: [...namespaces] }],
  },
});

/** Both policies of a namespace that holds Sandboxes, their peers in the companions' namespace. */
export const sandboxPolicies = (namespace: string, companions: string = COMPANION_NAMESPACE) => [
  ingressPolicy(namespace, companions),
  egressPolicy(namespace, companions),
];
