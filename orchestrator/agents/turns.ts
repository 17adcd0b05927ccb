// A Machine's turns on a workspace's Agents (decision 0025): submit a turn (the Harness's
// admission, answered at once), read its events from the Harness's stream (resumable from an
// offset), abort it, change its Allowed picks. The admission is the durable handle: each
// conversation's Agent, admission, and while its turn runs its Menu and Allowed picks are kept in
// the ConfigMap `<workspace>-turns` owned by the Sandbox (turn-ledger.ts), written after the
// Harness admitted the turn and before the submit answers, so an Orchestrator restarted mid-turn
// finds the stream again and never admits the turn twice. What the Harness answers is input, not
// truth (decision 0042): every read is bounded, the stream's path is the Orchestrator's own, and
// a Harness that breaks a bound is named and answered 502 while every other workspace goes on.
// Only the replica that owns a workspace reads and writes its ledger (decision 0079): `release`
// lets it go when it moves, so the next owner's reads come from the cluster.
import { randomBytes } from "node:crypto";
import { z } from "zod";
import {
  Admission,
  LIMITS,
  LONG_POLL_MS,
  StreamPage,
  abortPath,
  agentPath,
  streamPath,
} from "../../api/agent-protocol";
import type { SubmitTurnBody } from "../../api/orchestrator-schemas";
import { ERRORS, HttpError, isErrorCode, WorkspaceMoved, type ErrorCode } from "../../api/orchestrator-errors";
import { HarnessMisbehaved, SMALL_ANSWER, type HarnessLimits, type Misbehaviour } from "../workspaces/sandbox-gateway";
import type { SandboxWatch } from "../workspaces/sandbox-watch";
import { KubeLedgers, LedgerStore, type LedgerBackend, type LedgerFormat } from "./ledger-store";
import {
  MAX_TURNS_LEDGER_BYTES,
  TURNS_KEY,
  admitTurn,
  emptyTurns,
  endTurn,
  judgePick,
  parseTurnsLedger,
  runningTurn,
  serializeTurns,
  setTurnAllowed,
  turnsConfigMap,
  type PickRefusal,
  type TurnsLedger,
} from "./turn-ledger";

export { turnsConfigMap };

export const TURNS_FORMAT: LedgerFormat<TurnsLedger> = {
  what: "turns ledger",
  configMap: turnsConfigMap,
  key: TURNS_KEY,
  empty: emptyTurns,
  parse: parseTurnsLedger,
  serialize: serializeTurns,
  maxBytes: MAX_TURNS_LEDGER_BYTES,
};

/** A stream page: at most LIMITS.pageEvents events in at most 4 MiB, within the long-poll's
 * hold and half a minute more. */
export const PAGE_ANSWER = (waitMs: number): HarnessLimits => ({
  maxBytes: 4 * 1024 * 1024,
  timeoutMs: waitMs + 30_000,
});

/**
 * How a conversation's stream is followed (decision 0049): an empty page answered well before its
 * hold (a Harness that does not hold, or answers empty pages at once) is asked again only after a
 * backoff, from `firstBackoffMs` doubling to `maxBackoffMs`; a workspace has at most
 * `streamsPerWorkspace` streams followed at once. So one workspace's Harness costs a bounded rate
 * of requests, whatever it answers.
 */
export type StreamPoll = { firstBackoffMs: number; maxBackoffMs: number; streamsPerWorkspace: number };
export const STREAM_POLL: StreamPoll = { firstBackoffMs: 250, maxBackoffMs: 5_000, streamsPerWorkspace: 8 };

/** The Harness calls this needs (kube-gateway.ts `harness`). */
export type HarnessCaller = {
  harness(
    name: string,
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    signal?: AbortSignal,
    limits?: HarnessLimits,
  ): Promise<{ status: number; body: unknown }>;
};

export type TurnsOptions = {
  namespace: string;
  gateway: HarnessCaller;
  watch: SandboxWatch;
  /** Where the ledgers are kept (default: ConfigMaps in `namespace`). */
  backend?: LedgerBackend<TurnsLedger>;
  /** A workspace's Harness broke a bound: for its metric, its Event and the log. */
  onMisbehaviour?: (workspace: string, reason: Misbehaviour, message: string) => void;
  /** How streams are followed (default STREAM_POLL). */
  poll?: StreamPoll;
  now?: () => number;
  /** Waits `ms` or until `signal` aborts (default: a timer). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
};

/** What a Machine names to resume a stream: the SSE id of the last event it read. */
export type Resume = { lastEventId?: number };

export class Turns {
  readonly #ledgers: LedgerStore<TurnsLedger>;
  /** Streams followed now, by workspace. */
  readonly #following = new Map<string, number>();
  /** How each stream followed now is ended when its workspace moves to another replica. */
  readonly #ends = new Map<string, Set<AbortController>>();

  constructor(readonly opts: TurnsOptions) {
    this.#ledgers = new LedgerStore({
      format: TURNS_FORMAT,
      watch: opts.watch,
      backend: opts.backend ?? new KubeLedgers(opts.namespace, TURNS_FORMAT),
    });
  }

  /** Admits the turn on the workspace's Harness and records its admission before answering. */
  async submit(workspace: string, body: SubmitTurnBody): Promise<{ iid: string; admission: Admission }> {
    this.#ready(workspace);
    // A conversation belongs to its workspace by name (pick-ledger.ts workspaceOfIid): `<workspace>.<rest>`.
    const iid = body.iid ?? `${workspace}.c-${randomBytes(6).toString("hex")}`;
    if (!iid.startsWith(`${workspace}.`))
      throw new HttpError("invalid", `iid: must begin with "${workspace}." (the workspace's name and a dot)`);
    // The Menu's parameters are kept with the running turn (its picks' args are checked against
    // them, decision 0049): bounded, so the turn's entry always fits its ledger.
    const parameters = Buffer.byteLength(JSON.stringify(body.menu.map((m) => m.parameters ?? null)), "utf8");
    if (parameters > LIMITS.menuParametersBytes)
      throw new HttpError(
        "too_large",
        `menu: its tools' parameters are ${parameters} bytes as JSON together, past the bound of ${LIMITS.menuParametersBytes}: send smaller schemas`,
      );
    const submissionId = body.submissionId ?? `s-${randomBytes(6).toString("hex")}`;
    const held = (await this.#ledgers.read(workspace)).conversations[iid];
    if (held && held.agent !== body.agent)
      throw new HttpError("conflict", `conversation ${iid} belongs to Agent "${held.agent}", not "${body.agent}"`);
    const { agent, iid: _iid, ...turn } = body;
    const res = await this.#call(workspace, "POST", agentPath(agent, iid), { ...turn, submissionId });
    if (res.status !== 202) throw harnessRefusal(workspace, res);
    const admission = this.#admissionOf(workspace, res.body, { agent, iid, submissionId });
    await this.#ledgers.change(workspace, (ledger) => {
      const next = admitTurn(ledger, iid, { agent, admission, at: this.#at(), body: turn });
      if (!next)
        // One conversation's entry is bounded (LIMITS): this cannot happen with any turn the API takes.
        throw new HttpError("too_large", `the turn does not fit workspace ${workspace}'s turns ledger`);
      return { value: next, result: undefined };
    });
    return { iid, admission };
  }

  /**
   * The conversation's stream followed for a Machine, from after `resume.lastEventId` (absent: its
   * last admission's offset): each page handed to `onPage` (awaited) until the admission's `end`,
   * until nothing more can come (no running turn and every event read: the Harness says `idle`),
   * or until `signal` aborts. A refusal before the first page is thrown before `onPage` is called.
   * Bounded (decision 0049): see StreamPoll.
   */
  async follow(
    workspace: string,
    iid: string,
    resume: Resume,
    signal: AbortSignal,
    onPage: (page: StreamPage) => Promise<void> | void,
  ): Promise<void> {
    const poll = this.opts.poll ?? STREAM_POLL;
    const open = this.#following.get(workspace) ?? 0;
    if (open >= poll.streamsPerWorkspace)
      throw new HttpError(
        "too_many_streams",
        `workspace ${workspace} has ${open} turn event streams open, its bound: close one before opening another`,
      );
    this.#following.set(workspace, open + 1);
    const moved = new AbortController();
    let ends = this.#ends.get(workspace);
    if (!ends) this.#ends.set(workspace, (ends = new Set()));
    ends.add(moved);
    signal = AbortSignal.any([signal, moved.signal]);
    try {
      let offset = resume.lastEventId === undefined ? undefined : resume.lastEventId + 1;
      let wait = 0;
      let backoff = 0;
      for (let first = true; ; first = false) {
        const asked = this.#now();
        const { page, submissionId } = await this.page(
          workspace,
          iid,
          offset,
          wait,
          signal,
          first && resume.lastEventId !== undefined ? resume : undefined,
        );
        await onPage(page);
        if (signal.aborted) return;
        if (page.events.some((e) => e.kind === "end" && e.submissionId === submissionId)) return;
        if (page.idle && page.events.length === 0) return;
        offset = page.next;
        const quick = page.events.length === 0 && this.#now() - asked < wait / 2;
        backoff = quick ? Math.min(Math.max(backoff * 2, poll.firstBackoffMs), poll.maxBackoffMs) : 0;
        if (backoff > 0) await this.#sleep(backoff, signal);
        if (signal.aborted) return;
        wait = LONG_POLL_MS;
      }
    } catch (err) {
      // Cut because the workspace moved: placed again by the API before its first page (the caller
      // sees nothing), after it the Machine asks again and reaches its new owner.
      if (moved.signal.aborted)
        throw new WorkspaceMoved(
          `workspace ${workspace} moved to another Orchestrator replica while its stream was read: ask again ` +
            "(with the Last-Event-ID of the last event read)",
        );
      throw err;
    } finally {
      ends.delete(moved);
      if (ends.size === 0 && this.#ends.get(workspace) === ends) this.#ends.delete(workspace);
      const left = (this.#following.get(workspace) ?? 1) - 1;
      if (left > 0) this.#following.set(workspace, left);
      else this.#following.delete(workspace);
    }
  }

  /**
   * The conversation's events from `offset` (absent: its last admission's), one long-poll page. A
   * page that shows the running turn's end ends it in the ledger (its picks are then refused).
   * `resumed`: `offset` is the Machine's (its Last-Event-ID plus one), so a page that says the
   * stream ends before it is the Machine's mistake, answered 400, not the Harness's misbehaviour.
   */
  async page(
    workspace: string,
    iid: string,
    offset: number | undefined,
    waitMs: number,
    signal?: AbortSignal,
    resumed?: Resume,
  ) {
    this.#ready(workspace);
    const entry = (await this.#ledgers.read(workspace)).conversations[iid];
    if (!entry) throw new HttpError("not_found", `workspace ${workspace} has no conversation ${iid}`);
    const from = offset ?? entry.admission.offset;
    const wait = Math.min(Math.max(waitMs, 0), LONG_POLL_MS);
    const path = `${streamPath(entry.agent, iid)}?offset=${from}&wait=${wait}&limit=${LIMITS.pageEvents}`;
    const res = await this.#call(workspace, "GET", path, undefined, signal, PAGE_ANSWER(wait));
    if (res.status !== 200) throw harnessRefusal(workspace, res);
    const parsed = StreamPage.safeParse(res.body);
    if (
      resumed?.lastEventId !== undefined &&
      parsed.success &&
      parsed.data.events.length === 0 &&
      parsed.data.next < from
    )
      throw new HttpError(
        "invalid",
        `Last-Event-ID: ${resumed.lastEventId} is past the end of conversation ${iid}'s stream (its next event ` +
          `will have id ${parsed.data.next}): send the id of an event this stream sent, or none to read its last turn from the start`,
      );
    if (!parsed.success || parsed.data.events.length > LIMITS.pageEvents || parsed.data.next < from)
      throw this.#misbehaved(
        workspace,
        "bad_answer",
        `workspace ${workspace}'s Harness answered a stream page that is not one`,
      );
    const page = parsed.data;
    const submissionId = entry.admission.submissionId;
    if (!entry.ended && page.events.some((e) => e.kind === "end" && e.submissionId === submissionId))
      await this.#end(workspace, iid, submissionId);
    return { page, submissionId };
  }

  /** A deliberate terminal cancel of the conversation's running turn; its picks are refused from now. */
  async abort(workspace: string, iid: string): Promise<{ aborted: boolean }> {
    this.#ready(workspace);
    const entry = (await this.#ledgers.read(workspace)).conversations[iid];
    if (!entry) throw new HttpError("not_found", `workspace ${workspace} has no conversation ${iid}`);
    const res = await this.#call(workspace, "POST", abortPath(entry.agent, iid));
    if (res.status !== 200) throw harnessRefusal(workspace, res);
    const answer = z.strictObject({ aborted: z.boolean() }).safeParse(res.body);
    if (!answer.success)
      throw this.#misbehaved(
        workspace,
        "bad_answer",
        `workspace ${workspace}'s Harness answered an abort with no {aborted}`,
      );
    await this.#end(workspace, iid, entry.admission.submissionId);
    return answer.data;
  }

  /** The running turn's Allowed picks changed by the Machine (a Gate's answer, an outside event):
   * the turn reads them at its next step boundary (decision 0025's restated Turn part). */
  async setAllowed(workspace: string, iid: string, allowed: string[]): Promise<{ iid: string; allowed: string[] }> {
    this.#ready(workspace);
    const now = await this.#ledgers.change(workspace, (ledger) => {
      const r = setTurnAllowed(ledger, iid, allowed);
      if (r.kind === "unknown") throw new HttpError("not_found", `workspace ${workspace}: ${r.message}`);
      if (r.kind === "over") throw new HttpError("turn_over", r.message);
      return r.kind === "set" ? { value: r.ledger, result: r.allowed } : { result: r.allowed };
    });
    return { iid, allowed: now };
  }

  /** The Harness's read at a step boundary: the running turn's Allowed picks and its submission.
   * Undefined when the conversation has no running turn. */
  async allowedFor(workspace: string, iid: string): Promise<{ allowed: string[]; submissionId: string } | undefined> {
    const turn = runningTurn(await this.#ledgers.read(workspace), iid);
    return turn ? { allowed: turn.allowed, submissionId: turn.admission.submissionId } : undefined;
  }

  /** A Sandbox's pick judged against the turn the Orchestrator admitted (turn-ledger.ts judgePick). */
  async judgePick(
    workspace: string,
    iid: string,
    pick: { pick: string; submissionId: string; args?: unknown },
  ): Promise<PickRefusal | undefined> {
    return judgePick(await this.#ledgers.read(workspace), iid, pick);
  }

  /** Whether `(iid, submissionId)` is a running turn: its picks are listed and answered. */
  async isRunning(workspace: string, iid: string, submissionId: string): Promise<boolean> {
    return runningTurn(await this.#ledgers.read(workspace), iid)?.admission.submissionId === submissionId;
  }

  /**
   * The workspaces moved to another replica (decision 0079): their ledgers are forgotten (a later
   * tenure reads the cluster again), and the streams followed for them end as if the Machine had
   * left, so it resumes from its Last-Event-ID through the new owner, which alone writes the ledger.
   */
  release(workspaces: string[]): void {
    for (const workspace of workspaces) {
      for (const moved of [...(this.#ends.get(workspace) ?? [])]) moved.abort();
      this.#ledgers.forget(workspace);
    }
  }

  // -------------------------------------------------------------------------------------------

  #now() {
    return (this.opts.now ?? Date.now)();
  }

  #at() {
    return new Date(this.#now()).toISOString();
  }

  #sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (this.opts.sleep) return this.opts.sleep(ms, signal);
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

  #ready(workspace: string) {
    const sandbox = this.opts.watch.get(workspace);
    if (!sandbox) throw new HttpError("not_found", `no workspace ${workspace}`);
    if (sandbox.status?.phase !== "Ready")
      throw new HttpError("not_ready", `workspace ${workspace} is ${sandbox.status?.phase ?? "Pending"}, not Ready`);
  }

  async #end(workspace: string, iid: string, submissionId: string) {
    await this.#ledgers.change(workspace, (ledger) => {
      const next = endTurn(ledger, iid, submissionId);
      return next ? { value: next, result: undefined } : { result: undefined };
    });
  }

  /** One bounded call to the workspace's Harness; a broken bound is reported and answered 502. */
  async #call(
    workspace: string,
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    signal?: AbortSignal,
    limits: HarnessLimits = SMALL_ANSWER,
  ) {
    try {
      return await this.opts.gateway.harness(workspace, method, path, body, signal, limits);
    } catch (err) {
      if (err instanceof HarnessMisbehaved) throw this.#misbehaved(workspace, err.reason, err.message);
      throw err;
    }
  }

  /** The admission as the Harness answered it, held to what was asked: the conversation's own
   * stream path (the Orchestrator never requests a path a Harness names) and the submission sent. */
  #admissionOf(
    workspace: string,
    body: unknown,
    asked: { agent: string; iid: string; submissionId: string },
  ): Admission {
    const parsed = Admission.safeParse(body);
    if (!parsed.success)
      throw this.#misbehaved(
        workspace,
        "bad_answer",
        `workspace ${workspace}'s Harness answered a turn with no admission`,
      );
    const { streamUrl, submissionId } = parsed.data;
    if (streamUrl !== streamPath(asked.agent, asked.iid) || submissionId !== asked.submissionId)
      throw this.#misbehaved(
        workspace,
        "bad_answer",
        `workspace ${workspace}'s Harness answered an admission for another stream or submission than the turn's`,
      );
    return parsed.data;
  }

  #misbehaved(workspace: string, reason: Misbehaviour, message: string): HttpError {
    this.opts.onMisbehaviour?.(workspace, reason, message);
    return new HttpError("harness_misbehaved", message);
  }
}

/** The Harness's refusals (harness/harness-server.ts) a Machine is answered as they are: a turn's
 * body it refused, a conversation it does not hold, another turn running. */
export const RELAYED: readonly ErrorCode[] = ["invalid", "not_found", "busy"];

/** A Harness answer that is not the one asked for: its status and, cut short, its own words. */
function harnessRefusal(workspace: string, res: { status: number; body: unknown }): HttpError {
  const said = (res.body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  const words = typeof said?.message === "string" ? said.message : (JSON.stringify(res.body) ?? "");
  const message = `workspace ${workspace}'s Harness answered ${res.status}: ${words.slice(0, 500)}`;
  // Only the Harness's words the catalogue has, at the status it gives them, are passed on as they
  // are; any other is harness_error, so a Machine meets no code the catalogue lacks (decision 0057).
  if (isErrorCode(said?.code) && RELAYED.includes(said.code) && ERRORS[said.code].status === res.status)
    return new HttpError(said.code, message);
  return new HttpError("harness_error", message);
}
