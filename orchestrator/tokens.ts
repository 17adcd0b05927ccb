// The Orchestrator's secrets: the Harness bearer derived per Sandbox, and the API tokens callers
// present. The bearer is an HMAC of the Sandbox's name under the signing key (decision 0011),
// so a restarted Orchestrator derives the same one and nothing needs storing; the
// Harness holds only its SHA-256 (harness/auth.ts, JR2_HARNESS_TOKEN_SHA256).
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { readFile } from "node:fs/promises";

/** Domain separation: one signing key may derive other per-Sandbox secrets later (decision 0011),
 * and none may equal another. */
const HARNESS_PURPOSE = "jr2/harness-bearer/v1";
const SANDBOX_TOKEN_PURPOSE = "jr2/sandbox-token/v1";
const STAND_IN_PURPOSE = "jr2/stand-in/v1";
const EFFECTOR_KEY_PURPOSE = "jr2/effector-key/v1";

/** Shorter keys are refused: HMAC-SHA256's strength is its key's. */
export const MIN_SIGNING_KEY_BYTES = 32;

/** The Harness bearer for one Sandbox: HMAC-SHA256(signingKey, purpose NUL name), base64url. */
export function harnessToken(signingKey: Buffer, sandboxName: string): string {
  return createHmac("sha256", signingKey).update(`${HARNESS_PURPOSE}\0${sandboxName}`, "utf8").digest("base64url");
}

/** The Sandbox token the Custodian adds to the Harness's calls to the Orchestrator (the Harness
 * never holds it). Derived like the bearer, so a re-provision writes the same Secret. */
export function sandboxToken(signingKey: Buffer, sandboxName: string): string {
  return createHmac("sha256", signingKey)
    .update(`${SANDBOX_TOKEN_PURPOSE}\0${sandboxName}`, "utf8")
    .digest("base64url");
}

/** A checker of a Sandbox's token (what its Custodian adds), constant in time: both sides hashed to
 * 32 bytes, so neither a length nor a prefix shows. */
export function sandboxTokenChecker(signingKey: Buffer): (sandboxName: string, candidate: string) => boolean {
  return (sandboxName, candidate) => {
    const want = createHash("sha256").update(sandboxToken(signingKey, sandboxName), "utf8").digest();
    const got = createHash("sha256").update(candidate, "utf8").digest();
    return timingSafeEqual(got, want);
  };
}

/** The Effector's key (decision 0021): what its requests are signed with, per Sandbox. */
export function effectorKey(signingKey: Buffer, sandboxName: string): string {
  return createHmac("sha256", signingKey).update(`${EFFECTOR_KEY_PURPOSE}\0${sandboxName}`, "utf8").digest("base64url");
}

/** The Stand-in of one held value in one Sandbox: 24 derived bytes (api/custodian-config.ts standInFrom),
 * the same on every provision, different in every Sandbox. */
export function standInBytes(signingKey: Buffer, sandboxName: string, secret: string, key: string): Buffer {
  return createHmac("sha256", signingKey)
    .update(`${STAND_IN_PURPOSE}\0${sandboxName}\0${secret}\0${key}`, "utf8")
    .digest()
    .subarray(0, 24);
}

/** What the Harness checks a bearer against: SHA-256 of the token's UTF-8 bytes, hex. */
export function tokenDigest(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** The signing key: the file's bytes, one trailing newline dropped (an `echo`ed file has one). */
export function signingKeyOf(bytes: Buffer): Buffer {
  let end = bytes.length;
  if (end > 0 && bytes[end - 1] === 0x0a) end--;
  if (end > 0 && bytes[end - 1] === 0x0d) end--;
  const key = bytes.subarray(0, end);
  if (key.length < MIN_SIGNING_KEY_BYTES) {
    throw new Error(
      `the signing key has ${key.length} bytes; it needs at least ${MIN_SIGNING_KEY_BYTES} ` +
        "(e.g. `head -c 32 /dev/urandom | base64 > signing-key`)",
    );
  }
  return key;
}

export const readSigningKey = async (path: string) => signingKeyOf(await readFile(path));

/**
 * Who a Machine's API token speaks for (decision 0042): an admin sees every workspace; a tenant
 * sees only the workspaces it created, and another's are as if they did not exist.
 */
export type Principal = { kind: "admin" } | { kind: "tenant"; tenant: string };

/** A tenant's name: it labels the workspaces it owns, so a label value (a DNS label here). */
export const TENANT_NAME = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export type ApiToken = { token: string; principal: Principal };

/**
 * The API tokens file, one token a line: `<token>` alone is an admin's, `<token> <tenant>` a
 * tenant's. Blank lines and `#` comments are ignored, surrounding spaces trimmed. A line with
 * anything else is refused by line number only: an error message must not carry a token.
 */
export function parseApiTokens(text: string): ApiToken[] {
  const tokens: ApiToken[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith("#")) return;
    const [token, tenant, ...rest] = line.split(/\s+/);
    const where = `the API tokens file, line ${i + 1}`;
    if (rest.length) throw new Error(`${where}: a line is "<token>" (an admin) or "<token> <tenant>", nothing more`);
    if (tenant === undefined) return void tokens.push({ token: token!, principal: { kind: "admin" } });
    if (!TENANT_NAME.test(tenant))
      throw new Error(`${where}: the tenant must be a DNS label (lower-case letters, digits, '-'), e.g. team-a`);
    tokens.push({ token: token!, principal: { kind: "tenant", tenant } });
  });
  return tokens;
}

export const readApiTokens = async (path: string) => parseApiTokens(await readFile(path, "utf8"));

/**
 * Who a candidate token speaks for, constant in time per token: each candidate and each token are
 * hashed to 32 bytes (so lengths never differ and never show), every token is compared, and no
 * comparison ends the loop early. No tokens: everything is refused (undefined).
 */
export function apiTokenChecker(tokens: readonly ApiToken[]): (candidate: string) => Principal | undefined {
  const digests = tokens.map((t) => ({ digest: createHash("sha256").update(t.token, "utf8").digest(), principal: t.principal }));
  return (candidate) => {
    const got = createHash("sha256").update(candidate, "utf8").digest();
    let found: Principal | undefined;
    for (const { digest, principal } of digests) if (timingSafeEqual(got, digest) && !found) found = principal;
    return found;
  };
}

/** Whether `principal` may see a workspace its `owner` tenant created (undefined: an admin's). */
export const maySee = (principal: Principal, owner: string | undefined): boolean =>
  principal.kind === "admin" || principal.tenant === owner;
