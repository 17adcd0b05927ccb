// jr2-confine (effector/confine/, decision 0070): the static program the Sandbox Effector runs a
// credentialed `command` Effect through, confined by Landlock. Its words for the Effector: where it
// is in the companions image, its exit codes, and the report it writes with `--report FILE`.
//
//   jr2-confine --probe
//     one JSON line {"abi":N} and exit 0 when Landlock can confine here (N >= 1); else
//     {"abi":0,"error":"<why>"} and exit 3 (under gVisor: landlock_create_ruleset is not implemented).
//   jr2-confine [--rx PATH]... [--ro PATH]... [--rw PATH]... [--cwd DIR] [--timeout SECONDS]
//               [--report FILE] -- ARGV...
//     --rx read and execute beneath PATH, --ro read beneath PATH (or the one file), --rw read, write,
//     create and remove beneath PATH; a missing --rx/--ro PATH is skipped, a missing --rw or --cwd
//     is exit 125. Always granted: /dev/null, /dev/zero, /dev/urandom, /dev/random read and write,
//     /proc read. ARGV runs with jr2-confine's own environment, stdin /dev/null, stdout and stderr
//     inherited, in its own process group; every process it leaves is killed before jr2-confine exits.
import { z } from "zod";

/** Where the companions image carries jr2-confine (scripts/images/spec.ts CONFINE_PATH says the same). */
export const CONFINE_IMAGE_PATH = "/app/jr2-confine";

/** jr2-confine's own exit codes; otherwise it exits with the command's code, or 128+signal. */
export const CONFINE_EXIT = {
  /** --probe: Landlock cannot confine here. */
  unavailable: 3,
  /** --timeout passed: the command and all it started were killed. */
  timeout: 124,
  /** jr2-confine's own failure (flags, a missing --rw or --cwd, Landlock refused, exec failed), with one
   * line on stderr starting "jr2-confine: ". */
  failure: 125,
} as const;

/** `jr2-confine --probe`'s line. */
export const ConfineProbe = z.union([
  z.strictObject({ abi: z.number().int().min(1) }),
  z.strictObject({ abi: z.literal(0), error: z.string() }),
]);
export type ConfineProbe = z.infer<typeof ConfineProbe>;

/** What `--report FILE` holds once everything the command started has ended. */
export const ConfineReport = z
  .strictObject({
    /** The command's exit code when it exited; null when a signal ended it or it never ran. */
    exitCode: z.number().int().min(0).max(255).nullable(),
    /** The signal that ended the command (e.g. "SIGKILL"), or null. */
    signal: z.string().nullable(),
    /** --timeout passed (jr2-confine exited 124). */
    timedOut: z.boolean(),
    /** Processes jr2-confine killed: those left after the command exited (daemons, background jobs), or
     * on timeout all of them, the command too. */
    ended: z.number().int().min(0),
    /** The kernel's Landlock ABI version; 0 when Landlock is unavailable. */
    abi: z.number().int().min(0),
    /** jr2-confine's own failure (it exited 125, or 128+signal when a signal ended it), or null. */
    error: z.string().nullable(),
  })
  .meta({ description: "The report jr2-confine writes with --report FILE (decision 0070)." });
export type ConfineReport = z.infer<typeof ConfineReport>;
