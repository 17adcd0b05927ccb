// Local mode's endpoint resolver. Outside the cluster a Sandbox's status.endpoint (a Service name)
// does not resolve, and kwok's pods run nothing, so each Sandbox gets a Harness running here: the
// real Harness (harness/), its /repos the cache root of the node the Sandbox's pod is on, its
// /work a directory of its own, and the env its pod would have had. In `process` mode the real
// Custodian runs beside it with its pod's config, values and CA (local-custodian.ts), and the
// Harness's env points at it; `inline` (a benchmark's many workspaces) runs no Custodian. Used only
// when the Orchestrator runs outside the cluster (JR2_LOCAL_HARNESS); never in a pod.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { SandboxModel } from "../api/crd";
import { startHarness } from "../harness/server";
import { HARNESS_ENV } from "../api/env";
import { localHarnessEnv, startLocalCustodian } from "./local-custodian";

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

type Running = { url: string; stop(): Promise<void> };

/** The Harness to run: beside this file when bundled (dist/companions), else the build's bundle,
 * else its source through tsx. */
function harnessCommand(): [string, string[]] {
  const sibling = join(__dirname, "harness.js");
  if (existsSync(sibling)) return [process.execPath, [sibling]];
  const root = join(__dirname, "..");
  const bundle = join(root, "dist", "companions", "harness.js");
  if (existsSync(bundle)) return [process.execPath, [bundle]];
  return [join(root, "node_modules", ".bin", "tsx"), [join(root, "harness", "main.ts")]];
}

export class LocalHarnesses {
  readonly #running = new Map<string, Promise<Running>>();

  constructor(readonly opts: LocalHarnessOptions) {}

  /** The Harness of this Sandbox, started on first use. */
  resolve = (sandbox: SandboxModel): Promise<string> => {
    const name = sandbox.metadata!.name!;
    let running = this.#running.get(name);
    if (!running) {
      running = this.#start(sandbox);
      this.#running.set(name, running);
      running.catch(() => this.#running.delete(name));
    }
    return running.then((r) => r.url);
  };

  async stop(name: string): Promise<void> {
    const running = this.#running.get(name);
    this.#running.delete(name);
    await running?.then((r) => r.stop()).catch(() => undefined);
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.#running.keys()].map((n) => this.stop(n)));
  }

  async #start(sandbox: SandboxModel): Promise<Running> {
    const name = sandbox.metadata!.name!;
    const node = sandbox.status?.nodeName;
    if (!node) throw new Error(`Sandbox "${name}" is on no node yet: no local Harness to start`);
    const tokenSha256 = sandbox.spec?.env?.find((e) => e.name === HARNESS_ENV.tokenSha256)?.value;
    const reposRoot = this.opts.reposRoot.replaceAll("{node}", node);
    const workRoot = join(this.opts.workRoot, name);
    mkdirSync(workRoot, { recursive: true });
    if (this.opts.mode === "inline") return inline(workRoot, reposRoot, tokenSha256);
    const custodian = await startLocalCustodian(this.opts.namespace, name, join(this.opts.workRoot, `${name}.pod`));
    this.opts.log?.({ level: "info", message: "local custodian listening", sandbox: name, url: custodian.url });
    const env = localHarnessEnv(sandbox.spec?.env, {
      custodianUrl: custodian.url,
      caFile: custodian.caFile,
      conversationsDir: custodian.conversationsDir,
      workRoot,
    });
    try {
      const harness = await child(workRoot, reposRoot, env);
      return {
        url: harness.url,
        stop: async () => {
          await harness.stop();
          await custodian.stop();
        },
      };
    } catch (err) {
      await custodian.stop();
      throw err;
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

/** The Harness as a process, as in a pod: its pod's env (the bearer digest, the Custodian's
 * address, the Stand-ins), with this machine's places. */
function child(workRoot: string, reposRoot: string, podEnv: Record<string, string>): Promise<Running> {
  const [cmd, args] = harnessCommand();
  const proc: ChildProcess = spawn(cmd, args, {
    env: {
      ...process.env,
      ...podEnv,
      [HARNESS_ENV.port]: "0",
      [HARNESS_ENV.workRoot]: workRoot,
      [HARNESS_ENV.reposRoot]: reposRoot,
      [HARNESS_ENV.exitWithParent]: "1",
      [HARNESS_ENV.host]: "127.0.0.1",
    },
    // stdin a pipe the Harness watches: it ends when this process does, however it ends.
    stdio: ["pipe", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let buffered = "";
    const onData = (b: Buffer) => {
      buffered += b.toString();
      const m = /"message":"listening","port":(\d+)/.exec(buffered);
      if (!m) return;
      proc.stdout!.off("data", onData);
      proc.stdout!.resume(); // keep draining its request log
      const exited = new Promise<void>((r) => proc.once("exit", () => r()));
      resolve({
        url: `http://127.0.0.1:${m[1]}`,
        stop: () => {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
          return exited;
        },
      });
    };
    proc.stdout!.on("data", onData);
    proc.once("error", (err) => reject(new Error(`the local Harness did not start: ${err.message}`)));
    proc.once("exit", (code) => reject(new Error(`the local Harness exited (${code}) before it listened`)));
  });
}
