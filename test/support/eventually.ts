// Waiting on a condition itself, with a deadline: a test never sleeps for a guessed time instead.

/** Polls `check` every `everyMs` until it answers something other than undefined, and answers that;
 * past `timeoutMs`, fails naming `what` and the last error `check` threw, if any. */
export async function eventually<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 10_000,
  everyMs = 10,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline)
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}` +
          (lastErr ? `; last error: ${(lastErr as Error).message ?? String(lastErr)}` : ""),
      );
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
