// The picks ledger's I/O (decisions 0025, 0042; its rules: pick-ledger.ts). Each workspace's
// ledger lives in a ConfigMap `<workspace>-agents` (key `ledger.json`) owned by the workspace's
// Sandbox, kept by a LedgerStore (ledger-store.ts: read lazily, changed one at a time, written with
// preconditions, refused when unreadable). A pick comes from a Sandbox and is input: it is taken
// only when the turns ledger (what the Orchestrator itself admitted) finds it is for the running
// turn of its conversation, on that turn's Menu and Allowed now; anything else is refused with its
// reason and never written, so never listed. A delivery poll is held here until its pick is answered,
// or until its workspace moves to another replica (decision 0079): then it answers what it has, and
// the Harness's next poll reaches the new owner.
import { randomBytes } from "node:crypto";
import type { Delivery, PickBody, PickReceipt } from "../../api/agent-protocol";
import type { OutstandingPick } from "../../api/orchestrator-schemas";
import { HttpError } from "../../api/orchestrator-errors";
import { KubeLedgers, LedgerStore, type LedgerBackend, type LedgerFormat } from "./ledger-store";
import {
  EMPTY_LEDGER,
  LEDGER_KEY,
  MAX_LEDGER_BYTES,
  answerPick,
  deliveryOf,
  ledgerConfigMapName,
  outstandingPicks,
  outstandingView,
  parseLedger,
  serializeLedger,
  submitPick,
  turnKey,
  withoutEnded,
  type Ledger,
} from "./pick-ledger";
import type { PickRefusal } from "./turn-ledger";
import type { SandboxWatch } from "../workspaces/sandbox-watch";

export const PICKS_FORMAT: LedgerFormat<Ledger> = {
  what: "picks ledger",
  configMap: ledgerConfigMapName,
  key: LEDGER_KEY,
  empty: () => EMPTY_LEDGER,
  parse: parseLedger,
  serialize: serializeLedger,
  maxBytes: MAX_LEDGER_BYTES,
};

/** What the picks need of the turns the Orchestrator admitted (turns.ts). */
export type TurnRecords = {
  judgePick(
    workspace: string,
    iid: string,
    pick: { pick: string; submissionId: string; args?: unknown },
  ): Promise<PickRefusal | undefined>;
  isRunning(workspace: string, iid: string, submissionId: string): Promise<boolean>;
};

/** What the HTTP API serves for picks (api-server.ts). Refusals are HttpErrors. */
export interface Picks {
  submit(workspace: string, iid: string, body: PickBody): Promise<{ receipt: PickReceipt; repeated: boolean }>;
  delivery(workspace: string, iid: string, deliveryId: string, waitMs: number, signal?: AbortSignal): Promise<Delivery>;
  outstanding(workspace: string): Promise<OutstandingPick[]>;
  answer(workspace: string, deliveryId: string, answer: string): Promise<void>;
}

export type PickStoreOptions = {
  watch: SandboxWatch;
  turns: TurnRecords;
  /** Where the ledgers are kept (default: ConfigMaps in `namespace`). */
  backend?: LedgerBackend<Ledger>;
  namespace?: string;
  now?: () => number;
  newId?: () => string;
};

export class PickStore implements Picks {
  readonly #ledgers: LedgerStore<Ledger>;
  /** Delivery polls waiting, by delivery id: each woken with whether its workspace moved. */
  readonly #waiters = new Map<string, Set<Waiter>>();
  /** Bumped by each release of a workspace: a poll that began before it answers what it has. */
  readonly #moves = new Map<string, number>();

  constructor(readonly opts: PickStoreOptions) {
    const backend = opts.backend ?? new KubeLedgers(opts.namespace ?? "default", PICKS_FORMAT);
    this.#ledgers = new LedgerStore({ format: PICKS_FORMAT, watch: opts.watch, backend });
  }

  async submit(workspace: string, iid: string, body: PickBody) {
    const refused = await this.opts.turns.judgePick(workspace, iid, body);
    if (refused) throw new HttpError(refused.code, refused.message);
    return this.#ledgers.change(workspace, async (ledger) => {
      // Judged running a moment ago, over now (another turn admitted meanwhile): refused, unwritten.
      if (!(await this.opts.turns.isRunning(workspace, iid, body.submissionId)))
        throw new HttpError("turn_over", `the turn of conversation ${iid} is over: no pick is taken for it`);
      const kept = withoutEnded(ledger, await this.#endedTurns(workspace, ledger));
      const r = submitPick(kept, iid, body, { deliveryId: this.#newId(), at: this.#at() });
      if (r.kind === "busy") throw new HttpError("pick_outstanding", r.message);
      if (r.kind === "reused") throw new HttpError("call_reused", r.message);
      if (r.kind === "too-large") throw new HttpError("too_large", r.message);
      if (r.kind === "same") return { result: { receipt: receiptOf(r.pick.deliveryId), repeated: true } };
      return { value: r.ledger, result: { receipt: receiptOf(r.pick.deliveryId), repeated: false } };
    });
  }

  async delivery(workspace: string, iid: string, deliveryId: string, waitMs: number, signal?: AbortSignal) {
    const until = this.#now() + waitMs;
    const moves = this.#moves.get(workspace);
    for (;;) {
      const pick = deliveryOf(await this.#ledgers.read(workspace), iid, deliveryId);
      if (!pick) throw new HttpError("not_found", `no pick with delivery "${deliveryId}" in conversation ${iid}`);
      if (pick.answer !== undefined) return { state: "answered" as const, answer: pick.answer };
      const left = until - this.#now();
      if (left <= 0 || signal?.aborted || this.#moves.get(workspace) !== moves)
        return { state: "outstanding" as const };
      // Moved to another replica: what it has, read no more here (the new owner alone reads it now).
      if (await this.#waitFor(workspace, deliveryId, left, signal)) return { state: "outstanding" as const };
    }
  }

  /** The picks the workspace's running turns wait on: a pick of a turn that is over is not listed. */
  async outstanding(workspace: string) {
    const picks = outstandingPicks(await this.#ledgers.read(workspace));
    const running = await Promise.all(picks.map((p) => this.opts.turns.isRunning(workspace, p.iid, p.submissionId)));
    return picks.filter((_, i) => running[i]).map(outstandingView);
  }

  async answer(workspace: string, deliveryId: string, answer: string) {
    await this.#ledgers.change(workspace, async (ledger) => {
      const pick = ledger.picks.find((p) => p.deliveryId === deliveryId);
      if (
        pick &&
        pick.answer === undefined &&
        !(await this.opts.turns.isRunning(workspace, pick.iid, pick.submissionId))
      )
        throw new HttpError("turn_over", `the turn that made the pick of delivery "${deliveryId}" is over`);
      const r = answerPick(
        withoutEnded(ledger, await this.#endedTurns(workspace, ledger)),
        deliveryId,
        answer,
        this.#at(),
      );
      if (r.kind === "unknown") throw new HttpError("not_found", r.message);
      if (r.kind === "already") throw new HttpError("already_answered", r.message);
      if (r.kind === "too-large") throw new HttpError("too_large", r.message);
      return { value: r.ledger, result: undefined };
    });
    for (const waiter of [...(this.#waiters.get(deliveryId) ?? [])]) waiter.wake(false);
  }

  /** The workspaces moved to another replica (decision 0079): their ledgers are forgotten (a later
   * tenure reads the cluster again) and their held delivery polls answer now with what they have. */
  release(workspaces: string[]): void {
    const moved = new Set(workspaces);
    for (const workspace of moved) this.#moves.set(workspace, (this.#moves.get(workspace) ?? 0) + 1);
    for (const set of [...this.#waiters.values()])
      for (const waiter of [...set]) if (moved.has(waiter.workspace)) waiter.wake(true);
    for (const workspace of moved) this.#ledgers.forget(workspace);
  }

  // -------------------------------------------------------------------------------------------

  /** The turns of the ledger's picks that are over (turns.ts), by turnKey: their picks go (decision 0049).
   * At most one turn of a workspace runs, so this is every key but that one's. */
  async #endedTurns(workspace: string, ledger: Ledger): Promise<Set<string>> {
    const keys = new Map<string, { iid: string; submissionId: string }>();
    for (const p of ledger.picks) keys.set(turnKey(p), p);
    const ended = new Set<string>();
    for (const [key, p] of keys)
      if (!(await this.opts.turns.isRunning(workspace, p.iid, p.submissionId))) ended.add(key);
    return ended;
  }

  #now() {
    return (this.opts.now ?? Date.now)();
  }
  #at() {
    return new Date(this.#now()).toISOString();
  }
  #newId() {
    return (this.opts.newId ?? (() => `d-${randomBytes(8).toString("hex")}`))();
  }

  /** Resolves after `ms`, on an answer, on `signal`, or when the workspace moves (then true). */
  #waitFor(workspace: string, deliveryId: string, ms: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      let set = this.#waiters.get(deliveryId);
      if (!set) this.#waiters.set(deliveryId, (set = new Set()));
      const waiter: Waiter = {
        workspace,
        wake: (moved) => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          set!.delete(waiter);
          if (set!.size === 0 && this.#waiters.get(deliveryId) === set) this.#waiters.delete(deliveryId);
          resolve(moved);
        },
      };
      const done = () => waiter.wake(false);
      const timer = setTimeout(done, ms);
      set.add(waiter);
      signal?.addEventListener("abort", done, { once: true });
    });
  }
}

type Waiter = { workspace: string; wake: (moved: boolean) => void };

const receiptOf = (deliveryId: string): PickReceipt => ({ outstanding: true, deliveryId });
