// Content read again every `pollMs` and handed on only when it changed (decision 0058): a Secret
// mounted as a volume changes by the kubelet's `..data` swap, which a watch on the file loses.
// One read at a time (a poll under way is joined); the same content, good or bad, is handled once.
import { createHash } from "node:crypto";

export type PolledOptions<T> = {
  /** Reads the content now; undefined: skip this poll (a read that straddled a swap). */
  read: () => Promise<T | undefined>;
  /** The bytes that say whether the content changed. */
  bytes: (content: T) => Array<string | Buffer>;
  /** Called with each new content. */
  changed: (content: T) => void;
  /** What was read at start: the content in use until it changes. */
  initial: T;
  pollMs: number;
};

export class Polled<T> {
  #digest: string;
  #reading: Promise<void> | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: PolledOptions<T>) {
    this.#digest = this.#digestOf(opts.initial);
    this.#timer = setInterval(() => void this.poll(), opts.pollMs);
    // A timer must not keep a process alive that is otherwise done (a test, a stopping Orchestrator).
    this.#timer.unref();
  }

  /** One comparison of the content with what was read last; a poll already under way is joined. */
  poll(): Promise<void> {
    this.#reading ??= this.#read().finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #read(): Promise<void> {
    const content = await this.opts.read();
    // Closed while reading: nothing more is handed on.
    if (content === undefined || !this.#timer) return;
    const digest = this.#digestOf(content);
    if (digest === this.#digest) return;
    this.#digest = digest;
    this.opts.changed(content);
  }

  #digestOf(content: T): string {
    const h = createHash("sha256");
    for (const b of this.opts.bytes(content)) h.update(b).update("\0");
    return h.digest("hex");
  }
}
