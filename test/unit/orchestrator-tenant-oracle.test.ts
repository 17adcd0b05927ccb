// What a tenant's token learns about workspaces not its own (decisions 0042, 0049): a name this
// Orchestrator does not know (a labelled Sandbox it did not create included) is 404 on every route,
// and answers exactly as another tenant's workspace does, on every route of the table and every
// method, so no answer tells that a workspace exists. Over real HTTP (port 0), with turns and picks
// services that would serve any name they were asked for.
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { WorkspaceEvent, WorkspaceView } from "../../api/orchestrator-schemas";
import { startOrchestratorServer, type TurnsApi, type Workspaces } from "../../orchestrator/http/api-server";
import type { Picks } from "../../orchestrator/agents/pick-store";
import { apiTokenChecker, sandboxToken, sandboxTokenChecker } from "../../orchestrator/tokens";
import { PATHS } from "../../api/orchestrator-routes";

const ADMIN = "admin-token-for-the-oracle-tests";
const TENANT_A = "tenant-a-token-for-the-oracle-tests";
const TENANT_B = "tenant-b-token-for-the-oracle-tests";
const KEY = Buffer.alloc(32, 7);
const AT = "2026-03-01T12:00:00.000Z";

/** The registry's view: only the workspaces `adopt` names exist, each with its tenant. */
class KnownWorkspaces implements Workspaces {
  readonly owners = new Map<string, string | undefined>();
  adopt(name: string, tenant: string | undefined) {
    this.owners.set(name, tenant);
  }
  async create(): Promise<string> {
    throw new Error("not in these tests");
  }
  async list(): Promise<WorkspaceView[]> {
    return [...this.owners.keys()].map((name) => ({ name, state: "failed", conditions: [], createdAt: AT }));
  }
  ownerOf(name: string) {
    return this.owners.has(name) ? this.owners.get(name) : null;
  }
  async get(name: string): Promise<WorkspaceView | undefined> {
    return this.owners.has(name) ? { name, state: "failed", conditions: [], createdAt: AT } : undefined;
  }
  async delete(name: string) {
    return this.owners.has(name);
  }
  subscribe(name: string, _l: (e: WorkspaceEvent) => void) {
    return this.owners.has(name) ? () => undefined : undefined;
  }
  async egress(name: string) {
    return this.owners.has(name) ? [] : undefined;
  }
  async setEgress(name: string) {
    return this.owners.has(name);
  }
  async egressLog(name: string) {
    return this.owners.has(name) ? [] : undefined;
  }
}

/** Turns and picks that serve whatever name they are asked for, as the watch-backed services do for
 * any labelled Sandbox: every call is counted. */
function servingAnything() {
  const calls: string[] = [];
  const turns: TurnsApi = {
    submit: async (w) => (
      calls.push(`submit ${w}`),
      { iid: `${w}.c`, admission: { streamUrl: "/x", offset: 0, submissionId: "s1" } }
    ),
    follow: async (w, _iid, _resume, _signal, onPage) => {
      calls.push(`follow ${w}`);
      await onPage({ events: [], next: 0, idle: true });
    },
    abort: async (w) => (calls.push(`abort ${w}`), { aborted: true }),
    setAllowed: async (w, iid, allowed) => (calls.push(`setAllowed ${w}`), { iid, allowed }),
    allowedFor: async (w) => (calls.push(`allowedFor ${w}`), { allowed: [], submissionId: "s1" }),
  };
  const picks: Picks = {
    submit: async (w) => (
      calls.push(`pick ${w}`),
      { receipt: { outstanding: true, deliveryId: "d1" }, repeated: false }
    ),
    delivery: async (w) => (calls.push(`delivery ${w}`), { state: "outstanding" }),
    outstanding: async (w) => (calls.push(`outstanding ${w}`), []),
    answer: async (w) => void calls.push(`answer ${w}`),
  };
  return { calls, turns, picks };
}

let server: Server;
let base: string;
const workspaces = new KnownWorkspaces();
const services = servingAnything();

beforeAll(async () => {
  server = await startOrchestratorServer(
    {
      workspaces,
      checkToken: apiTokenChecker([
        { token: ADMIN, principal: { kind: "admin" } },
        { token: TENANT_A, principal: { kind: "tenant", tenant: "team-a" } },
        { token: TENANT_B, principal: { kind: "tenant", tenant: "team-b" } },
      ]),
      metrics: () => "",
      turns: services.turns,
      picks: services.picks,
      checkSandboxToken: sandboxTokenChecker(KEY),
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
});

type Answer = { status: number; allow: string | null; text: string };

async function call(method: string, path: string, token: string, body?: string): Promise<Answer> {
  const res = await fetch(base + path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
    },
    body,
  });
  return { status: res.status, allow: res.headers.get("allow"), text: await res.text() };
}

/** Every path of the table with `name` (and a conversation of it) filled in. */
const pathsFor = (name: string) =>
  PATHS.map((p) => p.template.replace("{name}", name).replace("{iid}", `${name}.c`).replace("{deliveryId}", "d1"));

const METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];
const bodyFor = (method: string) => (["POST", "PUT", "PATCH"].includes(method) ? "{}" : undefined);

describe("a name this Orchestrator does not know", () => {
  it("is 404 on every Machine route, for a tenant and an admin: nothing drives a Sandbox it did not create", async () => {
    const stranger = "ws-not-ours";
    for (const token of [TENANT_A, ADMIN])
      for (const entry of PATHS.filter((p) => p.template.includes("{name}")))
        for (const { method } of entry.routes) {
          const path = entry.template
            .replace("{name}", stranger)
            .replace("{iid}", `${stranger}.c`)
            .replace("{deliveryId}", "d1");
          const a = await call(method, path, token, bodyFor(method));
          expect([method, path, a.status]).toEqual([method, path, 404]);
        }
    expect(services.calls).toEqual([]);
  });

  it("is refused on the Sandbox routes, even with the token its name derives", async () => {
    const token = sandboxToken(KEY, "ws-not-ours");
    for (const entry of PATHS.filter((p) => p.auth === "sandbox"))
      for (const { method } of entry.routes) {
        const path = entry.template.replace("{iid}", "ws-not-ours.c").replace("{deliveryId}", "d1");
        expect([path, (await call(method, path, token, bodyFor(method))).status]).toEqual([path, 401]);
      }
    expect(services.calls).toEqual([]);
  });
});

describe("no existence oracle", () => {
  it("answers a name that does not exist and another tenant's workspace identically, on every route and method", async () => {
    const name = "ws-0racle01";
    const asked: Array<[string, string]> = [];
    for (const path of pathsFor(name)) for (const method of METHODS) asked.push([method, path]);
    // (i) the name does not exist.
    const none: Answer[] = [];
    for (const [method, path] of asked) none.push(await call(method, path, TENANT_B, bodyFor(method)));
    // (ii) the same name, now team-a's workspace.
    workspaces.adopt(name, "team-a");
    const theirs: Answer[] = [];
    for (const [method, path] of asked) theirs.push(await call(method, path, TENANT_B, bodyFor(method)));
    asked.forEach(([method, path], i) => expect([method, path, theirs[i]]).toEqual([method, path, none[i]]));
    // Every route that names the workspace was a 404 both times, and nothing was asked of the services.
    asked.forEach(([method, path], i) => {
      if (path.startsWith(`/v1/workspaces/${name}`))
        expect([method, path, none[i]!.status]).toEqual([method, path, 404]);
    });
    expect(services.calls).toEqual([]);
    // The owner is served: the walk above was not refusing everyone.
    expect((await call("GET", `/v1/workspaces/${name}/picks`, TENANT_A)).status).toBe(200);
    expect(services.calls).toEqual([`outstanding ${name}`]);
  });
});
