// The Repo side of the operator: an index from Repo key to the Sandboxes that name it, the Repo
// caches' views for the Sandbox pods and Ready (caches.ts decides), and each Repo's identity and
// key written to its status. A Repo event wakes only the Sandboxes it changes (decision 0010): a status
// change wakes those whose pod's node entry changed; anything else wakes all that name the Repo.
import type { kind } from "kubernetes-fluent-client";
import { Log } from "pepr";
import type { RepoModel } from "../../api/crd";
import type { RepoStatus } from "../../api/crd/sources/repo";
import type { ApiWriter } from "../../lib/api-writer";
import { kubeRequest, paths } from "../../lib/kube";
import type { OperatorMetrics } from "../../lib/operator-metrics";
import { statusMergePatch } from "../../lib/patch";
import { WorkQueue } from "../../lib/queue";
import type { ReadyContributor, Sandbox, SandboxController } from "../sandbox/sandbox-controller";
import type { PodContribution } from "../sandbox/pod";
import { repoCachesContribution, repoVerdict, sandboxesToWake, type RepoView } from "./caches";
import { RepoUrlError, checkRepoUrl, repoKey } from "../../api/repo-identity";
import { PART_OF_JR2, REPO_CREDENTIALS_ROLE } from "../../api/wire";
import { ApiError } from "../../lib/api-error";
import { repoCredentialNames, repoCredentialRules } from "./credentials-role";

/** The Repo controller runs 4 workers (decision 0035). */
export const REPO_WORKERS = 4;

type Repo = RepoModel & { metadata: { name: string; namespace: string; generation?: number } };

// One rule with the Orchestrator's edge (api/repo-identity.ts checkRepoUrl): a url that climbs or
// carries a credential names no cache; the Repo's status.error says why and the fix.
const keyOfRepoUrl = (url: string | undefined): string | undefined => {
  try {
    return url ? repoKey(checkRepoUrl(url)) : undefined;
  } catch (err) {
    if (err instanceof RepoUrlError) return undefined;
    throw err;
  }
};

/** The status the operator wants for a Repo's url: its identity, key and count of present caches,
 * or, for a url it refuses (one that climbs, or carries a credential), `error` with the fix and no
 * identity or key. Pure; never quotes the url, which may carry a password. */
export function repoStatusOf(url: string, status: RepoStatus | undefined): RepoStatus {
  const present = Object.values(status?.nodes ?? {}).filter((n) => n.phase === "Present").length;
  try {
    const identity = checkRepoUrl(url);
    return { ...status, identity, key: repoKey(identity), present, error: undefined };
  } catch (err) {
    if (!(err instanceof RepoUrlError)) throw err;
    return { ...status, identity: undefined, key: undefined, present, error: `spec.url ${err.message}` };
  }
}

/** What the Repo controller is built with. */
export type RepoControllerParts = {
  /** What it reads of the Sandbox controller: the pods' nodes, and its queue to wake. */
  sandboxes: Pick<SandboxController, "pods" | "queue" | "sandboxes">;
  /** The process's one writer, shared with the Sandbox controller (decision 0006). */
  api: ApiWriter;
  metrics: OperatorMetrics;
  /** Where the node caches live (JR2_CACHE_ROOT). */
  cacheRoot: string;
};

export class RepoController {
  /** `<namespace>/<repo key>` -> the Repo (by the key its url derives). */
  readonly #byKey = new Map<string, Repo>();
  /** `<namespace>/<repo key>` -> keys of the Sandboxes naming it. */
  readonly #index = new Map<string, Set<string>>();
  /** Sandbox key -> the repo keys it names, to take it out of the index again. */
  readonly #named = new Map<string, string[]>();
  readonly #byName = new Map<string, Repo>();
  readonly #sandboxes: RepoControllerParts["sandboxes"];
  readonly #api: ApiWriter;
  readonly #cacheRoot: string;
  readonly queue: WorkQueue;
  /** Namespaces whose repo-credential Role (decision 0046) may need new rules. */
  readonly roles: WorkQueue;
  /** Namespace -> the Secret names last written to its Role (JSON), so a write happens only on change. */
  readonly #rolesWritten = new Map<string, string>();
  /** Sandboxes seen, so only an arrival or a departure (not each status write) asks for the Role. */
  readonly #seenSandboxes = new Set<string>();

  /** Built once, in the watching process, beside the Sandbox controller (capabilities/bindings.ts). */
  constructor({ sandboxes, api, metrics, cacheRoot }: RepoControllerParts) {
    this.#sandboxes = sandboxes;
    this.#api = api;
    this.#cacheRoot = cacheRoot;
    this.queue = new WorkQueue({
      name: "repo",
      workers: REPO_WORKERS,
      reconcile: (key) => this.#writeIdentity(key),
      onError: (key, err, retryInMs) => Log.warn({ repo: key, retryInMs, err: String(err) }, "Repo status not written"),
      onDone: (_key, result, ms) => metrics.reconciled("repo", result, ms),
    });
    this.roles = new WorkQueue({
      name: "repo-credentials",
      workers: 1,
      reconcile: (namespace) => this.#writeCredentialRole(namespace),
      onError: (namespace, err, retryInMs) =>
        Log.warn({ namespace, retryInMs, err: String(err) }, "repo-credential Role not written"),
      onDone: (_key, result, ms) => metrics.reconciled("repo", result, ms),
    });
  }

  /** The caches' volumes and mounts for a Sandbox's pod (caches.ts). */
  podContribution(sbx: Sandbox): PodContribution | undefined {
    return repoCachesContribution(
      sbx.spec,
      this.#viewIn(sbx.metadata.namespace),
      sbx.metadata.namespace,
      this.#cacheRoot,
    );
  }

  /** What the caches say about a Sandbox's Ready: its holds, and the freshness condition. */
  readiness(sbx: Sandbox, pod: kind.Pod | undefined): ReturnType<ReadyContributor> {
    const created = new Date(sbx.metadata.creationTimestamp ?? 0);
    const v = repoVerdict(sbx.spec, pod?.spec?.nodeName, created, this.#viewIn(sbx.metadata.namespace));
    return { gates: v.gates, conditions: v.fresh ? [v.fresh] : [] };
  }

  /** Keeps the index from Repo key to the Sandboxes naming it, as the Sandbox cache changes. */
  onSandboxChange(sbxKey: string, sbx: Sandbox | undefined) {
    // A Sandbox's arrival or departure changes which names are jr2's own in its namespace.
    const arrivedOrLeft = sbx ? !this.#seenSandboxes.has(sbxKey) : this.#seenSandboxes.has(sbxKey);
    if (sbx) this.#seenSandboxes.add(sbxKey);
    else this.#seenSandboxes.delete(sbxKey);
    if (arrivedOrLeft) this.roles.add(sbxKey.split("/")[0]);
    this.#indexSandbox(sbxKey, sbx?.spec.repos?.map((r) => r.key) ?? []);
  }

  #viewIn = (namespace: string) => (key: string) => this.view(namespace, key);

  view(namespace: string, key: string): RepoView | undefined {
    const repo = this.#byKey.get(`${namespace}/${key}`);
    return repo && { name: repo.metadata.name, key, nodes: repo.status?.nodes };
  }

  /** Sandboxes (keys) naming a Repo key in a namespace. */
  naming(namespace: string, key: string): string[] {
    return [...(this.#index.get(`${namespace}/${key}`) ?? [])];
  }

  onRepo(repo: RepoModel, deleted: boolean) {
    const r = repo as Repo;
    const name = `${r.metadata.namespace}/${r.metadata.name}`;
    const before = this.#byName.get(name);
    const key = keyOfRepoUrl(r.spec?.url);
    const beforeKey = before && keyOfRepoUrl(before.spec?.url);
    if (beforeKey && beforeKey !== key) this.#byKey.delete(`${r.metadata.namespace}/${beforeKey}`);
    if (deleted) {
      this.#byName.delete(name);
      if (key) this.#byKey.delete(`${r.metadata.namespace}/${key}`);
    } else {
      this.#byName.set(name, r);
      if (key) this.#byKey.set(`${r.metadata.namespace}/${key}`, r);
      this.queue.add(name);
    }
    if (!key) {
      if (!deleted)
        Log.warn({ repo: name }, "Repo spec.url is not a url this operator can read; no cache can match it");
      return;
    }
    if (deleted || before?.spec?.secretRef?.name !== r.spec?.secretRef?.name) this.roles.add(r.metadata.namespace);
    const specChanged = deleted || !before || before.metadata.generation !== r.metadata.generation || beforeKey !== key;
    const wake = sandboxesToWake(
      { specChanged, before: before?.status?.nodes, after: r.status?.nodes },
      this.naming(r.metadata.namespace, key),
      (sbx) => this.#sandboxes.pods.get(sbx)?.spec?.nodeName,
    );
    for (const sbx of wake) this.#sandboxes.queue.add(sbx);
  }

  #indexSandbox(sbxKey: string, repoKeys: string[]) {
    const namespace = sbxKey.split("/")[0];
    for (const k of this.#named.get(sbxKey) ?? []) this.#index.get(`${namespace}/${k}`)?.delete(sbxKey);
    if (repoKeys.length) this.#named.set(sbxKey, repoKeys);
    else this.#named.delete(sbxKey);
    for (const k of repoKeys) {
      const set = this.#index.get(`${namespace}/${k}`) ?? new Set<string>();
      set.add(sbxKey);
      this.#index.set(`${namespace}/${k}`, set);
    }
  }

  /** The operator writes each Repo's identity, key and count of present caches (one writer), or,
   * for a url it refuses, status.error with the fix (and no identity or key). */
  async #writeIdentity(name: string): Promise<void> {
    const repo = this.#byName.get(name);
    if (!repo?.spec?.url) return;
    const patch = statusMergePatch(repo.status, repoStatusOf(repo.spec.url, repo.status));
    if (!patch) return;
    const [namespace, repoName] = name.split("/");
    await this.#api.write("Repo.status", () =>
      kubeRequest("PATCH", paths.repoStatus(namespace, repoName), { status: patch }, "application/merge-patch+json"),
    );
  }

  /**
   * The namespace's repo-credential Role holds `get` on exactly its Repos' credential Secrets
   * (credentials-role.ts). Written only on change. The Role is created empty (which asks for no
   * privilege) and given its rule by a patch, which RBAC lets the operator make on this one Role by
   * name; a namespace that has not opted in answers 403, and the cache agent says so on the Repo.
   */
  async #writeCredentialRole(namespace: string): Promise<void> {
    const names = repoCredentialNames(
      [...this.#byName.values()].filter((r) => r.metadata.namespace === namespace).map((r) => r.spec?.secretRef?.name),
      (sandbox) => this.#sandboxes.sandboxes.get(`${namespace}/${sandbox}`) !== undefined,
    );
    const want = JSON.stringify(names);
    if (this.#rolesWritten.get(namespace) === want) return;
    const rules = repoCredentialRules(names);
    const path = paths.role(namespace, REPO_CREDENTIALS_ROLE);
    const patch = () =>
      this.#api.write("Role", () => kubeRequest("PATCH", path, { rules }, "application/merge-patch+json"));
    try {
      await patch();
    } catch (err) {
      if (!(err instanceof ApiError) || ![403, 404].includes(err.status)) throw err;
      if (err.status === 404 && names.length) {
        const role = {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "Role",
          metadata: { name: REPO_CREDENTIALS_ROLE, namespace, labels: { ...PART_OF_JR2 } },
          rules: [],
        };
        await this.#api
          .write("Role", () => kubeRequest("POST", paths.roles(namespace), role))
          .catch((e: unknown) => {
            if (!(e instanceof ApiError && e.status === 409)) throw e;
          });
        await patch();
      } else if (err.status === 403) {
        Log.info({ namespace }, "the namespace has not opted in to holding Sandboxes: no repo-credential Role there");
      }
    }
    this.#rolesWritten.set(namespace, want);
  }
}
