// What admission reads from a watch held in its own process instead of the API server (decisions
// 0067 and 0080): a lookup per review would put a round trip on every create's critical path, where
// a burst's creates go one after another. The watch is started once (by pepr.ts at start, or by the
// first review); a review waits for its first list at most FIRST_LIST_WAIT_MS, then is refused with
// a retry. A watch that gave up would leave admission judging by a stale set, so the process ends
// and its Deployment starts a new one, as the watching process does (capabilities/bindings.ts).
import { WatchEvent } from "kubernetes-fluent-client";
import { Log } from "pepr";

/** How long a review waits for the first list before it is refused with a retry. */
export const FIRST_LIST_WAIT_MS = 5_000;

/** What a watch started here must offer: kubernetes-fluent-client's Watcher. */
type Watcher = { events: { on(event: string, listener: (err: unknown) => void): unknown }; start(): Promise<unknown> };

export class WatchedLookup {
  #listed: Promise<void> | undefined;

  /**
   * @param what what is watched, as the logs and a refusal name it ("the opted-in namespaces")
   * @param watch starts nothing: builds the watcher whose callback keeps the caller's set
   */
  constructor(
    readonly what: string,
    private readonly watch: () => Watcher,
  ) {}

  /** Starts the watch (once); resolves when it has listed. */
  start(): Promise<void> {
    if (!this.#listed) {
      const listed = this.#start();
      this.#listed = listed;
      // A first list that failed (the API server away, a role not yet bound) is tried again by the next review.
      listed.catch(() => this.#listed === listed && (this.#listed = undefined));
    }
    return this.#listed;
  }

  async #start(): Promise<void> {
    const watcher = this.watch();
    watcher.events.on(WatchEvent.GIVE_UP, (err: unknown) => {
      Log.error({ err: String(err) }, `the watch of ${this.what} gave up: exiting so the process restarts`);
      process.exit(1);
    });
    await watcher.start();
  }

  /** Resolves once the first list is in, started if need be; throws after FIRST_LIST_WAIT_MS. */
  async listed(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${this.what} are not known yet (their watch has not listed)`)),
        FIRST_LIST_WAIT_MS,
      );
    });
    try {
      await Promise.race([this.start(), late]);
    } finally {
      clearTimeout(timer);
    }
  }
}
