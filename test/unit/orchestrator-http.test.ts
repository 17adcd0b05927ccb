// The Orchestrator's HTTP API over real HTTP (port 0), against an in-memory Workspaces service.
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type CreateWorkspaceBody,
  type WorkspaceEvent,
  type WorkspaceState,
  type WorkspaceView,
} from "../../api/orchestrator-schemas";
import { HttpError } from "../../api/orchestrator-errors";
import { startOrchestratorServer, type LogEntry, type Workspaces } from "../../orchestrator/http/api-server";
import { apiTokenChecker, parseApiTokens } from "../../orchestrator/tokens";
import { ROUTES, pathFor, type Route, type RouteId } from "../../api/orchestrator-routes";

const TOKEN = "t0ken-for-the-http-tests-7f3a";
const TENANT_A = "tenant-a-token-for-the-http-tests";
const TENANT_B = "tenant-b-token-for-the-http-tests";
const AUTH = { authorization: `Bearer ${TOKEN}` };
const AT = "2026-03-01T12:00:00.000Z";

/** Workspaces in memory: the test moves them along with `emit`. */
class MemoryWorkspaces implements Workspaces {
  views = new Map<string, WorkspaceView>();
  listeners = new Map<string, Set<(e: WorkspaceEvent) => void>>();
  created: CreateWorkspaceBody[] = [];
  owners = new Map<string, string | undefined>();
  deleted: string[] = [];
  broken = false;
  private next = 1;

  async create(body: CreateWorkspaceBody, tenant?: string) {
    if (this.broken) throw new Error("the registry is broken");
    const refused = body.repos.find((r) => r.url.includes("evil"));
    if (refused) throw new HttpError("fence_refused", `the fence refuses url ${refused.url}`);
    this.created.push(body);
    const name = `ws-${this.next++}`;
    this.owners.set(name, tenant);
    this.views.set(name, { name, state: "placing", conditions: [], createdAt: AT });
    this.listeners.set(name, new Set());
    return name;
  }
  async list() {
    return [...this.views.values()];
  }
  ownerOf(name: string) {
    return this.views.has(name) ? this.owners.get(name) : null;
  }
  async get(name: string) {
    return this.views.get(name);
  }
  async delete(name: string) {
    if (!this.views.has(name)) return false;
    this.deleted.push(name);
    return true;
  }
  egressLists = new Map<string, string[]>();
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
  subscribe(name: string, listener: (e: WorkspaceEvent) => void) {
    const set = this.listeners.get(name);
    if (!set) return undefined;
    set.add(listener);
    return () => void set.delete(listener);
  }
  emit(name: string, e: WorkspaceEvent) {
    if (e.type === "transition") this.views.set(name, { ...this.views.get(name)!, state: e.to });
    for (const l of this.listeners.get(name) ?? []) l(e);
  }
  transition(name: string, from: WorkspaceState, to: WorkspaceState) {
    this.emit(name, { type: "transition", from, to, at: AT });
  }
}

let server: Server;
let base: string;
let workspaces: MemoryWorkspaces;
const logs: LogEntry[] = [];
const bodies: string[] = [];

beforeAll(async () => {
  workspaces = new MemoryWorkspaces();
  server = await startOrchestratorServer(
    {
      workspaces,
      checkToken: apiTokenChecker([
        ...parseApiTokens(`another-token\n${TOKEN}`),
        { token: TENANT_A, principal: { kind: "tenant", tenant: "team-a" } },
        { token: TENANT_B, principal: { kind: "tenant", tenant: "team-b" } },
      ]),
      metrics: () => '# HELP jr2_workspaces Workspaces by state\njr2_workspaces{state="ready"} 1\n',
      log: (e) => logs.push(e),
      keepAliveMs: 25,
    },
    0,
    "127.0.0.1",
  );
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  // No token in any log line or answer, ever.
  expect(JSON.stringify(logs)).not.toContain(TOKEN);
  expect(bodies.join("\n")).not.toContain(TOKEN);
});

/** The fields the tests read from an answer; which are present is what each test asserts. */
type Json = {
  name: string;
  error: { code: string; message: string };
  items: WorkspaceView[];
  openapi: string;
  paths: Record<string, Record<string, unknown>>;
};
type Answer = { status: number; headers: Headers; json: Json; text: string };

async function call(method: string, path: string, init: { body?: string; headers?: Record<string, string> } = {}) {
  const res = await fetch(`${base}${path}`, { method, headers: { ...AUTH, ...init.headers }, body: init.body });
  const text = await res.text();
  bodies.push(text);
  let json = {} as Json;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON (metrics, an empty HEAD answer)
  }
  return { status: res.status, headers: res.headers, json, text } as Answer;
}

const post = (body: unknown, headers: Record<string, string> = { "content-type": "application/json" }) =>
  call("POST", "/v1/workspaces", { body: typeof body === "string" ? body : JSON.stringify(body), headers });

const GOOD = { image: "harness:1", repos: [{ slot: "app", url: "https://github.com/acme/app" }], branch: "feat" };

describe("authentication", () => {
  it("serves /healthz without a token", async () => {
    const res = await fetch(`${base}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
  });

  it("answers HEAD /healthz as the GET, with no body (decision 0077)", async () => {
    const get = await fetch(`${base}/healthz`);
    const getText = await get.text();
    const head = await fetch(`${base}/healthz`, { method: "HEAD" });
    expect(head.status).toBe(get.status);
    expect(await head.text()).toBe("");
    expect(head.headers.get("content-type")).toBe(get.headers.get("content-type"));
    expect(head.headers.get("content-length")).toBe(String(Buffer.byteLength(getText)));
  });

  it.each([
    ["no header", {}],
    ["a wrong token", { authorization: "Bearer nope" }],
    ["another scheme", { authorization: `Basic ${TOKEN}` }],
    ["an empty bearer", { authorization: "Bearer " }],
  ])("answers 401 to %s, on every route", async (_what, headers) => {
    for (const [method, path] of [
      ["GET", "/v1/workspaces"],
      ["POST", "/v1/workspaces"],
      ["GET", "/v1/workspaces/ws-1"],
      ["DELETE", "/v1/workspaces/ws-1"],
      ["GET", "/v1/workspaces/ws-1/events"],
      ["GET", "/metrics"],
      ["GET", "/v1/openapi.json"],
      ["GET", "/nowhere"],
    ]) {
      const res = await fetch(`${base}${path}`, { method, headers });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
    }
  });

  it("accepts any configured token", async () => {
    const res = await fetch(`${base}/v1/workspaces`, { headers: { authorization: "Bearer another-token" } });
    expect(res.status).toBe(200);
    await res.text();
  });
});

describe("workspaces", () => {
  it("creates one: 202 with its name and where it lives", async () => {
    const a = await post(GOOD);
    expect(a.status).toBe(202);
    expect(a.json).toEqual({ name: expect.stringMatching(/^ws-\d+$/) });
    expect(a.headers.get("location")).toBe(`/v1/workspaces/${a.json.name}`);
    expect(workspaces.created.at(-1)).toEqual(GOOD);
  });

  it("lists them and shows one", async () => {
    const { json } = await post(GOOD);
    const list = await call("GET", "/v1/workspaces");
    expect(list.status).toBe(200);
    expect(list.json.items.map((v) => v.name)).toContain(json.name);
    const one = await call("GET", `/v1/workspaces/${json.name}`);
    expect(one.json).toEqual({ name: json.name, state: "placing", conditions: [], createdAt: AT });
  });

  it("deletes one: 202, and 404 for a stranger", async () => {
    const { json } = await post(GOOD);
    const del = await call("DELETE", `/v1/workspaces/${json.name}`);
    expect(del.status).toBe(202);
    expect(workspaces.deleted).toContain(json.name);
    expect((await call("DELETE", "/v1/workspaces/ws-404")).status).toBe(404);
  });

  it("answers 404 for an unknown workspace and for a name no workspace can have", async () => {
    const a = await call("GET", "/v1/workspaces/ws-404");
    expect(a.status).toBe(404);
    expect(a.json).toEqual({ error: { code: "not_found", message: 'no workspace "ws-404"' } });
    for (const path of [
      "/v1/workspaces/WS-1",
      "/v1/workspaces/%E0%A4%A",
      "/v1/workspaces/a/b",
      "/v1/workspaces/..%2Fx",
    ]) {
      expect((await call("GET", path)).status).toBe(404);
    }
  });

  it("answers 405 with Allow for a method a route does not take", async () => {
    const a = await call("PUT", "/v1/workspaces");
    expect(a.status).toBe(405);
    expect(a.headers.get("allow")).toBe("GET, POST");
    expect(a.json.error.code).toBe("method_not_allowed");
    expect((await call("POST", "/v1/workspaces/ws-1")).headers.get("allow")).toBe("GET, DELETE");
    expect((await call("POST", "/healthz")).status).toBe(405);
    expect((await call("DELETE", "/metrics")).status).toBe(405);
  });

  it("routes every route of the table to its handler, by its auth", async () => {
    // No such workspace: each handler answers at once (an event stream of a live one would stay open).
    const sample = { name: "ws-none", iid: "ws-none.c", deliveryId: "d1" };
    for (const [id, r] of Object.entries(ROUTES) as Array<[RouteId, Route]>) {
      const path = pathFor(id, sample as never);
      const body = r.method === "POST" || r.method === "PUT" ? "{}" : undefined;
      const a = await call(r.method, path, body ? { body, headers: { "content-type": "application/json" } } : {});
      expect([id, a.status]).not.toEqual([id, 405]);
      if (r.method !== "HEAD")
        expect([id, a.json?.error?.message ?? ""]).not.toEqual([id, expect.stringMatching(/^no route/)]);
      // A Harness's route asks for the Sandbox token (none is valid here); the others pass the API token.
      if (r.auth === "sandbox") expect([id, a.json.error.message]).toEqual([id, "a valid Sandbox token is required"]);
      else expect([id, a.status]).not.toEqual([id, 401]);
    }
  });

  it("answers 404 for an unknown route", async () => {
    const a = await call("GET", "/v2/workspaces");
    expect(a.status).toBe(404);
    expect(a.json.error.code).toBe("not_found");
  });
});

// Decision 0051: the routes; the list's meaning is the egress point's (test/node/deployed.test.ts).
describe("a workspace's egress list", () => {
  const json = { "content-type": "application/json" };
  it("is read, replaced whole and read again; its log is the egress point's entries", async () => {
    const name = (await post(GOOD)).json.name;
    expect((await call("GET", `/v1/workspaces/${name}/egress`)).text).toBe(JSON.stringify({ allow: [] }));
    const allow = ["api.example.com", "*.pypi.org:443", "[2001:db8::1]:8443"];
    const put = await call("PUT", `/v1/workspaces/${name}/egress`, { body: JSON.stringify({ allow }), headers: json });
    expect([put.status, put.text]).toEqual([200, JSON.stringify({ allow })]);
    expect(workspaces.egressLists.get(name)).toEqual(allow);
    expect((await call("GET", `/v1/workspaces/${name}/egress`)).text).toBe(JSON.stringify({ allow }));
    expect((await call("GET", `/v1/workspaces/${name}/egress/log`)).text).toBe(JSON.stringify({ entries: [] }));
  });

  it("refuses an entry that is no host rule, naming its index and the fix, and keeps the list it had", async () => {
    const name = (await post(GOOD)).json.name;
    const bad = await call("PUT", `/v1/workspaces/${name}/egress`, {
      body: JSON.stringify({ allow: ["api.example.com", "https://evil.example/path"] }),
      headers: json,
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe("invalid");
    expect(bad.json.error.message).toMatch(/^allow\.1: /);
    expect(workspaces.egressLists.get(name)).toBeUndefined();
    const missing = await call("PUT", `/v1/workspaces/${name}/egress`, { body: "{}", headers: json });
    expect([missing.status, missing.json.error.message]).toEqual([400, expect.stringMatching(/^allow: /)]);
  });

  it("answers 404 for a workspace that does not exist, on all three routes", async () => {
    for (const [method, path] of [
      ["GET", "/v1/workspaces/ws-none/egress"],
      ["PUT", "/v1/workspaces/ws-none/egress"],
      ["GET", "/v1/workspaces/ws-none/egress/log"],
    ]) {
      const r = await call(method, path, method === "PUT" ? { body: '{"allow":[]}', headers: json } : {});
      expect([method, path, r.status]).toEqual([method, path, 404]);
    }
  });
});

describe("tenants: each Machine sees only its own workspaces", () => {
  const as = (token: string) => ({ headers: { authorization: `Bearer ${token}`, "content-type": "application/json" } });
  const create = async (token: string) => {
    const r = await call("POST", "/v1/workspaces", {
      body: JSON.stringify({ image: "h:1", branch: "b" }),
      ...as(token),
    });
    expect(r.status).toBe(202);
    return r.json.name as string;
  };

  it("answers another tenant's workspace 404 on every route, as if it did not exist; the owner and an admin see it", async () => {
    const mine = await create(TENANT_A);
    const unknown = "ws-nobody";
    const routes: Array<[string, string]> = [
      ["GET", `/v1/workspaces/${mine}`],
      ["DELETE", `/v1/workspaces/${mine}`],
      ["GET", `/v1/workspaces/${mine}/events`],
      ["POST", `/v1/workspaces/${mine}/turns`],
      ["GET", `/v1/workspaces/${mine}/turns/${mine}.c/events`],
      ["POST", `/v1/workspaces/${mine}/turns/${mine}.c/abort`],
      ["PUT", `/v1/workspaces/${mine}/turns/${mine}.c/allowed`],
      ["GET", `/v1/workspaces/${mine}/picks`],
      ["POST", `/v1/workspaces/${mine}/picks/d1/answer`],
      ["POST", `/v1/workspaces/${mine}/effects`],
      ["GET", `/v1/workspaces/${mine}/effects`],
      ["GET", `/v1/workspaces/${mine}/effects/push-1`],
    ];
    for (const [method, path] of routes) {
      const theirs = await call(method, path, { body: method === "GET" ? undefined : "{}", ...as(TENANT_B) });
      const none = await call(method, path.replaceAll(mine, unknown), {
        body: method === "GET" ? undefined : "{}",
        ...as(TENANT_B),
      });
      expect([method, path, theirs.status, theirs.json]).toEqual([
        method,
        path,
        404,
        { error: { code: "not_found", message: `no workspace "${mine}"` } },
      ]);
      expect(none.status).toBe(404);
    }
    expect(workspaces.deleted).not.toContain(mine);
    // The owner and an admin see it.
    expect((await call("GET", `/v1/workspaces/${mine}`, as(TENANT_A))).status).toBe(200);
    expect((await call("GET", `/v1/workspaces/${mine}`, as(TOKEN))).status).toBe(200);
  });

  it("lists a tenant's own workspaces alone, and every workspace to an admin", async () => {
    const a = await create(TENANT_A);
    const b = await create(TENANT_B);
    const names = async (token: string) =>
      ((await call("GET", "/v1/workspaces", as(token))).json.items as WorkspaceView[]).map((v) => v.name);
    expect(await names(TENANT_A)).toContain(a);
    expect(await names(TENANT_A)).not.toContain(b);
    expect(await names(TENANT_B)).toEqual([b]);
    expect(await names(TOKEN)).toEqual(expect.arrayContaining([a, b]));
    expect(workspaces.owners.get(a)).toBe("team-a");
  });

  it("keeps the metrics an admin's", async () => {
    expect((await call("GET", "/metrics", as(TENANT_A))).status).toBe(403);
    expect((await call("GET", "/metrics", as(TOKEN))).status).toBe(200);
  });
});

describe("bad input", () => {
  it("400 naming the field path", async () => {
    const a = await post({ ...GOOD, repos: [{ slot: "a/b", url: "https://github.com/acme/app" }] });
    expect(a.status).toBe(400);
    expect(a.json).toEqual({
      error: {
        code: "invalid",
        message:
          "repos[0].slot: must not contain '/' (a slot is one directory under /work): name the slot with letters, digits, '-', '_' or '.', e.g. app",
      },
    });
    expect((await post({ image: "h" })).json.error.message).toBe("branch: Required");
  });

  it("400 for a body that is not JSON, or no body at all", async () => {
    expect((await post("{not json")).json).toEqual({ error: { code: "invalid", message: "body: not valid JSON" } });
    expect((await post("")).status).toBe(400);
  });

  it("415 for a body that says it is not JSON", async () => {
    expect((await post(JSON.stringify(GOOD), { "content-type": "text/plain" })).status).toBe(415);
  });

  it("accepts a JSON content type with parameters, or none", async () => {
    expect((await post(GOOD, { "content-type": "application/json; charset=utf-8" })).status).toBe(202);
    const res = await fetch(`${base}/v1/workspaces`, {
      method: "POST",
      headers: AUTH,
      body: new Blob([JSON.stringify(GOOD)]),
    });
    expect(res.status).toBe(202);
    await res.text();
  });

  it("413 for a body over 1 MB", async () => {
    const a = await post({ ...GOOD, image: "x".repeat(1024 * 1024) });
    expect(a.status).toBe(413);
    expect(a.json.error.code).toBe("too_large");
  });

  it("the service's own refusal, with its status and code (the fence)", async () => {
    const a = await post({ ...GOOD, repos: [{ slot: "x", url: "https://evil.example/x" }] });
    expect(a.status).toBe(403);
    expect(a.json).toEqual({
      error: { code: "fence_refused", message: "the fence refuses url https://evil.example/x" },
    });
  });

  it("500 for a fault of the service, logged, and the server serves on", async () => {
    workspaces.broken = true;
    try {
      const a = await post(GOOD);
      expect(a.status).toBe(500);
      expect(a.json).toEqual({ error: { code: "internal", message: "internal error" } });
    } finally {
      workspaces.broken = false;
    }
    expect(logs.some((l) => l.level === "error" && l.message === "the registry is broken")).toBe(true);
    expect((await post(GOOD)).status).toBe(202);
  });

  it("logs one line per request: method, path without query, status", async () => {
    await call("GET", "/v1/workspaces?token=secret-in-query");
    const line = logs.filter((l) => l.path === "/v1/workspaces" && l.method === "GET").at(-1);
    expect(line).toMatchObject({ method: "GET", path: "/v1/workspaces", status: 200 });
    expect(JSON.stringify(logs)).not.toContain("secret-in-query");
  });
});

describe("metrics and the OpenAPI document", () => {
  it("serves the metrics text", async () => {
    const a = await call("GET", "/metrics");
    expect(a.status).toBe(200);
    expect(a.headers.get("content-type")).toContain("text/plain");
    expect(a.text).toContain('jr2_workspaces{state="ready"} 1');
  });

  it("serves the OpenAPI document", async () => {
    const a = await call("GET", "/v1/openapi.json");
    expect(a.status).toBe(200);
    expect(a.json.openapi).toBe("3.1.0");
    expect(a.json.paths["/v1/workspaces"].post).toBeDefined();
  });
});

/** An SSE stream's text as it arrives. */
async function stream(name: string, signal?: AbortSignal) {
  const res = await fetch(`${base}/v1/workspaces/${name}/events`, { headers: AUTH, signal });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let done = false;
  /** Reads until `until(text)` holds or the stream ends. */
  const read = async (until: (t: string) => boolean) => {
    while (!done && !until(text)) {
      const chunk = await reader.read();
      if (chunk.done) done = true;
      else text += decoder.decode(chunk.value, { stream: true });
    }
    return text;
  };
  return { res, read, ended: () => done, cancel: () => reader.cancel() };
}

const frames = (text: string) =>
  text
    .split("\n\n")
    .filter((f) => f.startsWith("id:"))
    .map((f) => {
      const [id, event, data] = f.split("\n");
      return { id: id.slice(4), event: event.slice(7), data: JSON.parse(data.slice(6)) };
    });

describe("events (Server-Sent Events)", () => {
  it("sends the snapshot, then every transition and wait, and ends after a final state", async () => {
    const { json } = await post(GOOD);
    const s = await stream(json.name);
    expect(s.res.status).toBe(200);
    expect(s.res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    expect(s.res.headers.get("cache-control")).toContain("no-cache");
    await s.read((t) => t.includes("event: snapshot"));
    workspaces.emit(json.name, { type: "wait", wait: { kind: "node", message: "0/3 nodes" }, at: AT });
    workspaces.transition(json.name, "placing", "provisioning");
    workspaces.emit(json.name, { type: "renewed", count: 1, at: AT });
    workspaces.transition(json.name, "provisioning", "failed");
    const text = await s.read(() => false);
    expect(s.ended()).toBe(true);
    expect(frames(text)).toEqual([
      { id: "1", event: "snapshot", data: { name: json.name, state: "placing", conditions: [], createdAt: AT } },
      { id: "2", event: "wait", data: { type: "wait", wait: { kind: "node", message: "0/3 nodes" }, at: AT } },
      { id: "3", event: "transition", data: { type: "transition", from: "placing", to: "provisioning", at: AT } },
      { id: "4", event: "renewed", data: { type: "renewed", count: 1, at: AT } },
      { id: "5", event: "transition", data: { type: "transition", from: "provisioning", to: "failed", at: AT } },
    ]);
    expect(workspaces.listeners.get(json.name)!.size).toBe(0);
  });

  it("keeps an idle stream alive with comments", async () => {
    const { json } = await post(GOOD);
    const s = await stream(json.name);
    const text = await s.read((t) => t.includes(": keep-alive\n\n"));
    expect(text).toContain(": keep-alive\n\n");
    await s.cancel();
  });

  it("unsubscribes when the client goes away", async () => {
    const { json } = await post(GOOD);
    const abort = new AbortController();
    const s = await stream(json.name, abort.signal);
    await s.read((t) => t.includes("event: snapshot"));
    expect(workspaces.listeners.get(json.name)!.size).toBe(1);
    abort.abort();
    for (let i = 0; i < 100 && workspaces.listeners.get(json.name)!.size > 0; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(workspaces.listeners.get(json.name)!.size).toBe(0);
  });

  it("a workspace already ended gets its snapshot and the end", async () => {
    const { json } = await post(GOOD);
    workspaces.transition(json.name, "placing", "destroyed");
    const s = await stream(json.name);
    const text = await s.read(() => false);
    expect(frames(text).map((f) => f.event)).toEqual(["snapshot"]);
    expect(frames(text)[0].data.state).toBe("destroyed");
  });

  it("404 for an unknown workspace, before any stream", async () => {
    const res = await fetch(`${base}/v1/workspaces/ws-404/events`, { headers: AUTH });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("not_found");
  });
});
