// At most n calls at once, the rest in the order they came; a failure frees its turn (lib/at-most.ts).
import { AtMost } from "../../lib/at-most";

const later = () => {
  let resolve!: () => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
};

describe("AtMost", () => {
  it("runs at most n at once, and the waiting ones in the order they came", async () => {
    const gate = new AtMost(2);
    const started: number[] = [];
    const holds = Array.from({ length: 5 }, later);
    const runs = holds.map((h, i) =>
      gate.run(async () => {
        started.push(i);
        await h.promise;
        return i;
      }),
    );
    await Promise.resolve();
    expect(started).toEqual([0, 1]);
    expect(gate.queued).toBe(3);
    holds[1].resolve();
    await runs[1];
    await Promise.resolve();
    expect(started).toEqual([0, 1, 2]);
    // A caller arriving now waits behind those already waiting.
    const late = gate.run(async () => (started.push(9), 9));
    holds[0].resolve();
    holds[2].resolve();
    await Promise.all([runs[0], runs[2]]);
    for (const h of holds.slice(3)) h.resolve();
    expect(await Promise.all([...runs, late])).toEqual([0, 1, 2, 3, 4, 9]);
    expect(started).toEqual([0, 1, 2, 3, 4, 9]);
    expect(gate.queued).toBe(0);
  });

  it("frees the turn of a call that failed, and gives the failure to its caller", async () => {
    const gate = new AtMost(1);
    const failing = gate.run(() => Promise.reject(new Error("refused")));
    const next = gate.run(async () => "ran");
    await expect(failing).rejects.toThrow("refused");
    await expect(next).resolves.toBe("ran");
  });

  it("refuses a bound that is no whole number above 0", () => {
    for (const n of [0, -1, 1.5, Number.NaN]) expect(() => new AtMost(n)).toThrow(/not a whole number above 0/);
  });
});
