// Masks held values in what goes back to the Harness (decision 0018): an upstream that echoes the
// key it was sent (an error quoting it, a header) must not hand it to the Agent. Each occurrence
// becomes `*`s of the same length, so a Content-Length stays true. The rule is pure (`maskStep`);
// `maskInto` streams it, holding back only a tail that could begin a held value.
import type { Readable, Writable } from "node:stream";

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

const latin1 = new WeakMap<Buffer, string>();
const latin1Of = (secret: Buffer): string => {
  let text = latin1.get(secret);
  if (text === undefined) latin1.set(secret, (text = secret.toString("latin1")));
  return text;
};

/** A whole text masked (a header value, a message). */
export function maskText(text: string, secrets: readonly Buffer[]): string {
  // Most texts (an answer's every header) hold none: found so without a Buffer made of each.
  if (!secrets.some((s) => text.includes(latin1Of(s)))) return text;
  const data = Buffer.from(text, "latin1");
  maskAll(data, secrets);
  return data.toString("latin1");
}

/**
 * Pipes `from` into `to` with every held value masked, with backpressure, and ends `to` when `from`
 * ends; errors and teardown are the caller's. The mask is applied on the way into `to` rather than
 * by a Transform stream of its own, which cost about a tenth of the Custodian's CPU per small
 * answer (docs/decisions/0044-the-custodian-starts-small.md).
 */
export function maskInto(from: Readable, to: Writable, secrets: readonly Buffer[]): void {
  let carry = Buffer.alloc(0);
  let waiting = false;
  const resume = () => {
    waiting = false;
    from.resume();
  };
  from.on("data", (chunk: Buffer) => {
    const step = maskStep(carry, chunk, secrets);
    carry = step.carry;
    if (step.out.length && !to.write(step.out) && !waiting) {
      waiting = true;
      from.pause();
      to.once("drain", resume);
    }
  });
  // What is held back is shorter than any secret, so nothing in it can be one.
  from.on("end", () => (carry.length ? to.end(carry) : to.end()));
}
