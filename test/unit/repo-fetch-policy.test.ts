// What a node may fetch for a Repo, and what one namespace may cache (decision 0066): the url
// rule admission and the cache agents share, git's protocol allowlist, the internal-address rule
// with the installation's vouched hosts, the bounds' parsing, and the built manifests' switches.
import {
  DEFAULT_CACHE_BOUNDS,
  cacheBoundsFrom,
  gitProtocolConfig,
  internalAddressRefusal,
  isLocalRepoUrl,
  localRepoRootsFrom,
  localUrlRefusal,
  parseBytes,
  remoteEndpoint,
  vouchedHostsFrom,
} from "../../api/repo-fetch-policy";
import { LOCAL_REPO_ROOTS_ENV } from "../../api/env";
import { networkCommand } from "../../cache-agent/bare-checkouts";
import { cacheAgentManifests } from "../../cache-agent/cache-agent-manifests";
import { egressManifests } from "../../egress/egress-manifests";
import { orchestratorManifests } from "../../orchestrator/orchestrator-manifests";

describe("local urls", () => {
  const LOCAL = [
    "/var/lib/jr2/repos/team-a/app-0123456789",
    "file:///var/lib/jr2/repos/team-a/app-0123456789",
    "FILE:///srv/git/app.git",
    "git+file:///srv/git/app.git",
    "file://host/srv/git/app.git", // unreadable (git ignores the host), still local
    "/tmp/x/../../var/lib/jr2", // climbs: unreadable, still local
  ];
  const NETWORK = [
    "https://github.com/org/app.git",
    "http://git.example.com/app",
    "ssh://git@github.com/org/app.git",
    "git@github.com:org/app.git",
    "git://git.example.com/app.git",
    "file:/srv/app.git", // git reads this as ssh to a host named "file"
  ];

  it("calls paths and file urls local, and network urls not", () => {
    for (const u of LOCAL) expect([u, isLocalRepoUrl(u)]).toEqual([u, true]);
    for (const u of NETWORK) expect([u, isLocalRepoUrl(u)]).toEqual([u, false]);
  });

  it("refuses every local url outside local mode, with the fix and never the url", () => {
    for (const u of LOCAL) {
      const why = localUrlRefusal(u, undefined);
      expect(why).toContain("is a local path");
      expect(why).toContain("give the repository's network url");
      expect(why).not.toContain("/var/lib");
    }
    for (const u of NETWORK) expect(localUrlRefusal(u, undefined)).toBeUndefined();
  });

  it("in local mode, admits a path under one of its roots by whole segments, and nothing else", () => {
    const roots = ["/tmp", "/home/dev/remotes"];
    expect(localUrlRefusal("/tmp/jr2-caches-1/remote/widgets.git", roots)).toBeUndefined();
    expect(localUrlRefusal("file:///home/dev/remotes/demo.git", roots)).toBeUndefined();
    expect(localUrlRefusal("/var/lib/jr2/repos/team-a/app-0123456789", roots)).toContain(
      "outside the local mode's roots",
    );
    expect(localUrlRefusal("/tmpfoo/app.git", roots)).toContain("outside the local mode's roots");
    expect(localUrlRefusal("/tmp/x/../../var/lib/jr2/repos/a/b", roots)).toContain("outside the local mode's roots");
    expect(localUrlRefusal("/home/dev/remotes-evil/app.git", roots)).toContain("outside the local mode's roots");
  });

  it("reads the local mode's roots: unset is a cluster (none), a relative entry is refused", () => {
    expect(localRepoRootsFrom({})).toBeUndefined();
    expect(localRepoRootsFrom({ [LOCAL_REPO_ROOTS_ENV]: " " })).toBeUndefined();
    expect(localRepoRootsFrom({ [LOCAL_REPO_ROOTS_ENV]: "/tmp, /srv/git" })).toEqual(["/tmp", "/srv/git"]);
    expect(() => localRepoRootsFrom({ [LOCAL_REPO_ROOTS_ENV]: "tmp" })).toThrow(
      `${LOCAL_REPO_ROOTS_ENV}[0]: "tmp" is not an absolute path`,
    );
  });
});

describe("git's protocols", () => {
  it("refuses every protocol but the network remotes', file:// only when local mode admits the url", () => {
    expect(gitProtocolConfig()).toEqual([
      "-c",
      "protocol.allow=never",
      "-c",
      "protocol.https.allow=always",
      "-c",
      "protocol.http.allow=always",
      "-c",
      "protocol.ssh.allow=always",
      "-c",
      "protocol.git.allow=always",
      "-c",
      "protocol.file.allow=never",
    ]);
    expect(gitProtocolConfig(true)).toContain("protocol.file.allow=always");
    for (const helper of ["ext", "fd"]) expect(gitProtocolConfig(true).join(" ")).not.toContain(`protocol.${helper}.`);
  });

  it("connects to the judged address: curl's resolve for http(s), the url for git://, no redirect", () => {
    const https = networkCommand("https://git.example.com/app.git", {
      pin: { scheme: "https", host: "git.example.com", port: 443, address: "203.0.113.7" },
    });
    expect(https.url).toBe("https://git.example.com/app.git");
    expect(https.config).toContain("http.curloptResolve=git.example.com:443:203.0.113.7");
    expect(https.config).toContain("http.followRedirects=false");
    const v6 = networkCommand("http://git.example.com/app.git", {
      pin: { scheme: "http", host: "git.example.com", port: 80, address: "2001:db8::7" },
    });
    expect(v6.config).toContain("http.curloptResolve=git.example.com:80:[2001:db8::7]");
    const daemon = networkCommand("git://git.example.com:9000/app.git", {
      pin: { scheme: "git", host: "git.example.com", port: 9000, address: "203.0.113.7" },
    });
    expect(daemon.url).toBe("git://203.0.113.7:9000/app.git");
    expect(networkCommand("https://203.0.113.7/app.git", {}).config).toContain("protocol.file.allow=never");
  });
});

describe("internal addresses", () => {
  const vouched = vouchedHostsFrom({ JR2_CACHE_VOUCHED_HOSTS: "git.corp.internal, 10.244.255.1:9418" });

  it("reads the host and port git reaches", () => {
    expect(remoteEndpoint("https://GitHub.com/org/app.git")).toEqual({
      scheme: "https",
      host: "github.com",
      port: 443,
    });
    expect(remoteEndpoint("git@github.com:org/app.git")).toEqual({ scheme: "ssh", host: "github.com", port: 22 });
    expect(remoteEndpoint("git://10.244.255.1:9418/w.git")).toEqual({
      scheme: "git",
      host: "10.244.255.1",
      port: 9418,
    });
    expect(remoteEndpoint("http://[fd00::1]:8080/w.git")).toEqual({ scheme: "http", host: "fd00::1", port: 8080 });
  });

  it("refuses a host with any internal address unless the installation vouches for it (host and port)", () => {
    const at = (url: string) => remoteEndpoint(url);
    expect(internalAddressRefusal(at("https://github.com/a/b"), ["140.82.112.3"], vouched)).toBeUndefined();
    const metadata = internalAddressRefusal(at("http://evil.example/a"), ["169.254.169.254"], vouched);
    expect(metadata).toContain("evil.example:80, which resolves to an internal address (169.254.169.254)");
    expect(metadata).toContain("JR2_CACHE_VOUCHED_HOSTS");
    // One internal answer among public ones is enough: no resolver's order decides.
    expect(internalAddressRefusal(at("https://mixed.example/a"), ["140.82.112.3", "10.0.0.5"], vouched)).toBeDefined();
    expect(internalAddressRefusal(at("https://git.corp.internal/a"), ["10.1.2.3"], vouched)).toBeUndefined();
    expect(internalAddressRefusal(at("git://10.244.255.1/w.git"), ["10.244.255.1"], vouched)).toBeUndefined();
    // The vouch names a port: another port of the same address is not vouched for.
    expect(internalAddressRefusal(at("http://10.244.255.1:8080/w.git"), ["10.244.255.1"], vouched)).toBeDefined();
    expect(internalAddressRefusal(at("ssh://git@127.0.0.1/w.git"), ["127.0.0.1"], [])).toContain("127.0.0.1:22");
  });

  it("takes only exact hosts as vouched, naming the entry and the fix", () => {
    expect(() => vouchedHostsFrom({ JR2_CACHE_VOUCHED_HOSTS: "*.corp.internal" })).toThrow(
      'JR2_CACHE_VOUCHED_HOSTS[0]: "*.corp.internal" is a wildcard',
    );
    expect(() => vouchedHostsFrom({ JR2_CACHE_VOUCHED_HOSTS: "a.b, https://x/" })).toThrow(
      "JR2_CACHE_VOUCHED_HOSTS[1]",
    );
    expect(vouchedHostsFrom({})).toEqual([]);
  });
});

describe("what one namespace may cache", () => {
  it("reads the bounds, defaults when unset, and refuses what is no count or quantity", () => {
    expect(cacheBoundsFrom({})).toEqual(DEFAULT_CACHE_BOUNDS);
    expect(cacheBoundsFrom({ JR2_CACHE_MAX_REPOS: "3", JR2_CACHE_MAX_BYTES: "1Mi" })).toEqual({
      maxRepos: 3,
      maxBytes: 2 ** 20,
    });
    expect(parseBytes("10Gi")).toBe(10 * 2 ** 30);
    expect(parseBytes("500M")).toBe(500e6);
    expect(parseBytes("1.5Gi")).toBeUndefined();
    expect(() => cacheBoundsFrom({ JR2_CACHE_MAX_REPOS: "0" })).toThrow("JR2_CACHE_MAX_REPOS=0");
    expect(() => cacheBoundsFrom({ JR2_CACHE_MAX_BYTES: "lots" })).toThrow("JR2_CACHE_MAX_BYTES=lots");
  });
});

describe("the built manifests", () => {
  const all = () => [
    ...cacheAgentManifests({ image: "i", sandboxNamespaces: ["team-a", "team-b"], vouchedHosts: ["git.corp:9418"] }),
    ...orchestratorManifests({ image: "i" }),
    ...egressManifests({ image: "i", sandboxNamespaces: ["team-a"] }),
  ];

  it("never carry the local mode's switch", () => {
    expect(JSON.stringify(all())).not.toContain(LOCAL_REPO_ROOTS_ENV);
  });

  it("give the cache agent the opted-in namespaces and the vouched hosts, and no read of Namespaces", () => {
    const objs = cacheAgentManifests({
      image: "i",
      sandboxNamespaces: ["team-a", "team-b"],
      vouchedHosts: ["git.corp:9418"],
    });
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const ds = objs.find((o) => o.kind === "DaemonSet") as any;
    const env = Object.fromEntries(
      (ds.spec.template.spec.containers[0].env as Array<{ name: string; value?: string }>).map((e) => [
        e.name,
        e.value,
      ]),
    );
    expect(env.JR2_SANDBOX_NAMESPACES).toBe("team-a,team-b");
    expect(env.JR2_CACHE_VOUCHED_HOSTS).toBe("git.corp:9418");
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const role = objs.find((o) => o.kind === "ClusterRole") as any;
    expect(JSON.stringify(role.rules)).not.toContain("namespaces");
  });
});
