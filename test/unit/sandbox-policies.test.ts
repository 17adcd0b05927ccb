// What the reconcile keeps in a Sandbox's namespace (capabilities/sandbox/policies.ts, decision
// 0047): the two NetworkPolicies written only when absent or different, and RBAC's refusal told
// from a quota's.
import { sandboxPolicies } from "../../api/sandbox-policies";
import { isRbacRefusal, namespaceNotEnabled, policyNeedsWrite } from "../../capabilities/sandbox/policies";

const [ingress, egress] = sandboxPolicies("team-a");
const live = (p: typeof ingress | typeof egress) => JSON.parse(JSON.stringify(p));

describe("policyNeedsWrite", () => {
  it("writes an absent policy, and not one as wanted (key order aside)", () => {
    expect(policyNeedsWrite(undefined, ingress)).toBe(true);
    expect(policyNeedsWrite(live(ingress), ingress)).toBe(false);
    const reordered = { ...live(egress), spec: Object.fromEntries(Object.entries(live(egress).spec).reverse()) };
    expect(policyNeedsWrite(reordered, egress)).toBe(false);
  });

  it("writes one whose spec was changed by hand, or whose label was taken off", () => {
    const opened = live(ingress);
    opened.spec.ingress[0].from = [{ podSelector: {} }];
    expect(policyNeedsWrite(opened, ingress)).toBe(true);
    const unlabelled = live(egress);
    unlabelled.metadata.labels = {};
    expect(policyNeedsWrite(unlabelled, egress)).toBe(true);
  });
});

describe("isRbacRefusal", () => {
  it("is RBAC's 403 alone", () => {
    expect(
      isRbacRefusal({
        status: 403,
        message:
          'networkpolicies.networking.k8s.io "jr2-sandbox-ingress" is forbidden: User "u" cannot get resource "networkpolicies"',
      }),
    ).toBe(true);
    expect(isRbacRefusal({ status: 403, message: 'pods "x" is forbidden: exceeded quota: q' })).toBe(false);
    expect(isRbacRefusal({ status: 404, message: "cannot get resource" })).toBe(false);
    expect(namespaceNotEnabled("team-b").reason).toBe("NamespaceNotEnabled");
  });
});
