// The Orchestrator's one watch on Sandboxes (decision 0011): every wait is a subscriber to
// it, level-based, so whatever the watch holds when a wait subscribes is the first thing judged
// and no event can fall between a write and its wait. Never a Pod read: the operator publishes on
// the Sandbox's status what a client needs.
import { K8s, WatchEvent } from "kubernetes-fluent-client";
import { SandboxModel } from "../../api/crd";
import { ObjectCache } from "../../lib/cache";
import { RUN_LABEL } from "../../api/wire";

export type SandboxListener = (sandbox: SandboxModel | undefined) => void;

export class SandboxWatch {
  readonly #cache = new ObjectCache<SandboxModel>();
  readonly #listeners = new Map<string, Set<SandboxListener>>();
  #listed = false;
  #listedWaiters: Array<() => void> = [];
  #watcher?: { close(): void };

  constructor(readonly namespace: string) {}

  /** Starts the watch (the Sandboxes carrying the run label: the ones an Orchestrator wrote). */
  async start(): Promise<void> {
    const watcher = K8s(SandboxModel)
      .InNamespace(this.namespace)
      .WithLabel(RUN_LABEL)
      .Watch((sbx, phase) => this.#apply(sbx, phase === "DELETED"));
    watcher.events.on(WatchEvent.LIST, (list: { items?: SandboxModel[] }) => {
      for (const item of list.items ?? []) this.#apply(item, false, false);
      if (!this.#listed) {
        this.#listed = true;
        this.#listedWaiters.splice(0).forEach((f) => f());
        for (const name of this.#listeners.keys()) this.#notify(name);
      }
    });
    this.#watcher = watcher;
    await watcher.start();
  }

  close(): void {
    this.#watcher?.close();
  }

  /** Whether the first list has landed: before it, a name the watch lacks is unknown, not absent. */
  get listed(): boolean {
    return this.#listed;
  }

  whenListed(): Promise<void> {
    return this.#listed ? Promise.resolve() : new Promise((r) => this.#listedWaiters.push(r));
  }

  get(name: string): SandboxModel | undefined {
    return this.#cache.get(name);
  }

  /** Every Sandbox the watch holds. */
  all(): SandboxModel[] {
    return [...this.#cache.values()];
  }

  /** Hears every change to one name; called at once with what the watch holds (once listed). */
  subscribe(name: string, listener: SandboxListener): () => void {
    let set = this.#listeners.get(name);
    if (!set) this.#listeners.set(name, (set = new Set()));
    set.add(listener);
    if (this.#listed || this.#cache.get(name)) listener(this.#cache.get(name));
    return () => {
      set!.delete(listener);
      if (set!.size === 0 && this.#listeners.get(name) === set) this.#listeners.delete(name);
    };
  }

  #apply(sbx: SandboxModel, deleted: boolean, notify = true) {
    const name = sbx.metadata?.name;
    if (!name) return;
    if (deleted) this.#cache.delete(name, sbx);
    else if (!this.#cache.set(name, sbx)) return;
    if (notify) this.#notify(name);
  }

  #notify(name: string) {
    const current = this.#cache.get(name);
    for (const listener of [...(this.#listeners.get(name) ?? [])]) listener(current);
  }
}
