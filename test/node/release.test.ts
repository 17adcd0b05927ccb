// A release on the real node (decision 0073): `npm run release` to the cluster's loopback registry,
// then, as a platform team would with nothing but the registry and the release's public key: every
// image's signature and SBOM verified with cosign (and refused with another key or for a changed
// image), the charts' signatures verified; a fresh install from the pushed charts
// (helm install oci://...) naming no image in its values, so the chart's own defaults (the images by
// digest) run everything; a workspace through the Orchestrator whose Sandbox reaches Ready on the
// sandbox image the release pushed; then uninstalled. Every cluster-wide object it makes shares its
// name with helm.test.ts's and deployed.test.ts's: all three remove them before and after.
import { helmRunner } from "./helm-run";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CRDS_RELEASE, helmBin } from "../../dev/helm";
import { OrchestratorClient } from "../../clients/typescript/src";
import { CHART_NAME, CRDS_CHART_NAME } from "../../scripts/helm-chart";
import { cosign, cosignBin, cosignOk, verifySbom, verifySignature } from "../../scripts/release/cosign";
import { MANIFEST, PUBLIC_KEY, RELEASE_DIR, type ReleaseManifest } from "../../scripts/release/main";
import {
  type Obj,
  ROOT,
  INSTALLED,
  available,
  fromSetup,
  getJson,
  kubectl,
  realNode,
  removeInstallation,
  until,
  SANDBOX_RESOURCE,
} from "./support";

const node = realNode();
const REGISTRY = fromSetup("JR2_REGISTRY");
/** A pre-release: made again on every run (the images are reproducible, so the same digests). */
const VERSION = "0.0.1-rc.1";
const OUT = join(RELEASE_DIR, VERSION);
const RELEASE = "jr2";
const RELEASE_NS = "default";
const { module: MODULE, peprNamespace: PEPR_NS, system: SYSTEM, sandboxes: SANDBOXES } = INSTALLED;
const TOKEN = randomBytes(24).toString("hex");
const ORCHESTRATOR_URL = `http://jr2-orchestrator.${SYSTEM}.svc.cluster.local:8090`;
const tmp = mkdtempSync(join(tmpdir(), "jr2-release-"));
const onRealNode = {
  nodeSelector: { [node.label[0]]: node.label[1] },
  tolerations: [{ key: node.taint.key, operator: "Equal", value: node.taint.value, effect: node.taint.effect }],
};
const helm = helmBin();
const plainHttp = ["--plain-http"];
let bin = "";
let manifest: ReleaseManifest;

const { helmRun, helmOk } = helmRunner(helm, RELEASE_NS);

async function cleanUp() {
  for (const r of [RELEASE, CRDS_RELEASE]) await helmRun(["uninstall", r, "--ignore-not-found"]);
  removeInstallation([]);
}

beforeAll(async () => {
  await cleanUp();
  // cosign's first build is minutes long (scripts/release/cosign.sh caches it by version).
  bin = cosignBin();
  const started = Date.now();
  const r = spawnSync(
    join(ROOT, "node_modules", ".bin", "tsx"),
    [join(ROOT, "scripts", "release", "main.ts"), "--version", VERSION, "--registry", REGISTRY],
    { cwd: ROOT, encoding: "utf8", env: process.env, maxBuffer: 64 << 20 },
  );
  if (r.status !== 0) throw new Error(`npm run release failed (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  process.stdout.write(`npm run release: ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  manifest = JSON.parse(readFileSync(join(OUT, MANIFEST), "utf8")) as ReleaseManifest;
}, 1_200_000);

afterAll(async () => {
  await cleanUp();
  rmSync(tmp, { recursive: true, force: true });
}, 600_000);

describe("a release: signed images with SBOMs, charts by digest, installed from the registry alone", () => {
  test("release.json names every artefact: the three images by digest, the two charts, the clients, the docs", () => {
    expect(manifest.version).toBe(VERSION);
    expect(manifest.images.map((i) => i.name).sort()).toEqual(["companions", "controller", "sandbox"]);
    for (const i of manifest.images) {
      expect(i.ref).toBe(`${REGISTRY}/jr2/${i.name}@${i.digest}`);
      expect(i.signature).toMatch(new RegExp(`^${REGISTRY}/jr2/${i.name}@sha256:[0-9a-f]{64}$`));
      expect(i.sbom.attestation).toMatch(new RegExp(`^${REGISTRY}/jr2/${i.name}@sha256:[0-9a-f]{64}$`));
      // The tag names the same image.
      const crane = fromSetup("CRANE");
      expect(spawnSync(crane, ["digest", i.tag], { encoding: "utf8" }).stdout.trim()).toBe(i.digest);
    }
    expect(manifest.charts.map((c) => c.ref).sort()).toEqual(
      [CHART_NAME, CRDS_CHART_NAME].map((n) => `oci://${REGISTRY}/charts/${n}:${VERSION}`).sort(),
    );
    expect(manifest.files.map((f) => f.file).sort()).toEqual(
      [
        "CHANGELOG.md",
        "SECURITY.md",
        PUBLIC_KEY,
        "jr2-install.yaml",
        `jr2-orchestrator-client-${VERSION}.tgz`,
        "jr2_orchestrator-0.0.1rc1-py3-none-any.whl",
        "jr2_orchestrator-0.0.1rc1.tar.gz",
      ].sort(),
    );
    expect(readFileSync(join(OUT, "CHANGELOG.md"), "utf8")).toMatch(
      new RegExp(`^## \\[${VERSION}\\] - \\d{4}-\\d{2}-\\d{2}$`, "m"),
    );
    // The plain manifest names every image by the release's digests.
    const install = readFileSync(join(OUT, "jr2-install.yaml"), "utf8");
    const named = new Set([...install.matchAll(/^\s*(?:- )?image: "?([^"\s]+)"?$/gm)].map((m) => m[1]));
    expect([...named].sort()).toEqual(
      manifest.images
        .filter((i) => i.name !== "sandbox")
        .map((i) => i.ref)
        .sort(),
    );
  });

  test("every image's signature and SBOM verify with the release's public key; another key, or a changed image, fails", () => {
    const pub = join(OUT, PUBLIC_KEY);
    const other = join(tmp, "other");
    cosignOk(bin, ["generate-key-pair", "--output-key-prefix", other], { password: "" });
    for (const i of manifest.images) {
      const sig = verifySignature(bin, pub, i.ref);
      expect([i.name, sig.status, sig.out]).toEqual([i.name, 0, expect.stringContaining(i.digest)]);
      const att = verifySbom(bin, pub, i.ref);
      expect([i.name, att.status]).toEqual([i.name, 0]);
      // The attested SBOM is the file beside the release, about this image.
      const envelope = JSON.parse(att.out.split("\n").find((l) => l.startsWith("{"))!) as { payload: string };
      const statement = JSON.parse(Buffer.from(envelope.payload, "base64").toString()) as Obj;
      expect(statement.subject[0].digest.sha256).toBe(i.digest.replace("sha256:", ""));
      expect(statement.predicate).toEqual(JSON.parse(readFileSync(join(OUT, i.sbom.file), "utf8")));
      expect(statement.predicate.spdxVersion).toBe("SPDX-2.3");

      expect(verifySignature(bin, `${other}.pub`, i.ref).status).not.toBe(0);
      expect(verifySbom(bin, `${other}.pub`, i.ref).status).not.toBe(0);
    }
    // An image changed after the release (one label more): a new digest nobody signed.
    const crane = fromSetup("CRANE");
    const changed = spawnSync(
      crane,
      ["mutate", manifest.images[0].ref, "--label", "tampered=yes", "-t", `${REGISTRY}/jr2-test/tampered:${VERSION}`],
      { encoding: "utf8" },
    );
    expect(changed.status).toBe(0);
    const tampered = changed.stdout.trim();
    expect(tampered).not.toContain(manifest.images[0].digest);
    expect(verifySignature(bin, pub, tampered).status).not.toBe(0);
    expect(verifySbom(bin, pub, tampered).status).not.toBe(0);
    // The charts are signed too.
    for (const c of manifest.charts) {
      const ref = `${c.ref.replace(/^oci:\/\//, "").replace(/:[^:/]+$/, "")}@${c.digest}`;
      expect([c.name, cosign(bin, ["verify", "--key", pub, "--insecure-ignore-tlog=true", ref]).status]).toEqual([
        c.name,
        0,
      ]);
    }
  }, 120_000);

  test("a release with --key is signed by that key: its public key beside the artefacts, the key's own", () => {
    const mine = join(tmp, "release-key");
    const password = randomBytes(12).toString("hex");
    cosignOk(bin, ["generate-key-pair", "--output-key-prefix", mine], { password });
    const version = "0.0.1-rc.2";
    const r = spawnSync(
      join(ROOT, "node_modules", ".bin", "tsx"),
      [
        join(ROOT, "scripts", "release", "main.ts"),
        "--version",
        version,
        "--registry",
        REGISTRY,
        "--key",
        `${mine}.key`,
      ],
      { cwd: ROOT, encoding: "utf8", env: { ...process.env, COSIGN_PASSWORD: password }, maxBuffer: 64 << 20 },
    );
    expect([r.status, r.stderr]).toEqual([0, expect.not.stringContaining(password)]);
    const out = join(RELEASE_DIR, version);
    const named = JSON.parse(readFileSync(join(out, MANIFEST), "utf8")) as ReleaseManifest;
    expect(named.key.generated).toBe(false);
    expect(readFileSync(join(out, PUBLIC_KEY), "utf8").trim()).toBe(readFileSync(`${mine}.pub`, "utf8").trim());
    for (const i of named.images) {
      expect([i.name, verifySignature(bin, `${mine}.pub`, i.ref).status]).toEqual([i.name, 0]);
      expect([i.name, verifySbom(bin, `${mine}.pub`, i.ref).status]).toEqual([i.name, 0]);
    }
    rmSync(out, { recursive: true, force: true });
  }, 300_000);

  test("a fresh install from the pushed charts, naming no image: everything runs the release's digests, a Sandbox Ready", async () => {
    const values = join(tmp, "values.json");
    writeFileSync(
      values,
      JSON.stringify({
        placement: onRealNode,
        orchestrator: { apiTokens: [TOKEN] },
        podConfig: { placement: onRealNode },
      }),
    );
    const chart = (name: string) => `oci://${REGISTRY}/charts/${name}`;
    await helmOk(["install", CRDS_RELEASE, chart(CRDS_CHART_NAME), "--version", VERSION, ...plainHttp]);
    await helmOk(["install", RELEASE, chart(CHART_NAME), "--version", VERSION, ...plainHttp, "--values", values]);
    for (const [ns, d] of [
      [PEPR_NS, MODULE],
      [PEPR_NS, `${MODULE}-watcher`],
      [SYSTEM, "jr2-orchestrator"],
      [SYSTEM, "jr2-egress"],
    ])
      await available(ns, d);
    const digests = new Set(manifest.images.map((i) => i.ref));
    for (const ns of [PEPR_NS, SYSTEM])
      for (const p of getJson(["pods", "-n", ns]).items as Obj[])
        for (const c of [...(p.spec.initContainers ?? []), ...p.spec.containers])
          expect([p.metadata.name, c.name, digests.has(c.image)]).toEqual([p.metadata.name, c.name, true]);

    const sandboxImage = manifest.images.find((i) => i.name === "sandbox")!.ref;
    const client = new OrchestratorClient({ url: ORCHESTRATOR_URL, token: TOKEN });
    const { name } = await until("the Orchestrator answers a create", 120_000, () =>
      client.createWorkspace({ image: sandboxImage, branch: "feature/release" }),
    );
    const view = await until(`workspace ${name} ready`, 300_000, async () => {
      const v = await client.workspace(name);
      return ["ready", "failed", "lost"].includes(v.state) ? v : undefined;
    });
    expect({ state: view.state, failure: view.failure }).toEqual({ state: "ready", failure: undefined });
    const sandbox = getJson([SANDBOX_RESOURCE, "-n", SANDBOXES, name]);
    expect(sandbox.status.phase).toBe("Ready");
    const pod = getJson(["pod", "-n", SANDBOXES, name]);
    expect(pod.spec.nodeName).toBe(node.name);
    expect(pod.spec.containers.find((c: Obj) => c.name === "harness").image).toBe(sandboxImage);
    await client.deleteWorkspace(name);
    await until(`Sandbox ${name} gone`, 180_000, () =>
      kubectl(["get", SANDBOX_RESOURCE, "-n", SANDBOXES, name]).status !== 0 ? true : undefined,
    );
  }, 900_000);

  test("helm uninstall removes the installation", async () => {
    await helmOk(["uninstall", RELEASE]);
    for (const ns of [PEPR_NS, SYSTEM, SANDBOXES])
      await until(`namespace ${ns} gone`, 300_000, () =>
        kubectl(["get", "namespace", ns]).status !== 0 ? true : undefined,
      );
  }, 360_000);
});
