import { RepoUrlError, checkRepoUrl, readRepoUrl, repoIdentity, repoKey } from "../../api/repo-identity";
import { redact, urlWithoutCredentials } from "../../lib/redact";
import { repoStatusOf } from "../../capabilities/repo/repo-controller";

describe("repoIdentity: every spelling of one repository is one identity", () => {
  const same = [
    "https://github.com/org/repo",
    "https://github.com/org/repo.git",
    "https://github.com/org/repo/",
    "https://github.com/org/repo.git/",
    "https://user:secret@github.com/org/repo.git",
    "https://x-access-token:ghs_abc@github.com/org/repo",
    "https://GitHub.com/org/repo",
    "https://github.com:443/org/repo",
    "http://github.com/org/repo",
    "git@github.com:org/repo.git",
    "git@github.com:org/repo",
    "github.com:org/repo.git",
    "ssh://git@github.com/org/repo.git",
    "ssh://git@github.com:22/org/repo",
    "git+ssh://git@github.com/org/repo.git",
    "git://github.com/org/repo.git",
    "  https://github.com//org//repo.git  ",
  ];
  it.each(same)("%s -> github.com/org/repo", (url) => {
    expect(repoIdentity(url)).toBe("github.com/org/repo");
  });

  it("keeps a port that is not the scheme's default", () => {
    expect(repoIdentity("ssh://git@git.example.com:2222/team/app.git")).toBe("git.example.com:2222/team/app");
    expect(repoIdentity("https://git.example.com:8443/team/app")).toBe("git.example.com:8443/team/app");
  });

  it("keeps nested groups (GitLab subgroups)", () => {
    expect(repoIdentity("https://gitlab.com/a/b/c/app.git")).toBe("gitlab.com/a/b/c/app");
    expect(repoIdentity("git@gitlab.com:a/b/c/app.git")).toBe("gitlab.com/a/b/c/app");
  });

  it("keeps the path's case (only the host is case-insensitive)", () => {
    expect(repoIdentity("https://example.com/Org/Repo")).toBe("example.com/Org/Repo");
  });

  it("gives a local path, with or without file://, its path as identity", () => {
    expect(repoIdentity("/srv/git/app.git")).toBe("srv/git/app");
    expect(repoIdentity("file:///srv/git/app.git")).toBe("srv/git/app");
    expect(repoIdentity("/srv/git/app/")).toBe("srv/git/app");
  });

  it("tells different repositories apart", () => {
    expect(repoIdentity("https://github.com/org/a")).not.toBe(repoIdentity("https://github.com/org/b"));
    expect(repoIdentity("https://github.com/org/a")).not.toBe(repoIdentity("https://gitlab.com/org/a"));
  });

  it.each(["", "   ", "not a url", "https://", "ftp//broken"])("refuses %j with a RepoUrlError", (url) => {
    expect(() => repoIdentity(url)).toThrow(RepoUrlError);
  });

  it("never puts a password in its error", () => {
    expect(() => repoIdentity("https://user:hunter2@[bad")).toThrow(/^(?!.*hunter2)/);
  });
});

describe("repoKey", () => {
  it("is stable and the same for every spelling", () => {
    const a = repoKey(repoIdentity("git@github.com:org/my_repo.git"));
    expect(repoKey(repoIdentity("https://github.com/org/my_repo"))).toBe(a);
    expect(a).toMatch(/^my-repo-[0-9a-f]{10}$/);
  });

  it("is a DNS label that leaves room for the repo- prefix", () => {
    const long = repoKey(repoIdentity(`https://example.com/org/${"Very.Long_Name-".repeat(10)}`));
    expect(long.length).toBeLessThanOrEqual(51);
    expect(`repo-${long}`).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  });

  it("differs for repositories that share a last segment", () => {
    expect(repoKey("github.com/a/app")).not.toBe(repoKey("github.com/b/app"));
  });

  it("falls back to a generic name when the path has no letters or digits", () => {
    expect(repoKey("example.com/___")).toMatch(/^repo-[0-9a-f]{10}$/);
  });
});

describe("urlWithoutCredentials (lib/redact.ts; api/repo-identity.ts's redact was this)", () => {
  it("takes the user and password out of a url", () => {
    expect(urlWithoutCredentials("https://user:secret@example.com/a")).toBe("https://example.com/a");
    expect(urlWithoutCredentials("https://example.com/a")).toBe("https://example.com/a");
  });
});

// ---------------------------------------------------------------------------------------------
// One reading of a url: decoded once, dot segments refused, credentials asked about at the edge.

describe("repoIdentity: a url is decoded and normalised once", () => {
  it.each([
    ["https://host/acme/./app", "host/acme/app"],
    ["https://HOST:443/acme/%41pp.git", "host/acme/App"],
    ["https://h%4Fst/acme/app", "host/acme/app"],
    ["ssh://git@Host:22/acme/app", "host/acme/app"],
    ["ssh://git@host/acme/my%20app", "host/acme/my app"],
    ["file:///srv/git/./app.git", "srv/git/app"],
    ["file:///srv/git/%61pp.git", "srv/git/app"],
    ["git@host:./acme/app.git", "host/acme/app"],
    ["https://[::1]:8443/acme/app", "[::1]:8443/acme/app"],
    ["/home/me/My Projects/app.git", "home/me/My Projects/app"],
  ])("%s -> %s", (url, identity) => {
    expect(repoIdentity(url)).toBe(identity);
  });
});

describe("repoIdentity refuses a url whose path climbs, naming the problem and the fix", () => {
  it.each([
    ["an encoded '/' around '..'", "https://host/acme%2F..%2Fevil/x", /encoded '\/'.*write '\/'/],
    ["'..' then an encoded '/'", "https://host/acme/..%2Fevil/x", /encoded '\/'/],
    ["an encoded '\\'", "https://host/acme/..%5Cevil/x", /encoded '\/' or '\\'/],
    ["a plain '..'", "https://host/acme/../evil/x", /climbs with a '\.\.' segment.*without '\.\.'/],
    ["an encoded '..'", "https://host/acme/%2e%2E/evil/x", /climbs/],
    ["'..' in an ssh url", "ssh://git@host/acme/%2E%2E/evil", /climbs/],
    ["'..' in an scp-like address", "git@host:acme/../evil/x", /climbs/],
    ["'..' in a file url with a host", "file://host/acme/../../tmp", /file url.*file:\/\/\//],
    ["'..' in a file url", "file:///srv/acme/../../tmp", /climbs/],
    ["'..' in a local path", "/work/.jr2/demo/remotes/demo.git/../../../../etc", /climbs/],
  ])("%s: %s", (_what, url, message) => {
    expect(() => repoIdentity(url)).toThrow(RepoUrlError);
    expect(() => repoIdentity(url)).toThrow(message);
  });
});

describe("repoIdentity refuses what git would read otherwise than the identity says", () => {
  it.each([
    ["a file url's host, which git ignores", "file://evil/srv/git/app", /names a host in a file url/],
    ["a '%' in a local path, which git reads literally", "/srv/remote%73/app", /'%'.*literally/],
    ["a '%' in an scp-like address", "git@host:acme/%61pp", /'%'/],
    ["a malformed escape", "https://host/acme/%zz", /malformed percent-escape.*%25/],
    ["an encoded control character", "https://host/acme/a%00b", /control character/],
    ["a backslash (curl and the URL parser disagree on it)", "https://github.com\\@evil.com/acme/x", /'\\'/],
    ["a query", "https://host/acme/app?private_token=x", /query or a fragment/],
    ["a fragment", "https://host/acme/app#x", /query or a fragment/],
    ["a remote helper", "ext::sh", /remote helper/],
    ["another scheme", "ftp://host/acme/app", /scheme 'ftp'/],
    ["a host like an option", "ssh://-oProxyCommand=x/acme", /starting with '-'/],
    ["whitespace", "https://host/acme/my app", /whitespace.*%20/],
    ["a control character", "https://host/acme/a\nb", /control character/],
    ["a port out of range", "https://host:70000/acme/app", /port/],
  ])("%s: %j", (_what, url, message) => {
    expect(() => repoIdentity(url)).toThrow(message);
  });

  it("never quotes the url in a refusal", () => {
    for (const url of [
      "https://user:hunter2@host/acme/../x",
      "user:hunter2@host:acme/%zz",
      "https://user:hunter2@[bad",
    ]) {
      expect(() => repoIdentity(url)).toThrow(RepoUrlError);
      try {
        repoIdentity(url);
      } catch (err) {
        expect((err as Error).message).not.toContain("hunter2");
        expect((err as Error).message).not.toContain("user");
      }
    }
  });
});

describe("checkRepoUrl: the edges refuse a url that carries a credential", () => {
  it.each([
    ["a password", "https://user:hunter2@host/acme/app", /carries a password.*remove them from the url.*Secret/],
    ["a token with a user", "https://x-access-token:hunter2@host/acme/app", /carries a password/],
    ["a bare token as user", "https://hunter2@host/acme/app", /carries a user.*token.*Secret/],
    ["an http user", "http://hunter2@host/acme/app", /carries a user/],
    ["an ssh password", "ssh://git:hunter2@host/acme/app", /carries a password/],
    ["an scp-like password", "git:hunter2@host:acme/app", /carries a password/],
    ["an empty password", "https://user:@host/acme/app", /carries a password/],
  ])("%s: refused, the password never echoed", (_what, url, message) => {
    expect(() => checkRepoUrl(url)).toThrow(message);
    expect(() => checkRepoUrl(url)).not.toThrow(/hunter2/);
    // The identity is still one repository: the credential is the problem, not the spelling.
    expect(readRepoUrl(url).identity).toBe("host/acme/app");
  });

  it.each([
    "git@host:acme/app",
    "ssh://git@host/acme/app",
    "git://host/acme/app",
    "https://host/acme/app",
    "/srv/acme/app",
  ])("accepts %s (an ssh user is no credential)", (url) => {
    expect(() => checkRepoUrl(url)).not.toThrow();
  });

  it("says which credential a url carries", () => {
    expect(readRepoUrl("git@host:a/b").credentials).toBe("user");
    expect(readRepoUrl("https://host/a/b").credentials).toBe("none");
    expect(readRepoUrl("https://t@host/a/b").credentials).toBe("token");
    expect(readRepoUrl("ssh://git:p@host/a/b").credentials).toBe("password");
  });
});

describe("the Repo controller's status for a url it refuses", () => {
  it("writes the error with the fix, no identity or key, and never the password", () => {
    const status = repoStatusOf("https://user:hunter2@host/acme/app", { identity: "old", key: "old-1", nodes: {} });
    expect(status.identity).toBeUndefined();
    expect(status.key).toBeUndefined();
    expect(status.error).toMatch(/^spec\.url carries a password.*remove them from the url/);
    expect(JSON.stringify(status)).not.toContain("hunter2");
    expect(repoStatusOf("https://host/acme/../evil", undefined).error).toMatch(/^spec\.url climbs/);
  });

  it("writes identity and key for a good url, and takes a former error away", () => {
    const status = repoStatusOf("https://host/acme/app", {
      error: "spec.url climbs",
      nodes: { n: { phase: "Present" } },
    });
    expect(status).toEqual({
      identity: "host/acme/app",
      key: repoKey("host/acme/app"),
      present: 1,
      nodes: { n: { phase: "Present" } },
      error: undefined,
    });
  });
});

describe("redact (lib/redact.ts, the one redaction)", () => {
  it.each([
    ["a password holding '@'", "https://user:pa@ss@evil/x", "https://***@evil/x"],
    ["an scp-like password", "clone 'git:hunter2@evil:x/y' failed", "clone '***@evil:x/y' failed"],
    ["a token", "https://hunter2@h/x", "https://***@h/x"],
  ])("%s", (_what, text, expected) => {
    expect(redact(text)).toBe(expected);
  });

  it("urlWithoutCredentials keeps an scp user, never its password", () => {
    expect(urlWithoutCredentials("git:hunter2@evil:x/y")).toBe("git@evil:x/y");
    expect(urlWithoutCredentials("https://u:pa@ss@h/x")).toBe("https://h/x");
    expect(urlWithoutCredentials("git@h:x/y")).toBe("git@h:x/y");
  });
});
