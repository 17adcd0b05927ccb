// A workspace's ledger as a ConfigMap on the real API server (orchestrator/agents/ledger-store.ts,
// decisions 0025 and 0042). KubeLedgers writes over the resourceVersion it read: of two writers
// that read the same version, the second is refused (409) and told LedgerConflict, as is a second
// first load (the create's 409) and a write over a ledger deleted meanwhile (404). A LedgerStore
// that lost such a race re-reads and decides again, so both entries are kept. A ConfigMap edited
// to garbage is refused, and kept as it is. The races are made deterministic: both writers read
// first, then write one after the other.
import { kubeRequest } from "../../lib/kube";
import { KubeLedgers, LedgerConflict, LedgerStore, LedgerUnreadable } from "../../orchestrator/agents/ledger-store";
import { PICKS_FORMAT } from "../../orchestrator/agents/pick-store";
import { EMPTY_LEDGER, LEDGER_KEY, submitPick, type Ledger } from "../../orchestrator/agents/pick-ledger";
import { HttpError } from "../../api/orchestrator-errors";
import type { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";
import { createSandbox, useNamespace } from "./support/cluster";

const ns = useNamespace("ledgers");

type ConfigMap = { metadata: { resourceVersion: string }; data?: Record<string, string> };
const configMapPath = (workspace: string) =>
  `/api/v1/namespaces/${ns.name}/configmaps/${PICKS_FORMAT.configMap(workspace)}`;
const getConfigMap = (workspace: string) => kubeRequest<ConfigMap>("GET", configMapPath(workspace));

/** The ledger with one more pick, delivery `id`, in the workspace's conversation `c`. */
function withPick(ledger: Ledger, workspace: string, id: string): Ledger {
  const r = submitPick(
    ledger,
    `${workspace}.c`,
    { pick: "propose", args: { id }, submissionId: `s-${id}`, callId: `call-${id}` },
    { deliveryId: id, at: "2026-12-05T00:00:00.000Z" },
  );
  if (r.kind !== "taken") throw new Error(`pick ${id} not taken: ${r.kind}`);
  return r.ledger;
}
const deliveries = (ledger: Ledger | undefined) => (ledger?.picks ?? []).map((p) => p.deliveryId).sort();

/** A KubeLedgers that counts the LedgerConflicts its writes were told (it changes nothing). */
class Observed extends KubeLedgers<Ledger> {
  conflicts = 0;
  override async write(workspace: string, owner: { uid: string }, value: Ledger, version: string | undefined) {
    try {
      return await super.write(workspace, owner, value, version);
    } catch (err) {
      if (err instanceof LedgerConflict) this.conflicts++;
      throw err;
    }
  }
}

/** A Sandbox per workspace: the ledgers' owner, so the garbage collector keeps their ConfigMaps. */
const owners = new Map<string, string>();
async function workspace(name: string): Promise<{ name: string; owner: { uid: string } }> {
  const sbx = await createSandbox(ns.name, name);
  owners.set(name, sbx.metadata.uid);
  return { name, owner: { uid: sbx.metadata.uid } };
}
const watch = {
  whenListed: async () => undefined,
  get: (name: string) => (owners.has(name) ? { metadata: { name, uid: owners.get(name) } } : undefined),
} as unknown as SandboxWatch;

describe("KubeLedgers against the API server", () => {
  it("of two writers that read the same version, the first writes and the second is a LedgerConflict", async () => {
    const ws = await workspace("ws-race");
    const one = new KubeLedgers(ns.name, PICKS_FORMAT);
    const two = new KubeLedgers(ns.name, PICKS_FORMAT);
    await one.write(ws.name, ws.owner, EMPTY_LEDGER, undefined);
    const [a, b] = [await one.read(ws.name), await two.read(ws.name)];
    expect(a!.version).toBe(b!.version);
    await one.write(ws.name, ws.owner, withPick(a!.value, ws.name, "d-one"), a!.version);
    const lost = await two.write(ws.name, ws.owner, withPick(b!.value, ws.name, "d-two"), b!.version).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(lost).toBeInstanceOf(LedgerConflict);
    expect((lost as Error).message).toMatch(/modified|conflict/i);
    expect(deliveries((await two.read(ws.name))?.value)).toEqual(["d-one"]);
  });

  it("of two first loads that both create, the second is a LedgerConflict and the first's ledger stands", async () => {
    const ws = await workspace("ws-create");
    const one = new KubeLedgers(ns.name, PICKS_FORMAT);
    const two = new KubeLedgers(ns.name, PICKS_FORMAT);
    expect([await one.read(ws.name), await two.read(ws.name)]).toEqual([undefined, undefined]);
    await one.write(ws.name, ws.owner, withPick(EMPTY_LEDGER, ws.name, "d-one"), undefined);
    await expect(
      two.write(ws.name, ws.owner, withPick(EMPTY_LEDGER, ws.name, "d-two"), undefined),
    ).rejects.toBeInstanceOf(LedgerConflict);
    expect(deliveries((await one.read(ws.name))?.value)).toEqual(["d-one"]);
  });

  it("a write over a version of a ledger deleted meanwhile is a LedgerConflict (404), and creates nothing", async () => {
    const ws = await workspace("ws-deleted");
    const ledgers = new KubeLedgers(ns.name, PICKS_FORMAT);
    const version = await ledgers.write(ws.name, ws.owner, EMPTY_LEDGER, undefined);
    await kubeRequest("DELETE", configMapPath(ws.name));
    await expect(
      ledgers.write(ws.name, ws.owner, withPick(EMPTY_LEDGER, ws.name, "d-late"), version),
    ).rejects.toBeInstanceOf(LedgerConflict);
    expect(await ledgers.read(ws.name)).toBeUndefined();
  });

  it("a LedgerStore whose write lost the race re-reads and decides again: both writers' picks are kept", async () => {
    const ws = await workspace("ws-stores");
    const backendA = new Observed(ns.name, PICKS_FORMAT);
    const backendB = new Observed(ns.name, PICKS_FORMAT);
    // Two Orchestrators, each holding the ledger as it read it.
    const a = new LedgerStore({ format: PICKS_FORMAT, watch, backend: backendA });
    const b = new LedgerStore({ format: PICKS_FORMAT, watch, backend: backendB });
    await a.change(ws.name, (l) => ({ value: withPick(l, ws.name, "d-first"), result: undefined }));
    expect(deliveries(await a.read(ws.name))).toEqual(["d-first"]);
    expect(deliveries(await b.read(ws.name))).toEqual(["d-first"]);
    // B writes over the version both hold; A then writes over it too, is refused, and decides again.
    await b.change(ws.name, (l) => ({ value: withPick(l, ws.name, "d-b"), result: undefined }));
    const seenByA: string[][] = [];
    await a.change(ws.name, (l) => {
      seenByA.push(deliveries(l));
      return { value: withPick(l, ws.name, "d-a"), result: undefined };
    });
    expect(backendA.conflicts).toBe(1);
    expect(backendB.conflicts).toBe(0);
    expect(seenByA).toEqual([["d-first"], ["d-b", "d-first"]]);
    const stored = await new KubeLedgers(ns.name, PICKS_FORMAT).read(ws.name);
    expect(deliveries(stored?.value)).toEqual(["d-a", "d-b", "d-first"]);
  });

  it("a ConfigMap edited to garbage is unreadable: a change is refused 500 naming it, and the garbage is kept", async () => {
    const ws = await workspace("ws-garbage");
    const ledgers = new KubeLedgers(ns.name, PICKS_FORMAT);
    await ledgers.write(ws.name, ws.owner, withPick(EMPTY_LEDGER, ws.name, "d-kept"), undefined);
    // Someone edits it by hand (kubectl edit): not JSON, then JSON that is not a ledger.
    for (const garbage of ["{not json", '{"version":1,"picks":"many"}']) {
      await kubeRequest(
        "PATCH",
        configMapPath(ws.name),
        { data: { [LEDGER_KEY]: garbage } },
        "application/merge-patch+json",
      );
      const edited = await getConfigMap(ws.name);
      await expect(ledgers.read(ws.name)).rejects.toBeInstanceOf(LedgerUnreadable);
      const store = new LedgerStore({ format: PICKS_FORMAT, watch, backend: ledgers });
      const refused = await store
        .change(ws.name, () => ({ value: withPick(EMPTY_LEDGER, ws.name, "d-over"), result: undefined }))
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(refused).toBeInstanceOf(HttpError);
      expect([(refused as HttpError).status, (refused as HttpError).code]).toEqual([500, "ledger_unreadable"]);
      expect((refused as HttpError).message).toContain(`ConfigMap ${PICKS_FORMAT.configMap(ws.name)}`);
      expect((refused as HttpError).message).toContain("repair it, or delete it");
      // Nothing was written over it.
      const after = await getConfigMap(ws.name);
      expect([after.metadata.resourceVersion, after.data?.[LEDGER_KEY]]).toEqual([
        edited.metadata.resourceVersion,
        garbage,
      ]);
    }
  });
});
