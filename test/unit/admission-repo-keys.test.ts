// Admission's word on a Sandbox's Repo keys (capabilities/admission/repo-keys.ts, decision 0046):
// which keys a create or a spec change adds, and the refusal of one that names no Repo of the
// Sandbox's own namespace.
import { addedRepoKeys, repoKeyViolations } from "../../capabilities/admission/repo-keys";

const spec = (...keys: unknown[]) => ({ image: "h:1", repos: keys.map((key) => ({ key, url: "https://x/y" })) });

describe("addedRepoKeys", () => {
  it("takes every key of a create, with its index", () => {
    expect(addedRepoKeys(spec("app-1", "lib-2"))).toEqual([
      { index: 0, key: "app-1" },
      { index: 1, key: "lib-2" },
    ]);
  });

  it("takes only the keys a spec change adds, none for an unchanged spec", () => {
    expect(addedRepoKeys(spec("app-1", "lib-2"), spec("app-1"))).toEqual([{ index: 1, key: "lib-2" }]);
    expect(addedRepoKeys(spec("app-1"), spec("app-1"))).toEqual([]);
    expect(addedRepoKeys({ image: "h:1" }, spec("app-1"))).toEqual([]);
  });

  it("leaves to the spec rules what is no key, and reads hostile input without throwing", () => {
    expect(addedRepoKeys(spec("a,b=c", "../x", "", 3, null, "UPPER"))).toEqual([]);
    expect(addedRepoKeys(null)).toEqual([]);
    expect(addedRepoKeys({ repos: "x" })).toEqual([]);
    expect(addedRepoKeys({ repos: [null, 3] })).toEqual([]);
  });
});

describe("repoKeyViolations", () => {
  it("refuses each key no Repo of the namespace has, naming the field, the namespace and the fix", () => {
    const vs = repoKeyViolations(
      "team-b",
      [
        { index: 0, key: "app-1" },
        { index: 1, key: "lib-2" },
      ],
      new Set(["app-1"]),
    );
    expect(vs.map((v) => v.path)).toEqual(["spec.repos[1].key"]);
    expect(vs[0].message).toContain('"lib-2" names no Repo in namespace "team-b"');
    expect(vs[0].message).toContain("create a Repo for the repository's url in this namespace");
  });

  it("admits keys every one of which a Repo of the namespace has", () => {
    expect(repoKeyViolations("team-a", [{ index: 0, key: "app-1" }], new Set(["app-1"]))).toEqual([]);
  });
});
