// The release's pure parts (decision 0073): its arguments, the SBOM it writes for an image, the
// chart values it sets, the changelog entry it makes, and the Python client's wheel and sdist, the
// wheel installed with pip (no index) into a fresh venv and imported.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync, inflateRawSync } from "node:zlib";
import { parse } from "yaml";
import { HEADER, decisionRows, sections, withRelease } from "../../scripts/release/changelog";
import { isLoopback, parseArgs, renderedImages, valuesWithImages } from "../../scripts/release/main";
import { pep440, pythonDists, zip } from "../../scripts/release/python";
import { bundledPackages, goModRequires, integrityHex, spdxDocument, spdxLicense } from "../../scripts/release/sbom";

const ROOT = join(__dirname, "..", "..");
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type J = any;
const DIGEST = "sha256:" + "ab".repeat(32);

describe("arguments", () => {
  test("version and registry are required; a version must be one the Python client can carry", () => {
    expect(parseArgs(["--version", "v1.2.3", "--registry", "127.0.0.1:5000"])).toEqual({
      version: "1.2.3",
      registry: "127.0.0.1:5000",
      writeChangelog: false,
    });
    expect(parseArgs(["--version=0.2.0-rc.1", "--registry=reg.example:443", "--key", "k"]).key).toBe("k");
    expect(() => parseArgs(["--registry", "r"])).toThrow(/--version is required/);
    expect(() => parseArgs(["--version", "1.0.0"])).toThrow(/--registry is required/);
    expect(() => parseArgs(["--version", "1.0", "--registry", "r"])).toThrow(/MAJOR\.MINOR\.PATCH/);
    expect(() => parseArgs(["--version", "1.0.0", "--registry", "https://r"])).toThrow(/no scheme/);
    expect(() => parseArgs(["--version", "1.0.0", "--registry", "r", "--push"])).toThrow(/unknown argument --push/);
  });

  test("PEP 440 versions; loopback registries", () => {
    expect(["1.2.3", "1.2.3-rc.4", "1.2.3-beta.1", "1.2.3-alpha2", "1.2.3-dev.7"].map(pep440)).toEqual([
      "1.2.3",
      "1.2.3rc4",
      "1.2.3b1",
      "1.2.3a2",
      "1.2.3.dev7",
    ]);
    expect(() => pep440("1.2.3-preview")).toThrow(/-rc\.N/);
    expect(["127.0.0.1:5000", "localhost:5000", "[::1]:5000", "registry.example:5000"].map(isLoopback)).toEqual([
      true,
      true,
      true,
      false,
    ]);
  });
});

describe("SBOM", () => {
  const lock = {
    packages: {
      "node_modules/undici": {
        version: "7.30.2",
        integrity: "sha512-" + Buffer.alloc(64, 1).toString("base64"),
        license: "MIT",
      },
      "node_modules/@scope/pkg": { version: "1.0.0", license: "SEE LICENSE IN LICENSE" },
      "node_modules/a/node_modules/b": { version: "2.0.0", license: "(MIT OR Apache-2.0)" },
    },
  };
  const input = (npm: string[]) => ({
    image: "companions",
    repository: "127.0.0.1:5000/jr2/companions",
    digest: DIGEST,
    version: "1.2.3",
    license: "Apache-2.0",
    debian: { suite: "trixie", packages: [{ name: "libstdc++6", version: "14.2.0-19", arch: "amd64" }] },
    lock,
    npm,
    created: new Date(1796342400 * 1000),
  });
  const doc = (npm: string[]) => spdxDocument(input(npm)) as J;

  test("the packages a bundle's source map names, nested ones by their own lock path", () => {
    expect(
      bundledPackages([
        "../../node_modules/undici/lib/a.js",
        "../../node_modules/undici/lib/b.js",
        "../../node_modules/@scope/pkg/index.js",
        "../../node_modules/a/node_modules/b/x.js",
        "../../orchestrator/main.ts",
      ]),
    ).toEqual(["node_modules/@scope/pkg", "node_modules/a/node_modules/b", "node_modules/undici"]);
  });

  test("an SPDX 2.3 document: the image, our code, each Debian and npm package with its purl, all contained", () => {
    const d = doc(["node_modules/undici", "node_modules/@scope/pkg", "node_modules/a/node_modules/b"]);
    expect(d.spdxVersion).toBe("SPDX-2.3");
    expect(d.dataLicense).toBe("CC0-1.0");
    expect(d.creationInfo.created).toBe("2026-12-04T00:00:00Z");
    expect(d.documentNamespace).toMatch(/^https:\/\/jr2\.dev\/spdx\/companions\/1\.2\.3\/(ab){32}-[0-9a-f]{16}$/);
    const purls = d.packages.map((p: J) => p.externalRefs?.[0]?.referenceLocator);
    expect(purls).toEqual([
      `pkg:oci/companions@sha256%3A${"ab".repeat(32)}?repository_url=127.0.0.1%3A5000%2Fjr2%2Fcompanions&tag=1.2.3`,
      undefined,
      "pkg:deb/debian/libstdc%2B%2B6@14.2.0-19?arch=amd64&distro=trixie",
      "pkg:npm/%40scope/pkg@1.0.0",
      "pkg:npm/b@2.0.0",
      "pkg:npm/undici@7.30.2",
    ]);
    expect(d.packages.map((p: J) => p.licenseDeclared)).toEqual([
      "Apache-2.0",
      "Apache-2.0",
      undefined,
      "NOASSERTION",
      "(MIT OR Apache-2.0)",
      "MIT",
    ]);
    const ids = d.packages.map((p: J) => p.SPDXID);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^SPDXRef-[A-Za-z0-9.-]+$/);
    expect(d.relationships[0]).toEqual({
      spdxElementId: "SPDXRef-DOCUMENT",
      relationshipType: "DESCRIBES",
      relatedSpdxElement: "SPDXRef-Image",
    });
    expect(d.relationships.slice(1).map((r: J) => r.relatedSpdxElement)).toEqual(ids.slice(1));
    expect(d.packages[5].checksums).toEqual([{ algorithm: "SHA512", checksumValue: "01".repeat(64) }]);
    // The same inputs, the same document.
    expect(doc(["node_modules/undici", "node_modules/@scope/pkg", "node_modules/a/node_modules/b"])).toEqual(d);
  });

  test("a go.mod's required modules, direct and indirect, as purls", () => {
    const mods = goModRequires(
      "module x\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/a/b v0.11.2\n\tgolang.org/x/sys v0.50.0 // indirect\n)\n\nrequire kernel.org/pub/c v1.2.78 // indirect\n",
    );
    expect(mods).toEqual([
      { module: "github.com/a/b", version: "v0.11.2" },
      { module: "golang.org/x/sys", version: "v0.50.0" },
      { module: "kernel.org/pub/c", version: "v1.2.78" },
    ]);
    const d = spdxDocument({ ...input([]), go: mods }) as J;
    expect(d.packages.slice(3).map((p: J) => p.externalRefs[0].referenceLocator)).toEqual([
      "pkg:golang/github.com/a/b@v0.11.2",
      "pkg:golang/golang.org/x/sys@v0.50.0",
      "pkg:golang/kernel.org/pub/c@v1.2.78",
    ]);
  });

  test("a package the lock does not pin is refused, naming it", () => {
    expect(() => doc(["node_modules/left-pad"])).toThrow(
      /holds node_modules\/left-pad, which package-lock\.json does not pin/,
    );
    expect(spdxLicense(undefined)).toBe("NOASSERTION");
    expect(integrityHex("sha1-nothex!")).toEqual([]);
  });
});

describe("charts", () => {
  test("the images by digest in the chart's values, comments kept; no such value is an error", () => {
    const values =
      "# Images\nimages:\n  controller: jr2/controller:0.1.0 # the module\n  companions: jr2/companions:0.1.0\nother: 1\n";
    const out = valuesWithImages(values, {
      controller: `r/jr2/controller@${DIGEST}`,
      companions: `r/jr2/companions@${DIGEST}`,
    });
    expect(parse(out)).toEqual({
      images: { controller: `r/jr2/controller@${DIGEST}`, companions: `r/jr2/companions@${DIGEST}` },
      other: 1,
    });
    expect(out).toContain("# Images");
    expect(() => valuesWithImages("images: {}\n", { controller: "a", companions: "b" })).toThrow(
      /no images\.controller/,
    );
  });

  test("every image a render names, containers and init containers alike", () => {
    const text = [
      "kind: Deployment\nspec:\n  template:\n    spec:\n      containers:\n      - image: a@sha256:1\n      initContainers:\n      - image: b:1",
      "kind: ConfigMap\ndata:\n  x: y",
    ].join("\n---\n");
    expect(renderedImages(text)).toEqual(["a@sha256:1", "b:1"]);
  });
});

describe("changelog", () => {
  const index = readFileSync(join(ROOT, "docs", "decisions", "README.md"), "utf8");
  const rows = decisionRows(index);
  const since = { added: rows.slice(0, 3), amended: [], commits: 12, from: "v0.1.0", to: "abc" };

  test("the decisions index's rows are read", () => {
    expect(rows.length).toBeGreaterThan(70);
    expect(rows[0]).toMatchObject({ number: "0001", file: "0001-wire-contract.md" });
  });

  test("an entry from [Unreleased], with a line for each decision it does not name, and a fresh [Unreleased]", () => {
    const text = `${HEADER}\n## [Unreleased]\n\n### Added\n\n- the thing ([decision 0002](docs/decisions/${rows[1].file}))\n\n## [0.1.0] - 2026-12-01\n\n### Added\n\n- first\n`;
    const out = withRelease(text, "0.2.0", "2026-12-07", since);
    const s = sections(out);
    expect(s.parts.map((p) => p.version)).toEqual(["Unreleased", "0.2.0", "0.1.0"]);
    expect(s.parts[0].body.trim()).toBe("## [Unreleased]");
    const entry = s.parts[1].body;
    expect(entry).toMatch(/^## \[0\.2\.0\] - 2026-12-07\n\n### Added\n\n- the thing/);
    expect(entry).toContain(`[decision 0001](docs/decisions/${rows[0].file})`);
    expect(entry).toContain(`[decision 0003](docs/decisions/${rows[2].file})`);
    expect(entry.match(/decision 0002/g)).toHaveLength(1);
    expect(entry).toContain("Built from 12 commits (v0.1.0..abc).");
    expect(out.startsWith("# Changelog")).toBe(true);
    // An entry that is there is kept as it is; two are refused.
    expect(withRelease(out, "0.2.0", "2027-01-01", since)).toBe(out);
    expect(() => withRelease(out + "\n## [0.2.0] - x\n", "0.2.0", "x", since)).toThrow(/two entries for 0\.2\.0/);
  });

  test("the committed CHANGELOG.md is Keep a Changelog: the header, an [Unreleased] section, dated entries", () => {
    const text = readFileSync(join(ROOT, "CHANGELOG.md"), "utf8");
    const s = sections(text);
    expect(s.head).toContain("Keep a Changelog");
    expect(s.parts[0].version).toBe("Unreleased");
    for (const p of s.parts.slice(1)) expect(p.body).toMatch(/^## \[\d+\.\d+\.\d+[^\]]*\] - \d{4}-\d{2}-\d{2}\n/);
  });
});

describe("the Python client's wheel and sdist", () => {
  const dir = join(ROOT, "clients", "python");
  const project = {
    name: "jr2-orchestrator",
    description: "d",
    readme: "README.md",
    license: { text: "Apache-2.0" },
    "requires-python": ">=3.11",
  };

  test("a zip any reader opens: the stored names, the bytes inflated back", () => {
    const z = zip([{ path: "a/b.txt", bytes: Buffer.from("hello") }], 1796342400);
    expect(z.readUInt32LE(0)).toBe(0x04034b50);
    const nameLen = z.readUInt16LE(26);
    expect(z.subarray(30, 30 + nameLen).toString()).toBe("a/b.txt");
    const size = z.readUInt32LE(18);
    expect(inflateRawSync(z.subarray(30 + nameLen, 30 + nameLen + size)).toString()).toBe("hello");
  });

  test("installed with pip from the wheel alone into a fresh venv, it imports; the sdist holds PKG-INFO and the sources", async () => {
    const { wheel, sdist } = await pythonDists({
      dir,
      project,
      pkg: "jr2_orchestrator",
      version: "1.2.3rc1",
      epoch: 1796342400,
    });
    expect(wheel.file).toBe("jr2_orchestrator-1.2.3rc1-py3-none-any.whl");
    expect(sdist.file).toBe("jr2_orchestrator-1.2.3rc1.tar.gz");
    const again = await pythonDists({ dir, project, pkg: "jr2_orchestrator", version: "1.2.3rc1", epoch: 1796342400 });
    expect(again.wheel.bytes.equals(wheel.bytes)).toBe(true);
    const tar = gunzipSync(sdist.bytes).toString("latin1");
    for (const f of [
      "PKG-INFO",
      "pyproject.toml",
      "README.md",
      "jr2_orchestrator/__init__.py",
      "jr2_orchestrator/py.typed",
    ])
      expect(tar).toContain(`jr2_orchestrator-1.2.3rc1/${f}`);
    expect(tar).toContain('version = "1.2.3rc1"');

    const tmp = mkdtempSync(join(tmpdir(), "jr2-wheel-"));
    try {
      writeFileSync(join(tmp, wheel.file), wheel.bytes);
      const sh = (cmd: string, args: string[]) => {
        const r = spawnSync(cmd, args, { encoding: "utf8", cwd: tmp });
        if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")}: ${r.stdout}${r.stderr}`);
        return r.stdout;
      };
      sh("python3", ["-m", "venv", "--without-pip", join(tmp, "venv")]);
      // The venv has no pip of its own: the interpreter's pip installs into it (offline, no index).
      sh("python3", [
        "-m",
        "pip",
        "--python",
        join(tmp, "venv", "bin", "python"),
        "install",
        "--no-index",
        "--no-deps",
        "--disable-pip-version-check",
        join(tmp, wheel.file),
      ]);
      const out = sh(join(tmp, "venv", "bin", "python"), [
        "-c",
        "import importlib.metadata as m, jr2_orchestrator as j; print(m.version('jr2-orchestrator'), j.__file__)",
      ]);
      expect(out).toMatch(
        new RegExp(
          `^1\\.2\\.3rc1 ${tmp.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/venv/lib/python3\\.\\d+/site-packages/jr2_orchestrator/__init__\\.py`,
        ),
      );
      // pip checked RECORD's hashes when it installed; the installed RECORD lists every file.
      const record = sh(join(tmp, "venv", "bin", "python"), [
        "-c",
        "import importlib.metadata as m; print('\\n'.join(str(f) for f in m.files('jr2-orchestrator')))",
      ]);
      expect(record).toContain("jr2_orchestrator/client.py");
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 60_000);
});
