// A cache agent as the process it is in production (`cache-agent/main.ts`), for one kwok node.
import { type ChildProcess, spawn } from "node:child_process";
import { join } from "node:path";
import { ROOT } from "../../../scripts/local-operator";

export type Agent = { process: ChildProcess; lines: string[]; stop(): void };

/** Starts an agent and resolves once it watches (its first sweep done). */
export async function startCacheAgent(node: string, root: string, env: Record<string, string> = {}): Promise<Agent> {
  // The bundle `npm run build` put in dist/ (the global setup built it): the build output under test.
  const child = spawn(process.execPath, [join(ROOT, "dist", "companions", "cache-agent.js")], {
    env: { ...process.env, NODE_NAME: node, JR2_CACHE_ROOT: root, ...env },
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
  return { process: child, lines, stop: () => void child.kill("SIGTERM") };
}
