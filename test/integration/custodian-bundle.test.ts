// The Custodian as its image runs it (docs/decisions/0044-the-custodian-starts-small.md): the
// bundle `npm run build` writes, with node-forge in a file of its own beside it, and no undici at
// all (its upstream client is Node's own). It starts without node-forge and loads it with its first
// leaf: a proxied route answers with the real key swapped in without it, and a bound host is
// intercepted with a leaf its CA signed once it is loaded.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LAZY, bundleCompanion } from "../../scripts/companion-bundle";
import {
  call,
  closedPort,
  custodianEnv,
  fakeUpstream,
  httpsThrough,
  json,
  newCa,
  newStandIn,
  secretValue,
  sleep,
  writeLayout,
} from "../support/custodian-fixtures";

// A string node-forge keeps through minification, and the Custodian's own code never writes.
const FORGE_MARK = "Cannot read public key. OID is not RSA.";

const dir = mkdtempSync(join(tmpdir(), "jr2-custodian-bundle-"));
let files: string[] = [];
beforeAll(async () => {
  files = await bundleCompanion("custodian", dir);
});
const text = (f: string) => readFileSync(join(dir, f), "utf8");

test("the Custodian's bundle holds no node-forge, the file beside it does, and neither holds undici", () => {
  expect(files.map((f) => f.slice(dir.length + 1)).sort()).toEqual(
    ["custodian.js", ...Object.values(LAZY.custodian!)].sort(),
  );
  expect(text("custodian.js")).not.toContain(FORGE_MARK);
  expect(text(LAZY.custodian!["node-forge"])).toContain(FORGE_MARK);
  // esbuild heads each module it bundles with its path.
  for (const f of ["custodian.js", LAZY.custodian!["node-forge"]])
    expect(text(f)).not.toContain("node_modules/undici/");
});

test("the bundle starts without node-forge, proxies without it, and intercepts once it loads it", async () => {
  const key = secretValue("key");
  const standIn = newStandIn();
  const upstreamCa = newCa("bundle upstream CA");
  const installationCa = newCa("bundle installation CA");
  const provider = await fakeUpstream((s, res) => json(res, s.headers["x-api-key"] === key ? 200 : 401, {}));
  const bound = await fakeUpstream(
    (s, res) => json(res, s.headers["x-api-key"] === key ? 200 : 401, {}),
    upstreamCa.sign(["localhost"]),
  );
  const origin = `http://127.0.0.1:${provider.port}`;
  const boundOrigin = `https://localhost:${bound.port}`;
  const layout = writeLayout(
    {
      version: 1,
      providers: [{ name: "p", url: origin, kind: "anthropic" }],
      held: [{ value: "key", standIn, origins: [origin, boundOrigin] }],
    },
    { key },
    installationCa,
  );
  const upstreamCaFile = join(layout.dir, "upstream-ca.pem");
  writeFileSync(upstreamCaFile, upstreamCa.certPem);
  const ports = { port: await closedPort(), healthPort: await closedPort() };
  // What the process has loaded: node reports each module it reads under NODE_DEBUG=module.
  const child = spawn(process.execPath, [join(dir, "custodian.js")], {
    env: { ...custodianEnv(layout, ports), JR2_CUSTODIAN_UPSTREAM_CA: upstreamCaFile, NODE_DEBUG: "module" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr.on("data", (c: Buffer) => (output += c.toString()));
  const loaded = (f: string) => output.includes(join(dir, f));
  try {
    for (let i = 0; i < 200 && !output.includes('"listening"'); i++) await sleep(50);
    expect(output).toContain('"listening"');
    expect((await call(ports.healthPort, "/readyz")).status).toBe(200);
    expect(loaded(LAZY.custodian!["node-forge"])).toBe(false);

    const routed = await call(ports.port, "/providers/p/v1/x", { headers: { "x-api-key": standIn } });
    expect(routed.status).toBe(200);
    expect(loaded(LAZY.custodian!["node-forge"])).toBe(false);

    const intercepted = await httpsThrough(ports.port, "localhost", bound.port, installationCa.certPem, {
      headers: { "x-api-key": standIn },
    });
    expect(intercepted.issuer).toBe("bundle installation CA");
    expect(intercepted.status).toBe(200);
    expect(loaded(LAZY.custodian!["node-forge"])).toBe(true);
  } finally {
    child.kill("SIGTERM");
    await once(child, "exit");
    await provider.close();
    await bound.close();
  }
  expect(output).not.toContain(key);
  expect(output).not.toContain(standIn);
});

test("the bundle sets V8's new space cap as Node 20 had it, before its own code runs (decision 0052)", async () => {
  // node:v8's setter, wrapped from a preload, says each flag set and when.
  const preload = join(dir, "say-v8-flags.js");
  writeFileSync(
    preload,
    'const v8 = require("node:v8"); const set = v8.setFlagsFromString;\n' +
      "v8.setFlagsFromString = (f) => { process.stderr.write(`v8 flag ${f}\\n`); set(f); };\n",
  );
  const standIn = newStandIn();
  const origin = `http://127.0.0.1:${await closedPort()}`;
  const layout = writeLayout(
    { version: 1, providers: [{ name: "p", url: origin }], held: [{ value: "key", standIn, origins: [origin] }] },
    { key: secretValue("key") },
  );
  const ports = { port: await closedPort(), healthPort: await closedPort() };
  const child = spawn(process.execPath, ["--require", preload, join(dir, "custodian.js")], {
    env: custodianEnv(layout, ports),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (c: Buffer) => (output += c.toString()));
  child.stderr.on("data", (c: Buffer) => (output += c.toString()));
  try {
    for (let i = 0; i < 200 && !output.includes('"listening"'); i++) await sleep(50);
    expect(output).toContain('"listening"');
    const lines = output.split("\n");
    expect(lines[0]).toBe("v8 flag --scavenger-max-new-space-capacity-mb=8");
    expect(lines.filter((l) => l.startsWith("v8 flag"))).toHaveLength(1);
  } finally {
    child.kill("SIGTERM");
    await once(child, "exit");
  }
});
