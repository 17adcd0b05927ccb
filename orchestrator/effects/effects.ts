// A Machine's Effects on its workspaces (decision 0070: the wire and its key, at most once): the
// ledger `<workspace>-effects` (a ConfigMap the Sandbox owns, effect-ledger.ts's rules) and one
// worker per workspace that runs its Effects one after another, in the order the Machine sent them,
// on the workspace's Effector over the signed wire (kube-gateway.ts `effector`).
//
// At most once: an Effect is written `sent` before its order leaves, and an Effect found `sent`
// (this Orchestrator restarted between the send and the answer, or the answer was lost) is never
// sent blind: the Effector is asked what it knows of the id first, and an id it does not know is
// settled `unknown` unless the Machine marked it idempotent. An answer that does not carry the
// Effector's signature settles the Effect `failed` (answer_unsigned), never sent again: it may
// have run. The Orchestrator never holds a secret: the ledger and the order name them by reference.
//
// Several Orchestrators (decision 0079): a worker runs only on the replica that owns its workspace.
// When the workspace moves, its worker stops here first (an Effect `sent` stays sent, its answer
// no longer awaited) and the new owner's worker recovers it by asking the Effector, as after a restart.
import { EFFECT_LIMITS, type EffectBody, type EffectKind, type EffectState } from "../../api/effects";
import { EFFECTOR_PATHS, EffectorAnswer, type EffectorOrder } from "../../api/effector-wire";
import type { EffectRecord } from "../../api/orchestrator-schemas";
import { HttpError } from "../../api/orchestrator-errors";
import type { SandboxModel } from "../../api/crd";
import { EFFECTOR, RUN_LABEL, TENANT_LABEL } from "../../api/wire";
import { readAttach } from "../workspaces/attach-body";
import { usableBy, type CredentialEntry } from "../workspaces/fence";
import type { PodConfig } from "../workspaces/pod-config";
import type { EffectorReply, HarnessLimits } from "../workspaces/sandbox-gateway";
import { EffectorUnreachable } from "../workspaces/sandbox-gateway";
import type { SandboxWatch } from "../workspaces/sandbox-watch";
import { KubeLedgers, LedgerStore, type LedgerBackend, type LedgerFormat } from "../agents/ledger-store";
import {
  EFFECTS_KEY,
  MAX_EFFECTS_LEDGER_BYTES,
  MAX_EFFECT_BODY_BYTES,
  acceptEffect,
  afterSend,
  effectsConfigMap,
  emptyEffects,
  failure,
  isSettled,
  markSent,
  nextEffect,
  parseEffectsLedger,
  recordOf,
  recoveryStep,
  serializeEffects,
  settleEffect,
  type EffectsLedger,
  type Heard,
  type Settlement,
  type Step,
  type StoredEffect,
} from "./effect-ledger";
import { resolveEffect, type DeclaredSecret, type WorkspaceFacts } from "./resolve";
import { SoleOwnership, type Ownership } from "../replicas/ownership";

export { effectsConfigMap };

export const EFFECTS_FORMAT: LedgerFormat<EffectsLedger> = {
  what: "effects ledger",
  configMap: effectsConfigMap,
  key: EFFECTS_KEY,
  empty: emptyEffects,
  parse: parseEffectsLedger,
  serialize: serializeEffects,
  maxBytes: MAX_EFFECTS_LEDGER_BYTES,
};

/** The Effector calls this needs (kube-gateway.ts `effector`). */
export type EffectorCaller = {
  effector(
    name: string,
    method: "GET" | "POST",
    path: string,
    body: unknown,
    limits: HarnessLimits,
  ): Promise<EffectorReply>;
};

/** How long past an order's own timeout its answer is waited for; a query's deadline. */
export const ANSWER_MARGIN_MS = 30_000;
export const QUERY_TIMEOUT_MS = 30_000;
/** An answer's bytes, at most: a command's stdout and stderr at their bound each, JSON-escaped. */
export const ANSWER_MAX_BYTES = EFFECT_LIMITS.maxBodyBytes * 3 + 64 * 1024;
/** The longest `?wait=` a Machine's GET holds, like a turn stream's page (ms). */
export const MAX_WAIT_MS = 60_000;

/** How the worker waits: on an Effector it cannot reach (backoff) and on a running Effect (poll). */
export type EffectTiming = { firstBackoffMs: number; maxBackoffMs: number; pollMs: number };
export const EFFECT_TIMING: EffectTiming = { firstBackoffMs: 250, maxBackoffMs: 10_000, pollMs: 1_000 };

export type EffectsOptions = {
  namespace: string;
  gateway: EffectorCaller;
  watch: Pick<SandboxWatch, "whenListed" | "get" | "all">;
  /** The fence's entries (fence.ts): where a push goes, where an http Effect may go. */
  credentials: readonly CredentialEntry[];
  podConfig?: PodConfig;
  /** The secrets a workspace declared for its Effector (the create body's effector.secrets, as
   * recorded on its Sandbox). Absent, or undefined for a Sandbox: every one the pod config's
   * effector.secrets lets the workspace's tenant use. */
  /** The effect secrets the workspace declared at create, read back from its Sandbox
   * (workspaces/effector-secrets.ts); absent, none is declared. */
  declaredOf?: (sandbox: SandboxModel) => ReadonlyArray<{ secret: string; key: string }>;
  /** Where a workspace's Effector sees /work: local mode's per-Sandbox directory (orchestrator/local);
   * absent, /work as in its pod. */
  workRootOf?: (workspace: string) => string;
  backend?: LedgerBackend<EffectsLedger>;
  /** An Effect entered a state: for the metrics. */
  onState?: (kind: EffectKind, state: EffectState) => void;
  log?: (entry: Record<string, unknown>) => void;
  timing?: EffectTiming;
  now?: () => number;
  /** Which workspaces this replica owns (decision 0079): a worker runs only for those. Default: all. */
  ownership?: Ownership;
};

/** A workspace's worker: its loop, and how it is stopped (the workspace deleted, a shutdown). */
type Worker = { done: Promise<void>; stop: AbortController; again: boolean };

export class Effects {
  readonly #ledgers: LedgerStore<EffectsLedger>;
  readonly #workers = new Map<string, Worker>();
  /** Who waits on a workspace's next settlement (a GET with `?wait=`): woken with whether it moved. */
  readonly #waiters = new Map<string, Set<(moved: boolean) => void>>();
  readonly #ownership: Ownership;
  /** Bumped by each release of a workspace: a GET that began before it answers what it has. */
  readonly #moves = new Map<string, number>();

  constructor(readonly opts: EffectsOptions) {
    this.#ledgers = new LedgerStore({
      format: EFFECTS_FORMAT,
      watch: opts.watch,
      backend: opts.backend ?? new KubeLedgers(opts.namespace, EFFECTS_FORMAT),
    });
    this.#ownership = opts.ownership ?? new SoleOwnership();
  }

  /**
   * The Machine's POST: validated against the workspace (its Effector, its slots, the fence, the
   * declared secrets), recorded `queued` durably, then run by the workspace's worker. The same id
   * with the same body answers its record (`created` false) and runs nothing; another body under
   * that id is effect_conflict.
   */
  async create(workspace: string, body: EffectBody): Promise<{ record: EffectRecord; created: boolean }> {
    const sandbox = this.opts.watch.get(workspace);
    if (!sandbox) throw new HttpError("not_found", `no workspace "${workspace}"`);
    const bytes = Buffer.byteLength(JSON.stringify(body), "utf8");
    if (bytes > MAX_EFFECT_BODY_BYTES)
      throw new HttpError(
        "too_large",
        `body: the Effect is ${bytes} bytes as JSON, past the bound of ${MAX_EFFECT_BODY_BYTES}: send a larger ` +
          "request body as a Worktree file (body.file)",
      );
    const result = await this.#ledgers.change(workspace, (ledger) => {
      const a = acceptEffect(ledger, body, this.#at());
      // A retry of a recorded Effect answers its record, whatever the workspace is now.
      if (a.kind === "same") return { result: { effect: a.effect, created: false } };
      if (a.kind === "conflict")
        throw new HttpError(
          "effect_conflict",
          `id: "${body.id}" names another Effect of workspace ${workspace} (a ${a.effect.kind}, accepted ` +
            `${a.effect.acceptedAt}): an id runs one Effect; use a new id`,
        );
      // A new one is judged before it is recorded: a refusal writes nothing.
      this.#resolve(this.#runnable(workspace, sandbox), body);
      if (a.kind === "full")
        throw new HttpError("too_many_effects", `workspace ${workspace}: ${a.message}: wait for some to settle`);
      return { value: a.ledger, result: { effect: a.effect, created: true } };
    });
    if (result.created) {
      this.opts.onState?.(body.kind, "queued");
      this.#kick(workspace);
    }
    return { record: recordOf(result.effect), created: result.created };
  }

  /** One Effect's record; with `waitMs`, held until it settles or the wait ends (or `signal`). */
  async get(workspace: string, id: string, waitMs = 0, signal?: AbortSignal): Promise<EffectRecord> {
    const until = this.#now() + Math.min(Math.max(waitMs, 0), MAX_WAIT_MS);
    const moves = this.#moves.get(workspace);
    for (;;) {
      const effect = (await this.#ledgers.read(workspace)).effects.find((e) => e.id === id);
      if (!effect) throw new HttpError("not_found", `workspace ${workspace} has no Effect "${id}"`);
      const left = until - this.#now();
      if (isSettled(effect.state) || left <= 0 || signal?.aborted) return recordOf(effect);
      if (this.#moves.get(workspace) !== moves) return recordOf(effect);
      // Moved to another replica: what it has (the new owner alone reads the ledger now).
      if (await this.#settledOrAfter(workspace, left, signal)) return recordOf(effect);
    }
  }

  /** The workspace's Effects, in the order the Machine sent them. */
  async list(workspace: string): Promise<EffectRecord[]> {
    return (await this.#ledgers.read(workspace)).effects.map(recordOf);
  }

  /**
   * On boot (restart re-attach), and when this replica gains a shard (decision 0079): every Sandbox
   * an Orchestrator wrote with an Effector, that `filter` passes (absent: all) and this replica
   * owns, gets its worker, which finds its first unsettled Effect: a `queued` one runs, a `sent`
   * one is recovered by asking the Effector (decision 0070).
   */
  async recover(filter?: (workspace: string) => boolean): Promise<void> {
    await this.opts.watch.whenListed();
    for (const sandbox of this.opts.watch.all()) {
      const name = sandbox.metadata?.name;
      if (!name || sandbox.metadata?.labels?.[RUN_LABEL] === undefined || !hasEffector(sandbox)) continue;
      if (filter && !filter(name)) continue;
      this.#kick(name);
    }
  }

  /**
   * The workspaces moved to another replica (decision 0079): their workers stop, and this resolves
   * once each has (an Effect `sent` stays sent: its answer is no longer awaited here, and the new
   * owner asks the Effector for it); their held GETs answer what they have; their ledgers are
   * forgotten, so a later tenure reads the cluster again.
   */
  async release(workspaces: string[]): Promise<void> {
    const moved = [...new Set(workspaces)];
    const stopping = moved.flatMap((w) => this.#workers.get(w) ?? []);
    for (const worker of stopping) worker.stop.abort();
    for (const workspace of moved) this.#moves.set(workspace, (this.#moves.get(workspace) ?? 0) + 1);
    for (const workspace of moved) for (const wake of [...(this.#waiters.get(workspace) ?? [])]) wake(true);
    await Promise.all(stopping.map((w) => w.done));
    for (const workspace of moved) this.#ledgers.forget(workspace);
  }

  /** The workspace is gone or going: its worker stops (an Effect `sent` stays so, for no one). */
  stop(workspace: string): void {
    this.#workers.get(workspace)?.stop.abort();
  }

  /** Every worker stopped; resolves once each has. */
  async stopAll(): Promise<void> {
    const workers = [...this.#workers.values()];
    for (const w of workers) w.stop.abort();
    await Promise.all(workers.map((w) => w.done));
  }

  /** Resolves once the workspace's worker has nothing left to do (tests). */
  async idle(workspace: string): Promise<void> {
    while (this.#workers.has(workspace)) await this.#workers.get(workspace)!.done;
  }

  // -------------------------------------------------------------------------------------------

  /** The Sandbox, when its Effector can take an Effect: it has one, and it is Ready. */
  #runnable(workspace: string, sandbox: SandboxModel): SandboxModel {
    if (!hasEffector(sandbox))
      throw new HttpError(
        "effector_absent",
        `workspace ${workspace} was created without an Effector: create one with \`effector\` to run Effects`,
      );
    if (sandbox.status?.phase !== "Ready")
      throw new HttpError(
        "not_ready",
        `workspace ${workspace} is ${sandbox.status?.phase ?? "Pending"}, not Ready: its Effector runs no Effect yet`,
      );
    return sandbox;
  }

  /** The order for `body` from what jr2 recorded of the workspace; a refusal is effect_refused. */
  #resolve(sandbox: SandboxModel, body: EffectBody): { ok: true; order: EffectorOrder } {
    const r = resolveEffect(body, factsOf(sandbox), {
      credentials: this.opts.credentials,
      heldOrigins: (this.opts.podConfig?.custodian.held ?? []).flatMap((h) => h.origins),
      declared: declaredSecrets(this.opts.podConfig, sandbox, this.opts.declaredOf?.(sandbox)),
      ...(this.opts.workRootOf ? { workRoot: this.opts.workRootOf(sandbox.metadata?.name ?? "") } : {}),
    });
    if (!r.ok) throw new HttpError("effect_refused", r.message);
    return r;
  }

  /** Starts the workspace's worker, or tells the running one to look again before it ends; never
   * for a workspace another replica owns (its worker runs there). */
  #kick(workspace: string): void {
    if (!this.#ownership.owns(workspace)) return;
    const running = this.#workers.get(workspace);
    if (running) {
      running.again = true;
      return;
    }
    const worker: Worker = { done: Promise.resolve(), stop: new AbortController(), again: false };
    this.#workers.set(workspace, worker);
    worker.done = (async () => {
      try {
        do {
          worker.again = false;
          await this.#work(workspace, worker.stop.signal);
        } while (worker.again && !worker.stop.signal.aborted);
      } catch (err) {
        if (!worker.stop.signal.aborted && !(err instanceof HttpError && err.code === "not_found"))
          this.opts.log?.({
            level: "error",
            message: "the effects worker stopped",
            workspace,
            detail: err instanceof Error ? err.message : String(err),
          });
      } finally {
        this.#workers.delete(workspace);
        this.#notify(workspace);
      }
    })();
  }

  /** Runs (or recovers) the workspace's first unsettled Effect, then the next, until none is left. */
  async #work(workspace: string, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      if (!this.#ownership.owns(workspace)) return;
      const effect = nextEffect(await this.#ledgers.read(workspace));
      if (!effect) return;
      if (!this.opts.watch.get(workspace)) return;
      await this.#run(workspace, effect, signal);
    }
  }

  async #run(workspace: string, effect: StoredEffect, signal: AbortSignal): Promise<void> {
    // Resolved again from what jr2 recorded (the same facts give the same order); a `sent` one is
    // recovered by its id alone, its order needed only to send it again.
    let order: EffectorOrder | undefined;
    try {
      order = this.#resolve(this.opts.watch.get(workspace)!, effect.request).order;
    } catch (err) {
      if (!(err instanceof HttpError)) throw err;
      // What was allowed at the POST no longer is (a changed pod config or fence): never sent.
      if (effect.state === "queued")
        return this.#settle(workspace, effect, { state: "failed", error: failure("refused", err.message) });
    }
    const timing = this.opts.timing ?? EFFECT_TIMING;
    let step: Step;
    let resends = 0;
    let backoff = 0;
    const pause = async (ms: number) => sleep(ms, signal);
    const send = async (): Promise<Step> => {
      if (!order)
        return {
          do: "settle",
          settlement: {
            state: "unknown",
            error: failure("answer_lost", "its answer was lost, and it is no longer allowed: not sent again"),
          },
        };
      return afterSend(
        effect,
        await this.#hear(workspace, "POST", EFFECTOR_PATHS.effects, order, effect.id, signal),
        resends,
      );
    };
    const query = async () =>
      recoveryStep(
        effect,
        await this.#hear(workspace, "GET", EFFECTOR_PATHS.effect(effect.id), undefined, effect.id, signal),
        resends,
      );
    if (effect.state === "queued") {
      // Durably `sent` before the order leaves (decision 0070): a restart from here on asks before it sends.
      await this.#ledgers.change(workspace, (ledger) => {
        const next = markSent(ledger, effect.id, this.#at());
        return next ? { value: next, result: undefined } : { result: undefined };
      });
      this.opts.onState?.(effect.kind, "sent");
      step = await send();
    } else step = await query();
    while (!signal.aborted) {
      if (step.do === "settle") return this.#settle(workspace, effect, step.settlement);
      if (step.do === "poll") {
        await pause(timing.pollMs);
        step = await query();
        continue;
      }
      if (step.do === "query") {
        step = await query();
        continue;
      }
      // resend or retry: after a backoff, so an Effector that cannot be reached costs a bounded rate.
      backoff = Math.min(Math.max(backoff * 2, timing.firstBackoffMs), timing.maxBackoffMs);
      await pause(backoff);
      if (signal.aborted) return;
      if (step.do === "resend") {
        resends++;
        step = await send();
      } else step = await query();
    }
  }

  /** One signed call, read into what effect-ledger.ts decides on. A stopped worker stops waiting for
   * it (WorkerStopped): the Effect stays as the ledger has it, for whoever runs the worker next. */
  async #hear(
    workspace: string,
    method: "GET" | "POST",
    path: string,
    order: unknown,
    id: string,
    signal: AbortSignal,
  ): Promise<Heard> {
    const timeoutMs =
      method === "POST" ? (order as EffectorOrder).effect.timeoutSeconds * 1000 + ANSWER_MARGIN_MS : QUERY_TIMEOUT_MS;
    let reply: EffectorReply;
    try {
      reply = await unlessStopped(
        this.opts.gateway.effector(workspace, method, path, order, { maxBytes: ANSWER_MAX_BYTES, timeoutMs }),
        signal,
      );
    } catch (err) {
      if (err instanceof WorkerStopped) throw err;
      if (err instanceof EffectorUnreachable)
        return err.delivered ? { kind: "lost", message: err.message } : { kind: "not_delivered", message: err.message };
      return { kind: "lost", message: err instanceof Error ? err.message : String(err) };
    }
    return heardOf(reply, id, workspace);
  }

  async #settle(workspace: string, effect: StoredEffect, s: Settlement): Promise<void> {
    const settled = await this.#ledgers.change(workspace, (ledger) => {
      const next = settleEffect(ledger, effect.id, s, this.#at());
      return next ? { value: next, result: true } : { result: false };
    });
    if (settled) {
      this.opts.onState?.(effect.kind, s.state);
      this.opts.log?.({
        level: s.state === "succeeded" ? "info" : "warn",
        message: `effect ${s.state}`,
        workspace,
        effect: effect.id,
        kind: effect.kind,
        ...(s.error ? { code: s.error.code } : {}),
      });
    }
    this.#notify(workspace);
  }

  /** Resolves on the workspace's next settlement, after `ms`, on `signal`, or when it moves (true). */
  #settledOrAfter(workspace: string, ms: number, signal?: AbortSignal): Promise<boolean> {
    return new Promise((resolve) => {
      const set = this.#waiters.get(workspace) ?? new Set();
      this.#waiters.set(workspace, set);
      const wake = (moved: boolean) => {
        clearTimeout(timer);
        set.delete(wake);
        if (!set.size && this.#waiters.get(workspace) === set) this.#waiters.delete(workspace);
        signal?.removeEventListener("abort", done);
        resolve(moved);
      };
      const done = () => wake(false);
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      set.add(wake);
    });
  }

  #notify(workspace: string): void {
    for (const w of [...(this.#waiters.get(workspace) ?? [])]) w(false);
  }

  #now() {
    return (this.opts.now ?? Date.now)();
  }

  #at() {
    return new Date(this.#now()).toISOString();
  }
}

const hasEffector = (sandbox: SandboxModel) => (sandbox.spec?.sidecars ?? []).some((c) => c.name === EFFECTOR);

/** What jr2 recorded of the workspace on its Sandbox: the attach annotation, spec.gitCredentials, its tenant label. */
export function factsOf(sandbox: SandboxModel): WorkspaceFacts {
  const attach = readAttach(sandbox);
  return {
    name: sandbox.metadata?.name ?? "",
    branch: attach?.branch ?? "",
    slots: (attach?.slots ?? []).map((s) => ({ slot: s.slot, url: s.url, identity: s.identity })),
    gitCredentials: (sandbox.spec?.gitCredentials ?? []).map((g) => g.name),
    tenant: sandbox.metadata?.labels?.[TENANT_LABEL],
  };
}

/** The pod config's effector.secrets, when this build's pod config has them (being added beside this). */

/**
 * The secrets a workspace may spend: the pod config's `effector.secrets` entries its tenant may use
 * (each with the origins its value may go to), narrowed to those the workspace declared when its
 * declaration is known. A pod config without `effector.secrets` declares none.
 */
export function declaredSecrets(
  podConfig: PodConfig | undefined,
  sandbox: SandboxModel,
  workspace: ReadonlyArray<{ secret: string; key: string }> | undefined,
): DeclaredSecret[] {
  const tenant = sandbox.metadata?.labels?.[TENANT_LABEL];
  // What the workspace's Effector mounts is the bound: a secret it did not declare is not there.
  return (podConfig?.effector.secrets ?? [])
    .filter((e) => usableBy({ match: "", prefix: "", ...(e.tenants ? { tenants: e.tenants } : {}) }, tenant))
    .filter((e) => (workspace ?? []).some((w) => w.secret === e.secret && w.key === e.key))
    .map((e) => ({ secret: e.secret, key: e.key, origins: e.origins ?? [] }));
}

/** An Effector's reply as what it says of the Effect `id`. A 5xx is an answer lost whatever it carries. */
export function heardOf(reply: EffectorReply, id: string, workspace: string): Heard {
  if (reply.status >= 500)
    return { kind: "lost", message: `workspace ${workspace}'s Effector answered ${reply.status}` };
  if (!reply.signed)
    return {
      kind: "unsigned",
      message: `workspace ${workspace}'s Effector answered ${reply.status} without its signature`,
    };
  const json = safeJson(reply.text);
  if (reply.status === 200) {
    const answer = EffectorAnswer.safeParse(json);
    if (answer.success && answer.data.id === id) return { kind: "answer", answer: answer.data };
    return {
      kind: "bad_answer",
      message: `workspace ${workspace}'s Effector answered 200 with no answer for Effect "${id}"`,
    };
  }
  const said = (json as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  const code = typeof said?.code === "string" ? said.code.slice(0, 64) : "refused";
  if (reply.status === 404 && (code === "unknown_id" || code === "refused")) return { kind: "unknown_id" };
  const words = typeof said?.message === "string" ? said.message : reply.text;
  return {
    kind: "refused",
    status: reply.status,
    code,
    message: `workspace ${workspace}'s Effector refused it (${reply.status}): ${words.slice(0, 1000)}`,
  };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A worker stopped while it waited on its Effector. */
class WorkerStopped extends Error {}

/** `call`'s answer, unless `signal` aborts first: then WorkerStopped, and the answer is dropped. */
function unlessStopped<T>(call: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new WorkerStopped("the effects worker was stopped"));
  return new Promise<T>((resolve, reject) => {
    const stopped = () => reject(new WorkerStopped("the effects worker was stopped"));
    signal.addEventListener("abort", stopped, { once: true });
    call.then(
      (v) => (signal.removeEventListener("abort", stopped), resolve(v)),
      (e: unknown) => (signal.removeEventListener("abort", stopped), reject(e)),
    );
  });
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
