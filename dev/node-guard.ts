// The real node's guard (docs/decisions/0051; dev/cluster/go/nodeguard, dev/cluster/node.sh): the
// nft set of node-IP TCP ports Sandbox pods may open although the node is otherwise closed to them.
// In-cluster mode's Orchestrator is a process on this machine (decision 0039), so its one port is
// opened while it runs, and nothing else of the node. Needs root (nft), as the real node does.
import { spawnSync } from "node:child_process";

/** `nft ARGS`; throws naming the command and nft's words. */
function nft(args: string[], input?: string): string {
  const r = spawnSync("nft", args, { encoding: "utf8", ...(input !== undefined ? { input } : {}) });
  if (r.status !== 0) throw new Error(`nft ${args.join(" ")} failed (exit ${r.status}): ${r.stderr.trim()}`);
  return r.stdout;
}

/**
 * Lets Sandbox pods open TCP `port` on the node IP; returns what closes it again. `ports` names the
 * set as `cluster.sh env` prints JR2_NODE_GUARD_PORTS ("family/table/set").
 */
export function openToSandboxes(ports: string, port: number): () => void {
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new Error(`openToSandboxes: ${port} is not a TCP port`);
  const ref = ports.split("/");
  nft(["add", "element", ...ref, `{ ${port} }`]);
  // add then delete in one batch: gone whether or not it is still there (nft 1.0.6 has no destroy).
  const set = ref.join(" ");
  return () => void nft(["-f", "-"], `add element ${set} { ${port} }\ndelete element ${set} { ${port} }\n`);
}
