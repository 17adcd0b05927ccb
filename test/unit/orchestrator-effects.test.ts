// A Machine's Effects end to end in one process (orchestrator/effects/effects.ts, decision 0070): the
// ledger in memory, an Effector stand-in behind the gateway's `effector` call. Recorded before it is
// sent, run once however often it is asked for, one after another, recovered after a restart by
// asking the Effector (never sent blind), an unsigned answer never trusted; and over HTTP, the routes.
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { SandboxModel } from "../../api/crd";
import { EffectBody } from "../../api/effects";
import { EffectorOrder, type EffectorAnswer } from "../../api/effector-wire";
import { HttpError } from "../../api/orchestrator-errors";
import { ATTACH_ANNOTATION, RUN_LABEL } from "../../api/wire";
import { MemoryLedgers } from "../../orchestrator/agents/ledger-store";
import { EFFECTS_FORMAT, Effects, type EffectorCaller } from "../../orchestrator/effects/effects";
import type { EffectsLedger } from "../../orchestrator/effects/effect-ledger";
import { parseCredentials } from "../../orchestrator/workspaces/fence";
import { EffectorUnreachable, type EffectorReply } from "../../orchestrator/workspaces/sandbox-gateway";
import { startOrchestratorServer, type Workspaces } from "../../orchestrator/http/api-server";
import { apiTokenChecker, parseApiTokens } from "../../orchestrator/tokens";
import type { Ownership } from "../../orchestrator/replicas/ownership";
import { ShardTable } from "../support/shard-table";

const credentials = parseCredentials("- match: forge.example/acme\n  secret: push-acme\n");

function sandbox(name: string, opts: { effector?: boolean; phase?: string } = {}): SandboxModel {
  return {
    apiVersion: "core.jr2.dev/v1alpha1",
    kind: "Sandbox",
    metadata: {
      name,
      uid: `uid-${name}`,
      labels: { [RUN_LABEL]: name },
      annotations: {
        [ATTACH_ANNOTATION]: JSON.stringify({
          branch: "feature",
          slots: [
            { slot: "app", url: "https://forge.example/acme/app.git", identity: "forge.example/acme/app", key: "k" },
          ],
        }),
      },
    },
    spec: {
      image: "h:1",
      ...(opts.effector === false ? {} : { sidecars: [{ name: "effector", image: "e:1" }] }),
      gitCredentials: [{ name: "push-acme" }],
    },
    status: { phase: opts.phase ?? "Ready" },
  } as unknown as SandboxModel;
}

/** An Effector stand-in: remembers each id it ran (as the real one does for its pod's life). */
class StandInEffector implements EffectorCaller {
  readonly known = new Map<string, EffectorAnswer>();
  readonly posts: string[] = [];
  readonly queries: string[] = [];
  /** What the next POSTs do instead of answering. */
  next: Array<"hang" | "unsigned" | "refuse-connect" | "lose-after-run"> = [];
  #release: Array<() => void> = [];

  async effector(_name: string, method: "GET" | "POST", path: string, body: unknown): Promise<EffectorReply> {
    if (method === "GET") {
      const id = decodeURIComponent(path.split("/").pop()!);
      this.queries.push(id);
      const a = this.known.get(id);
      return a
        ? { status: 200, text: JSON.stringify(a), signed: true }
        : { status: 404, text: JSON.stringify({ error: { code: "unknown_id", message: "no such id" } }), signed: true };
    }
    const order = EffectorOrder.parse(body);
    const act = this.next.shift();
    if (act === "refuse-connect") throw new EffectorUnreachable(false, "ECONNREFUSED");
    this.posts.push(order.id);
    if (act === "hang") await new Promise<void>((r) => this.#release.push(r));
    const held = this.known.get(order.id);
    const answer: EffectorAnswer = held
      ? { ...held, replayed: true }
      : {
          id: order.id,
          state: "succeeded",
          replayed: false,
          result: { kind: "http", status: 201, headers: {}, body: "ok", bodyEncoding: "utf8", truncated: false },
        };
    if (!held) this.known.set(order.id, answer);
    if (act === "lose-after-run") throw new EffectorUnreachable(true, "socket hang up");
    return { status: 200, text: JSON.stringify(answer), signed: act !== "unsigned" };
  }

  release() {
    for (const r of this.#release.splice(0)) r();
  }
}

const FAST = { firstBackoffMs: 1, maxBackoffMs: 5, pollMs: 1 };
const pr = (id: string, extra: Record<string, unknown> = {}) =>
  EffectBody.parse({ id, kind: "http", method: "POST", url: "https://forge.example/acme/app/pulls", ...extra });

function setup(
  opts: {
    sandboxes?: SandboxModel[];
    backend?: MemoryLedgers<EffectsLedger>;
    effector?: StandInEffector;
    ownership?: Ownership;
  } = {},
) {
  const sandboxes = new Map((opts.sandboxes ?? [sandbox("ws-1")]).map((s) => [s.metadata!.name!, s]));
  const watch = {
    whenListed: async () => undefined,
    get: (n: string) => sandboxes.get(n),
    all: () => [...sandboxes.values()],
  };
  const backend = opts.backend ?? new MemoryLedgers(EFFECTS_FORMAT);
  const effector = opts.effector ?? new StandInEffector();
  const states: string[] = [];
  const effects = new Effects({
    namespace: "ns",
    gateway: effector,
    watch,
    credentials,
    backend,
    timing: FAST,
    onState: (kind, state) => states.push(`${kind}/${state}`),
    ...(opts.ownership ? { ownership: opts.ownership } : {}),
  });
  return { effects, effector, backend, states, sandboxes };
}

const stored = (backend: MemoryLedgers<EffectsLedger>, ws = "ws-1") =>
  EFFECTS_FORMAT.parse(backend.stored.get(ws)!.text).effects.map((e) => [e.id, e.state]);

describe("Effects", () => {
  it("records an Effect queued, runs it on the Effector, and holds a GET until it settles", async () => {
    const { effects, effector, states } = setup();
    const { record, created } = await effects.create("ws-1", pr("pr-1"));
    expect([created, record.state, record.request]).toEqual([true, "queued", pr("pr-1")]);
    const settled = await effects.get("ws-1", "pr-1", 5_000);
    expect(settled).toMatchObject({ state: "succeeded", result: { kind: "http", status: 201 } });
    expect(settled.sentAt).toBeDefined();
    expect(effector.posts).toEqual(["pr-1"]);
    expect(states).toEqual(["http/queued", "http/sent", "http/succeeded"]);
  });

  it("runs an id sent twice once, answering its record; another body under it is effect_conflict", async () => {
    const { effects, effector } = setup();
    await effects.create("ws-1", pr("pr-1"));
    await effects.idle("ws-1");
    const again = await effects.create("ws-1", pr("pr-1"));
    expect([again.created, again.record.state]).toEqual([false, "succeeded"]);
    await expect(effects.create("ws-1", pr("pr-1", { method: "PUT" }))).rejects.toMatchObject({
      code: "effect_conflict",
    });
    await effects.idle("ws-1");
    expect(effector.posts).toEqual(["pr-1"]);
  });

  it("runs a workspace's Effects one after another, in the order sent: the next waits for the first's answer", async () => {
    const { effects, effector, backend } = setup();
    effector.next = ["hang"];
    await effects.create("ws-1", pr("a"));
    await effects.create("ws-1", pr("b"));
    await until(() => effector.posts.length === 1);
    expect(stored(backend)).toEqual([
      ["a", "sent"],
      ["b", "queued"],
    ]);
    effector.release();
    await effects.idle("ws-1");
    expect(effector.posts).toEqual(["a", "b"]);
    expect((await effects.list("ws-1")).map((r) => r.state)).toEqual(["succeeded", "succeeded"]);
  });

  it("refuses before recording: no Effector, not Ready, a url the workspace may not reach", async () => {
    const { effects, backend } = setup({
      sandboxes: [
        sandbox("ws-1"),
        sandbox("ws-none", { effector: false }),
        sandbox("ws-pending", { phase: "Pending" }),
      ],
    });
    await expect(effects.create("ws-none", pr("a"))).rejects.toMatchObject({ code: "effector_absent" });
    await expect(effects.create("ws-pending", pr("a"))).rejects.toMatchObject({ code: "not_ready" });
    const refused = await effects.create("ws-1", pr("a", { url: "https://evil.example/x" })).catch((e: HttpError) => e);
    expect(refused).toMatchObject({ code: "effect_refused", message: expect.stringMatching(/^url: /) });
    await expect(effects.create("ws-gone", pr("a"))).rejects.toMatchObject({ code: "not_found" });
    expect(backend.stored.size).toBe(0);
  });

  it("fails an Effect whose answer is not signed with the Effector's key: answer_unsigned, never sent again", async () => {
    const { effects, effector } = setup();
    effector.next = ["unsigned"];
    await effects.create("ws-1", pr("a", { idempotent: true }));
    expect(await effects.get("ws-1", "a", 5_000)).toMatchObject({
      state: "failed",
      error: { code: "answer_unsigned" },
    });
    expect(effector.posts).toEqual(["a"]);
  });

  it("sends again an order whose connection was refused (it reached no one)", async () => {
    const { effects, effector } = setup();
    effector.next = ["refuse-connect", "refuse-connect"];
    await effects.create("ws-1", pr("a"));
    expect(await effects.get("ws-1", "a", 5_000)).toMatchObject({ state: "succeeded" });
    expect(effector.posts).toEqual(["a"]);
  });

  it("asks before anything else when a send's answer was lost: the Effector's record settles it", async () => {
    const { effects, effector } = setup();
    effector.next = ["lose-after-run"];
    await effects.create("ws-1", pr("a"));
    expect(await effects.get("ws-1", "a", 5_000)).toMatchObject({ state: "succeeded" });
    expect([effector.posts, effector.queries]).toEqual([["a"], ["a"]]);
  });

  describe("a restart between the send and the answer", () => {
    /** An Orchestrator that recorded `a` sent and died before its answer: its ledger, and its Effector. */
    async function killedMidSend(body: EffectBody) {
      const first = setup();
      first.effector.next = ["hang"];
      await first.effects.create("ws-1", body);
      await until(() => first.effector.posts.length === 1);
      expect(stored(first.backend)).toEqual([["a", "sent"]]);
      await stopWithout(first);
      return first;
    }
    /** Stops the first worker without letting its held send answer. */
    async function stopWithout(first: ReturnType<typeof setup>) {
      const done = first.effects.stopAll();
      first.effector.release();
      await done;
    }

    it("settles with what the Effector ran, sending nothing", async () => {
      const first = await killedMidSend(pr("a"));
      // The answer never reached the first Orchestrator's ledger, but the Effector ran it.
      const second = setup({ backend: first.backend, effector: first.effector });
      const posts = first.effector.posts.length;
      await second.effects.recover();
      expect(await second.effects.get("ws-1", "a", 5_000)).toMatchObject({ state: "succeeded" });
      expect(first.effector.posts.length).toBe(posts);
      expect(first.effector.queries).toContain("a");
    });

    it("settles unknown (answer_lost) when the Effector has no record (it restarted), never sending it again", async () => {
      const first = await killedMidSend(pr("a"));
      const restarted = new StandInEffector();
      const second = setup({ backend: first.backend, effector: restarted });
      await second.effects.recover();
      expect(await second.effects.get("ws-1", "a", 5_000)).toMatchObject({
        state: "unknown",
        error: { code: "answer_lost" },
      });
      expect([restarted.posts, restarted.queries]).toEqual([[], ["a"]]);
    });

    it("sends an idempotent one again when the Effector has no record", async () => {
      const first = await killedMidSend(pr("a", { idempotent: true }));
      const restarted = new StandInEffector();
      const second = setup({ backend: first.backend, effector: restarted });
      await second.effects.recover();
      expect(await second.effects.get("ws-1", "a", 5_000)).toMatchObject({ state: "succeeded" });
      expect(restarted.posts).toEqual(["a"]);
    });
  });

  it("stops a workspace's worker when asked (the workspace deleted)", async () => {
    const { effects, effector, backend } = setup();
    effector.next = ["hang"];
    await effects.create("ws-1", pr("a"));
    await effects.create("ws-1", pr("b"));
    await until(() => effector.posts.length === 1);
    effects.stop("ws-1");
    effector.release();
    await effects.idle("ws-1");
    expect(effector.posts).toEqual(["a"]);
    expect(stored(backend)[1]).toEqual(["b", "queued"]);
  });
});

// Decision 0079: a workspace's worker runs on the replica that owns it, and stops there when it moves.
describe("Effects of a workspace that moves between replicas", () => {
  it("release stops its worker and awaits it, the Effect left sent; the new owner recovers it by asking", async () => {
    const first = setup();
    first.effector.next = ["hang"];
    await first.effects.create("ws-1", pr("a"));
    await until(() => first.effector.posts.length === 1);
    const held = first.effects.get("ws-1", "a", MAX_HOLD);
    // The Effector has not answered: release resolves anyway, the worker gone.
    await first.effects.release(["ws-1"]);
    let idle = false;
    await first.effects.idle("ws-1").then(() => (idle = true));
    expect(idle).toBe(true);
    expect(await held).toMatchObject({ state: "sent" });
    expect(stored(first.backend)).toEqual([["a", "sent"]]);
    // Its answer comes now, to no one: the old owner writes nothing more.
    const writes = first.backend.writes;
    first.effector.release();
    await new Promise((r) => setImmediate(r));
    expect(first.backend.writes).toBe(writes);
    // The new owner asks the Effector (it ran it) and settles it; it is never sent again.
    const second = setup({ backend: first.backend, effector: first.effector });
    await second.effects.recover();
    expect(await second.effects.get("ws-1", "a", MAX_HOLD)).toMatchObject({ state: "succeeded" });
    expect(first.effector.posts).toEqual(["a"]);
    expect(first.effector.queries).toContain("a");
  });

  it("never runs a worker for a workspace its replica does not own, and recovers only what the filter passes", async () => {
    const table = new ShardTable("replica-b", []);
    const mine = setup({ sandboxes: [sandbox("ws-1"), sandbox("ws-2")], ownership: table });
    // Recorded (the API forwards a create to the owner; here nothing did), never run here.
    await mine.effects.create("ws-1", pr("a"));
    await mine.effects.create("ws-2", pr("b", { url: "https://forge.example/acme/app/issues" }));
    await mine.effects.recover();
    await mine.effects.idle("ws-1");
    expect(mine.effector.posts).toEqual([]);
    // The shards are gained: recover kicks only what the filter passes.
    table.hold(table.shardOf("ws-1"));
    table.hold(table.shardOf("ws-2"));
    await mine.effects.recover((w) => w === "ws-1");
    expect(await mine.effects.get("ws-1", "a", MAX_HOLD)).toMatchObject({ state: "succeeded" });
    await mine.effects.idle("ws-2");
    expect(mine.effector.posts).toEqual(["a"]);
    await mine.effects.recover((w) => table.owns(w));
    expect(await mine.effects.get("ws-2", "b", MAX_HOLD)).toMatchObject({ state: "succeeded" });
  });
});

const MAX_HOLD = 5_000;

/** The fields the route tests read of an answer. */
type Json = { state: string; items: Array<{ id: string }>; error: { code: string; message: string } };

describe("the effect routes over HTTP", () => {
  const TOKEN = "t0ken-for-the-effects-tests-9b1c";
  let server: Server;
  let base: string;
  let effector: StandInEffector;

  beforeAll(async () => {
    const s = setup();
    effector = s.effector;
    const workspaces = { ownerOf: (n: string) => (n === "ws-1" ? undefined : null) } as unknown as Workspaces;
    server = await startOrchestratorServer(
      {
        workspaces,
        checkToken: apiTokenChecker(parseApiTokens(TOKEN)),
        metrics: () => "",
        effects: s.effects,
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

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { "content-type": "application/json" } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return {
      status: res.status,
      location: res.headers.get("location"),
      json: (await res.json()) as Json,
    };
  };

  it("creates (202, its location), answers a retry 200, a conflict 409, holds a GET with ?wait=, lists", async () => {
    const body = { id: "pr-1", kind: "http", method: "POST", url: "https://forge.example/acme/app/pulls" };
    const created = await call("POST", "/v1/workspaces/ws-1/effects", body);
    expect([created.status, created.location, created.json.state]).toEqual([
      202,
      "/v1/workspaces/ws-1/effects/pr-1",
      "queued",
    ]);
    const settled = await call("GET", "/v1/workspaces/ws-1/effects/pr-1?wait=10");
    expect([settled.status, settled.json.state]).toEqual([200, "succeeded"]);
    expect((await call("POST", "/v1/workspaces/ws-1/effects", body)).status).toBe(200);
    const conflict = await call("POST", "/v1/workspaces/ws-1/effects", { ...body, method: "PUT" });
    expect([conflict.status, conflict.json.error.code]).toEqual([409, "effect_conflict"]);
    expect((await call("GET", "/v1/workspaces/ws-1/effects")).json.items.map((r) => r.id)).toEqual(["pr-1"]);
    expect(effector.posts).toEqual(["pr-1"]);
  });

  it("names a body's bad field, a bad wait, an unknown id, and another's workspace as 404", async () => {
    const bad = await call("POST", "/v1/workspaces/ws-1/effects", { id: "x", kind: "push" });
    expect([bad.status, bad.json.error.message]).toEqual([400, expect.stringContaining("slot")]);
    expect((await call("GET", "/v1/workspaces/ws-1/effects/pr-1?wait=soon")).status).toBe(400);
    expect((await call("GET", "/v1/workspaces/ws-1/effects/nope")).json.error.code).toBe("not_found");
    expect((await call("GET", "/v1/workspaces/ws-2/effects")).status).toBe(404);
  });
});

async function until(done: () => boolean, ms = 5_000): Promise<void> {
  const end = Date.now() + ms;
  while (!done()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 2));
  }
}
