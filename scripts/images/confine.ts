// jr2-confine in the companions image (effector/confine/, decision 0070): the static binary
// scripts/confine-binary.sh builds (once per source fingerprint, reproducibly) and the layer
// entries that place it at CONFINE_PATH, root-owned and executable by all.
import { spawnSync } from "node:child_process";
import { statSync } from "node:fs";
import { join } from "node:path";
import { CONFINE_PATH } from "./spec";
import type { TarEntry } from "./tar";

/** The absolute path of the cached jr2-confine, built first when missing (Go 1.26+ on PATH). */
export function confineBinary(root = join(__dirname, "..", "..")): string {
  const r = spawnSync("bash", [join(root, "scripts", "confine-binary.sh")], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  const path = r.stdout?.trim() ?? "";
  if (r.error || r.status !== 0 || !path.startsWith("/"))
    throw new Error(
      `scripts/confine-binary.sh failed (exit ${r.status}${r.error ? `, ${r.error.message}` : ""}): its output is above`,
    );
  return path;
}

/** The layer's entries: CONFINE_PATH's directory and the binary, 0755, owned by root. */
export function confineEntries(binary: string): TarEntry[] {
  const dir = CONFINE_PATH.slice(1, CONFINE_PATH.lastIndexOf("/"));
  return [
    { path: dir, type: "dir", mode: 0o755, uid: 0, gid: 0 },
    {
      path: CONFINE_PATH.slice(1),
      type: "file",
      mode: 0o755,
      uid: 0,
      gid: 0,
      size: statSync(binary).size,
      source: { file: binary },
    },
  ];
}
