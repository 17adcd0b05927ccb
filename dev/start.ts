// `npm start`: the operator on an embedded default. With no KUBECONFIG it brings up the local
// control plane (dev/cluster/cluster.sh); it builds the module, runs it here with admission and
// watch in one process, and on exit removes the webhook configurations it registered, so a stopped
// operator never blocks the cluster. Beside it: the Orchestrator's API, a cache agent, a demo
// repository inside its fence, and the model its Agents ask (local-model.ts: the scripted provider,
// or the endpoint JR2_MODEL_URL names with its key in JR2_MODEL_KEY_FILE).
//
// Where the Sandboxes run (start-mode.ts, docs/decisions/0039-in-cluster-by-default.md): with the
// local cluster's real node up, in-cluster mode: the images are pushed to its registry, each
// Sandbox is a pod on the real node, the scripted model is served from a pod there, and the
// Orchestrator listens where those pods reach it. Otherwise, or with JR2_START_MODE=local, local
// process mode, the named fallback: a Harness and a Custodian per Sandbox run here, as you.
import "./require-node"; // first: an older Node stops here, saying what to install (decision 0052)
import { spawn, spawnSync } from "node:child_process";
import { join } from "node:path";
import { chmodSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { K8s, kind } from "kubernetes-fluent-client";
import { apply, kubectlPath, run } from "./kubectl";
import { egressPointObjects } from "./in-cluster-egress";
import { openToSandboxes } from "./node-guard";
import { EGRESS, EGRESS_PROXY_PORT } from "../api/egress-point";
import { oneCommitRepository } from "./repository";
import { type Agent, startCacheAgent } from "./local-cache-agent";
import { CACHE_DIR, ROOT, startLocalOperator } from "./local-operator";
import { clusterEnv } from "../scripts/images/main";
import { type LocalModel, startLocalModel } from "./local-model";
import { type LocalOrchestrator, startLocalOrchestrator } from "./local-orchestrator";
import { CACHE_AGENT_ENV, LOCAL_REPO_ROOTS_ENV, ORCHESTRATOR_ENV } from "../api/env";
import { sandboxNamespace } from "../api/sandbox-namespaces";
import { COMPANION_NAMESPACE, DEFAULT_SANDBOX_NAMESPACE } from "../api/wire";
import { modeBanner, runtimeBanner, startArgs, startMode, startRuntime } from "./start-mode";
import { distOlderThanSources, pushProjectImages, type ProjectImages } from "./project-images";

/** The demo's state (its repository, caches, Orchestrator key and tokens); JR2_DEMO_DIR moves it. */
const DEMO = process.env.JR2_DEMO_DIR || join(ROOT, ".jr2", "demo");
/** Local mode's one root for Repo paths (decision 0066): the demo's remotes, never its caches. */
const LOCAL_REMOTES = join(DEMO, "remotes");

/** A bare repository with one commit for the demo, inside the fence. */
function demoRepository(): string {
  const remote = join(DEMO, "remotes", "demo.git");
  if (existsSync(remote)) return remote;
  mkdirSync(DEMO, { recursive: true });
  return oneCommitRepository(join(DEMO, "src"), remote);
}

function clusterUp(): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", [join(ROOT, "dev", "cluster", "cluster.sh"), "up"], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let last = "";
    child.stdout.on("data", (chunk: Buffer) => {
      process.stdout.write(chunk);
      const lines = chunk.toString().trim().split("\n");
      last = lines[lines.length - 1] || last;
    });
    child.on("exit", (code) => {
      const m = /^KUBECONFIG=(.+)$/.exec(last.trim());
      if (code === 0 && m) resolve(m[1]);
      else reject(new Error(`npm run cluster -- up failed (exit ${code}); see its output above`));
    });
  });
}

async function main() {
  // `npm start -- --runtime-class gvisor`: read first, so a mistyped argument stops before anything starts.
  const args = startArgs(process.argv.slice(2));
  // The local cluster's settings (read once it is up); a KUBECONFIG naming another file is a
  // cluster of the user's own.
  const given = process.env.KUBECONFIG;
  let local = given ? clusterEnv() : undefined;
  const ownCluster = given !== undefined && given !== "" && given !== local?.KUBECONFIG;
  const kubeconfig = given || (await clusterUp());
  process.env.KUBECONFIG = kubeconfig;
  local ??= clusterEnv();
  const mode = startMode(process.env, ownCluster ? undefined : local);
  console.log(`\n${modeBanner(mode)}`);
  // What runs (the module here, the bundles in the images) is what is checked out: built again when
  // a source is newer than dist/.
  const stale = distOlderThanSources();
  if (stale) {
    console.log(`\n==> building the module (npm run build): ${stale} is newer than dist/`);
    const build = spawnSync("npm", ["run", "build", "--silent"], {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "inherit"],
    });
    if (build.status !== 0) throw new Error("npm run build failed; run it alone to see why");
  } else console.log(`\n==> the module is built (dist/ is as new as every source)`);
  const node = mode.mode === "in-cluster" ? mode.node : undefined;
  // The workspaces' runtime classes (decision 0078): in-cluster, every RuntimeClass the local cluster
  // has (gVisor's on the real node, decision 0055) is one a create may name.
  const classes = node ? (await K8s(kind.RuntimeClass).Get()).items.map((c) => c.metadata!.name!) : [];
  const runtime = startRuntime(args.runtimeClass, mode, classes);
  if (node) console.log(runtimeBanner(runtime));
  let images: ProjectImages | undefined;
  if (node) {
    console.log(`==> pushing the images (npm run images) to ${node.registry}`);
    images = pushProjectImages(node.registry, false);
  }
  // The real node's Repo caches: the operator mounts them into its pods from this directory, which
  // the node's cache agent fills (the pods' uid reads it: 0755 on the way).
  const nodeCaches = node && join(DEMO, "caches", node.name);
  if (nodeCaches) {
    mkdirSync(nodeCaches, { recursive: true });
    for (const dir of [DEMO, join(DEMO, "caches"), nodeCaches]) chmodSync(dir, 0o755);
  }

  const port = Number(process.env.JR2_PEPR_PORT ?? 3000);
  console.log(`==> starting the module: admission on https://127.0.0.1:${port}, the watcher beside it`);
  const op = await startLocalOperator({
    kubeconfig,
    stateDir: join(CACHE_DIR, "operator"),
    port,
    logs: "inherit",
    env: { [LOCAL_REPO_ROOTS_ENV]: LOCAL_REMOTES, ...(nodeCaches ? { [CACHE_AGENT_ENV.cacheRoot]: nodeCaches } : {}) },
  });

  // The Sandboxes' namespace (examples/sandbox.yaml's too), opted in as an installation's is
  // (decision 0047).
  await K8s(kind.Namespace).Apply(sandboxNamespace(DEFAULT_SANDBOX_NAMESPACE) as kind.Namespace);
  // The cache agents (the real node's, or one per kwok node) and the Orchestrator, when this is the
  // local control plane.
  const agents: Agent[] = [];
  let orch: LocalOrchestrator | undefined;
  let model: LocalModel | undefined;
  let egress: object[] = [];
  let closePort: (() => void) | undefined;
  const nodes = node
    ? [node.name]
    : (await K8s(kind.Node).Get()).items
        .filter((n) => n.metadata?.annotations?.["kwok.x-k8s.io/node"])
        .map((n) => n.metadata!.name!);
  if (nodes.length) {
    for (const n of nodes)
      agents.push(await startCacheAgent(n, join(DEMO, "caches", n), { [LOCAL_REPO_ROOTS_ENV]: LOCAL_REMOTES }));
    const remote = demoRepository();
    model = await startLocalModel({
      namespace: DEFAULT_SANDBOX_NAMESPACE,
      dir: DEMO,
      inCluster: node && { image: images!.companions, placement: node.placement, modelNamespace: "jr2-demo-model" },
      runtime,
    });
    console.log(`==> the Agents' model: ${model.summary} (its key held by each Sandbox's Custodian)`);
    const orchestratorPort = Number(process.env.JR2_ORCHESTRATOR_PORT ?? 8090);
    if (node) {
      // Every connection out of a Sandbox pod goes through the egress point (decision 0051): it runs
      // on the real node from the built manifest, its base list this run's pod config.
      console.log(`==> the egress point: ${EGRESS} in ${COMPANION_NAMESPACE}, on the real node`);
      egress = egressPointObjects({
        dist: join(ROOT, "dist"),
        pushed: images!.byTag,
        placement: node.placement,
        podConfig: readFileSync(model.podConfigFile, "utf8"),
      });
      await apply(kubeconfig, egress);
      await run(kubeconfig, ["rollout", "status", "-n", COMPANION_NAMESPACE, `deployment/${EGRESS}`, "--timeout=180s"]);
      // This Orchestrator is a process on the node, which is closed to Sandbox pods: its one port
      // is opened to them while it runs (decision 0051), so each Custodian forwards its picks here.
      closePort = openToSandboxes(node.guardPorts, orchestratorPort);
    }
    orch = await startLocalOrchestrator({
      kubeconfig,
      namespace: DEFAULT_SANDBOX_NAMESPACE,
      dir: join(DEMO, "orchestrator"),
      credentials: [join(DEMO, "remotes")],
      reposRoot: join(DEMO, "caches", "{node}"),
      port: orchestratorPort,
      echo: true,
      // In-cluster: each Sandbox a pod, and this process listening where the real node's pods
      // reach it, so each Custodian forwards its Sandbox's picks here.
      podAddress: node?.address,
      env: {
        [ORCHESTRATOR_ENV.podConfigFile]: model.podConfigFile,
        ...(node
          ? { [ORCHESTRATOR_ENV.egressUrl]: `http://${EGRESS}.${COMPANION_NAMESPACE}.svc:${EGRESS_PROXY_PORT}` }
          : {}),
      },
    });
    const image = images?.sandbox ?? "ghcr.io/example/harness:1";
    console.log(`
The Orchestrator's API is at ${orch.url} (token in ${join(DEMO, "orchestrator", "api-tokens")}). A workspace:
  curl -sS -X POST ${orch.url}/v1/workspaces -H "authorization: Bearer ${orch.token}" \\
    -H 'content-type: application/json' \\
    -d '{"image":"${image}","branch":"feature/demo","repos":[{"slot":"app","url":"${remote}"}]}'
  curl -sS ${orch.url}/v1/workspaces -H "authorization: Bearer ${orch.token}"
An Agent's turn, held for your approval (examples/README.md):
  JR2_ORCHESTRATOR_URL=${orch.url} JR2_HARNESS_IMAGE=${image} JR2_REPO_URL=${remote} \\
    npx tsx examples/propose-machine.ts`);
  }

  let kubectl = "kubectl";
  try {
    kubectl = kubectlPath();
  } catch {
    // a cluster of the user's own: their kubectl
  }
  console.log(`
jr2-operator is running: admission at https://127.0.0.1:${port}, the watcher (metrics) at
https://127.0.0.1:${op.watcherPort}, watching Sandboxes.
Try it:
  export KUBECONFIG=${kubeconfig}
  ${kubectl} apply -f ${join(ROOT, "examples", "sandbox.yaml")}
  ${kubectl} get sbx -w
Ctrl-C stops it and removes its webhook configurations.
`);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`\n==> ${signal}: removing webhook configurations and stopping the module`);
    await orch?.stop();
    closePort?.();
    // The egress point's objects, not the namespaces (the Sandboxes' is shared).
    const ours = egress.filter((o) => (o as { kind: string }).kind !== "Namespace");
    if (ours.length)
      await run(
        kubeconfig,
        ["delete", "--ignore-not-found", "--wait=false", "-f", "-"],
        JSON.stringify({ apiVersion: "v1", kind: "List", items: ours }),
      ).catch((err: unknown) => console.error(`the egress point was not removed: ${(err as Error).message}`));
    await model?.stop();
    await Promise.all(agents.map((a) => a.stop()));
    await op.stop();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  void op.exited.then(async ({ role, code }) => {
    if (stopping) return;
    console.error(`the module's ${role} exited (${code}); removing its webhook configurations`);
    await op.stop();
    process.exit(1);
  });
}

main().catch((err) => {
  console.error(`npm start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
