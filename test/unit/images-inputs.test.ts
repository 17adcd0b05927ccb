// What goes into the images (decision 0041): the Debian mirror read from the machine's own apt
// sources, a lock that pins every package and holds no build tool, drift from it named package by
// package; the controller's packages walked from what runs, at the lockfile's versions, with the
// CLI-only ones left out and every package Pepr's runtime requires kept; dist/ rebuilt exactly when
// its manifests name other images than the ones being built.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import cfg from "../../package.json";
import {
  CONTROLLER_ROOTS,
  NOT_AT_RUNTIME,
  controllerClosure,
  resolveIn,
  type Lockfile,
} from "../../scripts/images/controller-deps";
import {
  LOCK_FILE,
  SUITE,
  formatLock,
  lockDrift,
  mirrorLines,
  parseLock,
  preferences,
} from "../../scripts/images/debian";
import { builtFor, expandCopy, manifestImages, parseArgs } from "../../scripts/images/main";
import { COMPANIONS, LAZY } from "../../scripts/companion-bundle";
import { APP_COPY, BASE_PACKAGES } from "../../scripts/images/spec";

const ROOT = join(__dirname, "..", "..");

describe("the Debian mirror, from the machine's apt sources", () => {
  test("deb822: comment lines do not split a paragraph; other suites, deb-src and disabled entries are left", () => {
    const text = [
      "Types: deb deb-src",
      "# a snapshot this mirror follows",
      "URIs: http://mirror.example/debian",
      "Suites: bookworm bookworm-updates trixie",
      "Components: main contrib",
      "",
      "Types: deb-src",
      "URIs: http://src.example/debian",
      "Suites: bookworm",
      "Components: main",
      "",
      "Types: deb",
      "URIs: http://off.example/debian",
      "Suites: bookworm",
      "Components: main",
      "Enabled: no",
      "",
      "Types: deb",
      "URIs: http://security.example/debian-security",
      "Suites: bookworm-security",
      "Components: main",
    ].join("\n");
    expect(mirrorLines(text, "bookworm")).toEqual([
      "deb http://mirror.example/debian bookworm main contrib",
      "deb http://mirror.example/debian bookworm-updates main contrib",
      "deb http://security.example/debian-security bookworm-security main",
    ]);
  });

  test("one-line sources, options included", () => {
    const text =
      "deb [signed-by=/k.gpg] http://m.example/debian bookworm main\n# deb http://x bookworm main\ndeb http://m.example/debian sid main\n";
    expect(mirrorLines(text, "bookworm")).toEqual(["deb http://m.example/debian bookworm main"]);
  });

  test("a suite the host does not list is derived from the host's own release, on the same mirror", () => {
    const host = [
      "Types: deb",
      "URIs: http://mirror.example/debian",
      "Suites: bookworm bookworm-updates",
      "Components: main",
      "",
      "Types: deb",
      "URIs: http://mirror.example/debian-security",
      "Suites: bookworm-security",
      "Components: main",
    ].join("\n");
    expect(mirrorLines(host, "trixie", "bookworm")).toEqual([
      "deb http://mirror.example/debian trixie main",
      "deb http://mirror.example/debian trixie-updates main",
      "deb http://mirror.example/debian-security trixie-security main",
    ]);
    // Without the host's release nothing is guessed; a suite the host lists is taken as listed.
    expect(mirrorLines(host, "trixie")).toEqual([]);
    expect(
      mirrorLines(
        `${host}\n\nTypes: deb\nURIs: http://other.example/debian\nSuites: trixie\nComponents: main`,
        "trixie",
        "bookworm",
      ),
    ).toEqual([
      "deb http://other.example/debian trixie main",
      "deb http://mirror.example/debian trixie-updates main",
      "deb http://mirror.example/debian-security trixie-security main",
    ]);
  });

  test("the images are on Debian's stable release, trixie", () => {
    expect(SUITE).toBe("trixie");
    expect(readFileSync(LOCK_FILE, "utf8")).toMatch(/^# Debian trixie, /m);
  });
});

describe("the Debian lock", () => {
  const lock = parseLock(readFileSync(LOCK_FILE, "utf8"));
  const names = lock.map((p) => p.name);

  test("pins every package of the base, the base's own among them, once each", () => {
    for (const p of BASE_PACKAGES) expect(names).toContain(p);
    expect(new Set(names).size).toBe(names.length);
    for (const p of lock) expect(p.version).toMatch(/^[0-9][A-Za-z0-9.+~:-]*$/);
  });

  test("holds no compiler, build tool or package fetcher", () => {
    const tools =
      /^(gcc|gcc-\d+|g\+\+.*|cpp|cpp-\d+|clang.*|make|binutils.*|libc6-dev|libgcc-.*-dev|apt|apt-utils|python3?|npm|nodejs)$/;
    expect(names.filter((n) => tools.test(n))).toEqual([]);
  });

  test("round-trips through its format, and pins each version for apt", () => {
    expect(parseLock(formatLock(lock))).toEqual([...lock].sort((a, b) => (a.name < b.name ? -1 : 1)));
    const prefs = preferences([{ name: "git", version: "1:2.39.5-0+deb12u3", arch: "amd64" }]);
    expect(prefs).toBe("Package: git\nPin: version 1:2.39.5-0+deb12u3\nPin-Priority: 1001\n");
  });

  test("drift names each package: superseded, missing, or unlocked", () => {
    const want = [
      { name: "git", version: "1", arch: "amd64" },
      { name: "tini", version: "2", arch: "amd64" },
    ];
    const got = [
      { name: "git", version: "1b", arch: "amd64" },
      { name: "perl", version: "5", arch: "amd64" },
    ];
    expect(lockDrift(want, got)).toEqual([
      "git: locked 1 amd64, the mirror gave 1b amd64",
      "tini 2: locked, not installed",
      "perl 5: installed, not locked",
    ]);
    expect(lockDrift(want, want)).toEqual([]);
  });
});

describe("the controller's packages", () => {
  const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as Lockfile;
  const closure = controllerClosure(lock);
  const names = closure.map((p) => p.slice(p.lastIndexOf("node_modules/") + "node_modules/".length));

  test("hold the roots and what they depend on, and nothing only a CLI or a type checker uses", () => {
    for (const r of CONTROLLER_ROOTS) expect(names).toContain(r);
    expect(names).toContain("ws"); // @kubernetes/client-node's watch
    for (const n of names) expect(NOT_AT_RUNTIME.some((x) => x.match.test(n))).toBe(false);
    for (const cli of ["typescript", "esbuild", "eslint", "ts-morph", "quicktype-core", "tsx", "commander", "prettier"])
      expect(names).not.toContain(cli);
  });

  test("need no install script (the image takes node_modules as npm ci left it)", () => {
    expect(closure.filter((p) => lock.packages[p].hasInstallScript)).toEqual([]);
  });

  test("cover every package Pepr's controller and its library require", () => {
    const builtin = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)]);
    for (const file of ["dist/controller.js", "dist/lib.js"]) {
      const text = readFileSync(join(ROOT, "node_modules", "pepr", file), "utf8");
      const required = [...text.matchAll(/require\("([^"]+)"\)/g)]
        .map((m) => m[1])
        .filter((s) => !builtin.has(s) && !s.startsWith("."));
      expect(required.length).toBeGreaterThan(0);
      for (const spec of required) {
        const pkg = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0];
        expect({ file, pkg, in: closure.includes(resolveIn(lock, "node_modules/pepr", pkg) ?? "") }).toEqual({
          file,
          pkg,
          in: true,
        });
      }
    }
  });
});

describe("npm run images and dist/", () => {
  let root: string;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), "jr2-images-dist-"));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const refs = {
    companions: "127.0.0.1:5000/jr2/companions:0.1.0",
    sandbox: "127.0.0.1:5000/jr2/sandbox:0.1.0",
    controller: "127.0.0.1:5000/jr2/controller:0.1.0",
  };
  const write = (rel: string, text: string) => {
    mkdirSync(join(root, rel, ".."), { recursive: true });
    writeFileSync(join(root, rel), text);
  };
  const moduleYaml = `dist/pepr-module-${cfg.pepr.uuid}.yaml`;

  test("rebuilds dist/ when the bundles are missing or a manifest names another image, and not otherwise", () => {
    expect(builtFor(refs, root)).toEqual({ ok: false, why: "dist/companions/*js is missing" });
    write("dist/companions/orchestrator.js", "");
    write("dist/companions/orchestrator.js.map", "");
    write("dist/companions/harness-pi.mjs", "");
    // Each bundle and what it loads late (decision 0044); never a source map.
    expect(expandCopy(root, APP_COPY.companions.from)).toEqual([
      join(root, "dist/companions/harness-pi.mjs"),
      join(root, "dist/companions/orchestrator.js"),
    ]);
    write("dist/jr2-orchestrator.yaml", "spec:\n  containers:\n    - name: o\n      image: jr2/companions:0.1.0\n");
    expect(builtFor(refs, root).why).toBe(
      "dist/'s companion manifests name jr2/companions:0.1.0, not 127.0.0.1:5000/jr2/companions:0.1.0",
    );
    write("dist/jr2-orchestrator.yaml", `containers:\n  - image: ${refs.companions}\n`);
    write("dist/jr2-cache-agent.yaml", `containers:\n  - name: c\n    image: "${refs.companions}"\n`);
    // The module's CRD schemas say `image:` with no value: not an image.
    write(moduleYaml, `properties:\n  image:\n    type: string\n---\n          image: '${refs.controller}'\n`);
    expect(manifestImages(root)).toEqual({ companions: [refs.companions], controller: [refs.controller] });
    expect(builtFor(refs, root)).toEqual({ ok: true, why: "" });
  });

  test("the companions image carries every companion's bundle and the files it loads late (decision 0044)", () => {
    const late = mkdtempSync(join(tmpdir(), "jr2-images-late-"));
    const files = Object.keys(COMPANIONS).flatMap((c) => [
      `${c}.js`,
      ...Object.values(LAZY[c as keyof typeof COMPANIONS] ?? {}),
    ]);
    expect(files).toEqual(expect.arrayContaining(["effector-effects.js", "effector-undici.js"]));
    for (const f of files) {
      mkdirSync(join(late, "dist/companions"), { recursive: true });
      writeFileSync(join(late, "dist/companions", f), "");
      writeFileSync(join(late, "dist/companions", `${f}.map`), "");
    }
    expect(expandCopy(late, APP_COPY.companions.from)).toEqual(
      files.map((f) => join(late, "dist/companions", f)).sort(),
    );
    rmSync(late, { recursive: true, force: true });
  });

  test("reads its flags, and refuses what it does not know", () => {
    expect(parseArgs([])).toEqual({
      registry: undefined,
      push: true,
      build: false,
      lockDebian: false,
      checkSecurity: false,
    });
    expect(parseArgs(["--check-security"]).checkSecurity).toBe(true);
    expect(parseArgs(["--registry", "127.0.0.1:5000", "--no-push", "--build"])).toEqual({
      registry: "127.0.0.1:5000",
      push: false,
      build: true,
      lockDebian: false,
      checkSecurity: false,
    });
    expect(parseArgs(["--registry=h:1"]).registry).toBe("h:1");
    expect(() => parseArgs(["--registry"])).toThrow(/needs HOST:PORT/);
    expect(() => parseArgs(["--push"])).toThrow(/unknown argument --push/);
  });
});
