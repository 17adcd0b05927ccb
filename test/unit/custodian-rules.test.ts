// The Custodian's pure rules by example (custodian/rules.ts): routes, paths that must not climb,
// CONNECT targets, the egress allowlist, which headers cross, held values' shape, the Stand-in
// substitution, and which failures came before the request was sent.
import {
  answerHeaders,
  connectTarget,
  endToEnd,
  failureDetail,
  hasDotSegment,
  heldValueOf,
  heldValueProblem,
  joinUrl,
  notSent,
  routeOf,
  substitute,
  tunnelAllowed,
  type HeldTable,
} from "../../custodian/rules";

const A = `jr2-stand-in-${"a".repeat(32)}`;
const B = `jr2-stand-in-${"b".repeat(32)}`;
const table: HeldTable = {
  byStandIn: new Map([
    [
      A,
      {
        name: "anthropic-key",
        secret: "sk-ant-SECRET-1",
        origins: new Set(["https://api.anthropic.com"]),
        headers: new Set(["x-api-key", "authorization"]),
      },
    ],
    [
      B,
      {
        name: "github-token",
        secret: "ghp_SECRET_2",
        origins: new Set(["https://api.github.com", "https://github.com"]),
      },
    ],
  ]),
  boundOrigins: new Set(["https://api.anthropic.com", "https://api.github.com", "https://github.com"]),
};

describe("routes", () => {
  it.each([
    ["/healthz", { kind: "local", name: "healthz" }],
    ["/readyz?x=1", { kind: "local", name: "readyz" }],
    ["/orchestrator/agents/a/deliveries/1?wait=25s", { kind: "orchestrator", rest: "/agents/a/deliveries/1?wait=25s" }],
    ["/orchestrator", { kind: "orchestrator", rest: "" }],
    ["/orchestratorx/a", { kind: "unknown" }],
    ["/providers/anthropic/v1/messages", { kind: "provider", name: "anthropic", rest: "/v1/messages" }],
    ["/providers/anthropic?beta=1", { kind: "provider", name: "anthropic", rest: "?beta=1" }],
    ["/providers/", { kind: "unknown" }],
    ["/other", { kind: "unknown" }],
  ])("%s", (target, route) => {
    expect(routeOf(target)).toEqual(route);
  });

  it("reads absolute-form targets as the proxy's", () => {
    const r = routeOf("http://example.com:8080/a?b");
    expect(r.kind === "proxy" && r.url.href).toBe("http://example.com:8080/a?b");
  });

  it("refuses dot segments, encoded or not, and keeps the base's origin", () => {
    for (const p of ["/../x", "/a/./b", "/%2e%2E/x", "/a\\..\\b", "/.."]) expect(hasDotSegment(p)).toBe(true);
    for (const p of ["/a..b/c", "/.well-known/x", "/a?x=/../"]) expect(hasDotSegment(p)).toBe(false);
    expect(joinUrl("http://o:8090/api/", "/v1/x?y=1")?.href).toBe("http://o:8090/api/v1/x?y=1");
    expect(joinUrl("http://o:8090", "")?.href).toBe("http://o:8090/");
    expect(joinUrl("https://a.example", "//evil.example/x")?.host).toBe("a.example");
    expect(joinUrl("https://a.example", "@evil.example/x")).toBeUndefined();
  });
});

describe("CONNECT targets and the egress allowlist", () => {
  it("reads host:port as an https origin", () => {
    expect(connectTarget("api.anthropic.com:443")).toEqual({
      host: "api.anthropic.com",
      port: 443,
      origin: "https://api.anthropic.com",
    });
    expect(connectTarget("Localhost:8443")).toEqual({
      host: "localhost",
      port: 8443,
      origin: "https://localhost:8443",
    });
    expect(connectTarget("[::1]:443")?.origin).toBe("https://[::1]");
    for (const bad of ["api.anthropic.com", "a:0", "a:70000", "http://a:443", "a b:443", ""])
      expect(connectTarget(bad)).toBeUndefined();
  });

  it("matches hosts, domains, ports and *", () => {
    const p = ["github.com", "*.npmjs.org", "registry.example:8443", "[::1]:9000"];
    expect(tunnelAllowed(p, "github.com", 443)).toBe(true);
    expect(tunnelAllowed(p, "GitHub.com", 443)).toBe(true);
    expect(tunnelAllowed(p, "github.com", 22)).toBe(false);
    expect(tunnelAllowed(p, "api.github.com", 443)).toBe(false);
    expect(tunnelAllowed(p, "registry.npmjs.org", 443)).toBe(true);
    expect(tunnelAllowed(p, "npmjs.org", 443)).toBe(false);
    expect(tunnelAllowed(p, "evilnpmjs.org", 443)).toBe(false);
    expect(tunnelAllowed(p, "registry.example", 8443)).toBe(true);
    expect(tunnelAllowed(p, "::1", 9000)).toBe(true);
    expect(tunnelAllowed(["github.com"], "github.com", 80, true)).toBe(true);
    expect(tunnelAllowed(["*"], "anything.example", 443)).toBe(true);
    expect(tunnelAllowed([], "github.com", 443)).toBe(false);
  });
});

describe("headers", () => {
  it("drops hop-by-hop headers, and those Connection names", () => {
    const raw = [
      "Host",
      "h",
      "Connection",
      "keep-alive, X-Hop",
      "X-Hop",
      "1",
      "Proxy-Authorization",
      "p",
      "Expect",
      "100-continue",
      "X-Api-Key",
      "k",
      "Accept",
      "a",
    ];
    expect(endToEnd(raw)).toEqual([
      ["x-api-key", "k"],
      ["accept", "a"],
    ]);
  });

  it("drops an upstream's x-jr2-custodian: only the Custodian speaks that word", () => {
    expect(
      answerHeaders([
        "X-Jr2-Custodian",
        "unreachable",
        "Set-Cookie",
        "a=1",
        "set-cookie",
        "b=2",
        "Transfer-Encoding",
        "chunked",
      ]),
    ).toEqual([
      ["set-cookie", "a=1"],
      ["set-cookie", "b=2"],
    ]);
  });
});

describe("held values", () => {
  it("drop one trailing newline and must fit a header", () => {
    expect(heldValueOf("sk-123456\n")).toBe("sk-123456");
    expect(heldValueOf("sk-123456\r\n")).toBe("sk-123456");
    expect(heldValueProblem("sk-123456")).toBeUndefined();
    expect(heldValueProblem("short")).toMatch(/shorter than 8/);
    expect(heldValueProblem("sk-12345\n6789")).toMatch(/header cannot carry/);
    expect(heldValueProblem(" sk-123456")).toMatch(/header cannot carry/);
    expect(heldValueProblem("sk-123456é")).toMatch(/header cannot carry/);
    expect(heldValueProblem("********")).toMatch(/no letter or digit/);
  });
});

describe("substitution", () => {
  it("swaps each Stand-in toward its bound origin, in any part of a header, and names what it used", () => {
    const r = substitute(
      [
        ["x-api-key", A],
        ["accept", "*/*"],
      ],
      "https://api.anthropic.com",
      table,
    );
    expect(r).toEqual({
      ok: true,
      headers: [
        ["x-api-key", "sk-ant-SECRET-1"],
        ["accept", "*/*"],
      ],
      used: ["anthropic-key"],
    });
    const two = substitute(
      [
        ["authorization", `token ${B}`],
        ["x-note", `${B},${B}`],
      ],
      "https://github.com",
      table,
    );
    expect(two.ok && two.headers).toEqual([
      ["authorization", "token ghp_SECRET_2"],
      ["x-note", "ghp_SECRET_2,ghp_SECRET_2"],
    ]);
  });

  it("on a provider route, a Stand-in rides in that provider kind's key header alone", () => {
    const only = { header: "x-api-key", provider: "anthropic", kind: "anthropic" };
    expect(substitute([["x-api-key", A]], "https://api.anthropic.com", table, only)).toMatchObject({
      ok: true,
      headers: [["x-api-key", "sk-ant-SECRET-1"]],
    });
    const elsewhere = substitute([["authorization", `Bearer ${A}`]], "https://api.anthropic.com", table, only);
    expect(elsewhere).toEqual({
      ok: false,
      status: 403,
      code: "stand_in_header",
      message:
        "provider anthropic (anthropic) takes its key in header x-api-key alone, not in authorization: set the kind its API speaks on custodian.providers",
    });
    // A request with no Stand-in is left alone: the rule is about where a held value may go.
    expect(substitute([["authorization", "Bearer public"]], "https://api.anthropic.com", table, only)).toMatchObject({
      ok: true,
      used: [],
    });
  });

  it("looks into Basic credentials", () => {
    const basic = `Basic ${Buffer.from(`x-access-token:${B}`).toString("base64")}`;
    const r = substitute([["authorization", basic]], "https://github.com", table);
    expect(r.ok && Buffer.from(r.headers[0][1].slice(6), "base64").toString()).toBe("x-access-token:ghp_SECRET_2");
    const refused = substitute([["authorization", basic]], "https://api.anthropic.com", table);
    expect(refused.ok).toBe(false);
  });

  it("refuses a Stand-in toward another origin, in another header, or unknown, without swapping anything", () => {
    const unbound = substitute([["x-api-key", A]], "https://api.anthropic.com.evil.example", table);
    expect(unbound).toMatchObject({ ok: false, status: 403, code: "stand_in_unbound" });
    expect(!unbound.ok && unbound.message).toBe(
      "header x-api-key carries the Stand-in of held value anthropic-key, which is bound to https://api.anthropic.com, not https://api.anthropic.com.evil.example: it is sent nowhere else",
    );
    expect(substitute([["x-other", A]], "https://api.anthropic.com", table)).toMatchObject({
      ok: false,
      code: "stand_in_header",
    });
    expect(
      substitute([["x-api-key", `jr2-stand-in-${"c".repeat(40)}`]], "https://api.anthropic.com", table),
    ).toMatchObject({ ok: false, status: 400, code: "stand_in_unknown" });
    // One Stand-in bound elsewhere refuses the whole request, the bound one included.
    expect(
      substitute(
        [
          ["x-api-key", A],
          ["authorization", `Bearer ${B}`],
        ],
        "https://api.anthropic.com",
        table,
      ).ok,
    ).toBe(false);
    // The origin is exact: scheme and port count.
    expect(substitute([["x-api-key", A]], "http://api.anthropic.com", table).ok).toBe(false);
    expect(substitute([["x-api-key", A]], "https://api.anthropic.com:8443", table).ok).toBe(false);
  });

  it("passes a request without Stand-ins as it is", () => {
    expect(substitute([["authorization", "Bearer own-token"]], "https://x.example", table)).toEqual({
      ok: true,
      headers: [["authorization", "Bearer own-token"]],
      used: [],
    });
  });
});

describe("upstream failures", () => {
  it("are 'not sent' when the connector failed or the code is a connect's", () => {
    expect(notSent(new Error("x"), true)).toBe(true);
    for (const code of [
      "ECONNREFUSED",
      "ENOTFOUND",
      "EAI_AGAIN",
      "UND_ERR_CONNECT_TIMEOUT",
      "ENETUNREACH",
      "EHOSTUNREACH",
    ]) {
      expect(notSent(Object.assign(new Error("x"), { code }), false)).toBe(true);
    }
    for (const code of ["ECONNRESET", "UND_ERR_SOCKET", "UND_ERR_HEADERS_TIMEOUT", "EPIPE", undefined]) {
      expect(notSent(Object.assign(new Error("x"), { code }), false)).toBe(false);
    }
    expect(notSent(undefined, false)).toBe(false);
  });

  it("are described by code and message", () => {
    expect(failureDetail(Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" }))).toBe(
      "connect ECONNREFUSED 127.0.0.1:9",
    );
    expect(failureDetail(Object.assign(new Error("other side closed"), { code: "UND_ERR_SOCKET" }))).toBe(
      "UND_ERR_SOCKET: other side closed",
    );
  });
});
