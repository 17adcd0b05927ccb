// The operator's half of the Repo caches, on the real control plane: a Sandbox's pod mounts each
// node cache read-only, its Ready waits with RepoMissing while no Repo has the key and with
// RepoPending while the cache is not on its node, and the operator writes each Repo's identity and
// key. (Caches that turn Present come with the cache agent; it is not here yet.)
import { K8s, kind } from "kubernetes-fluent-client";
import { RepoModel } from "../../api/crd";
import { repoIdentity, repoKey } from "../../api/repo-identity";
import { condition, createSandbox, getSandbox, useNamespace, waitFor } from "./support/cluster";

const ns = useNamespace("repos");
const URL = "https://example.com/org/widgets.git";
const KEY = repoKey(repoIdentity(URL));

describe("a Sandbox naming a Repo", () => {
  it("mounts the node cache, waits RepoMissing, then RepoPending once the Repo exists", async () => {
    await createSandbox(ns.name, "with-repo", { repos: [{ key: KEY, url: URL }] });
    const missing = await waitFor(
      "Ready=False RepoMissing",
      () => getSandbox(ns.name, "with-repo"),
      (s) => condition(s, "Ready")?.reason === "RepoMissing",
    );
    expect(missing.status?.phase).toBe("Pending");
    expect(condition(missing, "Ready")?.message).toContain(KEY);

    const pod = await K8s(kind.Pod).InNamespace(ns.name).Get("with-repo");
    expect(pod.spec?.volumes).toContainEqual({
      name: `repo-${KEY}`,
      hostPath: { path: `/var/lib/jr2/repos/${KEY}`, type: "DirectoryOrCreate" },
    });
    const harness = pod.spec!.containers.find((c) => c.name === "harness")!;
    expect(harness.volumeMounts).toContainEqual(
      expect.objectContaining({ name: `repo-${KEY}`, mountPath: `/repos/${KEY}`, readOnly: true }),
    );
    expect(
      pod.spec!.containers.filter((c) => c.name !== "harness").flatMap((c) => c.volumeMounts ?? []),
    ).not.toContainEqual(expect.objectContaining({ name: `repo-${KEY}` }));

    await K8s(RepoModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Repo",
      metadata: { name: "widgets", namespace: ns.name },
      spec: { url: "git@example.com:org/widgets" },
    });
    const repo = await waitFor(
      "the Repo's identity and key on its status",
      () => K8s(RepoModel).InNamespace(ns.name).Get("widgets"),
      (r) => r.status?.key !== undefined,
    );
    expect(repo.status).toMatchObject({ identity: "example.com/org/widgets", key: KEY, present: 0 });

    const pending = await waitFor(
      "Ready=False RepoPending",
      () => getSandbox(ns.name, "with-repo"),
      (s) => condition(s, "Ready")?.reason === "RepoPending",
    );
    expect(condition(pending, "Ready")?.message).toContain(`node ${pending.status?.nodeName}`);
    expect(pending.status?.phase).toBe("Pending");
  });
});
