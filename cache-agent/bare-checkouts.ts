// The git layer of the per-node Repo cache agent: one bare checkout per repository under a cache
// root (`<root>/<key>`; the agent gives each namespace a root of its own, decision 0046), which
// pods mount read-only and `git clone --shared` from (their clones BORROW objects through
// alternates). The one invariant everything here serves: the cache never deletes an object. So:
// no `gc`, no `prune`, no pruning fetch, auto-gc and auto-maintenance off, and consolidation only
// with `repack -a -d -k` (unreachable objects are kept, in the new pack).
//
// Every git call goes through execFile (never a shell) with LC_ALL=C, GIT_TERMINAL_PROMPT=0, a
// timeout, and an environment cleared of inherited GIT_* variables. Credentials travel per command
// (environment or a temp file) and never reach git config, a stored url, or an error message.
//
// Network commands speak only the allowed protocols (never file://, ext:: or fd:: outside local
// mode), follow no redirect, and connect to the address the agent judged (decision 0066).
//
// Callers serialize calls per cache directory (one ensure/fetch/consolidate at a time per key):
// nothing here locks.
import { execFile } from "node:child_process";
import { mkdir, mkdtemp, readdir, rename, rm, rmdir, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { isIP } from "node:net";
import { redact, urlWithoutCredentials, userinfoOf } from "../lib/redact";
import { CACHE_AGENT_ENV } from "../api/env";
import { gitProtocolConfig } from "../api/repo-fetch-policy";

/** Credentials for one fetch; never stored. */
export type GitCreds =
  | { kind: "https-token"; token: string; username?: string }
  | { kind: "ssh-key"; privateKey: string; knownHosts?: string };

export type GitOptions = {
  /** Bound on a network command (fetch, ls-remote). Default 20 minutes. */
  networkTimeoutMs?: number;
  /** Bound on a local command (config, count-objects, pack-refs...). Default 1 minute. */
  commandTimeoutMs?: number;
  /** Observes the temp dir holding an ssh key, once written (tests assert its modes, and that it goes). */
  onSecretDir?: (dir: string) => void | Promise<void>;
  /** Local mode only (decision 0066): git may read a file:// url or path. Otherwise it speaks
   * only the network protocols (api/repo-fetch-policy.ts gitProtocolConfig). */
  allowFile?: boolean;
  /** The address the url's host was resolved to and judged by (decision 0066): git connects there
   * and nowhere a second lookup would say. */
  pin?: RemotePin;
  /** Aborts a running network command (the agent's byte bound, decision 0066). */
  signal?: AbortSignal;
};

/** Where git is to connect for a url whose host is a name: the address judged, for that host and port. */
export type RemotePin = { scheme: string; host: string; port: number; address: string };

export type EnsureOptions = GitOptions & {
  /** Bound on the initial clone (its fetch). Default 20 minutes. */
  cloneTimeoutMs?: number;
};

export type ConsolidateThresholds = {
  /** Consolidate when there are MORE than this many `objects/pack/*.pack`. Default 20. */
  maxPacks?: number;
  /** Consolidate when `git count-objects -v` reports MORE than this many loose objects. Default 5000. */
  maxLoose?: number;
  /** Bound on each consolidation command (repack may be long). Default 30 minutes. */
  timeoutMs?: number;
};

export const DEFAULT_CLONE_TIMEOUT_MS = 20 * 60_000;
export const DEFAULT_NETWORK_TIMEOUT_MS = 20 * 60_000;
export const DEFAULT_COMMAND_TIMEOUT_MS = 60_000;
export const DEFAULT_REPACK_TIMEOUT_MS = 30 * 60_000;
export const DEFAULT_MAX_PACKS = 20;
export const DEFAULT_MAX_LOOSE = 5000;
/** The username sent with a token when none is given (GitHub accepts any; GitLab wants `oauth2`). */
export const DEFAULT_TOKEN_USERNAME = "x-access-token";

/** Config set on every cache, created or adopted, before any fetch. */
export const CACHE_CONFIG: ReadonlyArray<readonly [string, string]> = [
  ["gc.auto", "0"], // no automatic gc after fetch: gc prunes
  ["gc.pruneExpire", "never"], // should anything run gc anyway, it keeps unreachable objects
  ["gc.reflogExpire", "never"],
  ["gc.reflogExpireUnreachable", "never"],
  ["maintenance.auto", "false"], // no automatic `git maintenance run --auto` (git >= 2.29)
  ["fetch.prune", "false"], // refs vanished upstream stay: clones may borrow what only they reach
  ["fetch.pruneTags", "false"],
];

/** Heads and tags, forced (upstream may rewrite history), straight into the bare repo's refs. */
export const FETCH_REFSPECS = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"];

/** A failed git command; its message has been through redact(). */
export class GitError extends Error {
  constructor(
    message: string,
    readonly timedOut = false,
  ) {
    super(message);
    this.name = "GitError";
  }
}

// ---------------------------------------------------------------------------------------------
// Secrets in urls (redaction itself is lib/redact.ts)

/** Everything secret in a url and credentials, in the spellings an error may show. */
function secretsOf(url: string, creds?: GitCreds): string[] {
  const out: string[] = [];
  const u = userinfoOf(url);
  if (u) {
    const [user, ...pass] = u.userinfo.split(":");
    const password = pass.join(":");
    // With a password both parts go; a lone http(s) user may be a token.
    if (password) out.push(password, safeDecode(password));
    else if (/^https?:\/\//i.test(u.scheme) && user) out.push(user, safeDecode(user));
  }
  if (creds?.kind === "https-token") out.push(creds.token, basicValue(creds));
  if (creds?.kind === "ssh-key") out.push(creds.privateKey.trim());
  return out;
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function basicValue(creds: { token: string; username?: string }): string {
  return Buffer.from(`${creds.username ?? DEFAULT_TOKEN_USERNAME}:${creds.token}`).toString("base64");
}

// ---------------------------------------------------------------------------------------------
// Running git

/** The process environment without inherited GIT_* (GIT_DIR from a hook, a stray GIT_CONFIG_*...).
 * An installation's trust bundle (JR2_CACHE_CA_FILE, a private forge's CA) is trusted beside the
 * system's certificates: curl verifies against the file and the hashed directory both. */
function baseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("GIT_")) env[k] = v;
  const ca = process.env[CACHE_AGENT_ENV.caFile];
  return {
    ...env,
    LC_ALL: "C",
    GIT_TERMINAL_PROMPT: "0",
    ...(ca ? { GIT_SSL_CAINFO: ca, GIT_SSL_CAPATH: SYSTEM_CA_DIR } : {}),
  };
}

/** Debian's hashed certificate directory (the images' ca-certificates package). */
const SYSTEM_CA_DIR = "/etc/ssl/certs";

type Run = {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs: number;
  secrets?: readonly string[];
  signal?: AbortSignal;
};

/** Runs git; a failure becomes a GitError naming the subcommand, with redacted stderr. */
export function git(args: string[], run: Run): Promise<string> {
  const env = { ...baseEnv(), ...run.env };
  const sub = args.find((a, i) => !a.startsWith("-") && args[i - 1] !== "-c") ?? "git";
  return new Promise((resolve, reject) => {
    execFile(
      "git",
      args,
      {
        cwd: run.cwd,
        env,
        encoding: "utf8",
        timeout: run.timeoutMs,
        maxBuffer: 16 << 20,
        windowsHide: true,
        signal: run.signal,
      },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        if (run.signal?.aborted)
          return reject(new GitError(`git ${sub} stopped: ${String(run.signal.reason ?? "aborted")}`));
        // err.message repeats the command line (which may hold a url with credentials): not used.
        const timedOut = err.killed === true && (err.signal === "SIGTERM" || err.signal === "SIGKILL");
        const why = timedOut
          ? `timed out after ${run.timeoutMs} ms`
          : `exit ${typeof err.code === "number" ? err.code : (err.code ?? err.signal ?? "?")}`;
        const detail = String(stderr ?? "")
          .trim()
          .slice(-4000);
        reject(new GitError(redact(`git ${sub} failed (${why})${detail ? `: ${detail}` : ""}`, run.secrets), timedOut));
      },
    );
  });
}

/** Single-quotes a word for the shell git runs GIT_SSH_COMMAND with. */
const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * Runs `fn` with an environment carrying `creds`: an Authorization header through GIT_CONFIG_*
 * (https), or a key in a 0600 file in a 0700 temp dir, removed in `finally` (ssh).
 */
async function withCreds<T>(
  creds: GitCreds | undefined,
  opts: GitOptions,
  fn: (env: NodeJS.ProcessEnv) => Promise<T>,
): Promise<T> {
  const pinned = sshPinOptions(opts.pin);
  if (!creds) return fn(pinned.length ? { GIT_SSH_COMMAND: ["ssh", "-o", "BatchMode=yes", ...pinned].join(" ") } : {});
  if (creds.kind === "https-token") {
    // No redirect is followed with a credential: it goes to the url its Secret was declared for
    // and nowhere else (decision 0046); a moved repository is a spec.url to update.
    return fn({
      GIT_CONFIG_COUNT: "2",
      GIT_CONFIG_KEY_0: "http.extraHeader",
      GIT_CONFIG_VALUE_0: `Authorization: Basic ${basicValue(creds)}`,
      GIT_CONFIG_KEY_1: "http.followRedirects",
      GIT_CONFIG_VALUE_1: "false",
    });
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), "jr2-cache-ssh-")); // mkdtemp makes it 0700
  try {
    const key = path.join(dir, "id");
    const keyText = creds.privateKey.endsWith("\n") ? creds.privateKey : `${creds.privateKey}\n`;
    await writeFile(key, keyText, { mode: 0o600, flag: "wx" });
    const ssh = ["ssh", "-i", shq(key), "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", ...pinned];
    if (creds.knownHosts !== undefined) {
      const known = path.join(dir, "known_hosts");
      await writeFile(known, creds.knownHosts, { mode: 0o600, flag: "wx" });
      ssh.push("-o", "StrictHostKeyChecking=yes", "-o", `UserKnownHostsFile=${shq(known)}`);
    } else {
      ssh.push("-o", "StrictHostKeyChecking=accept-new");
    }
    await opts.onSecretDir?.(dir);
    return await fn({ GIT_SSH_COMMAND: ssh.join(" ") });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Where git connects (decision 0066)

/** ssh connects to the judged address; its host key is still the host's name's. */
function sshPinOptions(pin: RemotePin | undefined): string[] {
  if (pin?.scheme !== "ssh") return [];
  return ["-o", shq(`HostName=${pin.address}`), "-o", shq(`HostKeyAlias=${pin.host}`)];
}

/**
 * The `-c` arguments and the url a network command runs with: the protocol allowlist, and for a
 * host that is a name, the address it was judged by. https and http keep their url (TLS checks
 * the name) and give curl the address (`http.curloptResolve`); git:// names the address in the
 * url (git's daemon takes no name); ssh's is in its command (withCreds). Pure.
 */
export function networkCommand(
  url: string,
  opts: Pick<GitOptions, "allowFile" | "pin">,
): { config: string[]; url: string } {
  // No redirect, with a credential or without: it would lead git to a host nobody judged (an
  // internal one), and a moved repository is a spec.url to update (decisions 0046, 0066).
  const config = [...gitProtocolConfig(opts.allowFile), "-c", "http.followRedirects=false"];
  const pin = opts.pin;
  if (!pin) return { config, url };
  const address = isIP(pin.address) === 6 ? `[${pin.address}]` : pin.address;
  if (pin.scheme === "https" || pin.scheme === "http")
    return { config: [...config, "-c", `http.curloptResolve=${pin.host}:${pin.port}:${address}`], url };
  if (pin.scheme === "git") {
    const u = new URL(url);
    u.hostname = address;
    return { config, url: u.toString() };
  }
  return { config, url };
}

// ---------------------------------------------------------------------------------------------
// The cache

const KEY = /^[a-z0-9][a-z0-9._-]{0,252}$/i;

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw err;
  }
}

/** Sets the cache config and the credential-free remote url on a bare repo. */
async function configure(dir: string, url: string, timeoutMs: number): Promise<void> {
  const run = { cwd: dir, timeoutMs };
  for (const [k, v] of CACHE_CONFIG) await git(["config", k, v], run);
  await git(["config", "remote.origin.url", urlWithoutCredentials(url)], { ...run, secrets: secretsOf(url) });
  await git(["config", "--replace-all", "remote.origin.fetch", FETCH_REFSPECS[0]], run);
  await git(["config", "--add", "remote.origin.fetch", FETCH_REFSPECS[1]], run);
}

/** The fetch itself: `url` on the command line (credentials in it are used, never stored). */
async function fetchInto(
  dir: string,
  url: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
  secrets: string[],
  opts: GitOptions,
) {
  const net = networkCommand(url, opts);
  const args = [
    ...net.config,
    // Per command as well as in the config, for a cache configured by someone else.
    ...["-c", "gc.auto=0", "-c", "maintenance.auto=false", "-c", "fetch.prune=false"],
    ...["fetch", "--no-prune", "--no-auto-gc", "--no-write-fetch-head", "--no-recurse-submodules", "--quiet"],
    "--",
    net.url,
    ...FETCH_REFSPECS,
  ];
  await git(args, { cwd: dir, env, timeoutMs, secrets, signal: opts.signal });
}

/** Points the new cache's HEAD at upstream's default branch, when upstream names one. */
async function setHeadFromRemote(
  dir: string,
  url: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
  s: string[],
  opts: GitOptions,
) {
  const net = networkCommand(url, opts);
  const out = await git([...net.config, "ls-remote", "--symref", "--", net.url, "HEAD"], {
    cwd: dir,
    env,
    timeoutMs,
    secrets: s,
    signal: opts.signal,
  });
  const m = /^ref: (refs\/heads\/\S+)\tHEAD$/m.exec(out);
  if (m) await git(["symbolic-ref", "HEAD", m[1]], { cwd: dir, timeoutMs: DEFAULT_COMMAND_TIMEOUT_MS });
}

/**
 * Makes sure `<root>/<key>` is a bare cache of `url`, configured for the invariant.
 *
 * Absent: `git init --bare` in a temp dir beside it (`<root>/.tmp-<key>-*`, same filesystem),
 * configure, fetch heads and tags (bounded by `cloneTimeoutMs`), point HEAD at upstream's default
 * branch, then move its entries into `<root>/<key>` (HEAD last), never the temp dir over it: the
 * kubelet may make that directory empty for a pod while the fetch runs, and a rename replaces an
 * empty directory, leaving the pod's mount on the old one (seen on the real node, decision 0038).
 * init+fetch rather than `clone --bare` so the config is in place
 * before the first object arrives and the stored url never holds credentials. A failure removes
 * the temp dir; losing the rename race to another creator adopts the winner.
 *
 * Present and empty: the kubelet made it (hostPath `DirectoryOrCreate`) for a pod that got here
 * first and may already have it mounted, so the cache is built IN it, never renamed over it (a
 * rename would leave that pod's mount on the old, empty directory). A failure empties it again.
 *
 * Present (must be a bare repo): adopted; config and remote url (re)set, no fetch.
 *
 * Either way a cache this function builds carries `jr2.owner=cache-agent`: the agent evicts only
 * caches it made itself, never one it adopted (decision 0010).
 */
export async function ensureCache(
  root: string,
  key: string,
  url: string,
  creds?: GitCreds,
  opts: EnsureOptions = {},
): Promise<{ dir: string; created: boolean }> {
  if (!KEY.test(key)) throw new GitError(`cache key ${JSON.stringify(key)} is not a plain directory name`);
  const dir = path.join(root, key);
  const cmdTimeout = opts.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;

  if (await isEmptyDir(dir)) {
    try {
      await populate(dir, url, creds, opts);
    } catch (err) {
      await emptyDir(dir);
      throw err;
    }
    return { dir, created: true };
  }
  if (await exists(dir)) {
    await adopt(dir, url, cmdTimeout);
    return { dir, created: false };
  }

  const tmp = await mkdtemp(path.join(root, `.tmp-${key}-`));
  try {
    await populate(tmp, url, creds, opts);
    try {
      await moveInto(tmp, dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOTEMPTY" && code !== "EEXIST") throw err;
      await rm(tmp, { recursive: true, force: true });
      await adopt(dir, url, cmdTimeout);
      return { dir, created: false };
    }
    return { dir, created: true };
  } catch (err) {
    await rm(tmp, { recursive: true, force: true });
    throw err;
  }
}

/**
 * `tmp`'s entries moved into `dir`, which is made here unless the kubelet made it meanwhile (then
 * it must still be empty; otherwise ENOTEMPTY, which the caller adopts). HEAD goes last: until it is
 * there git sees no repository, so a crash midway leaves no half cache that passes for one.
 */
async function moveInto(tmp: string, dir: string): Promise<void> {
  try {
    await mkdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    if (!(await isEmptyDir(dir))) throw Object.assign(new Error(`${dir} is not empty`), { code: "ENOTEMPTY" });
  }
  const entries = (await readdir(tmp)).sort((a, b) => Number(a === "HEAD") - Number(b === "HEAD"));
  for (const e of entries) await rename(path.join(tmp, e), path.join(dir, e));
  await rmdir(tmp);
}

/** The config key marking a cache the agent built itself (so it may evict it). */
export const OWNER_KEY = "jr2.owner";
const OWNER = "cache-agent";

/** init, configure, mark, first fetch and HEAD: everything a new cache needs, in `target`. */
async function populate(target: string, url: string, creds: GitCreds | undefined, opts: EnsureOptions) {
  const cmdTimeout = opts.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  const secrets = secretsOf(url, creds);
  await git(["init", "--quiet", "--bare", target], { timeoutMs: cmdTimeout });
  await configure(target, url, cmdTimeout);
  await git(["config", OWNER_KEY, OWNER], { cwd: target, timeoutMs: cmdTimeout });
  const deadline = Date.now() + (opts.cloneTimeoutMs ?? DEFAULT_CLONE_TIMEOUT_MS);
  await withCreds(creds, opts, async (env) => {
    await fetchInto(target, url, env, Math.max(1, deadline - Date.now()), secrets, opts);
    await setHeadFromRemote(target, url, env, Math.max(1, deadline - Date.now()), secrets, opts);
  });
}

async function isEmptyDir(p: string): Promise<boolean> {
  try {
    return (await readdir(p)).length === 0;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return false;
    throw err;
  }
}

/** Removes a directory's contents, keeping the directory itself (a pod may have it mounted). */
async function emptyDir(dir: string): Promise<void> {
  for (const name of await readdir(dir).catch(() => [] as string[]))
    await rm(path.join(dir, name), { recursive: true, force: true });
}

async function requireBare(dir: string, timeoutMs: number): Promise<void> {
  let bare: string;
  try {
    bare = (await git(["rev-parse", "--is-bare-repository"], { cwd: dir, timeoutMs })).trim();
  } catch {
    bare = "";
  }
  if (bare !== "true") throw new GitError(`${dir} exists but is not a bare git repository`);
}

async function adopt(dir: string, url: string, timeoutMs: number): Promise<void> {
  await requireBare(dir, timeoutMs);
  await configure(dir, url, timeoutMs);
}

/**
 * A checkout found without a Repo: pinned. Its cache config is set (so nothing prunes what a clone
 * may borrow) but its url is left alone and it is never fetched or evicted.
 */
export async function pin(dir: string, timeoutMs = DEFAULT_COMMAND_TIMEOUT_MS): Promise<void> {
  await requireBare(dir, timeoutMs);
  for (const [k, v] of CACHE_CONFIG) await git(["config", k, v], { cwd: dir, timeoutMs });
}

/** Whether the agent built this cache itself (`jr2.owner=cache-agent`). */
export async function ownedByAgent(dir: string, timeoutMs = DEFAULT_COMMAND_TIMEOUT_MS): Promise<boolean> {
  try {
    return (await git(["config", "--get", OWNER_KEY], { cwd: dir, timeoutMs })).trim() === OWNER;
  } catch {
    return false;
  }
}

/** The cache keys under `root`: plain directory names (temp and eviction dirs start with a dot). */
export async function cacheKeys(root: string): Promise<string[]> {
  const entries = await readdir(root, { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isDirectory() && KEY.test(e.name)).map((e) => e.name);
}

/**
 * Removes `<root>/<key>`: first renamed aside (`.evicted-<key>-*`), so the key's path is free at
 * once and a half-removed cache is never mistaken for one, then deleted.
 */
export async function evictCache(root: string, key: string): Promise<void> {
  if (!KEY.test(key)) throw new GitError(`cache key ${JSON.stringify(key)} is not a plain directory name`);
  const aside = await mkdtemp(path.join(root, `.evicted-${key}-`));
  const target = path.join(aside, "cache");
  await rename(path.join(root, key), target);
  await rm(aside, { recursive: true, force: true });
}

/**
 * Fetches every head and tag of `url` into the cache, forced. No `--prune`, of refs or anything
 * else: a clone may borrow objects reachable only from a ref that has since vanished upstream,
 * and a ref kept here is what keeps those objects reachable (and a later `repack -a` keeps them
 * either way). So a branch deleted upstream stays in the cache; one rewritten upstream moves.
 */
export async function fetchCache(
  dir: string,
  url: string,
  creds?: GitCreds,
  opts: GitOptions = {},
): Promise<{ fetchedAt: Date }> {
  const secrets = secretsOf(url, creds);
  await withCreds(creds, opts, (env) =>
    fetchInto(dir, url, env, opts.networkTimeoutMs ?? DEFAULT_NETWORK_TIMEOUT_MS, secrets, opts),
  );
  return { fetchedAt: new Date() };
}

/** The counts consolidate() decides on. */
export async function objectCounts(
  dir: string,
  timeoutMs = DEFAULT_COMMAND_TIMEOUT_MS,
): Promise<{ packs: number; loose: number }> {
  let packs = 0;
  try {
    packs = (await readdir(path.join(dir, "objects", "pack"))).filter((f) => f.endsWith(".pack")).length;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const out = await git(["count-objects", "-v"], { cwd: dir, timeoutMs });
  const m = /^count: (\d+)$/m.exec(out);
  if (!m) throw new GitError("git count-objects -v printed no count");
  return { packs, loose: Number(m[1]) };
}

/**
 * When packs or loose objects pass their threshold: `repack -a -d -k` (one pack; unreachable
 * objects kept in it, loose ones packed; `-d` only drops packs and loose copies now redundant),
 * `commit-graph write --reachable`, `pack-refs --all`. Never gc, never prune.
 */
export async function consolidate(
  dir: string,
  thresholds: ConsolidateThresholds = {},
): Promise<{ ran: boolean; before: { packs: number; loose: number } }> {
  const before = await objectCounts(dir);
  const over =
    before.packs > (thresholds.maxPacks ?? DEFAULT_MAX_PACKS) ||
    before.loose > (thresholds.maxLoose ?? DEFAULT_MAX_LOOSE);
  if (!over) return { ran: false, before };
  const run = { cwd: dir, timeoutMs: thresholds.timeoutMs ?? DEFAULT_REPACK_TIMEOUT_MS };
  const repack = ["-c", "gc.auto=0", "repack", "-a", "-d", "-k", "--quiet"];
  await git(repack, run);
  // git packs unreachable LOOSE objects under -k only when a pack already existed: with none
  // before, the first pass leaves them loose (safe, just not consolidated), the second packs them.
  if (before.packs === 0) await git(repack, run);
  await git(["commit-graph", "write", "--reachable", "--no-progress"], run);
  await git(["pack-refs", "--all"], run);
  return { ran: true, before };
}
