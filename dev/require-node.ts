// Imported first by what must not run on an older Node (dev/start.ts): the check runs on import
// (docs/decisions/0052-node-24-runtime.md). Run as a program (.ci/run, after `npm ci`), it also
// says which Node it found.
import cfg from "../package.json";
import { requireNode } from "./node-version";

requireNode();
if (require.main === module)
  process.stdout.write(
    `node ${process.version} (${process.execPath}), as package.json engines ask: ${cfg.engines.node}\n`,
  );
