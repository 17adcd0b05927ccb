// The operator keeps both NetworkPolicies in every namespace that holds Sandboxes (decision 0047):
// a Sandbox written directly (jr2's CR shape, no Orchestrator) in a second opted-in namespace gets
// `jr2-sandbox-ingress` and `jr2-sandbox-egress` as api/sandbox-policies.ts builds them, before
// its pod; a namespace with no Sandbox gets none.
import { K8s, kind } from "kubernetes-fluent-client";
import { egressPolicy, ingressPolicy } from "../../api/sandbox-policies";
import { SANDBOX_NAMESPACE_ENABLED, SANDBOX_NAMESPACE_LABEL } from "../../api/wire";
import { createSandbox, listPods, useNamespace, waitFor } from "./support/cluster";

const first = useNamespace("policies-a");
const second = useNamespace("policies-b");
const empty = useNamespace("policies-none");

const policies = (ns: string) => K8s(kind.NetworkPolicy).InNamespace(ns).Get();

beforeAll(async () => {
  for (const ns of [first.name, second.name])
    await K8s(kind.Namespace).Apply({
      metadata: { name: ns, labels: { [SANDBOX_NAMESPACE_LABEL]: SANDBOX_NAMESPACE_ENABLED } },
    });
});

describe("the Sandbox namespaces' NetworkPolicies", () => {
  it("are written by the operator in each namespace where a Sandbox is reconciled, as built", async () => {
    for (const ns of [first.name, second.name]) {
      await createSandbox(ns, "direct");
      const list = await waitFor(
        `both policies in ${ns}`,
        () => policies(ns),
        (l) => l.items.length === 2,
      );
      const byName = Object.fromEntries(list.items.map((p) => [p.metadata!.name!, p]));
      expect(byName["jr2-sandbox-ingress"]?.spec).toEqual(ingressPolicy(ns).spec);
      expect(byName["jr2-sandbox-egress"]?.spec).toEqual(egressPolicy(ns).spec);
      expect(byName["jr2-sandbox-ingress"]?.metadata?.labels).toMatchObject({ "app.kubernetes.io/part-of": "jr2" });
      // Before its pod: the pod is made once the policies stand.
      await waitFor(
        `the Sandbox's pod in ${ns}`,
        () => listPods(ns, "direct"),
        (pods) => pods.length === 1,
      );
    }
  });

  it("are not written where no Sandbox lives", async () => {
    // The operator has reconciled both Sandboxes above; this namespace holds none.
    expect((await policies(empty.name)).items).toEqual([]);
  });
});
