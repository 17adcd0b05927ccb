import {
  changedNodes,
  repoCachesContribution,
  repoVerdict,
  sandboxesToWake,
  type RepoView,
} from "../../capabilities/repo/caches";

const ASKED = new Date("2026-03-01T12:00:00Z");
const before = "2026-03-01T11:00:00Z";
const after = "2026-03-01T12:01:00Z";
const lookup = (repos: RepoView[]) => (key: string) => repos.find((r) => r.key === key);
const spec = { repos: [{ key: "app-0123456789", url: "https://example.com/org/app" }] };
const repo = (nodes: RepoView["nodes"]): RepoView => ({ name: "app", key: "app-0123456789", nodes });

describe("repoCachesContribution", () => {
  it("mounts each node cache read-only at /repos/<key> from a hostPath under the cache root, in the namespace's directory", () => {
    const c = repoCachesContribution(spec, lookup([]), "team-a", "/var/cache/jr2")!;
    expect(c.volumes).toEqual([
      {
        name: "repo-app-0123456789",
        hostPath: { path: "/var/cache/jr2/team-a/app-0123456789", type: "DirectoryOrCreate" },
      },
    ]);
    expect(c.harnessMounts).toEqual([
      { name: "repo-app-0123456789", mountPath: "/repos/app-0123456789", readOnly: true },
    ]);
    expect(c.affinity).toBeUndefined();
  });

  it("gives the same key in another namespace another cache (decision 0046)", () => {
    const a = repoCachesContribution(spec, lookup([]), "team-a")!;
    const b = repoCachesContribution(spec, lookup([]), "team-b")!;
    expect(a.volumes?.[0].hostPath?.path).toBe("/var/lib/jr2/repos/team-a/app-0123456789");
    expect(b.volumes?.[0].hostPath?.path).toBe("/var/lib/jr2/repos/team-b/app-0123456789");
  });

  it("prefers, softly, the nodes where the cache is present", () => {
    const c = repoCachesContribution(
      spec,
      lookup([
        repo({
          "n-2": { phase: "Present", fetchedAt: after },
          "n-1": { phase: "Present" },
          "n-3": { phase: "Cloning" },
        }),
      ]),
      "team-a",
    )!;
    expect(c.affinity?.nodeAffinity?.preferredDuringSchedulingIgnoredDuringExecution).toEqual([
      {
        weight: 10,
        preference: { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: ["n-1", "n-2"] }] },
      },
    ]);
  });

  it("adds nothing for a Sandbox without Repos", () => {
    expect(repoCachesContribution({}, lookup([]), "team-a")).toBeUndefined();
  });
});

describe("repoVerdict", () => {
  const verdict = (nodes: RepoView["nodes"] | undefined, node: string | undefined = "n-1") =>
    repoVerdict(spec, node, ASKED, lookup(nodes === undefined ? [] : [repo(nodes)]));

  it("holds Ready with RepoMissing when no Repo has the key", () => {
    expect(verdict(undefined).gates[0]).toMatchObject({ reason: "RepoMissing" });
  });

  it("holds Ready with RepoPending while the cache is not on the pod's node", () => {
    expect(verdict({}).gates[0]).toMatchObject({ reason: "RepoPending", message: expect.stringContaining("node n-1") });
    expect(verdict({ "n-1": { phase: "Cloning" } }).gates[0]?.reason).toBe("RepoPending");
    expect(verdict({ "n-2": { phase: "Present", fetchedAt: after } }).gates[0]?.reason).toBe("RepoPending");
  });

  it("holds Ready with RepoPending while the cache is present but not fetched since the Sandbox asked", () => {
    expect(verdict({ "n-1": { phase: "Present", fetchedAt: before } }).gates[0]).toMatchObject({
      reason: "RepoPending",
      message: expect.stringContaining("not yet fetched since"),
    });
  });

  it("names a failed clone with the key, the node and git's words", () => {
    const v = verdict({ "n-1": { phase: "Failed", error: "fatal: repository not found" } });
    expect(v.gates[0]).toEqual({
      reason: "RepoCloneFailed",
      message: 'Repo "app-0123456789" on node n-1: the clone failed: fatal: repository not found',
    });
  });

  it("lets Ready through, fresh, once fetched since the ask", () => {
    const v = verdict({ "n-1": { phase: "Present", fetchedAt: after } });
    expect(v.gates).toEqual([]);
    expect(v.fresh).toMatchObject({ type: "ReposFresh", status: "True" });
  });

  it("lets Ready through with ReposFresh=False when the fetch since the ask failed", () => {
    const v = verdict({ "n-1": { phase: "Present", fetchedAt: before, error: "fatal: unable to access" } });
    expect(v.gates).toEqual([]);
    expect(v.fresh).toEqual({
      type: "ReposFresh",
      status: "False",
      reason: "FetchFailed",
      message: 'Repo "app-0123456789" on node n-1 is stale: fatal: unable to access',
    });
  });

  it("says nothing about Repos for a Sandbox that names none", () => {
    expect(repoVerdict({}, "n-1", ASKED, lookup([]))).toEqual({ gates: [] });
  });
});

describe("changedNodes", () => {
  it("names exactly the nodes whose entry changed, appeared or went", () => {
    const a = { n1: { phase: "Present" as const, fetchedAt: before }, n2: { phase: "Cloning" as const } };
    const b = {
      n1: { phase: "Present" as const, fetchedAt: after },
      n2: { phase: "Cloning" as const },
      n3: { phase: "Cloning" as const },
    };
    expect([...changedNodes(a, b)].sort()).toEqual(["n1", "n3"]);
    expect([...changedNodes(b, undefined)].sort()).toEqual(["n1", "n2", "n3"]);
    expect(changedNodes(a, a).size).toBe(0);
  });
});

describe("sandboxesToWake", () => {
  const naming = ["ns/a", "ns/b", "ns/c", "ns/unplaced"];
  const nodeOf = (s: string) => ({ "ns/a": "n1", "ns/b": "n2", "ns/c": "n1" })[s];

  it("wakes only the Sandboxes on the node whose entry changed, after a status change", () => {
    const woken = sandboxesToWake(
      {
        specChanged: false,
        before: { n1: { phase: "Present", fetchedAt: before }, n2: { phase: "Present", fetchedAt: before } },
        after: { n1: { phase: "Present", fetchedAt: after }, n2: { phase: "Present", fetchedAt: before } },
      },
      naming,
      nodeOf,
    );
    expect(woken).toEqual(["ns/a", "ns/c"]);
  });

  it("wakes every Sandbox naming the Repo when its spec changed", () => {
    expect(sandboxesToWake({ specChanged: true }, naming, nodeOf)).toEqual(naming);
  });

  it("wakes none when nothing changed", () => {
    const nodes = { n1: { phase: "Present" as const } };
    expect(sandboxesToWake({ specChanged: false, before: nodes, after: nodes }, naming, nodeOf)).toEqual([]);
  });
});
