// jr2-confine for tests (effector/confine/, decision 0070): the binary scripts/confine-binary.sh
// builds (once per source fingerprint, in the jr2 cache), and a runner that reads its exit, output
// and --report.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { ConfineReport } from "../../api/confine";
import { confineBinary as build } from "../../scripts/images/confine";

let built: string | undefined;

/** The absolute path of the cached jr2-confine, built on first use (Go 1.26+ on PATH). */
export function confineBinary(): string {
  return (built ??= build());
}

/** What an image's command needs to start: the system paths to read and execute, /etc to read (a path
 * missing here is skipped by jr2-confine). */
export const SYSTEM_FLAGS = [
  "--rx",
  "/usr",
  "--rx",
  "/bin",
  "--rx",
  "/lib",
  "--rx",
  "/lib64",
  "--rx",
  "/sbin",
  "--ro",
  "/etc",
];

export type Confined = {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** The parsed --report, when `report` named a file. */
  report?: ConfineReport;
};

/**
 * Runs `binary FLAGS -- ARGV` and waits for it. `uid` runs jr2-confine (and so the command) as that
 * user and group, without capabilities; `report` is a file for --report, read back (and removed).
 */
export function runConfined(
  binary: string,
  flags: string[],
  argv: string[],
  o: { env?: NodeJS.ProcessEnv; uid?: number; cwd?: string; report?: string; timeoutMs?: number } = {},
): Confined {
  if (o.report) rmSync(o.report, { force: true });
  const r = spawnSync(binary, [...flags, ...(o.report ? ["--report", o.report] : []), "--", ...argv], {
    encoding: "utf8",
    env: o.env ?? { PATH: "/usr/local/bin:/usr/bin:/bin" },
    cwd: o.cwd,
    uid: o.uid,
    gid: o.uid,
    timeout: o.timeoutMs ?? 30_000,
  });
  if (r.error) throw r.error;
  const out: Confined = { status: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
  if (o.report && existsSync(o.report)) {
    out.report = ConfineReport.parse(JSON.parse(readFileSync(o.report, "utf8")));
    rmSync(o.report, { force: true });
  }
  return out;
}
