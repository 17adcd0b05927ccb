// A Repo's Secret is sent only when it declares itself a repo credential, and only to the url
// prefixes it lists (api/repo-credential.ts, decision 0046): matched on scheme, host and port, the
// ssh user a prefix names, and whole path segments.
import { credentialPrefixes, prefixCovers, repoCredentialRefusal } from "../../api/repo-credential";
import { repoUrlLocation } from "../../api/repo-identity";
import { REPO_CREDENTIAL_HOSTS_ANNOTATION, REPO_CREDENTIAL_LABEL } from "../../api/wire";

const declared = (hosts: string) => ({
  name: "git-token",
  labels: { [REPO_CREDENTIAL_LABEL]: "true" },
  annotations: { [REPO_CREDENTIAL_HOSTS_ANNOTATION]: hosts },
});

const covers = (prefix: string, url: string) => prefixCovers(repoUrlLocation(prefix), repoUrlLocation(url));

describe("prefixCovers: url prefixes on url boundaries", () => {
  it.each([
    ["https://github.com/org/", "https://github.com/org/app.git"],
    ["https://github.com/org", "https://github.com/org/app"],
    ["https://github.com/", "https://github.com/anyone/anything"],
    ["https://github.com", "https://github.com/org/app"],
    ["https://GitHub.COM/org/", "https://github.com/org/app"],
    ["https://github.com/org/", "https://GITHUB.com/org/app"],
    ["https://github.com:443/org/", "https://github.com/org/app"],
    ["https://github.com/org/app.git", "https://github.com/org/app"],
    ["https://github.com/org/app", "https://github.com/org/app.git"],
    ["https://git.example.com:8443/team/", "https://git.example.com:8443/team/app"],
    ["ssh://git@github.com/org/", "git@github.com:org/app.git"],
    ["ssh://git@github.com/org/", "ssh://git@github.com:22/org/app"],
    ["ssh://github.com/org/", "git@github.com:org/app.git"],
    ["git@github.com:org", "ssh://git@github.com/org/app"],
    ["file:///srv/git/", "/srv/git/app.git"],
  ])("%s covers %s", (prefix, url) => {
    expect(covers(prefix, url)).toBe(true);
  });

  it.each([
    ["https://github.com", "https://github.com.evil/org/app"],
    ["https://github.com/", "https://github.com.evil/"],
    ["https://github.com/org", "https://github.com/organ/app"],
    ["https://github.com/org/", "https://github.com/Org/app"],
    ["https://github.com/org/app", "https://github.com/org/app-private"],
    ["https://github.com/org/", "http://github.com/org/app"],
    ["https://github.com/org/", "ssh://git@github.com/org/app"],
    ["https://github.com/org/", "https://github.com:8443/org/app"],
    ["https://git.example.com:8443/team/", "https://git.example.com/team/app"],
    ["https://github.com/org/", "https://evil.github.com/org/app"],
    ["https://github.com/org/", "https://github.com/"],
    ["ssh://git@github.com/org/", "ssh://deploy@github.com/org/app"],
    ["https://127.0.0.1:1000/", "https://127.0.0.1:10000/app"],
    ["file:///srv/git/", "/srv/gitx/app"],
  ])("%s does not cover %s", (prefix, url) => {
    expect(covers(prefix, url)).toBe(false);
  });

  it("does not let an encoded separator or a climb pass a prefix", () => {
    expect(() => repoUrlLocation("https://github.com/org%2Fapp")).toThrow(/encoded/);
    expect(() => repoUrlLocation("https://github.com/org/../evil/app")).toThrow(/climbs/);
  });
});

describe("credentialPrefixes", () => {
  it("reads a comma-separated list, blanks dropped", () => {
    const { prefixes, errors } = credentialPrefixes(" https://github.com/org/ , ,ssh://git@github.com/org/ ");
    expect(errors).toEqual([]);
    expect(prefixes).toEqual([
      { scheme: "https", host: "github.com", segments: ["org"] },
      { scheme: "ssh", user: "git", host: "github.com", segments: ["org"] },
    ]);
  });

  it("names each entry it cannot read, and refuses a prefix carrying a credential", () => {
    const { errors } = credentialPrefixes(
      "https://github.com/org/,ftp://x/,https://u:p@github.com/,https://u@github.com/",
    );
    expect(errors).toEqual([
      expect.stringMatching(/^entry 2 names the scheme 'ftp'/),
      expect.stringMatching(/^entry 3 carries a user or password/),
      expect.stringMatching(/^entry 4 carries a user or password/),
    ]);
  });
});

describe("repoCredentialRefusal", () => {
  it("sends a declared Secret to a url its prefixes cover", () => {
    expect(
      repoCredentialRefusal(declared("https://github.com/org/"), "https://github.com/org/app.git"),
    ).toBeUndefined();
  });

  it("refuses an undeclared Secret, naming it, the label and the fix", () => {
    for (const labels of [undefined, {}, { [REPO_CREDENTIAL_LABEL]: "yes" }] as Array<
      Record<string, string> | undefined
    >) {
      const why = repoCredentialRefusal({ name: "git-token", labels }, "https://github.com/org/app");
      expect(why).toContain('Secret "git-token" (spec.secretRef.name) is not declared a repo credential');
      expect(why).toContain(`metadata.labels[${REPO_CREDENTIAL_LABEL}]`);
      expect(why).toContain(`${REPO_CREDENTIAL_LABEL}=true`);
      expect(why).toContain(`metadata.annotations[${REPO_CREDENTIAL_HOSTS_ANNOTATION}]`);
    }
  });

  it("refuses a declared Secret that lists no prefix, or a bad one", () => {
    expect(repoCredentialRefusal({ ...declared(""), annotations: {} }, "https://github.com/org/app")).toMatch(
      /lists no url prefix in metadata\.annotations\[jr2\.dev\/repo-credential-hosts\]/,
    );
    expect(repoCredentialRefusal(declared("https://github.com/org/,nonsense"), "https://github.com/org/app")).toMatch(
      /metadata\.annotations\[jr2\.dev\/repo-credential-hosts\] entry 2 .*: write each entry as a url prefix/,
    );
  });

  it("refuses a url outside the prefixes, naming the Secret, the annotation and the fix", () => {
    const why = repoCredentialRefusal(declared("https://github.com/org/"), "https://github.com.evil/org/app.git")!;
    expect(why).toContain("spec.url (https://github.com.evil/org/app) is outside the url prefixes");
    expect(why).toContain('Secret "git-token" (spec.secretRef.name)');
    expect(why).toContain(`${REPO_CREDENTIAL_HOSTS_ANNOTATION}]: "https://github.com/org/"`);
    expect(why).toContain("add a prefix covering the url");
  });
});
