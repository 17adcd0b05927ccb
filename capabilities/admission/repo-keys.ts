// A Sandbox's Repo keys name Repos of its own namespace (decision 0046). The caches a pod mounts
// are its namespace's already (`<cacheRoot>/<namespace>/<key>`), so no key reaches another
// namespace's cache; admission says so at once, naming the field and the fix, instead of a
// Sandbox that waits on RepoMissing. A key names a Repo by the Repo's name or by its url's key
// (status.key). Read cheaply: a Repo is most often named by its key (the Orchestrator writes them
// so), so each key is first a LIST by name (one object, `list` alone); only keys that finds no
// Repo for cost one LIST of the namespace's Repos, read once per review.
import { checkRepoUrl, repoKey } from "../../api/repo-identity";
import { kubeRequest, paths } from "../../lib/kube";
import { violation, type Violation } from "../rules/violations";

const KEY = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

type RepoList = { items?: Array<{ metadata?: { name?: string }; spec?: { url?: string } }> };

const keyOf = (url: string | undefined): string | undefined => {
  try {
    return url ? repoKey(checkRepoUrl(url)) : undefined;
  } catch {
    return undefined; // a url the operator refuses names no cache (its status.error says why)
  }
};

/** The keys a spec names that an older spec did not (a create: all of them). Pure. */
export function addedRepoKeys(spec: unknown, oldSpec?: unknown): Array<{ index: number; key: string }> {
  const keysOf = (s: unknown) => {
    const repos = (s as { repos?: unknown } | null | undefined)?.repos;
    return Array.isArray(repos) ? repos.map((r) => (r as { key?: unknown } | null)?.key) : [];
  };
  const before = new Set(keysOf(oldSpec));
  // A key that is no DNS label is the spec rules' refusal already, and never reaches a query.
  return keysOf(spec).flatMap((key, index) =>
    typeof key === "string" && KEY.test(key) && !before.has(key) ? [{ index, key }] : [],
  );
}

/** What admission says of keys that name no Repo of the namespace. Pure. */
export function repoKeyViolations(
  namespace: string,
  keys: ReadonlyArray<{ index: number; key: string }>,
  found: ReadonlySet<string>,
): Violation[] {
  return keys
    .filter(({ key }) => !found.has(key))
    .map(({ index, key }) =>
      violation(
        `spec.repos[${index}].key`,
        `${JSON.stringify(key)} names no Repo in namespace "${namespace}": a Sandbox mounts only its own ` +
          "namespace's Repo caches; create a Repo for the repository's url in this namespace (its key is the " +
          "Repo's status.key) and name that key",
      ),
    );
}

/** Which of `keys` a Repo of `namespace` has (as its name or its url's key), read from the API server. */
export async function repoKeysIn(namespace: string, keys: readonly string[]): Promise<Set<string>> {
  const found = new Set<string>();
  const match = (list: RepoList) => {
    for (const r of list.items ?? []) {
      for (const k of [r.metadata?.name, keyOf(r.spec?.url)]) if (k && keys.includes(k)) found.add(k);
    }
  };
  for (const key of new Set(keys)) {
    const q = new URLSearchParams({ fieldSelector: `metadata.name=${key}` });
    match(await kubeRequest<RepoList>("GET", `${paths.repos(namespace)}?${q}`));
  }
  if (keys.some((k) => !found.has(k))) match(await kubeRequest<RepoList>("GET", paths.repos(namespace)));
  return found;
}

/** The violations of a Sandbox's new Repo keys in its namespace (one or two reads; none when no key is new). */
export async function sandboxRepoKeyViolations(
  namespace: string | undefined,
  spec: unknown,
  oldSpec?: unknown,
): Promise<Violation[]> {
  const added = addedRepoKeys(spec, oldSpec);
  if (!added.length || !namespace) return [];
  return repoKeyViolations(
    namespace,
    added,
    await repoKeysIn(
      namespace,
      added.map((a) => a.key),
    ),
  );
}
