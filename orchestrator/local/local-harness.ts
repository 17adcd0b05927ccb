// Local mode's endpoint resolver. Outside the cluster a Sandbox's status.endpoint (a Service name)
// does not resolve, and kwok's pods run nothing, so each Sandbox gets a Harness running here: the
// real Harness (harness/), its /repos the cache root of the node the Sandbox's pod is on, its
// /work a directory of its own, and the env its pod would have had. In `process` mode the real
// Custodian runs beside it with its pod's config, values and CA (local-custodian.ts; the CA's
// files kept in step with its Secret every 5 minutes, as a kubelet would), and the Harness's env
// points at it; both are detached processes (local-process.ts) that outlive a killed
// Orchestrator, as a pod does, and the next Orchestrator adopts them from `<name>.pod/local.json`.
// `inline` (a benchmark's many workspaces) runs the Harness in this process and no Custodian.
// Used only when the Orchestrator runs outside the cluster (JR2_LOCAL_HARNESS); never in a pod.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { SandboxModel } from "../../api/crd";
import { startHarness } from "../../harness/harness-server";
import { CA_CERT_KEY } from "../../api/custodian-config";
import { HARNESS_ENV } from "../../api/env";
import { repoCacheNamespaceDir } from "../../api/wire";
import { localHarnessEnv, startLocalCustodian, syncLocalCa } from "./local-custodian";
import { effectorSidecar, startLocalEffector } from "./local-effector";
import { alive, companionCommand, hostEnv, killPid, startDetached, stopPid } from "./local-process";

export type LocalHarnessOptions = {
  /** `process`: one Harness process per Sandbox (as in a pod); `inline`: a Harness server in this
   * process (cheap, for a benchmark of many workspaces). */
  mode: "process" | "inline";
  /** The cache root of a node; `{node}` in it is replaced by the node's name. */
  reposRoot: string;
  /** Each Sandbox's /work is `<workRoot>/<name>`, its Custodian's files `<workRoot>/<name>.pod`. */
  workRoot: string;
  /** Where the Sandboxes live: the Custodian's ConfigMap and Secrets are read there. */
  namespace: string;
  log?: (entry: Record<string, unknown>) => void;
};

type Running = { url: string; effector?: EffectorAddress; stop(): Promise<void> };
/** Where the Orchestrator's gateway reaches a Sandbox's Effector, and the pod address it signs for. */
export type EffectorAddress = { url: string; pod: string };

/** How often each local Custodian's CA files are brought in step with the Sandbox's CA Secret. */
const CA_SYNC_MS = 5 * 60_000;

export class LocalHarnesses {
  readonly #running = new Map<string, Promise<Running>>();
  readonly #effectors = new Map<string, EffectorAddress>();
  #caSync?: NodeJS.Timeout;

  constructor(readonly opts: LocalHarnessOptions) {}

  /** The Harness of this Sandbox, started on first use. */
  resolve = (sandbox: SandboxModel): Promise<string> => {
    const name = sandbox.metadata!.name!;
    let running = this.#running.get(name);
    if (!running) {
      running = this.#start(sandbox);
      this.#running.set(name, running);
      running.then(
        (r) => void (r.effector && this.#effectors.set(name, r.effector)),
        () => this.#running.delete(name),
      );
    }
    return running.then((r) => r.url);
  };

  /** A Sandbox's /work here: its Harness's and its Effector's, where an Effect's paths point. */
  workRootOf(name: string): string {
    return join(this.opts.workRoot, name);
  }

  /** The local Effector of a Sandbox whose local pod runs one (its spec has an `effector` sidecar). */
  effectorAddress(name: string): { url: string; pod: string } | undefined {
    return this.#effectors.get(name);
  }

  /** Stops still under way: stopAll waits for them too, so an exiting Orchestrator leaves none half done. */
  readonly #stopping = new Set<Promise<void>>();

  async stop(name: string): Promise<void> {
    const running = this.#running.get(name);
    this.#running.delete(name);
    this.#effectors.delete(name);
    const done = (running ?? Promise.reject(new Error("not running"))).then((r) => r.stop()).catch(() => undefined);
    this.#stopping.add(done);
    await done;
    this.#stopping.delete(done);
  }

  async stopAll(): Promise<void> {
    clearInterval(this.#caSync);
    this.#caSync = undefined;
    await Promise.all([...[...this.#running.keys()].map((n) => this.stop(n)), ...this.#stopping]);
  }

  async #start(sandbox: SandboxModel): Promise<Running> {
    const name = sandbox.metadata!.name!;
    const node = sandbox.status?.nodeName;
    if (!node) throw new Error(`Sandbox "${name}" is on no node yet: no local Harness to start`);
    const tokenSha256 = sandbox.spec?.env?.find((e) => e.name === HARNESS_ENV.tokenSha256)?.value;
    // The node's caches of this Sandbox's namespace alone, as a pod mounts them (decision 0046).
    const reposRoot = repoCacheNamespaceDir(
      this.opts.reposRoot.replaceAll("{node}", node),
      sandbox.metadata?.namespace ?? this.opts.namespace,
    );
    const workRoot = join(this.opts.workRoot, name);
    mkdirSync(workRoot, { recursive: true });
    if (this.opts.mode === "inline") return inline(workRoot, reposRoot, tokenSha256);
    const podDir = join(this.opts.workRoot, `${name}.pod`);
    this.#caSync ??= setInterval(() => this.#syncCas(), CA_SYNC_MS).unref();
    // A Harness an Orchestrator before this one started, still running: adopted, as a pod is.
    const adopted = await adopt(podDir);
    if (adopted) {
      this.opts.log?.({ level: "info", message: "local harness adopted", sandbox: name, url: adopted.url });
      return adopted;
    }
    const custodian = await startLocalCustodian(this.opts.namespace, name, podDir);
    // Recorded at once: an Orchestrator killed before the Harness is up leaves no Custodian behind.
    writeFileSync(join(podDir, STATE), JSON.stringify({ custodian: custodian.pid }));
    // The Sandbox Effector, where the pod has one (decision 0070).
    const effector = effectorSidecar(sandbox)
      ? await startLocalEffector(this.opts.namespace, sandbox, podDir, { work: workRoot, repos: reposRoot }).catch(
          async (err: unknown) => {
            await custodian.stop();
            throw err;
          },
        )
      : undefined;
    if (effector)
      writeFileSync(join(podDir, STATE), JSON.stringify({ custodian: custodian.pid, effector: effector.pid }));
    this.opts.log?.({ level: "info", message: "local custodian listening", sandbox: name, url: custodian.url });
    const env = localHarnessEnv(sandbox.spec?.env, {
      custodianUrl: custodian.url,
      caFile: custodian.caFile,
      conversationsDir: custodian.conversationsDir,
      workRoot,
    });
    try {
      const [cmd, args] = companionCommand("harness");
      const harness = await startDetached(
        cmd,
        args,
        {
          ...hostEnv(),
          ...env,
          [HARNESS_ENV.port]: "0",
          [HARNESS_ENV.workRoot]: workRoot,
          [HARNESS_ENV.reposRoot]: reposRoot,
          [HARNESS_ENV.host]: "127.0.0.1",
        },
        join(podDir, "harness.log"),
        /"message":"listening","port":(\d+)/,
        "Harness",
      );
      const state: PodState & { harness: number; url: string } = {
        harness: harness.pid,
        custodian: custodian.pid,
        url: `http://127.0.0.1:${harness.port}`,
        ...(effector ? { effector: effector.pid, effectorUrl: effector.url } : {}),
      };
      writeFileSync(join(podDir, STATE), JSON.stringify(state));
      return running(podDir, state);
    } catch (err) {
      await Promise.all([custodian.stop(), effector?.stop()]);
      throw err;
    }
  }

  /** Each running local Custodian that has a CA: its files from the Sandbox's CA Secret (decision 0037). */
  #syncCas(): void {
    for (const name of this.#running.keys()) {
      const podDir = join(this.opts.workRoot, `${name}.pod`);
      if (!existsSync(join(podDir, "ca", CA_CERT_KEY))) continue;
      syncLocalCa(this.opts.namespace, name, podDir).catch((err: unknown) =>
        this.opts.log?.({
          level: "warn",
          message: "the local Custodian's CA could not be brought in step with its Secret",
          sandbox: name,
          detail: err instanceof Error ? err.message : String(err),
        }),
      );
    }
  }
}

async function inline(workRoot: string, reposRoot: string, tokenSha256: string | undefined): Promise<Running> {
  const server: Server = await startHarness({ workRoot, reposRoot, tokenSha256, log: () => undefined }, 0, "127.0.0.1");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stop: () => new Promise((r) => server.close(() => r())),
  };
}

/** The local pod's processes, as the state file keeps them. */
type PodState = { custodian: number; harness?: number; url?: string; effector?: number; effectorUrl?: string };
const STATE = "local.json";

function running(podDir: string, state: PodState & { harness: number; url: string }): Running {
  const effector = state.effectorUrl ? { url: state.effectorUrl, pod: "127.0.0.1" } : undefined;
  return { url: state.url, effector, stop: () => stopPod(podDir, state) };
}

/** Both told at once (an Orchestrator that exits right after still stops both), then awaited. */
async function stopPod(podDir: string, state: PodState): Promise<void> {
  const pids = [state.harness, state.custodian, state.effector].filter((p): p is number => p !== undefined);
  pids.forEach(killPid);
  await Promise.all(pids.map(stopPid));
  rmSync(join(podDir, STATE), { force: true });
}

/** The pod's processes when both still run and the Harness answers. */
async function adopt(podDir: string): Promise<Running | undefined> {
  const file = join(podDir, STATE);
  if (!existsSync(file)) return undefined;
  let state: PodState;
  try {
    state = JSON.parse(readFileSync(file, "utf8")) as PodState;
  } catch {
    return undefined;
  }
  const { harness, url, custodian } = state;
  // Half a pod (its Orchestrator died while starting it) or a dead one: stopped, then started anew.
  const effectorDead = state.effector !== undefined && !alive(state.effector);
  if (harness === undefined || url === undefined || !alive(harness) || !alive(custodian) || effectorDead) {
    await stopPod(podDir, state);
    return undefined;
  }
  const ok = await fetch(`${url}/healthz`).then(
    (r) => r.ok,
    () => false,
  );
  if (ok) return running(podDir, { ...state, harness, url });
  await stopPod(podDir, state);
  return undefined;
}
