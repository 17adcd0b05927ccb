// The operator's half of the Repo caches, on the real control plane: a Sandbox's pod mounts its own
// namespace's node cache read-only (`<cacheRoot>/<namespace>/<key>`, decision 0046), its Ready
// waits with RepoPending while the cache is not on its node and with RepoMissing once no Repo has
// the key, and the operator writes each Repo's identity and key. Tenant B cannot name tenant A's
// Repo key: admission refuses it, and B's own Repo of the same url mounts B's path, never A's.
// (Caches that turn Present come with the cache agent: test/integration/cache-agent.test.ts.)
import { K8s, kind } from "kubernetes-fluent-client";
import { RepoModel, SandboxModel } from "../../api/crd";
import { repoIdentity, repoKey } from "../../api/repo-identity";
import { applyRepo, condition, createSandbox, getSandbox, useNamespace, waitFor } from "./support/cluster";

const ns = useNamespace("repos");
const tenantB = useNamespace("repos-b");
const URL = "https://example.com/org/widgets.git";
const KEY = repoKey(repoIdentity(URL));

describe("a Sandbox naming a Repo", () => {
  it("mounts its namespace's node cache, waits RepoPending, then RepoMissing once the Repo is gone", async () => {
    await applyRepo(ns.name, "widgets", "git@example.com:org/widgets");
    await createSandbox(ns.name, "with-repo", { repos: [{ key: KEY, url: URL }] });
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

    const pod = await K8s(kind.Pod).InNamespace(ns.name).Get("with-repo");
    expect(pod.spec?.volumes).toContainEqual({
      name: `repo-${KEY}`,
      hostPath: { path: `/var/lib/jr2/repos/${ns.name}/${KEY}`, type: "DirectoryOrCreate" },
    });
    const harness = pod.spec!.containers.find((c) => c.name === "harness")!;
    expect(harness.volumeMounts).toContainEqual(
      expect.objectContaining({ name: `repo-${KEY}`, mountPath: `/repos/${KEY}`, readOnly: true }),
    );
    expect(
      pod.spec!.containers.filter((c) => c.name !== "harness").flatMap((c) => c.volumeMounts ?? []),
    ).not.toContainEqual(expect.objectContaining({ name: `repo-${KEY}` }));

    await K8s(RepoModel).InNamespace(ns.name).Delete("widgets");
    const missing = await waitFor(
      "Ready=False RepoMissing",
      () => getSandbox(ns.name, "with-repo"),
      (s) => condition(s, "Ready")?.reason === "RepoMissing",
    );
    expect(condition(missing, "Ready")?.message).toContain(KEY);
  });
});

describe("tenant B and tenant A's Repo key", () => {
  beforeAll(async () => {
    await applyRepo(ns.name, "widgets-a", URL);
  });

  it("refuses at admission B's Sandbox naming a key no Repo of B's namespace has, naming the field and the fix", async () => {
    const create = K8s(SandboxModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Sandbox",
      metadata: { name: "borrower", namespace: tenantB.name },
      spec: { image: "ghcr.io/example/harness:1", repos: [{ key: KEY, url: URL }] },
    });
    await expect(create).rejects.toMatchObject({
      data: {
        message: expect.stringMatching(
          new RegExp(
            `spec\\.repos\\[0\\]\\.key: "${KEY}" names no Repo in namespace "${tenantB.name}".*create a Repo for the repository's url in this namespace`,
          ),
        ),
      },
    });
    await expect(getSandbox(tenantB.name, "borrower")).rejects.toMatchObject({ status: 404 });
  });

  it("mounts B's own cache for B's own Repo of the same url: the path names B's namespace, never A's", async () => {
    await applyRepo(tenantB.name, "widgets-b", URL);
    await createSandbox(tenantB.name, "own", { repos: [{ key: KEY, url: URL }] });
    const pod = await waitFor(
      "B's Sandbox pod",
      () => K8s(kind.Pod).InNamespace(tenantB.name).Get("own"),
      (p) => !!p.spec,
    );
    const caches = (pod.spec?.volumes ?? []).filter((v) => v.hostPath).map((v) => v.hostPath!.path);
    expect(caches).toEqual([`/var/lib/jr2/repos/${tenantB.name}/${KEY}`]);
    expect(caches.some((p) => p.includes(`/${ns.name}/`))).toBe(false);
  });
});
