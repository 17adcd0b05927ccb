// How a Deployment of several replicas is spread (decisions 0076, 0079): apart when the cluster has
// nodes to spare, together when it does not (a one-node cluster still runs every replica), counted
// within one rollout's pods only.
export const spreadAcrossNodes = (selector: { matchLabels: Record<string, string> }) => [
  {
    maxSkew: 1,
    topologyKey: "kubernetes.io/hostname",
    whenUnsatisfiable: "ScheduleAnyway" as const,
    labelSelector: selector,
    matchLabelKeys: ["pod-template-hash"],
  },
];

/** The PodDisruptionBudget that keeps `minAvailable` replicas through a drain (decisions 0076, 0079). */
export const disruptionBudget = (
  meta: { name: string; namespace: string; labels: Record<string, string> },
  selector: { matchLabels: Record<string, string> },
  minAvailable: number,
) => ({
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  metadata: meta,
  spec: { minAvailable, selector },
});
