import { RepoUrlError, redact, repoIdentity, repoKey } from "../../api/repo-identity";

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

describe("redact", () => {
  it("takes the user and password out of a url", () => {
    expect(redact("https://user:secret@example.com/a")).toBe("https://example.com/a");
    expect(redact("https://example.com/a")).toBe("https://example.com/a");
  });
});
