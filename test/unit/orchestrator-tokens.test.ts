// The Harness bearer (derived, checked by the Harness through its digest) and the API tokens.
import { timingSafeEqual } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { tokenMatches } from "../../harness/auth";
import {
  apiTokenChecker,
  maySee,
  harnessToken,
  parseApiTokens,
  readApiTokens,
  readSigningKey,
  signingKeyOf,
  tokenDigest,
} from "../../orchestrator/tokens";

// Counted, not changed: the checker must compare against every token whichever matches.
jest.mock("node:crypto", () => {
  const actual = jest.requireActual<typeof import("node:crypto")>("node:crypto");
  return { ...actual, timingSafeEqual: jest.fn(actual.timingSafeEqual) };
});

const KEY = Buffer.from("0123456789abcdef0123456789abcdef-signing-key");

describe("harnessToken", () => {
  it("is the same for the same key and name (a restart derives it again)", () => {
    expect(harnessToken(KEY, "ws-a")).toBe(harnessToken(Buffer.from(KEY), "ws-a"));
  });

  it("differs per Sandbox and per key", () => {
    const tokens = new Set([
      harnessToken(KEY, "ws-a"),
      harnessToken(KEY, "ws-b"),
      harnessToken(Buffer.from("another key, 32 bytes or more......"), "ws-a"),
    ]);
    expect(tokens.size).toBe(3);
  });

  it("is base64url: safe in a header, no padding", () => {
    expect(harnessToken(KEY, "ws-a")).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it("is what the Harness accepts through JR2_HARNESS_TOKEN_SHA256, and nothing else is", () => {
    const token = harnessToken(KEY, "ws-a");
    const digest = tokenDigest(token);
    expect(digest).toMatch(/^[0-9a-f]{64}$/);
    expect(tokenMatches(token, digest)).toBe(true);
    expect(tokenMatches(harnessToken(KEY, "ws-b"), digest)).toBe(false);
  });

  it("digests the UTF-8 bytes, as the Harness does", () => {
    expect(tokenDigest("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });
});

describe("the signing key", () => {
  it("drops one trailing newline, and only that", () => {
    const raw = "k".repeat(40);
    expect(signingKeyOf(Buffer.from(`${raw}\n`)).toString()).toBe(raw);
    expect(signingKeyOf(Buffer.from(`${raw}\r\n`)).toString()).toBe(raw);
    expect(signingKeyOf(Buffer.from(`${raw} \n`)).toString()).toBe(`${raw} `);
  });

  it("refuses a key shorter than 32 bytes, saying how to make one", () => {
    expect(() => signingKeyOf(Buffer.from("short\n"))).toThrow("needs at least 32");
    expect(() => signingKeyOf(Buffer.from("short\n"))).toThrow("/dev/urandom");
  });
});

describe("API tokens", () => {
  const admin = { kind: "admin" } as const;
  const tenant = (t: string) => ({ kind: "tenant", tenant: t }) as const;
  const tokens = (...t: string[]) => t.map((token) => ({ token, principal: admin }));

  it("reads one a line, skipping blanks and comments, trimming spaces: a bare token is an admin's", () => {
    expect(parseApiTokens("# tokens\n\n  alpha  \r\nbeta\n#gamma\n")).toEqual(tokens("alpha", "beta"));
    expect(parseApiTokens("")).toEqual([]);
  });

  it("reads `<token> <tenant>` as that tenant's token", () => {
    expect(parseApiTokens("alpha team-a\nbeta\t team-b\ngamma\n")).toEqual([
      { token: "alpha", principal: tenant("team-a") },
      { token: "beta", principal: tenant("team-b") },
      { token: "gamma", principal: admin },
    ]);
  });

  it("refuses a line with more than a token and a tenant, or a tenant that is no DNS label, by line number and never by value", () => {
    for (const [text, why] of [
      ["ok\nsecret value more\n", /line 2: a line is "<token>" \(an admin\) or "<token> <tenant>"/],
      ["ok\nsecret Team_A\n", /line 2: the tenant must be a DNS label/],
    ] as const) {
      expect(() => parseApiTokens(text)).toThrow(why);
      try {
        parseApiTokens(text);
      } catch (err) {
        expect((err as Error).message).not.toContain("secret");
      }
    }
  });

  it("answers who a candidate speaks for, checking it against every token", () => {
    const check = apiTokenChecker([...tokens("alpha"), { token: "beta", principal: tenant("team-b") }]);
    expect(check("alpha")).toEqual(admin);
    expect(check("beta")).toEqual(tenant("team-b"));
    for (const wrong of ["alph", "alphaa", "", "team-b"]) expect(check(wrong)).toBeUndefined();
  });

  it("refuses everything when no token is configured", () => {
    expect(apiTokenChecker([])("anything")).toBeUndefined();
  });

  it("compares every token, whichever matches (no early exit)", () => {
    const check = apiTokenChecker(tokens("a", "b", "c"));
    const compare = jest.mocked(timingSafeEqual);
    compare.mockClear();
    expect(check("a")).toEqual(admin);
    expect(compare).toHaveBeenCalledTimes(3);
    compare.mockClear();
    expect(check("zzz")).toBeUndefined();
    expect(compare).toHaveBeenCalledTimes(3);
  });

  it("lets an admin see every workspace and a tenant only its own", () => {
    expect(maySee(admin, undefined)).toBe(true);
    expect(maySee(admin, "team-a")).toBe(true);
    expect(maySee(tenant("team-a"), "team-a")).toBe(true);
    expect(maySee(tenant("team-a"), "team-b")).toBe(false);
    expect(maySee(tenant("team-a"), undefined)).toBe(false);
  });
});

describe("files", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "jr2-tokens-"));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("reads the API tokens file and the signing key file", async () => {
    await writeFile(path.join(dir, "tokens"), "# api\nt1\nt2\n");
    await writeFile(path.join(dir, "key"), `${"s".repeat(32)}\n`);
    expect(await readApiTokens(path.join(dir, "tokens"))).toEqual([
      { token: "t1", principal: { kind: "admin" } },
      { token: "t2", principal: { kind: "admin" } },
    ]);
    expect((await readSigningKey(path.join(dir, "key"))).length).toBe(32);
  });
});
