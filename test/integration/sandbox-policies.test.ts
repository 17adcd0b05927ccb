// The operator keeps both NetworkPolicies in every namespace that holds Sandboxes (decision 0047):
// a Sandbox written directly (jr2's CR shape, no Orchestrator) in a second opted-in namespace gets
// `jr2-sandbox-ingress` and `jr2-sandbox-egress` as api/sandbox-policies.ts builds them, before
// its pod; a namespace with no Sandbox gets none.
import { isDeepStrictEqual } from "node:util";
import { K8s, kind } from "kubernetes-fluent-client";
import { egressPolicy, ingressPolicy } from "../../api/sandbox-policies";
import {
  COMPANION_NAMESPACE,
  OPERATOR_FIELD_MANAGER,
  SANDBOX_NAMESPACE_ENABLED,
  SANDBOX_NAMESPACE_LABEL,
} from "../../api/wire";
import { applyRequest, kubeRequest, paths } from "../../lib/kube";
import { type LabelSelector, selectorString } from "../support/label-selector";
import { createSandbox, listPods, useNamespace, waitFor } from "./support/cluster";

const first = useNamespace("policies-a");
const second = useNamespace("policies-b");
const empty = useNamespace("policies-none", { optedIn: false });

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

// Decision 0067: the peers are the companions' pods in the companions' namespace, chosen by the name
// the API server gives it. A namespace a tenant labels `app.kubernetes.io/part-of: jr2`, with pods
// named as the egress point and the Orchestrator, is no peer. Asked of the API server itself: which
// namespaces and pods each written peer's selectors select.
describe("the policies' peers (decision 0067)", () => {
  const impostor = useNamespace("policies-impostor", { optedIn: false });
  const upgraded = useNamespace("policies-upgrade");
  type Named = { metadata: { name: string; uid?: string } };
  const select = async (path: string, s: LabelSelector) =>
    (
      await kubeRequest<{ items: Named[] }>(
        "GET",
        `${path}?${new URLSearchParams({ labelSelector: selectorString(s) })}`,
      )
    ).items.map((o) => o.metadata.name);

  beforeAll(async () => {
    await K8s(kind.Namespace).Apply({
      metadata: { name: impostor.name, labels: { "app.kubernetes.io/part-of": "jr2" } },
    });
    // A pod is admitted once its namespace's default service account exists.
    for (const name of ["jr2-egress", "jr2-orchestrator"])
      await waitFor(
        `the impostor pod ${name}`,
        () =>
          K8s(kind.Pod)
            .Apply({
              metadata: { name, namespace: impostor.name, labels: { "app.kubernetes.io/name": name } },
              spec: { containers: [{ name: "proxy", image: "ghcr.io/example/proxy:1" }] },
            })
            .then(() => true),
        (made) => made,
      );
  });

  it("admit no pod of a namespace a tenant labelled part of jr2, however its pods are named", async () => {
    await createSandbox(first.name, "direct");
    const list = await waitFor(
      `both policies in ${first.name}`,
      () => policies(first.name),
      (l) => l.items.length === 2,
    );
    const peers = list.items.flatMap((p) => [
      ...(p.spec?.ingress ?? []).flatMap((r) => r.from ?? []),
      ...(p.spec?.egress ?? []).flatMap((r) => r.to ?? []),
    ]);
    expect(peers.length).toBe(3);
    for (const peer of peers) {
      const namespaces = await select("/api/v1/namespaces", peer.namespaceSelector as LabelSelector);
      // The companions' namespace alone (absent from this cluster, or the cluster's own).
      expect(namespaces).not.toContain(impostor.name);
      expect(namespaces.filter((n) => n !== COMPANION_NAMESPACE)).toEqual([]);
      // The impostor pods match the pod selector: only the namespace keeps them out.
      expect(await select(`/api/v1/namespaces/${impostor.name}/pods`, peer.podSelector as LabelSelector)).toHaveLength(
        1,
      );
    }
  });

  // An installation upgraded over an earlier build: its policies are rewritten in place (a server-side
  // apply by the operator's field manager, whose atomic selectors replace the earlier ones whole).
  it("are rewritten in place where an earlier build wrote them, when a Sandbox there is reconciled", async () => {
    const earlier = (p: ReturnType<typeof egressPolicy>) => {
      const old = structuredClone(p) as unknown as { spec: Record<string, unknown> };
      const partOf = { namespaceSelector: { matchLabels: { "app.kubernetes.io/part-of": "jr2" } } };
      const rewrite = (peers: Array<Record<string, unknown>>) => peers.map((x) => ({ ...x, ...partOf }));
      old.spec.podSelector = { matchLabels: { "app.kubernetes.io/managed-by": "jr2-operator" } };
      for (const r of (old.spec.egress ?? []) as Array<{ to: Array<Record<string, unknown>> }>) r.to = rewrite(r.to);
      for (const r of (old.spec.ingress ?? []) as Array<{ from: Array<Record<string, unknown>> }>)
        r.from = rewrite(r.from);
      return old;
    };
    const before = new Map<string, string>();
    for (const p of [ingressPolicy(upgraded.name), egressPolicy(upgraded.name)]) {
      const path = paths.networkPolicy(upgraded.name, p.metadata.name);
      const live = await applyRequest<Named>(
        path,
        earlier(p as ReturnType<typeof egressPolicy>),
        OPERATOR_FIELD_MANAGER,
      );
      before.set(p.metadata.name, live.metadata.uid!);
    }
    await createSandbox(upgraded.name, "after-upgrade");
    const list = await waitFor(
      `the policies in ${upgraded.name} as this build writes them`,
      () => policies(upgraded.name),
      (l) =>
        l.items.length === 2 &&
        l.items.every((p) =>
          isDeepStrictEqual(
            p.spec,
            (p.metadata?.name === "jr2-sandbox-egress" ? egressPolicy(upgraded.name) : ingressPolicy(upgraded.name))
              .spec,
          ),
        ),
    );
    for (const p of list.items) {
      expect(p.metadata?.uid).toBe(before.get(p.metadata!.name!));
      expect(JSON.stringify(p.spec)).not.toContain("part-of");
      expect(JSON.stringify(p.spec)).not.toContain("managed-by");
    }
  });
});
