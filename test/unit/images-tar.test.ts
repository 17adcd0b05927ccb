// Layers are reproducible (decision 0041): the same tree gives the same tar and the same gzip blob
// whatever order it was made in and whenever; GNU tar reads back what was meant (owners, modes,
// links, long and non-ASCII paths); a layer is cached by its key and never rebuilt for it.
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { BlobStore, assemble, contentKey, imageConfig } from "../../scripts/images/oci";
import { RUN_CONFIG, labels } from "../../scripts/images/spec";
import { entriesOf, tarStream, type TarEntry } from "../../scripts/images/tar";

const EPOCH = 1796342400;
let tmp: string;
beforeEach(() => {
  tmp = mkdtempSync(join(tmpdir(), "jr2-images-tar-"));
});
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

async function bytesOf(entries: TarEntry[]): Promise<Buffer> {
  const chunks: Buffer[] = [];
  await pipeline(
    tarStream(entries, EPOCH),
    new Writable({
      write(chunk: Buffer, _e, done) {
        chunks.push(chunk);
        done();
      },
    }),
  );
  return Buffer.concat(chunks);
}

const LONG = `deep/${"d".repeat(90)}/${"f".repeat(40)}.txt`;

/** The same tree, its files written in `order`, with mtimes of `when`. */
function makeTree(dir: string, order: "forward" | "backward", when: number) {
  const files: Array<[string, string]> = [
    ["a/one.txt", "one\n"],
    ["a/two.txt", "two\n"],
    ["b/three", "#!/bin/sh\necho three\n"],
    [LONG, "long\n"],
    ["é/unicode.txt", "é\n"],
  ];
  for (const [rel, text] of order === "forward" ? files : [...files].reverse()) {
    mkdirSync(join(dir, rel, ".."), { recursive: true });
    writeFileSync(join(dir, rel), text);
  }
  chmodSync(join(dir, "b/three"), 0o4755);
  symlinkSync("../a/one.txt", join(dir, "b/link"));
  linkSync(join(dir, "a/two.txt"), join(dir, "b/two-again"));
  for (const rel of ["a/one.txt", "a/two.txt", "b/three", LONG, "é/unicode.txt", "a", "b"])
    utimesSync(join(dir, rel), when, when);
}

const list = (tarFile: string) =>
  execFileSync("tar", ["--numeric-owner", "--full-time", "-tvf", tarFile], {
    encoding: "utf8",
    env: { ...process.env, TZ: "UTC", LC_ALL: "C.UTF-8" },
  });

test("the same tree gives the same bytes, whatever order and time it was made in", async () => {
  makeTree(join(tmp, "x"), "forward", 1_000_000);
  makeTree(join(tmp, "y"), "backward", 2_000_000_000);
  const x = await bytesOf(entriesOf(join(tmp, "x")));
  const y = await bytesOf(entriesOf(join(tmp, "y")));
  expect(x.equals(y)).toBe(true);
  // And a different content is a different archive.
  writeFileSync(join(tmp, "y", "a/one.txt"), "ONE\n");
  expect((await bytesOf(entriesOf(join(tmp, "y")))).equals(x)).toBe(false);
});

test("GNU tar reads back sorted entries, one mtime, numeric owners, modes, links and long paths", async () => {
  makeTree(join(tmp, "x"), "forward", 1_000_000);
  const entries = entriesOf(join(tmp, "x"), "opt/tree").map((e) => ({ ...e, uid: 65532, gid: 65532 }));
  writeFileSync(join(tmp, "x.tar"), await bytesOf(entries));
  const lines = list(join(tmp, "x.tar")).trim().split("\n");
  const names = lines.map((l) => l.split(/\s+/).slice(5).join(" "));
  expect(names).toEqual([
    "opt/tree/a/",
    "opt/tree/a/one.txt",
    "opt/tree/a/two.txt",
    "opt/tree/b/",
    "opt/tree/b/link -> ../a/one.txt",
    "opt/tree/b/three",
    "opt/tree/b/two-again link to opt/tree/a/two.txt",
    "opt/tree/deep/",
    `opt/tree/deep/${"d".repeat(90)}/`,
    `opt/tree/${LONG}`,
    "opt/tree/é/",
    "opt/tree/é/unicode.txt",
  ]);
  for (const l of lines) {
    expect(l).toContain(" 65532/65532 ");
    expect(l).toContain("2026-12-04 00:00:00");
  }
  expect(lines.find((l) => l.endsWith("b/three"))).toMatch(/^-rwsr-xr-x /);
  // Extracted, the content is the tree's.
  mkdirSync(join(tmp, "out"));
  execFileSync("tar", ["-xf", join(tmp, "x.tar"), "-C", join(tmp, "out")]);
  expect(readFileSync(join(tmp, "out", "opt/tree", LONG), "utf8")).toBe("long\n");
  expect(readFileSync(join(tmp, "out", "opt/tree/b/two-again"), "utf8")).toBe("two\n");
});

test("entries are refused when a path is absolute, climbs, or is listed twice", async () => {
  const dir = (path: string): TarEntry => ({ path, type: "dir", mode: 0o755, uid: 0, gid: 0 });
  await expect(bytesOf([dir("/abs")])).rejects.toThrow(/must be relative/);
  await expect(bytesOf([dir("a/../b")])).rejects.toThrow(/must be relative/);
  await expect(bytesOf([dir("a"), dir("a")])).rejects.toThrow(/listed twice/);
});

test("a file that changes size while it is packed fails the layer, naming it", async () => {
  writeFileSync(join(tmp, "f"), "12345");
  const entries = entriesOf(tmp);
  writeFileSync(join(tmp, "f"), "123");
  await expect(bytesOf(entries)).rejects.toThrow(/changed while it was packed/);
});

test("a layer is stored under its digest, cached by its key, and the same from a second store", async () => {
  makeTree(join(tmp, "x"), "forward", 1_000_000);
  const one = new BlobStore(join(tmp, "store1"));
  const key = contentKey({ test: 1 });
  let made = 0;
  const entries = () => {
    made++;
    return entriesOf(join(tmp, "x"), "app");
  };
  const first = await one.layer(key, entries, EPOCH);
  expect(first.cached).toBe(false);
  expect(first.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
  expect(first.diffId).not.toBe(first.digest);
  const again = await one.layer(key, entries, EPOCH);
  expect(again).toEqual({ ...first, cached: true });
  expect(made).toBe(1);
  // A blob that went missing is made again, not trusted from the key's record.
  rmSync(one.blobPath(first.digest));
  expect((await one.layer(key, entries, EPOCH)).cached).toBe(false);
  const other = await new BlobStore(join(tmp, "store2")).layer(key, entries, EPOCH);
  expect({ digest: other.digest, diffId: other.diffId, size: other.size }).toEqual({
    digest: first.digest,
    diffId: first.diffId,
    size: first.size,
  });
});

test("the config holds no timestamp, and the layout holds one image pointing at its blobs", async () => {
  makeTree(join(tmp, "x"), "forward", 1_000_000);
  const store = new BlobStore(join(tmp, "store"));
  const layer = await store.layer(contentKey({ t: 2 }), () => entriesOf(join(tmp, "x"), "app"), EPOCH);
  const config = imageConfig(RUN_CONFIG.companions, labels("companions"), [layer]);
  expect(Object.keys(config).sort()).toEqual(["architecture", "config", "os", "rootfs"]);
  expect(JSON.stringify(config)).not.toMatch(/created|history|20\d\d-\d\d-\d\dT/);
  const a = assemble(store, { name: "companions", tag: "0.1.0", config, layers: [layer] });
  const b = assemble(store, { name: "companions", tag: "0.1.0", config, layers: [layer] });
  expect(b).toEqual(a);
  const index = JSON.parse(readFileSync(join(a.layout, "index.json"), "utf8"));
  expect(index.manifests).toHaveLength(1);
  expect(index.manifests[0].digest).toBe(a.manifest.digest);
  const manifest = JSON.parse(readFileSync(join(a.layout, "blobs", "sha256", a.manifest.digest.slice(7)), "utf8"));
  expect(manifest.config.digest).toBe(a.config.digest);
  expect(manifest.layers.map((l: { digest: string }) => l.digest)).toEqual([layer.digest]);
  for (const d of [a.config.digest, layer.digest])
    expect(readFileSync(join(a.layout, "blobs", "sha256", d.slice(7))).length).toBeGreaterThan(0);
});
