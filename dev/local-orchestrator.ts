// The Orchestrator as the process it is in production (the bundle of `orchestrator/main.ts`, else
// its source through tsx), outside the cluster: local mode, each Sandbox's Harness run here.
// Tests, the benchmark and `npm start` use it. Its key and token files live in `dir` and survive
// a restart, so a restarted Orchestrator derives the same Harness bearers.
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { ROOT } from "./local-operator";
import { stopper } from "./child";
import { EFFECTOR_ENV, ORCHESTRATOR_ENV as E } from "../api/env";
import { confineBinary } from "../scripts/images/confine";

export type LocalOrchestratorOptions = {
  kubeconfig: string;
  namespace: string;
  /** Key, tokens, credentials and Harness work dirs. */
  dir: string;
  /** The fence's entries (YAML list of identity prefixes). */
  credentials: Array<string | { match: string; secret?: string; tenants?: string[] }>;
  /** `{node}` stands for the node's name: where that node's cache agent keeps its caches. */
  reposRoot: string;
  port?: number;
  harness?: "process" | "inline";
  env?: Record<string, string>;
  /** Log lines also go to this process's stdout. */
  echo?: boolean;
  /**
   * In-cluster mode from this machine: the address the real node's pods reach this machine at
   * (`cluster.sh env`'s JR2_REAL_NODE_IP). Each Sandbox is then its own pod (no local Harness), with
   * a budget that allows a cold node's image pulls; the Orchestrator listens there, not on
   * loopback, and tells each Custodian so (JR2_ORCHESTRATOR_URL), so a Sandbox's picks reach it
   * (docs/decisions/0039-in-cluster-by-default.md). `harness` does not apply.
   */
  podAddress?: string;
};

/** The lowest port the kernel hands out as an outgoing connection's own (Linux's default otherwise). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 12_000 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/**
 * A port free on `address` now, for a process that must be told its own URL before it listens.
 * Drawn below the kernel's ephemeral range: a port `listen(0)` picks is one any outgoing
 * connection may take as its own between this probe and the process's bind (an EADDRINUSE seen in
 * CI); below that range only another listener can.
 */
export async function freePort(address: string): Promise<number> {
  const high = ephemeralLow() - 1;
  for (let tries = 0; ; tries++) {
    const port = 10_000 + Math.floor(Math.random() * (high - 10_000));
    const free = await new Promise<boolean>((resolve, reject) => {
      const probe = createServer();
      probe.once("error", (err: NodeJS.ErrnoException) =>
        err.code === "EADDRINUSE" && tries < 50 ? resolve(false) : reject(err),
      );
      probe.listen(port, address, () => probe.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

export type LocalOrchestrator = {
  url: string;
  token: string;
  process: ChildProcess;
  lines: string[];
  /** SIGTERM by default; SIGKILL to play a crash. Resolves once the process is gone. */
  stop(signal?: NodeJS.Signals): Promise<void>;
};

export async function startLocalOrchestrator(o: LocalOrchestratorOptions): Promise<LocalOrchestrator> {
  mkdirSync(o.dir, { recursive: true });
  const key = join(o.dir, "signing-key");
  const tokens = join(o.dir, "api-tokens");
  if (!existsSync(key)) writeFileSync(key, randomBytes(32).toString("hex"), { mode: 0o600 });
  if (!existsSync(tokens)) writeFileSync(tokens, `${randomBytes(24).toString("hex")}\n`, { mode: 0o600 });
  const token = readFileSync(tokens, "utf8").trim().split("\n")[0];
  const credentials = join(o.dir, "git-credentials.yaml");
  writeFileSync(credentials, o.credentials.map((c) => `- ${JSON.stringify(c)}`).join("\n") + "\n");

  const host = o.podAddress ?? "127.0.0.1";
  const pinned = o.podAddress ? (o.port ?? (await freePort(o.podAddress))) : undefined;
  const inCluster: Record<string, string> = o.podAddress
    ? {
        [E.host]: o.podAddress,
        [E.selfUrl]: `http://${o.podAddress}:${pinned}`,
        [E.localHarness]: "off",
        // A cold node pulls two images of about 100 MB before a pod can be Ready.
        [E.podBudget]: "300s",
      }
    : {};
  // Local process mode runs each Effector beside its Harness on this machine: its commands are
  // confined by the jr2-confine the images carry, built here (cached) and named to the Orchestrator,
  // which hands it to each local Effector (decision 0072).
  const confine =
    !o.podAddress &&
    (o.harness ?? "process") === "process" &&
    !o.env?.[EFFECTOR_ENV.confine] &&
    !process.env[EFFECTOR_ENV.confine]
      ? { [EFFECTOR_ENV.confine]: confineBinary(ROOT) }
      : {};
  const bundle = join(ROOT, "dist", "companions", "orchestrator.js");
  const [cmd, args] = existsSync(bundle)
    ? [process.execPath, [bundle]]
    : [join(ROOT, "node_modules", ".bin", "tsx"), [join(ROOT, "orchestrator", "main.ts")]];
  const child = spawn(cmd, args, {
    env: {
      ...process.env,
      KUBECONFIG: o.kubeconfig,
      [E.port]: String(pinned ?? o.port ?? 0),
      [E.namespace]: o.namespace,
      [E.signingKeyFile]: key,
      [E.apiTokensFile]: tokens,
      [E.gitCredentialsFile]: credentials,
      [E.localHarness]: o.harness ?? "process",
      [E.localReposRoot]: o.reposRoot,
      [E.localWorkRoot]: join(o.dir, "work"),
      ...inCluster,
      ...confine,
      ...o.env,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines: string[] = [];
  const stop = stopper(child);
  const port = await new Promise<number>((resolve, reject) => {
    let partial = "";
    child.stdout!.on("data", (b: Buffer) => {
      if (o.echo) process.stdout.write(b);
      const parts = (partial + b.toString()).split("\n");
      partial = parts.pop() ?? "";
      for (const line of parts) {
        lines.push(line);
        const m = /"message":"orchestrator listening","port":(\d+)/.exec(line);
        if (m) resolve(Number(m[1]));
      }
    });
    child.once("exit", (code) =>
      reject(new Error(`the Orchestrator exited (${code}) before it listened:\n${lines.slice(-5).join("\n")}`)),
    );
  });
  return {
    url: `http://${host}:${port}`,
    token,
    process: child,
    lines,
    stop,
  };
}
