// OCI images on disk with no engine (docs/decisions/0041-images-without-an-engine.md): a blob store
// shared by every image, layers cached by a key of what went into them, and one OCI image layout
// per image (index.json, oci-layout, blobs hard-linked from the store) that crane pushes as it is.
import { createHash, randomBytes } from "node:crypto";
import {
  copyFileSync,
  createWriteStream,
  existsSync,
  linkSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { constants, createGzip } from "node:zlib";
import type { RunConfig } from "./spec";
import { sha256Counter, tarStream, type TarEntry } from "./tar";

export const MEDIA = {
  manifest: "application/vnd.oci.image.manifest.v1+json",
  index: "application/vnd.oci.image.index.v1+json",
  config: "application/vnd.oci.image.config.v1+json",
  layer: "application/vnd.oci.image.layer.v1.tar+gzip",
} as const;

export type Descriptor = { mediaType: string; digest: string; size: number };
/** A layer as the manifest and the config name it: its gzip blob and the digest of its tar. */
export type Layer = { digest: string; size: number; diffId: string; uncompressed: number };

/** gzip level 9: built once per content key, pulled by every node. */
const GZIP = { level: constants.Z_BEST_COMPRESSION };

/** The hash of anything that decides a layer's bytes: a change anywhere makes a new key. */
export function contentKey(parts: unknown): string {
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex");
}

export class BlobStore {
  constructor(readonly root: string) {
    mkdirSync(join(root, "blobs", "sha256"), { recursive: true });
    mkdirSync(join(root, "layers"), { recursive: true });
    mkdirSync(join(root, "tmp"), { recursive: true });
  }

  blobPath(digest: string): string {
    const [alg, hex] = digest.split(":");
    if (alg !== "sha256" || !/^[0-9a-f]{64}$/.test(hex ?? "")) throw new Error(`not a sha256 digest: ${digest}`);
    return join(this.root, "blobs", "sha256", hex);
  }

  has(d: { digest: string; size: number }): boolean {
    const p = this.blobPath(d.digest);
    return existsSync(p) && statSync(p).size === d.size;
  }

  tmp(): string {
    return join(this.root, "tmp", `${process.pid}-${randomBytes(6).toString("hex")}`);
  }

  /** Stores bytes under their digest (once) and describes them. */
  put(mediaType: string, bytes: Buffer): Descriptor {
    const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
    const d = { mediaType, digest, size: bytes.length };
    if (!this.has(d)) {
      const t = this.tmp();
      writeFileSync(t, bytes);
      renameSync(t, this.blobPath(digest));
    }
    return d;
  }

  /** The layer cached under `key`, if its blob is still here. */
  cachedLayer(key: string): Layer | undefined {
    const p = join(this.root, "layers", `${key}.json`);
    if (!existsSync(p)) return undefined;
    const layer = JSON.parse(readFileSync(p, "utf8")) as Layer;
    return this.has(layer) ? layer : undefined;
  }

  /**
   * The layer of `entries` (cached under `key`): the tar hashed for the config's diff_ids, then
   * gzipped into the store. `entries` is only called when the key is not cached.
   */
  async layer(
    key: string,
    entries: () => TarEntry[] | Promise<TarEntry[]>,
    mtime: number,
  ): Promise<Layer & { cached: boolean }> {
    const hit = this.cachedLayer(key);
    if (hit) return { ...hit, cached: true };
    const diff = sha256Counter();
    const blob = sha256Counter();
    const count = (c: ReturnType<typeof sha256Counter>) =>
      new Transform({
        transform(chunk: Buffer, _enc, done) {
          c.update(chunk);
          done(null, chunk);
        },
      });
    const t = this.tmp();
    try {
      await pipeline(
        tarStream(await entries(), mtime),
        count(diff),
        createGzip(GZIP),
        count(blob),
        createWriteStream(t),
      );
    } catch (err) {
      rmSync(t, { force: true });
      throw err;
    }
    const b = blob.result();
    const d = diff.result();
    renameSync(t, this.blobPath(b.digest));
    const layer: Layer = { digest: b.digest, size: b.size, diffId: d.digest, uncompressed: d.size };
    writeFileSync(join(this.root, "layers", `${key}.json`), JSON.stringify(layer, null, 2) + "\n");
    return { ...layer, cached: false };
  }
}

/**
 * The image config: the platform, the run config and the layers' diff_ids, nothing else. No
 * `created`, no `history`: a timestamp would make every build a new digest.
 */
export function imageConfig(run: RunConfig, labels: Record<string, string>, layers: Layer[]) {
  return {
    architecture: "amd64",
    os: "linux",
    config: { ...run, Labels: labels },
    rootfs: { type: "layers", diff_ids: layers.map((l) => l.diffId) },
  };
}

export type BuiltImage = {
  manifest: Descriptor;
  config: Descriptor;
  layers: Layer[];
  /** The OCI image layout holding this image alone (what crane pushes). */
  layout: string;
};

/** Stores the config and the manifest, and lays the image out as an OCI image layout of its own. */
export function assemble(
  store: BlobStore,
  o: { name: string; tag: string; config: object; layers: Layer[] },
): BuiltImage {
  const config = store.put(MEDIA.config, Buffer.from(JSON.stringify(o.config)));
  const manifestJson = {
    schemaVersion: 2,
    mediaType: MEDIA.manifest,
    config,
    layers: o.layers.map((l) => ({ mediaType: MEDIA.layer, digest: l.digest, size: l.size })),
  };
  const manifest = store.put(MEDIA.manifest, Buffer.from(JSON.stringify(manifestJson)));
  // Keyed by the manifest's digest: the same content is laid out once.
  const layout = join(
    store.root,
    "layouts",
    `${o.name}-${manifest.digest.slice("sha256:".length, "sha256:".length + 16)}`,
  );
  if (!existsSync(join(layout, "index.json"))) {
    const tmp = store.tmp();
    mkdirSync(join(tmp, "blobs", "sha256"), { recursive: true });
    for (const d of [config, manifest, ...o.layers]) {
      const to = join(tmp, "blobs", "sha256", d.digest.slice("sha256:".length));
      try {
        linkSync(store.blobPath(d.digest), to);
      } catch {
        copyFileSync(store.blobPath(d.digest), to);
      }
    }
    writeFileSync(join(tmp, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
    const index = {
      schemaVersion: 2,
      mediaType: MEDIA.index,
      manifests: [{ ...manifest, annotations: { "org.opencontainers.image.ref.name": o.tag } }],
    };
    writeFileSync(join(tmp, "index.json"), JSON.stringify(index));
    mkdirSync(join(store.root, "layouts"), { recursive: true });
    rmSync(layout, { recursive: true, force: true });
    renameSync(tmp, layout);
  }
  return { manifest, config, layers: o.layers, layout };
}
