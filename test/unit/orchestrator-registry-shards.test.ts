// The registry by shard (orchestrator/workspaces/registry.ts, decision 0079): a replica names a new
// workspace inside a shard it holds (503 unavailable when it holds none), adopts the run-labelled
// Sandboxes of the shards it gains as a restart restores them, and lets the shards it loses go:
// actors stopped (their renewals with them), event streams ended, nothing deleted. The ownership is
// a fixed table (test/support/shard-table.ts); the world is a gateway that records what it is asked.
import type { SandboxModel } from "../../api/crd";
import type { WorkspaceEvent } from "../../api/orchestrator-schemas";
import { ATTACH_ANNOTATION, RUN_LABEL, TENANT_LABEL } from "../../api/wire";
import type { Timers } from "../../orchestrator/workspaces/keepalive";
import { WorkspaceRegistry } from "../../orchestrator/workspaces/registry";
import type { PlaceRequest, SandboxGateway } from "../../orchestrator/workspaces/sandbox-gateway";
import type { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";
import { eventually } from "../support/eventually";
import { nameInShard, ShardTable } from "../support/shard-table";

/** Timers the test fires by hand: a lease's next renewal waits here until `fire`. */
class ManualTimers implements Timers {
  readonly pending = new Map<number, () => void>();
  #next = 0;
  set(fn: () => void): unknown {
    this.pending.set(++this.#next, fn);
    return this.#next;
  }
  clear(handle: unknown): void {
    this.pending.delete(handle as number);
  }
  fire(): void {
    const due = [...this.pending.values()];
    this.pending.clear();
    for (const fn of due) fn();
  }
}

/** A gateway that records every call; a place or a provision never ends (the actor waits there). */
function recordingGateway() {
  const calls = {
    placed: [] as PlaceRequest[],
    renewed: [] as string[],
    attached: [] as string[],
    owned: [] as string[],
    destroyed: [] as string[],
  };
  const never = () => new Promise<never>(() => undefined);
  const gateway = {
    place: (req: PlaceRequest) => (calls.placed.push(req), never()),
    provision: never,
    attach: async (name: string) => (calls.attached.push(name), { answer: { slots: {} } }),
    resumeOwned: async (s: SandboxModel) => void calls.owned.push(s.metadata!.name!),
    renew: async (name: string) => void calls.renewed.push(name),
    continuity: async () => ({ kind: "present" as const }),
    destroy: async (name: string) => void calls.destroyed.push(name),
  } as unknown as SandboxGateway;
  return { gateway, calls };
}

function sandbox(
  name: string,
  opts: { phase?: string; attach?: boolean; run?: boolean; tenant?: string; deleting?: boolean } = {},
): SandboxModel {
  return {
    apiVersion: "core.jr2.dev/v1alpha1",
    kind: "Sandbox",
    metadata: {
      name,
      uid: `uid-${name}`,
      creationTimestamp: "2026-12-07T10:00:00Z",
      ...(opts.deleting ? { deletionTimestamp: "2026-12-07T11:00:00Z" } : {}),
      labels: {
        ...(opts.run === false ? {} : { [RUN_LABEL]: name }),
        ...(opts.tenant ? { [TENANT_LABEL]: opts.tenant } : {}),
      },
      annotations: opts.attach
        ? {
            [ATTACH_ANNOTATION]: JSON.stringify({
              branch: "b",
              slots: [{ slot: "app", url: "https://h/a.git", identity: "h/a", key: "k" }],
            }),
          }
        : {},
    },
    spec: { image: "h:1" },
    ...(opts.phase ? { status: { phase: opts.phase, endpoint: `http://${name}:8080`, conditions: [] } } : {}),
  } as unknown as SandboxModel;
}

function watchOf(sandboxes: SandboxModel[]) {
  const byName = new Map(sandboxes.map((s) => [s.metadata!.name!, s]));
  return {
    whenListed: async () => undefined,
    get: (n: string) => byName.get(n),
    all: () => [...byName.values()],
  } as unknown as SandboxWatch;
}

const A = 3;
const B = 11;

function setup(sandboxes: SandboxModel[], held: number[]) {
  const { gateway, calls } = recordingGateway();
  const timers = new ManualTimers();
  const ownership = new ShardTable("replica-a", held);
  const registry = new WorkspaceRegistry({
    gateway,
    watch: watchOf(sandboxes),
    credentials: [],
    ownership,
    lease: { timers, intervalMs: 60_000 },
  });
  return { registry, calls, timers, ownership };
}

const names = async (r: WorkspaceRegistry) => (await r.list()).map((v) => v.name).sort();

describe("a registry's new workspace", () => {
  it("is named inside a shard this replica holds", async () => {
    const { registry, calls, ownership } = setup([], [A]);
    try {
      for (let i = 0; i < 8; i++) await registry.create({ image: "h", branch: "b", repos: [] });
      expect(calls.placed).toHaveLength(8);
      expect(calls.placed.map((p) => ownership.shardOf(p.name))).toEqual(Array(8).fill(A));
      expect(calls.placed.every((p) => /^ws-[0-9a-f]{10}$/.test(p.name))).toBe(true);
    } finally {
      registry.stop();
    }
  });

  it("is refused 503 unavailable, with nothing written, when this replica holds no shard", async () => {
    const { registry, calls } = setup([], []);
    const create = registry.create({ image: "h", branch: "b", repos: [] });
    await expect(create).rejects.toMatchObject({ status: 503, code: "unavailable" });
    await expect(create).rejects.toThrow(/holds no shard.*moving between replicas.*retry/);
    expect(calls.placed).toHaveLength(0);
  });
});

describe("adopt", () => {
  const readyA = nameInShard(A, "ready");
  const attachA = nameInShard(A, "attach");
  const pendingA = nameInShard(A, "pending");
  const foreignA = nameInShard(A, "foreign");
  const readyB = nameInShard(B, "ready");
  const world = () => [
    sandbox(readyA, { phase: "Ready", tenant: "team-a" }),
    sandbox(attachA, { phase: "Ready", attach: true }),
    sandbox(pendingA, { phase: "Pending" }),
    sandbox(foreignA, { phase: "Ready", run: false }),
    sandbox(readyB, { phase: "Ready", tenant: "team-b" }),
  ];

  it("rebuilds the run-labelled Sandboxes of the shards given, as a restore does, and only those", async () => {
    const { registry, calls, timers } = setup(world(), [A, B]);
    try {
      expect(await registry.adopt([A])).toBe(3);
      expect(await names(registry)).toEqual([attachA, pendingA, readyA].sort());
      const states = Object.fromEntries((await registry.list()).map((v) => [v.name, v.state]));
      expect(states[readyA]).toBe("ready");
      expect(states[pendingA]).toBe("provisioning");
      // Ready with an attach body: the attach is sent again (idempotent on the Harness), then ready.
      await eventually("the attach re-sent", () => (calls.attached.includes(attachA) ? true : undefined));
      expect((await registry.get(attachA))?.state).toBe("ready");
      // Not Ready yet: what the Sandbox owns is made sure of.
      expect(calls.owned).toEqual([pendingA]);
      // Each renews at once (its lease may be close to lapsing), then on its timer.
      timers.fire();
      await eventually("an immediate renewal each", () =>
        calls.renewed.length >= 3 ? [...calls.renewed].sort() : undefined,
      );
      expect([...calls.renewed].sort()).toEqual([attachA, pendingA, readyA].sort());
      // Adopting again changes nothing; the other shard comes when it is adopted.
      expect(await registry.adopt([A])).toBe(0);
      expect(await registry.adopt([B])).toBe(1);
      expect(await names(registry)).toEqual([attachA, pendingA, readyA, readyB].sort());
    } finally {
      registry.stop();
    }
  });

  it("takes up no shard this replica does not hold, and restore adopts every shard it holds", async () => {
    const { registry } = setup(world(), [B]);
    try {
      expect(await registry.adopt([A])).toBe(0);
      expect(await registry.restore()).toBe(1);
      expect(await names(registry)).toEqual([readyB]);
    } finally {
      registry.stop();
    }
  });
});

describe("release", () => {
  const inA = nameInShard(A, "moving");
  const inB = nameInShard(B, "staying");

  it("stops and forgets the actors of the shards given, ends their streams, and deletes nothing", async () => {
    const { registry, calls, timers, ownership } = setup(
      [sandbox(inA, { phase: "Ready", tenant: "team-a" }), sandbox(inB, { phase: "Ready" })],
      [A, B],
    );
    try {
      await registry.restore();
      timers.fire();
      await eventually("both renewed once", () => (calls.renewed.length === 2 ? true : undefined));
      const heard: WorkspaceEvent[] = [];
      let ended = 0;
      const unsubscribe = registry.subscribe(
        inA,
        (e) => heard.push(e),
        () => ended++,
      );
      expect(unsubscribe).toBeDefined();
      let endedB = 0;
      registry.subscribe(
        inB,
        () => undefined,
        () => endedB++,
      );

      ownership.drop(A);
      await registry.release([A]);
      expect([ended, endedB]).toEqual([1, 0]);
      expect(await names(registry)).toEqual([inB]);
      expect(await registry.get(inA)).toBeUndefined();
      expect(registry.subscribe(inA, () => undefined)).toBeUndefined();
      expect(await registry.delete(inA)).toBe(false);

      // Only the kept workspace renews from here on: the released one's timer went with its actor.
      const before = calls.renewed.length;
      timers.fire();
      await eventually("the kept one renewed", () => (calls.renewed.length > before ? true : undefined));
      expect(calls.renewed.slice(before)).toEqual([inB]);
      expect(calls.destroyed).toEqual([]);
      // Its tenant is still answered from its Sandbox's label (another replica owns it now).
      expect(registry.ownerOf(inA)).toBe("team-a");
    } finally {
      registry.stop();
    }
  });
});

describe("what the watch knows, whoever owns it", () => {
  const ready = nameInShard(A, "ready");
  const lost = nameInShard(B, "lost");
  const deleting = nameInShard(B, "deleting");
  const pending = nameInShard(B, "pending");
  const world = [
    sandbox(ready, { phase: "Ready", tenant: "team-a" }),
    sandbox(lost, { phase: "Lost" }),
    sandbox(deleting, { phase: "Ready", deleting: true }),
    sandbox(pending, {}),
    sandbox("not-ours", { phase: "Ready", run: false }),
  ];

  it("known() lists every run-labelled Sandbox with its tenant label", () => {
    const { registry } = setup(world, []);
    expect(registry.known().sort((a, b) => a.name.localeCompare(b.name))).toEqual(
      [
        { name: ready, tenant: "team-a" },
        { name: lost, tenant: undefined },
        { name: deleting, tenant: undefined },
        { name: pending, tenant: undefined },
      ].sort((a, b) => a.name.localeCompare(b.name)),
    );
  });

  it("sandboxView() reads the state from the Sandbox alone", () => {
    const { registry } = setup(world, []);
    expect(registry.sandboxView(ready)).toEqual({
      name: ready,
      state: "ready",
      phase: "Ready",
      endpoint: `http://${ready}:8080`,
      conditions: [],
      createdAt: "2026-12-07T10:00:00.000Z",
    });
    expect(registry.sandboxView(lost)).toMatchObject({ state: "lost", phase: "Lost", lost: { reason: "Lost" } });
    // Being deleted: lost, as an actor's first check would report it.
    expect(registry.sandboxView(deleting)).toMatchObject({ state: "lost", lost: { reason: "Terminating" } });
    expect(registry.sandboxView(pending)).toEqual({
      name: pending,
      state: "provisioning",
      conditions: [],
      createdAt: "2026-12-07T10:00:00.000Z",
    });
    expect(registry.sandboxView("not-ours")).toBeUndefined();
    expect(registry.sandboxView("ws-none")).toBeUndefined();
  });

  it("ownerOf() answers a tenant for any run-labelled Sandbox, null for none", () => {
    const { registry } = setup(world, []);
    expect(registry.ownerOf(ready)).toBe("team-a");
    expect(registry.ownerOf(lost)).toBeUndefined();
    expect(registry.ownerOf("not-ours")).toBeNull();
    expect(registry.ownerOf("ws-none")).toBeNull();
  });
});
