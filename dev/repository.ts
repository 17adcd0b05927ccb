// A bare repository with one empty commit on `main`, made with real git: what the demo, the
// benchmarks and some tests give a workspace to check out. `src` is the scratch clone it is made in.
import { execFileSync } from "node:child_process";

export function oneCommitRepository(src: string, bare: string): string {
  const git = (...a: string[]) => execFileSync("git", a, { stdio: "ignore" });
  git("init", "--quiet", "-b", "main", src);
  git(
    "-C",
    src,
    "-c",
    "user.name=jr2",
    "-c",
    "user.email=jr2@localhost",
    "commit",
    "--quiet",
    "--allow-empty",
    "-m",
    "one",
  );
  git("clone", "--quiet", "--bare", src, bare);
  return bare;
}
