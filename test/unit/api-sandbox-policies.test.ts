// The Sandbox pods' policies (api/sandbox-policies.ts, decisions 0038, 0047, 0051, 0067): ingress from
// the Orchestrator's pods alone; egress to the egress point's pods and the Orchestrator's, each on its
// port, and nothing else: no DNS, no address by block. Over every pod carrying the Sandbox label (the
// pod guard holds it); the peers in the companions' namespace by its name, never by a label a tenant
// could put on a namespace of its own.
// The real node tier (test/node/sandbox-pod-suite.ts, "its NetworkPolicies, enforced") holds kube-network-policies to it.
import { companionNamespaceFrom } from "../../api/env";
import { egressPolicy, ingressPolicy, sandboxPodsPeer, sandboxPolicies } from "../../api/sandbox-policies";

const policy = egressPolicy("sandboxes");
const rules = policy.spec.egress as Array<{ to?: object[]; ports?: Array<{ protocol: string; port: number }> }>;
const companions = (name: string) => ({ matchLabels: { "kubernetes.io/metadata.name": name } });

describe("the Sandbox egress policy", () => {
  it("selects every pod carrying the Sandbox label, as the ingress policy does, and limits egress only", () => {
    expect(policy.metadata).toEqual({
      name: "jr2-sandbox-egress",
      namespace: "sandboxes",
      labels: { "app.kubernetes.io/part-of": "jr2" },
    });
    // Not app.kubernetes.io/managed-by, which nobody guarded: the label the pod guard holds.
    expect(policy.spec.podSelector).toEqual({
      matchExpressions: [{ key: "sandbox.jr2.dev/name", operator: "Exists" }],
    });
    expect(policy.spec.podSelector).toEqual(ingressPolicy("sandboxes").spec.podSelector);
    expect(policy.spec.policyTypes).toEqual(["Egress"]);
  });

  it("admits exactly two peers, each by its name in the companions' namespace and on one TCP port", () => {
    expect(rules).toEqual([
      {
        to: [
          {
            namespaceSelector: companions("jr2-system"),
            podSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-egress" } },
          },
        ],
        ports: [{ protocol: "TCP", port: 3128 }],
      },
      {
        to: [
          {
            namespaceSelector: companions("jr2-system"),
            podSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } },
          },
        ],
        ports: [{ protocol: "TCP", port: 8090 }],
      },
    ]);
    expect(JSON.stringify(rules)).not.toContain("part-of");
  });

  it("names the companions' namespace it is given", () => {
    const [ingress, egress] = sandboxPolicies("team-a", "jr2-elsewhere");
    const peers = [
      ...(ingress as ReturnType<typeof ingressPolicy>).spec.ingress.flatMap((r) => r.from),
      ...(egress as ReturnType<typeof egressPolicy>).spec.egress.flatMap((r) => r.to),
    ];
    expect(peers.map((p) => p.namespaceSelector)).toEqual([
      companions("jr2-elsewhere"),
      companions("jr2-elsewhere"),
      companions("jr2-elsewhere"),
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
  it("admits the Orchestrator's pods in the companions' namespace, on :8080 and :8082 alone", () => {
    expect(ingress.metadata).toMatchObject({ name: "jr2-sandbox-ingress", namespace: "team-a" });
    expect(ingress.spec.policyTypes).toEqual(["Ingress"]);
    expect(ingress.spec.ingress).toEqual([
      {
        from: [
          {
            // The namespace's own name, which the API server sets: no other namespace can carry it.
            namespaceSelector: companions("jr2-system"),
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

describe("the Sandbox pods as a peer (the Orchestrator's API and the egress point admit them)", () => {
  it("chooses the pods by the Sandbox label, in opted-in namespaces", () => {
    expect(sandboxPodsPeer()).toEqual({
      namespaceSelector: { matchLabels: { "jr2.dev/sandboxes": "enabled" } },
      podSelector: { matchExpressions: [{ key: "sandbox.jr2.dev/name", operator: "Exists" }] },
    });
  });
});

describe("the companions' namespace the operator writes the peers with (JR2_COMPANION_NAMESPACE)", () => {
  it("is jr2-system unless the variable names another; a value that is no namespace name throws, naming it", () => {
    expect(companionNamespaceFrom({})).toBe("jr2-system");
    expect(companionNamespaceFrom({ JR2_COMPANION_NAMESPACE: " " })).toBe("jr2-system");
    expect(companionNamespaceFrom({ JR2_COMPANION_NAMESPACE: "jr2-elsewhere" })).toBe("jr2-elsewhere");
    expect(() => companionNamespaceFrom({ JR2_COMPANION_NAMESPACE: "Not_A/Name" })).toThrow(
      /^JR2_COMPANION_NAMESPACE="Not_A\/Name" is no namespace name: name the namespace the Orchestrator and the egress point run in/,
    );
  });
});
