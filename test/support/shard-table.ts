// A fixed table of the shards one "replica" holds (decision 0079): the Ownership contract
// (orchestrator/replicas/ownership.ts) answered from a set, for tests that run two replicas in one
// process without Leases. The test moves a shard by hand (drop on one table, hold on the other),
// as the lease loop would between two replicas.
import { SHARD_COUNT } from "../../api/wire";
import { shardOf, type Owner, type Ownership } from "../../orchestrator/replicas/ownership";

export class ShardTable implements Ownership {
  readonly #held: Set<number>;

  constructor(
    readonly identity: string,
    held: Iterable<number>,
    readonly count: number = SHARD_COUNT,
  ) {
    this.#held = new Set(held);
  }

  shardOf(workspace: string): number {
    return shardOf(workspace, this.count);
  }
  owns(workspace: string): boolean {
    return this.#held.has(this.shardOf(workspace));
  }
  ownerOf(workspace: string): Owner {
    return this.owns(workspace) ? { kind: "self" } : { kind: "none" };
  }
  owned(): number[] {
    return [...this.#held].sort((a, b) => a - b);
  }
  async waitForOwner(workspace: string): Promise<Owner> {
    return this.ownerOf(workspace);
  }
  peers(): Array<{ identity: string; url: string }> {
    return [];
  }
  onChange(): () => void {
    return () => {};
  }

  /** This table holds `shard` from now on. */
  hold(shard: number): void {
    this.#held.add(shard);
  }
  /** This table no longer holds `shard`. */
  drop(shard: number): void {
    this.#held.delete(shard);
  }
}

/** A workspace-like name (`<prefix>-<n>`) that falls in `shard`: the first n that does. */
export function nameInShard(shard: number, prefix = "ws-t", count: number = SHARD_COUNT): string {
  for (let n = 0; ; n++) if (shardOf(`${prefix}-${n}`, count) === shard) return `${prefix}-${n}`;
}
