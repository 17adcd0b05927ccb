// The picks ledger's I/O (decision 0025; its rules: pick-ledger.ts). Each workspace's ledger lives in a
// ConfigMap `<workspace>-agents` (key `ledger.json`) owned by the workspace's Sandbox (its uid, from
// the one watch), so it goes with the Sandbox and an Orchestrator restarted while a pick is
// outstanding reads it back (lazily, at the first request that needs it) and answers it. Every
// write is checked against the resourceVersion it was read at (a merge patch carrying it; a create
// for the first): a write that lost a race re-reads and decides again. Changes of one workspace
// are made one at a time in this process; a delivery poll is held here until its pick is answered.
import { randomBytes } from "node:crypto";
import { ApiError } from "../../lib/api-error";
import { kubeRequest } from "../../lib/kube";
import type { Delivery, PickBody, PickReceipt } from "../../api/agent-protocol";
import { HttpError } from "../schemas";
import { sandboxOwnerReference } from "../../api/crd";
import { SANDBOX_LABEL } from "../../api/wire";
import {
  EMPTY_LEDGER,
  LEDGER_KEY,
  allowedOf,
  answerPick,
  deliveryOf,
  ledgerConfigMapName,
  outstandingPicks,
  outstandingView,
  parseLedger,
  serializeLedger,
  setAllowed,
  submitPick,
  type Ledger,
  type OutstandingPick,
} from "./pick-ledger";
import type { SandboxWatch } from "../workspaces/sandbox-watch";

/** Where ledgers are kept: read answers the ledger and its version (undefined: none yet); write
 * succeeds only over `version` (undefined: create) and answers the new version, else throws
 * LedgerConflict. */
export interface LedgerBackend {
  read(workspace: string): Promise<{ ledger: Ledger; version: string } | undefined>;
  write(workspace: string, owner: { uid: string }, ledger: Ledger, version: string | undefined): Promise<string>;
}

export class LedgerConflict extends Error {}

/** What the HTTP API serves for picks (api-server.ts). Refusals are HttpErrors. */
export interface Picks {
  submit(workspace: string, iid: string, body: PickBody): Promise<{ receipt: PickReceipt; repeated: boolean }>;
  delivery(workspace: string, iid: string, deliveryId: string, waitMs: number, signal?: AbortSignal): Promise<Delivery>;
  outstanding(workspace: string): Promise<OutstandingPick[]>;
  answer(workspace: string, deliveryId: string, answer: string): Promise<void>;
  /** The conversation's Allowed picks now; undefined when never set. */
  allowed(workspace: string, iid: string): Promise<string[] | undefined>;
  /** Sets them (the Machine's, with a turn or on their own). */
  setAllowed(workspace: string, iid: string, allowed: string[]): Promise<string[]>;
}

type Held = { ledger: Ledger; version: string | undefined; uid: string };

export type PickStoreOptions = {
  watch: SandboxWatch;
  backend: LedgerBackend;
  now?: () => number;
  newId?: () => string;
};

export class PickStore implements Picks {
  readonly #held = new Map<string, Held>();
  /** Each workspace's changes, one at a time. */
  readonly #chains = new Map<string, Promise<unknown>>();
  /** Delivery polls waiting, by delivery id. */
  readonly #waiters = new Map<string, Set<() => void>>();

  constructor(readonly opts: PickStoreOptions) {}

  async submit(workspace: string, iid: string, body: PickBody) {
    return this.#change(workspace, async (held) => {
      const r = submitPick(held.ledger, iid, body, { deliveryId: this.#newId(), at: this.#at() });
      if (r.kind === "busy") throw new HttpError(409, "pick_outstanding", r.message);
      if (r.kind === "too-large") throw new HttpError(413, "too_large", r.message);
      if (r.kind === "same") return { value: { receipt: receiptOf(r.pick.deliveryId), repeated: true } };
      return { ledger: r.ledger, value: { receipt: receiptOf(r.pick.deliveryId), repeated: false } };
    });
  }

  async delivery(workspace: string, iid: string, deliveryId: string, waitMs: number, signal?: AbortSignal) {
    const until = this.#now() + waitMs;
    for (;;) {
      const held = await this.#load(workspace);
      const pick = deliveryOf(held.ledger, iid, deliveryId);
      if (!pick) throw new HttpError(404, "not_found", `no pick with delivery "${deliveryId}" in conversation ${iid}`);
      if (pick.answer !== undefined) return { state: "answered" as const, answer: pick.answer };
      const left = until - this.#now();
      if (left <= 0 || signal?.aborted) return { state: "outstanding" as const };
      await this.#waitFor(deliveryId, left, signal);
    }
  }

  async outstanding(workspace: string) {
    const held = await this.#load(workspace);
    return outstandingPicks(held.ledger).map(outstandingView);
  }

  async answer(workspace: string, deliveryId: string, answer: string) {
    await this.#change(workspace, async (held) => {
      const r = answerPick(held.ledger, deliveryId, answer, this.#at());
      if (r.kind === "unknown") throw new HttpError(404, "not_found", r.message);
      if (r.kind === "already") throw new HttpError(409, "already_answered", r.message);
      if (r.kind === "too-large") throw new HttpError(413, "too_large", r.message);
      return { ledger: r.ledger, value: undefined };
    });
    for (const wake of [...(this.#waiters.get(deliveryId) ?? [])]) wake();
  }

  async allowed(workspace: string, iid: string) {
    return allowedOf((await this.#load(workspace)).ledger, iid);
  }

  async setAllowed(workspace: string, iid: string, allowed: string[]) {
    return this.#change(workspace, async (held) => {
      const r = setAllowed(held.ledger, iid, allowed);
      if (r.kind === "too-large") throw new HttpError(413, "too_large", r.message);
      return r.kind === "same" ? { value: r.allowed } : { ledger: r.ledger, value: r.allowed };
    });
  }

  // -------------------------------------------------------------------------------------------

  #now() {
    return (this.opts.now ?? Date.now)();
  }
  #at() {
    return new Date(this.#now()).toISOString();
  }
  #newId() {
    return (this.opts.newId ?? (() => `d-${randomBytes(8).toString("hex")}`))();
  }

  /** The workspace's Sandbox's uid; 404 when the watch holds no such Sandbox. */
  async #owner(workspace: string): Promise<string> {
    await this.opts.watch.whenListed();
    const uid = this.opts.watch.get(workspace)?.metadata?.uid;
    if (!uid) {
      this.#held.delete(workspace); // its ConfigMap went with its Sandbox
      throw new HttpError(404, "not_found", `no workspace "${workspace}"`);
    }
    return uid;
  }

  /** The ledger as this process holds it, read from the cluster the first time (or for a new Sandbox). */
  async #load(workspace: string, fresh = false): Promise<Held> {
    const uid = await this.#owner(workspace);
    const held = this.#held.get(workspace);
    if (held && held.uid === uid && !fresh) return held;
    const read = await this.opts.backend.read(workspace);
    const next: Held = { ledger: read?.ledger ?? EMPTY_LEDGER, version: read?.version, uid };
    this.#held.set(workspace, next);
    return next;
  }

  /** One change of a workspace's ledger at a time; a write that lost a race re-reads and decides again. */
  #change<T>(workspace: string, decide: (held: Held) => Promise<{ ledger?: Ledger; value: T }>): Promise<T> {
    const run = async (): Promise<T> => {
      for (let attempt = 0; ; attempt++) {
        const held = await this.#load(workspace, attempt > 0);
        const { ledger, value } = await decide(held);
        if (!ledger) return value;
        try {
          const version = await this.opts.backend.write(workspace, { uid: held.uid }, ledger, held.version);
          this.#held.set(workspace, { ledger, version, uid: held.uid });
          return value;
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

  #waitFor(deliveryId: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let set = this.#waiters.get(deliveryId);
      if (!set) this.#waiters.set(deliveryId, (set = new Set()));
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        set!.delete(done);
        if (set!.size === 0 && this.#waiters.get(deliveryId) === set) this.#waiters.delete(deliveryId);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }
}

const receiptOf = (deliveryId: string): PickReceipt => ({ outstanding: true, deliveryId });

// ---------------------------------------------------------------------------------------------
// The cluster

type ConfigMap = {
  metadata?: { resourceVersion?: string };
  data?: Record<string, string>;
};

const enc = encodeURIComponent;

/** Ledgers as ConfigMaps in `namespace`, owned by their Sandbox. */
export class KubeLedgerBackend implements LedgerBackend {
  constructor(readonly namespace: string) {}

  #collection() {
    return `/api/v1/namespaces/${enc(this.namespace)}/configmaps`;
  }

  async read(workspace: string) {
    let cm: ConfigMap;
    try {
      cm = await kubeRequest<ConfigMap>("GET", `${this.#collection()}/${enc(ledgerConfigMapName(workspace))}`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return undefined;
      throw err;
    }
    return { ledger: parseLedger(cm.data?.[LEDGER_KEY]), version: cm.metadata?.resourceVersion ?? "" };
  }

  async write(workspace: string, owner: { uid: string }, ledger: Ledger, version: string | undefined) {
    const name = ledgerConfigMapName(workspace);
    const data = { [LEDGER_KEY]: serializeLedger(ledger) };
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
      if (err instanceof ApiError && err.status === 409) throw new LedgerConflict(err.message);
      // Deleted under us (its Sandbox went): the next read decides.
      if (err instanceof ApiError && err.status === 404 && version !== undefined) throw new LedgerConflict(err.message);
      throw err;
    }
  }
}
