// The picks ledger (decisions 0025, 0042): its pure rules (pick-ledger.ts), the store over an
// in-memory backend (pick-store.ts: idempotence, one outstanding pick a turn, a callId unique in its
// turn, answers once, the long-poll, a lost write race, a restart reading the ledger back), every
// pick judged against the turn the Orchestrator admitted (turns.ts over a fake Harness), and the
// routes over real HTTP (api-server.ts: the Sandbox token for the Harness's, an API token for the
// Machine's; forged picks refused and never listed; the caps and the per-workspace rate).
import { randomBytes } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { PickBody } from "../../api/agent-protocol";
import { LIMITS, allowedPath, deliveryPath, picksPath, streamPath } from "../../api/agent-protocol";
import { HttpError } from "../../api/orchestrator-errors";
import { startOrchestratorServer, type Workspaces } from "../../orchestrator/http/api-server";
import { PICKS_FORMAT, PickStore, type Picks } from "../../orchestrator/agents/pick-store";
import { eventually } from "../support/eventually";
import { MemoryLedgers } from "../../orchestrator/agents/ledger-store";
import { TURNS_FORMAT, Turns, type HarnessCaller } from "../../orchestrator/agents/turns";
import { SubmitTurnBody } from "../../api/orchestrator-schemas";
import {
  EMPTY_LEDGER,
  MAX_ANSWERED,
  answerPick,
  bounded,
  deliveryOf,
  outstandingPicks,
  parseLedger,
  serializeLedger,
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
    const again = submitPick(ledger, "ws-1.c", body(), { deliveryId: "d2", at: AT });
    expect(again).toMatchObject({ kind: "same", pick: { deliveryId: "d1" } });
    // Answered, the same call still names its delivery.
    const answered = answerPick(ledger, "d1", "ok", AT);
    expect(answered.kind).toBe("answered");
    const after = submitPick((answered as { ledger: Ledger }).ledger, "ws-1.c", body(), { deliveryId: "d3", at: AT });
    expect(after).toMatchObject({ kind: "same", pick: { deliveryId: "d1", answer: "ok" } });
  });

  it("refuses a callId used again for another pick or other args: a callId is unique in its turn", () => {
    const ledger = take(EMPTY_LEDGER, "ws-1.c", body({ args: { a: 1, b: [2, { c: 3 }] } }), "d1");
    // The same args with their keys in another order are the same pick.
    const same = submitPick(ledger, "ws-1.c", body({ args: { b: [2, { c: 3 }], a: 1 } }), { deliveryId: "d2", at: AT });
    expect(same.kind).toBe("same");
    for (const other of [
      body({ pick: "reject", args: { a: 1, b: [2, { c: 3 }] } }),
      body({ args: { a: 2 } }),
      body({ args: undefined }),
    ]) {
      const r = submitPick(ledger, "ws-1.c", other, { deliveryId: "d2", at: AT });
      expect(r.kind).toBe("reused");
      expect((r as { message: string }).message).toMatch(/callId c1 of this turn already named the pick "propose"/);
    }
    // The same callId in another turn is another call.
    expect(submitPick(ledger, "ws-1.c", body({ submissionId: "s2" }), { deliveryId: "d2", at: AT }).kind).toBe("taken");
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

  it("keeps at most MAX_ANSWERED answered picks, the newest, and every outstanding one", () => {
    let ledger = EMPTY_LEDGER;
    for (let i = 0; i < MAX_ANSWERED + 5; i++) {
      ledger = take(ledger, "ws-1.c", body({ submissionId: `s${i}` }), `d${i}`);
      ledger = (answerPick(ledger, `d${i}`, "ok", AT) as { ledger: Ledger }).ledger;
    }
    ledger = take(ledger, "ws-1.c", body({ submissionId: "open" }), "d-open");
    expect(ledger.picks).toHaveLength(MAX_ANSWERED + 1);
    expect(ledger.picks[0]!.deliveryId).toBe("d5");
    expect(ledger.picks.at(-1)!.deliveryId).toBe("d-open");
    expect(ledger.picks.at(-1)).not.toHaveProperty("answer");
  });

  it("reads a stored ledger back, and refuses one that is not a ledger", () => {
    const ledger = take(EMPTY_LEDGER, "ws-1.c", body(), "d1");
    expect(parseLedger(serializeLedger(ledger))).toEqual(ledger);
    expect(parseLedger(undefined)).toEqual(EMPTY_LEDGER);
    expect(() => parseLedger('{"version":2,"picks":[]}')).toThrow(/not a ledger/);
  });

  it("reads a ledger that kept Allowed picks (before they moved to the turns ledger) and drops them", () => {
    expect(parseLedger('{"version":1,"picks":[],"allowed":{"ws-1.c":["propose"]}}')).toEqual(EMPTY_LEDGER);
  });

  it("cuts a poll's wait to 25 s and reads nonsense as no wait", () => {
    expect(waitOf("300")).toBe(300);
    expect(waitOf("99999999")).toBe(25_000);
    for (const w of [null, "", "-5", "abc", "NaN"]) expect(waitOf(w)).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------

/** A Harness as the Orchestrator calls it (kube-gateway.ts `harness`): it admits every turn with
 * the conversation's own stream path, answers an abort, and serves an empty stream page. */
class FakeHarness implements HarnessCaller {
  readonly calls: string[] = [];
  async harness(_name: string, method: "GET" | "POST", path: string, sent?: unknown) {
    this.calls.push(`${method} ${path}`);
    if (method === "POST" && path.endsWith("/abort")) return { status: 200, body: { aborted: true } };
    if (method === "POST") {
      const [, , agent, iid] = path.split("/").map(decodeURIComponent);
      const submissionId = (sent as { submissionId: string }).submissionId;
      return { status: 202, body: { streamUrl: streamPath(agent!, iid!), offset: 0, submissionId } };
    }
    return { status: 200, body: { events: [], next: 0, idle: true } };
  }
}

/** The watch as the stores read it: which Sandboxes exist (Ready), by uid. */
const watchOf = (uids: Record<string, string>) =>
  ({
    whenListed: async () => undefined,
    get: (name: string) =>
      uids[name] ? { metadata: { name, uid: uids[name] }, status: { phase: "Ready" } } : undefined,
  }) as unknown as SandboxWatch;

/** Turns and picks of workspaces ws-1 and ws-2 over in-memory ledgers, as the Orchestrator wires them. */
function agentsOf(ids = ["d1", "d2", "d3", "d4", "d5", "d6"]) {
  const watch = watchOf({ "ws-1": "uid-1", "ws-2": "uid-2" });
  const turnLedgers = new MemoryLedgers(TURNS_FORMAT);
  const pickLedgers = new MemoryLedgers(PICKS_FORMAT);
  const harness = new FakeHarness();
  const turns = new Turns({ namespace: "ns", gateway: harness, watch, backend: turnLedgers });
  let i = 0;
  const picks = new PickStore({ watch, turns, backend: pickLedgers, newId: () => ids[i++]! });
  /** A turn admitted on `iid` with a Menu of propose and reject, `allowed` allowed. */
  const admit = (iid: string, submissionId = "s1", allowed = ["propose"]) =>
    turns.submit(
      iid.slice(0, iid.indexOf(".")),
      SubmitTurnBody.parse({
        agent: "coder",
        iid,
        message: "go",
        submissionId,
        menu: [
          { name: "propose", description: "propose a change" },
          { name: "reject", description: "give up" },
        ],
        allowed,
      }),
    );
  return { watch, turns, picks, turnLedgers, pickLedgers, harness, admit };
}

const status = (p: Promise<unknown>) =>
  p.then(
    () => 0,
    (e: HttpError) => `${e.status} ${e.code}`,
  );

describe("the store", () => {
  it("keeps each pick in the backend and a fresh store reads it back", async () => {
    const a = agentsOf();
    await a.admit("ws-1.c");
    expect(await a.picks.submit("ws-1", "ws-1.c", body())).toEqual({
      receipt: { outstanding: true, deliveryId: "d1" },
      repeated: false,
    });
    expect(await a.picks.submit("ws-1", "ws-1.c", body())).toMatchObject({
      receipt: { deliveryId: "d1" },
      repeated: true,
    });
    // A restarted Orchestrator: nothing in memory, both ledgers read back, the pick answered.
    const turns = new Turns({ namespace: "ns", gateway: a.harness, watch: a.watch, backend: a.turnLedgers });
    const restored = new PickStore({ watch: a.watch, turns, backend: a.pickLedgers, newId: () => "d9" });
    expect(await restored.outstanding("ws-1")).toEqual([
      expect.objectContaining({ iid: "ws-1.c", deliveryId: "d1", pick: "propose", args: { title: "x" } }),
    ]);
    await restored.answer("ws-1", "d1", "approved");
    expect(await restored.delivery("ws-1", "ws-1.c", "d1", 0)).toEqual({ state: "answered", answer: "approved" });
    expect(await restored.outstanding("ws-1")).toEqual([]);
  });

  it("takes a pick only for the admitted, running turn of its conversation, on its Menu and allowed now", async () => {
    const a = agentsOf();
    // No turn admitted on the conversation: unknown.
    expect(await status(a.picks.submit("ws-1", "ws-1.c", body()))).toBe("404 unknown_conversation");
    await a.admit("ws-1.c");
    // Another submission than the running turn's.
    expect(await status(a.picks.submit("ws-1", "ws-1.c", body({ submissionId: "s0" })))).toBe("409 not_running");
    // A name not on the turn's Menu; one on it but not allowed now.
    expect(await status(a.picks.submit("ws-1", "ws-1.c", body({ pick: "deploy" })))).toBe("403 not_on_menu");
    expect(await status(a.picks.submit("ws-1", "ws-1.c", body({ pick: "reject" })))).toBe("403 not_allowed");
    // The Machine allows it: now it is taken.
    await a.turns.setAllowed("ws-1", "ws-1.c", ["propose", "reject"]);
    expect((await a.picks.submit("ws-1", "ws-1.c", body({ pick: "reject", callId: "c2" }))).repeated).toBe(false);
    // Nothing refused was written: one pick in the ledger.
    expect(JSON.parse(a.pickLedgers.stored.get("ws-1")!.text).picks).toHaveLength(1);
  });

  it("refuses a pick once its turn is over: after an abort, and after another turn is admitted", async () => {
    const a = agentsOf();
    await a.admit("ws-1.c");
    await a.turns.abort("ws-1", "ws-1.c");
    expect(await status(a.picks.submit("ws-1", "ws-1.c", body()))).toBe("409 turn_over");
    await a.admit("ws-1.c", "s2");
    expect((await a.picks.submit("ws-1", "ws-1.c", body({ submissionId: "s2" }))).repeated).toBe(false);
    // A turn on another conversation of the workspace ends this one (one turn at a time).
    await a.admit("ws-1.d");
    expect(await status(a.picks.submit("ws-1", "ws-1.c", body({ submissionId: "s2", callId: "c9" })))).toBe(
      "409 turn_over",
    );
    // Its outstanding pick is no longer listed, and cannot be answered.
    expect(await a.picks.outstanding("ws-1")).toEqual([]);
    expect(await status(a.picks.answer("ws-1", "d1", "late"))).toBe("409 turn_over");
  });

  it("lets go of the picks of ended turns: 17 aborted turns' 64 KiB picks do not wedge the next turn's pick", async () => {
    const a = agentsOf(Array.from({ length: 40 }, (_, i) => `d${i + 1}`));
    // Each aborted turn left one unanswered pick of nearly the args' bound (decision 0049).
    const big = { blob: "x".repeat(LIMITS.pickArgsBytes - 64) };
    for (let i = 1; i <= 17; i++) {
      await a.admit("ws-1.c", `s${i}`);
      expect((await a.picks.submit("ws-1", "ws-1.c", body({ submissionId: `s${i}`, args: big }))).repeated).toBe(false);
      await a.turns.abort("ws-1", "ws-1.c");
    }
    await a.admit("ws-1.c", "s18");
    const small = { note: "n".repeat(480) };
    expect(await a.picks.submit("ws-1", "ws-1.c", body({ submissionId: "s18", args: small }))).toEqual({
      receipt: { outstanding: true, deliveryId: "d18" },
      repeated: false,
    });
    // What is kept is the running turn's pick alone.
    const kept = parseLedger(a.pickLedgers.stored.get("ws-1")!.text);
    expect(kept.picks.map((p) => [p.submissionId, p.deliveryId])).toEqual([["s18", "d18"]]);
    // An answer lets go of them too: a turn ended by another conversation's admission.
    await a.admit("ws-1.d", "s19");
    await a.picks.submit("ws-1", "ws-1.d", body({ submissionId: "s19", callId: "c1" }));
    await a.picks.answer("ws-1", "d19", "ok");
    expect(parseLedger(a.pickLedgers.stored.get("ws-1")!.text).picks.map((p) => p.deliveryId)).toEqual(["d19"]);
  });

  it("checks a pick's args against its Menu tool's parameters, naming the place inside args", async () => {
    const a = agentsOf();
    await a.turns.submit(
      "ws-1",
      SubmitTurnBody.parse({
        agent: "coder",
        iid: "ws-1.p",
        message: "go",
        submissionId: "s1",
        menu: [
          {
            name: "propose",
            description: "propose a change",
            parameters: {
              type: "object",
              properties: {
                summary: { type: "string", maxLength: 80 },
                files: { type: "array", items: { type: "object", properties: { path: { type: "string" } } } },
              },
              required: ["summary"],
            },
          },
        ],
        allowed: ["propose"],
      }),
    );
    const refused = async (args: unknown) =>
      (await a.picks.submit("ws-1", "ws-1.p", body({ args, callId: "bad" })).catch((e: HttpError) => e)) as HttpError;
    for (const [args, message] of [
      [{ summary: 3 }, /^args\.summary: must be string/],
      [{ summary: "s", files: [{ path: "a" }, { path: 7 }] }, /^args\.files\[1\]\.path: must be string/],
      [undefined, /^args: must have required properties summary/],
      [["summary"], /^args: must be object/],
    ] as const) {
      const err = await refused(args);
      expect([JSON.stringify(args), err.status, err.code]).toEqual([JSON.stringify(args), 400, "invalid_args"]);
      expect(err.message).toMatch(message);
      expect(err.message).toContain(`the parameters of "propose" on the turn's Menu`);
    }
    expect(await a.picks.outstanding("ws-1")).toEqual([]);
    expect(
      (await a.picks.submit("ws-1", "ws-1.p", body({ args: { summary: "ok", files: [{ path: "a" }] } }))).repeated,
    ).toBe(false);
  });

  it("refuses a Menu whose parameters pass their bound before the Harness is asked", async () => {
    const a = agentsOf();
    const big = { type: "object", description: "d".repeat(LIMITS.menuParametersBytes) };
    const err = (await a.turns
      .submit(
        "ws-1",
        SubmitTurnBody.parse({
          agent: "coder",
          iid: "ws-1.big",
          message: "go",
          menu: [{ name: "propose", description: "p", parameters: big }],
        }),
      )
      .catch((e: HttpError) => e)) as HttpError;
    expect([err.status, err.code]).toEqual([413, "too_large"]);
    expect(err.message).toMatch(
      /^menu: its tools' parameters are \d+ bytes as JSON together, past the bound of 262144/,
    );
    expect(a.harness.calls).toEqual([]);
  });

  it("refuses with the HTTP words: 409 busy, 409 callId reused, 404 unknown, 409 answered twice, 404 no workspace", async () => {
    const a = agentsOf();
    await a.admit("ws-1.c", "s1", ["propose", "reject"]);
    await a.picks.submit("ws-1", "ws-1.c", body());
    expect(await status(a.picks.submit("ws-1", "ws-1.c", body({ callId: "c2" })))).toBe("409 pick_outstanding");
    expect(await status(a.picks.submit("ws-1", "ws-1.c", body({ pick: "reject" })))).toBe("409 call_reused");
    expect(await status(a.picks.delivery("ws-1", "ws-1.c", "nope", 0))).toBe("404 not_found");
    expect(await status(a.picks.answer("ws-1", "nope", "x"))).toBe("404 not_found");
    await a.picks.answer("ws-1", "d1", "x");
    expect(await status(a.picks.answer("ws-1", "d1", "y"))).toBe("409 already_answered");
    expect(await status(a.picks.outstanding("ws-3"))).toBe("404 not_found");
    expect(await status(a.picks.submit("ws-3", "ws-3.c", body()))).toBe("404 not_found");
  });

  it("holds a poll until the answer, and answers outstanding after the hold", async () => {
    const a = agentsOf();
    await a.admit("ws-1.c");
    await a.picks.submit("ws-1", "ws-1.c", body());
    const t0 = Date.now();
    expect(await a.picks.delivery("ws-1", "ws-1.c", "d1", 60)).toEqual({ state: "outstanding" });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(50);
    let settled = false;
    const held = a.picks.delivery("ws-1", "ws-1.c", "d1", 10 * 60_000).finally(() => (settled = true));
    // The ledgers are in memory: once the promises queued so far have run, the poll has read the
    // ledger and is waiting. Held, not answered: only the answer can end a hold this long.
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    await a.picks.answer("ws-1", "d1", "go");
    expect(await held).toEqual({ state: "answered", answer: "go" });
  });

  it("ends a hold when its client leaves", async () => {
    const a = agentsOf();
    await a.admit("ws-1.c");
    await a.picks.submit("ws-1", "ws-1.c", body());
    const ctl = new AbortController();
    let settled = false;
    const held = a.picks.delivery("ws-1", "ws-1.c", "d1", 10 * 60_000, ctl.signal).finally(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false);
    ctl.abort();
    expect(await held).toEqual({ state: "outstanding" });
  });

  // Decision 0079: the workspace moved to another replica; the Harness's next poll reaches the new owner.
  it("wakes a held poll of a released workspace, which answers what it has; another workspace's stays held", async () => {
    const a = agentsOf();
    await a.admit("ws-1.c");
    await a.admit("ws-2.c");
    await a.picks.submit("ws-1", "ws-1.c", body());
    await a.picks.submit("ws-2", "ws-2.c", body());
    const settled = [false, false];
    const held1 = a.picks.delivery("ws-1", "ws-1.c", "d1", 10 * 60_000).finally(() => (settled[0] = true));
    const held2 = a.picks.delivery("ws-2", "ws-2.c", "d2", 10 * 60_000).finally(() => (settled[1] = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toEqual([false, false]);
    const version = a.pickLedgers.stored.get("ws-1")!.version;
    a.picks.release(["ws-1"]);
    expect(await held1).toEqual({ state: "outstanding" });
    await new Promise((r) => setImmediate(r));
    expect(settled).toEqual([true, false]);
    // Another writer (the new owner) answers it in the cluster: this store, asked later, reads it
    // there rather than the value it held before the move.
    const moved = new PickStore({ watch: a.watch, turns: a.turns, backend: a.pickLedgers });
    await moved.answer("ws-1", "d1", "from the new owner");
    expect(a.pickLedgers.stored.get("ws-1")!.version).toBe(version + 1);
    expect(await a.picks.delivery("ws-1", "ws-1.c", "d1", 0)).toEqual({
      state: "answered",
      answer: "from the new owner",
    });
    await a.picks.answer("ws-2", "d2", "go");
    expect(await held2).toEqual({ state: "answered", answer: "go" });
  });

  it("forgets a released workspace's turns ledger: a later read is the cluster's", async () => {
    const a = agentsOf();
    await a.admit("ws-1.c", "s1");
    expect(await a.turns.isRunning("ws-1", "ws-1.c", "s1")).toBe(true);
    // Another replica ends the turn and admits the next (it owned the workspace meanwhile).
    const other = new Turns({ namespace: "ns", gateway: a.harness, watch: a.watch, backend: a.turnLedgers });
    await other.submit(
      "ws-1",
      SubmitTurnBody.parse({ agent: "coder", iid: "ws-1.c", message: "next", submissionId: "s2", menu: [] }),
    );
    // Held from before the move: the old turn. Released: the cluster's, the new one.
    expect(await a.turns.isRunning("ws-1", "ws-1.c", "s1")).toBe(true);
    a.turns.release(["ws-1"]);
    expect(await a.turns.isRunning("ws-1", "ws-1.c", "s1")).toBe(false);
    expect(await a.turns.isRunning("ws-1", "ws-1.c", "s2")).toBe(true);
  });

  it("re-reads and decides again after a write lost a race, and refuses (never empties) an unreadable ledger", async () => {
    const a = agentsOf();
    await a.admit("ws-1.c");
    await a.picks.submit("ws-1", "ws-1.c", body());
    await a.picks.answer("ws-1", "d1", "ok");
    // Another writer replaced the ledger meanwhile (its version moved on).
    const stored = a.pickLedgers.stored.get("ws-1")!;
    a.pickLedgers.stored.set("ws-1", { text: serializeLedger(EMPTY_LEDGER), version: stored.version + 1 });
    // The lost attempt's delivery id (d2) is never stored: the decision was made again.
    expect((await a.picks.submit("ws-1", "ws-1.c", body({ callId: "c3" }))).receipt.deliveryId).toBe("d3");
    expect(
      JSON.parse(a.pickLedgers.stored.get("ws-1")!.text).picks.map((p: { deliveryId: string }) => p.deliveryId),
    ).toEqual(["d3"]);
    // A ledger that does not parse: refused with its ConfigMap's name and the fix, nothing written over it.
    const fresh = agentsOf();
    await fresh.admit("ws-1.c");
    fresh.pickLedgers.stored.set("ws-1", { text: "{not json", version: 7 });
    const refused = await fresh.picks.submit("ws-1", "ws-1.c", body()).catch((e: HttpError) => e);
    expect(refused).toMatchObject({ status: 500, code: "ledger_unreadable" });
    expect((refused as HttpError).message).toMatch(/ConfigMap ws-1-agents.*repair it, or delete it/);
    expect(fresh.pickLedgers.stored.get("ws-1")).toEqual({ text: "{not json", version: 7 });
  });

  it("makes one workspace's changes one at a time", async () => {
    const a = agentsOf();
    await a.admit("ws-1.c", "s1", ["propose", "reject"]);
    const all = await Promise.all([
      a.picks.submit("ws-1", "ws-1.c", body()),
      a.picks.submit("ws-1", "ws-1.c", body()),
      a.picks.submit("ws-1", "ws-1.c", body({ callId: "c2" })).catch((e: HttpError) => e.code),
    ]);
    expect(all).toEqual([
      { receipt: { outstanding: true, deliveryId: "d1" }, repeated: false },
      { receipt: { outstanding: true, deliveryId: "d1" }, repeated: true },
      "pick_outstanding",
    ]);
  });
});

// ---------------------------------------------------------------------------------------------

describe("the routes", () => {
  const API = "api-token-for-the-picks-tests";
  const key = randomBytes(32);
  let server: Server;
  let base: string;
  const none = { ownerOf: () => undefined } as unknown as Workspaces;
  const a = agentsOf();
  /** Delivery polls that reached the store, so a test answers a poll once it is held. */
  let deliveriesAsked = 0;
  const counted: Picks = {
    submit: (...args) => a.picks.submit(...args),
    outstanding: (...args) => a.picks.outstanding(...args),
    answer: (...args) => a.picks.answer(...args),
    delivery: (...args) => {
      deliveriesAsked++;
      return a.picks.delivery(...args);
    },
  };

  beforeAll(async () => {
    server = await startOrchestratorServer(
      {
        workspaces: none,
        checkToken: apiTokenChecker([{ token: API, principal: { kind: "admin" } }]),
        metrics: () => "",
        picks: counted,
        turns: a.turns,
        checkSandboxToken: sandboxTokenChecker(key),
        // ws-2's flood is tried below; the others stay well under these.
        sandboxRates: { picks: { perSecond: 1, burst: 20 }, reads: { perSecond: 20, burst: 200 } },
      },
      0,
      "127.0.0.1",
    );
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    await a.admit("ws-1.c");
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const call = async (method: string, path: string, token: string, b?: unknown) => {
    const res = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(b !== undefined ? { "content-type": "application/json" } : {}) },
      body: b === undefined ? undefined : typeof b === "string" ? b : JSON.stringify(b),
    });
    return {
      status: res.status,
      json: (await res.json()) as Record<string, unknown> & { error?: { code: string; message: string } },
      retryAfter: res.headers.get("retry-after"),
    };
  };
  const sbx = sandboxToken(key, "ws-1");
  /** The second pick's delivery (the flood test takes it). */
  let second = "";

  it("takes a pick only with the Sandbox token of the conversation's workspace", async () => {
    const wrong = [API, sandboxToken(key, "ws-2"), "nope"];
    for (const t of wrong) {
      const r = await call("POST", picksPath("ws-1.c"), t, body());
      expect(r.status).toBe(401);
      expect(JSON.stringify(r.json)).not.toContain(sbx);
    }
    // A conversation that names no workspace is refused the same way.
    expect((await call("POST", picksPath("nodot"), sbx, body())).status).toBe(401);
    expect(await call("POST", picksPath("ws-1.c"), sbx, body())).toMatchObject({
      status: 202,
      json: { outstanding: true, deliveryId: "d1" },
    });
    expect((await call("POST", picksPath("ws-1.c"), sbx, body())).status).toBe(200);
    const busy = await call("POST", picksPath("ws-1.c"), sbx, body({ callId: "c2" }));
    expect(busy.status).toBe(409);
    expect((await call("POST", picksPath("ws-1.c"), sbx, { pick: "x" })).status).toBe(400);
  });

  it("refuses a forged pick with its reason, and never lists it", async () => {
    const forged: Array<[string, string, PickBody, string]> = [
      ["a wrong name", "ws-1.c", body({ pick: "deploy", callId: "f1" }), "403 not_on_menu"],
      ["a name not allowed now", "ws-1.c", body({ pick: "reject", callId: "f2" }), "403 not_allowed"],
      ["a wrong submission", "ws-1.c", body({ submissionId: "s-forged", callId: "f3" }), "409 not_running"],
      ["an unknown conversation", "ws-1.forged", body({ callId: "f4" }), "404 unknown_conversation"],
    ];
    for (const [, iid, b, want] of forged) {
      const r = await call("POST", picksPath(iid), sbx, b);
      expect([iid, b.pick, `${r.status} ${r.json.error?.code}`]).toEqual([iid, b.pick, want]);
      expect(r.json.error?.message).toBeTruthy();
    }
    const list = await call("GET", "/v1/workspaces/ws-1/picks", API);
    expect((list.json.items as Array<{ deliveryId: string }>).map((p) => p.deliveryId)).toEqual(["d1"]);
  });

  it("refuses an oversized pick with 413 naming the field, before anything else", async () => {
    const cases: Array<[Partial<PickBody>, RegExp]> = [
      [{ args: { blob: "x".repeat(LIMITS.pickArgsBytes) } }, /^args: \d+ bytes as JSON, past the bound of 65536/],
      [{ pick: "p".repeat(65) }, /^pick: 65 characters, past the bound of 64/],
      [{ callId: "c".repeat(129) }, /^callId: 129 characters, past the bound of 128/],
      [{ submissionId: "s".repeat(129) }, /^submissionId: 129 characters, past the bound of 128/],
    ];
    for (const [over, message] of cases) {
      const r = await call("POST", picksPath("ws-1.c"), sbx, body(over));
      expect(r.status).toBe(413);
      expect(r.json.error?.message).toMatch(message);
    }
    // A body past the whole pick's bound: its 413 names the field that is (decision 0049).
    const huge = await call("POST", picksPath("ws-1.c"), sbx, JSON.stringify(body({ args: "y".repeat(200 * 1024) })));
    expect(huge.status).toBe(413);
    expect(huge.json.error?.message).toMatch(/^args: 2048\d\d bytes as JSON, past the bound of 65536/);
    // Past the API's own body bound, unread: the bounds a pick keeps to are named.
    const endless = await call(
      "POST",
      picksPath("ws-1.c"),
      sbx,
      JSON.stringify(body({ args: "y".repeat(1100 * 1024) })),
    );
    expect(endless.status).toBe(413);
    expect(endless.json.error?.message).toMatch(
      /^body: more than 1048576 bytes; a pick's args are at most 65536 bytes/,
    );
  });

  it("refuses args nested thousands deep with 400 naming the field, and serves on", async () => {
    const deep = `{"pick":"propose","submissionId":"s1","callId":"deep","args":${"[".repeat(5000)}${"]".repeat(5000)}}`;
    const r = await call("POST", picksPath("ws-1.c"), sbx, deep);
    expect([r.status, r.json.error?.code]).toEqual([400, "invalid"]);
    expect(r.json.error?.message).toMatch(/^args: nested more than 64 levels deep \(at args\[0\]\[0\]/);
    expect((await call("GET", allowedPath("ws-1.c"), sbx)).status).toBe(200);
  });

  it("holds one workspace's flood to its own rate (429 with retry-after) while a neighbour's pick is taken", async () => {
    await a.admit("ws-2.c");
    const flood = sandboxToken(key, "ws-2");
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        call("POST", picksPath("ws-2.c"), flood, body({ callId: `x${i}`, pick: "deploy" })),
      ),
    );
    const limited = answers.filter((r) => r.status === 429);
    expect(limited.length).toBeGreaterThanOrEqual(19);
    expect(limited[0]!.retryAfter).toMatch(/^[1-9]\d*$/);
    expect(limited[0]!.json.error?.code).toBe("rate_limited");
    // ws-1's budget is its own: its next pick is judged, not limited.
    await a.picks.answer("ws-1", "d1", "done");
    const next = await call("POST", picksPath("ws-1.c"), sbx, body({ callId: "c5" }));
    expect(next.status).toBe(202);
    second = next.json.deliveryId as string;
  });

  it("serves the delivery to the Sandbox and the list and answer to the Machine, each with its own token", async () => {
    expect((await call("GET", `${deliveryPath("ws-1.c", second)}?wait=30`, sbx)).json).toEqual({
      state: "outstanding",
    });
    expect((await call("GET", deliveryPath("ws-1.c", second), API)).status).toBe(401);
    expect((await call("GET", deliveryPath("ws-1.c", "zz"), sbx)).status).toBe(404);
    expect((await call("GET", "/v1/workspaces/ws-1/picks", sbx)).status).toBe(401);
    const polling = deliveriesAsked;
    const poll = call("GET", `${deliveryPath("ws-1.c", second)}?wait=20000`, sbx);
    // Answered once the poll is held at the store (it asked; the ledger in memory is read at once).
    await eventually("the poll held at the store", () => deliveriesAsked > polling || undefined);
    await new Promise((r) => setImmediate(r));
    expect((await call("POST", `/v1/workspaces/ws-1/picks/${second}/answer`, API, { answer: 1 })).status).toBe(400);
    expect(await call("POST", `/v1/workspaces/ws-1/picks/${second}/answer`, API, { answer: "approved" })).toMatchObject(
      {
        status: 200,
        json: { deliveryId: second, answered: true },
      },
    );
    expect((await poll).json).toEqual({ state: "answered", answer: "approved" });
    expect((await call("POST", `/v1/workspaces/ws-1/picks/${second}/answer`, API, { answer: "again" })).status).toBe(
      409,
    );
    expect((await call("POST", "/v1/workspaces/ws-1/picks/d9/answer", API, { answer: "x" })).status).toBe(404);
    expect((await call("GET", "/v1/workspaces/ws-3/picks", API)).status).toBe(404);
  });

  it("ends a turn's event stream with nothing more to come, and answers a bad or past-the-end Last-Event-ID 400 naming it", async () => {
    // The fake Harness's stream of ws-1.c is empty and idle: read to its end, nothing can come (decision 0049).
    const events = (lastEventId?: string) =>
      fetch(`${base}/v1/workspaces/ws-1/turns/ws-1.c/events`, {
        headers: {
          authorization: `Bearer ${API}`,
          ...(lastEventId !== undefined ? { "last-event-id": lastEventId } : {}),
        },
      });
    const atEnd = await events();
    expect(atEnd.status).toBe(200);
    expect(await atEnd.text()).toBe("");
    for (const [id, message] of [
      ["41", /^Last-Event-ID: 41 is past the end of conversation ws-1.c's stream/],
      ["x1", /^Last-Event-ID: must be the id of an event this stream sent/],
    ] as const) {
      const res = await events(id);
      expect([id, res.status]).toEqual([id, 400]);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(message);
    }
  });

  it("serves the running turn's Allowed picks to its Sandbox alone, with the turn they are for", async () => {
    expect(await call("GET", allowedPath("ws-1.c"), sbx)).toMatchObject({
      status: 200,
      json: { allowed: ["propose"], submissionId: "s1" },
    });
    expect((await call("GET", allowedPath("ws-1.new"), sbx)).status).toBe(404);
    for (const t of [API, sandboxToken(key, "ws-2")])
      expect((await call("GET", allowedPath("ws-1.c"), t)).status).toBe(401);
    expect((await call("POST", allowedPath("ws-1.c"), sbx, {})).status).toBe(405);
  });
});
