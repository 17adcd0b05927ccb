// At most once (decision 0071): every order's id is remembered for the pod's life
// in the scratch emptyDir, which outlives a restart of this container. The record is written,
// state `running` with a digest of the order, BEFORE anything runs, and replaced by the answer
// after (write then rename, so a reader sees one or the other). An id already known answers its
// record and runs nothing; a record still `running` at start means this Effector died mid-run:
// it settles `unknown` (interrupted) and never runs again, unless its order is idempotent.
// Orders run one at a time, in arrival order.
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { EffectorAnswer, EffectorOrder } from "../api/effector-wire";

export const MEMORY_DIR = ".jr2-effects";
/** Ids kept at most: a workspace's ledger holds 256 Effects (EFFECT_LIMITS.ledgerEffects), and a pod
 * serves one workspace; far beyond that is a caller gone wrong, refused rather than forgotten. */
export const MAX_RECORDS = 10_000;

export type EffectRecord = {
  id: string;
  kind: string;
  /** sha256 of the order's canonical JSON: the same id with another order is refused. */
  digest: string;
  started: number;
  answer: EffectorAnswer;
};

/** JSON with object keys sorted, so an order's digest does not depend on its key order. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

/** The digest covers what runs, not the `idempotent` flag (which only says whether it may run again). */
export const orderDigest = (order: EffectorOrder) =>
  createHash("sha256")
    .update(canonicalJson({ id: order.id, effect: order.effect }))
    .digest("hex");

export type Submitted = { status: 200; answer: EffectorAnswer } | { status: 409 | 503; error: string; message: string };

export type Runner = (order: EffectorOrder) => Promise<Omit<EffectorAnswer, "id" | "replayed">>;

export class EffectMemory {
  readonly dir: string;
  readonly #records = new Map<string, EffectRecord>();
  readonly #running = new Map<string, Promise<EffectorAnswer>>();
  #tail: Promise<unknown> = Promise.resolve();

  constructor(
    scratch: string,
    readonly max = MAX_RECORDS,
    readonly onSettled: (r: EffectRecord, ms: number) => void = () => undefined,
  ) {
    this.dir = join(scratch, MEMORY_DIR);
  }

  /** Reads every record; one still `running` was interrupted by this container's end: `unknown`. */
  open(): { interrupted: string[] } {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const interrupted: string[] = [];
    for (const name of readdirSync(this.dir)) {
      if (!name.endsWith(".json")) {
        // A write that never got renamed: the record it would have replaced is still there.
        if (name.endsWith(".tmp")) rmSync(join(this.dir, name), { force: true });
        continue;
      }
      let rec: EffectRecord;
      try {
        rec = JSON.parse(readFileSync(join(this.dir, name), "utf8")) as EffectRecord;
      } catch {
        continue; // Unreadable: renamed whole or not at all, so only a hand could make one.
      }
      if (rec?.answer?.id !== name.slice(0, -".json".length)) continue;
      if (rec.answer.state === "running") {
        rec.answer = {
          id: rec.id,
          state: "unknown",
          replayed: false,
          error: {
            code: "interrupted",
            message:
              "the Effector ended while this Effect ran: whether it took effect is unknown, so it is not run again",
          },
        };
        this.#write(rec);
        interrupted.push(rec.id);
      }
      this.#records.set(rec.id, rec);
    }
    return { interrupted };
  }

  #write(rec: EffectRecord) {
    const file = join(this.dir, `${rec.id}.json`);
    writeFileSync(`${file}.tmp`, JSON.stringify(rec), { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
  }

  /** What is known of `id`, running nothing. */
  get(id: string): EffectorAnswer | undefined {
    return this.#records.get(id)?.answer;
  }

  get size() {
    return this.#records.size;
  }

  /** Runs `order` once: a known id answers its record (waiting for it while it runs here). */
  async submit(order: EffectorOrder, run: Runner): Promise<Submitted> {
    const digest = orderDigest(order);
    const known = this.#records.get(order.id);
    if (known && known.digest !== digest)
      return {
        status: 409,
        error: "id_reused",
        message: `id ${order.id} was used for another Effect: give each Effect its own id`,
      };
    const again = known && known.answer.state === "unknown" && order.idempotent;
    if (known && !again) {
      const inFlight = this.#running.get(order.id);
      const answer = inFlight ? await inFlight : known.answer;
      return { status: 200, answer: { ...answer, replayed: true } };
    }
    if (!known && this.#records.size >= this.max)
      return {
        status: 503,
        error: "memory_full",
        message: `this Effector already remembers ${this.max} Effects, its pod's most: start a new workspace`,
      };
    const rec: EffectRecord = {
      id: order.id,
      kind: order.effect.kind,
      digest,
      started: Date.now(),
      answer: { id: order.id, state: "running", replayed: false },
    };
    // Recorded before it runs: an Effector that dies from here on leaves `running`, read as unknown.
    this.#write(rec);
    this.#records.set(rec.id, rec);
    const done = this.#queue(async () => {
      const t0 = Date.now();
      let out: Omit<EffectorAnswer, "id" | "replayed">;
      try {
        out = await run(order);
      } catch (err) {
        out = { state: "failed", error: { code: "effector_error", message: (err as Error).message ?? String(err) } };
      }
      rec.answer = { id: rec.id, replayed: false, ...out };
      try {
        this.#write(rec);
      } catch {
        // The answer is still given; a later restart would read `running` as unknown, which is true enough.
      }
      this.onSettled(rec, Date.now() - t0);
      return rec.answer;
    });
    this.#running.set(order.id, done);
    try {
      return { status: 200, answer: await done };
    } finally {
      this.#running.delete(order.id);
    }
  }

  #queue<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.#tail.then(fn, fn);
    this.#tail = p.catch(() => undefined);
    return p;
  }
}
