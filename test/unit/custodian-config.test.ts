// The Custodian's config schema (api/custodian-config.ts): defaults, each refusal naming its field and its
// fix without quoting the value, the Stand-in format, and the Harness env a config implies;
// property: no input makes the parser throw, and whatever it accepts has canonical origins.
import fc from "fast-check";
import {
  harnessCustodianEnv,
  parseCustodianConfig,
  parseCustodianConfigText,
  standInFrom,
  standInsIn,
  STAND_IN,
  timeoutsMs,
  viaAddress,
  type CustodianConfigInput,
} from "../../api/custodian-config";
import { CUSTODIAN_ENV } from "../../api/env";

const S1 = `jr2-stand-in-${"a".repeat(32)}`;
const S2 = `jr2-stand-in-${"b".repeat(64)}`;

const good: CustodianConfigInput = {
  version: 1,
  orchestrator: { url: "http://jr2-orchestrator.jr2.svc:8090" },
  providers: [{ name: "anthropic", url: "https://api.anthropic.com" }],
  held: [
    {
      value: "anthropic-key",
      standIn: S1,
      origins: ["https://api.anthropic.com"],
      headers: ["x-api-key"],
      env: "ANTHROPIC_API_KEY",
    },
  ],
  egress: { tunnel: ["github.com", "*.npmjs.org", "registry.example:8443"] },
};

const refusal = (input: unknown) => {
  const r = parseCustodianConfig(input);
  if (r.ok) throw new Error("expected a refusal");
  return r.message;
};

describe("the Custodian's config", () => {
  it("accepts a full config and fills the defaults", () => {
    const r = parseCustodianConfig(good);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.config.orchestrator).toEqual({
      url: "http://jr2-orchestrator.jr2.svc:8090",
      token: "JR2_SANDBOX_TOKEN",
      retries: 2,
    });
    expect(r.config.timeouts).toEqual({ connect: "5s", headers: "300s", body: "300s" });
    expect(timeoutsMs(r.config)).toEqual({ connect: 5000, headers: 300_000, body: 300_000 });
  });

  it("accepts the smallest config: a version", () => {
    const r = parseCustodianConfig({ version: 1 });
    expect(r.ok && r.config).toEqual({
      version: 1,
      providers: [],
      held: [],
      egress: { tunnel: [] },
      timeouts: { connect: "5s", headers: "300s", body: "300s" },
    });
  });

  it.each<[string, unknown, RegExp]>([
    ["no version", { held: [] }, /^version: /],
    ["an unknown field", { version: 1, helds: [] }, /Unrecognized key.*helds/],
    [
      "an origin with a path",
      { version: 1, held: [{ value: "k", standIn: S1, origins: ["https://api.example.com/v1"] }] },
      /held\[0\]\.origins\[0\]: must be exactly https:\/\/api\.example\.com: write the origin alone/,
    ],
    [
      "an origin with a credential",
      { version: 1, held: [{ value: "k", standIn: S1, origins: ["https://u:p@api.example.com"] }] },
      /held\[0\]\.origins\[0\]: must not carry a credential/,
    ],
    [
      "an origin in another scheme",
      { version: 1, held: [{ value: "k", standIn: S1, origins: ["ftp://example.com"] }] },
      /must be http or https/,
    ],
    [
      "no origin",
      { version: 1, held: [{ value: "k", standIn: S1, origins: [] }] },
      /held\[0\]\.origins: must name at least one origin/,
    ],
    [
      "a malformed Stand-in",
      { version: 1, held: [{ value: "k", standIn: "jr2-stand-in-XYZ", origins: ["https://a.example"] }] },
      /held\[0\]\.standIn: must be jr2-stand-in- and 32 to 64 lower-case hex digits/,
    ],
    [
      "a value file that climbs",
      { version: 1, held: [{ value: "../token", standIn: S1, origins: ["https://a.example"] }] },
      /held\[0\]\.value: must be a file name in the values directory/,
    ],
    [
      "a hidden value file",
      { version: 1, held: [{ value: "..data", standIn: S1, origins: ["https://a.example"] }] },
      /held\[0\]\.value: must be a file name/,
    ],
    [
      "a hop-by-hop header",
      { version: 1, held: [{ value: "k", standIn: S1, origins: ["https://a.example"], headers: ["connection"] }] },
      /held\[0\]\.headers\[0\]: names a hop-by-hop header/,
    ],
    [
      "an upper-case header",
      { version: 1, held: [{ value: "k", standIn: S1, origins: ["https://a.example"], headers: ["X-Api-Key"] }] },
      /must be a header name in lower case/,
    ],
    [
      "a repeated Stand-in",
      {
        version: 1,
        held: [
          { value: "a", standIn: S1, origins: ["https://a.example"] },
          { value: "b", standIn: S1, origins: ["https://b.example"] },
        ],
      },
      /held\[1\]\.standIn: repeats a Stand-in/,
    ],
    [
      "a repeated provider",
      {
        version: 1,
        providers: [
          { name: "p", url: "https://a.example" },
          { name: "p", url: "https://b.example" },
        ],
      },
      /providers\[1\]\.name: repeats a provider's name/,
    ],
    [
      "a provider name that is no DNS label",
      { version: 1, providers: [{ name: "Open AI", url: "https://a.example" }] },
      /providers\[0\]\.name: must be a DNS label/,
    ],
    [
      "a provider url with a query",
      { version: 1, providers: [{ name: "p", url: "https://a.example/v1?key=x" }] },
      /providers\[0\]\.url: must not carry a query/,
    ],
    [
      "the token behind a Stand-in",
      {
        version: 1,
        orchestrator: { url: "http://o:8090" },
        held: [{ value: "JR2_SANDBOX_TOKEN", standIn: S1, origins: ["https://a.example"] }],
      },
      /held\[0\]\.value: names the Sandbox token's file/,
    ],
    [
      "too many retries",
      { version: 1, orchestrator: { url: "http://o:8090", retries: 9 } },
      /orchestrator\.retries: must be 0 to 5/,
    ],
    [
      "a bad tunnel pattern",
      { version: 1, egress: { tunnel: ["https://github.com"] } },
      /egress\.tunnel\[0\]: must be a host in lower case/,
    ],
    [
      "a tunnel port above 65535",
      { version: 1, egress: { tunnel: ["a.example:70000"] } },
      /egress\.tunnel\[0\]: names a port above 65535/,
    ],
    [
      "a timeout that is no duration",
      { version: 1, timeouts: { connect: "5" } },
      /timeouts\.connect: must be a Go duration/,
    ],
    [
      "a timeout above an hour",
      { version: 1, timeouts: { headers: "2h" } },
      /timeouts\.headers: must be between 1ms and 1h/,
    ],
    [
      "an env name that is no name",
      { version: 1, held: [{ value: "k", standIn: S1, origins: ["https://a.example"], env: "1KEY" }] },
      /held\[0\]\.env: must be an environment variable name/,
    ],
  ])("refuses %s, naming the field and the fix", (_what, input, message) => {
    expect(refusal(input)).toMatch(message);
  });

  it("names every bad field at once", () => {
    const message = refusal({ version: 2, providers: [{ name: "", url: "x" }] });
    expect(message).toContain("version:");
    expect(message).toContain("providers[0].name:");
    expect(message).toContain("providers[0].url:");
  });

  it("never quotes a value it refuses (a secret pasted in the wrong place stays out of the log)", () => {
    const secret = "sk-live-0123456789abcdef";
    const message = refusal({
      version: 1,
      held: [{ value: secret.replace(/-/g, "/"), standIn: secret, origins: [secret], env: secret }],
    });
    expect(message).not.toContain("0123456789abcdef");
  });

  it("takes egress.via, the egress point's proxy address, beside egress.tunnel, and leaves it out when absent", () => {
    const r = parseCustodianConfig({
      ...good,
      egress: { ...good.egress, via: "http://jr2-egress.jr2-system.svc:3128" },
    });
    if (!r.ok) throw new Error(r.message);
    expect(r.config.egress).toEqual({
      tunnel: ["github.com", "*.npmjs.org", "registry.example:8443"],
      via: "http://jr2-egress.jr2-system.svc:3128",
    });
    const without = parseCustodianConfig(good);
    expect(without.ok && "via" in without.config.egress).toBe(false);
    for (const via of ["http://10.96.0.12:3128", "http://[fd00::12]:3128", "http://egress:80"])
      expect([via, parseCustodianConfig({ version: 1, egress: { via } }).ok]).toEqual([via, true]);
  });

  it("reads egress.via as a host and a port", () => {
    expect(viaAddress("http://jr2-egress.jr2-system.svc:3128")).toEqual({
      host: "jr2-egress.jr2-system.svc",
      port: 3128,
    });
    expect(viaAddress("http://[fd00::12]:3128")).toEqual({ host: "fd00::12", port: 3128 });
    // URL forgets a default port; the address keeps it.
    expect(viaAddress("http://egress:80")).toEqual({ host: "egress", port: 80 });
  });

  it.each<[string, unknown, RegExp]>([
    ["no scheme", "jr2-egress:3128", /egress\.via: must be http .*e\.g\. http:\/\/jr2-egress\.jr2-system\.svc:3128/],
    [
      "https",
      "https://jr2-egress.jr2-system.svc:3128",
      /egress\.via: must be http \(the egress point's proxy speaks plain HTTP\)/,
    ],
    ["no port", "http://jr2-egress.jr2-system.svc", /egress\.via: must be a host and a port and nothing more/],
    [
      "a path",
      "http://jr2-egress.jr2-system.svc:3128/proxy",
      /egress\.via: must be a host and a port and nothing more/,
    ],
    ["a trailing slash", "http://jr2-egress.jr2-system.svc:3128/", /egress\.via: must be a host and a port/],
    ["a query", "http://jr2-egress.jr2-system.svc:3128?x=1", /egress\.via: must be a host and a port/],
    ["a credential", "http://u:p@jr2-egress.jr2-system.svc:3128", /egress\.via: must not carry a credential/],
    ["port 0", "http://jr2-egress:0", /egress\.via: names a port outside 1 to 65535/],
    ["not a string", 3128, /egress\.via: .*string/],
    [
      "no url at all",
      "not a url",
      /egress\.via: is not a url: write the egress point's proxy address as http:\/\/host:port alone/,
    ],
  ])("refuses an egress.via with %s, naming the field and the fix", (_what, via, message) => {
    expect(refusal({ version: 1, egress: { via } })).toMatch(message);
  });

  it("reads JSON text, and says so when it is not JSON", () => {
    expect(parseCustodianConfigText(JSON.stringify(good)).ok).toBe(true);
    const r = parseCustodianConfigText("version: 1");
    expect(!r.ok && r.message).toMatch(/^not valid JSON .*: write the config as one JSON object/);
  });

  it("gives the Harness its Custodian's address, the proxy, the CA bundle and each Stand-in", () => {
    const r = parseCustodianConfig({
      ...good,
      held: [...good.held!, { value: "other", standIn: S2, origins: ["https://b.example"] }],
    });
    if (!r.ok) throw new Error(r.message);
    const env = Object.fromEntries(harnessCustodianEnv(r.config).map((e) => [e.name, e.value]));
    expect(env).toMatchObject({
      JR2_CUSTODIAN_URL: "http://127.0.0.1:8081",
      HTTPS_PROXY: "http://127.0.0.1:8081",
      NO_PROXY: "127.0.0.1,localhost,::1",
      NODE_EXTRA_CA_CERTS: "/etc/jr2/ca/ca.crt",
      ANTHROPIC_API_KEY: S1,
    });
    expect(Object.values(env)).not.toContain(S2);
  });

  it("names its env once, in api/env.ts", () => {
    expect(CUSTODIAN_ENV).toMatchObject({
      configFile: "JR2_CUSTODIAN_CONFIG",
      valuesDir: "JR2_CUSTODIAN_VALUES_DIR",
      healthHost: "JR2_LISTEN_HOST",
    });
  });
});

describe("Stand-ins", () => {
  it("are made from 16 to 32 bytes and found inside any text", () => {
    const s = standInFrom(new Uint8Array(16).fill(171));
    expect(s).toBe(`jr2-stand-in-${"ab".repeat(16)}`);
    expect(STAND_IN.test(s)).toBe(true);
    expect(standInsIn(`Bearer ${s}, and ${S2}`)).toEqual([s, S2]);
    expect(() => standInFrom(new Uint8Array(8))).toThrow();
  });
});

describe("property: the parser", () => {
  const origins = fc.constantFrom(
    "https://a.example",
    "http://b.example:8080",
    "https://A.example",
    "https://a.example/",
    "x",
    "",
  );
  const standIns = fc.oneof(fc.constantFrom(S1, S2), fc.string());
  const held = fc.record({
    value: fc.oneof(fc.constantFrom("k", "JR2_SANDBOX_TOKEN", ".."), fc.string()),
    standIn: standIns,
    origins: fc.array(origins, { maxLength: 3 }),
  });
  const config = fc.record(
    {
      version: fc.oneof(fc.constant(1), fc.anything()),
      orchestrator: fc.record(
        { url: fc.oneof(origins, fc.string()), retries: fc.oneof(fc.integer(), fc.anything()) },
        { requiredKeys: [] },
      ),
      held: fc.oneof(fc.array(held, { maxLength: 3 }), fc.anything()),
      egress: fc.record({
        tunnel: fc.array(fc.oneof(fc.constantFrom("*", "a.example", "*.a.example:443"), fc.string()), { maxLength: 3 }),
        via: fc.oneof(fc.constantFrom("http://e:3128", "http://e", "https://e:1", "http://[::1]:3128"), fc.string()),
      }),
      timeouts: fc.dictionary(
        fc.constantFrom("connect", "headers", "body"),
        fc.oneof(fc.constantFrom("1s", "300ms", "0s", "2h"), fc.string()),
      ),
    },
    { requiredKeys: [] },
  );

  it("never throws, and every origin it accepts is canonical", () => {
    fc.assert(
      fc.property(fc.oneof(config, fc.anything()), (input) => {
        const r = parseCustodianConfig(input);
        if (!r.ok) return expect(typeof r.message).toBe("string");
        for (const h of r.config.held) for (const o of h.origins) expect(new URL(o).origin).toBe(o);
        expect(new Set(r.config.held.map((h) => h.standIn)).size).toBe(r.config.held.length);
        if (r.config.egress.via !== undefined) expect(viaAddress(r.config.egress.via).port).toBeGreaterThan(0);
      }),
      { numRuns: 2_000 },
    );
  });
});
