// The Orchestrator's API over TLS (decision 0047): given a certificate, the server speaks https
// alone, and the typed client reaches it at an https url with the CA it is given.
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { servingCertificate } from "../../lib/serving-certificate";
import { startOrchestratorServer, type Workspaces } from "../../orchestrator/http/api-server";
import { OrchestratorClient } from "../../clients/typescript/src";
import { apiTokenChecker, parseApiTokens } from "../../orchestrator/tokens";

const TOKEN = "tls-test-token-0123456789abcdef";
const view = { name: "ws-1", state: "ready" as const, conditions: [], createdAt: "2026-03-01T12:00:00.000Z" };
const workspaces: Workspaces = {
  create: async () => "ws-1",
  list: async () => [view],
  ownerOf: (name: string) => (name === "ws-1" ? undefined : null),
  get: async (name: string) => (name === "ws-1" ? view : undefined),
  delete: async () => true,
  subscribe: () => () => undefined,
} as unknown as Workspaces;

const pair = servingCertificate({ dnsNames: ["jr2-orchestrator.jr2-system.svc"], ips: ["127.0.0.1"] });
let server: Server;
let port: number;

beforeAll(async () => {
  server = await startOrchestratorServer(
    {
      workspaces,
      checkToken: apiTokenChecker(parseApiTokens(TOKEN)),
      metrics: () => "",
      tls: { cert: pair.certPem, key: pair.keyPem },
    },
    0,
    "127.0.0.1",
  );
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe("the Orchestrator's API over TLS", () => {
  it("answers the typed client at an https url trusting the given CA", async () => {
    const client = new OrchestratorClient({ url: `https://127.0.0.1:${port}`, token: TOKEN, ca: pair.caPem });
    expect((await client.workspace("ws-1")).state).toBe("ready");
  });

  it("is refused by a client that does not trust its CA, and does not speak plain http", async () => {
    const untrusting = new OrchestratorClient({ url: `https://127.0.0.1:${port}`, token: TOKEN });
    await expect(untrusting.workspace("ws-1")).rejects.toThrow(/certificate/i);
    await expect(request(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
  });

  it("refuses a CA for an http url, naming the fix", () => {
    expect(() => new OrchestratorClient({ url: "http://127.0.0.1:1", token: TOKEN, ca: pair.caPem })).toThrow(
      /a CA is for an https:\/\/ url; write https:\/\//,
    );
  });
});
