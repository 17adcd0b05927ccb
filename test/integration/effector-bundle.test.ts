// The Sandbox Effector as its image runs it (decision 0070; docs/decisions/0044-the-custodian-starts-small.md):
// the bundle `npm run build` writes holds only what an idle Effector runs (its server, the
// signature check, its memory of ids, /healthz); the order's schema (zod) with the push, http and
// command code is effector-effects.js beside it, loaded with the first order, and undici is
// effector-undici.js, loaded with the first http Effect.
import { spawn } from "node:child_process";
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EFFECTOR_PATHS, type EffectorOrder } from "../../api/effector-wire";
import { LAZY, bundleCompanion } from "../../scripts/companion-bundle";
import { effectorDirs, effectorEnv, newKey, signedRequest, writeKey } from "../support/effector-fixture";

const LATE = LAZY.effector!;
const EFFECTS = LATE["./effects-late"];
const UNDICI = LATE.undici;

const dir = mkdtempSync(join(tmpdir(), "jr2-effector-bundle-"));
let files: string[] = [];
beforeAll(async () => {
  files = await bundleCompanion("effector", dir);
});
const text = (f: string) => readFileSync(join(dir, f), "utf8");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("the Effector's bundle holds only its at-rest code; zod and the Effects, and undici, are beside it", () => {
  expect(files.map((f) => f.slice(dir.length + 1)).sort()).toEqual(["effector.js", EFFECTS, UNDICI].sort());
  // esbuild heads each module it bundles with its path.
  const main = text("effector.js");
  for (const late of [
    "node_modules/zod/",
    "node_modules/undici/",
    "effector/push.ts",
    "effector/http.ts",
    "effector/command.ts",
    "api/effector-wire.ts",
  ])
    expect(main).not.toContain(late);
  for (const rest of ["effector/server.ts", "effector/memory.ts", "effector/guard.ts", "api/effector-sign.ts"])
    expect(main).toContain(rest);
  expect(text(EFFECTS)).toContain("node_modules/zod/");
  expect(text(EFFECTS)).toContain("effector/push.ts");
  expect(text(EFFECTS)).not.toContain("node_modules/undici/");
  expect(text(UNDICI)).toContain("node_modules/undici/");
});

test("the bundle starts without its late files, loads the Effects with the first order and undici with the first http Effect", async () => {
  const upstream = http.createServer((_req, res) => res.writeHead(201, { "content-type": "text/plain" }).end("made"));
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
  const d = effectorDirs();
  const key = newKey();
  writeKey(d, key);
  // What the process has loaded: node reports each module it reads under NODE_DEBUG=module.
  const child = spawn(process.execPath, [join(dir, "effector.js")], {
    env: { ...effectorEnv(d), NODE_DEBUG: "module" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr.on("data", (c: Buffer) => (output += c.toString()));
  const loaded = (f: string) => output.includes(join(dir, f));
  try {
    for (let i = 0; i < 200 && !/"message":"listening","port":\d+/.test(output); i++) await sleep(50);
    const url = `http://127.0.0.1:${/"message":"listening","port":(\d+)/.exec(output)![1]}`;
    expect((await fetch(`${url}${EFFECTOR_PATHS.healthz}`)).status).toBe(200);
    const unknown = await signedRequest(url, key, "GET", EFFECTOR_PATHS.effect("none"));
    expect(unknown.status).toBe(404);
    expect(loaded(EFFECTS)).toBe(false);
    expect(loaded(UNDICI)).toBe(false);

    const bad = await signedRequest(url, key, "POST", EFFECTOR_PATHS.effects, JSON.stringify({ id: "x" }));
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ error: "bad_order" });
    expect(loaded(EFFECTS)).toBe(true);
    expect(loaded(UNDICI)).toBe(false);

    const order: EffectorOrder = {
      id: "bundle-http-1",
      idempotent: false,
      effect: {
        kind: "http",
        method: "POST",
        url: `${upstreamUrl}/pulls`,
        headers: {},
        maxResponseBytes: 1024,
        timeoutSeconds: 10,
      },
    };
    const ran = await signedRequest(url, key, "POST", EFFECTOR_PATHS.effects, JSON.stringify(order));
    expect(ran.status).toBe(200);
    expect(ran.json).toMatchObject({ state: "succeeded", result: { kind: "http", status: 201, body: "made" } });
    expect(loaded(UNDICI)).toBe(true);
  } finally {
    child.kill("SIGTERM");
    await once(child, "exit");
    await new Promise<void>((r) => upstream.close(() => r()));
  }
  expect(output).not.toContain(key);
});
