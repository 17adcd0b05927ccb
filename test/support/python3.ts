// The Python client's tests need python3 3.11 or newer (docs/decisions/0061): missing, they fail
// naming what to install; they never skip.
import { spawnSync } from "node:child_process";

/** The python3 command; throws naming the Debian package when there is none or it is too old. */
export function python3(): string {
  const found = spawnSync("python3", ["-c", "import sys; assert sys.version_info >= (3, 11), sys.version"], {
    encoding: "utf8",
  });
  if (found.error || found.status !== 0)
    throw new Error(
      `the Python client needs python3 3.11 or newer (apt-get install python3): ${found.error?.message ?? found.stderr}`,
    );
  return "python3";
}
