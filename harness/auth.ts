// The bearer check for POST /attach. The pod holds only the token's SHA-256, so a leaked pod spec
// or environment dump does not leak a usable token.
import { createHash, timingSafeEqual } from "node:crypto";
import { bearerOf } from "../lib/http-json";

const SHA256_HEX = /^[0-9a-f]{64}$/i;

/** True when sha256(token) equals the expected hex digest; a malformed digest matches nothing. */
export function tokenMatches(token: string, expectedSha256Hex: string | undefined): boolean {
  if (!expectedSha256Hex || !SHA256_HEX.test(expectedSha256Hex)) return false;
  const got = createHash("sha256").update(token, "utf8").digest();
  const want = Buffer.from(expectedSha256Hex, "hex");
  // timingSafeEqual throws on unequal lengths; both are 32 bytes here, checked anyway.
  return got.length === want.length && timingSafeEqual(got, want);
}

/** The whole check on a request's Authorization header. */
export function authorized(header: string | undefined, expectedSha256Hex: string | undefined): boolean {
  const token = bearerOf(header);
  return token !== undefined && tokenMatches(token, expectedSha256Hex);
}
