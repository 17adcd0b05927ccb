// Property tests of the Custodian's guarantees (decision 0018), with fast-check: whatever the
// Harness sends, a held secret leaves only toward an origin it is bound to, never in a refusal, and
// never comes back to the Harness: in the rules (substitution, refusals, the streaming mask) and
// through a live Custodian whose upstream echoes everything it receives, in its headers and its
// body, plain or gzipped.
import { PassThrough } from "node:stream";
import { gzipSync } from "node:zlib";
import fc from "fast-check";
import { parseCustodianConfig, standInsIn } from "../../api/custodian-config";
import { maskInto, maskStep, maskText } from "../../custodian/mask";
import { substitute, type Header, type HeldTable } from "../../custodian/rules";
import { Custodian } from "../../custodian/custodian-server";
import { call, fakeUpstream, writeLayout, type Fake } from "../support/custodian-fixtures";

const ORIGINS = [
  "https://a.example",
  "https://a.example:8443",
  "http://a.example",
  "https://b.example",
  "https://a.example.evil",
];
const HEADERS = ["authorization", "x-api-key", "x-other", "accept"];

/** `n` lower-case hex digits (n even). */
const hex = (n: number) =>
  fc.uint8Array({ minLength: n / 2, maxLength: n / 2 }).map((b) => Buffer.from(b).toString("hex"));
const SECRET_CHARS = [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"];
const secretArb = fc
  .array(fc.constantFrom(...SECRET_CHARS), { minLength: 8, maxLength: 24 })
  .map((cs) => `SECRET${cs.join("")}`);

type Entry = { secret: string; standIn: string; origins: string[]; headers?: string[] };

const entriesArb = fc
  .array(
    fc.record(
      {
        secret: secretArb,
        standIn: hex(32).map((h) => `jr2-stand-in-${h}`),
        origins: fc.subarray(ORIGINS, { minLength: 1 }),
        headers: fc.subarray(HEADERS.slice(0, 3), { minLength: 1 }),
      },
      { requiredKeys: ["secret", "standIn", "origins"] },
    ),
    { minLength: 1, maxLength: 4 },
  )
  .filter(
    (es) => new Set(es.map((e) => e.standIn)).size === es.length && new Set(es.map((e) => e.secret)).size === es.length,
  );

const tableOf = (entries: Entry[]): HeldTable => ({
  byStandIn: new Map(
    entries.map((e, i) => [
      e.standIn,
      {
        name: `value-${i}`,
        secret: e.secret,
        origins: new Set(e.origins),
        ...(e.headers ? { headers: new Set(e.headers) } : {}),
      },
    ]),
  ),
  boundOrigins: new Set(entries.flatMap((e) => e.origins)),
});

/** A header value from text, the table's Stand-ins and unknown ones; sometimes as Basic credentials. */
const valueArb = (standIns: string[]) =>
  fc
    .array(
      fc.oneof(
        fc.string({ maxLength: 12 }).filter((s) => !s.includes("jr2-stand-in-")),
        fc.constantFrom(...standIns),
        hex(40).map((h) => `jr2-stand-in-${h}`),
      ),
      { maxLength: 4 },
    )
    .chain((parts) =>
      fc.oneof(
        fc.constant(parts.join("")),
        fc.constant(`Basic ${Buffer.from(parts.join(":"), "latin1").toString("base64")}`),
      ),
    );

const caseArb = entriesArb.chain((entries) =>
  fc.record({
    entries: fc.constant(entries),
    origin: fc.constantFrom(...ORIGINS),
    headers: fc.array(fc.tuple(fc.constantFrom(...HEADERS), valueArb(entries.map((e) => e.standIn))), { maxLength: 4 }),
  }),
);

/** A header's text and, for Basic credentials, the decoded text too. */
const readable = ([, v]: Header) => {
  const basic = /^Basic (.*)$/.exec(v);
  return basic ? `${v} ${Buffer.from(basic[1], "base64").toString("latin1")}` : v;
};

describe("property: substitution", () => {
  it("a secret leaves only toward an origin it is bound to, no Stand-in of the table leaves, and a refusal quotes no secret", () => {
    fc.assert(
      fc.property(caseArb, ({ entries, origin, headers }) => {
        const r = substitute(headers as Header[], origin, tableOf(entries));
        if (!r.ok) {
          for (const e of entries) expect(r.message).not.toContain(e.secret);
          expect([400, 403]).toContain(r.status);
          return;
        }
        const out = r.headers.map(readable).join("\n");
        for (const e of entries) {
          if (!e.origins.includes(origin)) expect(out).not.toContain(e.secret);
          expect(out).not.toContain(e.standIn);
        }
        expect(standInsIn(out)).toEqual([]);
      }),
      { numRuns: 3_000 },
    );
  });

  it("a request is refused exactly when one of its Stand-ins is unknown, unbound or in a header it may not ride in", () => {
    fc.assert(
      fc.property(caseArb, ({ entries, origin, headers }) => {
        const table = tableOf(entries);
        const allowed = headers.every(([name, value]) =>
          standInsIn(readable([name, value])).every((s) => {
            const e = table.byStandIn.get(s);
            return e !== undefined && e.origins.has(origin) && (!e.headers || e.headers.has(name));
          }),
        );
        expect(substitute(headers as Header[], origin, table).ok).toBe(allowed);
      }),
      { numRuns: 2_000 },
    );
  });
});

describe("property: the mask", () => {
  const bodyArb = fc
    .tuple(
      fc.array(secretArb, { minLength: 1, maxLength: 3 }),
      fc.array(fc.oneof(fc.string({ maxLength: 20 }), fc.nat(2)), { maxLength: 12 }),
    )
    .map(([secrets, parts]) => ({
      secrets,
      // A number picks a secret (its prefix sometimes, to leave a tail that must wait).
      body: parts.map((p) => (typeof p === "number" ? secrets[p % secrets.length] : p)).join(""),
    }));

  it("no secret survives, whatever the chunking; lengths and every other byte are kept", async () => {
    await fc.assert(
      fc.asyncProperty(bodyArb, fc.array(fc.nat(40), { maxLength: 10 }), async ({ secrets, body }, cuts) => {
        const masks = secrets.map((s) => Buffer.from(s, "latin1"));
        const input = Buffer.from(body, "latin1");
        const chunks: Buffer[] = [];
        let at = 0;
        for (const c of cuts) {
          chunks.push(input.subarray(at, Math.min(input.length, at + c)));
          at = Math.min(input.length, at + c);
        }
        chunks.push(input.subarray(at));
        const from = new PassThrough();
        // A small buffer, so the mask waits for the reader (backpressure) as a slow Harness makes it.
        const to = new PassThrough({ highWaterMark: 1 });
        maskInto(from, to, masks);
        const out: Buffer[] = [];
        to.on("data", (b: Buffer) => out.push(b));
        for (const c of chunks) from.write(c);
        from.end();
        await new Promise((r) => to.on("end", r));
        const text = Buffer.concat(out).toString("latin1");
        expect(text).toBe(maskText(body, masks));
        expect(text.length).toBe(body.length);
        for (const s of secrets) expect(text).not.toContain(s);
      }),
      { numRuns: 1_000 },
    );
  });

  it("masks a text that holds a secret and leaves one that holds none as it was", () => {
    const masks = [Buffer.from("SECRETabcdef")];
    expect(maskText("x-echo: SECRETabcdef!", masks)).toBe("x-echo: ************!");
    expect(maskText("x-echo: SECRETabcde", masks)).toBe("x-echo: SECRETabcde");
  });

  it("holds back only a tail that could begin a secret", () => {
    const masks = [Buffer.from("SECRETabcdef")];
    expect(maskStep(Buffer.alloc(0), Buffer.from("data: x\n\n"), masks).carry.length).toBe(0);
    const step = maskStep(Buffer.alloc(0), Buffer.from("quoted SECRETab"), masks);
    expect(step.out.toString()).toBe("quoted ");
    expect(maskStep(step.carry, Buffer.from("cdef!"), masks).out.toString()).toBe("************!");
  });
});

describe("property: nothing held comes back through a live Custodian", () => {
  let echo: Fake;
  let custodian: Custodian;
  let port: number;
  const secrets = ["SECRETalpha-0123456789", "SECRETbeta_abcdefghij"];
  const standIns = [`jr2-stand-in-${"1".repeat(32)}`, `jr2-stand-in-${"2".repeat(32)}`];
  const token = "SECRETtoken-zyxwvutsrq";
  const logs: string[] = [];

  beforeAll(async () => {
    // Echoes everything it was sent in a header and in its body, sometimes gzipped.
    echo = await fakeUpstream((s, res) => {
      const text = JSON.stringify({ url: s.url, headers: s.headers, body: s.body });
      const gzip = s.headers["x-gzip"] === "1";
      res.writeHead(200, {
        "x-echo": Buffer.from(JSON.stringify(s.headers))
          .toString("latin1")
          .replace(/[^\x20-\x7e]/g, "?"),
        ...(gzip ? { "content-encoding": "gzip" } : {}),
      });
      res.end(gzip ? gzipSync(text) : text);
    });
    const origin = `http://127.0.0.1:${echo.port}`;
    const input = {
      version: 1 as const,
      orchestrator: { url: origin },
      providers: [{ name: "p", url: origin }],
      held: [
        { value: "alpha", standIn: standIns[0], origins: [origin] },
        { value: "beta", standIn: standIns[1], origins: [origin], headers: ["x-api-key"] },
      ],
    };
    const parsed = parseCustodianConfig(input);
    if (!parsed.ok) throw new Error(parsed.message);
    const layout = writeLayout(input, { alpha: secrets[0], beta: secrets[1], JR2_SANDBOX_TOKEN: token });
    custodian = new Custodian({
      config: parsed.config,
      valuesDir: layout.valuesDir,
      log: (e) => logs.push(JSON.stringify(e)),
    });
    port = (await custodian.start(0, 0, "127.0.0.1")).port;
  });
  afterAll(async () => {
    await custodian.stop();
    await echo.close();
    // Its whole log: one line per request, none holding a value or a Stand-in.
    expect(logs.length).toBeGreaterThan(150);
    for (const v of [...secrets, token, ...standIns]) expect(logs.filter((l) => l.includes(v))).toEqual([]);
  });

  it("for any headers and body the Harness sends, on either route", async () => {
    const part = fc.oneof(fc.stringMatching(/^[ -~]{0,10}$/), fc.constantFrom(...standIns));
    const headerValue = fc.array(part, { maxLength: 3 }).map((p) => p.join("").trim() || "x");
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("/providers/p/v1/echo", "/orchestrator/v1/echo"),
        fc.dictionary(fc.constantFrom("authorization", "x-api-key", "x-other", "cookie"), headerValue, { maxKeys: 3 }),
        fc.array(part, { maxLength: 4 }).map((p) => p.join("")),
        fc.boolean(),
        async (path, headers, body, gzip) => {
          const r = await call(port, path, {
            method: "POST",
            headers: { ...headers, "x-gzip": gzip ? "1" : "0" },
            body,
          });
          const seen = `${JSON.stringify(r.headers)}\n${r.body}`;
          for (const s of [...secrets, token]) expect(seen).not.toContain(s);
        },
      ),
      { numRuns: 150 },
    );
    // The echo did receive the real values: masking, not a failure to send, kept them out.
    expect(echo.seen.some((s) => JSON.stringify(s.headers).includes(secrets[0]))).toBe(true);
    expect(echo.seen.some((s) => s.headers.authorization === `Bearer ${token}`)).toBe(true);
  });
});
