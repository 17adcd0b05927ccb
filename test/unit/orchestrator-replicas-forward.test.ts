// Any replica answers any call (decision 0079): several real Orchestrator API servers in one
// process, each with its own view of a fixed ownership table, forward a call for a workspace
// another owns to its owner (the caller's token passed on, the answer streamed back), answer 401
// themselves, never forward a forwarded call twice, merge their lists (a moving workspace listed
// from its Sandbox), resume a turn's event stream at a new owner with no repeat and no gap, and
// reach an https peer only when it serves the very certificate they serve.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Agent, request, type Dispatcher } from "undici";
import type { WorkspaceEvent, WorkspaceView } from "../../api/orchestrator-schemas";
import type { StreamEvent, StreamPage } from "../../api/agent-protocol";
import { FORWARDED_HEADER, OWN_ONLY_HEADER } from "../../api/wire";
import { WorkspaceMoved } from "../../api/orchestrator-errors";
import { servingCertificate, type ServingCertificate } from "../../lib/serving-certificate";
import {
  startOrchestratorServer,
  type LogEntry,
  type TurnsApi,
  type Workspaces,
} from "../../orchestrator/http/api-server";
import { shardOf, type Owner, type Ownership } from "../../orchestrator/replicas/ownership";
import { apiTokenChecker, parseApiTokens } from "../../orchestrator/tokens";
import { listen } from "../../lib/http-json";

const ADMIN = "admin-token-for-the-replica-tests-0123";
const TEAM_A = "team-a-token-for-the-replica-tests-0123";
const TEAM_B = "team-b-token-for-the-replica-tests-0123";
const AT = "2026-03-01T12:00:00.000Z";
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Who owns each workspace, and where each replica answers: one table all replicas read, unless a
 * test gives one replica a stale copy. A name the table lacks has no owner (it is moving). */
class Table {
  owners = new Map<string, string>();
  urls = new Map<string, string>();
  shards = new Map<string, number[]>();
  readonly #listeners = new Set<() => void>();
  set(workspace: string, owner: string | undefined) {
    if (owner === undefined) this.owners.delete(workspace);
    else this.owners.set(workspace, owner);
    for (const l of this.#listeners) l();
  }
  listen(l: () => void): () => void {
    this.#listeners.add(l);
    return () => void this.#listeners.delete(l);
  }
}

/** The Ownership interface read from a Table: a table, as the Lease loop's would be at an instant. */
class TableOwnership implements Ownership {
  /** Told each time a call looks for an owner again (as the Lease watch would hear news meanwhile). */
  onLook?: () => void;
  constructor(
    readonly identity: string,
    readonly table: Table,
  ) {}
  shardOf(workspace: string) {
    return shardOf(workspace);
  }
  ownerOf(workspace: string): Owner {
    const owner = this.table.owners.get(workspace);
    if (owner === undefined) return { kind: "none" };
    if (owner === this.identity) return { kind: "self" };
    const url = this.table.urls.get(owner);
    return url ? { kind: "peer", identity: owner, url } : { kind: "none" };
  }
  owns(workspace: string) {
    return this.ownerOf(workspace).kind === "self";
  }
  owned() {
    return this.table.shards.get(this.identity) ?? [];
  }
  waitForOwner(workspace: string, ms: number, signal?: AbortSignal): Promise<Owner> {
    this.onLook?.();
    return new Promise((resolve) => {
      const check = () => {
        const owner = this.ownerOf(workspace);
        if (owner.kind !== "none") done();
        return owner;
      };
      const done = () => {
        clearTimeout(timer);
        stop();
        signal?.removeEventListener("abort", done);
        resolve(this.ownerOf(workspace));
      };
      const timer = setTimeout(done, ms);
      const stop = this.table.listen(check);
      signal?.addEventListener("abort", done, { once: true });
      check();
    });
  }
  peers() {
    return [...this.table.urls]
      .filter(([identity]) => identity !== this.identity)
      .map(([identity, url]) => ({ identity, url }));
  }
  onChange() {
    return () => undefined;
  }
}

/** One replica's workspaces in memory: those it owns, and every Sandbox the (shared) watch holds. */
class MemoryWorkspaces implements Workspaces {
  views = new Map<string, WorkspaceView>();
  owners = new Map<string, string | undefined>();
  egressLists = new Map<string, string[]>();
  created = 0;
  /** The Sandboxes the watch holds, whoever owns them, with their tenant. */
  sandboxes = new Map<string, string | undefined>();
  constructor(readonly prefix: string) {}
  add(name: string, tenant?: string) {
    this.views.set(name, { name, state: "ready", conditions: [], createdAt: AT });
    this.owners.set(name, tenant);
  }
  async create(_body: unknown, tenant?: string) {
    const name = `${this.prefix}-new-${++this.created}`;
    this.add(name, tenant);
    return name;
  }
  async list() {
    return [...this.views.values()];
  }
  known() {
    return [...this.sandboxes].map(([name, tenant]) => ({ name, tenant }));
  }
  sandboxView(name: string): WorkspaceView | undefined {
    return this.sandboxes.has(name) ? { name, state: "ready", conditions: [], createdAt: AT } : undefined;
  }
  ownerOf(name: string) {
    return this.views.has(name) ? this.owners.get(name) : null;
  }
  async get(name: string) {
    return this.views.get(name);
  }
  async delete(name: string) {
    return this.views.delete(name);
  }
  async egress(name: string) {
    return this.views.has(name) ? (this.egressLists.get(name) ?? []) : undefined;
  }
  async setEgress(name: string, allow: string[]) {
    if (!this.views.has(name)) return false;
    this.egressLists.set(name, allow);
    return true;
  }
  async egressLog(name: string) {
    return this.views.has(name) ? [] : undefined;
  }
  subscribe(name: string, _listener: (e: WorkspaceEvent) => void) {
    return this.views.has(name) ? () => undefined : undefined;
  }
}

/** A conversation's stream as a ledger holds it (the ledger is shared: any owner reads the same).
 * `upTo`: the last offset this replica's Harness has yet; past it, its stream holds until the
 * client leaves (an owner going away mid-turn). */
class LedgerTurns {
  follows: Array<number | undefined> = [];
  constructor(
    readonly events: StreamEvent[],
    readonly upTo = Number.POSITIVE_INFINITY,
  ) {}
  async follow(
    _workspace: string,
    _iid: string,
    resume: { lastEventId?: number },
    signal: AbortSignal,
    onPage: (page: StreamPage) => Promise<void> | void,
  ) {
    this.follows.push(resume.lastEventId);
    const after = resume.lastEventId ?? -1;
    const events = this.events.filter((e) => e.offset > after && e.offset <= this.upTo);
    await onPage({ events, next: (events.at(-1)?.offset ?? after) + 1, idle: false });
    if (events.some((e) => e.kind === "end")) return;
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
  }
  async allowedFor(_workspace: string, iid: string) {
    return { allowed: ["read"], submissionId: `sub-of-${iid}` };
  }
}

/** An owner whose workspace moves before its stream's first page: follow waits for `move()`, then
 * throws as Turns does when it releases the workspace (turns.ts). */
class MovingTurns {
  follows = 0;
  #enter = () => undefined as void;
  #move = () => undefined as void;
  readonly entered = new Promise<void>((resolve) => (this.#enter = resolve));
  readonly #moved = new Promise<void>((resolve) => (this.#move = resolve));
  move() {
    this.#move();
  }
  async follow() {
    this.follows++;
    this.#enter();
    await this.#moved;
    throw new WorkspaceMoved("workspace ws-t moved to another Orchestrator replica while its stream was read");
  }
}

type Replica = {
  identity: string;
  server: Server;
  url: string;
  workspaces: MemoryWorkspaces;
  turns?: LedgerTurns | MovingTurns;
  logs: LogEntry[];
};
const replicas: Replica[] = [];

async function start(
  identity: string,
  table: Table,
  opts: {
    turns?: LedgerTurns | MovingTurns;
    tls?: ServingCertificate;
    peerTls?: () => string[];
    ownerWaitMs?: number;
    ownership?: Ownership;
  } = {},
): Promise<Replica> {
  const workspaces = new MemoryWorkspaces(identity);
  const logs: LogEntry[] = [];
  const server = await startOrchestratorServer(
    {
      workspaces,
      checkToken: apiTokenChecker([
        ...parseApiTokens(ADMIN),
        { token: TEAM_A, principal: { kind: "tenant", tenant: "team-a" } },
        { token: TEAM_B, principal: { kind: "tenant", tenant: "team-b" } },
      ]),
      checkSandboxToken: (name, token) => token === `sandbox-token-of-${name}`,
      metrics: () => "",
      log: (e) => logs.push(e),
      keepAliveMs: 60_000,
      ...(opts.turns ? { turns: opts.turns as unknown as TurnsApi } : {}),
      ...(opts.tls ? { tls: { cert: opts.tls.certPem, key: opts.tls.keyPem } } : {}),
      ...(opts.peerTls ? { peerTls: opts.peerTls } : {}),
      ...(opts.ownerWaitMs !== undefined ? { ownerWaitMs: opts.ownerWaitMs } : {}),
      ownership: opts.ownership ?? new TableOwnership(identity, table),
    },
    0,
    "127.0.0.1",
  );
  const url = `${opts.tls ? "https" : "http"}://127.0.0.1:${(server.address() as AddressInfo).port}`;
  table.urls.set(identity, url);
  const replica = { identity, server, url, workspaces, logs, ...(opts.turns ? { turns: opts.turns } : {}) };
  replicas.push(replica);
  return replica;
}

async function stop(replica: Replica) {
  replica.server.closeAllConnections();
  await new Promise((r) => replica.server.close(r));
}

afterEach(async () => {
  for (const r of replicas.splice(0)) if (r.server.listening) await stop(r);
});

/** The requests a replica answered (its access log), as `METHOD path status`. */
const served = (r: Replica) =>
  r.logs.filter((e) => e.method !== undefined).map((e) => `${String(e.method)} ${String(e.path)} ${String(e.status)}`);

type Answer = {
  status: number;
  headers: Record<string, unknown>;
  json: Record<string, unknown> & { error?: { code: string } };
};

async function call(
  replica: Replica,
  method: Dispatcher.HttpMethod,
  path: string,
  init: { token?: string; headers?: Record<string, string>; body?: unknown; dispatcher?: Dispatcher } = {},
): Promise<Answer> {
  const res = await request(`${replica.url}${path}`, {
    method,
    headers: {
      ...(init.token ? bearer(init.token) : {}),
      ...(init.body !== undefined ? { "content-type": "application/json" } : {}),
      ...init.headers,
    },
    ...(init.body !== undefined ? { body: JSON.stringify(init.body) } : {}),
    ...(init.dispatcher ? { dispatcher: init.dispatcher } : {}),
  });
  const text = await res.body.text();
  // No token in any replica's log line, ever.
  for (const r of replicas) expect(JSON.stringify(r.logs)).not.toContain(ADMIN);
  return { status: res.statusCode, headers: res.headers, json: text ? (JSON.parse(text) as Answer["json"]) : {} };
}

describe("a call for a workspace another replica owns", () => {
  it("is answered by its owner: reads, a body written, the tenant checked there", async () => {
    const table = new Table();
    const a = await start("orch-a", table);
    const b = await start("orch-b", table);
    b.workspaces.add("ws-b", "team-a");
    table.set("ws-b", "orch-b");

    const got = await call(a, "GET", "/v1/workspaces/ws-b", { token: TEAM_A });
    expect(got).toMatchObject({ status: 200, json: { name: "ws-b", state: "ready" } });
    // The body streamed on to the owner, and its answer back.
    const put = await call(a, "PUT", "/v1/workspaces/ws-b/egress", {
      token: ADMIN,
      body: { allow: ["example.com"] },
    });
    expect(put).toMatchObject({ status: 200, json: { allow: ["example.com"] } });
    expect(b.workspaces.egressLists.get("ws-b")).toEqual(["example.com"]);
    // Another tenant's: the owner answers the same 404 it answers for no workspace.
    expect(await call(a, "GET", "/v1/workspaces/ws-b", { token: TEAM_B })).toMatchObject({
      status: 404,
      json: { error: { code: "not_found" } },
    });
    expect(served(a)).toEqual([
      "GET /v1/workspaces/ws-b 200",
      "PUT /v1/workspaces/ws-b/egress 200",
      "GET /v1/workspaces/ws-b 404",
    ]);
    expect(served(b)).toEqual(served(a));
  });

  it("from a Harness is answered by the owner of the workspace its Sandbox token is for", async () => {
    const table = new Table();
    const a = await start("orch-a", table);
    const b = await start("orch-b", table, { turns: new LedgerTurns([]) });
    b.workspaces.add("ws-b");
    table.set("ws-b", "orch-b");
    const path = "/v1/sandbox/agents/ws-b.conv-1/allowed";
    expect(await call(a, "GET", path, { token: "sandbox-token-of-ws-b" })).toMatchObject({
      status: 200,
      json: { allowed: ["read"], submissionId: "sub-of-ws-b.conv-1" },
    });
    expect(served(b)).toEqual([`GET ${path} 200`]);
  });

  it("with no valid token is answered 401 where it arrived, never forwarded", async () => {
    const table = new Table();
    const a = await start("orch-a", table);
    const b = await start("orch-b", table, { turns: new LedgerTurns([]) });
    b.workspaces.add("ws-b");
    table.set("ws-b", "orch-b");
    expect(await call(a, "GET", "/v1/workspaces/ws-b", { token: "not-a-token" })).toMatchObject({ status: 401 });
    expect(await call(a, "GET", "/v1/workspaces/ws-b")).toMatchObject({ status: 401 });
    expect(
      await call(a, "GET", "/v1/sandbox/agents/ws-b.conv-1/allowed", { token: "sandbox-token-of-ws-other" }),
    ).toMatchObject({ status: 401, json: { error: { code: "unauthorized" } } });
    expect(served(b)).toEqual([]);
  });

  it("already forwarded, reaching a replica that does not own it, is refused not_owner, not forwarded again", async () => {
    const table = new Table();
    const a = await start("orch-a", table);
    const b = await start("orch-b", table);
    b.workspaces.add("ws-b");
    table.set("ws-b", "orch-b");
    const refused = await call(a, "GET", "/v1/workspaces/ws-b", {
      token: ADMIN,
      headers: { [FORWARDED_HEADER]: "orch-c" },
    });
    expect(refused).toMatchObject({ status: 503, json: { error: { code: "not_owner" } } });
    expect(refused.json.error!.code).toBe("not_owner");
    expect(served(b)).toEqual([]);
  });

  it("that meets not_owner (a stale table) looks again and is answered by the new owner", async () => {
    const table = new Table();
    const stale = new Table();
    const a = await start("orch-a", stale);
    const b = await start("orch-b", table);
    const c = await start("orch-c", table);
    stale.urls = table.urls;
    b.workspaces.add("ws-moved");
    table.set("ws-moved", "orch-b");
    stale.set("ws-moved", "orch-c"); // orch-a has not heard that it moved
    // Once orch-c has refused, orch-a's table catches up, as the Lease watch would.
    c.server.on("request", (_req, res) => res.on("close", () => stale.set("ws-moved", "orch-b")));
    expect(await call(a, "GET", "/v1/workspaces/ws-moved", { token: ADMIN })).toMatchObject({
      status: 200,
      json: { name: "ws-moved" },
    });
    expect(served(c)[0]).toBe("GET /v1/workspaces/ws-moved 503");
    expect(served(b)).toEqual(["GET /v1/workspaces/ws-moved 200"]);
  });

  it("while no replica owns it waits for one, or answers 503 unavailable with Retry-After", async () => {
    const table = new Table();
    const a = await start("orch-a", table, { ownerWaitMs: 20 });
    const moving = await call(a, "GET", "/v1/workspaces/ws-moving", { token: ADMIN });
    expect(moving).toMatchObject({ status: 503, json: { error: { code: "unavailable" } } });
    expect(moving.headers["retry-after"]).toMatch(/^\d+$/);

    const ownership = new TableOwnership("orch-w", table);
    const waiting = await start("orch-w", table, { ownerWaitMs: 60_000, ownership });
    const b = await start("orch-b", table);
    b.workspaces.add("ws-moving");
    ownership.onLook = () => table.set("ws-moving", "orch-b"); // its shard is taken meanwhile
    expect(await call(waiting, "GET", "/v1/workspaces/ws-moving", { token: ADMIN })).toMatchObject({
      status: 200,
      json: { name: "ws-moving" },
    });
    expect(served(b)).toEqual(["GET /v1/workspaces/ws-moving 200"]);
  });

  it("to create, at a replica holding no shard, goes to a peer that does (past one that refuses)", async () => {
    const table = new Table();
    const a = await start("orch-a", table);
    const gone = await start("orch-gone", table);
    const b = await start("orch-b", table);
    table.shards.set("orch-b", [0, 1]);
    table.shards.set("orch-gone", [2]);
    await stop(gone); // its member Lease not yet expired: still listed, refusing connections
    const created = await call(a, "POST", "/v1/workspaces", {
      token: TEAM_A,
      body: { image: "harness:1", repos: [{ slot: "app", url: "https://github.com/acme/app" }], branch: "feat" },
    });
    expect(created).toMatchObject({ status: 202, json: { name: "orch-b-new-1" } });
    expect(created.headers.location).toBe("/v1/workspaces/orch-b-new-1");
    expect(b.workspaces.owners.get("orch-b-new-1")).toBe("team-a");
    expect(served(b)).toEqual(["POST /v1/workspaces 202"]);
    // A replica holding a shard creates it itself.
    table.shards.set("orch-a", [3]);
    expect(
      await call(a, "POST", "/v1/workspaces", {
        token: TEAM_A,
        body: { image: "harness:1", repos: [{ slot: "app", url: "https://github.com/acme/app" }], branch: "feat" },
      }),
    ).toMatchObject({ status: 202, json: { name: "orch-a-new-1" } });
    expect(served(b)).toHaveLength(1);
  });
});

describe("a forward that may have reached the owner but had no answer", () => {
  /** A peer that reads each request whole, then drops the connection without a word. */
  async function dropping(table: Table, identity: string) {
    const seen: string[] = [];
    const server = createServer((req) => {
      req.resume();
      req.on("end", () => {
        seen.push(`${req.method} ${req.url}`);
        req.socket.destroy();
      });
    });
    await listen(server, 0, "127.0.0.1");
    table.urls.set(identity, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    dropped.push(server);
    return seen;
  }
  const dropped: Server[] = [];
  afterEach(async () => {
    for (const s of dropped.splice(0)) await new Promise((r) => s.close(r));
  });

  it("is sent again when the route may run twice: here, once this replica owns it, its body as sent", async () => {
    const table = new Table();
    const ownership = new TableOwnership("orch-a", table);
    const a = await start("orch-a", table, { ownership });
    const seen = await dropping(table, "orch-x");
    a.workspaces.add("ws-x");
    table.set("ws-x", "orch-x");
    ownership.onLook = () => table.set("ws-x", "orch-a"); // orch-x went away; orch-a took its shard
    expect(
      await call(a, "PUT", "/v1/workspaces/ws-x/egress", { token: ADMIN, body: { allow: ["example.org"] } }),
    ).toMatchObject({ status: 200, json: { allow: ["example.org"] } });
    expect(a.workspaces.egressLists.get("ws-x")).toEqual(["example.org"]);
    expect(seen).toEqual(["PUT /v1/workspaces/ws-x/egress"]);
  });

  it("is not sent again when the route may not run twice (a turn's submit): 503 unavailable", async () => {
    const table = new Table();
    const ownership = new TableOwnership("orch-a", table);
    const a = await start("orch-a", table, { ownership, turns: new LedgerTurns([]) });
    const seen = await dropping(table, "orch-x");
    a.workspaces.add("ws-x");
    table.set("ws-x", "orch-x");
    ownership.onLook = () => table.set("ws-x", "orch-a");
    const answer = await call(a, "POST", "/v1/workspaces/ws-x/turns", {
      token: ADMIN,
      body: { agent: "coder", text: "hello" },
    });
    expect(answer).toMatchObject({ status: 503, json: { error: { code: "unavailable" } } });
    expect(seen).toEqual(["POST /v1/workspaces/ws-x/turns"]);
  });
});

describe("the list across replicas", () => {
  it("merges each replica's own, lists a moving workspace from its Sandbox, and keeps tenants apart", async () => {
    const table = new Table();
    const a = await start("orch-a", table);
    const b = await start("orch-b", table);
    const c = await start("orch-c", table);
    a.workspaces.add("ws-a1", "team-a");
    b.workspaces.add("ws-b1", "team-a");
    b.workspaces.add("ws-b2", "team-b");
    c.workspaces.add("ws-c1", "team-a");
    await stop(c); // gone without a word: its workspaces are moving
    const sandboxes = new Map<string, string | undefined>([
      ["ws-a1", "team-a"],
      ["ws-b1", "team-a"],
      ["ws-b2", "team-b"],
      ["ws-c1", "team-a"],
      ["ws-moving-b", "team-b"],
    ]);
    a.workspaces.sandboxes = sandboxes;
    const names = (answer: Answer) => (answer.json.items as WorkspaceView[]).map((v) => v.name).sort();

    expect(names(await call(a, "GET", "/v1/workspaces", { token: TEAM_A }))).toEqual(["ws-a1", "ws-b1", "ws-c1"]);
    expect(names(await call(a, "GET", "/v1/workspaces", { token: TEAM_B }))).toEqual(["ws-b2", "ws-moving-b"]);
    expect(names(await call(a, "GET", "/v1/workspaces", { token: ADMIN }))).toEqual([
      "ws-a1",
      "ws-b1",
      "ws-b2",
      "ws-c1",
      "ws-moving-b",
    ]);
    // A peer's own list only: never asked of the others again.
    expect(
      names(await call(b, "GET", "/v1/workspaces", { token: ADMIN, headers: { [OWN_ONLY_HEADER]: "1" } })),
    ).toEqual(["ws-b1", "ws-b2"]);
    expect(served(b).filter((l) => l.startsWith("GET /v1/workspaces "))).toHaveLength(4);
  });
});

/** An SSE stream read frame by frame. */
async function* frames(body: AsyncIterable<Buffer>): AsyncGenerator<{ id?: string; event?: string; data?: string }> {
  let pending = "";
  for await (const chunk of body) {
    pending += chunk.toString("utf8");
    let end: number;
    while ((end = pending.indexOf("\n\n")) >= 0) {
      const frame = pending.slice(0, end);
      pending = pending.slice(end + 2);
      if (frame.startsWith(":")) continue;
      const field = (name: string) => frame.match(new RegExp(`^${name}: ?(.*)$`, "m"))?.[1];
      yield { id: field("id"), event: field("event"), data: field("data") };
    }
  }
}

const ev = (offset: number, kind: "turn" | "text" | "end"): StreamEvent =>
  kind === "turn"
    ? { kind, offset, at: AT, submissionId: "sub-1" }
    : kind === "end"
      ? { kind, offset, at: AT, submissionId: "sub-1", outcome: "completed" }
      : { kind, offset, at: AT, text: `text ${offset}` };

describe("event streams across replicas", () => {
  it("relays a turn's stream and resumes it at the new owner when the owner goes away: no repeat, no gap", async () => {
    const ledger = [ev(10, "turn"), ev(11, "text"), ev(12, "text"), ev(13, "text"), ev(14, "text"), ev(15, "end")];
    const table = new Table();
    const a = await start("orch-a", table);
    const b = await start("orch-b", table, { turns: new LedgerTurns(ledger, 12) });
    const c = await start("orch-c", table, { turns: new LedgerTurns(ledger) });
    b.workspaces.add("ws-t");
    c.workspaces.add("ws-t");
    table.set("ws-t", "orch-b");

    const res = await request(`${a.url}/v1/workspaces/ws-t/turns/ws-t.conv-1/events`, { headers: bearer(ADMIN) });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/event-stream/);
    const ids: string[] = [];
    for await (const f of frames(res.body)) {
      ids.push(f.id!);
      if (f.id === "12") {
        // The owner goes away mid-turn; its shard is taken by orch-c.
        table.set("ws-t", "orch-c");
        await stop(b);
      }
    }
    expect(ids).toEqual(["10", "11", "12", "13", "14", "15"]);
    expect((b.turns as LedgerTurns).follows).toEqual([undefined]);
    expect((c.turns as LedgerTurns).follows).toEqual([12]);
  });

  it("resumes a turn's stream here when this replica takes the workspace", async () => {
    const ledger = [ev(10, "turn"), ev(11, "text"), ev(12, "text"), ev(13, "end")];
    const table = new Table();
    const a = await start("orch-a", table, { turns: new LedgerTurns(ledger) });
    const b = await start("orch-b", table, { turns: new LedgerTurns(ledger, 11) });
    a.workspaces.add("ws-t");
    b.workspaces.add("ws-t");
    table.set("ws-t", "orch-b");
    const res = await request(`${a.url}/v1/workspaces/ws-t/turns/ws-t.conv-1/events`, { headers: bearer(ADMIN) });
    const ids: string[] = [];
    for await (const f of frames(res.body)) {
      ids.push(f.id!);
      if (f.id === "11") {
        table.set("ws-t", "orch-a");
        await stop(b);
      }
    }
    expect(ids).toEqual(["10", "11", "12", "13"]);
    expect((a.turns as LedgerTurns).follows).toEqual([11]);
  });

  it("serves a turn's stream cut by a move before its first page from the new owner: no 503 for the Machine", async () => {
    const ledger = [ev(10, "turn"), ev(11, "text"), ev(12, "end")];
    const table = new Table();
    const moving = new MovingTurns();
    const a = await start("orch-a", table, { turns: moving });
    const b = await start("orch-b", table, { turns: new LedgerTurns(ledger) });
    a.workspaces.add("ws-t");
    b.workspaces.add("ws-t");
    table.set("ws-t", "orch-a");
    const asked = request(`${a.url}/v1/workspaces/ws-t/turns/ws-t.conv-1/events`, {
      headers: { ...bearer(ADMIN), "last-event-id": "9" },
    });
    await moving.entered;
    table.set("ws-t", "orch-b");
    moving.move();
    const res = await asked;
    expect(res.statusCode).toBe(200);
    const ids: string[] = [];
    for await (const f of frames(res.body)) ids.push(f.id!);
    expect(ids).toEqual(["10", "11", "12"]);
    expect((b.turns as LedgerTurns).follows).toEqual([9]);
    expect(served(b)).toEqual(["GET /v1/workspaces/ws-t/turns/ws-t.conv-1/events 200"]);
  });

  it("answers not_owner to a relayed stream cut by a move before its first page: the relay finds the new owner", async () => {
    const ledger = [ev(10, "turn"), ev(11, "end")];
    const table = new Table();
    const moving = new MovingTurns();
    const a = await start("orch-a", table);
    const b = await start("orch-b", table, { turns: moving });
    const c = await start("orch-c", table, { turns: new LedgerTurns(ledger) });
    b.workspaces.add("ws-t");
    c.workspaces.add("ws-t");
    table.set("ws-t", "orch-b");
    const asked = request(`${a.url}/v1/workspaces/ws-t/turns/ws-t.conv-1/events`, { headers: bearer(ADMIN) });
    await moving.entered;
    table.set("ws-t", "orch-c");
    moving.move();
    const res = await asked;
    expect(res.statusCode).toBe(200);
    const ids: string[] = [];
    for await (const f of frames(res.body)) ids.push(f.id!);
    expect(ids).toEqual(["10", "11"]);
    expect(served(b)).toEqual(["GET /v1/workspaces/ws-t/turns/ws-t.conv-1/events 503"]);
    expect((c.turns as LedgerTurns).follows).toEqual([undefined]);
  });

  it("ends a workspace's event stream when its owner goes away (the client reconnects for a snapshot)", async () => {
    const table = new Table();
    const a = await start("orch-a", table);
    const b = await start("orch-b", table);
    b.workspaces.add("ws-e");
    table.set("ws-e", "orch-b");
    const res = await request(`${a.url}/v1/workspaces/ws-e/events`, { headers: bearer(ADMIN) });
    expect(res.statusCode).toBe(200);
    const seen: string[] = [];
    for await (const f of frames(res.body)) {
      seen.push(f.event!);
      await stop(b);
    }
    expect(seen).toEqual(["snapshot"]);
  });
});

describe("https peers", () => {
  const names = { dnsNames: ["jr2-orchestrator.jr2-system.svc"], ips: ["127.0.0.1"] };
  const ours = servingCertificate(names);
  const renewed = servingCertificate(names);
  const theirs = servingCertificate(names);

  it("are reached when they serve a certificate this replica serves (the current or the previous one)", async () => {
    const table = new Table();
    // orch-a has the renewed certificate already; orch-b still serves the previous one.
    const a = await start("orch-a", table, { tls: renewed, peerTls: () => [renewed.certPem, ours.certPem] });
    const b = await start("orch-b", table, { tls: ours, peerTls: () => [ours.certPem] });
    b.workspaces.add("ws-b");
    table.set("ws-b", "orch-b");
    const trusting = new Agent({ connect: { ca: renewed.caPem } });
    expect(await call(a, "GET", "/v1/workspaces/ws-b", { token: ADMIN, dispatcher: trusting })).toMatchObject({
      status: 200,
      json: { name: "ws-b" },
    });
    await trusting.close();
  });

  it("are refused when they serve another certificate: the call is not sent", async () => {
    const table = new Table();
    const a = await start("orch-a", table, { tls: ours, peerTls: () => [ours.certPem] });
    const c = await start("orch-c", table, { tls: theirs, peerTls: () => [theirs.certPem] });
    c.workspaces.add("ws-c");
    table.set("ws-c", "orch-c");
    const trusting = new Agent({ connect: { ca: ours.caPem } });
    expect(await call(a, "GET", "/v1/workspaces/ws-c", { token: ADMIN, dispatcher: trusting })).toMatchObject({
      status: 503,
      json: { error: { code: "unavailable" } },
    });
    await trusting.close();
    expect(served(c)).toEqual([]);
    expect(
      a.logs.some(
        (e) => e.level === "error" && /certificate is not one this Orchestrator serves/.test(String(e.message)),
      ),
    ).toBe(true);
  });
});
