import { cpuSeconds, leaseWrites, mostShards, notYetServed } from "../../bench/replicas-figures";

describe("the several-Orchestrators bench's figures (decision 0079)", () => {
  it("reads utime and stime from a /proc/<pid>/stat line, even with spaces and parentheses in the name", () => {
    // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
    const stat = "4242 (node (a b)) S 1 4242 4242 0 -1 4194560 9000 0 3 0 250 50 0 0 20 0 11 0 12345";
    expect(cpuSeconds(stat, 100)).toBe(3);
  });

  it("names a line that is not /proc/<pid>/stat", () => {
    expect(() => cpuSeconds("nonsense", 100)).toThrow(/not a \/proc\/<pid>\/stat line/);
  });

  it("counts a new Lease and a changed resourceVersion as one write each, an unchanged one as none", () => {
    const first = leaseWrites(new Map(), [
      { name: "jr2-orchestrator-shard-0", resourceVersion: "10" },
      { name: "jr2-orchestrator-shard-1", resourceVersion: "11" },
    ]);
    expect(first.writes).toBe(2);
    const next = leaseWrites(first.seen, [
      { name: "jr2-orchestrator-shard-0", resourceVersion: "10" },
      { name: "jr2-orchestrator-shard-1", resourceVersion: "14" },
      { name: "jr2-orchestrator-member-r1-abc123", resourceVersion: "15" },
    ]);
    expect(next.writes).toBe(2);
    expect(next.seen.get("jr2-orchestrator-shard-1")).toBe("14");
  });

  it("finds the replica holding the most shards by its pod name, not a longer one sharing its prefix", () => {
    const holders = ["r1-aaaaaa", "r10-bbbbbb", "r10-bbbbbb", "", "r1-aaaaaa", "r10-bbbbbb"];
    expect(mostShards(holders, ["r1", "r10"])).toBe(1);
    expect(mostShards(["", ""], ["r0", "r1"])).toBe(-1);
  });

  it("lists the live workspaces no replica's own list shows ready", () => {
    const own = [
      [
        { name: "a", state: "ready" },
        { name: "b", state: "attaching" },
      ],
      [{ name: "c", state: "ready" }],
    ];
    expect(notYetServed(["a", "b", "c", "d"], own)).toEqual(["b", "d"]);
  });
});
