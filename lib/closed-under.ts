// A connection the other side closed as it was used, and the calls sent again for it.

/** A connection the other side closed as it was used (not a refusal, not a timeout). */
export function closedUnder(err: unknown): boolean {
  const code = (err as { code?: string } | undefined)?.code;
  return code === "ECONNRESET" || code === "EPIPE" || code === "UND_ERR_SOCKET";
}

/** How many times a call whose connection closed under it is sent in all. */
export const CLOSED_ATTEMPTS = 3;

/**
 * A call sent again when its connection closed under it (a burst of creates on one connection to
 * the API server has met it), at most CLOSED_ATTEMPTS in all. Only for calls that may land twice:
 * a create by a name of its own that keeps what an earlier attempt made, an apply, a read.
 */
export async function againIfClosed<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (attempt >= CLOSED_ATTEMPTS || !closedUnder(err)) throw err;
    }
  }
}
