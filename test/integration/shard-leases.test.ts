// Several Orchestrators' shard Leases on the real API server (orchestrator/replicas/shard-leases.ts,
// decision 0079), with short timing: three replicas share the 16 shards 6/5/5, each held by one; a
// replica stopped hands its shards over (their loss heard while its Leases still name it) and the
// others take them all; a replica killed in its own process has its shards taken only once its
// Leases expired; a replica frozen past its deadline tells its loss on waking and never writes over
// the replica that took over. Every wait polls the state itself, with a deadline.
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { kubeRequest } from "../../lib/kube";
import { ORCHESTRATOR_LEASE_LABEL, SHARD_COUNT, memberLeaseName } from "../../api/wire";
import { ShardLeases } from "../../orchestrator/replicas/shard-leases";
import type { OwnershipChange } from "../../orchestrator/replicas/ownership";
import { eventually } from "../support/eventually";
import { useNamespace } from "./support/cluster";

const ROOT = join(__dirname, "..", "..");
const timing = { leaseDurationMs: 3000, renewEveryMs: 1000, renewDeadlineMs: 2000, tickMs: 200 };
const WAIT_MS = 30_000;

type Lease = {
  metadata: { name: string; resourceVersion: string };
  spec?: { holderIdentity?: string; leaseTransitions?: number; renewTime?: string; acquireTime?: string };
};
type ShardLease = { holder: string; transitions: number; renewTime?: string; acquireTime?: string };

/** Each shard's Lease as the API server has it now ("" for no holder or no Lease). */
async function shardLeases(ns: string): Promise<ShardLease[]> {
  const list = await kubeRequest<{ items: Lease[] }>(
    "GET",
    `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases?labelSelector=${encodeURIComponent(`${ORCHESTRATOR_LEASE_LABEL}=shard`)}`,
  );
  const out: ShardLease[] = Array.from({ length: SHARD_COUNT }, () => ({ holder: "", transitions: 0 }));
  for (const l of list.items) {
    const shard = Number(/-(\d+)$/.exec(l.metadata.name)![1]);
    out[shard] = {
      holder: l.spec?.holderIdentity ?? "",
      transitions: l.spec?.leaseTransitions ?? 0,
      renewTime: l.spec?.renewTime,
      acquireTime: l.spec?.acquireTime,
    };
  }
  return out;
}
const holders = async (ns: string) => (await shardLeases(ns)).map((l) => l.holder);
const shardsOf = (hs: string[], who: string) => hs.flatMap((h, i) => (h === who ? [i] : []));
const sorted = (xs: Iterable<number>) => [...xs].sort((a, b) => a - b);

/** An in-process replica, and the shards its listener was told it holds. */
function replica(ns: string, identity: string) {
  const logs: Array<Record<string, unknown>> = [];
  const leases = new ShardLeases({
    namespace: ns,
    identity,
    peerUrl: `https://${identity}.test:8090`,
    timing,
    log: (e) => logs.push(e),
  });
  const told = new Set<number>();
  const changes: OwnershipChange[] = [];
  leases.onChange((c) => {
    changes.push(c);
    c.lost.forEach((s) => told.delete(s));
    c.gained.forEach((s) => told.add(s));
  });
  return { identity, leases, told, changes, logs };
}
type Replica = ReturnType<typeof replica>;

/** Waits until the Leases name exactly these replicas, each holding what its listener was told and
 * what it says it owns; answers the holders. On timeout, says what it last saw. */
async function settled(ns: string, rs: Replica[], counts: number[]) {
  let last = "";
  try {
    return await eventually(
      `the shards held ${counts.join("/")} by ${rs.map((r) => r.identity).join(", ")}`,
      async () => {
        const hs = await holders(ns);
        last = JSON.stringify({
          holders: hs,
          replicas: rs.map((r) => ({
            id: r.identity,
            told: sorted(r.told),
            owned: r.leases.owned(),
            logs: r.logs.slice(-8),
          })),
        });
        for (const r of rs) {
          const leased = shardsOf(hs, r.identity);
          if (JSON.stringify(leased) !== JSON.stringify(sorted(r.told))) return undefined;
          if (JSON.stringify(leased) !== JSON.stringify(r.leases.owned())) return undefined;
        }
        const got = rs.map((r) => shardsOf(hs, r.identity).length).sort((a, b) => b - a);
        if (JSON.stringify(got) !== JSON.stringify(counts)) return undefined;
        return hs;
      },
      WAIT_MS,
      100,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; last seen: ${last}`);
  }
}

/** A replica in a child process: its JSON lines, as they come. */
function child(ns: string, identity: string) {
  // Node itself with tsx's loader, not the tsx command: that runs Node as a child of its own, which
  // a SIGKILL or SIGSTOP of the command would not reach.
  const proc: ChildProcess = spawn(
    process.execPath,
    ["--import", "tsx", join(ROOT, "test", "support", "shard-leases-child.ts")],
    {
      cwd: ROOT,
      env: { ...process.env, NS: ns, IDENTITY: identity, TIMING: JSON.stringify(timing) },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  const lines: Array<Record<string, unknown>> = [];
  let buf = "";
  let err = "";
  proc.stdout!.on("data", (c: Buffer) => {
    buf += c.toString();
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      lines.push(JSON.parse(buf.slice(0, i)));
      buf = buf.slice(i + 1);
    }
  });
  proc.stderr!.on("data", (c: Buffer) => (err += c.toString()));
  const exited = new Promise<void>((r) => proc.once("exit", () => r()));
  return { identity, proc, lines, stderr: () => err, exited };
}

async function stopAll(rs: Replica[]) {
  await Promise.all(rs.map((r) => r.leases.stop()));
}

describe("ShardLeases against the API server", () => {
  const three = useNamespace("shard-leases", { optedIn: false });

  it("three replicas hold every shard, each by exactly one, 6/5/5; one stopped hands its shards over first", async () => {
    const rs = ["orch-a", "orch-b", "orch-c"].map((id) => replica(three.name, id));
    try {
      await Promise.all(rs.map((r) => r.leases.start()));
      expect(rs.every((r) => r.leases.joined)).toBe(true);
      const hs = await settled(three.name, rs, [6, 5, 5]);
      expect(hs.every((h) => rs.some((r) => r.identity === h))).toBe(true);
      // Each knows the others as peers, and where every workspace's owner is.
      for (const r of rs)
        expect(r.leases.peers().map((p) => p.identity)).toEqual(
          rs.map((x) => x.identity).filter((i) => i !== r.identity),
        );
      const ws = "some-workspace";
      const owner = hs[rs[0].leases.shardOf(ws)];
      const seen = () =>
        rs.map((r) => {
          const o = r.leases.ownerOf(ws);
          return o.kind === "self" ? r.identity : o.kind === "peer" ? o.identity : "none";
        });
      // Each replica's watch may land a moment after the Leases were read here.
      await eventually("every replica naming the same owner", () =>
        seen().every((o) => o === owner) ? true : undefined,
      );
      expect(await rs[1].leases.waitForOwner(ws, 1000)).toEqual(
        owner === rs[1].identity
          ? { kind: "self" }
          : { kind: "peer", identity: owner, url: `https://${owner}.test:8090` },
      );
      expect(rs.reduce((n, r) => n + r.leases.stats().held, 0)).toBe(SHARD_COUNT);

      // Stop one: while its listener hears the loss, the Leases still name it; then they do not.
      const [a, ...rest] = rs;
      const order: string[] = [];
      a.leases.onChange(async (c) => {
        if (c.lost.length === 0) return;
        const now = await holders(three.name);
        order.push(`told ${c.lost.length}, still named on ${c.lost.filter((s) => now[s] === a.identity).length}`);
      });
      const had = sorted(a.told);
      await a.leases.stop();
      order.push("stopped");
      expect(order).toEqual([`told ${had.length}, still named on ${had.length}`, "stopped"]);
      expect(a.leases.joined).toBe(false);
      expect(a.told.size).toBe(0);
      const after = await holders(three.name);
      expect(had.filter((s) => after[s] === a.identity)).toEqual([]);
      await expect(
        kubeRequest(
          "GET",
          `/apis/coordination.k8s.io/v1/namespaces/${three.name}/leases/${memberLeaseName(a.identity)}`,
        ),
      ).rejects.toMatchObject({ status: 404 });
      await settled(three.name, rest, [8, 8]);
    } finally {
      await stopAll(rs);
    }
  });

  const killed = useNamespace("shard-leases-kill", { optedIn: false });

  it("a replica killed in its own process: the others take its shards, never before its Leases expired", async () => {
    const rs = ["orch-b", "orch-c"].map((id) => replica(killed.name, id));
    const k = child(killed.name, "orch-k");
    try {
      await Promise.all(rs.map((r) => r.leases.start()));
      await eventually(
        "the child replica's shards",
        async () => {
          const hs = await holders(killed.name);
          const counts = [...rs.map((r) => shardsOf(hs, r.identity).length), shardsOf(hs, k.identity).length];
          return hs.every((h) => h !== "") && counts.sort().join() === "5,5,6" ? hs : undefined;
        },
        WAIT_MS,
        100,
      );
      k.proc.kill("SIGKILL");
      await k.exited;
      // Its last renewals, as the API server keeps them: nothing writes for it any more.
      const last = await shardLeases(killed.name);
      const its = shardsOf(
        last.map((l) => l.holder),
        k.identity,
      );
      expect(its.length).toBeGreaterThan(0);
      await settled(killed.name, rs, [8, 8]);
      const now = await shardLeases(killed.name);
      for (const s of its) {
        // One machine's clock wrote both times here: the take-over was sent at least a lease
        // duration after the killed replica's last renewal.
        const gap = Date.parse(now[s].acquireTime!) - Date.parse(last[s].renewTime!);
        expect({ shard: s, gapAtLeastDuration: gap >= timing.leaseDurationMs }).toEqual({
          shard: s,
          gapAtLeastDuration: true,
        });
        expect(now[s].transitions).toBeGreaterThan(last[s].transitions);
      }
    } finally {
      k.proc.kill("SIGKILL");
      await stopAll(rs);
    }
  });

  const frozen = useNamespace("shard-leases-stop", { optedIn: false });

  it("a replica frozen past its deadline tells its loss on waking, and never renews over the new holder", async () => {
    const rs = ["orch-b", "orch-c"].map((id) => replica(frozen.name, id));
    const f = child(frozen.name, "orch-f");
    // Every Lease as polled: a holder that changes without a new transition was written over.
    const history: ShardLease[][] = [];
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const seen = await shardLeases(frozen.name).catch(() => undefined);
        if (seen) history.push(seen);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      await Promise.all(rs.map((r) => r.leases.start()));
      const before = await eventually(
        "the frozen-to-be replica's shards",
        async () => {
          const hs = await holders(frozen.name);
          const counts = [...rs.map((r) => shardsOf(hs, r.identity).length), shardsOf(hs, f.identity).length];
          return hs.every((h) => h !== "") && counts.sort().join() === "5,5,6" ? shardsOf(hs, f.identity) : undefined;
        },
        WAIT_MS,
        100,
      );
      const gainedTold = () =>
        sorted(
          f.lines
            .filter((l) => l.event === "change")
            .reduce((held, l) => {
              (l.lost as number[]).forEach((s) => held.delete(s));
              (l.gained as number[]).forEach((s) => held.add(s));
              return held;
            }, new Set<number>()),
        );
      await eventually(
        "the child told its gains",
        async () => (JSON.stringify(gainedTold()) === JSON.stringify(before) ? true : undefined),
        WAIT_MS,
        50,
      );
      f.proc.kill("SIGSTOP");
      const linesAtStop = f.lines.length;
      await settled(frozen.name, rs, [8, 8]);
      f.proc.kill("SIGCONT");
      // On waking it first tells the loss of every shard it held (before it gains any again).
      const changesSince = () => f.lines.slice(linesAtStop).filter((l) => l.event === "change");
      const lostFirst = await eventually(
        "the woken replica telling its losses",
        async () => {
          const firstGain = changesSince().findIndex((c) => (c.gained as number[]).length > 0);
          const losses = changesSince().slice(0, firstGain < 0 ? undefined : firstGain);
          const lost = sorted(losses.flatMap((c) => c.lost as number[]));
          return firstGain >= 0 || JSON.stringify(lost) === JSON.stringify(before) ? lost : undefined;
        },
        WAIT_MS,
        50,
      );
      expect(lostFirst).toEqual(before);
      // It comes back as a member and takes its share again, handed over by the others.
      await eventually(
        "the woken replica back with its share",
        async () => {
          const hs = await holders(frozen.name);
          const n = shardsOf(hs, f.identity).length;
          return n >= 5 && hs.every((h) => h !== "") ? true : undefined;
        },
        WAIT_MS,
        100,
      );
    } finally {
      polling = false;
      await poller;
      f.proc.kill("SIGKILL");
      await stopAll(rs);
    }
    const overwritten: string[] = [];
    for (let i = 1; i < history.length; i++)
      for (let s = 0; s < SHARD_COUNT; s++) {
        const [p, n] = [history[i - 1][s], history[i][s]];
        if (p.holder !== "" && n.holder !== "" && p.holder !== n.holder && n.transitions <= p.transitions)
          overwritten.push(`shard ${s}: ${p.holder} -> ${n.holder} at transitions ${n.transitions}`);
      }
    expect(overwritten).toEqual([]);
    expect(history.length).toBeGreaterThan(10);
  });
});
