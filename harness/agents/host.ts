// The Harness's Agent host (decision 0025): admits a turn on a conversation
// (`POST /agents/:name/:id`) and answers at once with the admission, the durable handle; runs it
// through a TurnRunner (the pi loop, pi-runner.ts) in the background; serves the conversation's
// stream from any offset (log.ts); aborts a turn only when asked. One Agent runs at a time per
// Workspace: a second admission while a turn runs is refused with 409, except the same
// submission again, which answers the same admission. A conversation's history is kept beside its
// stream on the conversations volume, so a Harness restarted inside the pod continues it; a turn
// the restart cut is ended there as `failed`, exactly once. A turn that says nothing for a while
// (a long tool run, a pick waiting on its Machine) gets a "still working" event, so a reader can
// tell a quiet turn from a stuck stream.
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { streamPath, type Admission, type StreamEvent, type StreamPage, type TurnBody } from "../../api/agent-protocol";
import { ConversationLog } from "./log";

/** What a runner may say while a turn runs (the host stamps and stores it). */
export type Progress =
  | { kind: "text"; text: string }
  | { kind: "tool"; tool: string; callId: string; args: unknown }
  | { kind: "toolResult"; tool: string; callId: string; isError: boolean; text: string }
  | { kind: "pick"; pick: string; deliveryId?: string }
  | { kind: "working"; note: string }
  | { kind: "allowed"; allowed: string[] }
  | { kind: "usage"; model: string; input: number; output: number; cacheRead: number; cacheWrite: number };

export type TurnInput = {
  agent: string;
  conversation: string;
  submissionId: string;
  body: TurnBody;
  /** The conversation so far, as the runner last returned it (opaque to the host). */
  history: unknown[];
  emit(progress: Progress): void;
  /** Aborted by `POST .../abort` only. */
  signal: AbortSignal;
};
export type TurnOutput = { message?: string; history: unknown[] };
export type TurnRunner = (turn: TurnInput) => Promise<TurnOutput>;

export class HostError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

type Conversation = {
  agent: string;
  id: string;
  log: ConversationLog;
  historyFile: string;
  running?: { submissionId: string; abort: AbortController };
};

export type AgentHostOptions = {
  /** The conversations volume (JR2_CONVERSATIONS_DIR). */
  dir: string;
  run: TurnRunner;
  log?: (entry: Record<string, unknown>) => void;
  /** A running turn silent this long gets a `working` event. Default 15 s. */
  workingEveryMs?: number;
};

export const WORKING_EVERY_MS = 15_000;

export class AgentHost {
  readonly #conversations = new Map<string, Conversation>();
  /** The one running turn of this Workspace, by conversation key. */
  #running: string | undefined;

  constructor(readonly opts: AgentHostOptions) {}

  /** Admits a turn, or answers the admission it already made for the same submission. */
  admit(agent: string, id: string, body: TurnBody): Admission {
    const c = this.#conversation(agent, id);
    const submissionId = body.submissionId ?? randomUUID();
    const start = c.log.startOf(submissionId);
    if (start !== undefined) return this.#admission(c, start, submissionId);
    if (this.#running !== undefined) {
      const [a, i] = this.#running.split("/");
      throw new HostError(
        409,
        "busy",
        `a turn of Agent "${a}" (conversation ${i}) is running: one Agent runs at a time in a Workspace; ` +
          "read its stream to its end, or abort it, before admitting another",
      );
    }
    const turn = c.log.append({ kind: "turn", submissionId });
    const abort = new AbortController();
    c.running = { submissionId, abort };
    this.#running = `${agent}/${id}`;
    void this.#run(c, body, submissionId, abort.signal);
    return this.#admission(c, turn.offset, submissionId);
  }

  /** The conversation's events from `offset`, held up to `holdMs` while a turn runs. */
  async stream(
    agent: string,
    id: string,
    offset: number,
    holdMs: number,
    signal?: AbortSignal,
    limit?: number,
  ): Promise<StreamPage> {
    const c = this.#known(agent, id);
    return c.log.read(offset, holdMs, () => c.running === undefined, signal, limit);
  }

  /** A deliberate terminal cancel of the running turn (never a client that went away). */
  abort(agent: string, id: string): { aborted: boolean } {
    const c = this.#known(agent, id);
    if (!c.running) return { aborted: false };
    c.running.abort.abort(new Error("aborted by the Orchestrator"));
    return { aborted: true };
  }

  // -------------------------------------------------------------------------------------------

  #admission(c: Conversation, offset: number, submissionId: string): Admission {
    return { streamUrl: streamPath(c.agent, c.id), offset, submissionId };
  }

  #known(agent: string, id: string): Conversation {
    const c = this.#conversation(agent, id, false);
    if (!c) throw new HostError(404, "not_found", `Agent "${agent}" has no conversation ${id} in this Sandbox`);
    return c;
  }

  #conversation(agent: string, id: string): Conversation;
  #conversation(agent: string, id: string, create: false): Conversation | undefined;
  #conversation(agent: string, id: string, create = true): Conversation | undefined {
    const key = `${agent}/${id}`;
    let c = this.#conversations.get(key);
    if (c) return c;
    const file = join(this.opts.dir, agent, `${id}.jsonl`);
    if (!create && !existsSync(file)) return undefined;
    c = { agent, id, log: new ConversationLog(file), historyFile: join(this.opts.dir, agent, `${id}.history.json`) };
    // A turn this Harness was running when it ended (a restart inside the pod): ended here, once.
    const unended = c.log.unended;
    if (unended !== undefined)
      c.log.append({
        kind: "end",
        submissionId: unended,
        outcome: "failed",
        error: "the Harness restarted while this turn ran; the conversation continues with the next turn",
      });
    this.#conversations.set(key, c);
    return c;
  }

  async #run(c: Conversation, body: TurnBody, submissionId: string, signal: AbortSignal): Promise<void> {
    let last = Date.now();
    const emit = (p: Progress) => {
      if (c.running?.submissionId !== submissionId) return;
      last = Date.now();
      c.log.append(p);
    };
    const every = this.opts.workingEveryMs ?? WORKING_EVERY_MS;
    const heartbeat = setInterval(() => {
      const quiet = Date.now() - last;
      if (quiet >= every)
        emit({ kind: "working", note: `still working (${Math.round(quiet / 1000)} s since the last event)` });
    }, every);
    heartbeat.unref();
    let end: Omit<Extract<StreamEvent, { kind: "end" }>, "offset" | "at">;
    try {
      const out = await this.opts.run({
        agent: c.agent,
        conversation: c.id,
        submissionId,
        body,
        history: readHistory(c.historyFile),
        emit,
        signal,
      });
      writeHistory(c.historyFile, out.history);
      end = signal.aborted
        ? { kind: "end", submissionId, outcome: "aborted" }
        : { kind: "end", submissionId, outcome: "completed", ...(out.message ? { message: out.message } : {}) };
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      end = signal.aborted
        ? { kind: "end", submissionId, outcome: "aborted" }
        : { kind: "end", submissionId, outcome: "failed", error: message };
      this.opts.log?.({ level: "warn", message: "a turn failed", agent: c.agent, conversation: c.id, error: message });
    }
    clearInterval(heartbeat);
    // Written before the turn lets go of the Workspace: a reader that sees idle has seen the end.
    c.running = undefined;
    this.#running = undefined;
    c.log.append(end);
  }
}

function readHistory(file: string): unknown[] {
  if (!existsSync(file)) return [];
  try {
    const parsed: unknown = JSON.parse(readFileSync(file, "utf8"));
    return Array.isArray(parsed) ? parsed : [];
  } catch {
    return [];
  }
}

/** Written whole, then renamed: a crash leaves the old history or the new, never half of one. */
function writeHistory(file: string, history: unknown[]): void {
  writeFileSync(`${file}.tmp`, JSON.stringify(history));
  renameSync(`${file}.tmp`, file);
}
