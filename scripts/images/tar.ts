// Image layers as reproducible tar streams (docs/decisions/0041-images-without-an-engine.md): every
// entry sorted by path, one fixed mtime, numeric owners with no user or group names, no atime or
// ctime, PAX records only where ustar cannot hold a path. The same tree gives the same bytes.
import { createHash } from "node:crypto";
import { createReadStream, lstatSync, readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { Readable } from "node:stream";

type Owner = { mode: number; uid: number; gid: number };

/** One entry of a layer. Paths are relative to the image's root, with no leading `/` or `./`. */
export type TarEntry =
  | (Owner & { path: string; type: "dir" })
  | (Owner & { path: string; type: "file"; size: number; source: { file: string } | { bytes: Buffer } })
  | (Owner & { path: string; type: "symlink"; target: string })
  | (Owner & { path: string; type: "hardlink"; target: string });

const BLOCK = 512;
const TYPEFLAG = { file: "0", hardlink: "1", symlink: "2", dir: "5", pax: "x" } as const;

/** Byte order of UTF-8, so the order never depends on the locale. A parent sorts before its children. */
export const byPath = (a: { path: string }, b: { path: string }) =>
  Buffer.compare(Buffer.from(a.path, "utf8"), Buffer.from(b.path, "utf8"));

function checkPath(path: string) {
  if (!path || path.startsWith("/") || path.startsWith("./") || path.endsWith("/") || path.split("/").includes("..")) {
    throw new Error(`tar entry path "${path}" must be relative, without "./", "..", or a trailing "/"`);
  }
}

function octal(value: number, width: number): string {
  const s = value.toString(8);
  if (s.length > width - 1) throw new Error(`${value} does not fit a ${width}-byte tar field`);
  return s.padStart(width - 1, "0") + "\0";
}

/** The PAX records for what a ustar header cannot hold (long or non-ASCII paths and link targets). */
function paxRecords(name: string, link: string): Buffer | undefined {
  const fits = (s: string, max: number) => /^[\x20-\x7e]*$/.test(s) && Buffer.byteLength(s) <= max;
  const records: string[] = [];
  const record = (key: string, value: string) => {
    // The length counts itself: grow the digit count until it is stable.
    const body = ` ${key}=${value}\n`;
    let len = Buffer.byteLength(body);
    while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
    records.push(`${len}${body}`);
  };
  if (!fits(name, 100)) record("path", name);
  if (!fits(link, 100)) record("linkpath", link);
  return records.length ? Buffer.from(records.join(""), "utf8") : undefined;
}

function header(o: {
  name: string;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: number;
  type: string;
  link: string;
}): Buffer {
  const h = Buffer.alloc(BLOCK, 0);
  // Fields that need PAX carry a truncated ASCII stand-in here; readers take the PAX value.
  const ascii = (s: string, max: number) => Buffer.from(s.replace(/[^\x20-\x7e]/g, "_").slice(0, max), "ascii");
  ascii(o.name, 100).copy(h, 0);
  h.write(octal(o.mode & 0o7777, 8), 100, "ascii");
  h.write(octal(o.uid, 8), 108, "ascii");
  h.write(octal(o.gid, 8), 116, "ascii");
  h.write(octal(o.size, 12), 124, "ascii");
  h.write(octal(o.mtime, 12), 136, "ascii");
  h.write("        ", 148, "ascii");
  h.write(o.type, 156, "ascii");
  ascii(o.link, 100).copy(h, 157);
  h.write("ustar\0", 257, "ascii");
  h.write("00", 263, "ascii");
  // uname and gname stay empty: owners are numbers, as the runtime reads them.
  h.write(octal(0, 8), 329, "ascii");
  h.write(octal(0, 8), 337, "ascii");
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(octal(sum, 7) + " ", 148, "ascii");
  return h;
}

const padding = (size: number) => Buffer.alloc((BLOCK - (size % BLOCK)) % BLOCK, 0);

/**
 * The tar stream of `entries` in path order, every mtime `mtime` (seconds). A file's bytes are read
 * when the stream reaches it; one whose size changed since it was listed fails the stream.
 */
export function tarStream(entries: TarEntry[], mtime: number): Readable {
  const sorted = [...entries].sort(byPath);
  for (let i = 0; i < sorted.length; i++) {
    checkPath(sorted[i].path);
    if (i > 0 && sorted[i].path === sorted[i - 1].path)
      throw new Error(`tar entry "${sorted[i].path}" is listed twice`);
  }
  async function* generate() {
    for (const e of sorted) {
      const name = e.type === "dir" ? `${e.path}/` : e.path;
      const link = e.type === "symlink" || e.type === "hardlink" ? e.target : "";
      const size = e.type === "file" ? e.size : 0;
      const pax = paxRecords(name, link);
      if (pax) {
        const base = e.path.split("/").pop()!;
        const paxName = `PaxHeaders/${base}`;
        yield header({
          name: paxName,
          mode: 0o644,
          uid: 0,
          gid: 0,
          size: pax.length,
          mtime,
          type: TYPEFLAG.pax,
          link: "",
        });
        yield pax;
        yield padding(pax.length);
      }
      yield header({ name, mode: e.mode, uid: e.uid, gid: e.gid, size, mtime, type: TYPEFLAG[e.type], link });
      if (e.type !== "file") continue;
      if ("bytes" in e.source) {
        if (e.source.bytes.length !== size)
          throw new Error(`tar entry "${e.path}": ${e.source.bytes.length} bytes, listed as ${size}`);
        yield e.source.bytes;
      } else {
        let read = 0;
        for await (const chunk of createReadStream(e.source.file)) {
          read += (chunk as Buffer).length;
          if (read > size) break;
          yield chunk as Buffer;
        }
        if (read !== size)
          throw new Error(`${e.source.file} changed while it was packed (${read} bytes, listed as ${size})`);
      }
      yield padding(size);
    }
    // The end of the archive: two zero blocks.
    yield Buffer.alloc(2 * BLOCK, 0);
  }
  return Readable.from(generate(), { objectMode: false });
}

/**
 * The entries of a directory tree as it lies on disk, under `prefix` in the image: modes and owners
 * as they are, a file with several links packed once and linked after. Sockets, fifos and device
 * nodes are refused (a runtime provides /dev); `skip` leaves out a path (relative to `dir`) and all
 * under it.
 */
export function entriesOf(dir: string, prefix = "", skip: (rel: string) => boolean = () => false): TarEntry[] {
  const out: TarEntry[] = [];
  const inodeOf = new Map<TarEntry, string>();
  const walk = (rel: string) => {
    for (const name of readdirSync(rel ? join(dir, rel) : dir)) {
      const r = rel ? `${rel}/${name}` : name;
      if (skip(r)) continue;
      const full = join(dir, r);
      const st = lstatSync(full);
      const path = prefix ? `${prefix}/${r}` : r;
      const owner = { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
      if (st.isDirectory()) {
        out.push({ path, type: "dir", ...owner });
        walk(r);
      } else if (st.isSymbolicLink()) {
        out.push({ path, type: "symlink", target: readlinkSync(full), ...owner });
      } else if (st.isFile()) {
        const e: TarEntry = { path, type: "file", size: st.size, source: { file: full }, ...owner };
        if (st.nlink > 1) inodeOf.set(e, `${st.dev}:${st.ino}`);
        out.push(e);
      } else {
        throw new Error(`${full} is not a file, directory or symlink: remove it before packing the layer`);
      }
    }
  };
  walk("");
  // Files with several links: the first in path order carries the bytes, the others link to it.
  out.sort(byPath);
  const firstOf = new Map<string, string>();
  return out.map((e) => {
    const inode = inodeOf.get(e);
    if (inode === undefined) return e;
    const first = firstOf.get(inode);
    if (first === undefined) {
      firstOf.set(inode, e.path);
      return e;
    }
    return { path: e.path, type: "hardlink", target: first, mode: e.mode, uid: e.uid, gid: e.gid };
  });
}

/** sha256 of a byte stream, as a digest string, with its length; passes the bytes on. */
export function sha256Counter() {
  const hash = createHash("sha256");
  let size = 0;
  return {
    update(chunk: Buffer) {
      hash.update(chunk);
      size += chunk.length;
    },
    result: () => ({ digest: `sha256:${hash.digest("hex")}`, size }),
  };
}
