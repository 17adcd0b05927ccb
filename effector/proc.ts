// A child process run to its end with bounded output: the Effector's git and jr2-confine. The
// child leads a process group of its own, so a timeout ends it and whatever it started (git's ssh,
// its remote helper) together.
import { spawn } from "node:child_process";

export type Ran = {
  code: number | null;
  signal: string | null;
  timedOut: boolean;
  stdout: Buffer;
  stderr: Buffer;
  truncated: { stdout: boolean; stderr: boolean };
  /** Set when the program could not be started at all (ENOENT, EACCES). */
  spawnError?: string;
};

export type RunOptions = {
  env: NodeJS.ProcessEnv;
  cwd?: string;
  timeoutMs: number;
  /** Each stream keeps at most this many bytes; the rest is read and dropped. */
  maxBytes: number;
};

export function run(cmd: string, args: readonly string[], opts: RunOptions): Promise<Ran> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      env: opts.env,
      cwd: opts.cwd,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const kept = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
    const sizes = { stdout: 0, stderr: 0 };
    const truncated = { stdout: false, stderr: false };
    for (const name of ["stdout", "stderr"] as const) {
      child[name].on("data", (chunk: Buffer) => {
        const room = opts.maxBytes - sizes[name];
        if (room <= 0) return void (truncated[name] = true);
        if (chunk.length > room) truncated[name] = true;
        const part = chunk.subarray(0, Math.max(0, room));
        kept[name].push(part);
        sizes[name] += part.length;
      });
    }
    let timedOut = false;
    const kill = () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, opts.timeoutMs);
    let spawnError: string | undefined;
    child.on("error", (err) => {
      spawnError = `${cmd}: ${(err as NodeJS.ErrnoException).code ?? err.message}`;
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({
        code,
        signal,
        timedOut,
        stdout: Buffer.concat(kept.stdout),
        stderr: Buffer.concat(kept.stderr),
        truncated,
        spawnError,
      });
    });
  });
}

/** Text for a message: at most `max` characters, the end kept (git says what failed last). */
export const tail = (text: string, max = 2000) => (text.length > max ? `…${text.slice(-max)}` : text).trim();

/** A word for a POSIX shell: single-quoted. */
export const shellQuote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
