// The Harness's pure parts: credential redaction, the token check and the body's error messages.
import { createHash } from "node:crypto";
import { redact } from "../../lib/redact";
import { authorized, tokenMatches } from "../../harness/auth";
import { bearerOf } from "../../lib/http-json";
import { fieldPath, parseAttachBody } from "../../api/attach";

describe("redact", () => {
  it.each([
    ["fatal: unable to access 'https://user:pa55@git.invalid/x.git/'", "'https://***@git.invalid/x.git/'"],
    ["remote: https://ghp_token@git.invalid/x", "https://***@git.invalid/x"],
    ["ssh://git:pw@host:22/x and https://a:b@c/d", "ssh://***@host:22/x and https://***@c/d"],
    ["> Authorization: Bearer abc.def\nnext", "> Authorization: ***\nnext"],
  ])("removes the credentials from %j", (input, expected) => {
    expect(redact(input)).toContain(expected);
    expect(redact(input)).not.toMatch(/pa55|ghp_token|pw@|a:b@|abc\.def/);
  });

  it("leaves an scp-style user and a url without credentials alone", () => {
    const text = "git@host:team/x.git https://host/x.git /repos/key";
    expect(redact(text)).toBe(text);
  });
});

describe("token check", () => {
  const digest = createHash("sha256").update("tok").digest("hex");

  it("reads only `Bearer <token>`", () => {
    expect(bearerOf("Bearer tok")).toBe("tok");
    expect(bearerOf("bearer  tok ")).toBe("tok");
    expect(bearerOf("Basic tok")).toBeUndefined();
    expect(bearerOf("Bearer a b")).toBeUndefined();
    expect(bearerOf(undefined)).toBeUndefined();
  });

  it("matches the token's SHA-256, in either hex case, and nothing else", () => {
    expect(tokenMatches("tok", digest)).toBe(true);
    expect(tokenMatches("tok", digest.toUpperCase())).toBe(true);
    expect(tokenMatches("tok2", digest)).toBe(false);
    expect(authorized("Bearer tok", digest)).toBe(true);
    expect(authorized(undefined, digest)).toBe(false);
  });

  it("refuses everything when the expected digest is unset or malformed", () => {
    expect(tokenMatches("tok", undefined)).toBe(false);
    expect(tokenMatches("tok", "")).toBe(false);
    expect(tokenMatches("tok", digest.slice(2))).toBe(false);
    expect(tokenMatches("tok", `${digest.slice(1)}z`)).toBe(false);
  });
});

describe("attach body", () => {
  const good = { slot: "app", url: "https://git.invalid/x.git", identity: "git.invalid/x", key: "k1" };

  it("spells field paths as a client writes them", () => {
    expect(fieldPath([])).toBe("body");
    expect(fieldPath(["slots", 0, "key"])).toBe("slots[0].key");
    expect(fieldPath(["branch"])).toBe("branch");
  });

  it("accepts a minimal body and one with every optional field", () => {
    expect(parseAttachBody({ slots: [good], branch: "feat" }).ok).toBe(true);
    const full = { slots: [{ ...good, ref: "v1.0" }], branch: "a/b", reviewSha: "0123abcd" };
    expect(parseAttachBody(full)).toEqual({ ok: true, body: full });
  });

  it.each([
    [{ slots: [], branch: "feat" }, "slots: must name at least one slot"],
    [{ slots: [good] }, "branch: Required"],
    [{ slots: [{ ...good, url: "-uhack" }], branch: "f" }, "slots[0].url: must not start with '-'"],
    [{ slots: [{ ...good, ref: "--upload-pack=x" }], branch: "f" }, "slots[0].ref: must not start with '-'"],
    [{ slots: [{ ...good, slot: "a..b" }], branch: "f" }, "slots[0].slot: must not contain '..'"],
    [{ slots: [{ ...good, slot: "." }], branch: "f" }, "slots[0].slot: must not be '.'"],
    [{ slots: [{ ...good, key: "a/b" }], branch: "f" }, "slots[0].key: must be a plain directory name"],
    [{ slots: [good], branch: "default/x" }, "branch: must not be 'default'"],
    [[good], "body: Invalid input"],
  ])("refuses %j: %s", (body, message) => {
    const r = parseAttachBody(body);
    expect(r.ok).toBe(false);
    expect(r.ok ? "" : r.message).toContain(message);
  });
});
