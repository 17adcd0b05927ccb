// `npm run images -- --check-security`: whether scripts/images/debian.lock is behind Debian's security
// updates (docs/decisions/0078-a-release-ships-current-parts.md). It reads the suite's -security
// Packages index from the mirror this machine's apt sources name (debian.ts hostMirrorLines), its
// InRelease checked with gpgv against Debian's archive keyring and the index against InRelease's
// SHA256, and names each locked package whose version is older than the security suite's, by
// Debian's version ordering (dpkg's). The comparison is pure; the test holds it to dpkg's own.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ARCH, LOCK_FILE, SUITE, hostMirrorLines, parseLock, type LockedPackage } from "./debian";

/** Debian's archive keyring, as the debian-archive-keyring package installs it. */
export const ARCHIVE_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg";

/** dpkg's ordering of one character of a non-digit run: `~` before the end, letters before the rest. */
function order(c: string | undefined): number {
  if (c === undefined || /[0-9]/.test(c)) return 0;
  if (/[A-Za-z]/.test(c)) return c.charCodeAt(0);
  if (c === "~") return -1;
  return c.charCodeAt(0) + 256;
}

/** dpkg's verrevcmp: an upstream version or a revision against another. */
function verrevcmp(a: string, b: string): number {
  let i = 0;
  let j = 0;
  const digit = (s: string, k: number) => k < s.length && s[k] >= "0" && s[k] <= "9";
  while (i < a.length || j < b.length) {
    while ((i < a.length && !digit(a, i)) || (j < b.length && !digit(b, j))) {
      const ac = order(a[i]);
      const bc = order(b[j]);
      if (ac !== bc) return ac - bc;
      i++;
      j++;
    }
    while (a[i] === "0") i++;
    while (b[j] === "0") j++;
    let first = 0;
    while (digit(a, i) && digit(b, j)) {
      if (!first) first = a.charCodeAt(i) - b.charCodeAt(j);
      i++;
      j++;
    }
    if (digit(a, i)) return 1;
    if (digit(b, j)) return -1;
    if (first) return first;
  }
  return 0;
}

/** `[epoch:]upstream[-revision]`, split as dpkg splits it. */
function parts(v: string): { epoch: number; upstream: string; revision: string } {
  const colon = v.indexOf(":");
  const epoch = colon >= 0 ? Number(v.slice(0, colon)) : 0;
  const rest = colon >= 0 ? v.slice(colon + 1) : v;
  const dash = rest.lastIndexOf("-");
  return dash >= 0
    ? { epoch, upstream: rest.slice(0, dash), revision: rest.slice(dash + 1) }
    : { epoch, upstream: rest, revision: "" };
}

/** Debian's version ordering (dpkg --compare-versions): negative, zero or positive. Pure. */
export function compareDebianVersions(a: string, b: string): number {
  const x = parts(a);
  const y = parts(b);
  if (x.epoch !== y.epoch) return x.epoch - y.epoch;
  return verrevcmp(x.upstream, y.upstream) || verrevcmp(x.revision, y.revision);
}

/** A Packages index's newest version of each package (of `arch` or `all`). Pure. */
export function packagesIndex(text: string, arch = ARCH): Map<string, string> {
  const out = new Map<string, string>();
  for (const para of text.split(/\n\s*\n/)) {
    const get = (f: string) => new RegExp(`^${f}: *(.*)$`, "m").exec(para)?.[1]?.trim();
    const name = get("Package");
    const version = get("Version");
    const a = get("Architecture");
    if (!name || !version || (a !== arch && a !== "all")) continue;
    const held = out.get(name);
    if (!held || compareDebianVersions(version, held) > 0) out.set(name, version);
  }
  return out;
}

/** Each locked package older than the security suite's version, one line each. Pure. */
export function behindSecurity(lock: LockedPackage[], security: Map<string, string>, suite = SUITE): string[] {
  const out: string[] = [];
  for (const p of lock) {
    const fixed = security.get(p.name);
    if (fixed && compareDebianVersions(p.version, fixed) < 0)
      out.push(`${p.name}: locked ${p.version}, ${suite}-security has ${fixed}`);
  }
  return out;
}

/** The SHA256 InRelease gives `path` (e.g. main/binary-amd64/Packages.xz), or undefined. Pure. */
export function releaseSha256(inRelease: string, path: string): string | undefined {
  const section = /^SHA256:\n((?:[ \t].*\n?)*)/m.exec(inRelease)?.[1] ?? "";
  for (const line of section.split("\n")) {
    const [hash, , p] = line.trim().split(/\s+/);
    if (p === path) return hash;
  }
  return undefined;
}

async function get(url: string): Promise<Buffer> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`GET ${url}: ${res.status} ${res.statusText}`);
  return Buffer.from(await res.arrayBuffer());
}

/** The -security suite's Packages index, fetched from the host's mirror and checked. */
async function securityIndex(log: (s: string) => void): Promise<Map<string, string>> {
  const suite = `${SUITE}-security`;
  const lines = hostMirrorLines().filter((l) => l.split(" ")[2] === suite);
  if (!lines.length)
    throw new Error(`this machine's apt sources name no ${suite} (nor its own release's -security to derive it from)`);
  if (!existsSync(ARCHIVE_KEYRING))
    throw new Error(
      `${ARCHIVE_KEYRING} is missing: install debian-archive-keyring (apt-get install debian-archive-keyring)`,
    );
  const index = new Map<string, string>();
  const tmp = mkdtempSync(join(tmpdir(), "jr2-security-"));
  try {
    for (const line of lines) {
      const [, uri, , ...components] = line.split(" ");
      const base = `${uri.replace(/\/$/, "")}/dists/${suite}`;
      writeFileSync(join(tmp, "InRelease"), await get(`${base}/InRelease`));
      const verified = join(tmp, "InRelease.txt");
      const v = spawnSync("gpgv", ["--keyring", ARCHIVE_KEYRING, "--output", verified, join(tmp, "InRelease")], {
        encoding: "utf8",
      });
      if (v.status !== 0)
        throw new Error(`${base}/InRelease: its signature is not Debian's (gpgv: ${v.stderr.trim()})`);
      const release = readFileSync(verified, "utf8");
      for (const component of components) {
        const path = `${component}/binary-${ARCH}/Packages.xz`;
        const want = releaseSha256(release, path);
        if (!want) throw new Error(`${base}/InRelease lists no ${path}`);
        const xz = await get(`${base}/${path}`);
        const have = createHash("sha256").update(xz).digest("hex");
        if (have !== want) throw new Error(`${base}/${path}: sha256 ${have}, InRelease says ${want}`);
        const text = spawnSync("xz", ["-dc"], { input: xz, maxBuffer: 1 << 30, encoding: "utf8" });
        if (text.status !== 0) throw new Error(`xz -dc ${path} failed: ${text.stderr} (apt-get install xz-utils)`);
        for (const [name, version] of packagesIndex(text.stdout)) {
          const held = index.get(name);
          if (!held || compareDebianVersions(version, held) > 0) index.set(name, version);
        }
        log(`${base}/${path}: ${index.size} packages`);
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return index;
}

/** --check-security: throws naming each locked package older than the security suite's. */
export async function checkSecurity(log: (s: string) => void): Promise<void> {
  const lock = parseLock(readFileSync(LOCK_FILE, "utf8"));
  const behind = behindSecurity(lock, await securityIndex(log));
  if (behind.length)
    throw new Error(
      `${LOCK_FILE} is behind Debian's security updates:\n  ${behind.join("\n  ")}\n` +
        "refresh it with `npm run images -- --lock-debian`, review and commit it, and build the images again",
    );
  log(`${LOCK_FILE}: ${lock.length} packages, none older than ${SUITE}-security's`);
}
