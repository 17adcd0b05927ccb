// Local mode's processes (a Sandbox's Harness and Custodian run on this machine): started detached,
// in a session of their own, their output in a log file, so they outlive an Orchestrator that is
// killed, as a pod outlives its Orchestrator. A restarted Orchestrator adopts them again from the
// state file its predecessor wrote (local-harness.ts). Used only outside the cluster.
//
// They run at the lowest CPU priority. In a cluster a Sandbox pod has its own cgroup and its own
// node's cores, apart from the Orchestrator; here every pod shares this machine's cores with the
// Orchestrator, and each detached process leads a session (an autogroup) of its own, which the
// kernel weighs as much as the Orchestrator's. Fifty Agents' turns then left the Orchestrator
// waiting for a core for most of a burst (its event loop 200-460 ms late, in the agents bench).
// Lowered, the pods still get every idle cycle and the control path answers first.
import { spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { setPriority } from "node:os";
import { join } from "node:path";

export type Detached = { pid: number; port: number };

/** A companion program: beside this file when bundled (dist/companions), else the build's bundle,
 * else its source with tsx as node's loader (one process, so a signal to it reaches the program). */
export function companionCommand(name: "harness" | "custodian" | "effector"): [string, string[]] {
  const sibling = join(__dirname, `${name}.js`);
  if (existsSync(sibling)) return [process.execPath, [sibling]];
  const root = join(__dirname, "..");
  const bundle = join(root, "dist", "companions", `${name}.js`);
  if (existsSync(bundle)) return [process.execPath, [bundle]];
  return [process.execPath, ["--import", "tsx", join(root, name, "main.ts")]];
}

/** What a local companion gets of this machine's environment: what a container runtime gives a
 * process (where programs are, a home, a locale, a clock), never the rest of the Orchestrator's: a
 * key in the developer's shell (OPENAI_API_KEY, say) must not reach a Harness, which holds
 * Stand-ins alone (decision 0021), and a proxy or model setting of the shell would send its
 * requests around its Custodian. The pod's own env is added by the caller. */
const HOST_ENV = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR"];
export function hostEnv(from: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return Object.fromEntries(HOST_ENV.filter((k) => from[k] !== undefined).map((k) => [k, from[k]]));
}

/** Starts `cmd` detached, its output appended to `logFile`, and waits for `listening` (a regexp
 * whose first group is the port) in the lines it writes after this start. */
export async function startDetached(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  logFile: string,
  listening: RegExp,
  what: string,
): Promise<Detached> {
  const from = existsSync(logFile) ? readFileSync(logFile).length : 0;
  const fd = openSync(logFile, "a", 0o600);
  const child = spawn(cmd, args, { env, detached: true, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  child.unref();
  let exited: number | null | undefined;
  child.once("exit", (code) => (exited = code));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const text = readFileSync(logFile).subarray(from).toString();
    const m = listening.exec(text);
    if (m) {
      // Lowered once it listens: its start-up (a few hundred ms of CPU) is not starved by a busy machine.
      deprioritize(child.pid!);
      return { pid: child.pid!, port: Number(m[1]) };
    }
    if (exited !== undefined)
      throw new Error(`the local ${what} exited (${exited}) before it listened: ${lastLine(text)} (log: ${logFile})`);
    if (Date.now() > deadline) {
      killPid(child.pid!);
      throw new Error(`the local ${what} did not listen within 30 s (log: ${logFile})`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The lowest priority (nice 19) for a process and its autogroup (the session it leads); children
 * (a tool's bash, git) inherit both. Best effort: a machine without autogroups has the nice value. */
export const LOCAL_POD_NICE = 19;
function deprioritize(pid: number) {
  try {
    setPriority(pid, LOCAL_POD_NICE);
    writeFileSync(`/proc/${pid}/autogroup`, String(LOCAL_POD_NICE));
  } catch {
    // gone already, or no autogroups here
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM to its process group (it leads one), then waits up to 5 s for it to go. */
export async function stopPid(pid: number): Promise<void> {
  killPid(pid);
  for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
}

/** SIGTERM to its process group, without waiting. */
export function killPid(pid: number) {
  try {
    process.kill(-pid, "SIGTERM");
  } catch {
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
}

const lastLine = (text: string) => text.trim().split("\n").pop() ?? "";
