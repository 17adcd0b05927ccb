// The egress ceiling (decision 0076): rules no workspace's own rule may pass, judged rule by rule
// (api/egress-point.ts ruleWithin), refused by the Orchestrator at create and PUT naming the entry
// (orchestrator/workspaces/pod-config.ts egressWithinCeiling), and never opened by the egress point
// (egress/index.ts compileList). And the log of every replica merged as one (mergeEgressLogs).
import {
  ceilingOf,
  ceilingProblems,
  mergeEgressLogs,
  parseEgressRule,
  ruleWithin,
  type EgressLogEntry,
  type EgressRule,
} from "../../api/egress-point";
import { compileList } from "../../egress/index";
import { egressWithinCeiling, parsePodConfig } from "../../orchestrator/workspaces/pod-config";

const rule = (text: string): EgressRule => {
  const p = parseEgressRule(text);
  if (!p.ok) throw new Error(p.message);
  return p.rule;
};

describe("ruleWithin", () => {
  it.each([
    // [rule, ceiling rule, within]
    ["api.example.com:443", "api.example.com:443", true],
    ["api.example.com:443", "api.example.com", true],
    ["api.example.com", "api.example.com:443", false],
    ["api.example.com:80", "api.example.com:443", false],
    ["API.Example.com.:443", "api.example.com:443", true],
    ["other.example.com:443", "api.example.com:443", false],
    ["api.example.com:443", "*.example.com:443", true],
    ["a.b.example.com", "*.example.com", true],
    ["example.com:443", "*.example.com:443", false],
    ["*.example.com:443", "*.example.com:443", true],
    ["*.example.com", "*.example.com:443", false],
    ["*.api.example.com:443", "*.example.com", true],
    ["*.example.com:443", "*.api.example.com", false],
    ["*.example.com", "api.example.com", false],
    ["notexample.com", "*.example.com", false],
    ["203.0.113.9:443", "203.0.113.9", true],
    ["203.0.113.9:443", "*.example.com", false],
    ["[2001:db8::1]:443", "[2001:db8:0::1]", true],
    ["example.com", "203.0.113.9", false],
  ])("%s within %s: %s", (r, c, within) => {
    expect(ruleWithin(rule(r), rule(c))).toBe(within);
  });
});

describe("the ceiling of a pod config", () => {
  it("is absent unless written; [] passes no workspace rule; a bad entry is named", () => {
    expect(ceilingOf({})).toBeUndefined();
    expect(ceilingOf({ egress: { allow: ["a.example"] } })).toBeUndefined();
    expect(ceilingOf({ egress: { ceiling: [] } })).toEqual([]);
    expect(ceilingOf({ egress: { ceiling: ["*.example.com:443"] } })!.map((r) => r.text)).toEqual([
      "*.example.com:443",
    ]);
    expect(() => ceilingOf({ egress: { ceiling: ["ok.example", "a*b.example"] } })).toThrow(/egress\.ceiling\[1\]/);
    expect(() => ceilingOf({ egress: { ceiling: "x" } })).toThrow(/egress\.ceiling: must be a list/);
    expect(ceilingProblems(["x.example"], [])[0]).toMatch(/egress\.allow\[0\].*ceiling \(no host at all\)/);
  });

  it("refuses a create's rule outside it, naming the field path and the fix, and passes one within", () => {
    const config = parsePodConfig(
      JSON.stringify({ egress: { ceiling: ["*.example.com:443", "pypi.org"] } }),
      "pod.yaml",
    );
    expect(config.egress.ceiling).toEqual(["*.example.com:443", "pypi.org"]);
    expect(egressWithinCeiling(["api.example.com:443", "pypi.org:443", "pypi.org"], config)).toEqual({ ok: true });
    const refused = egressWithinCeiling(["api.example.com:443", "evil.test:443", "api.example.com"], config);
    expect(refused.ok).toBe(false);
    const message = (refused as { message: string }).message;
    expect(message).toMatch(/^egress\.allow\[1\]: "evil\.test:443" is outside the installation's egress ceiling/);
    expect(message).toMatch(/egress\.allow\[2\]: "api\.example\.com" is outside/);
    expect(message).toMatch(/widen the pod config's egress\.ceiling/);
    expect(message).not.toMatch(/egress\.allow\[0\]/);
    // A PUT's body names its field `allow`.
    expect((egressWithinCeiling(["evil.test"], config, "allow") as { message: string }).message).toMatch(/^allow\[0\]/);
    // No ceiling: every rule passes.
    expect(egressWithinCeiling(["evil.test"], parsePodConfig("{}", "pod.yaml"))).toEqual({ ok: true });
    expect(() => parsePodConfig(JSON.stringify({ egress: { ceiling: ["*x.example"] } }), "pod.yaml")).toThrow(
      /egress\.ceiling/,
    );
  });

  it("the egress point opens none of a Sandbox's own rules outside it; base and remotes are the installation's", () => {
    const base = [rule("model.internal.example:8080")];
    const list = compileList(
      base,
      base,
      {
        metadata: { name: "a", namespace: "ns" },
        spec: {
          egress: { allow: ["api.example.com:443", "evil.test:443", "a*"] },
          repos: [{ url: "https://git.elsewhere.test/o/r.git" }],
        },
      },
      [rule("*.example.com:443")],
    );
    expect(list.own.map((r) => r.text)).toEqual(["api.example.com:443", "git.elsewhere.test:443"]);
    expect(list.base.map((r) => r.text)).toEqual(["model.internal.example:8080"]);
    expect(list.problems).toHaveLength(2);
    expect(list.problems[0]).toMatch(
      /^spec\.egress\.allow\[1\]: "evil\.test:443" is outside the installation's egress ceiling/,
    );
    expect(list.problems[1]).toMatch(/^spec\.egress\.allow\[2\]/);
  });
});

describe("mergeEgressLogs", () => {
  const e = (time: string, host: string): EgressLogEntry => ({
    time,
    host,
    port: 443,
    decision: "allowed",
    bytesOut: 1,
    bytesIn: 1,
    durationMs: 1,
  });
  it("merges every replica's log by time, oldest first, keeping the newest `max`", () => {
    const a = [e("2026-12-07T10:00:00.000Z", "a1"), e("2026-12-07T10:00:02.000Z", "a2")];
    const b = [e("2026-12-07T10:00:01.000Z", "b1"), e("2026-12-07T10:00:02.000Z", "b2")];
    expect(mergeEgressLogs([a, b]).map((x) => x.host)).toEqual(["a1", "b1", "a2", "b2"]);
    expect(mergeEgressLogs([a, b], 2).map((x) => x.host)).toEqual(["a2", "b2"]);
    expect(mergeEgressLogs([[], []])).toEqual([]);
  });
});
