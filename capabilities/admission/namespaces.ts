// Which namespaces hold Sandboxes, as admission knows them (decision 0067): the opted-in ones
// (`jr2.dev/sandboxes: enabled`, decision 0045), from one watch of the Namespaces carrying the label,
// held in the admission process. A Sandbox create reads this set, never the API server: a lookup per
// review would put a round trip on every create's critical path (decision 0067). The watch selects by
// the label, so a namespace that loses it leaves the set (the API server sends its removal as a
// deletion), and the set is O(opted-in namespaces). A namespace not in the set is read once before
// a refusal. Needs `get`, `list` and `watch` on namespaces (package.json pepr.rbac).
import { K8s, kind } from "kubernetes-fluent-client";
import { WatchPhase } from "kubernetes-fluent-client/dist/fluent/shared-types";
import { BUILD_ENV } from "../../api/env";
import { ApiError } from "../../lib/api-error";
import { kubeRequest, paths } from "../../lib/kube";
import { SANDBOX_NAMESPACE_ENABLED, SANDBOX_NAMESPACE_LABEL } from "../../api/wire";
import { violation, type Violation } from "../rules/violations";
import { WatchedLookup } from "./watched";

/** What admission says of a Sandbox created in a namespace that did not opt in. Pure. */
export const namespaceNotOptedIn = (namespace: string): Violation =>
  violation(
    "metadata.namespace",
    `namespace ${JSON.stringify(namespace)} has not opted in to hold Sandboxes: create the Sandbox in an opted-in ` +
      `namespace, or opt this one in: list it in the installation's Sandbox namespaces (${BUILD_ENV.sandboxNamespaces} ` +
      `at npm run build, which labels it ${SANDBOX_NAMESPACE_LABEL}=${SANDBOX_NAMESPACE_ENABLED} and binds the ` +
      "operator's role there) and apply the manifests again",
  );

/** The opted-in namespaces, by one watch; `has` waits for the first list. */
export class OptedInNamespaces {
  readonly #names = new Set<string>();
  readonly #lookup = new WatchedLookup("the opted-in namespaces", () =>
    K8s(kind.Namespace)
      .WithLabel(SANDBOX_NAMESPACE_LABEL, SANDBOX_NAMESPACE_ENABLED)
      .Watch((ns, phase) => {
        const name = ns.metadata?.name;
        if (!name) return;
        if (phase === WatchPhase.Deleted) this.#names.delete(name);
        else if (phase === WatchPhase.Added || phase === WatchPhase.Modified) {
          // A Modified event of a selector watch is an object that still matches; checked anyway.
          if (ns.metadata?.labels?.[SANDBOX_NAMESPACE_LABEL] === SANDBOX_NAMESPACE_ENABLED) this.#names.add(name);
          else this.#names.delete(name);
        }
      }),
  );

  /** Starts the watch (once); resolves when it has listed. */
  start(): Promise<void> {
    return this.#lookup.start();
  }

  /**
   * Whether `namespace` opted in, from the set; waits for the first list, at most
   * FIRST_LIST_WAIT_MS, then throws. A namespace the set lacks is read once from the API server
   * before it is refused: one labelled a moment ago, whose event the watch has not delivered yet, is
   * admitted (the refusal path alone pays the read; an opted-in namespace's creates never do).
   */
  async has(namespace: string): Promise<boolean> {
    if (this.#names.has(namespace)) return true;
    await this.#lookup.listed();
    if (this.#names.has(namespace)) return true;
    try {
      const ns = await kubeRequest<kind.Namespace>("GET", paths.namespace(namespace));
      return ns.metadata?.labels?.[SANDBOX_NAMESPACE_LABEL] === SANDBOX_NAMESPACE_ENABLED;
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return false;
      throw err;
    }
  }
}

/** The admission process's one set, its watch started on first use (or by pepr.ts at start). */
export const optedInNamespaces = new OptedInNamespaces();

/** The violation of a Sandbox created in `namespace`, if it has not opted in. */
export async function namespaceViolations(namespace: string | undefined): Promise<Violation[]> {
  if (!namespace) return [];
  return (await optedInNamespaces.has(namespace)) ? [] : [namespaceNotOptedIn(namespace)];
}
