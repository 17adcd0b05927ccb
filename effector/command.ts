// command (decision 0072): a credentialed command, its child (often running the
// Agent's code) confined with Landlock by jr2-confine: it may read and execute the image's system
// paths, read /work and /repos, read and write its own scratch (its TMPDIR and HOME; never /tmp),
// read the secret files this Effect names, and nothing else: not the Effector's key, not another
// Effect's secrets, not this scratch's records. jr2-confine ends every process the child left
// before the Effect settles. Where the kernel cannot confine, the command is refused, naming the
// node and why.
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import type { z } from "zod";
import { effectSecretPath, EFFECT_LIMITS, SecretRef, type EffectError } from "../api/effects";
import { ConfineReport } from "../api/confine";
import type { CommandOrder } from "../api/effector-wire";
import { encodeBody } from "./http";
import { inside, PathRefused, realInside, relativeProblem } from "./paths";
import { CHILD_PATH, unconfinedMessage, type Confinement } from "./confinement";
import { run } from "./proc";
import { readSecret, SecretUnreadable } from "./secrets";

export type CommandOrderT = z.infer<typeof CommandOrder>;

export type CommandContext = {
  work: string;
  repos: string;
  secrets: string;
  scratch: string;
  confine: string;
  confinement: Confinement;
  node: string;
};
export type CommandOutcome =
  | {
      state: "succeeded" | "failed";
      result: {
        kind: "command";
        exitCode: number | null;
        signal: string | null;
        timedOut: boolean;
        stdout: string;
        stderr: string;
        truncated: { stdout: boolean; stderr: boolean };
        ended: number;
      };
      error?: EffectError;
    }
  | { state: "failed"; error: EffectError };

// What the Effector probes at start (decision 0072), in a file of its own so an idle Effector loads
// none of this one (docs/decisions/0044-the-custodian-starts-small.md).
export { CHILD_PATH, probeConfinement, unconfinedMessage, type Confinement } from "./confinement";

const failed = (code: string, message: string): CommandOutcome => ({ state: "failed", error: { code, message } });

/** The image's system paths a child may read and execute. */
export const SYSTEM_RX = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/opt"];

/** jr2-confine's argv for one Effect (pure). */
export function confineArgs(p: {
  rx: string[];
  ro: string[];
  rw: string[];
  cwd: string;
  timeoutSeconds: number;
  report: string;
  argv: string[];
}): string[] {
  return [
    ...p.rx.flatMap((x) => ["--rx", x]),
    ...p.ro.flatMap((x) => ["--ro", x]),
    ...p.rw.flatMap((x) => ["--rw", x]),
    "--cwd",
    p.cwd,
    "--timeout",
    String(p.timeoutSeconds),
    "--report",
    p.report,
    "--",
    ...p.argv,
  ];
}

/** The directories a child may read and execute: the system's, and the Node runtime's when it is
 * elsewhere (so a command may run `node`). */
export function executablePaths(execPath = process.execPath): string[] {
  const runtime = dirname(dirname(execPath));
  return SYSTEM_RX.some((s) => inside(s, runtime)) ? SYSTEM_RX : [...SYSTEM_RX, runtime];
}

export async function runCommand(id: string, order: CommandOrderT, ctx: CommandContext): Promise<CommandOutcome> {
  if (!ctx.confinement.ok) return failed("unconfined", unconfinedMessage(ctx.node, ctx.confinement.reason));
  if (
    !Number.isInteger(order.timeoutSeconds) ||
    order.timeoutSeconds < 1 ||
    order.timeoutSeconds > EFFECT_LIMITS.maxCommandSeconds
  )
    return failed("refused", `timeoutSeconds must be 1-${EFFECT_LIMITS.maxCommandSeconds}`);
  if (
    !Number.isInteger(order.maxOutputBytes) ||
    order.maxOutputBytes < 0 ||
    order.maxOutputBytes > EFFECT_LIMITS.maxBodyBytes
  )
    return failed("refused", `maxOutputBytes must be 0-${EFFECT_LIMITS.maxBodyBytes}`);
  const cwdProblem = order.cwd === "" || order.cwd === "." ? undefined : relativeProblem(order.cwd);
  if (cwdProblem) return failed("refused", `cwd ${order.cwd} ${cwdProblem}`);

  const own = join(ctx.scratch, "effects", id);
  const report = join(ctx.scratch, "reports", `${id}.json`);
  try {
    const root = realInside(order.root, [ctx.work], "root");
    const cwd = realInside(join(root, order.cwd || "."), [root], "cwd");
    const env: Record<string, string> = {};
    const secretFiles: string[] = [];
    for (const [name, value] of Object.entries(order.env)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return failed("refused", `env ${name} is no variable name`);
      if (typeof value === "string") env[name] = value;
      else {
        env[name] = readSecret(ctx.secrets, value);
        secretFiles.push(effectSecretPath(ctx.secrets, SecretRef.parse(value)));
      }
    }
    rmSync(own, { recursive: true, force: true });
    mkdirSync(join(own, "tmp"), { recursive: true, mode: 0o700 });
    mkdirSync(dirname(report), { recursive: true, mode: 0o700 });
    rmSync(report, { force: true });
    const childEnv = { ...env, PATH: CHILD_PATH, HOME: own, TMPDIR: join(own, "tmp"), LANG: "C.UTF-8" };
    const args = confineArgs({
      rx: executablePaths().filter((p) => existsSync(p)),
      ro: [ctx.work, ctx.repos, ...secretFiles].filter((p) => existsSync(p)),
      rw: [own],
      cwd,
      timeoutSeconds: order.timeoutSeconds,
      report,
      argv: order.argv,
    });
    // jr2-confine enforces the timeout and reports it; this one only ends a jr2-confine that hangs.
    const r = await run(ctx.confine, args, {
      env: childEnv,
      cwd,
      timeoutMs: (order.timeoutSeconds + 30) * 1000,
      maxBytes: order.maxOutputBytes,
    });
    let rep: ConfineReport | undefined;
    try {
      const parsed = ConfineReport.safeParse(JSON.parse(readFileSync(report, "utf8")));
      rep = parsed.success ? parsed.data : undefined;
    } catch {
      rep = undefined;
    }
    if (!rep || (rep.error && rep.exitCode === null && !rep.timedOut))
      return failed(
        "confine_failed",
        `jr2-confine did not run the command: ${rep?.error ?? r.spawnError ?? r.stderr.toString().slice(-500).trim()}`,
      );
    const out = encodeBody(r.stdout, r.truncated.stdout);
    const err = encodeBody(r.stderr, r.truncated.stderr);
    const result = {
      kind: "command" as const,
      exitCode: rep.exitCode,
      signal: rep.signal,
      timedOut: rep.timedOut,
      // Output that is not UTF-8 is carried as base64, marked so.
      stdout: out.bodyEncoding === "utf8" ? out.body : `base64:${out.body}`,
      stderr: err.bodyEncoding === "utf8" ? err.body : `base64:${err.body}`,
      truncated: r.truncated,
      ended: rep.ended,
    };
    if (rep.exitCode === 0 && !rep.timedOut) return { state: "succeeded", result };
    return {
      state: "failed",
      result,
      error: rep.timedOut
        ? { code: "timeout", message: `the command did not end within ${order.timeoutSeconds} s: it was ended` }
        : {
            code: "exit_nonzero",
            message: `the command exited ${rep.exitCode ?? `on signal ${rep.signal}`}`,
          },
    };
  } catch (err) {
    if (err instanceof PathRefused || err instanceof SecretUnreadable) return failed("refused", err.message);
    throw err;
  } finally {
    rmSync(own, { recursive: true, force: true });
    rmSync(report, { force: true });
  }
}
