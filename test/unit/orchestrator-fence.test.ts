// The fence: per-run repo urls must fall under a git.credentials entry, by Repo identity prefix.
import { repoKey } from "../../api/repo-identity";
import type { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";
import { WorkspaceRegistry } from "../../orchestrator/workspaces/registry";
import {
  CredentialsFileError,
  entriesFor,
  fence,
  fenceSlots,
  matchCredential,
  parseCredentials,
  prefixOf,
  underPrefix,
} from "../../orchestrator/workspaces/fence";
import { PlaceFailure, type PlaceRequest, type SandboxGateway } from "../../orchestrator/workspaces/sandbox-gateway";

const FILE = `
# the fence's entries
- match: github.com/acme
  secret: jr2-git-push-acme
- https://GitLab.Example.com/team/
- git@git.example.com:platform/tools.git
- match: git.example.com:8443/ops
`;

const entries = parseCredentials(FILE);

describe("the credentials file", () => {
  it("reads strings and {match} objects, keeping the other fields", () => {
    expect(entries.map((e) => e.prefix)).toEqual([
      "github.com/acme",
      "gitlab.example.com/team",
      "git.example.com/platform/tools",
      "git.example.com:8443/ops",
    ]);
    expect(entries[0]).toEqual({
      match: "github.com/acme",
      prefix: "github.com/acme",
      extra: { secret: "jr2-git-push-acme" },
    });
    expect(entries[1]).toEqual({ match: "https://GitLab.Example.com/team/", prefix: "gitlab.example.com/team" });
  });

  it("reads JSON too, and an empty file as no entries", () => {
    expect(parseCredentials('[{"match": "github.com/x"}, "github.com/y"]').map((e) => e.prefix)).toEqual([
      "github.com/x",
      "github.com/y",
    ]);
    expect(parseCredentials("")).toEqual([]);
    expect(parseCredentials("# nothing yet\n")).toEqual([]);
  });

  it.each([
    ["not a list", "match: github.com/x", "expected array"],
    ["an entry without match", "- secret: s", "[0]"],
    ["an empty match", '- match: "  "', "[0].match: must not be empty"],
    ["broken YAML", "- [unclosed", "not YAML"],
    ["a prefix that names no host", "- 'https://'", "[0]"],
  ])("refuses %s, naming where", (_what, text, where) => {
    expect(() => parseCredentials(text)).toThrow(CredentialsFileError);
    expect(() => parseCredentials(text)).toThrow(where);
  });
});

describe("prefixes", () => {
  it("normalise every spelling of one place to one identity prefix", () => {
    for (const spelling of [
      "github.com/acme",
      "github.com/acme/",
      "GitHub.com/acme",
      "https://github.com/acme",
      "https://user:pw@github.com:443/acme/",
      "ssh://git@github.com/acme",
      "git@github.com:acme",
    ]) {
      expect(prefixOf(spelling)).toBe("github.com/acme");
    }
  });

  it("keep a port that is not the default", () => {
    expect(prefixOf("git.example.com:8443/ops")).toBe("git.example.com:8443/ops");
    expect(prefixOf("https://git.example.com:8443/ops")).toBe("git.example.com:8443/ops");
  });

  it("match on a path-segment boundary only", () => {
    expect(underPrefix("github.com/acme/app", "github.com/acme")).toBe(true);
    expect(underPrefix("github.com/acme", "github.com/acme")).toBe(true);
    expect(underPrefix("github.com/acme-evil/app", "github.com/acme")).toBe(false);
    expect(underPrefix("github.com/acmeapp", "github.com/acme")).toBe(false);
    expect(underPrefix("github.com.evil.com/acme/app", "github.com")).toBe(false);
    expect(underPrefix("github.com/x/y", "github.com")).toBe(true);
  });

  it("pick the longest entry that matches", () => {
    const two = parseCredentials("- github.com\n- match: github.com/acme\n  secret: acme\n");
    expect(matchCredential("github.com/acme/app", two)?.match).toBe("github.com/acme");
    expect(matchCredential("github.com/other/app", two)?.match).toBe("github.com");
    expect(matchCredential("gitlab.com/acme/app", two)).toBeUndefined();
  });
});

describe("fence", () => {
  it("admits every spelling of a repo under an entry (https, ssh, scp-like, .git, case of the host)", () => {
    const urls = [
      "https://github.com/acme/app.git",
      "https://GITHUB.com/acme/app",
      "ssh://git@github.com/acme/app.git",
      "git@github.com:acme/app.git",
      "https://token@github.com/acme/app/",
      "https://gitlab.example.com/team/sub/group/repo",
      "git@git.example.com:platform/tools.git",
      "https://git.example.com:8443/ops/deploy",
    ];
    const r = fence(urls, entries);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.repos.map((x) => x.identity)).toEqual([
      "github.com/acme/app",
      "github.com/acme/app",
      "github.com/acme/app",
      "github.com/acme/app",
      "github.com/acme/app",
      "gitlab.example.com/team/sub/group/repo",
      "git.example.com/platform/tools",
      "git.example.com:8443/ops/deploy",
    ]);
    expect(r.repos[0].entry?.match).toBe("github.com/acme");
  });

  /** Why `url` was refused: FenceRefused for its identity, read and matched by no entry (not, say,
   * a url that does not parse). */
  const refusedFor = (url: string) => {
    const r = fence([url], entries);
    return r.ok ? "admitted" : [r.error.reason, r.error.details?.refused];
  };

  it("refuses a neighbour that shares a prefix but not a path segment", () => {
    expect(refusedFor("https://github.com/acme-evil/app")).toEqual([
      "FenceRefused",
      ["url https://github.com/acme-evil/app (identity github.com/acme-evil/app)"],
    ]);
  });

  it("refuses the same path on another port or host", () => {
    expect(refusedFor("https://git.example.com/ops/deploy")).toEqual([
      "FenceRefused",
      ["url https://git.example.com/ops/deploy (identity git.example.com/ops/deploy)"],
    ]);
    expect(refusedFor("https://git.example.com:9443/ops/deploy")).toEqual([
      "FenceRefused",
      ["url https://git.example.com:9443/ops/deploy (identity git.example.com:9443/ops/deploy)"],
    ]);
    expect(refusedFor("https://github.com.evil.io/acme/app")).toEqual([
      "FenceRefused",
      ["url https://github.com.evil.io/acme/app (identity github.com.evil.io/acme/app)"],
    ]);
    expect(refusedFor("git@git.example.com:platform/tools-evil.git")).toEqual([
      "FenceRefused",
      ["url git@git.example.com:platform/tools-evil.git (identity git.example.com/platform/tools-evil)"],
    ]);
  });

  it("refuses with a named failure that lists each refused url and every entry, never a password", () => {
    const r = fence(
      [
        { slot: "app", url: "https://github.com/acme/app" },
        { slot: "evil", url: "https://user:s3cret@evil.example/x/y.git" },
        { slot: "junk", url: "not a url" },
      ],
      entries,
    );
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error).toBeInstanceOf(PlaceFailure);
    expect(r.error.reason).toBe("FenceRefused");
    expect(r.error.stage).toBe("place");
    const m = r.error.message;
    expect(m).toContain('slot "evil" url https://evil.example/x/y.git (identity evil.example/x/y)');
    expect(m).toContain('slot "junk" url not a url');
    expect(m).toContain(
      "entries: github.com/acme, https://GitLab.Example.com/team/, git@git.example.com:platform/tools.git, git.example.com:8443/ops",
    );
    expect(m).not.toContain("s3cret");
    expect(m).not.toContain('slot "app"');
    expect(JSON.stringify(r.error.toJSON())).not.toContain("s3cret");
    expect(r.error.details?.entries).toHaveLength(4);
  });

  it("with no entries refuses every per-run url and says so", () => {
    const r = fence(["https://github.com/acme/app"], []);
    expect(!r.ok && r.error.message).toContain("entries: none");
  });

  it("passes a Machine's bound url without a match", () => {
    const r = fence([{ url: "https://elsewhere.example/lib", bound: true }, "https://github.com/acme/app"], entries);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.repos[0]).toEqual({
      url: "https://elsewhere.example/lib",
      identity: "elsewhere.example/lib",
      bound: true,
    });
  });

  it("admits nothing for nothing", () => {
    expect(fence([], [])).toEqual({ ok: true, repos: [] });
  });
});

describe("the fence reads each url once, with the Repo identity's one rule", () => {
  const acme = parseCredentials("- host/acme/\n- match: /srv/jr2/demo/remotes\n  secret: demo\n");

  it.each([
    "https://host/acme%2F..%2Fevil/x",
    "https://host/acme/..%2Fevil/x",
    "https://host/acme/../evil/x",
    "https://host/acme/%2e%2e/evil/x",
    "git@host:acme/../evil/x",
    "ssh://git@host/acme/%2E%2E/evil/x",
    "file://host/acme/../../tmp",
    // local mode: a path under the demo remotes that climbs out of them
    "/srv/jr2/demo/remotes/demo.git/../../../../../tmp/x",
    "/srv/jr2/demo/remotes/%2E%2E/x",
  ])("refuses %s, which climbs out of its entry, naming why", (url) => {
    const r = fence([{ slot: "app", url }], acme);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.reason).toBe("FenceRefused");
    expect(r.error.message).toMatch(/climbs|encoded '\/'|file url|'%'/);
  });

  it("admits every spelling of one repository under its entry as one identity", () => {
    const r = fence(["https://HOST:443/acme/./app.git", "ssh://git@host/acme/%61pp", "git@host:acme/app"], acme);
    expect(r.ok && r.repos.map((x) => x.identity)).toEqual(["host/acme/app", "host/acme/app", "host/acme/app"]);
  });

  it.each([
    "https://user:pa@ss@evil.example/x",
    "user:pa@ss@evil.example:x/y",
    "https://user:pa@ss@host/acme/../x",
    "ssh://git:pa@ss@evil.example/x",
  ])("never echoes the userinfo of %s in its refusal", (url) => {
    const r = fence([{ slot: "s", url }], acme);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    const said = JSON.stringify(r.error.toJSON());
    expect(said).not.toContain("pa@ss");
    expect(said).not.toMatch(/[^*]ss@/);
  });

  it("fenceSlots hands over each slot's identity, key and entry, so the gateway recomputes nothing", () => {
    const r = fenceSlots([{ slot: "demo", url: "/srv/jr2/demo/remotes/demo.git", ref: "main" }], acme);
    expect(r).toEqual({
      ok: true,
      repos: [
        {
          slot: "demo",
          url: "/srv/jr2/demo/remotes/demo.git",
          ref: "main",
          identity: "srv/jr2/demo/remotes/demo",
          key: repoKey("srv/jr2/demo/remotes/demo"),
          bound: false,
          entry: acme[1],
        },
      ],
    });
    const refused = fenceSlots([{ slot: "x", url: "https://elsewhere.example/x" }], acme);
    expect(!refused.ok && refused.error.reason).toBe("FenceRefused");
  });
});

describe("a create fences once, before anything is written, and hands the gateway what it fenced", () => {
  const acme = parseCredentials("- match: host/acme\n  secret: push-acme\n");
  /** A gateway that records the place request and never answers (the actor waits in `placing`). */
  const recordingGateway = () => {
    const placed: PlaceRequest[] = [];
    const never = () => new Promise<never>(() => undefined);
    const gateway = {
      place: (req: PlaceRequest) => (placed.push(req), never()),
      provision: never,
      attach: never,
      renew: async () => undefined,
      continuity: async () => ({ kind: "present" as const }),
      destroy: async () => undefined,
    } as unknown as SandboxGateway;
    return { gateway, placed };
  };
  const registry = (gateway: SandboxGateway) =>
    new WorkspaceRegistry({ gateway, watch: {} as unknown as SandboxWatch, credentials: acme });

  it("the gateway gets the fenced repos and the attach body built once from them", async () => {
    const { gateway, placed } = recordingGateway();
    const reg = registry(gateway);
    await reg.create({ image: "h", branch: "feat", repos: [{ slot: "app", url: "https://host/acme/app.git" }] });
    reg.stop();
    expect(placed).toHaveLength(1);
    const [req] = placed;
    expect(req.repos).toEqual([
      {
        slot: "app",
        url: "https://host/acme/app.git",
        identity: "host/acme/app",
        key: repoKey("host/acme/app"),
        bound: false,
        entry: acme[0],
      },
    ]);
    expect(req.attach).toEqual({
      branch: "feat",
      slots: [
        { slot: "app", url: "https://host/acme/app.git", identity: "host/acme/app", key: repoKey("host/acme/app") },
      ],
    });
  });

  it("a refusal is a 403 before the gateway hears anything, and names no password", async () => {
    const { gateway, placed } = recordingGateway();
    const reg = registry(gateway);
    const create = reg.create({
      image: "h",
      branch: "feat",
      repos: [{ slot: "app", url: "https://user:hunter2@host/acme%2F..%2Fevil/x" }],
    });
    await expect(create).rejects.toMatchObject({ status: 403, code: "fence_refused" });
    await expect(create).rejects.not.toThrow(/hunter2/);
    reg.stop();
    expect(placed).toHaveLength(0);
  });
});

// Decision 0048: an entry may name the tenants allowed to use it; another tenant's url under it is refused.
describe("an entry restricted to tenants", () => {
  const file = `
- match: host/acme/private
  secret: push-private
  tenants: [team-a]
- match: host/shared
  secret: push-shared
- match: host/acme
  secret: push-acme-wide
`;
  const restricted = parseCredentials(file);
  const url = "https://host/acme/private/app.git";

  it("is read with its tenants apart from the fields kept for others", () => {
    expect(restricted[0]).toEqual({
      match: "host/acme/private",
      prefix: "host/acme/private",
      tenants: ["team-a"],
      extra: { secret: "push-private" },
    });
    expect(restricted[1]).not.toHaveProperty("tenants");
    expect(entriesFor(restricted, "team-b").map((e) => e.match)).toEqual(["host/shared", "host/acme"]);
    expect(entriesFor(restricted, undefined)).toEqual(restricted);
  });

  it.each([
    ["not a list", "- match: host/x\n  tenants: team-a", "[0].tenants"],
    ["an empty list", "- match: host/x\n  tenants: []", "at least one tenant"],
    ["a name that is no tenant's", "- match: host/x\n  tenants: [Team_A]", "a tenant's name"],
  ])("refuses tenants that are %s, naming where", (_what, text, where) => {
    expect(() => parseCredentials(text)).toThrow(CredentialsFileError);
    expect(() => parseCredentials(text)).toThrow(where);
  });

  it("admits its tenant and an admin, and refuses another tenant as for a url no entry admits, a broader entry notwithstanding", () => {
    const slot = [{ slot: "app", url }];
    expect(fenceSlots(slot, restricted, "team-a")).toMatchObject({ ok: true, repos: [{ entry: restricted[0] }] });
    expect(fenceSlots(slot, restricted)).toMatchObject({ ok: true, repos: [{ entry: restricted[0] }] });
    const refused = fenceSlots(slot, restricted, "team-b");
    expect(refused.ok).toBe(false);
    const unknown = fenceSlots([{ slot: "app", url: "https://elsewhere/nobody/app.git" }], restricted, "team-b");
    const message = (r: typeof refused) => (r.ok ? "" : r.error.message);
    // The same refusal as for a url nothing admits: the restricted entry is neither matched nor named.
    expect(message(refused)).toBe(message(unknown).replaceAll("elsewhere/nobody/app", "host/acme/private/app"));
    expect(message(refused)).not.toContain("host/acme/private (");
    expect(message(refused)).toContain("(entries: host/shared, host/acme)");
    // A url of its own under the broader entry still passes.
    expect(fenceSlots([{ slot: "app", url: "https://host/acme/app.git" }], restricted, "team-b")).toMatchObject({
      ok: true,
      repos: [{ entry: restricted[2] }],
    });
  });

  it("is refused to another tenant's create before the gateway hears anything", async () => {
    const placed: PlaceRequest[] = [];
    const never = () => new Promise<never>(() => undefined);
    const gateway = {
      place: (req: PlaceRequest) => (placed.push(req), never()),
      provision: never,
      attach: never,
      renew: async () => undefined,
      continuity: async () => ({ kind: "present" as const }),
      destroy: async () => undefined,
    } as unknown as SandboxGateway;
    const reg = new WorkspaceRegistry({ gateway, watch: {} as unknown as SandboxWatch, credentials: restricted });
    const body = { image: "h", branch: "feat", repos: [{ slot: "app", url }] };
    await expect(reg.create(body, "team-b")).rejects.toMatchObject({ status: 403, code: "fence_refused" });
    expect(placed).toHaveLength(0);
    await reg.create(body, "team-a");
    reg.stop();
    expect(placed.map((p) => p.repos[0]?.entry?.match)).toEqual(["host/acme/private"]);
  });
});
