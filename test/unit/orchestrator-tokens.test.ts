// The Harness bearer (derived, checked by the Harness through its digest) and the API tokens.
import { timingSafeEqual } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { tokenMatches } from "../../harness/auth";
import {
  apiTokenChecker,
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
  it("reads one a line, skipping blanks and comments, trimming spaces", () => {
    expect(parseApiTokens("# tokens\n\n  alpha  \r\nbeta\n#gamma\n")).toEqual(["alpha", "beta"]);
    expect(parseApiTokens("")).toEqual([]);
  });

  it("refuses a token with a space inside, by line number and never by value", () => {
    expect(() => parseApiTokens("ok\nsecret value\n")).toThrow("line 2");
    try {
      parseApiTokens("ok\nsecret value\n");
    } catch (err) {
      expect((err as Error).message).not.toContain("secret");
    }
  });

  it("checks a candidate against every token", () => {
    const check = apiTokenChecker(["alpha", "beta"]);
    expect(check("alpha")).toBe(true);
    expect(check("beta")).toBe(true);
    expect(check("alph")).toBe(false);
    expect(check("alphaa")).toBe(false);
    expect(check("")).toBe(false);
  });

  it("refuses everything when no token is configured", () => {
    expect(apiTokenChecker([])("anything")).toBe(false);
  });

  it("compares every token, whichever matches (no early exit)", () => {
    const check = apiTokenChecker(["a", "b", "c"]);
    const compare = jest.mocked(timingSafeEqual);
    compare.mockClear();
    expect(check("a")).toBe(true);
    expect(compare).toHaveBeenCalledTimes(3);
    compare.mockClear();
    expect(check("zzz")).toBe(false);
    expect(compare).toHaveBeenCalledTimes(3);
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
    expect(await readApiTokens(path.join(dir, "tokens"))).toEqual(["t1", "t2"]);
    expect((await readSigningKey(path.join(dir, "key"))).length).toBe(32);
  });
});
