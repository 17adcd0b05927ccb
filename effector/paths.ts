// Paths the Effector resolves itself, in places the Agent writes (/work is the Agent's): every one
// through realpath and checked to stay under its root, so no symlink leads out (decision 0070).
import { closeSync, fstatSync, openSync, readlinkSync, readSync, realpathSync, constants } from "node:fs";
import { join } from "node:path";

export const inside = (root: string, p: string) => p === root || p.startsWith(root.endsWith("/") ? root : `${root}/`);

export class PathRefused extends Error {}

/** `p`'s real path, which must lie under one of `roots` (each taken by its real path). */
export function realInside(p: string, roots: readonly string[], what: string): string {
  let real: string;
  try {
    real = realpathSync(p);
  } catch (err) {
    throw new PathRefused(`${what} ${p} does not exist (${(err as NodeJS.ErrnoException).code})`);
  }
  const realRoots = roots.flatMap((r) => {
    try {
      return [realpathSync(r)];
    } catch {
      return [];
    }
  });
  if (!realRoots.some((r) => inside(r, real)))
    throw new PathRefused(`${what} ${p} leads out of ${roots.join(" or ")} (to ${real}): refused`);
  return real;
}

/** A relative path with no `..` component and no NUL. */
export function relativeProblem(path: string): string | undefined {
  if (path.startsWith("/") || path.includes("\0") || path.split("/").includes(".."))
    return "must be a relative path with no '..' component";
  return undefined;
}

/**
 * Reads a regular file at `root`/`path`, at most `maxBytes`, proving the file OPENED is under
 * `root` (its /proc/self/fd link), so a component swapped for a symlink between the check and the
 * open is caught too.
 */
export function readFileInside(root: string, path: string, maxBytes: number): Buffer {
  const problem = relativeProblem(path);
  if (problem) throw new PathRefused(`file ${path} ${problem}`);
  const realRoot = realpathSync(root);
  const real = realInside(join(realRoot, path), [realRoot], "file");
  let fd: number;
  try {
    fd = openSync(real, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    throw new PathRefused(`file ${path} cannot be opened (${(err as NodeJS.ErrnoException).code})`);
  }
  try {
    const opened = readlinkSync(`/proc/self/fd/${fd}`);
    if (!inside(realRoot, opened)) throw new PathRefused(`file ${path} leads out of its worktree: refused`);
    const st = fstatSync(fd);
    if (!st.isFile()) throw new PathRefused(`file ${path} is not a regular file: refused`);
    if (st.size > maxBytes)
      throw new PathRefused(`file ${path} is ${st.size} bytes, more than ${maxBytes}: send a smaller file`);
    const buf = Buffer.alloc(st.size);
    let off = 0;
    while (off < st.size) {
      const n = readSync(fd, buf, off, st.size - off, off);
      if (n === 0) break;
      off += n;
    }
    return buf.subarray(0, off);
  } finally {
    closeSync(fd);
  }
}
