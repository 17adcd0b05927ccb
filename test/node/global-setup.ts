// The real node tier's one-time setup (docs/decisions/0040-real-node.md): the local cluster up
// (npm run cluster -- up) with its real node, the tier's test image built and pushed to the
// cluster's loopback registry, and the project's own images (npm run images, decision 0041) pushed
// there for the Sandbox pod's tests (decision 0038). It never skips: a cluster whose real node is
// off fails the tier with the pre-flight's reason.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { CLUSTER_SH, ROOT, clusterEnv } from "./support";
import { distOlderThanSources, pushProjectImages } from "../../dev/project-images";
import { tierStarted } from "../summary-reporter";
import { requireNode } from "../../dev/node-version";

function step<T>(what: string, fn: () => T): T {
  const started = Date.now();
  const out = fn();
  process.stdout.write(`[node setup] ${what}: ${((Date.now() - started) / 1000).toFixed(1)}s\n`);
  return out;
}

function run(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): string {
  const r = spawnSync(cmd, args, { encoding: "utf8", cwd: opts.cwd, env: opts.env ?? process.env });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** The probe program (dev/cluster/go/probe), built once per source under the cache. */
function buildProbe(): { bin: string; fp: string } {
  const dir = join(ROOT, "dev", "cluster", "go", "probe");
  const fp = createHash("sha256")
    .update(readFileSync(join(dir, "go.mod")))
    .update(readFileSync(join(dir, "main.go")))
    .digest("hex")
    .slice(0, 16);
  const cache = process.env.JR2_CACHE_DIR ?? join(homedir(), ".cache", "jr2");
  const bin = join(cache, "bin", `probe-${fp}`, "jr2-probe");
  if (!existsSync(bin)) {
    mkdirSync(join(cache, "bin", `probe-${fp}`), { recursive: true });
    const tmp = `${bin}.tmp.${process.pid}`;
    run("go", ["build", "-trimpath", "-ldflags", "-s -w", "-o", tmp, "."], {
      cwd: dir,
      env: { ...process.env, CGO_ENABLED: "0", GOWORK: "off" },
    });
    renameSync(tmp, bin);
  }
  return { bin, fp };
}

/** A one-file image: /jr2-probe as its entrypoint, pushed unless the registry has it. */
function pushImage(crane: string, registry: string, probe: { bin: string; fp: string }): string {
  const ref = `${registry}/jr2-test/probe:${probe.fp}`;
  if (spawnSync(crane, ["digest", "--insecure", ref]).status === 0) return ref;
  const work = mkdtempSync(join(tmpdir(), "jr2-probe-image-"));
  try {
    mkdirSync(join(work, "root"));
    writeFileSync(join(work, "root", "jr2-probe"), readFileSync(probe.bin), { mode: 0o755 });
    run("tar", [
      "-C",
      join(work, "root"),
      "--owner=0",
      "--group=0",
      "--numeric-owner",
      "--mtime=2026-01-01 00:00:00",
      "-cf",
      join(work, "layer.tar"),
      "jr2-probe",
    ]);
    run(crane, ["append", "--insecure", "--oci-empty-base", "-f", join(work, "layer.tar"), "-t", ref]);
    run(crane, ["mutate", "--insecure", ref, "--entrypoint", "/jr2-probe", "--user", "65532:65532", "-t", ref]);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return ref;
}

/** The probe image started as `jr2-probe serve PORT`: a seat whose image the composition starts
 * with no command of its own (the User Container's), serving on PORT. */
function servingImage(crane: string, probe: string, name: string, port: number): string {
  const ref = probe.replace("/jr2-test/probe:", `/jr2-test/${name}:`);
  if (ref === probe) throw new Error(`${probe} is not a jr2-test/probe image`);
  if (spawnSync(crane, ["digest", "--insecure", ref]).status === 0) return ref;
  run(crane, ["mutate", "--insecure", probe, "--entrypoint", `/jr2-probe,serve,${port}`, "-t", ref]);
  return ref;
}

/** `npm run images` against the cluster's registry. The images carry dist/'s bundles and the tests
 * run dist/'s module and Orchestrator: a source newer than the build rebuilds it, so what runs is
 * what is checked out. */
function pushImages(registry: string) {
  const stale = distOlderThanSources();
  if (stale) process.stdout.write(`  dist/ is older than ${stale}: rebuilding\n`);
  return pushProjectImages(registry, stale !== undefined);
}

export default async function globalSetup() {
  // First, so a setup that throws still shows in CI's closing line (test/summary-reporter.js).
  tierStarted("node");
  // Then the Node check: an older Node stops the tier here, saying what to install (decision 0052).
  requireNode();
  step("cluster up", () => {
    const r = spawnSync("bash", [CLUSTER_SH, "up"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    if (r.status !== 0)
      throw new Error(`the local cluster did not come up (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
    // Its progress (including the real node's pre-flight verdict) for the log.
    process.stdout.write(
      r.stderr
        .split("\n")
        .filter((l) => /real node|cluster up|building|built/.test(l))
        .map((l) => `  ${l}\n`)
        .join(""),
    );
  });
  const env = clusterEnv();
  if (env.JR2_REAL_NODE_STATUS !== "up") {
    const status = spawnSync("bash", [CLUSTER_SH, "status"], { encoding: "utf8" }).stdout;
    const line = status.split("\n").find((l) => l.startsWith("real node:")) ?? "real node: (no status line)";
    throw new Error(
      `the node tier needs the real node, and this cluster has none: ${line}\n(cluster.sh status:\n${status})`,
    );
  }
  Object.assign(process.env, env);
  const probe = step("probe program", buildProbe);
  const probeImage = step("probe image", () => pushImage(env.CRANE, env.JR2_REGISTRY, probe));
  process.env.JR2_NODE_TEST_IMAGE = probeImage;
  process.env.JR2_NODE_USER_IMAGE = servingImage(env.CRANE, probeImage, "user", 9090);
  const images = step("npm run images", () => pushImages(env.JR2_REGISTRY));
  process.env.JR2_NODE_SANDBOX_IMAGE = images.sandbox;
  process.env.JR2_NODE_COMPANIONS_IMAGE = images.companions;
  process.env.JR2_NODE_IMAGES_BY_TAG = JSON.stringify(images.byTag);
}
