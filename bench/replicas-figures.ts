// The pure parts of the several-Orchestrators benchmark (bench/orchestrator-replicas-bench.ts,
// decision 0079): a process's CPU seconds from /proc/<pid>/stat, the Lease writes seen between two
// reads, the replica holding the most shards, and the live workspaces no survivor yet serves ready.

/** utime + stime of a /proc/<pid>/stat line, in seconds. The command name (field 2) may hold
 * spaces and parentheses, so the fields are counted from its closing parenthesis. */
export function cpuSeconds(stat: string, ticksPerSecond: number): number {
  const after = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // After the name: state is field 3, so utime (14) and stime (15) are the 12th and 13th.
  const utime = Number(after[11]);
  const stime = Number(after[12]);
  if (!Number.isFinite(utime) || !Number.isFinite(stime)) throw new Error(`not a /proc/<pid>/stat line: ${stat}`);
  return (utime + stime) / ticksPerSecond;
}

export type LeaseSeen = { name: string; resourceVersion: string };

/** How many of `leases` were written since `before` (name -> resourceVersion): a new Lease or a
 * changed resourceVersion is one write; and what to compare the next read with. A Lease written
 * twice between two reads counts once, so reads must come more often than the renewals (4 s). */
export function leaseWrites(
  before: ReadonlyMap<string, string>,
  leases: readonly LeaseSeen[],
): { writes: number; seen: Map<string, string> } {
  const seen = new Map(leases.map((l) => [l.name, l.resourceVersion]));
  let writes = 0;
  for (const [name, rv] of seen) if (before.get(name) !== rv) writes++;
  return { writes, seen };
}

/** The index in `podNames` of the replica holding the most shards; a holder's identity is its pod
 * name and a suffix its process drew (`r1-3fa9c2`). -1 when none holds any. */
export function mostShards(holders: readonly string[], podNames: readonly string[]): number {
  const counts = podNames.map((pod) => holders.filter((h) => h.startsWith(`${pod}-`)).length);
  const max = Math.max(0, ...counts);
  return max === 0 ? -1 : counts.indexOf(max);
}

/** The names among `live` that no replica's own list shows ready. */
export function notYetServed(
  live: Iterable<string>,
  ownLists: ReadonlyArray<ReadonlyArray<{ name: string; state: string }>>,
): string[] {
  const ready = new Set(ownLists.flatMap((list) => list.filter((v) => v.state === "ready").map((v) => v.name)));
  return [...live].filter((n) => !ready.has(n));
}
