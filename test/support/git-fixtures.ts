// Test-side git: real git, synchronous, no shell, an environment of its own (no inherited GIT_*,
// no system or user config, a fixed author), so a test reads the same on every machine.
import { execFileSync } from "node:child_process";

export const GIT_ENV = {
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("GIT_"))),
  LC_ALL: "C",
  GIT_TERMINAL_PROMPT: "0",
  GIT_AUTHOR_NAME: "t",
  GIT_AUTHOR_EMAIL: "t@t",
  GIT_COMMITTER_NAME: "t",
  GIT_COMMITTER_EMAIL: "t@t",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
};

/** `git ...args` in `cwd`; its trimmed stdout. Throws on a non-zero exit. */
export const gitIn = (cwd: string | undefined, ...args: string[]): string =>
  execFileSync("git", args, { cwd, env: GIT_ENV, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
