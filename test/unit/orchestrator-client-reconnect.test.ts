// The client rides through an Orchestrator restart: while the connection is refused (nothing of the
// request was sent) it sends the call again, a create or a delete too, within its reconnect window;
// past the window, or for any other error, it gives up with the error.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { OrchestratorClient } from "../../clients/typescript/src";

/** A port nothing listens on (taken, then given back). */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

describe("OrchestratorClient across a restart", () => {
  it("sends a refused call again until the Orchestrator listens, and it arrives once", async () => {
    const port = await closedPort();
    const seen: string[] = [];
    const server = http.createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify(req.method === "DELETE" ? { name: "ws-1" } : { allow: ["a.example:443"] }));
    });
    const client = new OrchestratorClient({ url: `http://127.0.0.1:${port}`, token: "t" });
    // Sent while nothing listens; the server comes up once the first attempt has been refused.
    const egress = client.egress("ws-1");
    const deleted = client.deleteWorkspace("ws-1");
    await new Promise((r) => setTimeout(r, 50));
    await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
    try {
      expect(await egress).toEqual({ allow: ["a.example:443"] });
      expect(await deleted).toEqual({ name: "ws-1" });
      expect(seen.sort()).toEqual(["DELETE /v1/workspaces/ws-1", "GET /v1/workspaces/ws-1/egress"]);
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("gives up with the refusal once its reconnect window has passed", async () => {
    const client = new OrchestratorClient({
      url: `http://127.0.0.1:${await closedPort()}`,
      token: "t",
      reconnectWindowMs: 300,
    });
    await expect(client.egress("ws-1")).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });

  it("tries once with a window of 0", async () => {
    const client = new OrchestratorClient({
      url: `http://127.0.0.1:${await closedPort()}`,
      token: "t",
      reconnectWindowMs: 0,
    });
    await expect(client.egress("ws-1")).rejects.toMatchObject({ code: "ECONNREFUSED" });
  });
});
