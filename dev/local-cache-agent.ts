// A cache agent as the process it is in production (the bundle of `cache-agent/main.ts`), for one
// kwok node: tests and benchmarks run it.
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { ROOT } from "./local-operator";
import { stopper } from "./child";
import { tmpdir } from "node:os";
import { CACHE_AGENT_ENV, LOCAL_REPO_ROOTS_ENV } from "../api/env";

/**
 * Local mode's defaults (decision 0066), which no manifest carries: a Repo's url may be a path
 * under the system's temp directory (where the tests keep their remotes), every namespace is
 * served unless JR2_SANDBOX_NAMESPACES is given, and the test git servers on loopback are vouched
 * for. A caller's env (or the process's) overrides each.
 */
export const localAgentEnv = (env: NodeJS.ProcessEnv = process.env): Record<string, string> => ({
  [LOCAL_REPO_ROOTS_ENV]: env[LOCAL_REPO_ROOTS_ENV] || tmpdir(),
  [CACHE_AGENT_ENV.vouchedHosts]: env[CACHE_AGENT_ENV.vouchedHosts] || "127.0.0.1,localhost",
});

/** `stop()` sends SIGTERM and resolves once the process is gone. */
export type Agent = { process: ChildProcess; lines: string[]; stop(): Promise<void> };

/** Starts an agent and resolves once it watches (its first sweep done). */
export async function startCacheAgent(node: string, root: string, env: Record<string, string> = {}): Promise<Agent> {
  // The bundle `npm run build` put in dist/ (the global setup built it): the build output under test.
  const child = spawn(process.execPath, [join(ROOT, "dist", "companions", "cache-agent.js")], {
    env: {
      ...process.env,
      ...localAgentEnv(),
      [CACHE_AGENT_ENV.nodeName]: node,
      [CACHE_AGENT_ENV.cacheRoot]: root,
      ...env,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines: string[] = [];
  let partial = "";
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (b: Buffer) => {
      const text = partial + b.toString();
      const parts = text.split("\n");
      partial = parts.pop() ?? "";
      lines.push(...parts);
      if (parts.some((l) => l.includes("cache agent watching"))) resolve();
    });
    child.once("exit", (code) => reject(new Error(`cache agent for ${node} exited ${code}`)));
  });
  const stop = stopper(child);
  return { process: child, lines, stop: () => stop() };
}

/** The local control plane's fake nodes (dev/cluster/cluster.sh: `jr2-node-<i>`, three of them). */
export const LOCAL_NODES = ["jr2-node-0", "jr2-node-1", "jr2-node-2"];

/** Where startCacheAgents(root) keeps each node's caches, as JR2_LOCAL_REPOS_ROOT names them. */
export const localReposRoot = (root: string) => join(root, "cache-{node}");

/** A cache agent per local node, node N's caches under `root/cache-N`. */
export async function startCacheAgents(root: string): Promise<Agent[]> {
  const agents: Agent[] = [];
  for (const node of LOCAL_NODES)
    agents.push(await startCacheAgent(node, localReposRoot(root).replace("{node}", node)));
  return agents;
}
