// The shard plan of several Orchestrators (orchestrator/replicas/shard-plan.ts, decision 0079):
// the desired table (balanced capped rendezvous hashing) and one replica's next actions from what
// it has seen of the Leases, by its own clock.
import { desiredAssignment, liveMembers, plan, type PlanInput } from "../../orchestrator/replicas/shard-plan";

const N = 16;
const timing = { leaseDurationMs: 12_000, renewEveryMs: 4_000, renewDeadlineMs: 8_000 };
const names = (m: number, tag = "a") => Array.from({ length: m }, (_, i) => `jr2-orchestrator-${tag}${i}-x${i * 7}`);
const counts = (table: Array<string | undefined>) => {
  const c = new Map<string, number>();
  for (const m of table) c.set(m!, (c.get(m!) ?? 0) + 1);
  return c;
};

describe("desiredAssignment", () => {
  it.each([1, 2, 3, 4, 5, 6, 7])("gives every shard one of %i members, counts differing by at most one", (m) => {
    for (let trial = 0; trial < 50; trial++) {
      const members = names(m, `t${trial}-`);
      const table = desiredAssignment(members, N);
      expect(table).toHaveLength(N);
      for (const holder of table) expect(members).toContain(holder);
      const c = [...counts(table).values()];
      expect(c).toHaveLength(m);
      expect(Math.max(...c) - Math.min(...c)).toBeLessThanOrEqual(1);
      expect(Math.max(...c)).toBeLessThanOrEqual(Math.ceil(N / m));
    }
  });

  it("is the same table from any member's view (order of the members seen does not matter)", () => {
    const members = names(5);
    const table = desiredAssignment(members, N);
    expect(desiredAssignment([...members].reverse(), N)).toEqual(table);
    expect(desiredAssignment([members[2], ...members, members[0]], N)).toEqual(table);
    for (const me of members) {
      const p = plan({
        me,
        now: 100_000,
        count: N,
        timing,
        shards: [],
        members: members.map((identity) => ({ identity, changedAt: 99_000, durationMs: 12_000 })),
        memberRenewedAt: 99_000,
        held: new Map(),
      });
      expect(p.desired).toEqual(table);
    }
  });

  it("moves few shards on a join: the newcomer's share, and a little rebalancing", () => {
    // A function of the member set alone and exactly balanced, the table does not always move only
    // the newcomer's share: the caps shift some shards between the others. Over 50 member sets of
    // each size a join moves at most half the shards, on average at most the share plus three.
    for (let m = 1; m <= 7; m++) {
      let total = 0;
      for (let trial = 0; trial < 50; trial++) {
        const members = names(m, `j${trial}-`);
        const before = desiredAssignment(members, N);
        const after = desiredAssignment([...members, `jr2-orchestrator-new-${trial}`], N);
        const moved = before.filter((holder, i) => after[i] !== holder).length;
        expect(moved).toBeLessThanOrEqual(N / 2);
        total += moved;
      }
      expect(total / 50).toBeLessThanOrEqual(Math.ceil(N / (m + 1)) + 3);
    }
  });

  it("has no holder when no member is live", () => {
    expect(desiredAssignment([], 4)).toEqual([undefined, undefined, undefined, undefined]);
  });
});

/** A view where `members` are live (seen changing 1 s ago) and every shard free since `now`. */
function input(me: string, members: string[], over: Partial<PlanInput> = {}): PlanInput {
  const now = 1_000_000;
  return {
    me,
    now,
    count: N,
    timing,
    shards: Array.from({ length: N }, () => ({ holder: "", changedAt: now, durationMs: 12_000 })),
    members: members.map((identity) => ({ identity, changedAt: now - 1_000, durationMs: 12_000 })),
    memberRenewedAt: now - 1_000,
    held: new Map(),
    ...over,
  };
}
const kinds = (p: ReturnType<typeof plan>, kind: string) =>
  p.actions.flatMap((a) => (a.kind === kind && "shard" in a ? [a.shard] : []));

describe("plan", () => {
  const members = names(3);
  const [a, b, c] = members;

  it("takes the free shards desired for it, and only those", () => {
    const p = plan(input(a, members));
    const mine = p.desired.flatMap((m, i) => (m === a ? [i] : []));
    expect(kinds(p, "acquire")).toEqual(mine);
  });

  it("counts a member live while its Lease was seen changing within its duration, by the local clock", () => {
    const now = 1_000_000;
    const live = liveMembers({
      me: a,
      now,
      timing,
      memberRenewedAt: now - 100,
      members: [
        { identity: b, changedAt: now - 12_000, durationMs: 12_000 },
        { identity: c, changedAt: now - 12_001, durationMs: 12_000 },
      ],
    });
    expect(live).toEqual([a, b].sort());
  });

  it("waits for a held Lease of another to expire (seen unchanged past its duration) before taking it", () => {
    const base = input(a, members);
    const shard = plan(base).desired.indexOf(a);
    const seen = (changedAt: number) =>
      base.shards.map((s, i) => (i === shard ? { holder: "gone", changedAt, durationMs: 12_000 } : s));
    expect(kinds(plan({ ...base, shards: seen(base.now - 12_000) }), "acquire")).not.toContain(shard);
    expect(kinds(plan({ ...base, shards: seen(base.now - 12_001) }), "acquire")).toContain(shard);
  });

  it("takes back at once a Lease that names it but it does not hold (a loss, a restart)", () => {
    const base = input(a, members);
    const shard = plan(base).desired.indexOf(a);
    const shards = base.shards.map((s, i) =>
      i === shard ? { holder: a, changedAt: base.now, durationMs: 12_000 } : s,
    );
    expect(kinds(plan({ ...base, shards }), "acquire")).toContain(shard);
  });

  it("leaves a shard desired for another live member alone until it is idle past a duration, then anyone takes it", () => {
    const base = input(a, members);
    const shard = plan(base).desired.indexOf(b);
    const free = (changedAt: number) =>
      base.shards.map((s, i) => (i === shard ? { holder: "", changedAt, durationMs: 12_000 } : s));
    const held = (changedAt: number) =>
      base.shards.map((s, i) => (i === shard ? { holder: "gone", changedAt, durationMs: 12_000 } : s));
    expect(kinds(plan({ ...base, shards: free(base.now - 12_000) }), "acquire")).not.toContain(shard);
    expect(kinds(plan({ ...base, shards: free(base.now - 12_001) }), "acquire")).toContain(shard);
    expect(kinds(plan({ ...base, shards: held(base.now - 24_000) }), "acquire")).not.toContain(shard);
    expect(kinds(plan({ ...base, shards: held(base.now - 24_001) }), "acquire")).toContain(shard);
  });

  it("renews a held shard when due, and loses it past the renewal deadline", () => {
    const base = input(a, members);
    const shard = plan(base).desired.indexOf(a);
    const held = (renewedAt: number) => new Map([[shard, { renewedAt, releasing: false }]]);
    expect(plan({ ...base, held: held(base.now - 3_999) }).actions).not.toContainEqual({ kind: "renew", shard });
    expect(plan({ ...base, held: held(base.now - 4_000) }).actions).toContainEqual({ kind: "renew", shard });
    expect(plan({ ...base, held: held(base.now - 8_000) }).actions).toContainEqual({ kind: "renew", shard });
    const late = plan({ ...base, held: held(base.now - 8_001) });
    expect(late.actions).toContainEqual({ kind: "lose", shard });
    expect(late.actions).not.toContainEqual({ kind: "renew", shard });
  });

  it("releases a held shard desired for another live member; keeps renewing one being handed over", () => {
    const base = input(a, members);
    const shard = plan(base).desired.indexOf(b);
    expect(plan({ ...base, held: new Map([[shard, { renewedAt: base.now, releasing: false }]]) }).actions).toEqual(
      expect.arrayContaining([{ kind: "release", shard }]),
    );
    const handing = plan({ ...base, held: new Map([[shard, { renewedAt: base.now - 5_000, releasing: true }]]) });
    expect(handing.actions).toContainEqual({ kind: "renew", shard });
    expect(handing.actions).not.toContainEqual({ kind: "release", shard });
  });

  it("keeps a held shard whose desired member is not live (the table counts only live members)", () => {
    const base = input(a, [a, b]);
    const shard = plan(base).desired.indexOf(b);
    const p = plan({
      ...base,
      members: [{ identity: b, changedAt: base.now - 12_001, durationMs: 12_000 }],
      held: new Map([[shard, { renewedAt: base.now, releasing: false }]]),
    });
    expect(p.live).toEqual([a]);
    expect(p.actions).not.toContainEqual({ kind: "release", shard });
  });

  it("before it joined, or once its own member Lease is past the deadline, takes nothing", () => {
    expect(kinds(plan(input(a, members, { memberRenewedAt: undefined })), "acquire")).toEqual([]);
    const stale = plan(input(a, members, { memberRenewedAt: 1_000_000 - 8_001 }));
    expect(kinds(stale, "acquire")).toEqual([]);
    expect(stale.actions).toContainEqual({ kind: "renewMember" });
  });

  it("does nothing with a shard not read yet", () => {
    const p = plan(input(a, members, { shards: [] }));
    expect(kinds(p, "acquire")).toEqual([]);
  });
});
