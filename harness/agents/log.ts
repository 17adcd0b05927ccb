// A conversation's stream (decision 0025): every event of its turns at an
// offset, read from any offset by a long-poll that answers as soon as there is something past it
// or after its hold. Kept on the conversations volume as JSON lines, so a Harness restarted inside
// a living pod rebuilds it, and a reader that reconnects from an old offset gets what followed.
// Progress is lossy by design (a crash may lose the last lines of progress); an end is written
// before it is announced, so it is never lost once a reader has seen it.
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { StreamEvent, type StreamPage } from "../../api/agent-protocol";

type Unstamped = StreamEvent extends infer E ? (E extends StreamEvent ? Omit<E, "offset" | "at"> : never) : never;

export class ConversationLog {
  readonly #events: StreamEvent[] = [];
  readonly #waiters = new Set<() => void>();

  /** `file`: the JSON-lines file under the conversations directory (read back when it exists). */
  constructor(readonly file: string) {
    if (existsSync(file)) {
      const text = readFileSync(file, "utf8");
      // A torn last line ends here, so the next event starts a line of its own.
      if (text && !text.endsWith("\n")) appendFileSync(file, "\n");
      for (const line of text.split("\n")) {
        if (!line.trim()) continue;
        const parsed = StreamEvent.safeParse(safeJson(line));
        // A torn last line (the process died mid-write) is dropped; every earlier one is whole.
        if (parsed.success && parsed.data.offset === this.#events.length) this.#events.push(parsed.data);
      }
    } else mkdirSync(dirname(file), { recursive: true });
  }

  get next(): number {
    return this.#events.length;
  }

  /** The last event, if any. */
  get last(): StreamEvent | undefined {
    return this.#events[this.#events.length - 1];
  }

  /** Appends an event at the next offset, writes it, then wakes the readers. */
  append(event: Unstamped): StreamEvent {
    const stamped = { ...event, offset: this.#events.length, at: new Date().toISOString() } as StreamEvent;
    appendFileSync(this.file, `${JSON.stringify(stamped)}\n`);
    this.#events.push(stamped);
    for (const wake of [...this.#waiters]) wake();
    return stamped;
  }

  /** The events from `offset`, at once when there are some, else after up to `holdMs` (or the signal). */
  async read(
    offset: number,
    holdMs: number,
    idle: () => boolean,
    signal?: AbortSignal,
    limit = Number.MAX_SAFE_INTEGER,
  ): Promise<StreamPage> {
    const from = Math.max(0, Math.min(offset, this.#events.length));
    if (from === this.#events.length && holdMs > 0 && !idle() && !signal?.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.#waiters.delete(done);
          signal?.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, holdMs);
        this.#waiters.add(done);
        signal?.addEventListener("abort", done, { once: true });
      });
    }
    const events = this.#events.slice(from, from + limit);
    return { events, next: from + events.length, idle: idle() && from + events.length === this.#events.length };
  }

  /** The submission's end, when it has one. */
  endOf(submissionId: string): Extract<StreamEvent, { kind: "end" }> | undefined {
    for (let i = this.#events.length - 1; i >= 0; i--) {
      const e = this.#events[i]!;
      if (e.kind === "end" && e.submissionId === submissionId) return e;
    }
    return undefined;
  }

  /** The submission whose turn began and has not ended (a Harness that stopped while it ran). */
  get unended(): string | undefined {
    for (let i = this.#events.length - 1; i >= 0; i--) {
      const e = this.#events[i]!;
      if (e.kind === "end") return undefined;
      if (e.kind === "turn") return e.submissionId;
    }
    return undefined;
  }

  /** Where the submission's events begin, when it was admitted here. */
  startOf(submissionId: string): number | undefined {
    return this.#events.find((e) => e.kind === "turn" && e.submissionId === submissionId)?.offset;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
