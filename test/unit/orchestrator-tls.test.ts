// The Orchestrator's API over TLS (decision 0047): given a certificate, the server speaks https
// alone, and the typed clients (TypeScript and Python, decision 0061) reach it at an https url
// with the CA they are given.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { servingCertificate } from "../../lib/serving-certificate";
import { startOrchestratorServer, type Workspaces } from "../../orchestrator/http/api-server";
import { OrchestratorClient } from "../../clients/typescript/src";
import { apiTokenChecker, parseApiTokens } from "../../orchestrator/tokens";
import { python3 } from "../support/python3";

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

  it("answers the Python client given the CA file, and refuses it without", async () => {
    const dir = mkdtempSync(join(tmpdir(), "jr2-tls-py-"));
    const caFile = join(dir, "ca.pem");
    writeFileSync(caFile, pair.caPem);
    const script = `
import json, ssl, sys
from jr2_orchestrator import OrchestratorClient
url, token, ca_file = sys.argv[1:4]
out = {"state": OrchestratorClient(url, token, ca_file=ca_file).workspace("ws-1")["state"]}
try:
    OrchestratorClient(url, token, reconnect_window=0).workspace("ws-1")
except ssl.SSLCertVerificationError as err:
    out["untrusted"] = err.reason
print(json.dumps(out))
`;
    try {
      // Spawned, not run synchronously: the server answering it is in this process.
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn(python3(), ["-c", script, `https://127.0.0.1:${port}`, TOKEN, caFile], {
          env: {
            ...process.env,
            PYTHONPATH: join(__dirname, "..", "..", "clients", "python"),
            PYTHONDONTWRITEBYTECODE: "1",
          },
        });
        let stdout = "";
        let stderr = "";
        child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
        child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
        child.on("error", reject);
        child.on("close", (code) =>
          code === 0 ? resolve(stdout) : reject(new Error(`python3 exited ${code}: ${stderr}`)),
        );
      });
      expect(JSON.parse(out)).toEqual({ state: "ready", untrusted: "CERTIFICATE_VERIFY_FAILED" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
