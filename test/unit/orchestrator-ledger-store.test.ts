// The ledgers' store (orchestrator/agents/ledger-store.ts): a first read that was on its way while a
// change wrote (an Orchestrator just restarted, a Harness's poll racing a Machine's submit) never puts
// its older answer over the value the change wrote. Before the fix, a pick right after a submit was
// judged against the ledger without the admitted turn ("no turn the Orchestrator admitted").
import { LedgerStore, type LedgerBackend, type LedgerFormat } from "../../orchestrator/agents/ledger-store";
import type { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";

type Count = { n: number };
const FORMAT: LedgerFormat<Count> = {
  what: "test ledger",
  configMap: (w) => `${w}-test`,
  key: "ledger.json",
  empty: () => ({ n: 0 }),
  parse: (text) => JSON.parse(text) as Count,
  serialize: (value) => JSON.stringify(value),
  maxBytes: 1024,
};

const watch = {
  whenListed: async () => undefined,
  get: (name: string) => (name === "ws-1" ? { metadata: { name, uid: "u1" } } : undefined),
} as unknown as Pick<SandboxWatch, "whenListed" | "get">;

/** A backend whose reads answer only when the test says, in the order it chooses. */
class GatedBackend implements LedgerBackend<Count> {
  stored: { value: Count; version: string } | undefined = { value: { n: 1 }, version: "1" };
  readonly pending: Array<() => void> = [];
  read() {
    const snapshot = this.stored && { value: { ...this.stored.value }, version: this.stored.version };
    return new Promise<typeof snapshot>((resolve) => this.pending.push(() => resolve(snapshot)));
  }
  async write(_w: string, _o: { uid: string }, value: Count, version: string | undefined) {
    if (version !== this.stored?.version) throw new Error("moved on");
    this.stored = { value, version: String(Number(version) + 1) };
    return this.stored.version;
  }
}

const settle = () => new Promise((r) => setImmediate(r));

describe("the ledgers' store", () => {
  it("keeps what a change wrote over an older read that answers after it", async () => {
    const backend = new GatedBackend();
    const store = new LedgerStore({ format: FORMAT, watch, backend });
    // A read starts first (nothing held yet) and is held up at the backend.
    const early = store.read("ws-1");
    await settle();
    // A change starts, reads, writes n = 2.
    const changed = store.change("ws-1", (v) => ({ value: { n: v.n + 1 }, result: v.n + 1 }));
    await settle();
    expect(backend.pending).toHaveLength(2);
    backend.pending[1](); // the change's read answers first: it writes
    expect(await changed).toBe(2);
    backend.pending[0](); // then the early read answers, with what was stored before the write
    expect(await early).toEqual({ n: 2 });
    // And every read after it sees the change.
    expect(await store.read("ws-1")).toEqual({ n: 2 });
  });

  // Decision 0079: a workspace that moved to another replica and back is read from the cluster.
  it("forgets a held ledger: the next read is the cluster's, and a read on its way at the forget is not kept", async () => {
    const backend = new GatedBackend();
    const store = new LedgerStore({ format: FORMAT, watch, backend });
    const first = store.read("ws-1");
    await settle();
    backend.pending.shift()!();
    expect(await first).toEqual({ n: 1 });
    // Held: a read asks the backend nothing.
    expect(await store.read("ws-1")).toEqual({ n: 1 });
    expect(backend.pending).toHaveLength(0);
    // Another replica writes while this one does not own it.
    backend.stored = { value: { n: 7 }, version: "7" };
    store.forget("ws-1");
    const after = store.read("ws-1");
    await settle();
    expect(backend.pending).toHaveLength(1);
    // Forgotten again while that read is on its way: it answers, and is not held.
    store.forget("ws-1");
    backend.pending.shift()!();
    expect(await after).toEqual({ n: 7 });
    backend.stored = { value: { n: 8 }, version: "8" };
    const again = store.read("ws-1");
    await settle();
    expect(backend.pending).toHaveLength(1);
    backend.pending.shift()!();
    expect(await again).toEqual({ n: 8 });
  });

  it("takes a read's answer when nothing was written meanwhile", async () => {
    const backend = new GatedBackend();
    const store = new LedgerStore({ format: FORMAT, watch, backend });
    const first = store.read("ws-1");
    await settle();
    backend.pending[0]();
    expect(await first).toEqual({ n: 1 });
  });
});
