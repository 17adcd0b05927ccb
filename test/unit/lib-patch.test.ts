import { deepEqual, mergePatch, statusMergePatch } from "../../lib/patch";

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** RFC 7386 MergePatch(target, patch), written out here so the patch is checked by its meaning. */
function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = applyMergePatch(out[k], v);
  }
  return out;
}

describe("mergePatch", () => {
  it("is undefined when the two are equal", () => {
    expect(mergePatch({ a: 1, b: { c: [1, 2] } }, { a: 1, b: { c: [1, 2] } })).toBeUndefined();
  });

  it("carries a changed scalar", () => {
    expect(mergePatch({ phase: "Pending", podName: "sb" }, { phase: "Ready", podName: "sb" })).toEqual({
      phase: "Ready",
    });
  });

  it("sends a removed key as null", () => {
    expect(mergePatch({ phase: "Ready", endpoint: "http://x" }, { phase: "Ready" })).toEqual({ endpoint: null });
  });

  it("carries only the changed keys of a nested object", () => {
    const from = { harness: { restartCount: 1, lastTerminated: { exitCode: 1, reason: "Error" } } };
    const to = { harness: { restartCount: 2, lastTerminated: { exitCode: 1, reason: "Error" } } };
    expect(mergePatch(from, to)).toEqual({ harness: { restartCount: 2 } });
  });

  it("replaces an array whole", () => {
    expect(mergePatch({ list: [1, 2, 3] }, { list: [1, 2, 4] })).toEqual({ list: [1, 2, 4] });
  });

  it.each([
    ["a changed scalar", { a: 1, b: 2 }, { a: 1, b: 3 }],
    ["an added key", { a: 1 }, { a: 1, b: { c: "x" } }],
    ["a removed key", { a: 1, b: { c: "x" } }, { a: 1 }],
    ["a nested change and removal", { s: { x: 1, y: 2, z: { w: 1 } } }, { s: { x: 1, z: { w: 2, v: 3 } } }],
    ["an array of objects", { c: [{ type: "Ready", status: "False" }] }, { c: [{ type: "Ready", status: "True" }] }],
    ["an object replaced by a scalar", { a: { b: 1 } }, { a: "flat" }],
    ["a scalar replaced by an object", { a: "flat" }, { a: { b: 1 } }],
    ["an emptied object", { a: { b: 1, c: 2 } }, { a: {} }],
  ])("applied to `from`, yields `to` (%s)", (_case, from, to) => {
    expect(applyMergePatch(from, mergePatch(from, to))).toEqual(to);
  });
});

describe("statusMergePatch", () => {
  it("treats an absent status as empty", () => {
    expect(statusMergePatch(undefined, { phase: "Pending" })).toEqual({ phase: "Pending" });
  });

  it("is undefined when the status is unchanged", () => {
    expect(statusMergePatch({ phase: "Ready" }, { phase: "Ready" })).toBeUndefined();
  });
});

describe("deepEqual", () => {
  it("is true for structurally equal values, whatever the key order", () => {
    expect(deepEqual({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 })).toBe(true);
  });

  it("is false for a changed leaf, a longer array or a missing key", () => {
    expect(deepEqual({ a: { b: 1 } }, { a: { b: 2 } })).toBe(false);
    expect(deepEqual([1, 2], [1, 2, 3])).toBe(false);
    expect(deepEqual({ a: 1, b: 2 }, { a: 1 })).toBe(false);
  });

  it("treats a key set to undefined as absent", () => {
    expect(deepEqual({ a: 1, b: undefined }, { a: 1 })).toBe(true);
  });
});

// Found by admission's property 6 (an unchanged spec is never judged again): a NaN in a hostile
// spec made the spec look changed on its own re-apply, so the test failed only on seeds that drew one.
describe("deepEqual and NaN", () => {
  it("counts NaN equal to itself, at any depth", () => {
    expect(deepEqual(NaN, NaN)).toBe(true);
    expect(deepEqual({ a: [1, NaN] }, { a: [1, NaN] })).toBe(true);
    expect(mergePatch({ idleTimeout: NaN }, { idleTimeout: NaN })).toBeUndefined();
  });

  it("still tells NaN from a number", () => {
    expect(deepEqual(NaN, 0)).toBe(false);
  });
});
