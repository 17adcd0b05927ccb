// What a Sandbox's Repos mean for its pod and its Ready (pure; decision 0010).
// A Sandbox reads only its own node's entry of each Repo it names, so a Repo event wakes only the
// Sandboxes it changes.
import type { Condition, RepoNode, RepoStatus, SandboxSpec } from "../../api/crd";
import type { PodContribution } from "../sandbox/pod";
import type { ReadyGate } from "../sandbox/status";
import { DEFAULT_CACHE_ROOT, REPOS_MOUNT, repoCachePath, repoVolumeName } from "../../api/wire";
import { CONDITION, REPO_HOLD, REPOS_FRESH_REASON } from "../../api/conditions";

/** A Repo as the operator sees it: its key (status.key) and its nodes' caches. */
export type RepoView = { name: string; key?: string; nodes?: RepoStatus["nodes"] };

/** The node caches as read-only hostPath volumes in the Harness container, and a soft
 * preference for nodes that already hold them (a preference never conflicts with a requirement).
 * Each cache is the Sandbox's own namespace's (`<cacheRoot>/<namespace>/<key>`, decision 0046):
 * a key names no other namespace's cache, whatever it spells. */
export function repoCachesContribution(
  spec: Pick<SandboxSpec, "repos">,
  reposByKey: (key: string) => RepoView | undefined,
  namespace: string,
  cacheRoot = DEFAULT_CACHE_ROOT,
): PodContribution | undefined {
  const repos = spec.repos ?? [];
  if (!repos.length) return undefined;
  const preferences = repos
    .map(({ key }) => presentNodes(reposByKey(key)))
    .filter((nodes) => nodes.length > 0)
    .map((nodes) => ({
      weight: 10,
      preference: { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: nodes }] },
    }));
  return {
    volumes: repos.map(({ key }) => ({
      name: repoVolumeName(key),
      hostPath: { path: repoCachePath(cacheRoot, namespace, key), type: "DirectoryOrCreate" },
    })),
    harnessMounts: repos.map(({ key }) => ({
      name: repoVolumeName(key),
      mountPath: `${REPOS_MOUNT}/${key}`,
      readOnly: true,
    })),
    ...(preferences.length
      ? { affinity: { nodeAffinity: { preferredDuringSchedulingIgnoredDuringExecution: preferences } } }
      : {}),
  };
}

const presentNodes = (repo: RepoView | undefined) =>
  Object.entries(repo?.nodes ?? {})
    .filter(([, n]) => n.phase === "Present")
    .map(([node]) => node)
    .sort();

export type RepoVerdict = { gates: ReadyGate[]; fresh?: Omit<Condition, "lastTransitionTime"> };

/**
 * Ready waits until every Repo's cache is present on the pod's node and fetched since the Sandbox
 * asked (its creation): RepoMissing (no Repo with that key), RepoPending (not there yet, or not
 * fetched since the ask), RepoCloneFailed (the node's clone failed; git's words). Present but the
 * fetch since the ask failed: Ready, with ReposFresh=False saying which cache is stale.
 */
export function repoVerdict(
  spec: Pick<SandboxSpec, "repos">,
  node: string | undefined,
  askedAt: Date,
  reposByKey: (key: string) => RepoView | undefined,
): RepoVerdict {
  const repos = spec.repos ?? [];
  if (!repos.length) return { gates: [] };
  const gates: ReadyGate[] = [];
  const stale: string[] = [];
  for (const { key } of repos) {
    const repo = reposByKey(key);
    if (!repo) {
      gates.push({ reason: REPO_HOLD.RepoMissing, message: `no Repo has key "${key}": create one for its url` });
      continue;
    }
    if (!node) {
      gates.push({ reason: REPO_HOLD.RepoPending, message: `Repo "${key}": waiting for the pod's node` });
      continue;
    }
    const entry: RepoNode | undefined = repo.nodes?.[node];
    const fetchedSinceAsk = !!entry?.fetchedAt && Date.parse(entry.fetchedAt) >= askedAt.getTime();
    if (entry?.phase === "Failed" && !entry.fetchedAt) {
      gates.push({
        reason: REPO_HOLD.RepoCloneFailed,
        message: `Repo "${key}" on node ${node}: the clone failed: ${entry.error ?? "no reason given"}`,
      });
    } else if (entry?.phase !== "Present" && !(entry?.phase === "Failed" && entry.fetchedAt)) {
      gates.push({ reason: REPO_HOLD.RepoPending, message: `Repo "${key}" is not yet present on node ${node}` });
    } else if (!fetchedSinceAsk && !entry.error) {
      gates.push({
        reason: REPO_HOLD.RepoPending,
        message: `Repo "${key}" on node ${node} is not yet fetched since this Sandbox asked`,
      });
    } else if (!fetchedSinceAsk) {
      stale.push(`Repo "${key}" on node ${node} is stale: ${entry.error}`);
    }
  }
  // The first hold names the wait; a clone failure outranks a wait.
  gates.sort((a, b) => rank(a.reason) - rank(b.reason));
  const fresh = stale.length
    ? {
        type: CONDITION.ReposFresh,
        status: "False" as const,
        reason: REPOS_FRESH_REASON.FetchFailed,
        message: stale.join("; "),
      }
    : {
        type: CONDITION.ReposFresh,
        status: "True" as const,
        reason: REPOS_FRESH_REASON.Fetched,
        message: "every Repo cache is fetched since this Sandbox asked",
      };
  return { gates, ...(gates.length ? {} : { fresh }) };
}

/** REPO_HOLD is written in rank order. */
const RANK: readonly string[] = Object.values(REPO_HOLD);
const rank = (reason: string) => RANK.indexOf(reason);

/** The nodes whose entry changed between two versions of a Repo's status (pure). */
export function changedNodes(
  before: RepoStatus["nodes"] | undefined,
  after: RepoStatus["nodes"] | undefined,
): Set<string> {
  const changed = new Set<string>();
  const names = new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})]);
  for (const n of names) {
    if (JSON.stringify(before?.[n] ?? null) !== JSON.stringify(after?.[n] ?? null)) changed.add(n);
  }
  return changed;
}

/**
 * Which Sandboxes a Repo event wakes (pure): all that name it when anything but its status changed
 * (or it came or went); after a status change, only those whose pod's node entry changed.
 */
export function sandboxesToWake(
  event: { specChanged: boolean; before?: RepoStatus["nodes"]; after?: RepoStatus["nodes"] },
  naming: string[],
  nodeOf: (sandbox: string) => string | undefined,
): string[] {
  if (event.specChanged) return naming;
  const nodes = changedNodes(event.before, event.after);
  return naming.filter((s) => {
    const node = nodeOf(s);
    return node !== undefined && nodes.has(node);
  });
}
