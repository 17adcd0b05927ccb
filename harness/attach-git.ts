// The git steps of an attach: per slot, a shared clone of the node's bare cache as
// <work>/<slot>/default and a worktree on the Sandbox's branch beside it. Every step checks first
// or is idempotent, so a client may repeat an attach after any failure or restart.
import { execFile } from "node:child_process";
import { lstat, mkdir } from "node:fs/promises";
import path from "node:path";
import { DEFAULT_DIR, type AttachAnswer, type AttachBody, type RepoAnswer, type SlotSpec } from "../api/attach";
import { redact } from "../lib/redact";

export type Roots = { workRoot: string; reposRoot: string };
export type RunResult = { stdout: string; stderr: string };
/** Runs one program with its arguments, never through a shell. Rejects with a RunError. */
export type Runner = (file: string, args: string[]) => Promise<RunResult>;
export type Warn = (message: string) => void;

/** The default ACL: group members (the pod's fsGroup) may write everything created below. */
export const DEFAULT_ACL = "u::rwx,g::rwx,o::r-x";
// A clone of a large repository or its first checkout may take a while; a hung git must not hold
// the attach lock forever.
const COMMAND_TIMEOUT_MS = 10 * 60_000;

export class RunError extends Error {
  constructor(
    readonly file: string,
    readonly stderr: string,
    readonly code: string | number | undefined,
  ) {
    super(`${file} failed: ${stderr.trim() || `exit ${String(code)}`}`);
  }
}

/** A failed step: which slot, which step, and the command's own (redacted) words. */
export class AttachError extends Error {
  constructor(
    readonly slot: string,
    readonly step: string,
    detail: string,
  ) {
    super(`slot "${slot}": step "${step}" failed: ${redact(detail)}`);
  }
}

/** The real runner: execFile with an English, non-interactive git. The umask is the process's own. */
export const execRunner: Runner = (file, args) =>
  new Promise((resolve, reject) => {
    const env = { ...process.env, GIT_TERMINAL_PROMPT: "0", LC_ALL: "C" };
    const options = { encoding: "utf8" as const, env, maxBuffer: 16 << 20, timeout: COMMAND_TIMEOUT_MS };
    execFile(file, args, options, (err, stdout, stderr) => {
      if (err) reject(new RunError(file, stderr || err.message, err.code ?? undefined));
      else resolve({ stdout, stderr });
    });
  });

// The cache and the work tree may belong to other users (the cache agent, the pod's user);
// `-c` keeps the exception per command instead of in a global config file.
const git = (run: Runner, args: string[]) => run("git", ["-c", "safe.directory=*", ...args]);
// A local clone runs upload-pack in the cache with the `-c` options cleared (git treats the other
// repository's environment as its own), so the cache agent's root-owned cache would be refused as
// "dubious ownership" to the Harness's uid: upload-pack is told the exception itself.
const UPLOAD_PACK = "--upload-pack=git -c safe.directory=* upload-pack";

/** Whether git accepts `branch` as a branch name (`git check-ref-format --branch`). */
export async function checkBranchName(run: Runner, branch: string): Promise<boolean> {
  try {
    const { stdout } = await git(run, ["check-ref-format", "--branch", branch]);
    // --branch expands `@{-1}` inside a repository; only a name that stays itself is accepted.
    return stdout.trim() === branch;
  } catch {
    return false;
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await lstat(p);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}

/** Runs one step, turning any failure into an AttachError that names the slot and the step. */
async function step<T>(slot: string, name: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    const detail = err instanceof RunError ? err.stderr.trim() || err.message : (err as Error).message;
    throw new AttachError(slot, name, detail);
  }
}

/** The ACL is a nicety where supported: without setfacl or ACL support, the umask still applies. */
async function setDefaultAcl(run: Runner, dir: string, warn: Warn): Promise<void> {
  try {
    await run("setfacl", ["-d", "-m", DEFAULT_ACL, dir]);
  } catch (err) {
    const unsupported =
      err instanceof RunError && (err.code === "ENOENT" || /not supported|unsupported/i.test(err.stderr));
    if (!unsupported) throw err;
    warn(`setfacl on ${dir} skipped: ${err instanceof RunError ? err.message : String(err)}`);
  }
}

type SlotPaths = { slotDir: string; defaultDir: string; worktree: string; cache: string };

function slotPaths(roots: Roots, s: SlotSpec, branch: string): SlotPaths {
  const slotDir = path.resolve(roots.workRoot, s.slot);
  const worktree = path.resolve(slotDir, branch);
  // The schema and git's check keep these inside their roots; this is the last line of defence.
  if (!worktree.startsWith(slotDir + path.sep) || path.dirname(slotDir) !== path.resolve(roots.workRoot)) {
    throw new AttachError(s.slot, "paths", "slot or branch resolves outside the work root");
  }
  return {
    slotDir,
    defaultDir: path.join(slotDir, DEFAULT_DIR),
    worktree,
    cache: path.resolve(roots.reposRoot, s.key),
  };
}

/**
 * A shared clone: objects stay in the cache (alternates), so the clone costs only a checkout. True
 * when it cloned now: the clone then has both remotes and no worktree yet, so the attach skips the
 * git processes that would set them again and prune (each about 20 ms, a workspace's create waits
 * on them: decision 0063).
 */
async function cloneDefault(run: Runner, s: SlotSpec, p: SlotPaths, warn: Warn): Promise<boolean> {
  if (await exists(path.join(p.defaultDir, ".git"))) return false;
  await step(s.slot, "acl", () => setDefaultAcl(run, p.slotDir, warn));
  // `--branch` takes a branch or a tag (a tag leaves HEAD detached); git removes a failed clone,
  // so the `.git` check above stays a faithful "done" marker.
  const ref = s.ref ? ["--branch", s.ref] : [];
  // Index v4 (prefix-compressed paths) is stored in the clone's config, so the worktree's index uses
  // it too: the two indexes are nearly all of the pod-local .git. Checkout on every core.
  // The push url as `remote set-url --push` would write it; origin is the cache by the clone itself.
  const config = ["-c", "index.version=4", "-c", "checkout.workers=0", "-c", `remote.origin.pushurl=${s.url}`];
  await step(s.slot, "clone", () =>
    git(run, ["clone", "--shared", UPLOAD_PACK, ...config, ...ref, "--", p.cache, p.defaultDir]),
  );
  return true;
}

/** Fetch from the node's cache, push to the slot's url. Set every time: the url may carry a new token. */
async function setRemotes(run: Runner, s: SlotSpec, p: SlotPaths): Promise<void> {
  await step(s.slot, "remote", async () => {
    await git(run, ["-C", p.defaultDir, "remote", "set-url", "--", "origin", p.cache]);
    await git(run, ["-C", p.defaultDir, "remote", "set-url", "--push", "--", "origin", s.url]);
  });
}

/** The Sandbox's worktree. A branch left by an earlier, half-finished attach is reused, not reset. */
async function addWorktree(
  run: Runner,
  s: SlotSpec,
  p: SlotPaths,
  branch: string,
  o: { reviewSha?: string; cloned: boolean },
) {
  if (await exists(p.worktree)) return;
  await step(s.slot, "worktree", async () => {
    const repo = ["-C", p.defaultDir];
    // A worktree directory removed by hand leaves its registration behind, which blocks `add`.
    if (!o.cloned) await git(run, [...repo, "worktree", "prune"]);
    const known = await git(run, [...repo, "rev-parse", "--verify", "--quiet", `refs/heads/${branch}`]).then(
      () => true,
      () => false,
    );
    const start = o.reviewSha ? `${o.reviewSha}^{commit}` : "HEAD";
    const add = known ? ["--", p.worktree, branch] : ["-b", branch, "--", p.worktree, start];
    await git(run, [...repo, "worktree", "add", ...add]);
  });
}

async function attachSlot(run: Runner, roots: Roots, body: AttachBody, s: SlotSpec, warn: Warn) {
  const p = slotPaths(roots, s, body.branch);
  await step(s.slot, "mkdir", () => mkdir(p.slotDir, { recursive: true }));
  const cloned = await cloneDefault(run, s, p, warn);
  if (!cloned) await setRemotes(run, s, p);
  await addWorktree(run, s, p, body.branch, { reviewSha: body.reviewSha, cloned });
  const head = await step(s.slot, "head", () => git(run, ["-C", p.worktree, "rev-parse", "HEAD"]));
  return { path: p.worktree, branch: body.branch, head: head.stdout.trim() };
}

/** Attaches every slot in order; the first failure stops the attach (a repeat resumes it). */
export async function attach(run: Runner, roots: Roots, body: AttachBody, warn: Warn): Promise<AttachAnswer> {
  const entries: [string, RepoAnswer][] = [];
  for (const s of body.slots) entries.push([s.slot, await attachSlot(run, roots, body, s, warn)]);
  // fromEntries defines own properties, so a slot named `__proto__` is just a name.
  return { repos: Object.fromEntries(entries) };
}

/** One attach at a time: two clones into one slot would race. Callers queue in arrival order. */
export function createMutex() {
  let tail: Promise<unknown> = Promise.resolve();
  return <T>(fn: () => Promise<T>): Promise<T> => {
    const result = tail.then(fn);
    tail = result.catch(() => undefined);
    return result;
  };
}
