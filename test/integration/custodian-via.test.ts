// The Custodian chained through the egress point (docs/decisions/0051), on loopback with a real
// proxy standing in for it (test/support/egress-point-fixture.ts): a CONNECT for a host not bound
// is asked of the egress point, whose refusal or "never reached" comes back in the Custodian's own
// words; the routes and intercepted hosts reach their upstreams through it with the real key
// swapped in, the egress point seeing only a CONNECT and ciphertext (or, for plain http, the
// request the upstream gets); the Orchestrator's route never touches it; a kept-alive connection
// carries a second request without a second CONNECT. Every log line of the run is grepped, at the
// end, for every secret, the token and each Stand-in.
import type { TLSSocket } from "node:tls";
import { CUSTODIAN_HEADER, parseCustodianConfig, type CustodianConfigInput } from "../../api/custodian-config";
import { Custodian } from "../../custodian/custodian-server";
import {
  call,
  closedPort,
  connectThrough,
  fakeUpstream,
  httpsThrough,
  json,
  newCa,
  newStandIn,
  secretValue,
  silentServer,
  writeLayout,
  type Fake,
} from "../support/custodian-fixtures";
import { egressPoint, type EgressPoint } from "../support/egress-point-fixture";

const TOKEN = secretValue("sandbox-token");
const KEY = secretValue("provider-key");
const KEY_STAND_IN = newStandIn();

const logs: string[] = [];
const log = (e: Record<string, unknown>) => logs.push(JSON.stringify(e));
const started: Custodian[] = [];
const closing: Array<{ close: () => Promise<void> }> = [];

const upstreamCa = newCa("test upstream CA");
const installationCa = newCa("jr2 installation CA");
const serving = upstreamCa.sign(["localhost", "127.0.0.1"]);

/** A Custodian on loopback with this config, the token and the key in its values, the
 * installation CA to intercept with, and the test upstream CA trusted. */
async function custodian(config: CustodianConfigInput) {
  const parsed = parseCustodianConfig(config);
  if (!parsed.ok) throw new Error(parsed.message);
  const layout = writeLayout(config, { JR2_SANDBOX_TOKEN: TOKEN, "provider-key": KEY });
  const c = new Custodian({
    config: parsed.config,
    valuesDir: layout.valuesDir,
    upstreamCa: upstreamCa.certPem,
    ca: { certPem: installationCa.certPem, keyPem: installationCa.keyPem },
    log,
  });
  started.push(c);
  return { custodian: c, ...(await c.start(0, 0, "127.0.0.1")) };
}

async function egress(opts: Parameters<typeof egressPoint>[0] = {}): Promise<EgressPoint> {
  const e = await egressPoint(opts);
  closing.push(e);
  return e;
}

async function upstream(...args: Parameters<typeof fakeUpstream>): Promise<Fake> {
  const f = await fakeUpstream(...args);
  closing.push(f);
  return f;
}

/** A provider that answers 200 only to the real key, and counts the TLS connections reaching it. */
async function tlsProvider() {
  const f = await upstream((s, res) => json(res, s.headers["x-api-key"] === KEY ? 200 : 401, { ok: true }), serving);
  let connections = 0;
  f.server.on("secureConnection", (_socket: TLSSocket) => connections++);
  return { ...f, connections: () => connections };
}

const heldKey = (origin: string) => [
  { value: "provider-key", standIn: KEY_STAND_IN, origins: [origin], headers: ["x-api-key"] },
];

afterAll(async () => {
  await Promise.all(started.map((c) => c.stop()));
  await Promise.all(closing.map((x) => x.close()));
  const leaks = logs.filter((line) => [TOKEN, KEY, KEY_STAND_IN].some((v) => line.includes(v)));
  expect(leaks).toEqual([]);
});

describe("a CONNECT for a host not bound goes through the egress point, which alone decides", () => {
  it("is asked of the egress point (egress.tunnel not read), and its target gets the bytes untouched", async () => {
    const e = await egress();
    const target = await upstream((s, res) => json(res, 200, { key: s.headers["x-api-key"] }), serving);
    // The tunnel list names another host: with via, only the egress point decides.
    const { port } = await custodian({ version: 1, egress: { via: e.url, tunnel: ["github.com"] } });
    const r = await httpsThrough(port, "127.0.0.1", target.port, upstreamCa.certPem, {
      headers: { "x-api-key": KEY_STAND_IN },
    });
    expect(r.status).toBe(200);
    expect(r.issuer).toBe("test upstream CA");
    expect(e.connects).toEqual([`127.0.0.1:${target.port}`]);
    // Untouched: the Stand-in is not swapped in a tunnel (it is bound to no host here anyway).
    expect(target.seen).toHaveLength(1);
    expect(JSON.parse(r.body).key).toBe(KEY_STAND_IN);
  });

  it("relays the egress point's refusal as its own: its status, code and message, and `refused`", async () => {
    const blocked = await closedPort();
    const e = await egress({ refuse: [`127.0.0.1:${blocked}`] });
    const c = await custodian({ version: 1, egress: { via: e.url } });
    const r = await connectThrough(c.port, `127.0.0.1:${blocked}`);
    if (!("refused" in r)) throw new Error("the CONNECT was established");
    expect(r.refused.status).toBe(403);
    expect(r.refused.headers[CUSTODIAN_HEADER]).toBe("refused");
    expect(JSON.parse(r.refused.body).error).toEqual({
      code: "egress_refused",
      message: `127.0.0.1:${blocked} is not on this Sandbox's egress list: add it to the Sandbox's spec.egress.allow`,
    });
    expect(e.connects).toEqual([`127.0.0.1:${blocked}`]);
    const metrics = (await call(c.healthPort, "/metrics")).body;
    expect(metrics).toContain('jr2_custodian_requests_total{route="via",outcome="refused"} 1');
    const line = logs
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.host === `127.0.0.1:${blocked}`);
    expect(line).toMatchObject({ method: "CONNECT", route: "via", via: e.url.slice("http://".length), status: 403 });
  });

  it("says `unreachable` when the egress point says it never reached the host, or could not be reached itself", async () => {
    const closed = await closedPort();
    const told = await closedPort();
    const e = await egress({ unreachable: [`127.0.0.1:${told}`] });
    const c = await custodian({ version: 1, egress: { via: e.url } });
    for (const port of [closed, told]) {
      const r = await connectThrough(c.port, `127.0.0.1:${port}`);
      if (!("refused" in r)) throw new Error("the CONNECT was established");
      expect(r.refused.status).toBe(502);
      expect(r.refused.headers[CUSTODIAN_HEADER]).toBe("unreachable");
      expect(JSON.parse(r.refused.body).error.message).toMatch(
        new RegExp(`^the Custodian could not reach it \\(the egress point did not reach 127\\.0\\.0\\.1:${port}: `),
      );
    }
    // A 502 the egress point did not mark: it may have reached the host, so no `unreachable` word.
    const failing = await egress({ failed: [`127.0.0.1:${closed}`] });
    const f = await custodian({ version: 1, egress: { via: failing.url } });
    const bare = await connectThrough(f.port, `127.0.0.1:${closed}`);
    if (!("refused" in bare)) throw new Error("the CONNECT was established");
    expect(bare.refused.status).toBe(502);
    expect(bare.refused.headers[CUSTODIAN_HEADER]).toBeUndefined();
    expect(JSON.parse(bare.refused.body).error).toEqual({
      code: "upstream_failed",
      message: `127.0.0.1:${closed} failed`,
    });
    // No egress point at all.
    const nowhere = await custodian({ version: 1, egress: { via: `http://127.0.0.1:${await closedPort()}` } });
    const r = await connectThrough(nowhere.port, `127.0.0.1:${closed}`);
    if (!("refused" in r)) throw new Error("the CONNECT was established");
    expect(r.refused.status).toBe(502);
    expect(r.refused.headers[CUSTODIAN_HEADER]).toBe("unreachable");
    expect(JSON.parse(r.refused.body).error.message).toMatch(
      /the egress point 127\.0\.0\.1:\d+ could not be reached: .*ECONNREFUSED/,
    );
  });
});

/** An https provider whose key the Custodian holds, the Custodian chained through the egress point. */
async function chainedTlsProvider() {
  const e = await egress();
  const provider = await tlsProvider();
  const origin = `https://localhost:${provider.port}`;
  const c = await custodian({
    version: 1,
    providers: [{ name: "p", url: origin, kind: "anthropic" }],
    held: heldKey(origin),
    egress: { via: e.url },
  });
  return { e, provider, origin, c };
}

describe("what the Custodian sends itself goes through the egress point, the key swapped in", () => {
  it("a provider over https: the egress point sees one CONNECT and ciphertext, the provider the key", async () => {
    const { e, provider, c } = await chainedTlsProvider();
    const r = await call(c.port, "/providers/p/v1/messages", {
      method: "POST",
      headers: { "x-api-key": KEY_STAND_IN },
      body: '{"model":"m"}',
    });
    expect(r.status).toBe(200);
    expect(provider.seen.at(-1)!.headers["x-api-key"]).toBe(KEY);
    expect(e.connects).toEqual([`localhost:${provider.port}`]);
    expect(e.requests).toEqual([]);
    const seenByEgress = e.tunnelled().toString("latin1");
    expect(seenByEgress.length).toBeGreaterThan(0);
    expect(seenByEgress).not.toContain(KEY);
    expect(seenByEgress).not.toContain(KEY_STAND_IN);
    expect(seenByEgress).not.toContain("/v1/messages");
  });

  it("keep-alive: a second request to the same origin rides the same tunnel, with no second CONNECT", async () => {
    const { e, provider, c } = await chainedTlsProvider();
    for (let i = 0; i < 3; i++)
      expect((await call(c.port, "/providers/p/v1/models", { headers: { "x-api-key": KEY_STAND_IN } })).status).toBe(
        200,
      );
    expect(provider.seen).toHaveLength(3);
    expect(e.connects).toEqual([`localhost:${provider.port}`]);
    expect([e.connections(), provider.connections()]).toEqual([1, 1]);
  });

  it("a provider over plain http: an absolute-form request to the egress point, the key in place of the Stand-in, kept alive", async () => {
    const e = await egress();
    const provider = await upstream((s, res) => json(res, s.headers["x-api-key"] === KEY ? 200 : 401, {}));
    const origin = `http://127.0.0.1:${provider.port}`;
    const c = await custodian({
      version: 1,
      providers: [{ name: "p", url: origin, kind: "anthropic" }],
      held: heldKey(origin),
      egress: { via: e.url },
    });
    for (let i = 0; i < 2; i++)
      expect(
        (await call(c.port, "/providers/p/v1/messages?x=1", { headers: { "x-api-key": KEY_STAND_IN } })).status,
      ).toBe(200);
    expect(e.requests.map((r) => [r.url, r.headers.host, r.headers["x-api-key"]])).toEqual([
      [`${origin}/v1/messages?x=1`, `127.0.0.1:${provider.port}`, KEY],
      [`${origin}/v1/messages?x=1`, `127.0.0.1:${provider.port}`, KEY],
    ]);
    expect(provider.seen.map((s) => s.headers["x-api-key"])).toEqual([KEY, KEY]);
    expect(e.connects).toEqual([]);
    expect(e.connections()).toBe(1);
  });

  it("an intercepted bound host: the Harness's request reaches it through the egress point, the Stand-in swapped", async () => {
    const e = await egress();
    const provider = await tlsProvider();
    const c = await custodian({
      version: 1,
      held: heldKey(`https://localhost:${provider.port}`),
      egress: { via: e.url },
    });
    const r = await httpsThrough(c.port, "localhost", provider.port, installationCa.certPem, {
      path: "/v1/messages",
      headers: { "x-api-key": KEY_STAND_IN },
    });
    expect(r.status).toBe(200);
    expect(r.issuer).toBe("jr2 installation CA");
    expect(provider.seen.at(-1)!.headers["x-api-key"]).toBe(KEY);
    // The egress point was asked by the Custodian (the Harness's CONNECT was intercepted, not passed on).
    expect(e.connects).toEqual([`localhost:${provider.port}`]);
    const seenByEgress = e.tunnelled().toString("latin1");
    expect(seenByEgress).not.toContain(KEY);
    expect(seenByEgress).not.toContain(KEY_STAND_IN);
  });

  it("an absolute-form proxy request goes to the egress point (egress.tunnel not read), and its refusal is the Custodian's", async () => {
    // An upstream's own mark on its own 200 is not the egress point's refusal.
    const open = await upstream((s, res) =>
      json(res, 200, { key: s.headers["x-api-key"] ?? null }, { "x-jr2-egress": "refused" }),
    );
    const blocked = await closedPort();
    const e = await egress({ refuse: [`127.0.0.1:${blocked}`] });
    const c = await custodian({ version: 1, egress: { via: e.url } });
    const ok = await call(c.port, `http://127.0.0.1:${open.port}/x`);
    expect(ok.status).toBe(200);
    expect(ok.headers[CUSTODIAN_HEADER]).toBeUndefined();
    expect(open.seen).toHaveLength(1);
    const refused = await call(c.port, `http://127.0.0.1:${blocked}/x`);
    expect(refused.status).toBe(403);
    expect(refused.headers[CUSTODIAN_HEADER]).toBe("refused");
    expect(JSON.parse(refused.body).error.code).toBe("egress_refused");
    expect(e.requests.map((r) => r.url)).toEqual([`http://127.0.0.1:${open.port}/x`, `http://127.0.0.1:${blocked}/x`]);
  });

  it("a provider whose host the egress point refuses: 403 `refused` with its message, asked once", async () => {
    const provider = await tlsProvider();
    const e = await egress({ refuse: [`localhost:${provider.port}`] });
    const origin = `https://localhost:${provider.port}`;
    const c = await custodian({
      version: 1,
      providers: [{ name: "p", url: origin, kind: "anthropic" }],
      held: heldKey(origin),
      egress: { via: e.url },
    });
    const r = await call(c.port, "/providers/p/v1/messages", { headers: { "x-api-key": KEY_STAND_IN } });
    expect(r.status).toBe(403);
    expect(r.headers[CUSTODIAN_HEADER]).toBe("refused");
    expect(JSON.parse(r.body).error).toEqual({
      code: "egress_refused",
      message: `localhost:${provider.port} is not on this Sandbox's egress list: add it to the Sandbox's spec.egress.allow`,
    });
    expect(e.connects).toEqual([`localhost:${provider.port}`]);
    expect(provider.seen).toHaveLength(0);
    const metrics = (await call(c.healthPort, "/metrics")).body;
    expect(metrics).toContain('jr2_custodian_requests_total{route="provider/p",outcome="refused"} 1');
  });

  it("an egress point that cannot be reached: the provider route is 502 `unreachable`", async () => {
    const c = await custodian({
      version: 1,
      providers: [{ name: "p", url: "https://localhost:443" }],
      egress: { via: `http://127.0.0.1:${await closedPort()}` },
    });
    const r = await call(c.port, "/providers/p/v1/models");
    expect(r.status).toBe(502);
    expect(r.headers[CUSTODIAN_HEADER]).toBe("unreachable");
    expect(JSON.parse(r.body).error.message).toMatch(/^the Custodian could not reach it \(.*ECONNREFUSED/);
  });
});

describe("the connect timeout covers the CONNECT exchange", () => {
  it("an egress point that accepts and never answers: the CONNECT and a provider route are 502 `unreachable` within it", async () => {
    const silent = await silentServer();
    closing.push(silent);
    const c = await custodian({
      version: 1,
      providers: [{ name: "p", url: "https://localhost:443" }],
      egress: { via: `http://127.0.0.1:${silent.port}` },
      timeouts: { connect: "300ms" },
    });
    const t0 = Date.now();
    const tunnel = await connectThrough(c.port, "127.0.0.1:443");
    const route = await call(c.port, "/providers/p/v1/models");
    // Each waited out its own 300 ms, no more than a few seconds together (the headers timeout is 300 s).
    expect(Date.now() - t0).toBeGreaterThanOrEqual(600);
    expect(Date.now() - t0).toBeLessThan(5_000);
    if (!("refused" in tunnel)) throw new Error("the CONNECT was established");
    for (const r of [tunnel.refused, route]) {
      expect(r.status).toBe(502);
      expect(r.headers[CUSTODIAN_HEADER]).toBe("unreachable");
      expect(r.body).toContain("UND_ERR_CONNECT_TIMEOUT");
    }
  });

  it("the egress point's own `unreachable` for a provider's host is 502 `unreachable`, the provider never reached", async () => {
    const provider = await tlsProvider();
    const e = await egress({ unreachable: [`localhost:${provider.port}`] });
    const c = await custodian({
      version: 1,
      providers: [{ name: "p", url: `https://localhost:${provider.port}` }],
      egress: { via: e.url },
    });
    const r = await call(c.port, "/providers/p/v1/models");
    expect(r.status).toBe(502);
    expect(r.headers[CUSTODIAN_HEADER]).toBe("unreachable");
    expect(JSON.parse(r.body).error.message).toBe(
      `the Custodian could not reach it (the egress point did not reach localhost:${provider.port}: the egress point could not reach localhost:${provider.port} (told to))`,
    );
    expect(provider.seen).toHaveLength(0);
  });
});

describe("the Orchestrator's route", () => {
  it("goes direct, never through the egress point, with the Sandbox token", async () => {
    const e = await egress();
    const orchestrator = await upstream((s, res) =>
      json(res, s.headers.authorization === `Bearer ${TOKEN}` ? 200 : 401, {}),
    );
    const c = await custodian({
      version: 1,
      orchestrator: { url: `http://127.0.0.1:${orchestrator.port}` },
      egress: { via: e.url },
    });
    const r = await call(c.port, "/orchestrator/agents/a1/deliveries/7", { method: "POST", body: "{}" });
    expect(r.status).toBe(200);
    expect(orchestrator.seen).toHaveLength(1);
    expect([e.connections(), e.connects.length, e.requests.length]).toEqual([0, 0, 0]);
    const line = logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.route === "orchestrator");
    expect(line).toBeDefined();
    expect(line!.via).toBeUndefined();
  });
});
