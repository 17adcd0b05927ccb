// The client against a stand-in server (node:http): each route's method and path from the table,
// the bearer token (passed, or the environment's), errors as OrchestratorError with the API's code,
// both event streams read across split chunks (a CRLF split at every point) and keep-alives, a
// stream closed when the loop stops, a refused connection sent again within the reconnect
// window, and a call reset before any answer sent again when it is idempotent alone. `npm test` in
// this folder runs it.
/* eslint-disable @typescript-eslint/no-floating-promises -- node:test's describe and it answer promises its runner awaits */
import assert from "node:assert/strict";
import diagnostics from "node:diagnostics_channel";
import http from "node:http";
import net, { type AddressInfo, type Socket } from "node:net";
import { after, before, describe, it } from "node:test";
import {
  ERROR_STATUS,
  OrchestratorClient,
  OrchestratorError,
  ROUTES,
  TOKEN_ENV,
  parseFrame,
  sseFrames,
  type RouteId,
} from "../src/index";

type Seen = { method: string; url: string; auth?: string; body: string; lastEventId?: string };
type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

/** A server that records each request and answers with `handler`. */
async function standIn(
  handler: Handler,
): Promise<{ url: string; seen: Seen[]; closed: string[]; stop(): Promise<void> }> {
  const seen: Seen[] = [];
  const closed: string[] = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      seen.push({
        method: req.method!,
        url: req.url!,
        body,
        ...(req.headers.authorization ? { auth: req.headers.authorization } : {}),
        ...(req.headers["last-event-id"] ? { lastEventId: String(req.headers["last-event-id"]) } : {}),
      });
      res.on("close", () => closed.push(req.url!));
      handler(req, res, body);
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    closed,
    stop: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

const json = (res: http.ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

describe("OrchestratorClient", () => {
  let server: Awaited<ReturnType<typeof standIn>>;
  let client: OrchestratorClient;

  before(async () => {
    server = await standIn((req, res) => {
      if (req.url === "/healthz") return json(res, 200, { ok: true });
      if (req.url === "/metrics") return res.end("jr2_up 1\n");
      if (req.url?.includes("nosuch")) return json(res, 404, { error: { code: "not_found", message: "no workspace" } });
      if (req.url?.includes("broken")) return res.writeHead(500).end("oops");
      json(res, 200, { name: "ws-1" });
    });
    client = new OrchestratorClient({ url: server.url + "/", token: "tok-1" });
  });
  after(() => server.stop());

  it("calls every route of the table with its method and path, and the bearer token", async () => {
    const w = "ws 1";
    await client.createWorkspace({ image: "img", branch: "b" });
    await client.listWorkspaces();
    await client.workspace(w);
    await client.deleteWorkspace(w);
    await client.egress(w);
    await client.setEgress(w, ["a.example:443"]);
    await client.egressLog(w);
    await client.submitTurn(w, { agent: "coder", message: "hi" });
    await client.abort(w, "ws.1");
    await client.setAllowed(w, "ws.1", ["propose"]);
    await client.picks(w);
    await client.answer(w, "d/1", "yes");
    await client.createEffect(w, { id: "push-1", kind: "push", slot: "app" });
    await client.listEffects(w);
    await client.getEffect(w, "push-1", { waitSeconds: 30 });
    assert.equal(await client.healthy(), true);
    assert.equal(await client.metrics(), "jr2_up 1\n");
    await client.openapi();
    // The two streams and the HEAD of the health check are read below or by no Machine.
    const called = server.seen.map((s) => `${s.method} ${s.url}`);
    assert.deepEqual(called, [
      "POST /v1/workspaces",
      "GET /v1/workspaces",
      "GET /v1/workspaces/ws%201",
      "DELETE /v1/workspaces/ws%201",
      "GET /v1/workspaces/ws%201/egress",
      "PUT /v1/workspaces/ws%201/egress",
      "GET /v1/workspaces/ws%201/egress/log",
      "POST /v1/workspaces/ws%201/turns",
      "POST /v1/workspaces/ws%201/turns/ws.1/abort",
      "PUT /v1/workspaces/ws%201/turns/ws.1/allowed",
      "GET /v1/workspaces/ws%201/picks",
      "POST /v1/workspaces/ws%201/picks/d%2F1/answer",
      "POST /v1/workspaces/ws%201/effects",
      "GET /v1/workspaces/ws%201/effects",
      "GET /v1/workspaces/ws%201/effects/push-1?wait=30",
      "GET /healthz",
      "GET /metrics",
      "GET /v1/openapi.json",
    ]);
    const streamed: RouteId[] = ["workspaceEvents", "turnEvents", "healthzHead"];
    const covered = new Set(called.map((c) => c.split("?")[0]));
    for (const id of Object.keys(ROUTES) as RouteId[]) {
      if (streamed.includes(id)) continue;
      const pattern = new RegExp(`^${ROUTES[id].method} ${ROUTES[id].path.replace(/\{\w+\}/g, "[^/]+")}$`);
      assert.ok(
        [...covered].some((c) => pattern.test(c)),
        `route ${id} has a method`,
      );
    }
    assert.ok(server.seen.every((s) => s.auth === "Bearer tok-1"));
    // A Harness's routes are no Machine's: not in the table, no method; nor its error codes.
    assert.deepEqual(
      Object.values(ROUTES).filter((r) => r.path.includes("/sandbox/")),
      [],
    );
    assert.equal("takePick" in client, false);
    assert.equal("rate_limited" in ERROR_STATUS, false);
    assert.equal(ERROR_STATUS.not_found, 404);
    assert.deepEqual(JSON.parse(server.seen[0]!.body), { image: "img", branch: "b" });
    assert.deepEqual(JSON.parse(server.seen[5]!.body), { allow: ["a.example:443"] });
  });

  it("runs an Effect: creates it, then holds on its GET until it settles", async () => {
    const states = ["queued", "sent", "succeeded"];
    const effects = await standIn((_req, res) =>
      json(res, 200, { id: "e-1", kind: "http", idempotent: false, state: states.shift() ?? "succeeded" }),
    );
    try {
      const c = new OrchestratorClient({ url: effects.url, token: "tok-1" });
      const body = { id: "e-1", kind: "http" as const, method: "GET" as const, url: "https://forge.example/x" };
      const record = await c.runEffect("ws", body);
      assert.equal(record.state, "succeeded");
      assert.deepEqual(
        effects.seen.map((s) => `${s.method} ${s.url}`),
        [
          "POST /v1/workspaces/ws/effects",
          "GET /v1/workspaces/ws/effects/e-1?wait=60",
          "GET /v1/workspaces/ws/effects/e-1?wait=60",
        ],
      );
    } finally {
      await effects.stop();
    }
  });

  it("throws the API's error as an OrchestratorError with its status, code and message", async () => {
    const err = await client.workspace("nosuch").catch((e: unknown) => e);
    assert.ok(err instanceof OrchestratorError);
    assert.equal(err.status, 404);
    assert.equal(err.code, "not_found");
    assert.equal(err.message, "no workspace");
    const other = await client.workspace("broken").catch((e: unknown) => e);
    assert.ok(other instanceof OrchestratorError);
    assert.equal(other.status, 500);
    assert.equal(other.code, "http");
    assert.match(other.message, /HTTP 500: oops/);
  });

  it("reads the token from JR2_API_TOKEN when none is passed, and names the fix when there is none", async () => {
    const before = process.env[TOKEN_ENV];
    try {
      process.env[TOKEN_ENV] = "env-tok";
      const from = server.seen.length;
      await new OrchestratorClient({ url: server.url }).listWorkspaces();
      await new OrchestratorClient({ url: server.url, token: "passed" }).listWorkspaces();
      assert.deepEqual(
        server.seen.slice(from).map((s) => s.auth),
        ["Bearer env-tok", "Bearer passed"],
      );
      delete process.env[TOKEN_ENV];
      assert.throws(() => new OrchestratorClient({ url: server.url }), /set JR2_API_TOKEN/);
    } finally {
      if (before === undefined) delete process.env[TOKEN_ENV];
      else process.env[TOKEN_ENV] = before;
    }
  });

  it("refuses a CA for an http url, naming the fix", () => {
    assert.throws(
      () => new OrchestratorClient({ url: "http://127.0.0.1:1", token: "t", ca: "pem" }),
      /write https:\/\//,
    );
  });
});

describe("the event streams", () => {
  it("reads a workspace's snapshot and events across split chunks, CRLF and keep-alives, to the stream's end", async () => {
    const view = { name: "ws-1", state: "attaching", conditions: [] };
    const ready = { type: "transition", from: "attaching", to: "ready", at: "2026-12-06T12:00:00Z" };
    const gone = { type: "transition", from: "destroying", to: "destroyed", at: "2026-12-06T12:00:01Z" };
    const text =
      `id: 1\nevent: snapshot\ndata: ${JSON.stringify(view)}\n\n: keep-alive\n\n` +
      `id: 2\r\nevent: transition\r\ndata: ${JSON.stringify(ready)}\r\n\r\n` +
      `id: 3\nevent: transition\ndata: ${JSON.stringify(gone)}\n\n`;
    const server = await standIn((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      // Cut mid-frame and mid-character: the reader joins them.
      const bytes = Buffer.from(text);
      let at = 0;
      const next = () => {
        if (at >= bytes.length) return res.end();
        res.write(bytes.subarray(at, at + 7));
        at += 7;
        setTimeout(next, 1);
      };
      next();
    });
    try {
      const client = new OrchestratorClient({ url: server.url, token: "t" });
      const items = [];
      for await (const item of client.workspaceEvents("ws-1")) items.push(item);
      assert.deepEqual(items, [{ type: "snapshot", view }, ready, gone]);
      assert.equal(server.seen[0]!.url, "/v1/workspaces/ws-1/events");
    } finally {
      await server.stop();
    }
  });

  it("resumes a turn's stream after an offset, and closes it when the loop stops", async () => {
    const server = await standIn((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`id: 5\nevent: text\ndata: {"kind":"text","offset":5,"at":"t","text":"hi"}\n\n`);
      // Never ends by itself: the client's break must close it.
    });
    try {
      const client = new OrchestratorClient({ url: server.url, token: "t" });
      for await (const e of client.turnEvents("ws-1", "ws-1.a", { lastEventId: 4 })) {
        assert.deepEqual(e, { kind: "text", offset: 5, at: "t", text: "hi" });
        break;
      }
      assert.equal(server.seen[0]!.lastEventId, "4");
      for (let i = 0; i < 50 && server.closed.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(server.closed, ["/v1/workspaces/ws-1/turns/ws-1.a/events"]);
    } finally {
      await server.stop();
    }
  });

  it("throws a stream that fails after it began as code `stream`, and an error answer as its code", async () => {
    const server = await standIn((req, res) => {
      if (req.url!.includes("nosuch")) return json(res, 404, { error: { code: "not_found", message: "no such" } });
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`event: error\ndata: {"message":"the Harness went away"}\n\n`);
    });
    try {
      const client = new OrchestratorClient({ url: server.url, token: "t" });
      const read = async (name: string) => {
        for await (const e of client.turnEvents(name, `${name}.a`)) void e;
      };
      await assert.rejects(read("ws-1"), {
        name: "OrchestratorError",
        code: "stream",
        message: /the Harness went away/,
      });
      await assert.rejects(read("nosuch"), { name: "OrchestratorError", status: 404, code: "not_found" });
    } finally {
      await server.stop();
    }
  });

  it("reads a CRLF split between two chunks as one line end, at every cut of a recorded stream", async () => {
    // A CR ending one chunk and its LF starting the next must not make an empty line: that would
    // end the frame early and dispatch a half event.
    const recorded = Buffer.from(
      'id: 1\r\nevent: turn\r\ndata: {"kind":"turn","offset":1}\r\n\r\n' +
        ": keep-alive\r\n\r\n" +
        "id: 2\r\nevent: text\r\ndata: line one\r\ndata: line two\r\n\r\n" +
        'id: 3\revent: end\rdata: {"kind":"end"}\r\r',
    );
    const read = async (chunks: Buffer[]) => {
      const out = [];
      for await (const f of sseFrames(
        (async function* () {
          yield* chunks;
        })(),
      ))
        out.push(f);
      return out;
    };
    const whole = await read([recorded]);
    assert.deepEqual(whole, [
      { event: "turn", data: '{"kind":"turn","offset":1}', id: "1" },
      { event: "text", data: "line one\nline two", id: "2" },
      { event: "end", data: '{"kind":"end"}', id: "3" },
    ]);
    for (let cut = 1; cut < recorded.length; cut++)
      assert.deepEqual(await read([recorded.subarray(0, cut), recorded.subarray(cut)]), whole, `cut at byte ${cut}`);
    assert.deepEqual(await read([...recorded].map((b) => Buffer.from([b]))), whole);
  });

  it("parses a frame's fields and skips a comment-only one", () => {
    assert.deepEqual(parseFrame("id: 7\nevent: end\ndata: a\ndata: b"), { event: "end", data: "a\nb", id: "7" });
    assert.equal(parseFrame(": keep-alive"), undefined);
  });
});

describe("a restart", () => {
  it("sends a refused call again until the Orchestrator listens, and gives up past the window", async () => {
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const { port } = probe.address() as AddressInfo;
    await new Promise((r) => probe.close(r));

    const quick = new OrchestratorClient({ url: `http://127.0.0.1:${port}`, token: "t", reconnectWindowMs: 0 });
    await assert.rejects(quick.workspace("ws-1"), { code: "ECONNREFUSED" });

    // Each refusal counted as it happens (node's net.client.socket channel: every socket the client
    // opens, and its error), so the server comes up once the call has been refused, not after a
    // guessed while.
    let refused = 0;
    const onSocket = (message: unknown) =>
      (message as { socket: Socket }).socket.once("error", (err: NodeJS.ErrnoException & { port?: number }) => {
        if (err.code === "ECONNREFUSED" && err.port === port) refused++;
      });
    diagnostics.subscribe("net.client.socket", onSocket);
    const seen: string[] = [];
    const server = http.createServer((req, res) => {
      seen.push(req.url!);
      json(res, 200, { name: "ws-1", state: "ready", conditions: [] });
    });
    try {
      const client = new OrchestratorClient({ url: `http://127.0.0.1:${port}`, token: "t" });
      const view = client.workspace("ws-1");
      for (const deadline = Date.now() + 10_000; refused === 0; ) {
        if (Date.now() > deadline) throw new Error("the call was never refused within 10 s");
        await new Promise((r) => setTimeout(r, 5));
      }
      await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
      assert.equal((await view).state, "ready");
      assert.deepEqual(seen, ["/v1/workspaces/ws-1"]);
      assert.ok(refused >= 1);
    } finally {
      diagnostics.unsubscribe("net.client.socket", onSocket);
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

/** A server that reads each request's head and, for its first `drop` connections, ends the
 * connection before any answer byte (the first by a reset, the others by a close), as a replica
 * going away may (decision 0079); then answers `body`. */
async function hangup(
  drop: number,
  body: unknown,
): Promise<{ url: string; requests: string[]; stop(): Promise<void> }> {
  const requests: string[] = [];
  const text = JSON.stringify(body);
  const server = net.createServer((socket) => {
    let head = "";
    socket.on("data", (chunk: Buffer) => {
      if (head.includes("\r\n\r\n")) return;
      head += chunk.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      requests.push(head.split("\r\n", 1)[0]);
      const n = requests.length;
      if (n === 1) socket.resetAndDestroy();
      else if (n <= drop) socket.destroy();
      else
        socket.end(
          "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n" +
            `content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`,
        );
    });
    socket.on("error", () => {});
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, requests, stop: () => new Promise((r) => server.close(() => r())) };
}

describe("a rollout (decision 0079)", () => {
  it("sends an idempotent call reset before any answer again", async () => {
    const server = await hangup(2, { name: "ws-1", state: "ready", conditions: [] });
    try {
      const view = await new OrchestratorClient({ url: server.url, token: "t" }).workspace("ws-1");
      assert.equal(view.state, "ready");
      assert.deepEqual(server.requests, Array(3).fill("GET /v1/workspaces/ws-1 HTTP/1.1"));
    } finally {
      await server.stop();
    }
  });

  it("never sends a create reset before any answer again: the server may have received it", async () => {
    const server = await hangup(1, { name: "ws-1" });
    try {
      const client = new OrchestratorClient({ url: server.url, token: "t" });
      await assert.rejects(client.createWorkspace({ repo: "r" } as never), { code: "ECONNRESET" });
      assert.deepEqual(server.requests, ["POST /v1/workspaces HTTP/1.1"]);
    } finally {
      await server.stop();
    }
  });

  it("with no reconnect window, fails a reset call at once", async () => {
    const server = await hangup(1, { name: "ws-1", state: "ready", conditions: [] });
    try {
      const client = new OrchestratorClient({ url: server.url, token: "t", reconnectWindowMs: 0 });
      await assert.rejects(client.workspace("ws-1"), { code: "ECONNRESET" });
      assert.equal(server.requests.length, 1);
    } finally {
      await server.stop();
    }
  });
});
