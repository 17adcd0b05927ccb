// Masks held values in what goes back to the Harness (decision 0018): an upstream that echoes the
// key it was sent (an error quoting it, a header) must not hand it to the Agent. Each occurrence
// becomes `*`s of the same length, so a Content-Length stays true. The rule is pure (`maskStep`);
// `Masker` is the streaming wrapper, which holds back only a tail that could begin a held value.
import { Transform, type TransformCallback } from "node:stream";

const STAR = 0x2a;

/** Every occurrence of a secret in `data` overwritten with `*`, until none is left (in place). */
function maskAll(data: Buffer, secrets: readonly Buffer[]): void {
  // A secret holds a letter or digit (heldValueProblem), so each pass removes one for good and the
  // loop ends; a second pass catches a secret that masking another could have left whole.
  for (let found = true; found; ) {
    found = false;
    for (const s of secrets) {
      for (let at = data.indexOf(s); at >= 0; at = data.indexOf(s, at + 1)) {
        data.fill(STAR, at, at + s.length);
        found = true;
      }
    }
  }
}

/** The length of the longest tail of `data` that is a proper prefix of some secret. */
function pendingTail(data: Buffer, secrets: readonly Buffer[]): number {
  let longest = 0;
  for (const s of secrets) {
    // Only where the secret's first byte occurs in the last (length - 1) bytes can a tail begin it.
    for (
      let at = data.indexOf(s[0], Math.max(0, data.length - s.length + 1));
      at >= 0;
      at = data.indexOf(s[0], at + 1)
    ) {
      const k = data.length - at;
      if (k > longest && data.compare(s, 0, k, at) === 0) longest = k;
    }
  }
  return longest;
}

/**
 * One chunk through the mask: `carry` (held back last time) and `chunk` joined, masked, and split
 * into what may go now and what must wait for the next chunk (a tail that may begin a secret).
 * `chunk` itself may be overwritten (no copy is made when nothing was held back).
 */
export function maskStep(carry: Buffer, chunk: Buffer, secrets: readonly Buffer[]): { out: Buffer; carry: Buffer } {
  // The chunk is the Custodian's own (read from the upstream's socket), so it is masked in place.
  const data = carry.length ? Buffer.concat([carry, chunk]) : chunk;
  maskAll(data, secrets);
  const hold = pendingTail(data, secrets);
  return { out: data.subarray(0, data.length - hold), carry: data.subarray(data.length - hold) };
}

/** A whole text masked (a header value, a message). */
export function maskText(text: string, secrets: readonly Buffer[]): string {
  if (!secrets.length) return text;
  const data = Buffer.from(text, "latin1");
  maskAll(data, secrets);
  return data.toString("latin1");
}

/** The streaming mask: bytes in, the same bytes out with every held value masked. */
export class Masker extends Transform {
  #carry: Buffer = Buffer.alloc(0);
  readonly #secrets: readonly Buffer[];

  constructor(secrets: readonly Buffer[]) {
    super();
    this.#secrets = secrets;
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const { out, carry } = maskStep(this.#carry, chunk, this.#secrets);
    this.#carry = carry;
    done(null, out.length ? out : undefined);
  }

  override _flush(done: TransformCallback): void {
    // Shorter than any secret, so nothing in it can be one.
    done(null, this.#carry.length ? this.#carry : undefined);
  }
}
