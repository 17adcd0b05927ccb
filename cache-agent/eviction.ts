// Which caches a node's agent may evict: pure, so the rule is tested on its own (decision 0010).
// A cache goes only when all of these hold:
//   - the agent built it itself (an adopted checkout is pinned: someone else put it there);
//   - no pod on the node mounts it (no Sandbox placed here names its key);
//   - no bound Repo wants it (a Machine's slot keeps its caches warm everywhere);
//   - it has gone unused for the grace period (so a cache is not dropped between two Sandboxes).
import { keyOfRepoVolume } from "../api/wire";

export type CacheEntry = {
  key: string;
  /** Built by the agent (`jr2.owner=cache-agent`), not adopted. */
  owned: boolean;
  /** When a Sandbox on this node last named it, or it was built (ms since the epoch). */
  lastUsed: number;
};

export type EvictionInput = {
  caches: readonly CacheEntry[];
  /** Keys a pod on this node mounts. */
  mounted: ReadonlySet<string>;
  /** Keys of Repos with `spec.bound: true`. */
  bound: ReadonlySet<string>;
  now: number;
  graceMs: number;
};

export function evictable({ caches, mounted, bound, now, graceMs }: EvictionInput): string[] {
  return caches
    .filter((c) => c.owned && !mounted.has(c.key) && !bound.has(c.key) && now - c.lastUsed >= graceMs)
    .map((c) => c.key);
}

/** The cache keys a pod mounts: its `repo-<key>` volumes (the operator's naming). */
export function mountedKeys(pod: { spec?: { volumes?: ReadonlyArray<{ name: string }> } }): string[] {
  return (pod.spec?.volumes ?? []).flatMap((v) => keyOfRepoVolume(v.name) ?? []);
}
