// Each client's own tests, run as its package runs them, so the root's `npm test` runs them too
// (docs/decisions/0061-clients-beyond-typescript.md): the TypeScript package's `npm test` (tsc,
// then node's test runner) and the Python package's unittest. A missing python3 fails, naming
// what to install; it never skips.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { python3 } from "../support/python3";

const ROOT = join(__dirname, "..", "..");

describe("the clients' own tests", () => {
  it("the TypeScript package builds and passes its tests on its own", () => {
    const dir = join(ROOT, "clients", "typescript");
    // This Node's folder first: the package's scripts run tsc and node --test on it.
    const env = {
      ...process.env,
      PATH: `${dirname(process.execPath)}:${join(ROOT, "node_modules", ".bin")}:${process.env.PATH}`,
    };
    const run = spawnSync("npm", ["test"], { cwd: dir, env, encoding: "utf8" });
    if (run.status !== 0) throw new Error(`clients/typescript: npm test failed:\n${run.stdout}\n${run.stderr}`);
    expect(run.stdout).toMatch(/(#|ℹ) pass [1-9]/);
    expect(run.stdout).toMatch(/(#|ℹ) fail 0/);
  }, 120_000);

  it("the Python package passes its unittest", () => {
    const run = spawnSync(python3(), ["-m", "unittest", "discover", "-s", "tests", "-t", "."], {
      cwd: join(ROOT, "clients", "python"),
      encoding: "utf8",
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: "1" },
    });
    // unittest reports on stderr: how many ran, then OK or FAILED.
    if (run.status !== 0) throw new Error(`clients/python: unittest failed:\n${run.stderr}`);
    expect(run.stderr).toMatch(/Ran [1-9]\d* tests?/);
    expect(run.stderr).toMatch(/\nOK\b/);
  }, 60_000);
});
