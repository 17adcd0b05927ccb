// At most n calls running at once, the rest waiting in the order they came (decision 0080). Written
// here: the one maintained library for it (p-limit) is ESM-only in its current majors, which the
// project's CommonJS runtime and test transform do not load, and its older CommonJS major is no
// longer maintained; this is the whole of what is needed.
export class AtMost {
  #running = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(readonly n: number) {
    if (!(Number.isInteger(n) && n > 0)) throw new Error(`AtMost: ${n} is not a whole number above 0`);
  }

  /** Calls waiting for their turn. */
  get queued(): number {
    return this.#waiting.length;
  }

  /** Runs `call` once fewer than n run; its result or failure is the caller's, and frees its turn. */
  async run<T>(call: () => Promise<T>): Promise<T> {
    if (this.#running >= this.n) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#running++;
    try {
      return await call();
    } finally {
      // The turn passes straight to the next caller, so a late caller never overtakes one waiting.
      const next = this.#waiting.shift();
      if (next) next();
      else this.#running--;
    }
  }
}
