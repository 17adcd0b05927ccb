// What the controller image holds at /opt/jr2-controller/node_modules, linked from /app/node_modules
// (docs/decisions/0041-images-without-an-engine.md, 0047):
// the packages Pepr's controller and the module load at run time, at the versions package-lock.json
// pins, copied from the node_modules `npm ci` installed. Pepr's own image installs all of Pepr's
// dependencies and deletes what its CLI alone needs; here the closure is walked from what runs.
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONTROLLER_MODULES, RUN_UID } from "./spec";
import { entriesOf, type TarEntry } from "./tar";

type LockEntry = {
  version?: string;
  integrity?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  os?: string[];
  cpu?: string[];
  hasInstallScript?: boolean;
};
export type Lockfile = { lockfileVersion: number; packages: Record<string, LockEntry> };

/**
 * Where the walk starts. The module (dist/pepr-<uuid>.js, delivered in a Secret and forked by the
 * controller from /app) requires `pepr`, `kubernetes-fluent-client` and `@kubernetes/client-node`;
 * Pepr's dist/controller.js and dist/lib.js require the rest; pino loads `pino-pretty` by name when
 * PEPR_PRETTY_LOGS is "true". Pepr's own dependencies are not followed: most serve its CLI.
 */
export const CONTROLLER_ROOTS = [
  "pepr",
  "@kubernetes/client-node",
  "kubernetes-fluent-client",
  "express",
  "fast-json-patch",
  "http-status-codes",
  "json-pointer",
  "pino",
  "pino-pretty",
  "prom-client",
  "ramda",
];

/** Packages nothing at run time loads: the walk does not enter them. */
export const NOT_AT_RUNTIME: Array<{ match: RegExp; why: string }> = [
  { match: /^(tsx|quicktype-core|yargs)$/, why: "kubernetes-fluent-client's CLI (generate, crd-manifests) alone" },
  { match: /^@types\//, why: "type declarations" },
  { match: /^bare-/, why: "the Bare runtime's modules, behind a `bare` export condition Node never matches" },
];

/** Files left out of every package: TypeScript sources and declarations, source maps. */
export const DROPPED_FILE = /\.(d\.[cm]?ts|[cm]?ts|map)$/;

/** The lock path a package `name` required from the package at `from` resolves to (Node's walk up). */
export function resolveIn(lock: Lockfile, from: string, name: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = `${base ? `${base}/` : ""}node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (!base) return undefined;
    const i = base.lastIndexOf("/node_modules/");
    base = i < 0 ? "" : base.slice(0, i);
  }
}

const runsHere = (e: LockEntry) => (!e.os || e.os.includes("linux")) && (!e.cpu || e.cpu.includes("x64"));

/** The lock paths the controller needs, sorted. */
export function controllerClosure(lock: Lockfile): string[] {
  const seen = new Set<string>();
  const queue: string[] = [];
  for (const root of CONTROLLER_ROOTS) {
    const p = resolveIn(lock, "node_modules/pepr", root);
    if (!p)
      throw new Error(`package-lock.json has no ${root}, which the controller image needs: run npm install ${root}`);
    queue.push(p);
  }
  while (queue.length) {
    const p = queue.pop()!;
    if (seen.has(p)) continue;
    seen.add(p);
    if (p === "node_modules/pepr") continue;
    const e = lock.packages[p];
    const optional = e.optionalDependencies ?? {};
    for (const name of Object.keys({ ...e.dependencies, ...optional })) {
      if (NOT_AT_RUNTIME.some((x) => x.match.test(name))) continue;
      const d = resolveIn(lock, p, name);
      if (!d) {
        if (name in optional) continue;
        throw new Error(`package-lock.json: ${p} depends on ${name}, which it does not hold: run npm install`);
      }
      if (runsHere(lock.packages[d])) queue.push(d);
    }
  }
  const scripted = [...seen].filter((p) => lock.packages[p].hasInstallScript);
  if (scripted.length) {
    // npm here runs no install scripts, so what they would build is not in node_modules.
    throw new Error(
      `the controller's packages ${scripted.join(", ")} have install scripts: decide how the image gets what they build (decision 0041)`,
    );
  }
  return [...seen].sort();
}

/** The key of the controller's packages: each one's lock path, version and integrity. */
export function closureKey(lock: Lockfile, closure: string[]) {
  return closure.map((p) => [p, lock.packages[p].version, lock.packages[p].integrity]);
}

/**
 * Copies the closure from `root`/node_modules to `stage`/node_modules (each package without its
 * nested node_modules, which the closure lists on their own, and without DROPPED_FILE), after
 * checking each installed version is the locked one. Skipped when `stage` holds this key already.
 */
export function stageControllerDeps(o: {
  root: string;
  lock: Lockfile;
  closure: string[];
  stage: string;
  key: string;
}) {
  const stamp = join(o.stage, ".key");
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === o.key) return;
  for (const p of o.closure) {
    const pj = join(o.root, p, "package.json");
    const installed = existsSync(pj)
      ? (JSON.parse(readFileSync(pj, "utf8")) as { version?: string }).version
      : undefined;
    const locked = o.lock.packages[p].version;
    if (installed !== locked) {
      throw new Error(`${p} is ${installed ?? "not installed"}, package-lock.json says ${locked}: run npm ci`);
    }
  }
  rmSync(o.stage, { recursive: true, force: true });
  for (const p of o.closure) {
    const from = join(o.root, p);
    cpSync(from, join(o.stage, p), {
      recursive: true,
      filter: (src) => src !== join(from, "node_modules") && !DROPPED_FILE.test(src),
    });
  }
  mkdirSync(o.stage, { recursive: true });
  writeFileSync(stamp, o.key);
}

/**
 * The controller's layer: /app writable by the run user (the controller writes the module it is
 * given there before forking it), the packages root-owned and read-only to it under /opt, so a
 * Deployment may mount an emptyDir at /app over a read-only root (decision 0047);
 * /app/node_modules links to them for a Deployment that does not.
 */
export function controllerEntries(stage: string): TarEntry[] {
  const modules = CONTROLLER_MODULES.slice(1);
  const normal = (e: TarEntry): TarEntry => {
    const mode = e.type === "dir" || e.mode & 0o111 ? 0o755 : e.type === "symlink" ? 0o777 : 0o644;
    return { ...e, mode, uid: 0, gid: 0 };
  };
  return [
    { path: "app", type: "dir", mode: 0o755, uid: RUN_UID, gid: RUN_UID },
    { path: "app/node_modules", type: "symlink", target: CONTROLLER_MODULES, mode: 0o777, uid: 0, gid: 0 },
    ...modules.split("/").map((_, i, parts) => ({
      path: parts.slice(0, i + 1).join("/"),
      type: "dir" as const,
      mode: 0o755,
      uid: 0,
      gid: 0,
    })),
    ...entriesOf(join(stage, "node_modules"), modules).map(normal),
  ];
}
