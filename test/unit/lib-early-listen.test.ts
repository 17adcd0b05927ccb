// lib/early-listen.ts: the port is bound at once, a request made before the handler exists waits
// and is answered by it, and later requests go straight to it.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { listenEarly, type EarlyServer } from "../../lib/early-listen";

let early: EarlyServer | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (early ? early.server.close(() => resolve()) : resolve()));
  early = undefined;
});

const get = (port: number, path: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    http
      .get({ host: "127.0.0.1", port, path, agent: false }, (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (c: string) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on("error", reject);
  });

describe("listenEarly", () => {
  it("binds the port before any handler exists", async () => {
    early = await listenEarly(0, "127.0.0.1");
    expect(early.server.listening).toBe(true);
    expect((early.server.address() as AddressInfo).port).toBeGreaterThan(0);
  });

  it("holds a request made before serve() and answers it with the handler, then serves the next directly", async () => {
    early = await listenEarly(0, "127.0.0.1");
    const port = (early.server.address() as AddressInfo).port;
    const arrived = new Promise<void>((resolve) => early!.server.once("request", () => resolve()));
    let answered = false;
    const first = get(port, "/held").then((r) => ((answered = true), r));
    await arrived;
    // The request is in the server, unanswered: nothing serves it until the handler is given.
    await new Promise((r) => setImmediate(r));
    expect(answered).toBe(false);
    const seen: string[] = [];
    early.serve((req, res) => {
      seen.push(req.url ?? "");
      res.end(`served ${req.url}`);
    });
    await expect(first).resolves.toEqual({ status: 200, body: "served /held" });
    await expect(get(port, "/later")).resolves.toEqual({ status: 200, body: "served /later" });
    expect(seen).toEqual(["/held", "/later"]);
  });
});
