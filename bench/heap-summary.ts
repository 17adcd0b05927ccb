// `npx tsx bench/heap-summary.ts <file.heapsnapshot>`: what a heap snapshot holds, by node type and
// by constructor name (self sizes), the largest first. Used to find what the operator's idle heap
// is made of (dev/memory-probe.cjs writes the snapshot when JR2_HEAP_SNAPSHOT=1).
import { readFileSync } from "node:fs";

type Snapshot = {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
};

const file = process.argv[2];
if (!file) throw new Error("usage: tsx bench/heap-summary.ts <file.heapsnapshot>");
const snap = JSON.parse(readFileSync(file, "utf8")) as Snapshot;
const fields = snap.snapshot.meta.node_fields;
const types = snap.snapshot.meta.node_types[0];
const [iType, iName, iSize] = ["type", "name", "self_size"].map((f) => fields.indexOf(f));
const byType = new Map<string, number>();
const byName = new Map<string, number>();
let total = 0;
for (let i = 0; i < snap.nodes.length; i += fields.length) {
  const type = types[snap.nodes[i + iType]!]!;
  const size = snap.nodes[i + iSize]!;
  const name = type === "object" || type === "closure" ? snap.strings[snap.nodes[i + iName]!]! : `(${type})`;
  total += size;
  byType.set(type, (byType.get(type) ?? 0) + size);
  byName.set(name, (byName.get(name) ?? 0) + size);
}
const top = (m: Map<string, number>, n: number) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => ({ what: k, mb: Math.round((v / 2 ** 20) * 100) / 100 }));
console.log(
  JSON.stringify(
    { totalMb: Math.round((total / 2 ** 20) * 100) / 100, byType: top(byType, 12), byName: top(byName, 25) },
    null,
    1,
  ),
);
