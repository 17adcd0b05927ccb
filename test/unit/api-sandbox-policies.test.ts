// The Sandbox pods' policies (api/sandbox-policies.ts, decisions 0038, 0047, 0051): ingress from the
// Orchestrator's pods alone; egress to the egress point's pods and the Orchestrator's, each on its
// port, and nothing else: no DNS, no address by block.
// The real node tier (test/node/sandbox-pod-suite.ts, "its NetworkPolicies, enforced") holds kube-network-policies to it.
import { egressPolicy, ingressPolicy } from "../../api/sandbox-policies";

const policy = egressPolicy("sandboxes");
const rules = policy.spec.egress as Array<{ to?: object[]; ports?: Array<{ protocol: string; port: number }> }>;

describe("the Sandbox egress policy", () => {
  it("selects every Sandbox pod, as the ingress policy does, and limits egress only", () => {
    expect(policy.metadata).toEqual({
      name: "jr2-sandbox-egress",
      namespace: "sandboxes",
      labels: { "app.kubernetes.io/part-of": "jr2" },
    });
    expect(policy.spec.podSelector).toEqual(ingressPolicy("sandboxes").spec.podSelector);
    expect(policy.spec.policyTypes).toEqual(["Egress"]);
  });

  it("admits exactly two peers, each by pod and namespace label and on one TCP port: the egress point and the Orchestrator", () => {
    expect(rules).toEqual([
      {
        to: [
          {
            namespaceSelector: { matchLabels: { "app.kubernetes.io/part-of": "jr2" } },
            podSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-egress" } },
          },
        ],
        ports: [{ protocol: "TCP", port: 3128 }],
      },
      {
        to: [
          {
            namespaceSelector: { matchLabels: { "app.kubernetes.io/part-of": "jr2" } },
            podSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } },
          },
        ],
        ports: [{ protocol: "TCP", port: 8090 }],
      },
    ]);
  });

  it("names no DNS port, no address block and no rule without a peer: nothing else leaves", () => {
    for (const r of rules) {
      expect(r.to?.length).toBeGreaterThan(0);
      expect(JSON.stringify(r)).not.toContain("ipBlock");
      expect(r.ports?.some((p) => p.port === 53)).toBe(false);
      expect(r.ports?.every((p) => p.protocol === "TCP")).toBe(true);
    }
  });
});

describe("the Sandbox ingress policy", () => {
  const ingress = ingressPolicy("team-a");
  it("admits the Orchestrator's pods wherever the installation runs them, on :8080 and :8082 alone", () => {
    expect(ingress.metadata).toMatchObject({ name: "jr2-sandbox-ingress", namespace: "team-a" });
    expect(ingress.spec.policyTypes).toEqual(["Ingress"]);
    expect(ingress.spec.ingress).toEqual([
      {
        from: [
          {
            // A namespace's label, not a name: any namespace the installation labels as jr2's.
            namespaceSelector: { matchLabels: { "app.kubernetes.io/part-of": "jr2" } },
            podSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } },
          },
        ],
        ports: [
          { protocol: "TCP", port: 8080 },
          { protocol: "TCP", port: 8082 },
        ],
      },
    ]);
  });
});
