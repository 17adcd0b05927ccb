// The Python client (clients/python) as a wheel and an sdist, written here (decision 0073): no
// build backend can be installed offline, and the client is pure Python, so its wheel is a zip of
// the package and a .dist-info (PEP 427: METADATA, WHEEL, RECORD with each file's sha256) and its
// sdist a tar.gz of the sources with PKG-INFO (PEP 517/625 layout), which pip builds with the
// project's own backend (setuptools) where one is installed. Every file's time is the release's
// SOURCE_DATE_EPOCH, so the same sources give the same bytes.
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { crc32, deflateRawSync, gzipSync } from "node:zlib";
import { tarStream, type TarEntry } from "../images/tar";

/** `[project]` of pyproject.toml, as the release needs it. */
export type PyProject = {
  name: string;
  description?: string;
  readme?: string;
  license?: { text?: string } | string;
  "requires-python"?: string;
  dependencies?: string[];
  urls?: Record<string, string>;
};

/**
 * A release version as PEP 440 writes it: `1.2.3` stays, a semver pre-release `-rc.1`, `-beta.2`,
 * `-alpha.3` becomes `rc1`, `b2`, `a3`, and `-dev.4` becomes `.dev4`. Anything else is refused.
 */
export function pep440(version: string): string {
  const m = /^(\d+\.\d+\.\d+)(?:-(alpha|a|beta|b|rc|dev)\.?(\d+))?$/.exec(version);
  if (!m)
    throw new Error(
      `--version ${version}: a release version is MAJOR.MINOR.PATCH, optionally -rc.N, -beta.N, -alpha.N or -dev.N (the Python client's version must be PEP 440)`,
    );
  if (!m[2]) return m[1];
  const tag = { alpha: "a", a: "a", beta: "b", b: "b", rc: "rc", dev: ".dev" }[m[2]]!;
  return `${m[1]}${tag}${m[3]}`;
}

/** PEP 503 normalised name, with `_` for the wheel's file name (PEP 427). */
export const distName = (name: string) => name.toLowerCase().replace(/[-_.]+/g, "_");

export function metadata(p: PyProject, version: string, readme: string | undefined): string {
  const license = typeof p.license === "string" ? p.license : p.license?.text;
  const lines = ["Metadata-Version: 2.1", `Name: ${p.name}`, `Version: ${version}`];
  if (p.description) lines.push(`Summary: ${p.description}`);
  if (license) lines.push(`License: ${license}`);
  if (p["requires-python"]) lines.push(`Requires-Python: ${p["requires-python"]}`);
  for (const [k, v] of Object.entries(p.urls ?? {})) lines.push(`Project-URL: ${k}, ${v}`);
  for (const d of p.dependencies ?? []) lines.push(`Requires-Dist: ${d}`);
  if (readme !== undefined) lines.push("Description-Content-Type: text/markdown");
  return lines.join("\n") + "\n" + (readme !== undefined ? `\n${readme}` : "");
}

/** The package's files: every file under the package directory but bytecode. */
export function packageFiles(dir: string, pkg: string): Array<{ path: string; bytes: Buffer }> {
  const out: Array<{ path: string; bytes: Buffer }> = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (name === "__pycache__" || name.endsWith(".pyc")) continue;
      if (statSync(p).isDirectory()) walk(p);
      else out.push({ path: relative(dir, p).split("\\").join("/"), bytes: readFileSync(p) });
    }
  };
  walk(join(dir, pkg));
  return out;
}

const b64url = (b: Buffer) => b.toString("base64url");
const sha256 = (b: Buffer) => createHash("sha256").update(b).digest();

/** A zip archive (deflated entries, fixed time, no extra fields). */
export function zip(files: Array<{ path: string; bytes: Buffer }>, epoch: number): Buffer {
  const d = new Date(epoch * 1000);
  const dosTime = (d.getUTCHours() << 11) | (d.getUTCMinutes() << 5) | (d.getUTCSeconds() >> 1);
  const dosDate = ((d.getUTCFullYear() - 1980) << 9) | ((d.getUTCMonth() + 1) << 5) | d.getUTCDate();
  const locals: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const f of files) {
    const name = Buffer.from(f.path, "utf8");
    const data = deflateRawSync(f.bytes, { level: 9 });
    const crc = crc32(f.bytes);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(8, 8); // deflate
    local.writeUInt16LE(dosTime, 10);
    local.writeUInt16LE(dosDate, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(f.bytes.length, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28);
    const head = Buffer.alloc(46);
    head.writeUInt32LE(0x02014b50, 0);
    head.writeUInt16LE((3 << 8) | 20, 4); // made by: Unix
    head.writeUInt16LE(20, 6);
    head.writeUInt16LE(0x0800, 8);
    head.writeUInt16LE(8, 10);
    head.writeUInt16LE(dosTime, 12);
    head.writeUInt16LE(dosDate, 14);
    head.writeUInt32LE(crc, 16);
    head.writeUInt32LE(data.length, 20);
    head.writeUInt32LE(f.bytes.length, 24);
    head.writeUInt16LE(name.length, 28);
    head.writeUInt32LE((0o100644 << 16) >>> 0, 38); // -rw-r--r--
    head.writeUInt32LE(offset, 42);
    locals.push(local, name, data);
    central.push(head, name);
    offset += local.length + name.length + data.length;
  }
  const cd = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(files.length, 8);
  end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}

export type PythonDists = { wheel: { file: string; bytes: Buffer }; sdist: { file: string; bytes: Buffer } };

/**
 * The wheel and sdist of a pure-Python project at `dir` (its pyproject.toml's `[project]` given as
 * `project`, its one import package `pkg`), at `version` (PEP 440).
 */
export async function pythonDists(o: {
  dir: string;
  project: PyProject;
  pkg: string;
  version: string;
  epoch: number;
}): Promise<PythonDists> {
  const { dir, project, pkg, version, epoch } = o;
  const name = distName(project.name);
  const readme = project.readme ? readFileSync(join(dir, project.readme), "utf8") : undefined;
  const meta = metadata(project, version, readme);
  const files = packageFiles(dir, pkg);
  if (!files.some((f) => f.path === `${pkg}/__init__.py`))
    throw new Error(`python client: ${join(dir, pkg)}/__init__.py is missing: is ${pkg} the import package?`);

  const info = `${name}-${version}.dist-info`;
  const wheelFiles = [
    ...files,
    { path: `${info}/METADATA`, bytes: Buffer.from(meta) },
    {
      path: `${info}/WHEEL`,
      bytes: Buffer.from("Wheel-Version: 1.0\nGenerator: jr2-release\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
    },
    { path: `${info}/top_level.txt`, bytes: Buffer.from(`${pkg}\n`) },
  ];
  const record =
    wheelFiles.map((f) => `${f.path},sha256=${b64url(sha256(f.bytes))},${f.bytes.length}`).join("\n") +
    `\n${info}/RECORD,,\n`;
  wheelFiles.push({ path: `${info}/RECORD`, bytes: Buffer.from(record) });

  // The sdist: the sources as they are, pyproject.toml at the release's version, and PKG-INFO.
  const top = `${name}-${version}`;
  const pyproject = readFileSync(join(dir, "pyproject.toml"), "utf8");
  const versioned = pyproject.replace(/^version\s*=\s*"[^"]*"/m, `version = "${version}"`);
  if (versioned === pyproject && !pyproject.includes(`version = "${version}"`))
    throw new Error(
      `python client: ${join(dir, "pyproject.toml")} has no \`version = "..."\` line in [project] to set`,
    );
  const sources = [
    { path: "PKG-INFO", bytes: Buffer.from(meta) },
    { path: "pyproject.toml", bytes: Buffer.from(versioned) },
    ...(project.readme ? [{ path: project.readme, bytes: readFileSync(join(dir, project.readme)) }] : []),
    ...files,
  ];
  const dirs = new Set<string>([top]);
  for (const f of sources) {
    const parts = `${top}/${f.path}`.split("/");
    for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
  }
  const entries: TarEntry[] = [
    ...[...dirs].map((path) => ({ path, type: "dir" as const, mode: 0o755, uid: 0, gid: 0 })),
    ...sources.map((f) => ({
      path: `${top}/${f.path}`,
      type: "file" as const,
      mode: 0o644,
      uid: 0,
      gid: 0,
      size: f.bytes.length,
      source: { bytes: f.bytes },
    })),
  ];
  const chunks: Buffer[] = [];
  for await (const c of tarStream(entries, epoch)) chunks.push(c as Buffer);
  return {
    wheel: { file: `${name}-${version}-py3-none-any.whl`, bytes: zip(wheelFiles, epoch) },
    sdist: { file: `${top}.tar.gz`, bytes: gzipSync(Buffer.concat(chunks), { level: 9 }) },
  };
}
