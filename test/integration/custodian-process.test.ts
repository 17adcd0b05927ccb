// `npm run custodian` as a process (custodian/main.ts): a bad config ends it at once, naming the
// field and the fix; a good one serves on loopback until SIGTERM. Everything the process wrote to
// stdout and stderr is captured and grepped for every secret, the token and each Stand-in.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import {
  call,
  closedPort,
  fakeUpstream,
  json,
  newStandIn,
  custodianEnv,
  secretValue,
  sleep,
  writeLayout,
  type Layout,
} from "../support/custodian-fixtures";

const ROOT = join(__dirname, "..", "..");
const TSX = join(ROOT, "node_modules", ".bin", "tsx");

function run(layout: Layout, ports: { port: number; healthPort: number }) {
  const child = spawn(TSX, [join(ROOT, "custodian", "main.ts")], {
    cwd: ROOT,
    env: custodianEnv(layout, ports),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr.on("data", (c: Buffer) => (output += c.toString()));
  return { child, output: () => output, exited: once(child, "exit") as Promise<[number | null, string | null]> };
}

async function waitFor<T>(what: string, f: () => Promise<T | undefined>, ms = 20_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

describe("the Custodian's process", () => {
  it("ends at once on a bad config, naming each field and its fix", async () => {
    const layout = writeLayout(
      { version: 1, held: [{ value: "k", standIn: "not-a-stand-in", origins: ["https://a.example/v1"] }] } as never,
      {},
    );
    const p = run(layout, { port: await closedPort(), healthPort: await closedPort() });
    const [code] = await p.exited;
    expect(code).toBe(2);
    const line = JSON.parse(p.output().trim().split("\n").at(-1)!);
    expect(line.level).toBe("error");
    expect(line.message).toContain(`${layout.configFile}: `);
    expect(line.message).toContain("held[0].standIn: must be jr2-stand-in- and 32 to 64 lower-case hex digits");
    expect(line.message).toContain("held[0].origins[0]: must be exactly https://a.example");
  });

  it("serves until SIGTERM, and nothing it logs holds a value or a Stand-in", async () => {
    const token = secretValue("token");
    const key = secretValue("key");
    const standIn = newStandIn();
    const provider = await fakeUpstream((s, res) =>
      json(res, s.headers.authorization === `Bearer ${key}` ? 200 : 401, {}),
    );
    const orchestrator = await fakeUpstream((s, res) =>
      json(res, s.headers.authorization === `Bearer ${token}` ? 200 : 401, {}),
    );
    const origin = `http://127.0.0.1:${provider.port}`;
    const layout = writeLayout(
      {
        version: 1,
        orchestrator: { url: `http://127.0.0.1:${orchestrator.port}` },
        providers: [{ name: "openai", url: origin }],
        held: [{ value: "openai-key", standIn, origins: [origin] }],
      },
      { JR2_SANDBOX_TOKEN: token, "openai-key": key },
    );
    const ports = { port: await closedPort(), healthPort: await closedPort() };
    const p = run(layout, ports);
    try {
      await waitFor("readiness", async () =>
        (await call(ports.healthPort, "/readyz")).status === 200 ? true : undefined,
      );
      const a = await call(ports.port, "/providers/openai/v1/chat/completions", {
        method: "POST",
        headers: { authorization: `Bearer ${standIn}` },
        body: "{}",
      });
      const b = await call(ports.port, "/orchestrator/agents/a1/deliveries/1");
      const refused = await call(ports.port, `/orchestrator/x?leak=${standIn}`, { headers: { "x-api-key": standIn } });
      expect([a.status, b.status, refused.status]).toEqual([200, 200, 403]);
      p.child.kill("SIGTERM");
      const [code] = await p.exited;
      expect(code).toBe(0);
    } finally {
      p.child.kill("SIGKILL");
      await provider.close();
      await orchestrator.close();
    }
    const out = p.output();
    for (const v of [token, key, standIn]) expect(out).not.toContain(v);
    const requests = out
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l))
      .filter((l) => l.method);
    expect(requests.map((r) => [r.method, r.route, r.status])).toEqual(
      expect.arrayContaining([
        ["POST", "provider/openai", 200],
        ["GET", "orchestrator", 200],
        ["GET", "orchestrator", 403],
      ]),
    );
    for (const r of requests)
      expect(Object.keys(r).sort()).toEqual(expect.arrayContaining(["method", "route", "status", "ms"]));
    for (const r of requests) expect(r).not.toHaveProperty("path");
  });
});
