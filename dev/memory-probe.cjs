// Preloaded (`node --expose-gc --require`) into the Pepr module by the burst benchmark only
// (bench/sandbox-burst-bench.ts): on SIGUSR2 it collects garbage (twice: weak references and finalizers
// free more on the second pass) and writes what the process holds to JR2_MEMORY_PROBE_FILE, so a
// figure is what is retained rather than what the heap has not yet given back. It also lists
// what is loaded: each package's count of CommonJS modules and bytes of source (ES modules, such as
// @kubernetes/client-node's, are not in require.cache: a heap snapshot shows those). Nothing
// deployed loads it.
const fs = require("node:fs");

function packageOf(file) {
  const i = file.lastIndexOf("node_modules/");
  if (i < 0) return "(the module)";
  const rest = file.slice(i + "node_modules/".length).split("/");
  return rest[0].startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0];
}

function loaded() {
  const byPackage = new Map();
  for (const file of Object.keys(require.cache)) {
    let size = 0;
    try {
      size = fs.statSync(file).size;
    } catch {
      // a virtual module: no file
    }
    const p = packageOf(file);
    const held = byPackage.get(p) ?? { package: p, modules: 0, sourceBytes: 0 };
    held.modules += 1;
    held.sourceBytes += size;
    byPackage.set(p, held);
  }
  return [...byPackage.values()].sort((a, b) => b.sourceBytes - a.sourceBytes);
}

process.on("SIGUSR2", () => {
  if (typeof global.gc === "function") {
    global.gc();
    global.gc();
  }
  const file = process.env.JR2_MEMORY_PROBE_FILE;
  if (!file) return;
  // JR2_HEAP_SNAPSHOT=1: a heap snapshot beside the report, for a closer look (bench/heap-summary.ts).
  if (process.env.JR2_HEAP_SNAPSHOT === "1") require("node:v8").writeHeapSnapshot(`${file}.heapsnapshot`);
  const report = { at: Date.now(), ...process.memoryUsage(), loaded: loaded() };
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(report));
  fs.renameSync(`${file}.tmp`, file);
});
