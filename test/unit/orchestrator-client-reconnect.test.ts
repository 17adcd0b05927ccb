// The client rides through an Orchestrator restart: while the connection is refused (nothing of the
// request was sent) it sends the call again, a create or a delete too, within its reconnect window;
// past the window, or for any other error, it gives up with the error. Each refusal is counted as
// it happens (node's net.client.socket channel: every socket the client opens, and its error), so
// the server comes up once the calls have been refused, never after a guessed while.
import diagnostics from "node:diagnostics_channel";
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { OrchestratorClient } from "../../clients/typescript/src";
import { eventually } from "../support/eventually";

/** A port nothing listens on (taken, then given back). */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

/** The connections to `port` refused (ECONNREFUSED) from now until `stop`, counted as each fails. */
function refusals(port: number) {
  let count = 0;
  const onSocket = (message: unknown) =>
    (message as { socket: Socket }).socket.once("error", (err: NodeJS.ErrnoException & { port?: number }) => {
      if (err.code === "ECONNREFUSED" && err.port === port) count++;
    });
  diagnostics.subscribe("net.client.socket", onSocket);
  return { count: () => count, stop: () => diagnostics.unsubscribe("net.client.socket", onSocket) };
}

describe("OrchestratorClient across a restart", () => {
  it("sends a refused call again until the Orchestrator listens, and it arrives once", async () => {
    const port = await closedPort();
    const refused = refusals(port);
    const seen: string[] = [];
    const server = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(req.method === "DELETE" ? { name: "ws-1" } : { allow: ["a.example:443"] }));
    });
    const client = new OrchestratorClient({ url: `http://127.0.0.1:${port}`, token: "t" });
    try {
      // Sent while nothing listens; the server comes up once both calls have been refused.
      const egress = client.egress("ws-1");
      const deleted = client.deleteWorkspace("ws-1");
      await eventually("both calls refused", () => (refused.count() >= 2 ? true : undefined));
      await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
      expect(await egress).toEqual({ allow: ["a.example:443"] });
      expect(await deleted).toEqual({ name: "ws-1" });
      expect(seen.sort()).toEqual(["DELETE /v1/workspaces/ws-1", "GET /v1/workspaces/ws-1/egress"]);
      expect(refused.count()).toBeGreaterThanOrEqual(2);
    } finally {
      refused.stop();
      await new Promise((r) => server.close(r));
    }
  });

  it("gives up with the refusal once its reconnect window has passed, having tried again within it", async () => {
    const port = await closedPort();
    const refused = refusals(port);
    const client = new OrchestratorClient({ url: `http://127.0.0.1:${port}`, token: "t", reconnectWindowMs: 1_000 });
    try {
      await expect(client.egress("ws-1")).rejects.toMatchObject({ code: "ECONNREFUSED" });
      // About 0, 100, 300 and 700 ms in (backoff 100, 200, 400): the next wait (800 ms) would pass
      // the window. However slow this machine, the second comes well within it.
      expect(refused.count()).toBeGreaterThanOrEqual(2);
    } finally {
      refused.stop();
    }
  });

  it("tries once with a window of 0", async () => {
    const port = await closedPort();
    const refused = refusals(port);
    const client = new OrchestratorClient({ url: `http://127.0.0.1:${port}`, token: "t", reconnectWindowMs: 0 });
    try {
      await expect(client.egress("ws-1")).rejects.toMatchObject({ code: "ECONNREFUSED" });
      expect(refused.count()).toBe(1);
    } finally {
      refused.stop();
    }
  });
});
