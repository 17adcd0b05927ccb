// The node caches' root, read once for the operator and the cache agents (api/env.ts cacheRootFrom).
import { cacheRootFrom } from "../../api/env";
import { DEFAULT_CACHE_ROOT } from "../../api/wire";

describe("cacheRootFrom", () => {
  it("takes JR2_CACHE_ROOT, and the default when it is unset or empty (both sides alike)", () => {
    expect(cacheRootFrom({ JR2_CACHE_ROOT: "/data/repos" })).toBe("/data/repos");
    expect(cacheRootFrom({})).toBe(DEFAULT_CACHE_ROOT);
    expect(cacheRootFrom({ JR2_CACHE_ROOT: "" })).toBe(DEFAULT_CACHE_ROOT);
  });
});
