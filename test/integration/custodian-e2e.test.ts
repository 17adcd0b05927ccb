// The Custodian end to end on loopback (decision 0018): a fake model provider and a fake
// Orchestrator receive the real key and the real token while the client, playing the Harness,
// sends only Stand-ins; the HTTPS proxy intercepts a bound host with a leaf from the installation
// CA (the client trusts that CA alone), tunnels an allowed host untouched and refuses the rest;
// each failure word is checked on a real refused, reset and timed-out socket and a real 503.
// Each Sandbox's own CA (decision 0037) on real TLS: what a client trusting the root alone
// accepts from it, what a stolen one cannot sign, its end and its rotation.
// Every log line of the run is grepped, at the end, for every secret, the token and each Stand-in.
import { randomBytes, X509Certificate } from "node:crypto";
import diagnostics from "node:diagnostics_channel";
import { renameSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { Socket } from "node:net";
import { join } from "node:path";
import { Custodian, MAX_ORCHESTRATOR_BODY } from "../../custodian/custodian-server";
import { caFilesIn, LeafIssuer } from "../../custodian/leaf";
import { DAY, issueCa, issueIntermediate } from "../../lib/ca";
import { custodianCa } from "../../orchestrator/workspaces/custodian-ca";
import { handshake } from "../support/certificates";
import { eventually } from "../support/eventually";
import {
  CUSTODIAN_HEADER,
  parseCustodianConfig,
  type CustodianConfig,
  type CustodianConfigInput,
} from "../../api/custodian-config";
import {
  call,
  closedPort,
  connectionCounter,
  connectThrough,
  fakeUpstream,
  fullAcceptQueue,
  httpsThrough,
  json,
  newCa,
  newStandIn,
  resettingServer,
  secretValue,
  silentServer,
  writeLayout,
  type Fake,
} from "../support/custodian-fixtures";

const TOKEN = secretValue("sandbox-token");
const KEY = secretValue("provider-key");
const OTHER_KEY = secretValue("other-key");
const KEY_STAND_IN = newStandIn();
const OTHER_STAND_IN = newStandIn();
const UNKNOWN_STAND_IN = newStandIn();

const logs: string[] = [];
const log = (e: Record<string, unknown>) => logs.push(JSON.stringify(e));
const started: Custodian[] = [];

const upstreamCa = newCa("test upstream CA");
const installationCa = newCa("jr2 installation CA");

/** A Custodian on loopback with this config (the token and both keys in its values); `ca`: the
 * installation CA given as is (true), or these CA files mounted and read as they change. */
async function custodian(
  config: CustodianConfigInput,
  opts: { values?: Record<string, string>; ca?: boolean | { certPem: string; keyPem: string } } = {},
) {
  const parsed = parseCustodianConfig(config);
  if (!parsed.ok) throw new Error(parsed.message);
  const values = opts.values ?? { JR2_SANDBOX_TOKEN: TOKEN, "provider-key": KEY, "other-key": OTHER_KEY };
  const mounted = typeof opts.ca === "object" ? opts.ca : undefined;
  const layout = writeLayout(config, values, mounted);
  const c = new Custodian({
    config: parsed.config,
    valuesDir: layout.valuesDir,
    upstreamCa: upstreamCa.certPem,
    log,
    retryEveryMs: 50,
    ...(mounted
      ? { ca: caFilesIn(layout.caDir) }
      : opts.ca
        ? { ca: { certPem: installationCa.certPem, keyPem: installationCa.keyPem } }
        : {}),
  });
  started.push(c);
  const ports = await c.start(0, 0, "127.0.0.1");
  return { custodian: c, ...ports, layout, config: parsed.config as CustodianConfig };
}

const held = (origin: string, other = "https://elsewhere.example") => [
  { value: "provider-key", standIn: KEY_STAND_IN, origins: [origin], env: "PROVIDER_API_KEY" },
  { value: "other-key", standIn: OTHER_STAND_IN, origins: [other] },
];

afterAll(async () => {
  await Promise.all(started.map((c) => c.stop()));
  const leaks = logs.filter((line) =>
    [TOKEN, KEY, OTHER_KEY, KEY_STAND_IN, OTHER_STAND_IN, UNKNOWN_STAND_IN].some((v) => line.includes(v)),
  );
  expect(leaks).toEqual([]);
  expect(logs.length).toBeGreaterThan(20);
});

describe("routes: the upstream gets the real values, the Harness only ever held Stand-ins", () => {
  let provider: Fake;
  let orchestrator: Fake;
  let c: Awaited<ReturnType<typeof custodian>>;

  beforeAll(async () => {
    provider = await fakeUpstream((s, res) =>
      // A provider that quotes the key it was sent, as some error messages do.
      json(
        res,
        s.headers["x-api-key"] === KEY ? 200 : 401,
        { echoed: s.headers["x-api-key"], auth: s.headers.authorization },
        { "x-seen-key": String(s.headers["x-api-key"]) },
      ),
    );
    orchestrator = await fakeUpstream((s, res) =>
      json(
        res,
        s.headers.authorization === `Bearer ${TOKEN}` ? 200 : 401,
        { path: s.url, body: s.body, echoed: s.headers.authorization },
        { [CUSTODIAN_HEADER]: "unreachable" },
      ),
    );
    const providerOrigin = `http://127.0.0.1:${provider.port}`;
    c = await custodian({
      version: 1,
      orchestrator: { url: `http://127.0.0.1:${orchestrator.port}/api` },
      providers: [{ name: "anthropic", url: providerOrigin, kind: "anthropic" }],
      held: held(providerOrigin),
    });
  });
  afterAll(async () => {
    await provider.close();
    await orchestrator.close();
  });

  it("the Orchestrator route adds the Sandbox token as the bearer, replacing the Harness's own", async () => {
    const r = await call(c.port, "/orchestrator/agents/a1/deliveries/7?wait=25s", {
      method: "POST",
      headers: { authorization: "Bearer harness-made-this-up", "content-type": "application/json" },
      body: '{"pick":"done"}',
    });
    expect(r.status).toBe(200);
    const seen = orchestrator.seen.at(-1)!;
    expect(seen.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(seen.url).toBe("/api/agents/a1/deliveries/7?wait=25s");
    expect(seen.body).toBe('{"pick":"done"}');
    // The answer never carries the token back, and an upstream's own failure word is dropped.
    expect(r.body).not.toContain(TOKEN);
    expect(JSON.parse(r.body).echoed).toBe(`Bearer ${"*".repeat(TOKEN.length)}`);
    expect(r.headers[CUSTODIAN_HEADER]).toBeUndefined();
  });

  it("a body the Harness sent chunked reaches the Orchestrator with its length", async () => {
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request(
        { host: "127.0.0.1", port: c.port, method: "POST", path: "/orchestrator/picks" },
        (res) => res.resume().on("end", () => resolve(res.statusCode!)),
      );
      req.on("error", reject);
      // Written before the end: Node sends it chunked.
      req.write('{"pick":');
      req.end('"done"}');
    });
    expect(status).toBe(200);
    const seen = orchestrator.seen.at(-1)!;
    expect(seen.body).toBe('{"pick":"done"}');
    expect(seen.headers["content-length"]).toBe("15");
    expect(seen.headers["transfer-encoding"]).toBeUndefined();
  });

  it("a provider route swaps the Stand-in for the key bound to the provider's origin, and masks it in the answer", async () => {
    const r = await call(c.port, "/providers/anthropic/v1/messages", {
      method: "POST",
      headers: { "x-api-key": KEY_STAND_IN, "content-type": "application/json" },
      body: '{"model":"m"}',
    });
    expect(r.status).toBe(200);
    expect(provider.seen.at(-1)!.headers["x-api-key"]).toBe(KEY);
    expect(provider.seen.at(-1)!.headers["accept-encoding"]).toBe("identity");
    expect(r.body).not.toContain(KEY);
    expect(JSON.stringify(r.headers)).not.toContain(KEY);
    expect(r.headers["x-seen-key"]).toBe("*".repeat(KEY.length));
  });

  it("a provider route takes the key in its kind's header alone: elsewhere it is refused and never sent", async () => {
    const before = provider.seen.length;
    const r = await call(c.port, "/providers/anthropic/v1/messages", {
      method: "POST",
      headers: { authorization: `Bearer ${KEY_STAND_IN}`, "content-type": "application/json" },
      body: '{"model":"m"}',
    });
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).error).toMatchObject({
      code: "stand_in_header",
      message: expect.stringContaining("provider anthropic (anthropic) takes its key in header x-api-key alone"),
    });
    expect(r.body).not.toContain(KEY);
    expect(provider.seen.length).toBe(before);
  });

  it("a Stand-in in Basic credentials is swapped too", async () => {
    const basic = Buffer.from(`x-access-token:${KEY_STAND_IN}`).toString("base64");
    // Through the proxy: a provider route takes the key in its kind's header alone.
    await call(c.port, `http://127.0.0.1:${provider.port}/v1/models`, { headers: { authorization: `Basic ${basic}` } });
    const auth = String(provider.seen.at(-1)!.headers.authorization);
    expect(Buffer.from(auth.replace(/^Basic /, ""), "base64").toString()).toBe(`x-access-token:${KEY}`);
  });

  it("a Stand-in toward a host its value is not bound to is refused, never sent, and never echoed", async () => {
    const before = provider.seen.length + orchestrator.seen.length;
    const toOrchestrator = await call(c.port, "/orchestrator/agents", { headers: { "x-api-key": KEY_STAND_IN } });
    const otherKey = await call(c.port, "/providers/anthropic/v1/messages", {
      headers: { authorization: `Bearer ${OTHER_STAND_IN}` },
    });
    const unknown = await call(c.port, "/providers/anthropic/v1/messages", {
      headers: { "x-api-key": UNKNOWN_STAND_IN },
    });
    expect([toOrchestrator.status, otherKey.status, unknown.status]).toEqual([403, 403, 400]);
    for (const r of [toOrchestrator, otherKey, unknown]) {
      expect(r.headers[CUSTODIAN_HEADER]).toBe("refused");
      for (const v of [KEY, OTHER_KEY, TOKEN, KEY_STAND_IN, OTHER_STAND_IN, UNKNOWN_STAND_IN])
        expect(r.body).not.toContain(v);
    }
    expect(JSON.parse(toOrchestrator.body).error.message).toContain("held value provider-key");
    expect(provider.seen.length + orchestrator.seen.length).toBe(before);
  });

  it("absolute-form proxy requests follow the same rule; an unlisted host is refused", async () => {
    const ok = await call(c.port, `http://127.0.0.1:${provider.port}/v1/x`, { headers: { "x-api-key": KEY_STAND_IN } });
    expect(ok.status).toBe(200);
    expect(provider.seen.at(-1)!.headers["x-api-key"]).toBe(KEY);
    const refused = await call(c.port, `http://127.0.0.1:${orchestrator.port}/v1/x`);
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body).error.code).toBe("egress_refused");
  });

  it("refuses dot segments, unknown providers and unknown paths", async () => {
    expect((await call(c.port, "/providers/anthropic/../x")).status).toBe(400);
    expect((await call(c.port, "/orchestrator/%2e%2e/x")).status).toBe(400);
    expect((await call(c.port, "/providers/openai/v1")).status).toBe(404);
    expect((await call(c.port, "/elsewhere")).status).toBe(404);
  });

  it("forwards an Orchestrator body of exactly 1 MiB, and refuses one byte more 413 too_large, sent or chunked, forwarding nothing", async () => {
    const exact = "x".repeat(MAX_ORCHESTRATOR_BODY);
    const ok = await call(c.port, "/orchestrator/picks", { method: "POST", body: exact });
    expect(ok.status).toBe(200);
    expect(orchestrator.seen.at(-1)!.body.length).toBe(MAX_ORCHESTRATOR_BODY);
    const before = orchestrator.seen.length;
    // Said up front (content-length), and found while reading (chunked: no length to go by).
    const declared = await call(c.port, "/orchestrator/picks", { method: "POST", body: `${exact}y` });
    const chunked = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>(
      (resolve, reject) => {
        const req = http.request(
          { host: "127.0.0.1", port: c.port, method: "POST", path: "/orchestrator/picks", agent: false },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (d: Buffer) => chunks.push(d));
            res.on("end", () =>
              resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }),
            );
          },
        );
        req.on("error", reject);
        req.write(exact);
        req.end("y");
      },
    );
    for (const r of [declared, chunked]) {
      expect(r.status).toBe(413);
      expect(r.headers[CUSTODIAN_HEADER]).toBe("refused");
      expect(JSON.parse(r.body).error).toEqual({
        code: "too_large",
        message: `a request to the Orchestrator is at most ${MAX_ORCHESTRATOR_BODY} bytes`,
      });
    }
    expect(orchestrator.seen.length).toBe(before);
  });

  it("without an Orchestrator in its config, the Orchestrator route is 404 and says so", async () => {
    const bare = await custodian({
      version: 1,
      providers: [{ name: "anthropic", url: `http://127.0.0.1:${provider.port}`, kind: "anthropic" }],
    });
    const before = orchestrator.seen.length + provider.seen.length;
    const r = await call(bare.port, "/orchestrator/agents/a1/deliveries/7", { method: "POST", body: "{}" });
    expect(r.status).toBe(404);
    expect(r.headers[CUSTODIAN_HEADER]).toBe("refused");
    expect(JSON.parse(r.body).error).toEqual({
      code: "not_found",
      message: "no Orchestrator is configured for this Custodian",
    });
    expect(orchestrator.seen.length + provider.seen.length).toBe(before);
  });

  it("serves /healthz, /readyz and /metrics, on both listeners, and nothing else on the probes' port", async () => {
    for (const port of [c.port, c.healthPort]) {
      expect((await call(port, "/healthz")).status).toBe(200);
      expect((await call(port, "/readyz")).status).toBe(200);
    }
    const metrics = (await call(c.healthPort, "/metrics")).body;
    expect(metrics).toContain('jr2_custodian_requests_total{route="provider/anthropic",outcome="answered"}');
    expect(metrics).toContain('jr2_custodian_requests_total{route="orchestrator",outcome="refused"}');
    expect(metrics).toMatch(/jr2_custodian_upstream_seconds_count\{route="orchestrator"\} [1-9]/);
    expect((await call(c.healthPort, "/orchestrator/agents")).status).toBe(404);
  });
});

describe("the HTTPS proxy", () => {
  let provider: Fake;
  let tunnelled: Fake;
  let c: Awaited<ReturnType<typeof custodian>>;

  beforeAll(async () => {
    const serving = upstreamCa.sign(["localhost", "127.0.0.1"]);
    provider = await fakeUpstream(
      (s, res) => json(res, s.headers["x-api-key"] === KEY ? 200 : 401, { host: s.headers.host }),
      serving,
    );
    tunnelled = await fakeUpstream((s, res) => json(res, 200, { key: s.headers["x-api-key"] }), serving);
    c = await custodian(
      {
        version: 1,
        held: held(`https://localhost:${provider.port}`),
        egress: { tunnel: [`127.0.0.1:${tunnelled.port}`] },
      },
      { ca: true },
    );
  });
  afterAll(async () => {
    await provider.close();
    await tunnelled.close();
  });

  it("intercepts a bound host with a leaf the installation CA signed, and swaps the Stand-in there", async () => {
    const r = await httpsThrough(c.port, "localhost", provider.port, installationCa.certPem, {
      path: "/v1/messages",
      headers: { "x-api-key": KEY_STAND_IN },
    });
    expect(r.issuer).toBe("jr2 installation CA");
    expect(r.status).toBe(200);
    expect(provider.seen.at(-1)!.headers["x-api-key"]).toBe(KEY);
  });

  it("sends an intercepted request to the CONNECT's host whatever its Host header says", async () => {
    const r = await httpsThrough(c.port, "localhost", provider.port, installationCa.certPem, {
      headers: { "x-api-key": KEY_STAND_IN, host: "evil.example" },
    });
    expect(r.status).toBe(200);
    expect(provider.seen.at(-1)!.headers["x-api-key"]).toBe(KEY);
  });

  it("refuses, inside the interception, a Stand-in bound elsewhere", async () => {
    const before = provider.seen.length;
    const r = await httpsThrough(c.port, "localhost", provider.port, installationCa.certPem, {
      headers: { authorization: `Bearer ${OTHER_STAND_IN}` },
    });
    expect(r.status).toBe(403);
    expect(r.headers[CUSTODIAN_HEADER]).toBe("refused");
    expect(provider.seen.length).toBe(before);
  });

  it("a client that trusts another CA gets no answer from an intercepted host", async () => {
    await expect(httpsThrough(c.port, "localhost", provider.port, upstreamCa.certPem)).rejects.toThrow();
    expect(provider.seen.every((s) => s.headers["x-api-key"] === KEY)).toBe(true);
  });

  it("tunnels an allowed host untouched: its own certificate, the Stand-in unswapped", async () => {
    const r = await httpsThrough(c.port, "127.0.0.1", tunnelled.port, upstreamCa.certPem, {
      headers: { "x-api-key": KEY_STAND_IN },
    });
    expect(r.issuer).toBe("test upstream CA");
    expect(JSON.parse(r.body).key).toBe(KEY_STAND_IN);
  });

  it("refuses a host neither bound nor allowed", async () => {
    const r = await connectThrough(c.port, `127.0.0.1:${provider.port}`);
    expect("refused" in r && r.refused.status).toBe(403);
    expect("refused" in r && r.refused.headers[CUSTODIAN_HEADER]).toBe("refused");
  });

  it("refuses a CONNECT whose target is not host:port, 400 bad_target, and forwards nothing", async () => {
    const before = provider.seen.length + tunnelled.seen.length;
    for (const target of ["localhost", `localhost:${provider.port}:1`, "127.0.0.1:0", "127.0.0.1:70000", "[::1:443"]) {
      const r = await connectThrough(c.port, target);
      expect([target, "refused" in r && r.refused.status]).toEqual([target, 400]);
      if (!("refused" in r)) continue;
      expect(r.refused.headers[CUSTODIAN_HEADER]).toBe("refused");
      expect(JSON.parse(r.refused.body).error).toEqual({
        code: "bad_target",
        message: "CONNECT takes host:port, e.g. api.example.com:443",
      });
    }
    expect(provider.seen.length + tunnelled.seen.length).toBe(before);
  });

  it("without a CA, a bound host's CONNECT is refused and says why", async () => {
    const bare = await custodian({ version: 1, held: held(`https://localhost:${provider.port}`) }, { ca: false });
    const r = await connectThrough(bare.port, `localhost:${provider.port}`);
    expect("refused" in r && JSON.parse(r.refused.body).error.code).toBe("no_ca");
  });
});

describe("each Sandbox's own CA (decision 0037): the Harness trusts the root, a stolen CA signs its Sandbox's hosts alone", () => {
  const root = issueCa("jr2 Custodian CA (e2e)");
  const signingKey = randomBytes(32);
  const now = Date.now();
  // Sandbox A intercepts localhost (the fake provider) and api.a.example; Sandbox B api.b.example.
  const a = custodianCa({ root, signingKey, sandbox: "ws-a", hosts: ["api.a.example", "localhost"], now });
  const b = custodianCa({ root, signingKey, sandbox: "ws-b", hosts: ["api.b.example"], now });
  let provider: Fake;
  let c: Awaited<ReturnType<typeof custodian>>;

  beforeAll(async () => {
    provider = await fakeUpstream(
      (s, res) => json(res, s.headers["x-api-key"] === KEY ? 200 : 401, {}),
      upstreamCa.sign(["localhost"]),
    );
    c = await custodian({ version: 1, held: held(`https://localhost:${provider.port}`) }, { ca: a });
  });
  afterAll(() => provider.close());

  it("intercepts a bound host with a leaf from A's CA, which a client trusting the root alone accepts", async () => {
    const r = await httpsThrough(c.port, "localhost", provider.port, root.certPem, {
      headers: { "x-api-key": KEY_STAND_IN },
    });
    expect(r.status).toBe(200);
    expect(r.issuer).toBe("jr2 Custodian ws-a");
    expect(r.issuerFingerprint).toBe(new X509Certificate(a.certPem).fingerprint256);
    expect(provider.seen.at(-1)!.headers["x-api-key"]).toBe(KEY);
  });

  it("a leaf A's CA mints for a host not bound to A is refused by that client: OpenSSL holds the nameConstraints", async () => {
    // What a compromised Custodian of A can do with its key: mint for any name it likes.
    const stolen = new LeafIssuer(a);
    const refused = async (host: string) => {
      const r = await handshake(stolen.contextFor(host), root.certPem, host);
      return r.ok ? "accepted" : r.error.message;
    };
    expect(await refused("api.anthropic.com")).toBe("permitted subtree violation");
    // B's bound host, which B's own CA signs for.
    expect(await refused("api.b.example")).toBe("permitted subtree violation");
    expect((await handshake(new LeafIssuer(b).contextFor("api.b.example"), root.certPem, "api.b.example")).ok).toBe(
      true,
    );
    // A subdomain of A's own host, and any address.
    expect(await refused("evil.api.a.example")).toBe("excluded subtree violation");
    expect(await refused("127.0.0.1")).toBe("excluded subtree violation");
    // A's own bound host is accepted.
    expect(await refused("api.a.example")).toBe("accepted");
  });

  it("which the installation root's key would have signed for any host: why it no longer reaches a pod", async () => {
    const r = await handshake(new LeafIssuer(root).contextFor("api.anthropic.com"), root.certPem, "api.anthropic.com");
    expect(r.ok).toBe(true);
  });

  it("a Custodian whose CA has ended refuses the CONNECT, 503 ca_expired: no leaf on the socket, nothing forwarded", async () => {
    const ended = issueIntermediate(root, {
      name: "jr2 Custodian ws-old",
      hosts: ["localhost"],
      notBefore: now - 8 * DAY,
      notAfter: now - DAY,
    });
    const old = await custodian({ version: 1, held: held(`https://localhost:${provider.port}`) }, { ca: ended });
    const before = provider.seen.length;
    const r = await connectThrough(old.port, `localhost:${provider.port}`);
    expect("refused" in r && r.refused.status).toBe(503);
    // Everything the socket carried after the status line is the JSON refusal (it parses whole, so
    // no TLS record followed it), and the socket was closed: no leaf was presented to anyone.
    expect("refused" in r && r.refused.headers.connection).toBe("close");
    expect("refused" in r && JSON.parse(r.refused.body).error).toEqual({
      code: "ca_expired",
      message: expect.stringContaining("the Custodian's CA expired on"),
    });
    // Not the client's doing: no `refused` word, so the Harness may try again after the rotation.
    expect("refused" in r && r.refused.headers[CUSTODIAN_HEADER]).toBeUndefined();
    expect(provider.seen.length).toBe(before);
  });

  it("takes a rotated CA from its files, as the kubelet swaps them, without a restart", async () => {
    const rotated = custodianCa({
      root,
      signingKey,
      sandbox: "ws-a",
      hosts: ["api.a.example", "api.c.example", "localhost"],
      now,
    });
    for (const [file, text] of [
      ["tls.crt", rotated.certPem],
      ["tls.key", rotated.keyPem],
    ] as const) {
      writeFileSync(join(c.layout.caDir, `${file}.new`), text);
      renameSync(join(c.layout.caDir, `${file}.new`), join(c.layout.caDir, file));
    }
    const r = await httpsThrough(c.port, "localhost", provider.port, root.certPem, {
      headers: { "x-api-key": KEY_STAND_IN },
    });
    expect(r.status).toBe(200);
    expect(r.issuerFingerprint).toBe(new X509Certificate(rotated.certPem).fingerprint256);
    expect(logs.some((l) => l.includes("the CA changed"))).toBe(true);
  });
});

describe("failure words on real socket faults", () => {
  const orchestratorAt = (port: number, timeouts: Record<string, string> = {}, retries = 2) =>
    custodian({ version: 1, orchestrator: { url: `http://127.0.0.1:${port}`, retries }, timeouts });

  it("a refused connection is 502 unreachable, after the bounded retries", async () => {
    const port = await closedPort();
    const c = await orchestratorAt(port);
    // Each refusal counted on its own socket (node's net.client.socket channel).
    let refusals = 0;
    const onSocket = (message: unknown) =>
      (message as { socket: Socket }).socket.once("error", (err: NodeJS.ErrnoException & { port?: number }) => {
        if (err.code === "ECONNREFUSED" && err.port === port) refusals++;
      });
    diagnostics.subscribe("net.client.socket", onSocket);
    const t0 = Date.now();
    try {
      const r = await call(c.port, "/orchestrator/agents/a/deliveries/1");
      expect(r.status).toBe(502);
      expect(r.headers[CUSTODIAN_HEADER]).toBe("unreachable");
      expect(JSON.parse(r.body).error.message).toMatch(/^the Custodian could not reach it \(.*ECONNREFUSED/);
      // The first attempt and two retries, each refused; the retries after 100 and 200 ms.
      expect(refusals).toBe(3);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    } finally {
      diagnostics.unsubscribe("net.client.socket", onSocket);
    }
  });

  it("a retry reaches an Orchestrator that comes up between attempts", async () => {
    const port = await closedPort();
    const c = await orchestratorAt(port);
    // The first attempt's refusal, seen on its own socket (node's net.client.socket channel): the
    // Orchestrator comes up only after it, so what reaches it is a retry.
    const refused = new Promise<void>((resolve) => {
      const onSocket = (message: unknown) =>
        (message as { socket: Socket }).socket.once("error", (err: NodeJS.ErrnoException & { port?: number }) => {
          if (err.code !== "ECONNREFUSED" || err.port !== port) return;
          diagnostics.unsubscribe("net.client.socket", onSocket);
          resolve();
        });
      diagnostics.subscribe("net.client.socket", onSocket);
    });
    const answer = call(c.port, "/orchestrator/picks", { method: "POST", body: "{}" });
    await refused;
    const late = await fakeUpstream((_s, res) => json(res, 200, { ok: true }));
    // The fake took any free port; move it to the closed one.
    await late.close();
    late.server.listen(port, "127.0.0.1");
    const r = await answer;
    await late.close();
    expect(r.status).toBe(200);
    expect(late.seen).toHaveLength(1);
    expect(late.seen[0].headers.authorization).toBe(`Bearer ${TOKEN}`);
  });

  it("a connect timeout (a full accept queue) is 502 unreachable", async () => {
    const full = await fullAcceptQueue();
    try {
      const c = await orchestratorAt(full.port, { connect: "200ms" }, 1);
      const r = await call(c.port, "/orchestrator/agents");
      expect(r.status).toBe(502);
      expect(r.headers[CUSTODIAN_HEADER]).toBe("unreachable");
      expect(r.body).toContain("UND_ERR_CONNECT_TIMEOUT");
      // undici's connect timer ticks at about a second, so 200ms reads as about 1s per attempt.
    } finally {
      full.close();
    }
  });

  it("a reset after the request was read is a bare 502, never retried", async () => {
    const resetting = await resettingServer();
    const c = await orchestratorAt(resetting.port);
    const r = await call(c.port, "/orchestrator/picks", { method: "POST", body: '{"pick":"x"}' });
    await resetting.close();
    expect(r.status).toBe(502);
    expect(r.headers[CUSTODIAN_HEADER]).toBeUndefined();
    expect(resetting.requests()).toBe(1);
  });

  it("an upstream that accepts and never answers within the response timeout is a bare 502", async () => {
    const silent = await silentServer();
    const c = await orchestratorAt(silent.port, { headers: "300ms" });
    const r = await call(c.port, "/orchestrator/agents/a/deliveries/1");
    await silent.close();
    expect(r.status).toBe(502);
    expect(r.headers[CUSTODIAN_HEADER]).toBeUndefined();
    expect(r.body).toContain("UND_ERR_HEADERS_TIMEOUT");
  });

  it("a stopping upstream's own 503 passes through unchanged", async () => {
    const stopping = await fakeUpstream((_s, res) =>
      json(res, 503, { error: { code: "stopping", message: "try again" } }, { "retry-after": "1" }),
    );
    const c = await orchestratorAt(stopping.port);
    const r = await call(c.port, "/orchestrator/picks", { method: "POST", body: "{}" });
    await stopping.close();
    expect(r.status).toBe(503);
    expect(r.headers["retry-after"]).toBe("1");
    expect(r.headers[CUSTODIAN_HEADER]).toBeUndefined();
    expect(JSON.parse(r.body)).toEqual({ error: { code: "stopping", message: "try again" } });
    expect(stopping.seen).toHaveLength(1);
  });

  it("a tunnel to a closed port is 502 unreachable on the CONNECT", async () => {
    const port = await closedPort();
    const c = await custodian({ version: 1, egress: { tunnel: [`127.0.0.1:${port}`] } });
    const r = await connectThrough(c.port, `127.0.0.1:${port}`);
    expect("refused" in r && r.refused.status).toBe(502);
    expect("refused" in r && r.refused.headers[CUSTODIAN_HEADER]).toBe("unreachable");
  });
});

describe("readiness", () => {
  it("answers 503 naming the missing value until it appears, and forwards nothing meanwhile, on a route or a CONNECT", async () => {
    // Upstreams that record what reaches them, so a Custodian that forwarded while unready fails here.
    const orchestrator = await fakeUpstream((_s, res) => json(res, 200, { ok: true }));
    const tunnelled = await connectionCounter();
    try {
      const c = await custodian(
        {
          version: 1,
          orchestrator: { url: `http://127.0.0.1:${orchestrator.port}` },
          egress: { tunnel: [`127.0.0.1:${tunnelled.port}`] },
        },
        { values: {} },
      );
      const unready = await call(c.healthPort, "/readyz");
      expect(unready.status).toBe(503);
      expect(JSON.parse(unready.body).problems.join()).toContain("JR2_SANDBOX_TOKEN: no such file");
      const early = await call(c.port, "/orchestrator/agents", { method: "POST", body: "{}" });
      expect(early.status).toBe(502);
      expect(early.headers[CUSTODIAN_HEADER]).toBe("unreachable");
      expect(JSON.parse(early.body).error.message).toContain("the Custodian is not ready");
      const tunnel = await connectThrough(c.port, `127.0.0.1:${tunnelled.port}`);
      expect("refused" in tunnel && tunnel.refused.status).toBe(502);
      expect("refused" in tunnel && tunnel.refused.headers[CUSTODIAN_HEADER]).toBe("unreachable");
      expect("refused" in tunnel && JSON.parse(tunnel.refused.body).error.message).toContain(
        "the Custodian is not ready",
      );
      expect([orchestrator.seen.length, tunnelled.connections()]).toEqual([0, 0]);

      writeFileSync(`${c.layout.valuesDir}/JR2_SANDBOX_TOKEN`, `${TOKEN}\n`);
      await eventually("the Custodian ready once its value appears", () => c.custodian.ready || undefined);
      expect((await call(c.healthPort, "/readyz")).status).toBe(200);
      // The same two now reach their upstreams: what the zeros above were measured against.
      expect((await call(c.port, "/orchestrator/agents", { method: "POST", body: "{}" })).status).toBe(200);
      const open = await connectThrough(c.port, `127.0.0.1:${tunnelled.port}`);
      expect("socket" in open).toBe(true);
      if ("socket" in open) open.socket.destroy();
      expect(orchestrator.seen).toHaveLength(1);
      expect(orchestrator.seen[0].headers.authorization).toBe(`Bearer ${TOKEN}`);
      await eventually("the tunnel's connection at its upstream", () => tunnelled.connections() === 1 || undefined);
    } finally {
      await orchestrator.close();
      await tunnelled.close();
    }
  });
});
