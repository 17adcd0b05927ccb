// The real node's guard (docs/decisions/0051; dev/cluster/go/nodeguard, dev/cluster/node.sh): the
// nft set of Sandbox pods' addresses, which the node's input chain drops everything from but replies
// to the node's own connections, and the set of node-IP TCP ports those pods may open all the same.
// Needs root (nft), as the node tier runs.
import { spawnSync } from "node:child_process";
import { openToSandboxes as openPorts_ } from "../../dev/node-guard";
import { fromSetup } from "./support";

/** `nft ARGS`; throws naming the command and nft's words. */
function nft(args: string[]): string {
  const r = spawnSync("nft", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`nft ${args.join(" ")} failed (exit ${r.status}): ${r.stderr.trim()}`);
  return r.stdout;
}

/** The elements of a set named "family/table/set" (as `cluster.sh env` prints it). */
function elements(ref: string): string[] {
  const set = JSON.parse(nft(["-j", "list", "set", ...ref.split("/")])).nftables.find((o: { set?: unknown }) => o.set)
    .set as { elem?: Array<string | number | { elem: { val: string | number } }> };
  return (set.elem ?? []).map((e) => String(typeof e === "object" ? e.elem.val : e));
}

/** The IPv4 addresses the node guard holds now: the Sandbox pods' on this node. */
export const guardedAddresses = (): string[] => elements(fromSetup("JR2_NODE_GUARD_SET"));

/** The node-IP TCP ports Sandbox pods may open now. */
export const openPorts = (): number[] => elements(fromSetup("JR2_NODE_GUARD_PORTS")).map(Number);

/**
 * Lets Sandbox pods open TCP `port` on the node IP (e.g. an Orchestrator this machine runs for them,
 * in-cluster mode); returns what closes it again. Only that port: the API server's, the kubelet's and
 * DNS stay closed. Call the closer in afterAll; the set is the shared node's.
 */
export const openToSandboxes = (port: number): (() => void) => openPorts_(fromSetup("JR2_NODE_GUARD_PORTS"), port);
