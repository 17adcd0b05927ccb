import { isJr2Secret, repoCredentialNames, repoCredentialRules } from "../../capabilities/repo/credentials-role";

const sandboxes = new Set(["ws-1", "ws-2"]);
const isSandbox = (name: string) => sandboxes.has(name);

describe("the repo-credential Role's names (decision 0046)", () => {
  it("grants each Repo's secretRef once, sorted", () => {
    expect(repoCredentialNames(["b-cred", undefined, "a-cred", "b-cred"], isSandbox)).toEqual(["a-cred", "b-cred"]);
  });

  it("never grants jr2's own Secrets: the root CA and each live Sandbox's token, Effector key and Custodian CA", () => {
    const named = ["jr2-custodian-ca", "ws-1-token", "ws-2-effector", "ws-1-custodian-ca", "github-token"];
    expect(repoCredentialNames(named, isSandbox)).toEqual(["github-token"]);
    expect(isJr2Secret("ws-1-token", isSandbox)).toBe(true);
    // A name with jr2's suffix is the tenant's own when no Sandbox of that name lives there.
    expect(isJr2Secret("github-token", isSandbox)).toBe(false);
    expect(isJr2Secret("ws-3-token", isSandbox)).toBe(false);
  });

  it("states a rule only for some names: an empty resourceNames would grant every Secret", () => {
    expect(repoCredentialRules([])).toEqual([]);
    expect(repoCredentialRules(["a"])).toEqual([
      { apiGroups: [""], resources: ["secrets"], verbs: ["get"], resourceNames: ["a"] },
    ]);
  });
});
