// Which replica owns which workspace (decision 0079). Several Orchestrators run at once; each
// workspace falls in one of SHARD_COUNT shards by its name, and each shard is held by one replica
// through a Lease, so a workspace's actor, its keepalive renewals and its ledger writes have one
// writer. Every other replica forwards a call for it to its owner. This file is the contract the
// rest of the Orchestrator reads: the lease loop (shard-leases.ts) and the single-replica
// SoleOwnership both answer it.
import { createHash } from "node:crypto";
import { SHARD_COUNT } from "../../api/wire";

/** Where a workspace's owner is now. */
export type Owner =
  | { kind: "self" }
  /** Another live replica: its identity (pod name) and the base url its API answers at. */
  | { kind: "peer"; identity: string; url: string }
  /** No live replica holds its shard now (it is moving): wait for one (`waitForOwner`). */
  | { kind: "none" };

/** Shards gained and lost by this replica, in one change. */
export type OwnershipChange = { gained: number[]; lost: number[] };

export interface Ownership {
  /** This replica's identity among the others (its pod name; "sole" when it is the only one). */
  readonly identity: string;
  /** The shard a workspace name falls in (shardOf below). */
  shardOf(workspace: string): number;
  /** Where `workspace`'s owner is now. `self` only once this replica has adopted the shard (its
   * gain heard by every listener): between its Lease's write and then, `none`, so a call waits for
   * the adoption rather than meet a registry that does not know the workspace yet. */
  ownerOf(workspace: string): Owner;
  /** Whether this replica holds `workspace`'s shard now (its Lease; adopted or being adopted). */
  owns(workspace: string): boolean;
  /** The shards this replica holds now, ascending. */
  owned(): number[];
  /** Resolves with `workspace`'s owner once it has one (self or a live peer), or after `ms` with
   * its owner as it is then (perhaps still none); at once when it has one now. */
  waitForOwner(workspace: string, ms: number, signal?: AbortSignal): Promise<Owner>;
  /** The other live replicas, with where each answers: a list is asked of each (decision 0079). */
  peers(): Array<{ identity: string; url: string }>;
  /**
   * Hears each change of the shards this replica holds. A gain is told after its Lease is written
   * (the workspaces in it may be adopted: actors restored, Effects recovered); a loss is told, and
   * awaited, before the Lease is given up when this replica lets a shard go (the workspaces in it
   * stop here first), or as soon as its renewal deadline passes unrenewed (before any other replica
   * can take it). Answers the unsubscribe.
   */
  onChange(listener: (change: OwnershipChange) => void | Promise<void>): () => void;
}

/** The shard of a workspace name: the first four bytes of its SHA-256, modulo the count. */
export function shardOf(workspace: string, count: number = SHARD_COUNT): number {
  return createHash("sha256").update(workspace).digest().readUInt32BE(0) % count;
}

/** The only Orchestrator (no shard Leases configured: local mode, tests, one replica): it owns
 * every workspace, always; nothing ever changes. */
export class SoleOwnership implements Ownership {
  readonly identity = "sole";
  constructor(readonly count: number = SHARD_COUNT) {}
  shardOf(workspace: string): number {
    return shardOf(workspace, this.count);
  }
  ownerOf(): Owner {
    return { kind: "self" };
  }
  owns(): boolean {
    return true;
  }
  owned(): number[] {
    return Array.from({ length: this.count }, (_, i) => i);
  }
  async waitForOwner(): Promise<Owner> {
    return { kind: "self" };
  }
  peers(): Array<{ identity: string; url: string }> {
    return [];
  }
  onChange(): () => void {
    return () => {};
  }
}
