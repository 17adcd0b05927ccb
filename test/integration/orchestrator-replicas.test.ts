// Two Orchestrator replicas in one process on the real API server (decision 0079): each its own
// watch, gateway, registry and picks over the same namespace, each with a fixed table of the shards
// it holds (test/support/shard-table.ts) in place of the shard Leases. A workspace created by A is
// named in A's shard; when the shard moves (A releases it, B adopts it), B's actor resumes it ready
// and renews its keepalive from then on, A writes nothing more for it, and B reads its ledgers from
// the cluster: a pick written through A shows through B, over a cache B held from an earlier tenure.
import { K8s } from "kubernetes-fluent-client";
import { randomBytes } from "node:crypto";
import { SandboxModel } from "../../api/crd";
import { SHARD_COUNT, KEEPALIVE_ANNOTATION } from "../../api/wire";
import { issueCa } from "../../lib/ca";
import { KubeLedgers } from "../../orchestrator/agents/ledger-store";
import { PickStore } from "../../orchestrator/agents/pick-store";
import { admitTurn, emptyTurns } from "../../orchestrator/agents/turn-ledger";
import { Turns, TURNS_FORMAT } from "../../orchestrator/agents/turns";
import { KubeSandboxGateway } from "../../orchestrator/workspaces/kube-gateway";
import { DEFAULT_POD_CONFIG } from "../../orchestrator/workspaces/pod-config";
import { WorkspaceRegistry } from "../../orchestrator/workspaces/registry";
import { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";
import { ShardTable } from "../support/shard-table";
import { useNamespace, waitFor } from "./support/cluster";

const ns = useNamespace("replicas");
const root = issueCa("jr2 Custodian CA (replicas)");
const signingKey = randomBytes(32);
const SHARD = 5;

/** A gateway that counts the renewals it is asked to write, by workspace (it changes nothing). */
class CountingGateway extends KubeSandboxGateway {
  readonly renewals = new Map<string, number>();
  override async renew(name: string): Promise<void> {
    this.renewals.set(name, (this.renewals.get(name) ?? 0) + 1);
    return super.renew(name);
  }
}

type Replica = {
  ownership: ShardTable;
  watch: SandboxWatch;
  gateway: CountingGateway;
  registry: WorkspaceRegistry;
  turns: Turns;
  picks: PickStore;
};

async function replica(identity: string, held: number[]): Promise<Replica> {
  const ownership = new ShardTable(identity, held);
  const watch = new SandboxWatch(ns.name);
  await watch.start();
  const gateway = new CountingGateway({
    namespace: ns.name,
    watch,
    signingKey,
    pod: { config: DEFAULT_POD_CONFIG, custodianImage: "jr2/companions:test", orchestratorUrl: "http://127.0.0.1:1" },
    custodianRoot: root,
  });
  const registry = new WorkspaceRegistry({
    gateway,
    watch,
    credentials: [],
    ownership,
    lease: { intervalMs: 1_000 },
  });
  const turns = new Turns({ namespace: ns.name, gateway, watch });
  const picks = new PickStore({ watch, turns, namespace: ns.name });
  return { ownership, watch, gateway, registry, turns, picks };
}

/** The shard moves from `from` to `to`, as the lease loop hands it over: released, then adopted. */
async function move(shard: number, from: Replica, to: Replica, workspaces: string[]) {
  from.ownership.drop(shard);
  await from.registry.release([shard]);
  from.turns.release(workspaces);
  from.picks.release(workspaces);
  to.ownership.hold(shard);
  await to.registry.adopt([shard]);
}

const keepalive = async (name: string) =>
  (await K8s(SandboxModel).InNamespace(ns.name).Get(name)).metadata?.annotations?.[KEEPALIVE_ANNOTATION] ?? "";

let a: Replica;
let b: Replica;

beforeAll(async () => {
  a = await replica("replica-a", [SHARD]);
  b = await replica(
    "replica-b",
    Array.from({ length: SHARD_COUNT }, (_, i) => i).filter((i) => i !== SHARD),
  );
});

afterAll(() => {
  for (const r of [a, b]) {
    r?.registry.stop();
    r?.watch.close();
  }
});

describe("a workspace moving between two replicas", () => {
  it("is named in its creator's shard, resumed ready by the adopter, renewed from there alone, its ledgers read anew", async () => {
    const name = await a.registry.create({ image: "ghcr.io/example/harness:1", branch: "main", repos: [] }, "team-a");
    expect(a.ownership.shardOf(name)).toBe(SHARD);
    await waitFor(
      "ready on A",
      () => a.registry.get(name),
      (v) => v?.state === "ready",
      60_000,
    );
    // B knows it from its watch (tenant included) but runs nothing for it.
    await waitFor(
      "B's watch to hold it",
      async () => b.registry.known(),
      (k) => k.some((w) => w.name === name),
    );
    expect(b.registry.ownerOf(name)).toBe("team-a");
    expect(await b.registry.get(name)).toBeUndefined();
    expect(b.registry.sandboxView(name)?.state).toBe("ready");

    // A turn the Orchestrator admitted (its ledger in the cluster), and B's cache of the workspace's
    // picks from an earlier tenure (it read them, empty, then let the workspace go).
    const sandbox = await K8s(SandboxModel).InNamespace(ns.name).Get(name);
    const iid = `${name}.c`;
    const turn = admitTurn(emptyTurns(), iid, {
      agent: "coder",
      admission: { streamUrl: `/agents/coder/${iid}/stream`, offset: 0, submissionId: "s1" },
      at: new Date().toISOString(),
      body: { menu: [{ name: "propose", description: "propose a change" }], allowed: ["propose"] },
    })!;
    await new KubeLedgers(ns.name, TURNS_FORMAT).write(name, { uid: sandbox.metadata!.uid! }, turn, undefined);
    expect(await b.picks.outstanding(name)).toEqual([]);
    b.picks.release([name]);
    b.turns.release([name]);

    // A takes a pick: its ledger is written through A.
    const taken = await a.picks.submit(name, iid, { pick: "propose", submissionId: "s1", callId: "call-1" });
    expect(taken.repeated).toBe(false);
    await waitFor(
      "A to renew it",
      async () => a.gateway.renewals.get(name) ?? 0,
      (n) => n >= 1,
    );
    let ended = 0;
    expect(
      a.registry.subscribe(
        name,
        () => undefined,
        () => ended++,
      ),
    ).toBeDefined();

    await move(SHARD, a, b, [name]);
    // A let it go: its stream ended, nothing of it answered there, nothing deleted.
    expect(ended).toBe(1);
    expect(await a.registry.get(name)).toBeUndefined();
    expect((await a.registry.list()).map((v) => v.name)).not.toContain(name);
    const renewedByA = a.gateway.renewals.get(name) ?? 0;

    // B resumes it ready (no Repo Slot: nothing to attach again) and renews it from here on.
    const resumed = await waitFor(
      "ready on B",
      () => b.registry.get(name),
      (v) => v?.state === "ready",
    );
    expect(resumed?.name).toBe(name);
    expect((await b.registry.list()).map((v) => v.name)).toContain(name);
    const before = await keepalive(name);
    await waitFor(
      "a keepalive written after the move",
      () => keepalive(name),
      (k) => k > before,
      15_000,
    );
    expect(b.gateway.renewals.get(name) ?? 0).toBeGreaterThanOrEqual(1);
    expect(a.gateway.renewals.get(name) ?? 0).toBe(renewedByA);

    // B reads the picks ledger from the cluster: A's pick is there.
    expect(await b.picks.outstanding(name)).toEqual([
      expect.objectContaining({ iid, deliveryId: taken.receipt.deliveryId, pick: "propose" }),
    ]);

    expect(await b.registry.delete(name)).toBe(true);
    await waitFor(
      "destroyed by B",
      () => b.registry.get(name),
      (v) => v?.state === "destroyed",
      30_000,
    );
  }, 120_000);
});
