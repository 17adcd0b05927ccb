// The picks ledger (decision 0025): its pure rules (pick-ledger.ts), the store over an in-memory backend
// (pick-store.ts: idempotence, one outstanding pick a turn, answers once, the long-poll, a lost
// write race, a restart reading the ledger back), and its routes over real HTTP (api-server.ts: the
// Sandbox token for the Harness's, an API token for the Machine's). Beside the picks, each
// conversation's Allowed picks: set by the Machine, read by the Harness at a step boundary.
import { randomBytes } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { PickBody } from "../../api/agent-protocol";
import { allowedPath, deliveryPath, picksPath } from "../../api/agent-protocol";
import { HttpError } from "../../orchestrator/schemas";
import { startOrchestratorServer, type Workspaces } from "../../orchestrator/http/api-server";
import { LedgerConflict, PickStore, type LedgerBackend } from "../../orchestrator/agents/pick-store";
import {
  EMPTY_LEDGER,
  allowedOf,
  answerPick,
  bounded,
  deliveryOf,
  outstandingPicks,
  parseLedger,
  serializeLedger,
  setAllowed,
  submitPick,
  waitOf,
  workspaceOfIid,
  type Ledger,
} from "../../orchestrator/agents/pick-ledger";
import type { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";
import { apiTokenChecker, sandboxToken, sandboxTokenChecker } from "../../orchestrator/tokens";

const AT = "2026-03-01T12:00:00.000Z";
const body = (over: Partial<PickBody> = {}): PickBody => ({
  pick: "propose",
  args: { title: "x" },
  submissionId: "s1",
  callId: "c1",
  ...over,
});

function take(ledger: Ledger, iid: string, b: PickBody, id: string): Ledger {
  const r = submitPick(ledger, iid, b, { deliveryId: id, at: AT });
  if (r.kind !== "taken") throw new Error(`not taken: ${r.kind}`);
  return r.ledger;
}

describe("the ledger's rules", () => {
  it("names a conversation's workspace by its prefix, and nothing else", () => {
    expect(workspaceOfIid("ws-0a1b2c3d4e.coder-1")).toBe("ws-0a1b2c3d4e");
    expect(workspaceOfIid("ws-1.a.b")).toBe("ws-1");
    for (const iid of ["ws-1", ".x", "ws-1.", "WS.x", "1ws.x", "ws-1/../x.y", "", "a".repeat(64) + ".x"])
      expect(workspaceOfIid(iid)).toBeUndefined();
  });

  it("takes a pick, and the same (iid, submission, call) again answers the same delivery", () => {
    const r = submitPick(EMPTY_LEDGER, "ws-1.c", body(), { deliveryId: "d1", at: AT });
    expect(r).toMatchObject({ kind: "taken", pick: { deliveryId: "d1", pick: "propose", args: { title: "x" } } });
    const ledger = (r as { ledger: Ledger }).ledger;
    const again = submitPick(ledger, "ws-1.c", body({ pick: "other" }), { deliveryId: "d2", at: AT });
    expect(again).toMatchObject({ kind: "same", pick: { deliveryId: "d1" } });
    // Answered, the same call still names its delivery.
    const answered = answerPick(ledger, "d1", "ok", AT);
    expect(answered.kind).toBe("answered");
    const after = submitPick((answered as { ledger: Ledger }).ledger, "ws-1.c", body(), { deliveryId: "d3", at: AT });
    expect(after).toMatchObject({ kind: "same", pick: { deliveryId: "d1", answer: "ok" } });
  });

  it("refuses a second pick while one is outstanding in the same turn, not in another turn or conversation", () => {
    const ledger = take(EMPTY_LEDGER, "ws-1.c", body(), "d1");
    const busy = submitPick(ledger, "ws-1.c", body({ callId: "c2", pick: "reject" }), { deliveryId: "d2", at: AT });
    expect(busy.kind).toBe("busy");
    expect((busy as { message: string }).message).toMatch(/"propose".*outstanding.*"reject" was not taken/);
    expect(submitPick(ledger, "ws-1.c", body({ submissionId: "s2" }), { deliveryId: "d2", at: AT }).kind).toBe("taken");
    expect(submitPick(ledger, "ws-1.d", body(), { deliveryId: "d2", at: AT }).kind).toBe("taken");
    // Once answered, the next pick of the turn is taken.
    const answered = (answerPick(ledger, "d1", "no", AT) as { ledger: Ledger }).ledger;
    expect(submitPick(answered, "ws-1.c", body({ callId: "c2" }), { deliveryId: "d2", at: AT }).kind).toBe("taken");
  });

  it("answers once: a second answer is refused, an unknown delivery is unknown", () => {
    const ledger = take(EMPTY_LEDGER, "ws-1.c", body(), "d1");
    const once = answerPick(ledger, "d1", "yes", AT);
    expect(once).toMatchObject({ kind: "answered", pick: { answer: "yes", answeredAt: AT } });
    expect(answerPick((once as { ledger: Ledger }).ledger, "d1", "again", AT).kind).toBe("already");
    expect(answerPick(ledger, "d9", "x", AT).kind).toBe("unknown");
    // The input ledger is never changed.
    expect(outstandingPicks(ledger)).toHaveLength(1);
  });

  it("finds a delivery only in its own conversation", () => {
    const ledger = take(EMPTY_LEDGER, "ws-1.c", body(), "d1");
    expect(deliveryOf(ledger, "ws-1.c", "d1")?.pick).toBe("propose");
    expect(deliveryOf(ledger, "ws-1.other", "d1")).toBeUndefined();
    expect(deliveryOf(ledger, "ws-1.c", "d2")).toBeUndefined();
  });

  it("keeps within its size bound by dropping the oldest answered picks, never an outstanding one", () => {
    let ledger = EMPTY_LEDGER;
    for (let i = 0; i < 5; i++) {
      ledger = take(ledger, "ws-1.c", body({ submissionId: `s${i}`, args: "x".repeat(100) }), `d${i}`);
      if (i < 4) ledger = (answerPick(ledger, `d${i}`, "y".repeat(100), AT) as { ledger: Ledger }).ledger;
    }
    const size = Buffer.byteLength(serializeLedger(ledger));
    const cut = bounded(ledger, size - 1)!;
    expect(cut.picks.map((p) => p.deliveryId)).toEqual(["d1", "d2", "d3", "d4"]);
    expect(bounded(ledger, 10)).toBeUndefined();
    expect(bounded(ledger, size)).toBe(ledger);
  });

  it("reads a stored ledger back, and refuses one that is not a ledger", () => {
    const ledger = take(EMPTY_LEDGER, "ws-1.c", body(), "d1");
    expect(parseLedger(serializeLedger(ledger))).toEqual(ledger);
    expect(parseLedger(undefined)).toEqual(EMPTY_LEDGER);
    expect(() => parseLedger('{"version":2,"picks":[]}')).toThrow(/not a ledger/);
  });

  it("keeps each conversation's Allowed picks as a set, and keeps them when the bound drops picks", () => {
    expect(allowedOf(EMPTY_LEDGER, "ws-1.c")).toBeUndefined();
    const set = setAllowed(EMPTY_LEDGER, "ws-1.c", ["propose", "abandon", "propose"]);
    if (set.kind !== "set") throw new Error(set.kind);
    expect(allowedOf(set.ledger, "ws-1.c")).toEqual(["abandon", "propose"]);
    expect(allowedOf(set.ledger, "ws-1.d")).toBeUndefined();
    expect(setAllowed(set.ledger, "ws-1.c", ["propose", "abandon"]).kind).toBe("same");
    const none = setAllowed(set.ledger, "ws-1.c", []);
    expect(none.kind === "set" && allowedOf(none.ledger, "ws-1.c")).toEqual([]);
    // A ledger written before Allowed picks were kept reads back with none.
    expect(allowedOf(parseLedger('{"version":1,"picks":[]}'), "ws-1.c")).toBeUndefined();

    let ledger = set.ledger;
    for (let i = 0; i < 3; i++) {
      ledger = take(ledger, "ws-1.c", body({ submissionId: `s${i}`, args: "x".repeat(100) }), `d${i}`);
      ledger = (answerPick(ledger, `d${i}`, "y", AT) as { ledger: Ledger }).ledger;
    }
    const cut = bounded(ledger, Buffer.byteLength(serializeLedger(ledger)) - 1)!;
    expect(cut.picks).toHaveLength(2);
    expect(allowedOf(cut, "ws-1.c")).toEqual(["abandon", "propose"]);
    expect(parseLedger(serializeLedger(cut))).toEqual(cut);
  });

  it("cuts a poll's wait to 25 s and reads nonsense as no wait", () => {
    expect(waitOf("300")).toBe(300);
    expect(waitOf("99999999")).toBe(25_000);
    for (const w of [null, "", "-5", "abc", "NaN"]) expect(waitOf(w)).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------

/** Ledgers in memory, versioned like the API server's resourceVersion. */
class MemoryBackend implements LedgerBackend {
  stored = new Map<string, { ledger: Ledger; version: string; owner: string }>();
  writes = 0;
  /** The next write loses a race: someone else wrote an empty ledger meanwhile. */
  raceOnce = false;
  async read(workspace: string) {
    const s = this.stored.get(workspace);
    return s && { ledger: s.ledger, version: s.version };
  }
  async write(workspace: string, owner: { uid: string }, ledger: Ledger, version: string | undefined) {
    const s = this.stored.get(workspace);
    if (this.raceOnce) {
      this.raceOnce = false;
      this.stored.set(workspace, {
        ledger: EMPTY_LEDGER,
        version: String(++this.writes),
        owner: owner.uid,
      });
      throw new LedgerConflict("the object has been modified");
    }
    if ((s?.version ?? undefined) !== version) throw new LedgerConflict("the object has been modified");
    const v = String(++this.writes);
    this.stored.set(workspace, { ledger, version: v, owner: owner.uid });
    return v;
  }
}

/** The watch as the store reads it: which Sandboxes exist, by uid. */
const watchOf = (uids: Record<string, string>) =>
  ({
    whenListed: async () => undefined,
    get: (name: string) => (uids[name] ? { metadata: { name, uid: uids[name] } } : undefined),
  }) as unknown as SandboxWatch;

const storeOf = (backend: MemoryBackend, ids = ["d1", "d2", "d3", "d4"]) => {
  let i = 0;
  return new PickStore({ watch: watchOf({ "ws-1": "uid-1" }), backend, newId: () => ids[i++] });
};

describe("the store", () => {
  it("keeps each pick in the backend, owned by the Sandbox's uid, and a fresh store reads it back", async () => {
    const backend = new MemoryBackend();
    const store = storeOf(backend);
    expect(await store.submit("ws-1", "ws-1.c", body())).toEqual({
      receipt: { outstanding: true, deliveryId: "d1" },
      repeated: false,
    });
    expect(await store.submit("ws-1", "ws-1.c", body())).toMatchObject({
      receipt: { deliveryId: "d1" },
      repeated: true,
    });
    expect(backend.stored.get("ws-1")?.owner).toBe("uid-1");
    // A restarted Orchestrator: nothing in memory, the ledger read back, the pick answered.
    const restored = storeOf(backend, ["d9"]);
    expect(await restored.outstanding("ws-1")).toEqual([
      expect.objectContaining({ iid: "ws-1.c", deliveryId: "d1", pick: "propose", args: { title: "x" } }),
    ]);
    await restored.answer("ws-1", "d1", "approved");
    expect(await restored.delivery("ws-1", "ws-1.c", "d1", 0)).toEqual({ state: "answered", answer: "approved" });
    expect(await restored.outstanding("ws-1")).toEqual([]);
  });

  it("keeps the Allowed picks in the backend beside the picks, and a fresh store reads them back", async () => {
    const backend = new MemoryBackend();
    const store = storeOf(backend);
    await store.submit("ws-1", "ws-1.c", body());
    await store.setAllowed("ws-1", "ws-1.c", ["propose"]);
    const writes = backend.writes;
    await store.setAllowed("ws-1", "ws-1.c", ["propose"]);
    expect(backend.writes).toBe(writes); // the same list again is no write
    expect(await storeOf(backend).allowed("ws-1", "ws-1.c")).toEqual(["propose"]);
    expect(backend.stored.get("ws-1")!.ledger.picks).toHaveLength(1);
    expect(await storeOf(backend).allowed("ws-1", "ws-1.other")).toBeUndefined();
  });

  it("refuses with the HTTP words: 409 busy, 404 unknown, 409 answered twice, 404 no workspace", async () => {
    const store = storeOf(new MemoryBackend());
    await store.submit("ws-1", "ws-1.c", body());
    const status = (p: Promise<unknown>) =>
      p.then(
        () => 0,
        (e: HttpError) => e.status,
      );
    expect(await status(store.submit("ws-1", "ws-1.c", body({ callId: "c2" })))).toBe(409);
    expect(await status(store.delivery("ws-1", "ws-1.c", "nope", 0))).toBe(404);
    expect(await status(store.answer("ws-1", "nope", "x"))).toBe(404);
    await store.answer("ws-1", "d1", "x");
    expect(await status(store.answer("ws-1", "d1", "y"))).toBe(409);
    expect(await status(store.outstanding("ws-2"))).toBe(404);
    expect(await status(store.submit("ws-2", "ws-2.c", body()))).toBe(404);
  });

  it("holds a poll until the answer, and answers outstanding after the hold", async () => {
    const store = storeOf(new MemoryBackend());
    await store.submit("ws-1", "ws-1.c", body());
    const t0 = Date.now();
    expect(await store.delivery("ws-1", "ws-1.c", "d1", 60)).toEqual({ state: "outstanding" });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(50);
    const held = store.delivery("ws-1", "ws-1.c", "d1", 10_000);
    await new Promise((r) => setTimeout(r, 20));
    const t1 = Date.now();
    await store.answer("ws-1", "d1", "go");
    expect(await held).toEqual({ state: "answered", answer: "go" });
    expect(Date.now() - t1).toBeLessThan(1_000);
  });

  it("ends a hold when its client leaves", async () => {
    const store = storeOf(new MemoryBackend());
    await store.submit("ws-1", "ws-1.c", body());
    const ctl = new AbortController();
    const held = store.delivery("ws-1", "ws-1.c", "d1", 10_000, ctl.signal);
    setTimeout(() => ctl.abort(), 20);
    expect(await held).toEqual({ state: "outstanding" });
  });

  it("re-reads and decides again after a write lost a race", async () => {
    const backend = new MemoryBackend();
    const store = storeOf(backend);
    await store.submit("ws-1", "ws-1.c", body());
    backend.raceOnce = true; // another writer replaced the ledger with an empty one
    expect((await store.submit("ws-1", "ws-1.c", body({ submissionId: "s2" }))).receipt.deliveryId).toBe("d3");
    expect(backend.stored.get("ws-1")!.ledger.picks.map((p) => p.deliveryId)).toEqual(["d3"]);
  });

  it("makes one workspace's changes one at a time", async () => {
    const backend = new MemoryBackend();
    const store = storeOf(backend, ["d1", "d2", "d3"]);
    const all = await Promise.all(["a", "b", "c"].map((c) => store.submit("ws-1", `ws-1.${c}`, body({ callId: c }))));
    expect(all.map((r) => r.receipt.deliveryId)).toEqual(["d1", "d2", "d3"]);
    expect(backend.stored.get("ws-1")!.ledger.picks).toHaveLength(3);
  });
});

// ---------------------------------------------------------------------------------------------

describe("the routes", () => {
  const API = "api-token-for-the-picks-tests";
  const key = randomBytes(32);
  let server: Server;
  let base: string;
  const none = {} as Workspaces;
  const picks = storeOf(new MemoryBackend());

  beforeAll(async () => {
    server = await startOrchestratorServer(
      {
        workspaces: none,
        checkToken: apiTokenChecker([API]),
        metrics: () => "",
        picks,
        checkSandboxToken: sandboxTokenChecker(key),
      },
      0,
      "127.0.0.1",
    );
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const call = async (method: string, path: string, token: string, b?: unknown) => {
    const res = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(b ? { "content-type": "application/json" } : {}) },
      body: b === undefined ? undefined : JSON.stringify(b),
    });
    return {
      status: res.status,
      json: (await res.json()) as Record<string, unknown> & { error?: { message: string } },
    };
  };
  const sbx = sandboxToken(key, "ws-1");

  it("takes a pick only with the Sandbox token of the conversation's workspace", async () => {
    const wrong = [API, sandboxToken(key, "ws-2"), "nope"];
    for (const t of wrong) {
      const r = await call("POST", picksPath("ws-1.c"), t, body());
      expect(r.status).toBe(401);
      expect(JSON.stringify(r.json)).not.toContain(sbx);
    }
    // A conversation that names no workspace is refused the same way.
    expect((await call("POST", picksPath("nodot"), sbx, body())).status).toBe(401);
    expect(await call("POST", picksPath("ws-1.c"), sbx, body())).toEqual({
      status: 202,
      json: { outstanding: true, deliveryId: "d1" },
    });
    expect((await call("POST", picksPath("ws-1.c"), sbx, body())).status).toBe(200);
    const busy = await call("POST", picksPath("ws-1.c"), sbx, body({ callId: "c2" }));
    expect(busy.status).toBe(409);
    expect((await call("POST", picksPath("ws-1.c"), sbx, { pick: "x" })).status).toBe(400);
  });

  it("serves the delivery to the Sandbox and the list and answer to the Machine, each with its own token", async () => {
    expect((await call("GET", `${deliveryPath("ws-1.c", "d1")}?wait=30`, sbx)).json).toEqual({ state: "outstanding" });
    expect((await call("GET", deliveryPath("ws-1.c", "d1"), API)).status).toBe(401);
    expect((await call("GET", deliveryPath("ws-1.c", "zz"), sbx)).status).toBe(404);
    expect((await call("GET", "/v1/workspaces/ws-1/picks", sbx)).status).toBe(401);
    const list = await call("GET", "/v1/workspaces/ws-1/picks", API);
    expect(list).toMatchObject({
      status: 200,
      json: { items: [{ iid: "ws-1.c", deliveryId: "d1", pick: "propose" }] },
    });
    const poll = call("GET", `${deliveryPath("ws-1.c", "d1")}?wait=20000`, sbx);
    await new Promise((r) => setTimeout(r, 30));
    expect((await call("POST", "/v1/workspaces/ws-1/picks/d1/answer", API, { answer: 1 })).status).toBe(400);
    expect(await call("POST", "/v1/workspaces/ws-1/picks/d1/answer", API, { answer: "approved" })).toEqual({
      status: 200,
      json: { deliveryId: "d1", answered: true },
    });
    expect((await poll).json).toEqual({ state: "answered", answer: "approved" });
    expect((await call("POST", "/v1/workspaces/ws-1/picks/d1/answer", API, { answer: "again" })).status).toBe(409);
    expect((await call("POST", "/v1/workspaces/ws-1/picks/d9/answer", API, { answer: "x" })).status).toBe(404);
    expect((await call("GET", "/v1/workspaces/ws-2/picks", API)).status).toBe(404);
  });

  it("serves a conversation's Allowed picks to its Sandbox alone, 404 until they are set", async () => {
    expect((await call("GET", allowedPath("ws-1.new"), sbx)).status).toBe(404);
    await picks.setAllowed("ws-1", "ws-1.new", ["propose", "abandon"]);
    expect(await call("GET", allowedPath("ws-1.new"), sbx)).toEqual({
      status: 200,
      json: { allowed: ["abandon", "propose"] },
    });
    for (const t of [API, sandboxToken(key, "ws-2")])
      expect((await call("GET", allowedPath("ws-1.new"), t)).status).toBe(401);
    expect((await call("POST", allowedPath("ws-1.new"), sbx, {})).status).toBe(405);
  });
});
