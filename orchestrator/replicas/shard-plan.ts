// What one replica does next with the shard Leases (decision 0079), from what it has observed of
// them: pure, so every rule is unit tested and the lease loop (shard-leases.ts) only reads, writes
// and tells. Times are this replica's own clock only: a Lease's age is measured from the moment this
// replica saw its resourceVersion change, never from the renewTime another machine wrote (client-go
// leader election does the same), so clocks that disagree cannot make two holders.
import { createHash } from "node:crypto";

export type ShardTiming = {
  /** How long a Lease stands unrenewed before another replica may take it. */
  leaseDurationMs: number;
  /** How often a holder renews. */
  renewEveryMs: number;
  /** A holder that has not renewed for this long stops acting on the shard: below leaseDurationMs,
   * so it has stopped before any other replica may take it. */
  renewDeadlineMs: number;
};

/** A shard Lease as this replica last saw it. A shard with no Lease object is free since the
 * moment its absence was first seen. */
export type ShardSeen = {
  /** Its holderIdentity; "" when free or absent. */
  holder: string;
  /** Local time its resourceVersion was last seen to change (or it was first seen). */
  changedAt: number;
  /** Its leaseDurationSeconds, in ms. */
  durationMs: number;
};

/** A member Lease as this replica last saw it. */
export type MemberSeen = { identity: string; changedAt: number; durationMs: number };

/** A shard this replica holds: when its last successful renewal was sent, and whether it is being
 * handed over (its loss told, the Lease still renewed until it is given up). */
export type Held = { renewedAt: number; releasing: boolean };

export type PlanInput = {
  me: string;
  now: number;
  count: number;
  timing: ShardTiming;
  /** Per shard; undefined while not yet read (nothing is done with it then). */
  shards: ReadonlyArray<ShardSeen | undefined>;
  members: ReadonlyArray<MemberSeen>;
  /** When this replica's member Lease was last written; undefined before it joined. */
  memberRenewedAt: number | undefined;
  held: ReadonlyMap<number, Held>;
};

export type Action =
  | { kind: "acquire"; shard: number }
  | { kind: "renew"; shard: number }
  | { kind: "release"; shard: number }
  /** Its renewal deadline passed: it is no longer this replica's (told at once, nothing written). */
  | { kind: "lose"; shard: number }
  | { kind: "renewMember" };

export type Plan = {
  /** The live members, sorted. */
  live: string[];
  /** The desired holder of each shard; undefined when no member is live. */
  desired: Array<string | undefined>;
  actions: Action[];
};

/** Whether a member counts as live now: its Lease seen changing within its duration; this replica
 * itself while its own member Lease is renewed within the deadline. */
export function liveMembers(input: Pick<PlanInput, "me" | "now" | "timing" | "members" | "memberRenewedAt">): string[] {
  const live = new Set<string>();
  for (const m of input.members) {
    if (m.identity !== input.me && input.now - m.changedAt <= m.durationMs) live.add(m.identity);
  }
  if (input.memberRenewedAt !== undefined && input.now - input.memberRenewedAt <= input.timing.renewDeadlineMs)
    live.add(input.me);
  return [...live].sort();
}

/** A member's rank for a shard (rendezvous hashing): the same on every replica. */
export function rank(member: string, shard: number): bigint {
  return createHash("sha256").update(`${member}\n${shard}`).digest().readBigUInt64BE(0);
}

/**
 * The desired holder of each shard: balanced capped rendezvous hashing. With N shards and M members,
 * N = qM + r: r members hold q+1 shards, the others q (so at most ceil(N/M), counts differing by at
 * most one). Shards are taken in order 0..N-1; each goes to its highest-ranked member still under
 * the cap (q+1 while fewer than r members have reached q+1, then q). A function of the member set
 * alone, so every replica that sees the same members computes the same table, and a member joining
 * or leaving mostly moves the shards it ranks high on.
 */
export function desiredAssignment(members: readonly string[], count: number): Array<string | undefined> {
  const ms = [...new Set(members)].sort();
  if (ms.length === 0) return Array.from({ length: count }, () => undefined);
  const q = Math.floor(count / ms.length);
  let big = count % ms.length;
  const held = new Map(ms.map((m) => [m, 0]));
  const out: string[] = [];
  for (let shard = 0; shard < count; shard++) {
    const ranks = new Map(ms.map((m) => [m, rank(m, shard)]));
    const order = [...ms].sort((a, b) => {
      const x = ranks.get(a)!;
      const y = ranks.get(b)!;
      return x > y ? -1 : x < y ? 1 : a < b ? -1 : 1;
    });
    const cap = big > 0 ? q + 1 : q;
    const m = order.find((m) => held.get(m)! < cap)!;
    held.set(m, held.get(m)! + 1);
    if (held.get(m) === q + 1) big--;
    out.push(m);
  }
  return out;
}

/** Whether a shard Lease, as seen, is held by nobody now: free, or unrenewed past its duration. */
export function expired(seen: ShardSeen, now: number): boolean {
  return seen.holder === "" || now - seen.changedAt > seen.durationMs;
}

/** This replica's next actions. */
export function plan(input: PlanInput): Plan {
  const { me, now, timing } = input;
  const live = liveMembers(input);
  const isLive = new Set(live);
  const desired = desiredAssignment(live, input.count);
  const actions: Action[] = [];
  for (let shard = 0; shard < input.count; shard++) {
    const want = desired[shard];
    const held = input.held.get(shard);
    if (held) {
      if (now - held.renewedAt > timing.renewDeadlineMs) actions.push({ kind: "lose", shard });
      else if (!held.releasing && want !== undefined && want !== me && isLive.has(want))
        actions.push({ kind: "release", shard });
      else if (now - held.renewedAt >= timing.renewEveryMs) actions.push({ kind: "renew", shard });
      continue;
    }
    const seen = input.shards[shard];
    if (!seen || !isLive.has(me)) continue;
    // Its holder by name is this very replica, not holding it: a loss past the deadline or a
    // restart under the same pod name. Nobody else wrote it since it was seen (the write carries
    // that resourceVersion), so it may be taken back at once.
    const mine = seen.holder === me;
    if (want === me && (mine || expired(seen, now))) {
      actions.push({ kind: "acquire", shard });
      continue;
    }
    // Free or expired for a whole further duration: its desired member never came (or cannot
    // write); any live member takes it rather than leave its workspaces stranded.
    const idleFor = seen.holder === "" ? now - seen.changedAt : now - seen.changedAt - seen.durationMs;
    if (idleFor > timing.leaseDurationMs) actions.push({ kind: "acquire", shard });
  }
  if (input.memberRenewedAt !== undefined && now - input.memberRenewedAt >= timing.renewEveryMs)
    actions.push({ kind: "renewMember" });
  return { live, desired, actions };
}
