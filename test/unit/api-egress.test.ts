// The egress list's words (api/egress-point.ts, docs/decisions/0051): rule syntax and its refusals, the
// matcher (case, trailing dot, IDN, wildcard depth, IP literals, ports), the base list from a pod
// config, the rules of git remotes, and which addresses are internal.
import {
  EgressAllowList,
  EGRESS_LIST_MAX,
  baseListOf,
  egressLogPath,
  NO_RANGES,
  addressKind,
  addressRangesOf,
  isInternalAddress,
  matchEgress,
  parseCidr,
  normaliseHost,
  parseEgressRule,
  repoRulesOf,
  type EgressRule,
} from "../../api/egress-point";

const rule = (text: string): EgressRule => {
  const p = parseEgressRule(text);
  if (!p.ok) throw new Error(`${text}: ${p.message}`);
  return p.rule;
};
const refusal = (text: string) => {
  const p = parseEgressRule(text);
  if (p.ok) throw new Error(`${text} parsed as ${p.rule.text}`);
  return p.message;
};
const matches = (rules: string[], host: string, port: number) => matchEgress(rules.map(rule), host, port)?.text;

describe("parseEgressRule", () => {
  it.each([
    ["api.example.com", "host", "api.example.com", undefined],
    ["API.Example.COM.:443", "host", "api.example.com", 443],
    ["*.example.com", "wildcard", "example.com", undefined],
    ["*.Example.com:8443", "wildcard", "example.com", 8443],
    ["203.0.113.7", "ip", "203.0.113.7", undefined],
    ["203.0.113.7:22", "ip", "203.0.113.7", 22],
    ["[2001:DB8::1]", "ip", "2001:db8::1", undefined],
    ["[2001:db8:0:0::1]:443", "ip", "2001:db8::1", 443],
    ["bücher.example", "host", "xn--bcher-kva.example", undefined],
    ["*.bücher.example:443", "wildcard", "xn--bcher-kva.example", 443],
  ])("%s is a %s rule for %s port %s", (text, kind, host, port) => {
    const r = rule(text);
    expect([r.kind, r.host, r.port]).toEqual([kind, host, port]);
  });

  it("writes each rule canonically", () => {
    expect(rule("API.Example.COM.:443").text).toBe("api.example.com:443");
    expect(rule("[2001:db8:0:0::1]:443").text).toBe("[2001:db8::1]:443");
    expect(rule("*.bücher.example").text).toBe("*.xn--bcher-kva.example");
  });

  it.each([
    ["", /is empty/],
    ["*", /every host.*\*\.example\.com:443/],
    ["*.com", /top-level domain.*\*\.example\.com/],
    ["a.*.example.com", /wildcard is only a whole first label/],
    ["foo*.example.com", /wildcard is only a whole first label/],
    ["https://api.example.com", /no scheme, path or user/],
    ["api.example.com/v1", /no scheme, path or user/],
    ["user@api.example.com", /no scheme, path or user/],
    ["api.example.com:0", /no port from 1 to 65535/],
    ["api.example.com:65536", /no port from 1 to 65535/],
    ["api.example.com:https", /no port from 1 to 65535/],
    ["2001:db8::1", /written in brackets, e.g. \[2001:db8::1\]:443/],
    ["[not-v6]:443", /is not an IPv6 literal/],
    ["1.2.3", /not a host name or an IP literal/],
    ["256.1.1.1", /not a host name or an IP literal/],
    ["-bad-.example.com", /not a host name/],
    ["a b", /no scheme, path or user/],
  ])("refuses %j, naming the fix", (text, why) => {
    const m = refusal(text);
    expect(m).toMatch(why);
    expect(m).toMatch(/host, host:port, \*\.example\.com:443/);
  });
});

describe("matchEgress", () => {
  it("compares case-insensitively, ignoring a trailing dot, on either side", () => {
    expect(matches(["api.example.com"], "API.EXAMPLE.com.", 443)).toBe("api.example.com");
    expect(matches(["Api.Example.Com."], "api.example.com", 443)).toBe("api.example.com");
  });

  it("matches an IDN by its punycode, whichever way either is written", () => {
    expect(matches(["bücher.example"], "xn--bcher-kva.example", 443)).toBe("xn--bcher-kva.example");
    expect(matches(["xn--bcher-kva.example"], "BÜCHER.example", 443)).toBe("xn--bcher-kva.example");
    expect(matches(["bücher.example"], "bucher.example", 443)).toBeUndefined();
  });

  it("a wildcard matches one or more labels below its domain, never the domain itself", () => {
    expect(matches(["*.example.com"], "a.example.com", 443)).toBe("*.example.com");
    expect(matches(["*.example.com"], "a.b.c.example.com", 443)).toBe("*.example.com");
    expect(matches(["*.example.com"], "example.com", 443)).toBeUndefined();
    expect(matches(["*.example.com"], "badexample.com", 443)).toBeUndefined();
    expect(matches(["*.example.com"], "example.com.evil.test", 443)).toBeUndefined();
  });

  it("an exact host matches that host only, not its subdomains", () => {
    expect(matches(["example.com"], "a.example.com", 443)).toBeUndefined();
    expect(matches(["example.com"], "example.com", 443)).toBe("example.com");
  });

  it("honours the port: a rule without one admits any, a rule with one only that one", () => {
    expect(matches(["api.example.com"], "api.example.com", 22)).toBe("api.example.com");
    expect(matches(["api.example.com:443"], "api.example.com", 80)).toBeUndefined();
    expect(matches(["*.example.com:443"], "a.example.com", 8443)).toBeUndefined();
    expect(matches(["api.example.com:80", "api.example.com:443"], "api.example.com", 443)).toBe("api.example.com:443");
  });

  it("matches an IP literal only by a rule naming that literal", () => {
    expect(matches(["203.0.113.7"], "203.0.113.7", 443)).toBe("203.0.113.7");
    expect(matches(["203.0.113.7:443"], "203.0.113.7", 22)).toBeUndefined();
    expect(matches(["*.example.com", "api.example.com"], "203.0.113.7", 443)).toBeUndefined();
    expect(matches(["[2001:db8::1]"], "[2001:DB8:0::1]", 443)).toBe("[2001:db8::1]");
    expect(matches(["[2001:db8::1]"], "2001:db8::1", 443)).toBe("[2001:db8::1]");
    expect(matches(["203.0.113.7"], "[::ffff:203.0.113.7]", 443)).toBe("203.0.113.7");
    // A dotted quad in a name's rule is no name: a host named 7.113.0.203.example.com is not the IP.
    expect(matches(["*.0.203.example.com"], "203.0.113.7", 443)).toBeUndefined();
  });

  it("matches nothing for a host that is no host", () => {
    expect(matches(["*.example.com"], "a..example.com", 443)).toBeUndefined();
    expect(matches(["example.com"], "", 443)).toBeUndefined();
    expect(matches(["1.2.3.4"], "1.2.3", 443)).toBeUndefined();
  });
});

describe("normaliseHost", () => {
  it("lower-cases, drops a trailing dot and brackets, punycodes an IDN and unmaps a mapped IPv4", () => {
    expect(normaliseHost("Api.Example.COM.")).toBe("api.example.com");
    expect(normaliseHost("[2001:DB8::0:1]")).toBe("2001:db8::1");
    expect(normaliseHost("münchen.example")).toBe("xn--mnchen-3ya.example");
    expect(normaliseHost("::ffff:10.0.0.1")).toBe("10.0.0.1");
    expect(normaliseHost("not a host")).toBeUndefined();
    expect(normaliseHost("010.0.0.1")).toBeUndefined();
  });
});

describe("EgressAllowList", () => {
  it("takes a list of rules", () => {
    expect(EgressAllowList.safeParse(["api.example.com:443", "*.example.org"]).success).toBe(true);
  });

  it("refuses each bad entry at its own index, with the fix", () => {
    const r = EgressAllowList.safeParse(["api.example.com", "*", "https://x.example"]);
    expect(r.success).toBe(false);
    const issues = r.error!.issues.map((i) => [i.path, i.message]);
    expect(issues).toHaveLength(2);
    expect(issues[0][0]).toEqual([1]);
    expect(issues[0][1]).toMatch(/\*\.example\.com:443/);
    expect(issues[1][0]).toEqual([2]);
    expect(issues[1][1]).toMatch(/no scheme/);
  });

  it(`refuses more than ${EGRESS_LIST_MAX} rules, saying how to cover many hosts`, () => {
    const list = Array.from({ length: EGRESS_LIST_MAX + 1 }, (_, i) => `h${i}.example.com`);
    const r = EgressAllowList.safeParse(list);
    expect(r.success).toBe(false);
    expect(r.error!.issues[0].message).toMatch(/at most 256 rules: use \*\.domain/);
    expect(EgressAllowList.safeParse(list.slice(1)).success).toBe(true);
  });
});

describe("baseListOf", () => {
  it("derives egress.allow, the providers' and held origins' host:port and the tunnels (443 unless said)", () => {
    const rules = baseListOf({
      egress: { allow: ["model.jr2-system.svc:8080", "*.pkg.example.org:443"] },
      custodian: {
        providers: [
          { name: "anthropic", url: "https://api.anthropic.example" },
          { name: "local", url: "http://model.local:8000/v1" },
        ],
        held: [{ secret: "s", key: "k", origins: ["https://api.anthropic.example", "http://plain.example"] }],
        tunnel: ["github.com", "*.githubusercontent.com", "ssh.example.com:22", "http://mirror.example"],
      },
    }).map((r) => r.text);
    expect(rules).toEqual([
      "model.jr2-system.svc:8080",
      "*.pkg.example.org:443",
      "api.anthropic.example:443",
      "model.local:8000",
      "api.anthropic.example:443",
      "plain.example:80",
      "github.com:443",
      "*.githubusercontent.com:443",
      "ssh.example.com:22",
      "mirror.example:80",
    ]);
  });

  it("is empty for an empty or absent config", () => {
    expect(baseListOf({})).toEqual([]);
    expect(baseListOf(undefined)).toEqual([]);
    expect(baseListOf({ custodian: { providers: [] } })).toEqual([]);
  });

  it("reports each entry that yields no rule, by its field, never dropping it silently", () => {
    expect(() =>
      baseListOf({
        egress: { allow: ["ok.example", "*"] },
        custodian: { providers: [{ url: "not a url" }], tunnel: ["*"], held: "x" },
      }),
    ).toThrow(
      /egress\.allow\[1\]: .*every host.*; custodian\.providers\[0\]\.url: "not a url" is not a url.*; custodian\.held: must be a list; custodian\.tunnel\[0\]: "\*" tunnels every host/,
    );
  });
});

describe("repoRulesOf", () => {
  it("gives https 443, http 80, ssh and scp-like 22, git 9418, or the url's own port", () => {
    expect(
      repoRulesOf([
        "https://github.com/org/repo.git",
        "http://git.example/repo",
        "ssh://git@ssh.example.com/org/repo",
        "git@scp.example.com:org/repo.git",
        "scp2.example.com:org/repo.git",
        "https://git.example.com:8443/r",
        "ssh://git@ssh.example.com:2222/r",
        "git://old.example/r",
        "/srv/git/local.git",
        "file:///srv/git/x.git",
        "https://GitHub.com/other/repo.git",
      ]).map((r) => r.text),
    ).toEqual([
      "github.com:443",
      "git.example:80",
      "ssh.example.com:22",
      "scp.example.com:22",
      "scp2.example.com:22",
      "git.example.com:8443",
      "ssh.example.com:2222",
      "old.example:9418",
    ]);
  });
});

describe("isInternalAddress", () => {
  // Every kind of block (decision 0068): IANA's special-purpose registries, multicast, reserved,
  // the cloud metadata and wire-server addresses, and the translators' embedded IPv4.
  it.each([
    ["0.0.0.0", "this network"],
    ["0.1.2.3", "this network"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "shared address space"],
    ["100.127.255.255", "shared address space"],
    ["127.0.0.1", "loopback"],
    ["127.0.0.7", "loopback"],
    ["169.254.1.1", "link-local"],
    ["192.0.0.8", "IETF protocol assignments"],
    ["192.0.2.1", "documentation (TEST-NET-1)"],
    ["192.88.99.1", "6to4 relay anycast"],
    ["198.18.0.1", "benchmarking"],
    ["198.19.255.255", "benchmarking"],
    ["198.51.100.10", "documentation (TEST-NET-2)"],
    ["203.0.113.7", "documentation (TEST-NET-3)"],
    ["224.0.0.1", "multicast"],
    ["239.255.255.250", "multicast"],
    ["240.0.0.1", "reserved, and the limited broadcast"],
    ["255.255.255.255", "reserved, and the limited broadcast"],
    ["169.254.169.254", expect.stringContaining("metadata.google.internal")],
    ["169.254.170.2", "AWS ECS task metadata"],
    ["168.63.129.16", "Azure wire server"],
    ["100.100.100.200", "Alibaba Cloud metadata"],
    ["fd00:ec2::254", "AWS instance metadata (IPv6)"],
    ["fd20:ce::254", "GCP metadata (IPv6)"],
    ["::", "not global unicast"],
    ["::1", "not global unicast"],
    ["::10.0.0.1", "not global unicast"],
    ["100::1", "not global unicast"],
    ["64:ff9b:1::1", "not global unicast"],
    ["fc00::1", "not global unicast"],
    ["fd12:3456::1", "not global unicast"],
    ["fe80::1", "not global unicast"],
    ["fec0::1", "not global unicast"],
    ["ff02::1", "not global unicast"],
    ["4000::1", "not global unicast"],
    ["2001::1", expect.stringContaining("Teredo")],
    ["2001:2::1", expect.stringContaining("benchmarking")],
    ["2001:db8::1", "documentation"],
    ["3fff::1", "documentation"],
    ["::ffff:10.0.0.1", "private"],
    ["::ffff:168.63.129.16", "Azure wire server"],
    ["64:ff9b::10.0.0.1", "private, behind NAT64"],
    ["64:ff9b::a9fe:a9fe", expect.stringContaining("instance metadata")],
    ["64:ff9b::198.18.0.1", "benchmarking, behind NAT64"],
    ["2002:a00:1::1", "private, behind 6to4"],
    ["2002:7f00:1::", "loopback, behind 6to4"],
    ["not-an-ip", "not an IP address"],
    ["fe80::1%eth0", "not an IP address"],
  ])("%s is internal: %s", (ip, kind) => {
    expect(addressKind(ip)).toEqual(kind);
    expect(isInternalAddress(ip)).toBe(true);
  });

  it.each([
    "8.8.8.8",
    "1.1.1.1",
    "172.32.0.1",
    "100.128.0.1",
    "192.169.0.1",
    "198.20.0.1",
    "223.255.255.255",
    "2606:4700::1111",
    "2a00:1450:4001::1",
    "::ffff:8.8.8.8",
    "64:ff9b::8.8.8.8",
    "2002:808:808::1",
  ])("%s is public", (ip) => {
    expect(addressKind(ip)).toBeUndefined();
    expect(isInternalAddress(ip)).toBe(false);
  });

  it("holds the installation's cluster ranges internal, also behind NAT64, and a test installation's documentation ranges public", () => {
    const ranges = addressRangesOf({
      egress: {
        clusterRanges: ["11.0.0.0/16", "2600:1f00::/56"],
        publicTestRanges: ["198.51.100.10/32", "2001:db8:1::/48"],
      },
    });
    expect(addressKind("11.0.3.4", ranges)).toBe("the cluster's range 11.0.0.0/16");
    expect(addressKind("64:ff9b::b00:304", ranges)).toBe("the cluster's range 11.0.0.0/16");
    expect(addressKind("2600:1f00::9", ranges)).toBe("the cluster's range 2600:1f00::/56");
    expect(isInternalAddress("11.1.0.1", ranges)).toBe(false);
    // Public for this installation: its stand-in's address, nothing more of the block.
    expect(isInternalAddress("198.51.100.10", ranges)).toBe(false);
    expect(isInternalAddress("198.51.100.11", ranges)).toBe(true);
    expect(isInternalAddress("2001:db8:1::5", ranges)).toBe(false);
    // The same address without the installation's word: the one-argument call (the cache agent's).
    expect(isInternalAddress("11.0.3.4")).toBe(false);
    expect(isInternalAddress("198.51.100.10")).toBe(true);
  });

  it("refuses a public test range outside the documentation blocks and a range that is no range, each by its field", () => {
    expect(() =>
      addressRangesOf({
        egress: { clusterRanges: ["10.0.0.1/8", "x"], publicTestRanges: ["10.0.0.0/8", "198.51.0.0/16"] },
      }),
    ).toThrow(
      new RegExp(
        [
          "egress\\.clusterRanges\\[0\\]: .*network address",
          "egress\\.clusterRanges\\[1\\]: .*not an address range",
          "egress\\.publicTestRanges\\[0\\]: 10\\.0\\.0\\.0/8 is not inside a documentation range",
          "egress\\.publicTestRanges\\[1\\]: 198\\.51\\.0\\.0/16 is not inside",
        ].join(".*"),
      ),
    );
    expect(() => addressRangesOf({ egress: { clusterRanges: "10.0.0.0/8" } })).toThrow(
      /egress\.clusterRanges: must be a list/,
    );
    expect(addressRangesOf({})).toEqual(NO_RANGES);
  });

  it("parses a range or a bare address, and refuses a prefix past the width", () => {
    expect(parseCidr("10.96.0.0/12")).toMatchObject({ ok: true, cidr: { v6: false, bits: 12 } });
    expect(parseCidr("fd00:10::")).toMatchObject({ ok: true, cidr: { v6: true, bits: 128 } });
    expect(parseCidr("10.0.0.0/33")).toMatchObject({ ok: false, message: expect.stringMatching(/at most \/32/) });
    expect(parseCidr("example.com/8")).toMatchObject({ ok: false });
  });
});

it("egressLogPath names the Sandbox", () => {
  expect(egressLogPath("team-a", "ws-1")).toBe("/v1/sandboxes/team-a/ws-1/egress/log");
});
