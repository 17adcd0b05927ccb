// A Sandbox's Repo keys name Repos of its own namespace (decision 0046). The caches a pod mounts
// are its namespace's already (`<cacheRoot>/<namespace>/<key>`), so no key reaches another
// namespace's cache; admission says so at once, naming the field and the fix, instead of a
// Sandbox that waits on RepoMissing. A key names a Repo by the Repo's name or by its url's key
// (status.key). Read from one watch of every Repo held in the admission process (decision 0080), not
// from the API server per review: a key the index lacks is read from the API server before it is
// refused (a Repo created a moment before its Sandbox, whose event has not arrived yet, is
// admitted; only the refusal path pays the read). Needs `list` and `watch` on repos.
import { K8s } from "kubernetes-fluent-client";
import { WatchPhase } from "kubernetes-fluent-client/dist/fluent/shared-types";
import { RepoModel } from "../../api/crd";
import { checkRepoUrl, repoKey } from "../../api/repo-identity";
import { kubeRequest, paths } from "../../lib/kube";
import { violation, type Violation } from "../rules/violations";
import { WatchedLookup } from "./watched";

const KEY = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

type Repo = { metadata?: { name?: string; namespace?: string }; spec?: { url?: string } };
type RepoList = { items?: Repo[] };

const keyOf = (url: string | undefined): string | undefined => {
  try {
    return url ? repoKey(checkRepoUrl(url)) : undefined;
  } catch {
    return undefined; // a url the operator refuses names no cache (its status.error says why)
  }
};

/** The keys a Repo answers to: its name and its url's key. Pure. */
export const keysOfRepo = (r: Repo): string[] => [
  ...new Set([r.metadata?.name, keyOf(r.spec?.url)].filter((k): k is string => !!k)),
];

/**
 * Which keys each namespace's Repos answer to, kept from a watch's events. Pure: the watch is
 * RepoKeys's. Each Repo's keys are held by its name, so a changed url or a deletion takes back
 * exactly what that Repo gave, and two Repos answering to one key keep it until both are gone.
 */
export class RepoKeyIndex {
  /** namespace → Repo name → its keys. */
  readonly #repos = new Map<string, Map<string, string[]>>();
  /** namespace → key → how many of its Repos answer to it. */
  readonly #keys = new Map<string, Map<string, number>>();

  set(repo: Repo): void {
    this.delete(repo);
    const { namespace, name } = repo.metadata ?? {};
    if (!namespace || !name) return;
    const keys = keysOfRepo(repo);
    let repos = this.#repos.get(namespace);
    if (!repos) this.#repos.set(namespace, (repos = new Map()));
    repos.set(name, keys);
    let counts = this.#keys.get(namespace);
    if (!counts) this.#keys.set(namespace, (counts = new Map()));
    for (const k of keys) counts.set(k, (counts.get(k) ?? 0) + 1);
  }

  delete(repo: Repo): void {
    const { namespace, name } = repo.metadata ?? {};
    const repos = namespace ? this.#repos.get(namespace) : undefined;
    const keys = name ? repos?.get(name) : undefined;
    if (!namespace || !name || !repos || !keys) return;
    repos.delete(name);
    if (repos.size === 0) this.#repos.delete(namespace);
    const counts = this.#keys.get(namespace)!;
    for (const k of keys) {
      const n = (counts.get(k) ?? 1) - 1;
      if (n > 0) counts.set(k, n);
      else counts.delete(k);
    }
    if (counts.size === 0) this.#keys.delete(namespace);
  }

  has(namespace: string, key: string): boolean {
    return this.#keys.get(namespace)?.has(key) ?? false;
  }
}

/** Every namespace's Repo keys, by one watch of every Repo (RepoKeyIndex). */
export class RepoKeys {
  readonly #index = new RepoKeyIndex();
  readonly #lookup = new WatchedLookup("the Repos", () =>
    K8s(RepoModel).Watch((repo, phase) => {
      if (phase === WatchPhase.Deleted) this.#index.delete(repo);
      else if (phase === WatchPhase.Added || phase === WatchPhase.Modified) this.#index.set(repo);
    }),
  );

  /** Starts the watch (once); resolves when it has listed. */
  start(): Promise<void> {
    return this.#lookup.start();
  }

  /** Which of `keys` a Repo of `namespace` answers to: from the index once it has listed, those it
   * lacks read from the API server. */
  async in(namespace: string, keys: readonly string[]): Promise<Set<string>> {
    const found = new Set(keys.filter((k) => this.#index.has(namespace, k)));
    if (found.size === new Set(keys).size) return found;
    await this.#lookup.listed();
    for (const k of keys) if (this.#index.has(namespace, k)) found.add(k);
    const missing = keys.filter((k) => !found.has(k));
    if (missing.length) for (const k of await repoKeysIn(namespace, missing)) found.add(k);
    return found;
  }
}

/** The admission process's one index, its watch started on first use (or by pepr.ts at start). */
export const repoKeys = new RepoKeys();

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

/** Which of `keys` a Repo of `namespace` has (as its name or its url's key), read from the API server:
 * each key first a LIST by name (one object, `list` alone), then, for keys that finds no Repo for, one
 * LIST of the namespace's Repos. */
export async function repoKeysIn(namespace: string, keys: readonly string[]): Promise<Set<string>> {
  const found = new Set<string>();
  const match = (list: RepoList) => {
    for (const r of list.items ?? []) for (const k of keysOfRepo(r)) if (keys.includes(k)) found.add(k);
  };
  for (const key of new Set(keys)) {
    const q = new URLSearchParams({ fieldSelector: `metadata.name=${key}` });
    match(await kubeRequest<RepoList>("GET", `${paths.repos(namespace)}?${q}`));
  }
  if (keys.some((k) => !found.has(k))) match(await kubeRequest<RepoList>("GET", paths.repos(namespace)));
  return found;
}

/** The violations of a Sandbox's new Repo keys in its namespace (from the index; a key it lacks read
 * from the API server). */
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
    await repoKeys.in(
      namespace,
      added.map((a) => a.key),
    ),
  );
}
