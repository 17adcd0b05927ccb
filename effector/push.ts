// push (decision 0070: an unattended publish is the Machine's push Effect): a Repo
// Slot's commit to the slot's url with the push Secret the operator projected, never through the
// Agent's repository config. /work is hostile: the Agent wrote its `.git/config`, its hooks, its
// alternates. So git never runs there: a fresh bare repository in the Effector's scratch borrows
// the worktree's objects by `objects/info/alternates` (and through the worktree's own alternates
// the Repo cache's), the commit is read from the worktree's ref files by the Effector itself, and
// the push names its url and refspec explicitly, under an env and `-c` settings that read no
// config but ours. /work stays read-only: nothing is written there.
import { copyFileSync, existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import type { z } from "zod";
import { EFFECT_LIMITS, type EffectError } from "../api/effects";
import type { PushOrder } from "../api/effector-wire";
import { refNameProblem } from "../api/names";
import { redact, urlWithoutCredentials } from "../lib/redact";
import type { Egress } from "./egress";
import { PathRefused, inside, realInside } from "./paths";
import { run, shellQuote, tail, type Ran } from "./proc";

export type PushOrderT = z.infer<typeof PushOrder>;
export type PushContext = {
  work: string;
  repos: string;
  /** Push Secrets: `<git>/<credential>/{token|password,username}` or `{ssh-privatekey,known_hosts}`. */
  git: string;
  scratch: string;
  egress: Egress;
  /** The combined trust bundle's file in scratch, when an installation bundle is set. */
  caBundleFile?: string;
  /** How to run this program's `connect` mode (ssh's ProxyCommand): argv. */
  connectCommand: string[];
};
export type PushOutcome =
  | {
      state: "succeeded";
      result: { kind: "push"; remote: string; ref: string; commit: string; forced: boolean };
    }
  | { state: "failed"; error: EffectError };

const HEX = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
const SECRET_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Ends git's helpers a shell could otherwise read something into. */
const SAFE_PATH = /^[A-Za-z0-9@/._+=,-]+$/;

const failed = (code: string, message: string): PushOutcome => ({ state: "failed", error: { code, message } });

/** The remote's transport: https (or http), or ssh (`ssh://` or scp-like `user@host:path`). */
export function remoteOf(url: string): { scheme: "https" | "http" | "ssh"; host: string; port: string } | undefined {
  if (url.startsWith("-") || /[\s\0]/.test(url)) return undefined;
  const m = /^(https?|ssh):\/\//i.exec(url);
  if (m) {
    if (!URL.canParse(url)) return undefined;
    const u = new URL(url);
    const scheme = u.protocol.slice(0, -1).toLowerCase() as "https" | "http" | "ssh";
    return { scheme, host: u.hostname, port: u.port || { https: "443", http: "80", ssh: "22" }[scheme] };
  }
  const scp = /^(?:[^@/:]+@)?(\[[^\]]+\]|[^/:[\]]+):(?!\/\/)/.exec(url);
  if (scp && !/^[a-z][a-z0-9+.-]*::/i.test(url))
    return { scheme: "ssh", host: scp[1].replace(/^\[|\]$/g, ""), port: "22" };
  return undefined;
}

/** What is wrong with a push order, before anything is read: the field and its fix. */
export function pushOrderProblem(o: PushOrderT): string | undefined {
  if (!remoteOf(o.url)) return `url ${urlWithoutCredentials(o.url)} is no https or ssh remote: give the slot's url`;
  if (/^https?:\/\/[^/]*@/i.test(o.url)) return "url carries credentials: the push Secret supplies them";
  if (!SECRET_NAME.test(o.credential)) return `credential ${o.credential} is no Secret's name`;
  const branch = o.ref.startsWith("refs/heads/") ? o.ref.slice("refs/heads/".length) : undefined;
  const refProblem = branch === undefined ? "must start with refs/heads/" : refNameProblem(branch);
  if (refProblem) return `ref ${o.ref} ${refProblem}`;
  if ("commit" in o.source && !HEX.test(o.source.commit))
    return "source.commit must be a full commit id (40 or 64 lower-case hex digits)";
  if ("branch" in o.source) {
    const p = refNameProblem(o.source.branch);
    if (p) return `source.branch ${p}`;
  }
  if (o.expect !== undefined && !HEX.test(o.expect))
    return "expect must be a full commit id (40 or 64 lower-case hex digits)";
  if (!Number.isInteger(o.timeoutSeconds) || o.timeoutSeconds < 1 || o.timeoutSeconds > EFFECT_LIMITS.maxPushSeconds)
    return `timeoutSeconds must be 1-${EFFECT_LIMITS.maxPushSeconds}`;
  return undefined;
}

/**
 * The worktree's git directories, each by its real path and refused if it leads out of /work:
 * `<worktree>/.git` is a directory (a `--shared` clone) or a `gitdir:` file (a `git worktree`),
 * whose `commondir` holds the objects and the branches.
 */
export function worktreeGit(work: string, worktree: string): { gitDir: string; commonDir: string; objects: string } {
  const wt = realInside(worktree, [work], "worktree");
  const dotGit = join(wt, ".git");
  let gitDir: string;
  const st = lstatSync(dotGit, { throwIfNoEntry: false });
  if (!st) throw new PathRefused(`worktree ${worktree} has no .git: it is no checkout`);
  if (st.isDirectory()) gitDir = realInside(dotGit, [work], "git directory");
  else if (st.isFile()) {
    const m = /^gitdir: (.+)$/m.exec(readFileSync(dotGit, "utf8").slice(0, 4096));
    if (!m) throw new PathRefused(`worktree ${worktree}: .git is a file without a gitdir: line`);
    gitDir = realInside(resolve(wt, m[1].trim()), [work], "git directory");
  } else throw new PathRefused(`worktree ${worktree}: .git is neither a directory nor a file`);
  let commonDir = gitDir;
  const common = join(gitDir, "commondir");
  if (existsSync(common))
    commonDir = realInside(resolve(gitDir, readFileSync(common, "utf8").slice(0, 4096).trim()), [work], "commondir");
  const objects = realInside(join(commonDir, "objects"), [work], "object directory");
  return { gitDir, commonDir, objects };
}

/** Each entry of the worktree's own alternates must be under /work or /repos: the Agent wrote it. */
export function checkAlternates(objects: string, roots: readonly string[]) {
  const file = join(objects, "info", "alternates");
  if (!existsSync(file)) return;
  for (const line of readFileSync(file, "utf8").slice(0, 65536).split("\n")) {
    const entry = line.trim();
    if (!entry || entry.startsWith("#")) continue;
    realInside(isAbsolute(entry) ? entry : resolve(objects, entry), roots, "an alternate object directory");
  }
}

/** A branch's head, read from its loose ref (no symlink, no symbolic ref) or packed-refs. */
export function branchHead(commonDir: string, branch: string): string | undefined {
  const loose = join(commonDir, "refs", "heads", ...branch.split("/"));
  const st = lstatSync(loose, { throwIfNoEntry: false });
  if (st) {
    if (!st.isFile()) throw new PathRefused(`branch ${branch}: its ref is not a plain file: refused`);
    const text = readFileSync(loose, "utf8").slice(0, 200).trim();
    if (!HEX.test(text)) throw new PathRefused(`branch ${branch}: its ref holds no commit id`);
    return text;
  }
  const packed = join(commonDir, "packed-refs");
  const pst = lstatSync(packed, { throwIfNoEntry: false });
  if (!pst?.isFile()) return undefined;
  for (const line of readFileSync(packed, "utf8").split("\n")) {
    const [sha, ref] = line.trim().split(" ");
    if (ref === `refs/heads/${branch}` && HEX.test(sha)) return sha;
  }
  return undefined;
}

/** How git said a push failed, as the Effect's error code. */
export function pushFailureCode(text: string): string {
  if (/\(stale info\)/.test(text)) return "lease_broken";
  if (/\[rejected\].*\((non-fast-forward|fetch first)\)/.test(text) || /non-fast-forward/.test(text))
    return "push_rejected";
  if (
    /Authentication failed|could not read (Username|Password)|Permission denied \(publickey|The requested URL returned error: 40[13]|Host key verification failed|HTTP Basic: Access denied/i.test(
      text,
    )
  )
    return "auth_failed";
  if (/\[remote rejected\]/.test(text)) return "push_rejected";
  return "push_failed";
}

/** The settings every git of a push runs with: no config but these, no hook, the transports the url needs. */
export function gitConfigArgs(opts: {
  scheme: "https" | "http" | "ssh";
  proxy?: string;
  caFile?: string;
  credentialHelper?: string;
}): string[] {
  const c = (kv: string) => ["-c", kv];
  return [
    ...c("core.hooksPath=/dev/null"),
    ...c("core.fsmonitor=false"),
    ...c("core.askPass="),
    ...c("protocol.allow=never"),
    ...c("protocol.https.allow=always"),
    ...c("protocol.ssh.allow=always"),
    ...(opts.scheme === "http" ? c("protocol.http.allow=always") : []),
    ...c("http.followRedirects=false"),
    ...c("push.gpgSign=false"),
    ...c("push.recurseSubmodules=no"),
    ...c("credential.interactive=false"),
    // An empty helper first resets any list; ours is then the only one.
    ...c("credential.helper="),
    ...(opts.credentialHelper ? c(`credential.helper=${opts.credentialHelper}`) : []),
    ...c(`http.proxy=${opts.proxy ?? ""}`),
    ...(opts.caFile ? c(`http.sslCAInfo=${opts.caFile}`) : []),
  ];
}

/** The credential helper: a shell function reading the projected files when git asks, so the
 * token is in no argv, no env and no log. Paths only are in its text. */
export function credentialHelper(dir: string, tokenFile: string): string {
  const user = join(dir, "username");
  return (
    `!f() { test "$1" = get || exit 0; u=x-access-token; ` +
    `test -r ${shellQuote(user)} && u=$(cat ${shellQuote(user)}); ` +
    `printf 'username=%s\\npassword=%s\\n' "$u" "$(cat ${shellQuote(tokenFile)})"; }; f`
  );
}

/** ssh as git runs it for this push: our key, the known hosts given, no config, through the egress point. */
export function sshCommand(key: string, knownHosts: string, proxyCommand?: string[]): string {
  return [
    "ssh",
    "-F",
    "/dev/null",
    "-i",
    key,
    "-o",
    "IdentitiesOnly=yes",
    "-o",
    "IdentityAgent=none",
    "-o",
    "BatchMode=yes",
    "-o",
    "StrictHostKeyChecking=yes",
    "-o",
    `UserKnownHostsFile=${knownHosts}`,
    ...(proxyCommand ? ["-o", `ProxyCommand=${proxyCommand.map(shellQuote).join(" ")}`] : []),
  ]
    .map(shellQuote)
    .join(" ");
}

const SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin";

export async function runPush(order: PushOrderT, ctx: PushContext): Promise<PushOutcome> {
  const problem = pushOrderProblem(order);
  if (problem) return failed("refused", problem);
  const remote = remoteOf(order.url)!;
  const deadline = Date.now() + order.timeoutSeconds * 1000;
  const left = () => Math.max(1, deadline - Date.now());
  const credDir = join(ctx.git, order.credential);
  const secrets: string[] = [];

  let tmp: string | undefined;
  try {
    const { commonDir, objects } = worktreeGit(ctx.work, order.worktree);
    checkAlternates(objects, [ctx.work, ctx.repos]);
    const commit = "commit" in order.source ? order.source.commit : branchHead(commonDir, order.source.branch);
    if (!commit)
      return failed(
        "refused",
        `branch ${"branch" in order.source ? order.source.branch : ""} has no commit in the worktree`,
      );

    tmp = mkdtempSync(join(ctx.scratch, "push-"));
    if (!SAFE_PATH.test(tmp) || !SAFE_PATH.test(credDir))
      return failed("refused", "the scratch or secrets path holds characters git's helpers cannot be given");
    const env: NodeJS.ProcessEnv = {
      PATH: SYSTEM_PATH,
      HOME: ctx.scratch,
      LC_ALL: "C",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_TERMINAL_PROMPT: "0",
      GIT_ASKPASS: "/bin/false",
      SSH_ASKPASS: "/bin/false",
      // connect reads them (ssh's ProxyCommand); git's curl reads NO_PROXY beside http.proxy.
      ...ctx.egress.env,
    };
    let credentialHelperText: string | undefined;
    if (remote.scheme === "ssh") {
      const keyFile = join(credDir, "ssh-privatekey");
      const knownHosts = join(credDir, "known_hosts");
      if (!existsSync(keyFile))
        return failed("auth_failed", `push Secret ${order.credential} has no ssh-privatekey for an ssh url: add one`);
      if (!existsSync(knownHosts))
        return failed(
          "auth_failed",
          `push Secret ${order.credential} has no known_hosts: an ssh push checks the host's key; add the host's line`,
        );
      // ssh refuses a key others may read; the projected file is group-readable, so a copy 0600.
      const key = join(tmp, "id");
      copyFileSync(keyFile, key);
      writeFileSync(key, readFileSync(key), { mode: 0o600 });
      const proxied = ctx.egress.proxyFor(
        new URL(`ssh://${remote.host.includes(":") ? `[${remote.host}]` : remote.host}:${remote.port}`),
      );
      env.GIT_SSH_COMMAND = sshCommand(key, knownHosts, proxied ? [...ctx.connectCommand, "%h", "%p"] : undefined);
      env.GIT_SSH_VARIANT = "ssh";
    } else {
      const tokenFile = ["token", "password"].map((k) => join(credDir, k)).find((f) => existsSync(f));
      if (!tokenFile)
        return failed(
          "auth_failed",
          `push Secret ${order.credential} has no token (or password) for an https url: add one`,
        );
      secrets.push(readFileSync(tokenFile, "utf8").trim());
      credentialHelperText = credentialHelper(credDir, tokenFile);
    }
    const config = gitConfigArgs({
      scheme: remote.scheme,
      proxy: remote.scheme === "ssh" ? undefined : ctx.egress.proxyFor(new URL(order.url)),
      caFile: ctx.caBundleFile,
      credentialHelper: credentialHelperText,
    });
    const git = (args: string[], gitDir = true) =>
      run("git", [...config, ...(gitDir ? [`--git-dir=${tmp}`] : []), ...args], {
        env,
        cwd: tmp,
        timeoutMs: left(),
        maxBytes: 64 * 1024,
      });
    const said = (r: Ran) => redact(`${r.stdout.toString()}\n${r.stderr.toString()}`, secrets);
    const init = await git(["init", "--bare", "--quiet", "--template=", tmp!], false);
    if (init.code !== 0) return failed("push_failed", `git init in scratch failed: ${tail(said(init))}`);
    writeFileSync(join(tmp, "objects", "info", "alternates"), `${objects}\n`);
    const has = await git(["cat-file", "-e", `${commit}^{commit}`]);
    if (has.code !== 0)
      return failed("refused", `commit ${commit} is not in the worktree's objects: commit it in the worktree first`);

    // No `+` with a lease: a forcing refspec overrides the lease (git pushed over a stale one in our
    // test); the lease alone lets a non-fast-forward through when the remote holds `expect`.
    const refspec = `${commit}:${order.ref}`;
    const lease = order.expect ? [`--force-with-lease=${order.ref}:${order.expect}`] : [];
    const pushed = await git(["push", "--porcelain", "--no-verify", ...lease, "--", order.url, refspec]);
    if (pushed.timedOut) return failed("timeout", `the push did not end within ${order.timeoutSeconds} s`);
    if (pushed.code !== 0) {
      const text = said(pushed);
      return failed(pushFailureCode(text), tail(text));
    }
    const forced = /^\+\t/m.test(pushed.stdout.toString());
    const listed = await git(["ls-remote", "--", order.url, order.ref]);
    const line = listed.stdout
      .toString()
      .split("\n")
      .find((l) => l.endsWith(`\t${order.ref}`));
    const held = line?.split("\t")[0];
    return {
      state: "succeeded",
      result: {
        kind: "push",
        remote: urlWithoutCredentials(order.url),
        ref: order.ref,
        // The remote's word when it answers; the pushed commit when ls-remote could not say.
        commit: held && HEX.test(held) ? held : commit,
        forced,
      },
    };
  } catch (err) {
    if (err instanceof PathRefused) return failed("refused", err.message);
    return failed("push_failed", redact((err as Error).message, secrets));
  } finally {
    if (tmp && inside(ctx.scratch, dirname(tmp))) rmSync(tmp, { recursive: true, force: true });
  }
}
