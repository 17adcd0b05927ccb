// Which caches a node's agent may evict: pure, so the rule is tested on its own (decision 0010).
// A cache goes only when all of these hold:
//   - the agent built it itself (an adopted checkout is pinned: someone else put it there);
//   - no pod on the node may mount it (no Sandbox placed here, or not yet placed, names it);
//   - no bound Repo wants it (a Machine's slot keeps its caches warm everywhere);
//   - it has gone unused for the grace period (so a cache is not dropped between two Sandboxes).

export type CacheEntry = {
  key: string;
  /** Built by the agent (`jr2.owner=cache-agent`), not adopted. */
  owned: boolean;
  /** When a Sandbox on this node last named it, or it was built (ms since the epoch). */
  lastUsed: number;
};

export type EvictionInput = {
  caches: readonly CacheEntry[];
  /** Caches a pod on this node may mount (sandboxCaches). */
  mounted: ReadonlySet<string>;
  /** Caches of Repos with `spec.bound: true`. */
  bound: ReadonlySet<string>;
  now: number;
  graceMs: number;
};

export function evictable({ caches, mounted, bound, now, graceMs }: EvictionInput): string[] {
  return caches
    .filter((c) => c.owned && !mounted.has(c.key) && !bound.has(c.key) && now - c.lastUsed >= graceMs)
    .map((c) => c.key);
}

/** A cache's id on a node: `<namespace>/<key>`, its path under the cache root (decision 0046). */
export const cacheId = (namespace: string, key: string) => `${namespace}/${key}`;

/** What the agent reads of a Sandbox to know which caches may be mounted on its node. */
export type SandboxView = {
  metadata?: { namespace?: string };
  spec?: { repos?: ReadonlyArray<{ key: string }> };
  status?: { nodeName?: string; phase?: string };
};

/**
 * The caches (ids) a Sandbox may have mounted on `node`, from the Sandbox alone (decision 0046:
 * the agent lists no pods): its own namespace's caches of the keys it names, while it is placed
 * on this node, and also while it is placed nowhere yet and may still land here (the scheduler
 * runs ahead of the status the operator writes). Placed elsewhere, or Lost before it was placed
 * anywhere: none.
 */
export function sandboxCaches(sbx: SandboxView, node: string): string[] {
  const ns = sbx.metadata?.namespace;
  if (!ns) return [];
  const placed = sbx.status?.nodeName;
  if (placed ? placed !== node : sbx.status?.phase === "Lost" || sbx.status?.phase === "Terminating") return [];
  return (sbx.spec?.repos ?? []).map((r) => cacheId(ns, r.key));
}
