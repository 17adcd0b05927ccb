// The Effector's signed wire and its memory (decision 0070), on the real program: what is
// unsigned, stale, replayed, meant for another pod, signed with another key or tampered with is
// refused 401, counted, and runs nothing; a good order runs once, and its id sent again answers
// the record (an http Effect to a counting server proves exactly one request went out); answers
// are signed over the request's nonce; /healthz waits for the key; a record left `running` by a
// dead Effector is `unknown` and never runs; requireCommands without Landlock ends the program.
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { answerSigned, EFFECTOR_PATHS, type EffectorOrder } from "../../api/effector-wire";
import {
  effectorDirs,
  effectorEnv,
  newKey,
  signedRequest,
  startEffector,
  TSX,
  writeKey,
  type EffectorDirs,
  type RunningEffector,
} from "../support/effector-fixture";

const ROOT = join(__dirname, "..", "..");

let hits = 0;
let server: http.Server;
let target = "";
beforeAll(async () => {
  server = http.createServer((req, res) => {
    hits++;
    req.resume();
    req.on("end", () => res.writeHead(201, { "content-type": "text/plain" }).end("made"));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  target = `http://127.0.0.1:${(server.address() as AddressInfo).port}/pulls`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const httpOrder = (id: string): EffectorOrder => ({
  id,
  idempotent: false,
  effect: {
    kind: "http",
    method: "POST",
    url: target,
    headers: {},
    body: { json: { t: 1 } },
    maxResponseBytes: 1024,
    timeoutSeconds: 10,
  },
});

const records = (d: EffectorDirs) => {
  const dir = join(d.scratch, ".jr2-effects");
  return existsSync(dir) ? readdirSync(dir) : [];
};

const metric = async (url: string, line: string) => {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^${line.replace(/[{}"]/g, (c) => `\\${c}`)} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
};

describe("the Effector's wire", () => {
  let d: EffectorDirs;
  let key: string;
  let fx: RunningEffector;
  beforeAll(async () => {
    d = effectorDirs();
    key = newKey();
    writeKey(d, key);
    fx = await startEffector(d);
  });
  afterAll(() => fx.stop());

  it("refuses what is unsigned, stale, replayed, for another pod, of another key or tampered with; runs nothing", async () => {
    const body = JSON.stringify(httpOrder("refused-1"));
    const path = EFFECTOR_PATHS.effects;
    const before = hits;
    const unsigned = await fetch(`${fx.url}${path}`, { method: "POST", body });
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toMatchObject({ error: "unsigned" });
    const stale = await signedRequest(fx.url, key, "POST", path, body, { time: Date.now() - 5 * 60_000 });
    expect([stale.status, (stale.json as { error: string }).error]).toEqual([401, "stale"]);
    const pod = await signedRequest(fx.url, key, "POST", path, body, { pod: "10.0.0.9" });
    expect([pod.status, (pod.json as { error: string }).error]).toEqual([401, "wrong_pod"]);
    const other = await signedRequest(fx.url, newKey(), "POST", path, body);
    expect([other.status, (other.json as { error: string }).error]).toEqual([401, "bad_signature"]);
    const tampered = await signedRequest(fx.url, key, "POST", path, body, {
      sendBody: JSON.stringify(httpOrder("refused-2")),
    });
    expect([tampered.status, (tampered.json as { error: string }).error]).toEqual([401, "bad_signature"]);
    // A nonce used by a good GET, then replayed on a POST signed with it.
    const nonce = randomBytes(18).toString("base64url");
    expect((await signedRequest(fx.url, key, "GET", EFFECTOR_PATHS.effect("nothing"), "", { nonce })).status).toBe(404);
    const replayed = await signedRequest(fx.url, key, "GET", EFFECTOR_PATHS.effect("nothing"), "", { nonce });
    expect([replayed.status, (replayed.json as { error: string }).error]).toEqual([401, "replayed"]);
    for (const r of [stale, pod, other, tampered, replayed]) expect(r.signature).toBeUndefined();

    expect(hits).toBe(before);
    expect(records(d)).toEqual([]);
    for (const [reason, n] of [
      ["unsigned", 1],
      ["stale", 1],
      ["wrong_pod", 1],
      ["bad_signature", 2],
      ["replayed", 1],
    ] as const)
      expect(await metric(fx.url, `jr2_effector_refused_total{reason="${reason}"}`)).toBe(n);
    expect(fx.out()).toMatch(/"message":"request refused","reason":"wrong_pod","remote":"[^"]+"/);
  });

  it("runs a good order once; the same id again answers the record and runs nothing", async () => {
    const before = hits;
    const body = JSON.stringify(httpOrder("pr-1"));
    const first = await signedRequest(fx.url, key, "POST", EFFECTOR_PATHS.effects, body);
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({
      id: "pr-1",
      state: "succeeded",
      replayed: false,
      result: { kind: "http", status: 201, body: "made", bodyEncoding: "utf8", truncated: false },
    });
    expect(answerSigned(key, first.nonce, first.status, first.text, first.signature)).toBe(true);
    expect(answerSigned(key, randomBytes(18).toString("base64url"), first.status, first.text, first.signature)).toBe(
      false,
    );
    expect(answerSigned(newKey(), first.nonce, first.status, first.text, first.signature)).toBe(false);

    const again = await signedRequest(fx.url, key, "POST", EFFECTOR_PATHS.effects, body);
    expect(again.json).toMatchObject({ id: "pr-1", state: "succeeded", replayed: true, result: { status: 201 } });
    expect(answerSigned(key, again.nonce, again.status, again.text, again.signature)).toBe(true);
    expect(hits).toBe(before + 1);

    const got = await signedRequest(fx.url, key, "GET", EFFECTOR_PATHS.effect("pr-1"));
    expect(got.json).toMatchObject({ id: "pr-1", state: "succeeded", result: { status: 201 } });
    const none = await signedRequest(fx.url, key, "GET", EFFECTOR_PATHS.effect("pr-2"));
    expect([none.status, none.json]).toEqual([404, { error: "unknown_id" }]);

    // The id with another Effect: refused, nothing runs.
    const reused = httpOrder("pr-1");
    (reused.effect as { url: string }).url = `${target}?other`;
    const conflict = await signedRequest(fx.url, key, "POST", EFFECTOR_PATHS.effects, JSON.stringify(reused));
    expect(conflict.status).toBe(409);
    expect(hits).toBe(before + 1);
    expect(await metric(fx.url, 'jr2_effector_effects_total{kind="http",state="succeeded"}')).toBe(1);
    expect(fx.out()).toMatch(/"message":"effect","id":"pr-1","kind":"http","state":"succeeded"/);

    const dir = join(d.scratch, ".jr2-effects");
    expect(readdirSync(dir)).toEqual(["pr-1.json"]);
  });

  it("answers a malformed order 400, naming the field, signed", async () => {
    const bad = await signedRequest(fx.url, key, "POST", EFFECTOR_PATHS.effects, JSON.stringify({ id: "x y" }));
    expect(bad.status).toBe(400);
    expect((bad.json as { message: string }).message).toMatch(/id/);
    expect(answerSigned(key, bad.nonce, bad.status, bad.text, bad.signature)).toBe(true);
  });
});

describe("the Effector's start", () => {
  it("answers /healthz 503 until its key file is there, then 200", async () => {
    const d = effectorDirs();
    const fx = await startEffector(d);
    try {
      expect((await fetch(`${fx.url}/healthz`)).status).toBe(503);
      const key = newKey();
      const early = await signedRequest(fx.url, key, "POST", EFFECTOR_PATHS.effects, JSON.stringify(httpOrder("k")));
      expect(early.status).toBe(503);
      writeKey(d, key);
      const deadline = Date.now() + 10_000;
      while ((await fetch(`${fx.url}/healthz`)).status !== 200 && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 100));
      expect((await fetch(`${fx.url}/healthz`)).status).toBe(200);
      expect(fx.out()).not.toContain(key);
    } finally {
      await fx.stop();
    }
  });

  it("a record left running by a dead Effector is unknown after start, and its id never runs again", async () => {
    const d = effectorDirs();
    const key = newKey();
    writeKey(d, key);
    const order = httpOrder("died-1");
    // What the Effector writes before it runs an order; its end left it so.
    const { orderDigest } = await import("../../effector/memory");
    const dir = join(d.scratch, ".jr2-effects");
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(
      join(dir, "died-1.json"),
      JSON.stringify({
        id: "died-1",
        kind: "http",
        digest: orderDigest(order),
        started: Date.now(),
        answer: { id: "died-1", state: "running", replayed: false },
      }),
    );
    const fx = await startEffector(d);
    try {
      const before = hits;
      const got = await signedRequest(fx.url, key, "GET", EFFECTOR_PATHS.effect("died-1"));
      expect(got.json).toMatchObject({ id: "died-1", state: "unknown", error: { code: "interrupted" } });
      const sent = await signedRequest(fx.url, key, "POST", EFFECTOR_PATHS.effects, JSON.stringify(order));
      expect(sent.json).toMatchObject({
        id: "died-1",
        state: "unknown",
        replayed: true,
        error: { code: "interrupted" },
      });
      expect(hits).toBe(before);
      // Marked idempotent, it is safe to run again: it runs, once.
      const idem = await signedRequest(
        fx.url,
        key,
        "POST",
        EFFECTOR_PATHS.effects,
        JSON.stringify({ ...order, idempotent: true }),
      );
      expect(idem.json).toMatchObject({ id: "died-1", state: "succeeded", replayed: false });
      expect(hits).toBe(before + 1);
    } finally {
      await fx.stop();
    }
  });

  it("with commands required and no Landlock, ends at start naming the node and why", () => {
    const d = effectorDirs();
    writeKey(d, newKey());
    const probe = join(d.base, "jr2-confine");
    writeFileSync(
      probe,
      `#!/bin/sh\necho '{"abi":0,"error":"landlock_create_ruleset: function not implemented"}'\nexit 3\n`,
    );
    chmodSync(probe, 0o755);
    const r = spawnSync(TSX, [join(ROOT, "effector", "main.ts")], {
      env: effectorEnv(d, { JR2_EFFECTOR_CONFINE: probe, JR2_EFFECTOR_REQUIRE_COMMANDS: "1", NODE_NAME: "jr2-node-x" }),
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      "node jr2-node-x cannot confine a credentialed command: Landlock unavailable (landlock_create_ruleset: function not implemented); the pod config requires commands (effector.requireCommands)",
    );
  });

  it("without commands required and no Landlock, serves and refuses a command as unconfined, naming the node", async () => {
    const d = effectorDirs();
    const key = newKey();
    writeKey(d, key);
    mkdirSync(join(d.work, "s", "b"), { recursive: true });
    const fx = await startEffector(d);
    try {
      const order: EffectorOrder = {
        id: "cmd-1",
        idempotent: false,
        effect: {
          kind: "command",
          argv: ["true"],
          root: join(d.work, "s", "b"),
          cwd: "",
          env: {},
          timeoutSeconds: 5,
          maxOutputBytes: 100,
        },
      };
      const r = await signedRequest(fx.url, key, "POST", EFFECTOR_PATHS.effects, JSON.stringify(order));
      expect(r.json).toMatchObject({ id: "cmd-1", state: "failed", error: { code: "unconfined" } });
      expect((r.json as { error: { message: string } }).error.message).toMatch(/^node jr2-node-test cannot confine/);
    } finally {
      await fx.stop();
    }
  });
});
