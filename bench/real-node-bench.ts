// Benchmark: a cold workspace on the real node (docs/decisions/0040-real-node.md), create -> ready,
// over BENCH_REAL_NODE_RUNS runs (default 20), one after another, split into where the time goes.
// Set up as test/node/sandbox-pod.test.ts is: the module, the node's cache agent and the Orchestrator
// (in-cluster mode, no local Harness) are processes on this machine; the workspace's Sandbox pod runs
// on the real node from the images `npm run images` pushes to the loopback registry (decision 0041).
//
// Cold: before each run the Sandbox image and the companions image are removed from the node's
// containerd (`cluster.sh ctr images rm --sync`, after the previous run's pod and its containers are
// gone, so no snapshot of them is left either), and with them any other image on the node sharing a
// layer (the controller image is built on the same base), put back at the end; the registry keeps
// them all, so the kubelet pulls both over loopback. The pause image stays (containerd pins it).
// Within the pod the Sandbox image is pulled first (the Harness is the pod's first container, the
// Custodian its second) and the companions image after it fetches only its own top layer: the two share
// their base, as they would on any node. The Repo cache stays warm after the
// first run (same remote), as it would on a node that has served the repository before.
//
// Per run, from what the cluster records and what this process sees:
//   scheduled  create (POST /v1/workspaces sent) -> the pod bound to the node, seen on a pod watch:
//              the Orchestrator's Sandbox, the operator's pod, the scheduler.
//   pull       the sum of the kubelet's own pull times for the pod's images, as its `Pulled` Events
//              state them ("Successfully pulled image ... in Xs"): fetch and unpack, not the
//              waiting before it (the "including waiting" figure; this kubelet pulls in parallel,
//              serializeImagePulls: false). Summed because the kubelet starts a pod's containers
//              one after another, each after its own image is there, so the pulls are sequential.
//   start      pod bound -> pod Ready, both seen on the watch, less the pull: the pod's sandbox
//              (pause, CNI), its volumes, creating and starting each container, and the readiness
//              probes passing (every 1 s, decision 0056).
//   attach     pod Ready -> the workspace `ready` (on its event stream): the operator's Sandbox
//              Ready, the Orchestrator seeing it and its attach through the Harness.
//   total      create -> workspace `ready`; scheduled + pull + start + attach.
// Then a few warm runs (BENCH_REAL_NODE_WARM_RUNS, default 3; images present, no pull) for
// comparison. The images are present on the node at the end: the last runs pulled them back.
// BENCH_REAL_NODE_RUNS=0 skips the cold runs (and their figures): warm runs alone leave the node's
// images where they are.
//
// Each warm run is split further into consecutive parts that add up to its total, from what the
// cluster records: this process's watches, containerd's and the kubelet's logs, the pod's own log
// lines and the Orchestrator's (bench/timeline.ts names each part and its marks):
//   create -> operator -> schedule -> kubelet -> pod_sandbox -> containers -> pleg -> probes
//   -> sandbox_ready -> orchestrator_sees -> attach -> client_sees
// and details within them (the Orchestrator's writes, the Repo's fetch, each container's start
// and boot, the Harness's wait for its probe, its /attach); p50 and p90 of each. With them, each
// container's CPU time until `ready` and how long its CPU limit held it back (its cgroup's
// cpuacct.usage and cpu.stat throttled_time: warm_cgroup_*).
// The floor: each warm run is followed by a plain pod, the same two images on the same node,
// placed as the Sandbox pods are, each container only sleeping, no probe, no volume, created by
// this process's API client (lib/kube.ts, as the Orchestrator and the operator write) and timed
// from its POST to Ready on the pod watch. warm_ready_ratio_to_plain_pod is the workspace's p50
// over the plain pod's. Then the shaped floor (bench/shaped-pod.ts, decision 0064): the workspace's
// own pod, its volumes (copies of its Secrets and ConfigMaps), security and resources, each
// container only sleeping, no probe, no hook; warm_ready_ratio_to_shaped_pod is what our software
// adds to its own pod's start.
// BENCH_REAL_NODE_EFFECTOR=1: each warm workspace has a twin created with a Sandbox Effector
// (`effector: {}`, jr2's program from the companions image, decision 0070), the two alternating
// which goes first: warm_ready_with_effector_p50_seconds and its ratio to the workspaces without
// in the same run (warm_ready_ratio_with_effector) are what the Effector adds to a workspace's start.
//   BENCH_REAL_NODE_RUNS=20   BENCH_REAL_NODE_WARM_RUNS=3   BENCH_REAL_NODE_EFFECTOR=1
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { CACHE_AGENT_ENV, OPERATOR_ENV, ORCHESTRATOR_ENV } from "../api/env";
import { SANDBOX_LABEL, SANDBOX_NAMESPACE_ENABLED, SANDBOX_NAMESPACE_LABEL } from "../api/wire";
import { kubeRequest, paths } from "../lib/kube";
import { startCacheAgent, type Agent } from "../dev/local-cache-agent";
import { ROOT } from "../dev/local-operator";
import { freePort, startLocalOrchestrator, type LocalOrchestrator } from "../dev/local-orchestrator";
import { kubectlPath, run as kubectl } from "../dev/kubectl";
import { pushProjectImages } from "../dev/project-images";
import { clusterEnv } from "../scripts/images/main";
import { oneCommitRepository } from "../dev/repository";
import { FINAL_STATES, OrchestratorClient } from "../clients/typescript/src";
import { benchOperator, type Result } from "./sandbox-burst-bench";
import { podRefs, shapedPod, type ObjectRef } from "./shaped-pod";
import { percentile, round, sleep, sorted } from "./stats";
import {
  PLAIN_PARTS,
  Timelines,
  WORKSPACE_DETAILS,
  WORKSPACE_PARTS,
  containerLogMarks,
  containerdMarks,
  kubeletMarks,
  logSince,
  logSize,
  markPod,
  markSandbox,
  orchestratorMarks,
  spans,
  watchJson,
  type Marks,
} from "./timeline";

const B = "real-node";
const CLUSTER_SH = join(ROOT, "dev", "cluster", "cluster.sh");
const log = (line: string) => process.stderr.write(`real-node: ${line}\n`);

/** ctr against the node's containerd, namespace k8s.io (built on first use by cluster.sh). */
function ctr(...args: string[]): string {
  const r = spawnSync("bash", [CLUSTER_SH, "ctr", ...args], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`cluster.sh ctr ${args.join(" ")} failed (exit ${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** The node's images, name and manifest digest (`ctr images ls`'s REF and DIGEST columns). */
const nodeImages = () =>
  ctr("images", "ls")
    .split("\n")
    .slice(1)
    .map((l) => l.split(/\s+/))
    .filter((f) => f.length > 2)
    .map((f) => ({ name: f[0], digest: f[2] }));

/** The names the node holds `ref`'s manifest under: the digest ref, a tag, and the CRI's own
 * sha256:<config> name all point at it. */
export const namesOf = (ref: string) =>
  nodeImages()
    .filter((i) => i.digest === ref.slice(ref.indexOf("@") + 1))
    .map((i) => i.name);

/** Containers on the node made from one of `refs` (a deleted pod's, not yet removed). */
export const containersOf = (refs: string[]) =>
  ctr("containers", "ls")
    .split("\n")
    .slice(1)
    .filter((l) => refs.some((r) => l.includes(r)));

const layerCache = new Map<string, string[]>();
/** The layer digests of `name@digest` as the registry serves it (none for an index or a name the
 * registry does not serve). */
function layersOf(crane: string, name: string, digest: string): string[] {
  let layers = layerCache.get(digest);
  if (!layers) {
    const repo = name.replace(/@.*$/, "").replace(/:[^/:]*$/, "");
    const r = spawnSync(crane, ["manifest", "--insecure", `${repo}@${digest}`], { encoding: "utf8" });
    layers =
      r.status === 0
        ? ((JSON.parse(r.stdout) as { layers?: Array<{ digest: string }> }).layers ?? []).map((l) => l.digest)
        : [];
    layerCache.set(digest, layers);
  }
  return layers;
}

/**
 * Empties the node of the images `refs` name and of every other image sharing a layer with them
 * (an earlier build of theirs, or the controller image on the same base): a layer another image
 * holds is not pulled again, so leaving one would make a cold pull warm. Each under every name,
 * and containerd's collection waited for (--sync), so content and snapshots go too. First waits for
 * the node's containers of them to go (a container holds its image's snapshots). Returns the
 * other images removed (registry refs by digest), to be put back at the end.
 */
export async function removeImages(crane: string, refs: string[]): Promise<string[]> {
  const ours = new Set(refs.flatMap((r) => layersOf(crane, r, r.slice(r.indexOf("@") + 1))));
  const digestsOurs = new Set(refs.map((r) => r.slice(r.indexOf("@") + 1)));
  for (let i = 0; ; i++) {
    const all = nodeImages();
    const named = all.filter((x) => !x.name.startsWith("sha256:"));
    const targets = new Set(
      named.filter((x) => layersOf(crane, x.name, x.digest).some((l) => ours.has(l))).map((x) => x.digest),
    );
    const names = all.filter((x) => targets.has(x.digest)).map((x) => x.name);
    const inUse = containersOf(names.filter((n) => !n.startsWith("sha256:")));
    if (inUse.length) {
      if (i > 480) throw new Error(`containers of these images still on the node after 120 s:\n${inUse.join("\n")}`);
      await sleep(250);
      continue;
    }
    if (names.length) ctr("images", "rm", "--sync", ...names);
    const left = refs.flatMap(namesOf);
    if (left.length) throw new Error(`still on the node after ctr images rm: ${left.join(", ")}`);
    const others = new Map<string, string>();
    for (const x of named)
      if (targets.has(x.digest) && !digestsOurs.has(x.digest))
        others.set(x.digest, `${x.name.replace(/@.*$/, "").replace(/:[^/:]*$/, "")}@${x.digest}`);
    return [...others.values()];
  }
}

/** A Go duration as the kubelet prints it ("1.234s", "850ms", "1m2.5s") in seconds. */
export function goSeconds(d: string): number {
  const unit: Record<string, number> = { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6, µs: 1e-6, ns: 1e-9 };
  let total = 0;
  let seen = false;
  for (const m of d.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g)) {
    total += Number(m[1]) * unit[m[2]];
    seen = true;
  }
  if (!seen) throw new Error(`not a Go duration: ${d}`);
  return total;
}

type Pulled = { image: string; seconds: number; withWaiting: number; bytes: number };

/** The kubelet's `Pulled` Events of a pod: its own pull times, or none for images already present. */
export async function pulledOf(
  kubeconfig: string,
  ns: string,
  pod: string,
): Promise<{ pulled: Pulled[]; present: number }> {
  const out = await kubectl(kubeconfig, [
    "get",
    "events",
    "-n",
    ns,
    "--field-selector",
    `involvedObject.name=${pod},reason=Pulled`,
    "-o",
    "json",
  ]);
  const pulled: Pulled[] = [];
  let present = 0;
  for (const e of JSON.parse(out).items as Array<{ message: string }>) {
    const m =
      /Successfully pulled image "([^"]+)" in (\S+) \((\S+) including waiting\)(?:\. Image size: (\d+) bytes)?/.exec(
        e.message,
      );
    if (m)
      pulled.push({ image: m[1], seconds: goSeconds(m[2]), withWaiting: goSeconds(m[3]), bytes: Number(m[4] ?? 0) });
    else if (/already present on machine/.test(e.message)) present++;
  }
  return { pulled, present };
}

/** When this process first saw each pod bound and each pod Ready, from one pod watch. */
export function watchPods(kubeconfig: string, ns: string) {
  const seen = new Map<string, { scheduled?: number; ready?: number }>();
  const child = spawn(
    kubectlPath(),
    [
      "get",
      "pods",
      "-n",
      ns,
      "--watch",
      "-o",
      `jsonpath={.metadata.name}{" "}{.spec.nodeName}{" "}{.status.conditions[?(@.type=="Ready")].status}{"\\n"}`,
    ],
    { env: { ...process.env, KUBECONFIG: kubeconfig }, stdio: ["ignore", "pipe", "ignore"] },
  );
  createInterface({ input: child.stdout! }).on("line", (line) => {
    const now = Date.now();
    const [name, node, ready] = line.trim().split(" ");
    if (!name) return;
    const s = seen.get(name) ?? {};
    if (node && s.scheduled === undefined) s.scheduled = now;
    if (ready === "True" && s.ready === undefined) s.ready = now;
    seen.set(name, s);
  });
  return { seen, stop: () => child.kill("SIGTERM") };
}

type Run = {
  total: number;
  scheduled: number;
  pull: number;
  start: number;
  attach: number;
  pulled: Pulled[];
  /** Warm runs: the parts (WORKSPACE_PARTS) and details (WORKSPACE_DETAILS), ms. */
  parts?: Record<string, number>;
  details?: Record<string, number>;
  /** Warm runs: each container's CPU time and time throttled by its CPU limit until `ready`, ms. */
  cpu?: Record<string, number>;
  /** Warm runs: the shaped floor's pod (bench/shaped-pod.ts) and the copies it reads, made before
   * the workspace went (its own Secrets and ConfigMaps go with it). */
  shaped?: { pod: Record<string, unknown>; copies: string[] };
};

/** A plain pod's run: POST -> Ready on the watch, and its parts (PLAIN_PARTS), ms. */
type PlainRun = { total: number; parts: Record<string, number> };

type PodObject = {
  metadata: { uid: string };
  status?: { containerStatuses?: Array<{ name: string; containerID?: string }> };
};

/** The directory named `pod<uid>` (the kubelet's cgroupfs layout) under cgroup v1 `controller`, or under the
 * v2 root when `controller` is "", if any. */
export function podCgroup(controller: string, uid: string): string | undefined {
  const find = (dir: string, depth: number): string | undefined => {
    if (depth > 4 || !existsSync(dir)) return undefined;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      if (e.name === `pod${uid}`) return join(dir, e.name);
      const deeper = find(join(dir, e.name), depth + 1);
      if (deeper) return deeper;
    }
    return undefined;
  };
  return find(join("/sys/fs/cgroup", controller), 0);
}

/**
 * Each container's CPU time so far and the time its CPU limit (CFS quota) held it back, in ms,
 * from the node's cgroup v1 controllers (this machine is the node): `<container>_cpu`,
 * `<container>_throttled`. None where the node has no v1 cpu controller.
 */
function containerCpu(pod: PodObject): Record<string, number> {
  const cpu = podCgroup("cpu", pod.metadata.uid);
  const acct = podCgroup("cpuacct", pod.metadata.uid);
  const out: Record<string, number> = {};
  if (!cpu || !acct) return out;
  for (const c of pod.status?.containerStatuses ?? []) {
    const id = c.containerID?.replace(/^[a-z]+:\/\//, "");
    if (!id || !existsSync(join(cpu, id))) continue;
    out[`${c.name}_cpu`] = Number(readFileSync(join(acct, id, "cpuacct.usage"), "utf8")) / 1e6;
    const throttled = /^throttled_time (\d+)$/m.exec(readFileSync(join(cpu, id, "cpu.stat"), "utf8"));
    out[`${c.name}_throttled`] = Number(throttled?.[1] ?? NaN) / 1e6;
  }
  return out;
}

/**
 * The cluster's env (cluster.sh env) once its real node is up and no module is deployed in it: a
 * module deployed in the cluster (its webhooks served by a Service) would reconcile the bench's
 * Sandboxes beside the one it runs, and its webhooks cannot be re-pointed at this process.
 */
export async function realNodeReady(kubeconfig: string): Promise<Record<string, string>> {
  const env = clusterEnv();
  if (env.JR2_REAL_NODE_STATUS !== "up")
    throw new Error(
      `the real node is not up (JR2_REAL_NODE_STATUS=${env.JR2_REAL_NODE_STATUS}): npm run cluster -- status`,
    );
  process.env.KUBECTL ??= env.KUBECTL;
  const hooks = await kubectl(kubeconfig, [
    "get",
    "validatingwebhookconfiguration",
    "-o",
    'jsonpath={range .items[?(@.webhooks[0].clientConfig.service)]}{.metadata.name}{" "}{end}',
  ]);
  if (hooks.trim())
    throw new Error(
      `a module is deployed in this cluster (webhooks ${hooks.trim()} served by a Service): ` +
        "the bench runs its own; remove the deployment (test/node/deployed.test.ts's afterAll does) first",
    );
  return env;
}

/** The nodeSelector and toleration that put a pod on the real node, from cluster.sh env. */
export function realNodePlacement(env: Record<string, string>) {
  const [labelKey, labelValue] = env.JR2_REAL_NODE_LABEL.split("=");
  const taint = /^([^=]+)=([^:]*):(.+)$/.exec(env.JR2_REAL_NODE_TAINT)!;
  return {
    nodeSelector: { [labelKey]: labelValue },
    tolerations: [{ key: taint[1], operator: "Equal", value: taint[2], effect: taint[3] }],
  };
}

/** `fn`, sent again up to three times when fetch reused a kept-alive connection the Orchestrator
 * closed at that moment ("other side closed"): such a request never reached it. */
export async function again<T>(fn: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++)
    try {
      return await fn();
    } catch (err) {
      if (i >= 3 || !/other side closed|ECONNRESET|fetch failed/.test(String((err as Error).cause ?? err))) throw err;
    }
}

/** What a real-node bench runs beside the node: the module, the node's cache agent and an
 * Orchestrator in in-cluster mode, as the node tier's Sandbox pod suite runs them. */
export type RealNodeStage = {
  operator: Awaited<ReturnType<typeof benchOperator>>;
  agent: Agent;
  orch: LocalOrchestrator;
};

/**
 * Creates the Sandboxes' and the Orchestrator's namespaces and starts the stage in them; `stop`
 * stops whatever of it started and deletes both namespaces (without waiting).
 */
export async function startRealNodeStage(
  kubeconfig: string,
  env: Record<string, string>,
  o: {
    name: string;
    ns: string;
    orchNs: string;
    tmp: string;
    cacheRoot: string;
    credentials: string[];
    podConfig: string;
  },
  started: Partial<RealNodeStage>,
): Promise<RealNodeStage> {
  for (const n of [o.ns, o.orchNs]) await kubectl(kubeconfig, ["create", "namespace", n]);
  // Opted in: admission refuses a Sandbox create anywhere else (decision 0067).
  await kubectl(kubeconfig, ["label", "namespace", o.ns, `${SANDBOX_NAMESPACE_LABEL}=${SANDBOX_NAMESPACE_ENABLED}`]);
  // A pod is admitted once its namespace's default service account exists.
  for (let i = 0; i < 120; i++) {
    if ((await kubectl(kubeconfig, ["get", "sa", "-n", o.ns, "-o", "name"])).includes("default")) break;
    await sleep(250);
  }
  started.operator = await benchOperator(kubeconfig, await freePort("127.0.0.1"), o.name, {
    [CACHE_AGENT_ENV.cacheRoot]: o.cacheRoot,
    // Where the Orchestrator's pods would run: the policies' peers are there (decision 0067).
    [OPERATOR_ENV.companionNamespace]: o.orchNs,
  });
  started.agent = await startCacheAgent(env.JR2_REAL_NODE_NAME, o.cacheRoot);
  started.orch = await startLocalOrchestrator({
    kubeconfig,
    namespace: o.ns,
    dir: join(o.tmp, "orchestrator"),
    credentials: o.credentials,
    reposRoot: o.cacheRoot,
    podAddress: env.JR2_REAL_NODE_IP,
    env: {
      [ORCHESTRATOR_ENV.podConfigFile]: o.podConfig,
      [ORCHESTRATOR_ENV.podNamespace]: o.orchNs,
      // No egress point, as in the node tier (test/node/sandbox-pod-suite.ts): its default, a
      // Service in orchNs, does not resolve here, and every create is refused (decision 0051).
      [ORCHESTRATOR_ENV.egressUrl]: "off",
    },
  });
  return started as RealNodeStage;
}

/** Stops what `startRealNodeStage` started, and deletes its namespaces. */
export async function stopRealNodeStage(
  kubeconfig: string,
  started: Partial<RealNodeStage>,
  namespaces: string[],
): Promise<void> {
  await started.orch?.stop();
  await started.agent?.stop();
  await started.operator?.stop();
  for (const n of namespaces) await kubectl(kubeconfig, ["delete", "namespace", n, "--wait=false"]).catch(() => {});
}

export async function realNodeBench(kubeconfig: string): Promise<Result[]> {
  const runs = Number(process.env.BENCH_REAL_NODE_RUNS ?? 20);
  const warmRuns = Number(process.env.BENCH_REAL_NODE_WARM_RUNS ?? 3);
  const withEffector = process.env.BENCH_REAL_NODE_EFFECTOR === "1";
  const env = await realNodeReady(kubeconfig);
  // run.ts built dist/ (unless BENCH_BUILD=0): the images carry its bundles.
  const images = pushProjectImages(env.JR2_REGISTRY, false);
  const refs = [images.sandbox, images.companions];
  log(`images ${refs.join(" ")}`);

  const placement = realNodePlacement(env);
  const suffix = randomBytes(3).toString("hex");
  const ns = `jr2-bench-node-${suffix}`;
  const orchNs = `jr2-bench-orch-${suffix}`;
  const tmp = mkdtempSync(join(tmpdir(), "jr2-bench-real-node-"));
  // uid 65532 in the pod reads the cache through the hostPath: every directory on the way is 0755.
  chmodSync(tmp, 0o755);
  const cacheRoot = join(tmp, "caches");
  mkdirSync(cacheRoot, { mode: 0o755 });
  const remotes = join(tmp, "remotes");
  const remote = oneCommitRepository(join(tmp, "src"), join(remotes, "bench.git"));
  const podConfig = join(tmp, "pod-config.json");
  // The Effector's image is the companions image, already on the node (decision 0070).
  writeFileSync(
    podConfig,
    JSON.stringify({ custodian: { image: images.companions }, effector: { image: images.companions }, placement }),
  );

  const stage: Partial<RealNodeStage> = {};
  let watch: ReturnType<typeof watchPods> | undefined;
  const stopWatches: Array<() => void> = [];
  /** Images of others removed for a cold run, pulled back at the end. */
  const restore: string[] = [];
  try {
    const { orch } = await startRealNodeStage(
      kubeconfig,
      env,
      { name: "bench-real-node", ns, orchNs, tmp, cacheRoot, credentials: [remotes], podConfig },
      stage,
    );
    const client = new OrchestratorClient({ url: orch.url, token: orch.token });
    watch = watchPods(kubeconfig, ns);

    // The timelines (bench/timeline.ts): every object of the run's namespace as it changes.
    const tl = new Timelines();
    const fetches: Array<{ fetchedAt: number; seen: number }> = [];
    stopWatches.push(
      watchJson(kubeconfig, "pods", ns, (_, o, at) => markPod(tl, o, at)),
      watchJson(kubeconfig, "sandboxes.core.jr2.dev", ns, (_, o, at) => markSandbox(tl, o, at)),
      watchJson(kubeconfig, "services", ns, (_, o, at) => o.metadata?.name && tl.mark(o.metadata.name, "service", at)),
      // What the Orchestrator writes beside each Sandbox carries its name as a label.
      ...["secrets", "configmaps"].map((r) =>
        watchJson(
          kubeconfig,
          r,
          ns,
          (_, o, at) => {
            const sandbox = o.metadata?.labels?.[SANDBOX_LABEL];
            if (sandbox) tl.mark(sandbox, `owned:${r}/${o.metadata!.name}`, at);
          },
          ["-l", SANDBOX_LABEL],
        ),
      ),
      watchJson(kubeconfig, "repos.core.jr2.dev", ns, (_, o, at) => {
        const f = Date.parse(o.status?.nodes?.[env.JR2_REAL_NODE_NAME]?.fetchedAt ?? "");
        if (Number.isFinite(f) && !fetches.some((x) => x.fetchedAt === f)) fetches.push({ fetchedAt: f, seen: at });
      }),
    );
    const logs = join(dirname(kubeconfig), "logs");
    const CONTAINERD_LOG = join(logs, "containerd.log");
    const KUBELET_LOG = join(logs, "kubelet.log");
    const logOffsets = () => ({ containerd: logSize(CONTAINERD_LOG), kubelet: logSize(KUBELET_LOG) });
    /** containerd's and the kubelet's marks of `pod` since `from`, waited for (each logs a moment
     * after; `want` the ones waited for). */
    const nodeMarks = async (
      pod: string,
      from: ReturnType<typeof logOffsets>,
      want = ["containers_up", "kl_running"],
    ): Promise<Marks> => {
      for (let k = 0; ; k++) {
        const m: Marks = {
          ...containerdMarks(logSince(CONTAINERD_LOG, from.containerd), ns, pod),
          ...kubeletMarks(logSince(KUBELET_LOG, from.kubelet), ns, pod),
        };
        if (want.every((x) => m[x] !== undefined) || k >= 20) return m;
        await sleep(100);
      }
    };
    /** The warm workspace's whole timeline, read before its pod goes. */
    const timelineOf = async (name: string, t0: number, done: number, from: ReturnType<typeof logOffsets>) => {
      // The watches deliver a moment after the Orchestrator's own.
      for (let k = 0; k < 30; k++) {
        const m = tl.get(name);
        if (["cond:Ready", "sbx:Ready", "ready:harness", "ready:custodian"].every((x) => m[x] !== undefined)) break;
        await sleep(100);
      }
      const container = async (c: string) =>
        containerLogMarks(await kubectl(kubeconfig, ["logs", "-n", ns, name, "-c", c]).catch(() => ""), c);
      const m: Marks = {
        ...tl.get(name),
        ...(await nodeMarks(name, from)),
        ...(await container("harness")),
        ...(await container("custodian")),
        ...orchestratorMarks(orch!.lines, name),
        post: t0,
        done,
      };
      const owned = Object.keys(m).filter((k) => k.startsWith("owned:"));
      if (owned.length) m.owned = Math.max(...owned.map((k) => m[k]));
      // The cache agent's fetch this Sandbox asked for: the first seen after the create.
      const fetch = fetches.find((f) => f.seen > t0);
      if (fetch) Object.assign(m, { repo_fetched: fetch.fetchedAt, repo_seen: fetch.seen });
      return m;
    };

    const once = async (cold: boolean, i: number, effector = false): Promise<Run> => {
      if (cold)
        for (const other of await removeImages(env.CRANE, refs)) if (!restore.includes(other)) restore.push(other);
      const from = logOffsets();
      const t0 = Date.now();
      const { name } = await again(() =>
        client.createWorkspace({
          image: images.sandbox,
          branch: `bench/${i}${effector ? "-effector" : ""}`,
          repos: [{ slot: "app", url: remote }],
          ...(effector ? { effector: {} } : {}),
        }),
      );
      // Its `ready` as a Machine waiting on the workspace's events sees it (not a poll's period later).
      let state = "";
      let why: unknown;
      const timeout = AbortSignal.timeout(300_000);
      try {
        for await (const item of client.workspaceEvents(name, { signal: timeout })) {
          const view = item.type === "snapshot" ? item.view : undefined;
          if (view) [state, why] = [view.state, view.failure ?? view.lost];
          else if (item.type === "transition") [state, why] = [item.to, item.failure ?? item.lost];
          if (state === "ready" || FINAL_STATES.includes(state)) break;
        }
      } catch (err) {
        if (!timeout.aborted) throw err;
      }
      const ready = Date.now();
      if (state !== "ready")
        throw new Error(
          `workspace ${name} ${state || "not ready"} after ${(ready - t0) / 1000}s${why ? `: ${JSON.stringify(why)}` : ""}`,
        );
      const seen = watch!.seen.get(name) ?? {};
      if (seen.scheduled === undefined || seen.ready === undefined)
        throw new Error(`the pod watch did not see ${name} bound and Ready`);
      // The kubelet records its Events asynchronously: one Pulled per container (init containers
      // too, should a pod have any), wait for them all.
      const containers = Number(
        await kubectl(kubeconfig, [
          "get",
          "pod",
          "-n",
          ns,
          name,
          "-o",
          "jsonpath={.spec.initContainers[*].name} {.spec.containers[*].name}",
        ]).then((s) => s.trim().split(/\s+/).length),
      );
      let events = await pulledOf(kubeconfig, ns, name);
      for (let k = 0; k < 40 && events.pulled.length + events.present < containers; k++) {
        await sleep(250);
        events = await pulledOf(kubeconfig, ns, name);
      }
      if (cold && events.pulled.length < refs.length)
        throw new Error(`cold run ${i}: the kubelet pulled ${events.pulled.length} images, not ${refs.length}`);
      const pull = events.pulled.reduce((a, p) => a + p.seconds * 1000, 0);
      const r: Run = {
        total: ready - t0,
        scheduled: seen.scheduled - t0,
        pull,
        start: seen.ready - seen.scheduled - pull,
        attach: ready - seen.ready,
        pulled: events.pulled,
      };
      log(
        `${cold ? "cold" : "warm"}${effector ? " with effector" : ""} ${i + 1}: ${s(r.total)} s (scheduled ${s(r.scheduled)}, pull ${s(r.pull)}` +
          ` [${r.pulled.map((p) => `${p.image.split("/").pop()!.split("@")[0]} ${p.seconds.toFixed(2)}s`).join(", ")}],` +
          ` start ${s(r.start)}, attach ${s(r.attach)})`,
      );
      if (!cold) {
        const m = await timelineOf(name, t0, ready, from);
        r.parts = spans(m, WORKSPACE_PARTS);
        r.details = spans(m, WORKSPACE_DETAILS);
        log(`warm ${i + 1} parts: ${line(r.parts)} = ${s(r.total)}`);
        log(`warm ${i + 1} details: ${line(r.details)}`);
        const pod = JSON.parse(await kubectl(kubeconfig, ["get", "pod", "-n", ns, name, "-o", "json"])) as PodObject;
        r.cpu = containerCpu(pod);
        log(`warm ${i + 1} cpu until ready: ${line(r.cpu)}`);
        if (!effector) r.shaped = await shapedCopies(pod, `shaped-${i}`);
      }
      // Gone before the next run: its pod, and the node's containers, so removing the images
      // leaves no snapshot of theirs behind.
      await again(() => client.deleteWorkspace(name));
      for (const deadline = Date.now() + 180_000; ; await sleep(250)) {
        const left = await kubectl(kubeconfig, ["get", "pods", "-n", ns, "-o", "name"]);
        if (!left.includes(`pod/${name}`) && containersOf(refs).length === 0) break;
        if (Date.now() > deadline) throw new Error(`${name}'s pod or containers still there after 180 s`);
      }
      return r;
    };

    /** What the shaped floor reads: a copy of each Secret and ConfigMap the workspace's pod names,
     * under a name of the floor's own. The copies' paths, to remove with the floor's pod. */
    const shapedCopies = async (pod: PodObject, name: string) => {
      const renamed = (ref: ObjectRef) => `${name}-${ref.name}`;
      const copies: string[] = [];
      for (const ref of podRefs(pod)) {
        const plural = ref.kind === "Secret" ? "secrets" : "configmaps";
        const base = `/api/v1/namespaces/${ns}/${plural}`;
        const o = await kubeRequest<{ type?: string; data?: unknown; binaryData?: unknown }>(
          "GET",
          `${base}/${ref.name}`,
        );
        const { type, data, binaryData } = o;
        await kubeRequest("POST", base, {
          apiVersion: "v1",
          kind: ref.kind,
          metadata: { name: renamed(ref), namespace: ns },
          ...(type ? { type } : {}),
          ...(data ? { data } : {}),
          ...(binaryData ? { binaryData } : {}),
        });
        copies.push(`${base}/${renamed(ref)}`);
      }
      return { pod: shapedPod(pod, name, ns, renamed), copies };
    };

    /** A pod on the same node, from this process's client, timed from its POST to Ready on the
     * watch, then gone with its containers. */
    const podOnce = async (what: string, i: number, pod: Record<string, unknown>, name: string): Promise<PlainRun> => {
      // A kept-alive connection, as the Orchestrator's and the operator's writes have.
      await kubeRequest("GET", `/api/v1/namespaces/${ns}`);
      const from = logOffsets();
      const t0 = Date.now();
      await kubeRequest("POST", paths.pods(ns), pod);
      for (const deadline = t0 + 120_000; tl.get(name)["cond:Ready"] === undefined; await sleep(10))
        if (Date.now() > deadline) throw new Error(`${what} pod ${name} not Ready after 120 s`);
      const m: Marks = { ...tl.get(name), ...(await nodeMarks(name, from, ["containers_up"])), post: t0 };
      const r: PlainRun = { total: m["cond:Ready"] - t0, parts: spans(m, PLAIN_PARTS) };
      log(`${what} ${i + 1}: ${s(r.total)} s (${line(r.parts)})`);
      await kubeRequest("DELETE", paths.pod(ns, name));
      for (const deadline = Date.now() + 180_000; ; await sleep(250)) {
        const left = await kubectl(kubeconfig, ["get", "pods", "-n", ns, "-o", "name"]);
        if (!left.includes(`pod/${name}`) && containersOf(refs).length === 0) break;
        if (Date.now() > deadline) throw new Error(`${name} or its containers still there after 180 s`);
      }
      return r;
    };

    /** A plain pod of the same two images on the same node: its POST -> Ready, then gone. */
    const plainOnce = async (i: number): Promise<PlainRun> => {
      const name = `plain-${i}`;
      const sleeping = (image: string, c: string) => ({
        name: c,
        image,
        // Both images carry tini (the shared base), which passes the TERM on: deleted at once.
        command: ["/usr/bin/tini", "--", "sleep", "infinity"],
      });
      const pod = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name, namespace: ns },
        spec: {
          ...placement,
          // As the Sandbox pod: no token volume, no service variables.
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          containers: [sleeping(images.sandbox, "harness"), sleeping(images.companions, "custodian")],
        },
      };
      return podOnce("plain", i, pod, name);
    };

    /** The shaped floor: the workspace's own pod, sleeping (bench/shaped-pod.ts), then its copies gone. */
    const shapedOnce = async (i: number, shaped: NonNullable<Run["shaped"]>): Promise<PlainRun> => {
      const r = await podOnce("shaped", i, shaped.pod, `shaped-${i}`);
      for (const path of shaped.copies) await kubeRequest("DELETE", path);
      return r;
    };

    const cold: Run[] = [];
    for (let i = 0; i < runs; i++) cold.push(await once(true, i));
    // Warm means present: with no cold run before, images just pushed may not be on the node yet.
    for (const ref of refs)
      if (!namesOf(ref).length) {
        log(`pulling ${ref} onto the node for the warm runs`);
        ctr("images", "pull", "--plain-http", ref);
      }
    // Each warm workspace followed by a plain pod and its shaped floor: all three see the machine
    // as it is at that moment.
    const warm: Run[] = [];
    const plain: PlainRun[] = [];
    const shaped: PlainRun[] = [];
    const withEffectorRuns: Run[] = [];
    for (let i = 0; i < warmRuns; i++) {
      // With BENCH_REAL_NODE_EFFECTOR=1 its twin with an Effector, first every other run.
      if (withEffector && i % 2 === 1) withEffectorRuns.push(await once(false, i, true));
      const run = await once(false, i);
      warm.push(run);
      if (withEffector && i % 2 === 0) withEffectorRuns.push(await once(false, i, true));
      plain.push(await plainOnce(i));
      shaped.push(await shapedOnce(i, run.shaped!));
    }

    const out: Result[] = [{ bench: B, metric: "cold_runs", value: cold.length, unit: "count" }];
    const figures = (prefix: string, rs: Run[], ps: number[]) => {
      for (const part of ["total", "scheduled", "pull", "start", "attach"] as const) {
        const v = sorted(rs.map((r) => r[part]));
        for (const p of ps)
          out.push({
            bench: B,
            metric: `${prefix}_${part}_${p === 100 ? "max" : `p${p}`}_seconds`,
            value: round(percentile(v, p) / 1000),
            unit: "s",
          });
      }
    };
    // No cold run (BENCH_REAL_NODE_RUNS=0): no cold figure, rather than figures of nothing.
    if (cold.length) figures("cold", cold, [50, 90, 100]);
    // Per image, the kubelet's pull time and the bytes it says it pulled: the cold runs'.
    if (cold.length)
      for (const [what, ref] of [
        ["sandbox", images.sandbox],
        ["companions", images.companions],
      ] as const) {
        const ps = cold.flatMap((r) => r.pulled.filter((p) => p.image === ref));
        out.push({
          bench: B,
          metric: `cold_pull_${what}_p50_seconds`,
          value: round(percentile(sorted(ps.map((p) => p.seconds)), 50)),
          unit: "s",
        });
        out.push({ bench: B, metric: `${what}_image_mb`, value: round((ps[0]?.bytes ?? NaN) / 1e6), unit: "MB" });
      }
    if (warm.length) {
      out.push({ bench: B, metric: "warm_runs", value: warm.length, unit: "count" });
      figures("warm", warm, [50]);
      const percentiles = <T>(metric: string, rs: T[], of: (r: T) => number) => {
        const v = sorted(rs.map(of).filter(Number.isFinite));
        if (!v.length) return;
        for (const p of [50, 90])
          out.push({ bench: B, metric: `${metric}_p${p}_seconds`, value: round(percentile(v, p) / 1000), unit: "s" });
      };
      percentiles("warm_ready", warm, (r) => r.total);
      for (const [name] of WORKSPACE_PARTS) percentiles(`warm_part_${name}`, warm, (r) => r.parts?.[name] ?? NaN);
      for (const [name] of WORKSPACE_DETAILS) percentiles(`warm_detail_${name}`, warm, (r) => r.details?.[name] ?? NaN);
      for (const name of Object.keys(warm[0]?.cpu ?? {}))
        percentiles(`warm_cgroup_${name}`, warm, (r) => r.cpu?.[name] ?? NaN);
      // Each floor's figures in the same names, and the workspace's p50 over the floor's: over the
      // shaped pod, what our software adds to its own pod's start (decision 0064).
      const p50 = (values: number[]) => percentile(sorted(values), 50);
      for (const [floor, rs] of [
        ["plain_pod", plain],
        ["shaped_pod", shaped],
      ] as const) {
        out.push({ bench: B, metric: `${floor}_runs`, value: rs.length, unit: "count" });
        percentiles(`${floor}_ready`, rs, (r) => r.total);
        for (const [name] of PLAIN_PARTS) percentiles(`${floor}_part_${name}`, rs, (r) => r.parts[name]);
        out.push({
          bench: B,
          metric: `warm_ready_ratio_to_${floor}`,
          value: round(p50(warm.map((r) => r.total)) / p50(rs.map((r) => r.total))),
          unit: "ratio",
        });
      }
      // What the Effector adds to a workspace's start: its twins' p50 over the workspaces' without.
      if (withEffectorRuns.length) {
        out.push({ bench: B, metric: "warm_with_effector_runs", value: withEffectorRuns.length, unit: "count" });
        percentiles("warm_ready_with_effector", withEffectorRuns, (r) => r.total);
        for (const [name] of WORKSPACE_PARTS)
          percentiles(`warm_with_effector_part_${name}`, withEffectorRuns, (r) => r.parts?.[name] ?? NaN);
        for (const name of Object.keys(withEffectorRuns[0]?.cpu ?? {}))
          percentiles(`warm_with_effector_cgroup_${name}`, withEffectorRuns, (r) => r.cpu?.[name] ?? NaN);
        out.push({
          bench: B,
          metric: "warm_ready_ratio_with_effector",
          value: round(p50(withEffectorRuns.map((r) => r.total)) / p50(warm.map((r) => r.total))),
          unit: "ratio",
        });
      }
    }
    return out;
  } finally {
    for (const stop of stopWatches) stop();
    watch?.stop();
    await stopRealNodeStage(kubeconfig, stage, [ns, orchNs]);
    rmSync(tmp, { recursive: true, force: true });
    // Leave the node as it was found: both images present (a run stopped midway may have removed
    // them) and any other image removed for sharing their layers. The kubelet would pull them again
    // for the next pod; this spares that pod the wait.
    for (const ref of [...refs, ...restore])
      if (!namesOf(ref).length) {
        log(`pulling ${ref} back onto the node`);
        spawnSync("bash", [CLUSTER_SH, "ctr", "images", "pull", "--plain-http", ref], { stdio: "ignore" });
      }
  }
}

const s = (ms: number) => (ms / 1000).toFixed(2);
/** Named spans in seconds, in order, `?` where a mark is missing. */
const line = (spans: Record<string, number>) =>
  Object.entries(spans)
    .map(([k, v]) => `${k} ${Number.isFinite(v) ? s(v) : "?"}`)
    .join(", ");
