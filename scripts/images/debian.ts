// The images' base: a Debian rootfs made by mmdebstrap from Debian's own packages, each at the
// version scripts/images/debian.lock names (docs/decisions/0041-images-without-an-engine.md). The
// mirror is this machine's (its apt sources); the lock, not the mirror, decides the content.
import { spawnSync } from "node:child_process";
import {
  appendFileSync,
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { BASE_PACKAGES, RUN_USER } from "./spec";

// Debian's stable release (decision 0041, amended): bookworm became oldstable when trixie was released.
export const SUITE = "trixie";
export const ARCH = "amd64";
export const LOCK_FILE = join(__dirname, "debian.lock");

/** Where the host keeps its apt sources: deb822 first, the one-line format after. */
export const HOST_SOURCES = ["/etc/apt/sources.list.d/debian.sources", "/etc/apt/sources.list"];

export type LockedPackage = { name: string; version: string; arch: string };

/** One `deb` entry of the host's apt sources. */
type DebEntry = { uri: string; suite: string; components: string };

/** The host's `deb` entries, from deb822 (`Types`, `URIs`, `Suites`, `Components`) or one-line text. */
function debEntries(text: string): DebEntry[] {
  const out: DebEntry[] = [];
  // A comment line is not a blank line: it does not end a deb822 paragraph.
  const lines = text
    .split("\n")
    .filter((l) => !l.trimStart().startsWith("#"))
    .map((l) => l.trimEnd());
  if (lines.some((l) => /^(Types|URIs|Suites):/i.test(l))) {
    for (const para of lines.join("\n").split(/\n\s*\n/)) {
      const field = (name: string) => {
        const m = new RegExp(`^${name}:[ \\t]*(.*)$`, "im").exec(para);
        return m ? m[1].trim().split(/\s+/).filter(Boolean) : [];
      };
      if (!field("Types").includes("deb") || /^Enabled:\s*no/im.test(para)) continue;
      for (const uri of field("URIs"))
        for (const suite of field("Suites")) out.push({ uri, suite, components: field("Components").join(" ") });
    }
  } else {
    for (const l of lines) {
      const m = /^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.+)$/.exec(l.trim());
      if (m) out.push({ uri: m[1], suite: m[2], components: m[3].trim() });
    }
  }
  return out;
}

/**
 * The `deb URI SUITE COMPONENTS` lines for `suite` and its -updates and -security suites, from the
 * host's sources. A suite the host does not list is derived from the host's own release
 * (`hostSuite`, its /etc/os-release VERSION_CODENAME): Debian serves every release from the same
 * mirror, so bookworm's `URI` and `bookworm-security`'s give trixie's and `trixie-security`'s. The
 * host's files are read, never written. Pure.
 */
export function mirrorLines(text: string, suite = SUITE, hostSuite?: string): string[] {
  const entries = debEntries(text);
  const out: string[] = [];
  for (const suffix of ["", "-updates", "-security"]) {
    const direct = entries.filter((e) => e.suite === `${suite}${suffix}`);
    const from =
      direct.length || !hostSuite
        ? direct
        : entries.filter((e) => e.suite === `${hostSuite}${suffix}`).map((e) => ({ ...e, suite: `${suite}${suffix}` }));
    for (const e of from) {
      const line = `deb ${e.uri} ${e.suite} ${e.components}`;
      if (!out.includes(line)) out.push(line);
    }
  }
  return out;
}

/** The host's Debian release (VERSION_CODENAME of /etc/os-release), or undefined. */
export function hostCodename(osRelease = "/etc/os-release"): string | undefined {
  if (!existsSync(osRelease)) return undefined;
  return /^VERSION_CODENAME="?([a-z]+)"?$/m.exec(readFileSync(osRelease, "utf8"))?.[1];
}

export function hostMirrorLines(): string[] {
  const host = hostCodename();
  for (const file of HOST_SOURCES) {
    if (!existsSync(file)) continue;
    const lines = mirrorLines(readFileSync(file, "utf8"), SUITE, host);
    if (lines.length) return lines;
  }
  throw new Error(
    `no Debian ${SUITE} source in ${HOST_SOURCES.join(" or ")}, and none of this machine's own release (${host ?? "no VERSION_CODENAME in /etc/os-release"}) to derive it from: the base image is made from this machine's Debian mirror; add one (deb822: Types: deb, URIs, Suites: ${SUITE} ${SUITE}-updates, Components: main)`,
  );
}

/** The lock's packages: `name version arch` a line, `#` comments. */
export function parseLock(text: string): LockedPackage[] {
  const out: LockedPackage[] = [];
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.replace(/#.*$/, "").trim();
    if (!line) continue;
    const parts = line.split(/\s+/);
    if (parts.length !== 3) throw new Error(`${LOCK_FILE}:${i + 1}: expected "name version arch", got "${line}"`);
    out.push({ name: parts[0], version: parts[1], arch: parts[2] });
  }
  return out;
}

export function formatLock(packages: LockedPackage[]): string {
  const sorted = [...packages].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return (
    [
      "# Every Debian package of the images' base, at its exact version (docs/decisions/0041-images-without-an-engine.md).",
      `# Debian ${SUITE}, essential variant plus: ${BASE_PACKAGES.join(", ")} (scripts/images/spec.ts).`,
      "# Written by `npm run images -- --lock-debian`; a build installs exactly these or fails.",
      ...sorted.map((p) => `${p.name} ${p.version} ${p.arch}`),
    ].join("\n") + "\n"
  );
}

/** The installed packages of a rootfs, from its dpkg status. */
export function installedPackages(rootfs: string): LockedPackage[] {
  const text = readFileSync(join(rootfs, "var", "lib", "dpkg", "status"), "utf8");
  const out: LockedPackage[] = [];
  for (const para of text.split(/\n\n+/)) {
    const get = (f: string) => new RegExp(`^${f}: (.*)$`, "m").exec(para)?.[1];
    const name = get("Package");
    if (!name || !/install ok installed/.test(get("Status") ?? "")) continue;
    out.push({ name, version: get("Version")!, arch: get("Architecture")! });
  }
  return out;
}

/** How the installed set differs from the lock, one line each; empty when they agree. */
export function lockDrift(lock: LockedPackage[], installed: LockedPackage[]): string[] {
  const want = new Map(lock.map((p) => [p.name, p]));
  const have = new Map(installed.map((p) => [p.name, p]));
  const out: string[] = [];
  for (const p of lock) {
    const h = have.get(p.name);
    if (!h) out.push(`${p.name} ${p.version}: locked, not installed`);
    else if (h.version !== p.version || h.arch !== p.arch)
      out.push(`${p.name}: locked ${p.version} ${p.arch}, the mirror gave ${h.version} ${h.arch}`);
  }
  for (const h of installed) if (!want.has(h.name)) out.push(`${h.name} ${h.version}: installed, not locked`);
  return out;
}

/** apt preferences holding every package to its locked version. */
export function preferences(lock: LockedPackage[]): string {
  return lock.map((p) => `Package: ${p.name}\nPin: version ${p.version}\nPin-Priority: 1001\n`).join("\n");
}

export function requireRootAndMmdebstrap(): void {
  if (process.getuid?.() !== 0) {
    throw new Error(
      "building the Debian base needs root (mmdebstrap --mode=root, files owned by their packages' users): run npm run images as root",
    );
  }
  const r = spawnSync("mmdebstrap", ["--version"], { encoding: "utf8" });
  if (r.error || r.status !== 0) {
    throw new Error(
      "mmdebstrap is not installed: it makes the Debian base from Debian's packages. Install it: apt-get install mmdebstrap",
    );
  }
}

/**
 * Runs mmdebstrap into `rootfs`: Debian's Essential set and BASE_PACKAGES, with docs, man pages and
 * translations left out (copyright files kept), at the locked versions when `lock` is given.
 * Downloaded .debs are kept in `debCache` for the next run.
 */
export function mmdebstrap(o: {
  rootfs: string;
  lock?: LockedPackage[];
  debCache: string;
  work: string;
  epoch: number;
  log: (s: string) => void;
}) {
  requireRootAndMmdebstrap();
  mkdirSync(o.debCache, { recursive: true });
  mkdirSync(o.work, { recursive: true });
  const include = o.lock ? o.lock.map((p) => p.name) : BASE_PACKAGES;
  const args = [
    "--mode=root",
    "--variant=essential",
    `--architectures=${ARCH}`,
    `--include=${include.join(",")}`,
    '--aptopt=Acquire::Languages "none"',
    // The work directory is root's: apt's _apt sandbox user could not write its downloads there.
    '--aptopt=APT::Sandbox::User "root"',
    // No fsync per file: a crash costs a rebuild, not a broken image (the rootfs is thrown away).
    "--dpkgopt=force-unsafe-io",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/info/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-include=/usr/share/doc/*/copyright",
    // Keep the downloaded .debs across runs (mmdebstrap's own recipe for a package cache).
    "--skip=download/empty",
    "--skip=essential/unlink",
    `--setup-hook=mkdir -p "$1"/var/cache/apt/archives/`,
    `--setup-hook=sync-in ${o.debCache} /var/cache/apt/archives/`,
    `--customize-hook=sync-out /var/cache/apt/archives ${o.debCache}`,
  ];
  if (o.lock) {
    const prefs = join(o.work, "jr2-lock.pref");
    writeFileSync(prefs, preferences(o.lock));
    args.push(
      `--setup-hook=mkdir -p "$1"/etc/apt/preferences.d`,
      `--setup-hook=upload ${prefs} /etc/apt/preferences.d/jr2-lock.pref`,
    );
  }
  args.push(SUITE, o.rootfs, ...hostMirrorLines());
  o.log(`mmdebstrap ${SUITE} (${include.length} packages) into ${o.rootfs}`);
  const r = spawnSync("mmdebstrap", args, {
    env: { ...process.env, SOURCE_DATE_EPOCH: String(o.epoch), TMPDIR: o.work },
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (r.status !== 0) throw new Error(`mmdebstrap failed (exit ${r.status ?? r.signal}): its errors are above`);
}

/**
 * What the image keeps of the rootfs mmdebstrap made: no apt (not installed; its config, lists and
 * caches were mmdebstrap's), no mmdebstrap settings, no -old backups or logs, no device nodes (the runtime provides /dev),
 * no host name or resolver (the runtime writes them); the run user added.
 */
export function finishRootfs(rootfs: string, epoch: number) {
  const rm = (rel: string) => rmSync(join(rootfs, rel), { recursive: true, force: true });
  for (const rel of ["etc/apt", "var/lib/apt", "var/cache/apt", "var/log/apt", "etc/hostname", "etc/resolv.conf"])
    rm(rel);
  // mmdebstrap's --dpkgopt file: build settings, not the image's.
  rm("etc/dpkg/dpkg.cfg.d/99mmdebstrap");
  for (const rel of ["var/lib/dpkg", "var/cache/debconf"]) {
    for (const f of readdirSync(join(rootfs, rel)))
      if (f.endsWith("-old") || f === "lock" || f === "lock-frontend") rm(`${rel}/${f}`);
  }
  // passwd-, group-, shadow-, gshadow-: the backups the user tools leave.
  for (const f of readdirSync(join(rootfs, "etc"))) if (f.endsWith("-")) rm(`etc/${f}`);
  for (const f of readdirSync(join(rootfs, "var/log"))) if (f.endsWith(".log")) rm(`var/log/${f}`);
  for (const dir of ["dev", "proc", "sys", "run", "tmp"])
    for (const f of readdirSync(join(rootfs, dir))) rm(`${dir}/${f}`);
  // The run user (decision 0041): ssh and git look the uid up; shadow's date is the build's epoch.
  const u = RUN_USER;
  const day = Math.floor(epoch / 86400);
  const has = (file: string) =>
    readFileSync(join(rootfs, file), "utf8")
      .split("\n")
      .some((l) => l.startsWith(`${u.name}:`));
  if (!has("etc/passwd")) {
    appendFileSync(join(rootfs, "etc/passwd"), `${u.name}:x:${u.uid}:${u.gid}:${u.name}:${u.home}:${u.shell}\n`);
    appendFileSync(join(rootfs, "etc/group"), `${u.name}:x:${u.gid}:\n`);
    appendFileSync(join(rootfs, "etc/shadow"), `${u.name}:!:${day}::::::\n`);
    appendFileSync(join(rootfs, "etc/gshadow"), `${u.name}:!::\n`);
  }
  const home = join(rootfs, u.home.slice(1));
  mkdirSync(home, { recursive: true });
  chownSync(home, u.uid, u.gid);
  chmodSync(home, 0o755);
  chmodSync(join(rootfs, "tmp"), 0o1777);
}
