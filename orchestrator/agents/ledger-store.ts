// A workspace's ledger kept in a ConfigMap its Sandbox owns (decisions 0025, 0042): the picks
// (`<workspace>-agents`) and the turns (`<workspace>-turns`) are each one. What every ledger needs,
// once: read lazily and held; changed one at a time per workspace in this process; every write
// checked against the resourceVersion it was read at (a create for the first), so a write that lost
// a race (another Orchestrator, a first load racing another) re-reads and decides again instead of
// losing an entry; a stored text that does not parse is refused, never reset and overwritten; a
// value past the format's size bound is never written. Held only while this replica owns the
// workspace (decision 0079): `forget` drops it when the workspace moves, so a later tenure reads the
// cluster again instead of a value another replica has since written over.
import { ApiError } from "../../lib/api-error";
import { kubeRequest } from "../../lib/kube";
import { sandboxOwnerReference } from "../../api/crd";
import { SANDBOX_LABEL } from "../../api/wire";
import { HttpError } from "../../api/orchestrator-errors";
import type { SandboxWatch } from "../workspaces/sandbox-watch";

/** How one kind of ledger is named, stored and bounded. `parse` throws on a text that is not one. */
export type LedgerFormat<T> = {
  /** What it is, for messages: "picks ledger". */
  what: string;
  configMap: (workspace: string) => string;
  key: string;
  empty: () => T;
  parse: (text: string) => T;
  serialize: (value: T) => string;
  /** The serialized bound: a ConfigMap holds 1 MiB, its metadata included. */
  maxBytes: number;
};

/** Where ledgers are kept: read answers the value and its version (undefined: none yet), or throws
 * LedgerUnreadable; write succeeds only over `version` (undefined: create) and answers the new
 * version, else throws LedgerConflict. */
export interface LedgerBackend<T> {
  read(workspace: string): Promise<{ value: T; version: string } | undefined>;
  write(workspace: string, owner: { uid: string }, value: T, version: string | undefined): Promise<string>;
}

export class LedgerConflict extends Error {}

/** A stored ledger that does not parse: kept as it is, and every change refused until someone
 * repairs or deletes it (an emptied ledger would forget outstanding picks and admitted turns). */
export class LedgerUnreadable extends Error {}

type Held<T> = { value: T; version: string | undefined; uid: string };

/** A decision over the ledger: `value` to write (absent: nothing changes), `result` to answer. */
export type Decision<T, R> = { value?: T; result: R };

export class LedgerStore<T> {
  readonly #held = new Map<string, Held<T>>();
  readonly #chains = new Map<string, Promise<unknown>>();
  /** Bumped by each forget: a read or write that began before it keeps nothing after it. */
  readonly #tenures = new Map<string, number>();

  constructor(
    readonly opts: {
      format: LedgerFormat<T>;
      watch: Pick<SandboxWatch, "whenListed" | "get">;
      backend: LedgerBackend<T>;
    },
  ) {}

  /** Drops the workspace's held ledger (its shard moved to another replica, decision 0079): the next
   * read is from the cluster, and a read or write on its way now is not kept. */
  forget(workspace: string): void {
    this.#held.delete(workspace);
    this.#tenures.set(workspace, (this.#tenures.get(workspace) ?? 0) + 1);
  }

  /** The ledger as held (read from the cluster the first time, or for a new Sandbox). */
  async read(workspace: string): Promise<T> {
    return (await this.#load(workspace)).value;
  }

  /** One change of a workspace's ledger at a time; a write that lost a race re-reads and decides
   * again (at most 5 tries). A value past the bound is refused with 413, nothing written. */
  change<R>(workspace: string, decide: (value: T) => Decision<T, R> | Promise<Decision<T, R>>): Promise<R> {
    const run = async (): Promise<R> => {
      for (let attempt = 0; ; attempt++) {
        const held = await this.#load(workspace, attempt > 0);
        const { value, result } = await decide(held.value);
        if (value === undefined) return result;
        const bytes = Buffer.byteLength(this.opts.format.serialize(value), "utf8");
        if (bytes > this.opts.format.maxBytes)
          throw new HttpError(
            "too_large",
            `workspace ${workspace}'s ${this.opts.format.what} would be ${bytes} bytes, past its ` +
              `${this.opts.format.maxBytes}-byte bound: nothing was written`,
          );
        try {
          const tenure = this.#tenures.get(workspace);
          const version = await this.opts.backend.write(workspace, { uid: held.uid }, value, held.version);
          if (this.#tenures.get(workspace) === tenure) this.#held.set(workspace, { value, version, uid: held.uid });
          return result;
        } catch (err) {
          if (!(err instanceof LedgerConflict) || attempt >= 4) throw err;
        }
      }
    };
    const prev = this.#chains.get(workspace) ?? Promise.resolve();
    const next = prev.then(run, run);
    const tail = next.catch(() => undefined);
    this.#chains.set(workspace, tail);
    void tail.then(() => {
      if (this.#chains.get(workspace) === tail) this.#chains.delete(workspace);
    });
    return next;
  }

  /** The workspace's Sandbox's uid; 404 when the watch holds no such Sandbox. */
  async #owner(workspace: string): Promise<string> {
    await this.opts.watch.whenListed();
    const uid = this.opts.watch.get(workspace)?.metadata?.uid;
    if (!uid) {
      this.#held.delete(workspace); // its ConfigMap went with its Sandbox
      throw new HttpError("not_found", `no workspace "${workspace}"`);
    }
    return uid;
  }

  async #load(workspace: string, fresh = false): Promise<Held<T>> {
    const uid = await this.#owner(workspace);
    const held = this.#held.get(workspace);
    if (held && held.uid === uid && !fresh) return held;
    const tenure = this.#tenures.get(workspace);
    let read: { value: T; version: string } | undefined;
    try {
      read = await this.opts.backend.read(workspace);
    } catch (err) {
      if (!(err instanceof LedgerUnreadable)) throw err;
      throw new HttpError(
        "ledger_unreadable",
        `workspace ${workspace}'s ${this.opts.format.what} (ConfigMap ${this.opts.format.configMap(workspace)}) ` +
          `cannot be read: ${err.message}. It is kept as it is and nothing is written over it: repair it, ` +
          `or delete it to start the ledger empty`,
      );
    }
    // A change that wrote while this read was on its way (a first read after a restart, racing a
    // submit) holds a newer value than the one read: this read's answer is older, never kept over it.
    const meanwhile = this.#held.get(workspace);
    if (!fresh && meanwhile !== held && meanwhile?.uid === uid) return meanwhile;
    const next: Held<T> = { value: read?.value ?? this.opts.format.empty(), version: read?.version, uid };
    // Forgotten while the read was on its way: answered, not held.
    if (this.#tenures.get(workspace) === tenure) this.#held.set(workspace, next);
    return next;
  }
}

// ---------------------------------------------------------------------------------------------
// The cluster

type ConfigMap = { metadata?: { resourceVersion?: string }; data?: Record<string, string> };

const enc = encodeURIComponent;

/** Ledgers as ConfigMaps in `namespace`, owned by their Sandbox, written with preconditions. */
export class KubeLedgers<T> implements LedgerBackend<T> {
  constructor(
    readonly namespace: string,
    readonly format: LedgerFormat<T>,
  ) {}

  #collection() {
    return `/api/v1/namespaces/${enc(this.namespace)}/configmaps`;
  }

  async read(workspace: string) {
    let cm: ConfigMap;
    try {
      cm = await kubeRequest<ConfigMap>("GET", `${this.#collection()}/${enc(this.format.configMap(workspace))}`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return undefined;
      throw err;
    }
    const text = cm.data?.[this.format.key];
    let value: T;
    try {
      value = text === undefined || text === "" ? this.format.empty() : this.format.parse(text);
    } catch (err) {
      throw new LedgerUnreadable(err instanceof Error ? err.message : String(err));
    }
    return { value, version: cm.metadata?.resourceVersion ?? "" };
  }

  async write(workspace: string, owner: { uid: string }, value: T, version: string | undefined) {
    const name = this.format.configMap(workspace);
    const data = { [this.format.key]: this.format.serialize(value) };
    try {
      const cm =
        version === undefined
          ? await kubeRequest<ConfigMap>("POST", this.#collection(), {
              apiVersion: "v1",
              kind: "ConfigMap",
              metadata: {
                name,
                namespace: this.namespace,
                // The label every object the Orchestrator writes for a Sandbox carries (compose.ts).
                labels: { [SANDBOX_LABEL]: workspace },
                ownerReferences: [sandboxOwnerReference(workspace, owner.uid)],
              },
              data,
            })
          : // A merge patch that carries the resourceVersion is refused (409) if the object moved on.
            await kubeRequest<ConfigMap>(
              "PATCH",
              `${this.#collection()}/${enc(name)}`,
              { metadata: { resourceVersion: version }, data },
              "application/merge-patch+json",
            );
      return cm.metadata?.resourceVersion ?? "";
    } catch (err) {
      // 409: moved on since read, or created meanwhile by another first load.
      if (err instanceof ApiError && err.status === 409) throw new LedgerConflict(err.message);
      // Deleted under us (its Sandbox went): the next read decides.
      if (err instanceof ApiError && err.status === 404 && version !== undefined) throw new LedgerConflict(err.message);
      throw err;
    }
  }
}

/** Ledgers in memory, with the same version rules (unit tests, the pick bench). */
export class MemoryLedgers<T> implements LedgerBackend<T> {
  readonly stored = new Map<string, { text: string; version: number }>();
  writes = 0;

  constructor(readonly format: LedgerFormat<T>) {}

  async read(workspace: string) {
    const s = this.stored.get(workspace);
    if (!s) return undefined;
    try {
      return { value: this.format.parse(s.text), version: String(s.version) };
    } catch (err) {
      throw new LedgerUnreadable(err instanceof Error ? err.message : String(err));
    }
  }

  async write(workspace: string, _owner: { uid: string }, value: T, version: string | undefined) {
    const s = this.stored.get(workspace);
    if ((s === undefined) !== (version === undefined) || (s && String(s.version) !== version))
      throw new LedgerConflict(`workspace ${workspace}'s ledger moved on`);
    const next = (s?.version ?? 0) + 1;
    this.stored.set(workspace, { text: this.format.serialize(value), version: next });
    this.writes++;
    return String(next);
  }
}
