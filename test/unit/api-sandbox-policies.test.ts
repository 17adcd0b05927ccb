// The Sandbox pods' policies (api/sandbox-policies.ts, decisions 0038, 0047): ingress from the
// Orchestrator's pods alone; egress to DNS, the Orchestrator's pods on its port, and public
// addresses, never a private, shared or link-local one.
// The real node tier (test/node/sandbox-pod.test.ts) holds kube-network-policies to it.
import { BlockList, isIPv4 } from "node:net";
import { egressPolicy, ingressPolicy, PRIVATE_V4, PRIVATE_V6 } from "../../api/sandbox-policies";

const policy = egressPolicy("sandboxes");
type Rule = (typeof policy.spec.egress)[number] & {
  to?: Array<{ ipBlock?: { cidr: string; except: string[] } }>;
  ports?: Array<{ protocol: string; port: number }>;
};
const rules = policy.spec.egress as Rule[];

/** Whether a TCP connection to `ip:port` matches a rule whose peer is an ipBlock (or any peer). */
function publicAllows(ip: string, port: number): boolean {
  return rules.some((r) => {
    if (r.ports && !r.ports.some((p) => p.protocol === "TCP" && p.port === port)) return false;
    if (!r.to) return true;
    return r.to.some((peer) => {
      if (!peer.ipBlock) return false;
      const [net, bits] = peer.ipBlock.cidr.split("/");
      const family = isIPv4(ip) ? "ipv4" : "ipv6";
      if ((family === "ipv4") !== isIPv4(net)) return false;
      const inside = new BlockList();
      inside.addSubnet(net, Number(bits), family);
      const out = new BlockList();
      for (const e of peer.ipBlock.except) {
        const [n, b] = e.split("/");
        out.addSubnet(n, Number(b), family);
      }
      return inside.check(ip, family) && !out.check(ip, family);
    });
  });
}

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

  it("allows DNS on port 53, UDP and TCP, to any address", () => {
    expect(rules[0]).toEqual({
      ports: [
        { protocol: "UDP", port: 53 },
        { protocol: "TCP", port: 53 },
      ],
    });
  });

  it("allows the Orchestrator's pods, in jr2's labelled namespaces by name, on its port alone", () => {
    expect(rules[1]).toEqual({
      to: [
        {
          namespaceSelector: { matchLabels: { "app.kubernetes.io/part-of": "jr2" } },
          podSelector: { matchLabels: { "app.kubernetes.io/name": "jr2-orchestrator" } },
        },
      ],
      ports: [{ protocol: "TCP", port: 8090 }],
    });
  });

  it("allows public addresses on any port, and no private, shared or link-local one", () => {
    for (const ip of ["1.1.1.1", "160.79.104.10", "140.82.112.3", "2606:4700::1111"])
      expect([ip, publicAllows(ip, 443)]).toEqual([ip, true]);
    // Pods, Services, nodes, a private API server, CGNAT, the cloud metadata server, IPv6 private.
    for (const ip of ["10.244.255.7", "10.96.0.1", "172.18.0.2", "192.168.1.10", "100.64.0.1", "169.254.169.254"])
      expect([ip, publicAllows(ip, 443)]).toEqual([ip, false]);
    for (const ip of ["fd00::1", "fe80::1"]) expect([ip, publicAllows(ip, 443)]).toEqual([ip, false]);
    expect(PRIVATE_V4).toContain("169.254.0.0/16");
    expect(PRIVATE_V6).toContain("fc00::/7");
  });

  it("lets nothing private through on another port: the Harness's, the kubelet's, the API server's", () => {
    for (const port of [8080, 8082, 10250, 6443, 443]) expect(publicAllows("10.244.255.9", port)).toBe(false);
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
