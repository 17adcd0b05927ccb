// `npm run images`: the companions, Sandbox and controller images, built with no container engine
// (docs/decisions/0041-images-without-an-engine.md). Each layer is a reproducible tar cached by a key
// of its inputs; each image an OCI layout under ~/.cache/jr2/images; pushed with crane to the
// registry on loopback when there is one.
//
//   npm run images [-- --registry HOST:PORT] [--no-push] [--build] [--lock-debian] [--check-security]
//
// --registry (else $JR2_REGISTRY, else the one `npm run cluster -- env` names) is where images are
// pushed and what their names start with; with none they are built and kept on disk only. The
// manifests in dist/ must name the same images: when they do not (or with --build), `npm run build`
// runs first with JR2_COMPANION_IMAGE and JR2_CONTROLLER_IMAGE set to them. --lock-debian resolves
// the base's packages afresh and rewrites scripts/images/debian.lock; --check-security fails naming
// each locked package older than the suite's security updates (debian-security.ts).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, join } from "node:path";
import cfg from "../../package.json";
import {
  closureKey,
  controllerClosure,
  controllerEntries,
  stageControllerDeps,
  type Lockfile,
} from "./controller-deps";
import {
  LOCK_FILE,
  finishRootfs,
  formatLock,
  installedPackages,
  lockDrift,
  mmdebstrap,
  parseLock,
  requireRootAndMmdebstrap,
} from "./debian";
import { checkSecurity } from "./debian-security";
import { confineBinary, confineEntries } from "./confine";
import { nodeEntries, nodeRuntime } from "./node-runtime";
import { BlobStore, assemble, contentKey, imageConfig, type BuiltImage, type Layer } from "./oci";
import {
  APP_COPY,
  BASE_PACKAGES,
  CONFINE_PATH,
  HARNESS_JS,
  IMAGES,
  IMAGE_ENV,
  NODE_RUNTIME,
  REGISTRY_ENV,
  RUN_CONFIG,
  RUN_UID,
  RUN_USER,
  RUN_USER_DIRS,
  imageRef,
  labels,
  sourceDateEpoch,
  type ImageName,
} from "./spec";
import { entriesOf, type TarEntry } from "./tar";

export const ROOT = join(__dirname, "..", "..");
export const CACHE_DIR = process.env.JR2_CACHE_DIR ?? join(homedir(), ".cache", "jr2");
export const IMAGES_DIR = join(CACHE_DIR, "images");
/** What `npm run images` last built: each image's name, digest, layout and sizes. */
export const REPORT_FILE = join(ROOT, "dist", "images.json");

export type LayerId =
  | "debian-base"
  | "node-runtime"
  | "companions-confine"
  | "companions-app"
  | "sandbox-harness"
  | "controller-deps";
/** Each image's layers, the shared first. The companions' jr2-confine (decision 0070) is a layer of its
 * own, before the bundles: it changes seldom, they with every build. */
export const LAYERS: Record<ImageName, LayerId[]> = {
  companions: ["debian-base", "node-runtime", "companions-confine", "companions-app"],
  sandbox: ["debian-base", "node-runtime", "sandbox-harness"],
  controller: ["debian-base", "node-runtime", "controller-deps"],
};

/** A layer's content key and how to make its entries (called only on a cache miss). */
export type Recipe = { key: string; entries: () => TarEntry[]; cleanup?: () => void };

const sha256File = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

/** The files a COPY source names (`dir/*.js` or one file), sorted. */
export function expandCopy(root: string, from: string): string[] {
  const dir = join(root, dirname(from));
  const base = basename(from);
  if (!base.includes("*")) return existsSync(join(root, from)) ? [join(root, from)] : [];
  const re = new RegExp(`^${base.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`);
  return existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => re.test(f))
        .sort()
        .map((f) => join(dir, f))
    : [];
}

const dirEntry = (path: string, uid = 0): TarEntry => ({ path, type: "dir", mode: 0o755, uid, gid: uid });
const fileEntry = (path: string, file: string): TarEntry => ({
  path,
  type: "file",
  mode: 0o644,
  uid: 0,
  gid: 0,
  size: statSync(file).size,
  source: { file },
});

export type Context = { root: string; store: BlobStore; epoch: number; log: (s: string) => void };

/** The code that makes a layer, by content: a change to how a layer is made is a new key. (The
 * values a layer takes from spec.ts are in its key themselves.) */
const codeOf = (...files: string[]) => ["tar.ts", "oci.ts", ...files].map((f) => [f, sha256File(join(__dirname, f))]);

/** What every key shares: the mtime, and the compressor (zlib's version decides the gzip bytes). */
const common = (epoch: number) => ({ epoch, zlib: process.versions.zlib });

export function recipes(ctx: Context): Record<LayerId, () => Recipe> {
  const { root, epoch } = ctx;
  return {
    "debian-base": () => {
      if (!existsSync(LOCK_FILE))
        throw new Error(`${LOCK_FILE} is missing: write it with npm run images -- --lock-debian`);
      const lock = parseLock(readFileSync(LOCK_FILE, "utf8"));
      const work = join(IMAGES_DIR, "work", `debian-${process.pid}`);
      const rootfs = join(work, "rootfs");
      return {
        key: contentKey({
          ...common(epoch),
          layer: "debian-base",
          code: codeOf("debian.ts"),
          lock,
          packages: BASE_PACKAGES,
          user: RUN_USER,
        }),
        entries: () => {
          rmSync(work, { recursive: true, force: true });
          mmdebstrap({ rootfs, lock, debCache: join(IMAGES_DIR, "debs"), work, epoch, log: ctx.log });
          const drift = lockDrift(lock, installedPackages(rootfs));
          if (drift.length) {
            throw new Error(
              `the Debian mirror did not give what scripts/images/debian.lock pins:\n  ${drift.join("\n  ")}\n` +
                "Debian replaces superseded versions (point releases, security updates): refresh the lock with `npm run images -- --lock-debian`, review and commit it",
            );
          }
          finishRootfs(rootfs, epoch);
          return entriesOf(rootfs);
        },
        cleanup: () => rmSync(work, { recursive: true, force: true }),
      };
    },
    "node-runtime": () => ({
      key: contentKey({ ...common(epoch), layer: "node-runtime", code: codeOf("node-runtime.ts"), node: NODE_RUNTIME }),
      entries: () => nodeEntries(nodeRuntime(join(IMAGES_DIR, "node"), ctx.log, { root })),
    }),
    "companions-confine": () => {
      // Built by scripts/confine-binary.sh when not cached; keyed by the binary's own bytes.
      const binary = confineBinary(root);
      return {
        key: contentKey({
          ...common(epoch),
          layer: "companions-confine",
          code: codeOf("main.ts", "confine.ts"),
          path: CONFINE_PATH,
          binary: sha256File(binary),
        }),
        entries: () => confineEntries(binary),
      };
    },
    "companions-app": () => {
      const files = expandCopy(root, APP_COPY.companions.from);
      if (!files.length) throw new Error(`no ${APP_COPY.companions.from}: run npm run build`);
      const to = APP_COPY.companions.to.slice(1, -1);
      return {
        key: contentKey({
          ...common(epoch),
          layer: "companions-app",
          code: codeOf("main.ts"),
          to,
          files: files.map((f) => [basename(f), sha256File(f)]),
        }),
        entries: () => [dirEntry(to), ...files.map((f) => fileEntry(`${to}/${basename(f)}`, f))],
      };
    },
    "sandbox-harness": () => {
      const files = expandCopy(root, APP_COPY.sandbox.from);
      if (!files.some((f) => basename(f) === basename(HARNESS_JS)))
        throw new Error(`no ${basename(HARNESS_JS)} in ${APP_COPY.sandbox.from}: run npm run build`);
      const to = APP_COPY.sandbox.to.slice(1, -1);
      const owned = RUN_USER_DIRS.sandbox.map((d) => d.slice(1));
      return {
        key: contentKey({
          ...common(epoch),
          layer: "sandbox-harness",
          code: codeOf("main.ts"),
          uid: RUN_UID,
          files: files.map((f) => [basename(f), sha256File(f)]),
          owned,
          to,
        }),
        entries: () => [
          dirEntry("opt"),
          dirEntry(to),
          ...files.map((f) => fileEntry(`${to}/${basename(f)}`, f)),
          ...owned.map((d) => dirEntry(d, RUN_UID)),
        ],
      };
    },
    "controller-deps": () => {
      const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as Lockfile;
      const closure = controllerClosure(lock);
      const key = contentKey({
        ...common(epoch),
        layer: "controller-deps",
        code: codeOf("controller-deps.ts"),
        copy: APP_COPY.controller,
        uid: RUN_UID,
        packages: closureKey(lock, closure),
      });
      // dist/controller is the COPY source of scripts/images/controller.Dockerfile.
      const stage = join(root, dirname(APP_COPY.controller.from));
      stageControllerDeps({ root, lock, closure, stage, key });
      return { key, entries: () => controllerEntries(stage) };
    },
  };
}

export type BuildReport = {
  name: ImageName;
  ref: string;
  digest: string;
  layout: string;
  compressed: number;
  uncompressed: number;
  layers: Array<Layer & { id: LayerId; cached: boolean }>;
  pushed?: string;
};

/** Builds (or finds) every layer, once each, and assembles the images. */
export async function buildImages(
  ctx: Context,
  refs: Record<ImageName, string>,
  names = IMAGES,
  version: string = cfg.version,
): Promise<BuildReport[]> {
  const make = recipes(ctx);
  const layers = new Map<LayerId, Layer & { cached: boolean }>();
  const out: BuildReport[] = [];
  for (const name of names) {
    for (const id of LAYERS[name]) {
      if (layers.has(id)) continue;
      const recipe = make[id]();
      const t0 = Date.now();
      try {
        const layer = await ctx.store.layer(recipe.key, recipe.entries, ctx.epoch);
        ctx.log(
          `${id}: ${layer.cached ? "cached" : `built in ${((Date.now() - t0) / 1000).toFixed(1)}s`} ${layer.digest.slice(0, 19)}`,
        );
        layers.set(id, layer);
      } finally {
        recipe.cleanup?.();
      }
    }
    const own = LAYERS[name].map((id) => ({ id, ...layers.get(id)! }));
    const image: BuiltImage = assemble(ctx.store, {
      name,
      tag: version,
      config: imageConfig(RUN_CONFIG[name], labels(name, version), own),
      layers: own,
    });
    out.push({
      name,
      ref: refs[name],
      digest: image.manifest.digest,
      layout: image.layout,
      compressed: own.reduce((n, l) => n + l.size, 0) + image.config.size,
      uncompressed: own.reduce((n, l) => n + l.uncompressed, 0),
      layers: own,
    });
  }
  return out;
}

/** `KEY=VALUE` lines of `npm run cluster -- env` (KUBECONFIG, CRANE, JR2_REGISTRY once it runs one). */
export function clusterEnv(root = ROOT): Record<string, string> {
  const r = spawnSync("bash", [join(root, "dev", "cluster", "cluster.sh"), "env"], { encoding: "utf8" });
  if (r.status !== 0) return {};
  return Object.fromEntries(
    r.stdout
      .split("\n")
      .map((l) => /^([A-Z0-9_]+)=(.*)$/.exec(l))
      .filter((m): m is RegExpExecArray => !!m)
      .map((m) => [m[1], m[2]]),
  );
}

/** crane: the one `npm run cluster -- up` builds; built here the same way when it is not yet. */
export function cranePath(root = ROOT, log: (s: string) => void = () => {}): string {
  const crane = clusterEnv(root).CRANE;
  if (!crane) throw new Error("`npm run cluster -- env` named no CRANE: is dev/cluster/cluster.sh intact?");
  if (existsSync(crane)) return crane;
  log(`building crane into ${crane} (as npm run cluster -- up does)`);
  mkdirSync(dirname(crane), { recursive: true });
  const tmp = `${crane}.tmp.${process.pid}`;
  const r = spawnSync(
    "go",
    ["build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, "github.com/google/go-containerregistry/cmd/crane"],
    {
      cwd: join(root, "dev", "cluster", "go", "crane"),
      env: { ...process.env, CGO_ENABLED: "0", GOWORK: "off" },
      stdio: "inherit",
    },
  );
  if (r.error || r.status !== 0) {
    rmSync(tmp, { force: true });
    throw new Error(
      "building crane failed (Go 1.26+ must be on PATH; its output is above), or run npm run cluster -- up",
    );
  }
  renameSync(tmp, crane);
  return crane;
}

/** Pushes an image's layout under `ref`; returns `repo@digest` as the registry answered it. */
export function push(crane: string, report: BuildReport): string {
  const r = spawnSync(crane, ["push", report.layout, report.ref], { encoding: "utf8" });
  if (r.status !== 0) {
    throw new Error(
      `crane push ${report.ref} failed: ${r.stderr.trim().split("\n").pop()}\n` +
        `Is the registry up? \`npm run cluster -- up\` starts it; pass --no-push (or leave ${REGISTRY_ENV} unset) to build without pushing`,
    );
  }
  const pushed = r.stdout.trim();
  if (!pushed.endsWith(`@${report.digest}`))
    throw new Error(`crane pushed ${report.ref} as ${pushed}, not as built (${report.digest})`);
  return pushed;
}

/** The images each of dist/'s manifests names, per the image it should be. */
export function manifestImages(root = ROOT): { companions: string[]; controller: string[] } {
  // The `image:` lines, read as text: the module's manifest is most of a megabyte of YAML (the module
  // itself, base64 in a Secret), too slow to parse on every warm run.
  const images = (...files: string[]) => {
    const found = new Set<string>();
    for (const file of files) {
      if (!existsSync(file)) continue;
      for (const m of readFileSync(file, "utf8").matchAll(/^[ \t]*(?:- )?image: *["']?([^"'\s]+)["']?[ \t]*$/gm))
        found.add(m[1]);
    }
    return [...found].sort();
  };
  const dist = join(root, "dist");
  return {
    companions: images(
      join(dist, "jr2-orchestrator.yaml"),
      join(dist, "jr2-cache-agent.yaml"),
      join(dist, "jr2-egress.yaml"),
    ),
    controller: images(join(dist, `pepr-module-${cfg.pepr.uuid}.yaml`)),
  };
}

/** Whether dist/ was built naming these images (and holds the companions' bundles). */
export function builtFor(refs: Record<ImageName, string>, root = ROOT): { ok: boolean; why: string } {
  if (!expandCopy(root, APP_COPY.companions.from).length)
    return { ok: false, why: `${APP_COPY.companions.from} is missing` };
  const named = manifestImages(root);
  if (named.companions.join() !== refs.companions)
    return {
      ok: false,
      why: `dist/'s companion manifests name ${named.companions.join(", ") || "nothing"}, not ${refs.companions}`,
    };
  if (named.controller.join() !== refs.controller)
    return {
      ok: false,
      why: `dist/'s module manifest names ${named.controller.join(", ") || "nothing"}, not ${refs.controller}`,
    };
  return { ok: true, why: "" };
}

function runBuild(refs: Record<ImageName, string>, log: (s: string) => void) {
  log(`npm run build with ${IMAGE_ENV.companions}=${refs.companions} ${IMAGE_ENV.controller}=${refs.controller}`);
  const r = spawnSync("npm", ["run", "build", "--silent"], {
    cwd: ROOT,
    env: { ...process.env, [IMAGE_ENV.companions]: refs.companions, [IMAGE_ENV.controller]: refs.controller },
    encoding: "utf8",
    maxBuffer: 256 << 20,
    // pepr build reports bundle sizes on stdout: shown only when the build fails, with its errors.
    stdio: ["ignore", "pipe", "inherit"],
  });
  if (r.status !== 0) {
    process.stderr.write(r.stdout ?? "");
    throw new Error(`npm run build failed (exit ${r.status}): its output is above`);
  }
}

/** --lock-debian: the base's packages resolved afresh from the mirror, written to the lock. */
function lockDebian(epoch: number, log: (s: string) => void) {
  requireRootAndMmdebstrap();
  const work = join(IMAGES_DIR, "work", `lock-${process.pid}`);
  try {
    mmdebstrap({ rootfs: join(work, "rootfs"), debCache: join(IMAGES_DIR, "debs"), work, epoch, log });
    const installed = installedPackages(join(work, "rootfs"));
    const before = existsSync(LOCK_FILE) ? parseLock(readFileSync(LOCK_FILE, "utf8")) : [];
    writeFileSync(LOCK_FILE, formatLock(installed));
    const drift = lockDrift(before, installed);
    log(
      `${LOCK_FILE}: ${installed.length} packages${drift.length ? `; changed:\n  ${drift.join("\n  ")}` : ", unchanged"}`,
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

export function parseArgs(argv: string[]) {
  const o = {
    registry: undefined as string | undefined,
    push: true,
    build: false,
    lockDebian: false,
    checkSecurity: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--registry") {
      o.registry = argv[++i];
      if (!o.registry) throw new Error("--registry needs HOST:PORT");
    } else if (a.startsWith("--registry=")) o.registry = a.slice("--registry=".length);
    else if (a === "--no-push") o.push = false;
    else if (a === "--build") o.build = true;
    else if (a === "--lock-debian") o.lockDebian = true;
    else if (a === "--check-security") o.checkSecurity = true;
    else
      throw new Error(
        `unknown argument ${a}: npm run images [-- --registry HOST:PORT] [--no-push] [--build] [--lock-debian] [--check-security]`,
      );
  }
  return o;
}

const mb = (n: number) => `${(n / 1e6).toFixed(1)} MB`;

async function main() {
  const t0 = Date.now();
  const log = (s: string) => process.stderr.write(`[images] ${s}\n`);
  const args = parseArgs(process.argv.slice(2));
  const epoch = sourceDateEpoch(process.env);
  if (args.lockDebian) return lockDebian(epoch, log);
  if (args.checkSecurity) return checkSecurity(log);

  const registry = args.registry ?? (process.env[REGISTRY_ENV] || clusterEnv()[REGISTRY_ENV] || undefined);
  const refs = Object.fromEntries(IMAGES.map((n) => [n, imageRef(n, { env: process.env, registry })])) as Record<
    ImageName,
    string
  >;
  const built = builtFor(refs);
  if (args.build || !built.ok) {
    if (!args.build) log(`${built.why}: building`);
    runBuild(refs, log);
    const again = builtFor(refs);
    if (!again.ok) throw new Error(`after npm run build, ${again.why}`);
  }

  const store = new BlobStore(IMAGES_DIR);
  const reports = await buildImages({ root: ROOT, store, epoch, log }, refs);
  const crane = args.push && registry ? cranePath(ROOT, log) : undefined;
  for (const r of reports) if (crane) r.pushed = push(crane, r);
  writeFileSync(REPORT_FILE, JSON.stringify({ registry: registry ?? null, images: reports }, null, 2) + "\n");
  for (const r of reports) {
    process.stdout.write(
      `${r.name.padEnd(10)} ${r.pushed ?? `${r.ref} (not pushed)`}  ${mb(r.compressed)} compressed, ${mb(r.uncompressed)} uncompressed\n`,
    );
  }
  if (!crane)
    log(
      registry
        ? "not pushed (--no-push)"
        : `no registry (--registry, ${REGISTRY_ENV}, or npm run cluster -- up): not pushed`,
    );
  log(
    `done in ${((Date.now() - t0) / 1000).toFixed(1)}s; layouts under ${join(IMAGES_DIR, "layouts")}, report ${REPORT_FILE}`,
  );
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`[images] ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
