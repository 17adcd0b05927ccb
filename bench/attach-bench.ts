// Benchmark: the Harness's attach of a large repository versus a full `git clone` of it (decision 0010).
// A generated repository (20,000 files, 2,000 commits) is built once and kept under
// the cache directory; each run makes a bare node cache of it the cache agent's way, then times
// (a) POST /attach to an in-process Harness (a shared clone plus a worktree into a fresh /work) and
// (b) `git clone --no-local` (objects really copied, as over a network). Sizes are the pod-local
// `.git` of the attach against the full clone's `.git`. One untimed warm-up round comes first; p50
// and max are over the timed runs. Needs git, no cluster.
//   BENCH_ATTACH_RUNS=5 (default)   TMPDIR picks the filesystem /repos, /work and the clones live on
import { execFile, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import { lstat, mkdir, mkdtemp, readdir, rename, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { ensureCache } from "../cache-agent/bare-checkouts";
import { startHarness } from "../harness/harness-server";
import { CACHE_DIR } from "../dev/local-operator";
import type { Result } from "./sandbox-burst-bench";
import { percentile, round } from "./stats";

const B = "attach";
const FILES = 20_000;
const COMMITS = 2_000;
const FILES_PER_COMMIT = FILES / COMMITS; // the tree grows over the whole history
const EDITS_PER_COMMIT = 8; // files changed in place per commit, after the first
/** Bump the suffix when the generator changes, so a stale cached repository is not reused. */
const REPO_DIR = path.join(CACHE_DIR, "bench", "attach-repo-v1");
const KEY = "bench-attach";
const BRANCH = "jr2/bench";

const mib = (bytes: number) => round(bytes / (1 << 20));
const seconds = (ms: number) => round(ms / 1000);
const log = (line: string) => process.stderr.write(`attach: ${line}\n`);

/** The environment without inherited GIT_* (a hook's GIT_DIR must not redirect these commands). */
function gitEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("GIT_")));
  return { ...env, LC_ALL: "C", GIT_TERMINAL_PROMPT: "0" };
}

function git(args: string[], cwd?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("git", args, { cwd, env: gitEnv(), encoding: "utf8", maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`git ${args.join(" ")} failed: ${stderr.trim() || err.message}`));
      else resolve(stdout);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// The generated repository

/** mulberry32: a small seeded PRNG, so every build of the repository is the same repository. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Gen = { rand: () => number; words: string[] };

const pick = <T>(g: Gen, xs: readonly T[]) => xs[Math.floor(g.rand() * xs.length)];

/** Source-like lines from a fixed vocabulary: compresses about as well as real code does. */
function line(g: Gen): string {
  const [a, b, c] = [pick(g, g.words), pick(g, g.words), pick(g, g.words)];
  const n = Math.floor(g.rand() * 10_000);
  switch (Math.floor(g.rand() * 4)) {
    case 0:
      return `export const ${a}${n} = ${b}(${c}, ${n});`;
    case 1:
      return `  if (${a}.${b} > ${n}) return ${c}(${a}, "${b} ${c}");`;
    case 2:
      return `  // ${a} ${b} ${c}: ${pick(g, g.words)} ${pick(g, g.words)} ${n}`;
    default:
      return `function ${a}${b}(${c}: number): string { return String(${c} + ${n}); }`;
  }
}

/** A file of 20 to 120 lines (about 3 KB on average). */
const fileLines = (g: Gen) => Array.from({ length: 20 + Math.floor(g.rand() * 100) }, () => line(g));

/** Spreads files over 20 packages x 20 modules, 50 files each, so every directory grows over time. */
const filePath = (k: number) => `pkg-${k % 20}/mod-${Math.floor(k / 20) % 20}/file-${Math.floor(k / 400)}.ts`;

/** A few lines rewritten and one appended: a small delta, like most commits. */
function edit(g: Gen, lines: string[]): string[] {
  const out = [...lines];
  for (let i = 0; i < 3; i++) out[Math.floor(g.rand() * out.length)] = line(g);
  out.push(line(g));
  return out;
}

function commitText(i: number, changes: [string, string][]): string {
  const when = 1_600_000_000 + i * 3600;
  const msg = `change ${i}\n`;
  const head = [
    "commit refs/heads/main",
    `author Bench <bench@example.invalid> ${when} +0000`,
    `committer Bench <bench@example.invalid> ${when} +0000`,
    `data ${Buffer.byteLength(msg)}`,
    msg,
  ];
  const mods = changes.map(([p, text]) => `M 100644 inline ${p}\ndata ${Buffer.byteLength(text)}\n${text}\n`);
  return `${head.join("\n")}${mods.join("")}\n`;
}

/** Streams the whole history into `git fast-import` in `dir` (one process, not 2,000 commits). */
async function fastImport(dir: string): Promise<void> {
  const child = spawn("git", ["fast-import", "--quiet"], {
    cwd: dir,
    env: gitEnv(),
    stdio: ["pipe", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
  const exited = once(child, "close");
  child.stdin.on("error", () => undefined); // a dying fast-import: reported by its exit below
  const g: Gen = { rand: prng(1), words: [] };
  g.words = Array.from({ length: 1500 }, () => Math.floor(g.rand() * 36 ** 6).toString(36));
  const files: string[][] = [];
  for (let i = 0; i < COMMITS; i++) {
    const changes: [string, string][] = [];
    for (let e = 0; i > 0 && e < EDITS_PER_COMMIT; e++) {
      const k = Math.floor(g.rand() * files.length);
      files[k] = edit(g, files[k]);
      changes.push([filePath(k), files[k].join("\n")]);
    }
    for (let k = i * FILES_PER_COMMIT; k < (i + 1) * FILES_PER_COMMIT; k++) {
      files[k] = fileLines(g);
      changes.push([filePath(k), files[k].join("\n")]);
    }
    if (!child.stdin.write(commitText(i, changes))) await once(child.stdin, "drain");
  }
  child.stdin.end();
  const [code] = (await exited) as [number | null];
  if (code !== 0) throw new Error(`git fast-import failed (exit ${code}): ${stderr.trim()}`);
}

/** Whether a complete repository is already cached (it is renamed into place only when complete). */
async function cached(dir: string): Promise<boolean> {
  try {
    await git(["rev-parse", "--verify", "--quiet", "refs/heads/main"], dir);
    return true;
  } catch {
    return false;
  }
}

/** The upstream repository (bare), built beside its final place and renamed there when done. */
export async function upstream(): Promise<string> {
  const t0 = performance.now();
  if (await cached(REPO_DIR)) {
    log(`repository ready (cached) in ${seconds(performance.now() - t0)} s: ${REPO_DIR}`);
    return REPO_DIR;
  }
  await rm(REPO_DIR, { recursive: true, force: true });
  await mkdir(path.dirname(REPO_DIR), { recursive: true });
  const tmp = await mkdtemp(`${REPO_DIR}.tmp-`);
  try {
    await git(["init", "--quiet", "--bare", "-b", "main", tmp]);
    log(`generating ${FILES} files over ${COMMITS} commits ...`);
    await fastImport(tmp);
    // fast-import's pack is loosely delta-compressed; a server's repository is repacked.
    log(`imported in ${seconds(performance.now() - t0)} s; repacking ...`);
    await git(["repack", "-a", "-d", "-f", "--quiet"], tmp);
    await rename(tmp, REPO_DIR);
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
  log(`repository generated (cold) in ${seconds(performance.now() - t0)} s: ${REPO_DIR}`);
  return REPO_DIR;
}

// ---------------------------------------------------------------------------------------------
// Measuring

/** Bytes of every file below `p` (apparent sizes, by lstat; directories themselves not counted). */
async function bytesUnder(p: string): Promise<number> {
  const st = await lstat(p);
  if (!st.isDirectory()) return st.size;
  let total = 0;
  for (const name of await readdir(p)) total += await bytesUnder(path.join(p, name));
  return total;
}

/** Bytes of the index files below `p` (`.git/index` and each worktree's). */
async function indexBytesUnder(p: string): Promise<number> {
  let total = 0;
  for (const e of await readdir(p, { withFileTypes: true })) {
    const q = path.join(p, e.name);
    if (e.isDirectory()) total += await indexBytesUnder(q);
    else if (e.isFile() && e.name === "index") total += (await lstat(q)).size;
  }
  return total;
}

type AttachRun = { ms: number; gitBytes: number; indexBytes: number };

/** One POST /attach to a Harness serving a fresh work root; the server's whole path, git included. */
async function attachOnce(reposRoot: string, workRoot: string): Promise<AttachRun> {
  const token = randomBytes(16).toString("hex");
  const tokenSha256 = createHash("sha256").update(token).digest("hex");
  const server = await startHarness({ workRoot, reposRoot, tokenSha256 }, 0, "127.0.0.1");
  try {
    const { port } = server.address() as AddressInfo;
    const slot = { slot: "app", url: "https://git.invalid/bench/app.git", identity: "git.invalid/bench/app", key: KEY };
    const t0 = performance.now();
    const res = await fetch(`http://127.0.0.1:${port}/attach`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ slots: [slot], branch: BRANCH }),
    });
    const text = await res.text();
    const ms = performance.now() - t0;
    if (res.status !== 200) throw new Error(`attach answered ${res.status}: ${text}`);
    // The pod-local git state: the default clone's .git (the worktree's admin dir lives inside it,
    // under worktrees/) plus the worktree's own `.git` pointer file.
    const dotGit = path.join(workRoot, "app", "default", ".git");
    const gitBytes = (await bytesUnder(dotGit)) + (await bytesUnder(path.join(workRoot, "app", BRANCH, ".git")));
    return { ms, gitBytes, indexBytes: await indexBytesUnder(dotGit) };
  } finally {
    // fetch keeps its connection alive; without closing it the server would linger for seconds.
    const closed = new Promise((resolve) => server.close(resolve));
    server.closeAllConnections();
    await closed;
  }
}

/** A full, non-shared clone; `--no-local` so objects go through pack transfer, as over a network. */
async function cloneOnce(source: string, dest: string): Promise<{ ms: number; gitBytes: number }> {
  const t0 = performance.now();
  await git(["clone", "--quiet", "--no-local", "--", source, dest]);
  const ms = performance.now() - t0;
  return { ms, gitBytes: await bytesUnder(path.join(dest, ".git")) };
}

const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);

/** Flushes earlier writes, so their writeback is not billed to the next timed step. */
const settle = () => new Promise<void>((resolve, reject) => execFile("sync", (err) => (err ? reject(err) : resolve())));

export async function attach(): Promise<Result[]> {
  const runs = Number(process.env.BENCH_ATTACH_RUNS ?? 5);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`BENCH_ATTACH_RUNS is not a positive integer: ${runs}`);
  const source = await upstream();
  const commits = Number((await git(["rev-list", "--count", "refs/heads/main"], source)).trim());
  const files = (await git(["ls-tree", "-r", "--name-only", "refs/heads/main"], source)).split("\n").length - 1;
  const tmp = await mkdtemp(path.join(os.tmpdir(), "jr2-bench-attach-"));
  try {
    const reposRoot = path.join(tmp, "repos");
    await mkdir(reposRoot);
    const t0 = performance.now();
    await ensureCache(reposRoot, KEY, source);
    log(`node cache built by ensureCache in ${seconds(performance.now() - t0)} s`);

    // Every run's files stay until the end: on ext4 without a journal, creating files soon after
    // deleting tens of thousands costs seconds of inode-bitmap scanning (ext4's recently_deleted()),
    // which would bill one run's cleanup to the next run's checkout.
    const attaches: AttachRun[] = [];
    const clones: { ms: number; gitBytes: number }[] = [];
    // One untimed round first: the first file creations after a mass deletion elsewhere on the
    // disk (an earlier bench's cleanup) can take ten times as long, for the reason above.
    const warm = await attachOnce(reposRoot, await mkdtemp(path.join(tmp, "warmup-")));
    const warmClone = await cloneOnce(source, path.join(tmp, "warmup-clone"));
    log(`warm-up (not counted): attach ${seconds(warm.ms)} s, full clone ${seconds(warmClone.ms)} s`);
    for (let i = 0; i < runs; i++) {
      const work = path.join(tmp, `work-${i}`);
      await mkdir(work);
      await settle();
      attaches.push(await attachOnce(reposRoot, work));
      const dest = path.join(tmp, `clone-${i}`);
      await settle();
      clones.push(await cloneOnce(source, dest));
      log(`run ${i + 1}/${runs}: attach ${seconds(attaches[i].ms)} s, full clone ${seconds(clones[i].ms)} s`);
    }
    return report({ files, commits, attaches, clones });
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

type Figures = { files: number; commits: number; attaches: AttachRun[]; clones: { ms: number; gitBytes: number }[] };

function report(f: Figures): Result[] {
  const a = sorted(f.attaches.map((r) => r.ms));
  const c = sorted(f.clones.map((r) => r.ms));
  // Sizes do not vary between runs; the last run's stand for all.
  const attachGit = f.attaches[f.attaches.length - 1].gitBytes;
  const attachIndex = f.attaches[f.attaches.length - 1].indexBytes;
  const cloneGit = f.clones[f.clones.length - 1].gitBytes;
  return [
    { bench: B, metric: "repo_files", value: f.files, unit: "count" },
    { bench: B, metric: "repo_commits", value: f.commits, unit: "count" },
    { bench: B, metric: "runs", value: f.attaches.length, unit: "count" },
    { bench: B, metric: "attach_p50_seconds", value: seconds(percentile(a, 50)), unit: "s", target: "<= 2" },
    { bench: B, metric: "attach_max_seconds", value: seconds(a[a.length - 1]), unit: "s", target: "<= 2" },
    { bench: B, metric: "full_clone_p50_seconds", value: seconds(percentile(c, 50)), unit: "s" },
    { bench: B, metric: "full_clone_max_seconds", value: seconds(c[c.length - 1]), unit: "s" },
    { bench: B, metric: "attach_git_mb", value: mib(attachGit), unit: "MB" },
    { bench: B, metric: "attach_git_index_mb", value: mib(attachIndex), unit: "MB" },
    { bench: B, metric: "full_clone_git_mb", value: mib(cloneGit), unit: "MB" },
    {
      bench: B,
      metric: "attach_git_percent_of_full_clone",
      value: round((100 * attachGit) / cloneGit),
      unit: "%",
      target: "<= 5",
    },
  ];
}
