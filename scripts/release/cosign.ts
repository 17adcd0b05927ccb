// cosign, built from its pinned Go module (scripts/release/cosign.sh, decision 0073), and the few
// calls a release makes with it: a key pair, a signature, an SPDX attestation, and their checks.
// Offline by design: nothing goes to a transparency log (`--tlog-upload=false`), so a check names
// the release's public key and skips the log (`--insecure-ignore-tlog`).
import { spawnSync } from "node:child_process";
import { join } from "node:path";

const ROOT = join(__dirname, "..", "..");

/** The cosign binary's path, built on first use and cached by version. */
export function cosignBin(): string {
  const r = spawnSync("bash", [join(ROOT, "scripts", "release", "cosign.sh")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  if (r.status !== 0) throw new Error("scripts/release/cosign.sh could not build cosign (its output is above)");
  return r.stdout.trim();
}

export type CosignResult = { status: number | null; out: string };

/** Runs cosign; `password` is the private key's (COSIGN_PASSWORD), never logged. */
export function cosign(bin: string, args: string[], o: { password?: string; cwd?: string } = {}): CosignResult {
  const r = spawnSync(bin, args, {
    encoding: "utf8",
    cwd: o.cwd,
    env: {
      ...process.env,
      ...(o.password !== undefined ? { COSIGN_PASSWORD: o.password } : {}),
    },
    maxBuffer: 64 << 20,
  });
  return { status: r.status, out: `${r.stdout ?? ""}${r.stderr ?? ""}` };
}

export function cosignOk(bin: string, args: string[], o: { password?: string; cwd?: string } = {}): string {
  const r = cosign(bin, args, o);
  if (r.status !== 0) throw new Error(`cosign ${args[0]} failed (exit ${r.status}): ${r.out.trim()}`);
  return r.out;
}

/** The flags of a signature or attestation made offline: no transparency log, no prompt. cosign 3
 * otherwise fetches the public instance's signing config (its log and its certificate authority). */
export const SIGN_FLAGS = ["--use-signing-config=false", "--tlog-upload=false", "--yes"];
/** The flags of a check of one: the release's public key, no transparency log. */
export const VERIFY_FLAGS = (publicKey: string) => ["--key", publicKey, "--insecure-ignore-tlog=true"];

/** Signs `ref` (repo@digest). */
export const sign = (bin: string, key: string, ref: string, password: string) =>
  cosignOk(bin, ["sign", "--key", key, ...SIGN_FLAGS, ref], { password });

/** Attaches `predicate` (an SPDX JSON file) to `ref` as a signed attestation. */
export const attestSbom = (bin: string, key: string, ref: string, predicate: string, password: string) =>
  cosignOk(bin, ["attest", "--key", key, "--type", "spdxjson", "--predicate", predicate, ...SIGN_FLAGS, ref], {
    password,
  });

/** `cosign verify` of `ref` with `publicKey`. */
export const verifySignature = (bin: string, publicKey: string, ref: string) =>
  cosign(bin, ["verify", ...VERIFY_FLAGS(publicKey), "--output", "json", ref]);

/** `cosign verify-attestation --type spdxjson` of `ref` with `publicKey`. */
export const verifySbom = (bin: string, publicKey: string, ref: string) =>
  cosign(bin, ["verify-attestation", ...VERIFY_FLAGS(publicKey), "--type", "spdxjson", "--output", "json", ref]);

/** What refers to `ref` (`cosign tree`): each referrer's type (the signature's
 * https://sigstore.dev/cosign/sign/v1, an SPDX attestation's https://spdx.dev/Document) and ref. */
export function referrers(bin: string, ref: string): Array<{ type: string; ref: string }> {
  const out = cosignOk(bin, ["tree", ref]);
  return [...out.matchAll(/^\S*\s*\S+ (\S+) artifacts via OCI referrer: (\S+)$/gm)].map((m) => ({
    type: m[1],
    ref: m[2],
  }));
}

export const SIGNATURE_TYPE = "https://sigstore.dev/cosign/sign/v1";
export const SPDX_TYPE = "https://spdx.dev/Document";
