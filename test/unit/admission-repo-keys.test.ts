// Admission's word on a Sandbox's Repo keys (capabilities/admission/repo-keys.ts, decision 0046):
// which keys a create or a spec change adds, and the refusal of one that names no Repo of the
// Sandbox's own namespace.
import { checkRepoUrl, repoKey } from "../../api/repo-identity";
import { RepoKeyIndex, addedRepoKeys, keysOfRepo, repoKeyViolations } from "../../capabilities/admission/repo-keys";

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

const URL_A = "https://git.example/team/app.git";
const URL_B = "https://git.example/team/lib.git";
const keyOfUrl = (url: string) => repoKey(checkRepoUrl(url));
const repo = (namespace: string, name: string, url?: string) => ({
  metadata: { namespace, name },
  ...(url ? { spec: { url } } : {}),
});

describe("keysOfRepo", () => {
  it("is the Repo's name and its url's key, once each; a url the operator refuses adds none", () => {
    expect(keysOfRepo(repo("t", "app", URL_A))).toEqual(["app", "app-e7f888c900"]);
    // A Repo named by its url's key (as the Orchestrator writes them) answers to it once.
    expect(keysOfRepo(repo("t", "app-e7f888c900", URL_A))).toEqual(["app-e7f888c900"]);
    expect(keysOfRepo(repo("t", "r1", URL_B))).toEqual(["r1", keyOfUrl(URL_B)]);
    expect(keysOfRepo(repo("t", "r2", "https://user:pw@git.example/x.git"))).toEqual(["r2"]);
    expect(keysOfRepo({})).toEqual([]);
  });
});

describe("RepoKeyIndex", () => {
  it("answers by namespace: a Repo's keys are its own namespace's alone", () => {
    const index = new RepoKeyIndex();
    index.set(repo("team-a", "r1", URL_A));
    expect(index.has("team-a", "r1")).toBe(true);
    expect(index.has("team-a", keyOfUrl(URL_A))).toBe(true);
    expect(index.has("team-b", "r1")).toBe(false);
    expect(index.has("team-b", keyOfUrl(URL_A))).toBe(false);
  });

  it("takes back what a Repo gave when its url changes or it is deleted", () => {
    const index = new RepoKeyIndex();
    index.set(repo("t", "r1", URL_A));
    index.set(repo("t", "r1", URL_B));
    expect(index.has("t", keyOfUrl(URL_A))).toBe(false);
    expect(index.has("t", keyOfUrl(URL_B))).toBe(true);
    index.delete(repo("t", "r1"));
    expect(index.has("t", "r1")).toBe(false);
    expect(index.has("t", keyOfUrl(URL_B))).toBe(false);
  });

  it("keeps a key two Repos answer to until both are gone", () => {
    const index = new RepoKeyIndex();
    index.set(repo("t", "r1", URL_A));
    index.set(repo("t", "r2", URL_A));
    index.delete(repo("t", "r1"));
    expect(index.has("t", keyOfUrl(URL_A))).toBe(true);
    index.delete(repo("t", "r2"));
    expect(index.has("t", keyOfUrl(URL_A))).toBe(false);
    // A deletion of what it never held, or of an object with no name, changes nothing.
    index.delete(repo("t", "never"));
    index.delete({});
    index.set({ metadata: { name: "no-namespace" } });
    expect(index.has("t", "no-namespace")).toBe(false);
  });
});
