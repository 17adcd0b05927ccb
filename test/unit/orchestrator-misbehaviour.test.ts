// How a Harness that broke a bound is reported (orchestrator/agents/misbehaviour.ts, decision 0042):
// every time counted and logged with its workspace; a Warning Event on its Sandbox at most once a
// minute per workspace and reason, so a Harness misbehaving on every read costs one write a minute.
import { misbehaviourReporter } from "../../orchestrator/agents/misbehaviour";
import type { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";

describe("the misbehaviour report", () => {
  it("counts and logs each, and writes one Event a minute per workspace and reason, naming the Sandbox", async () => {
    let now = 1_000_000;
    const counted: string[] = [];
    const logged: Array<Record<string, unknown>> = [];
    const events: Array<Record<string, unknown>> = [];
    const report = misbehaviourReporter({
      namespace: "ns",
      watch: { get: (name: string) => ({ metadata: { name, uid: `uid-${name}` } }) } as unknown as SandboxWatch,
      count: (r) => counted.push(r),
      log: (e) => logged.push(e),
      now: () => now,
      writeEvent: async (_ns, e) => events.push(e),
    });
    report("ws-1", "too_large", "workspace ws-1's Harness answered more than 4194304 bytes");
    report("ws-1", "too_large", "again");
    report("ws-1", "too_slow", "slow");
    report("ws-2", "too_large", "other");
    now += 60_001;
    report("ws-1", "too_large", "a minute later");
    expect(counted).toEqual(["too_large", "too_large", "too_slow", "too_large", "too_large"]);
    expect(logged.map((l) => [l.workspace, l.reason])).toHaveLength(5);
    expect(events.map((e) => [(e.involvedObject as { name: string }).name, e.reason, e.message])).toEqual([
      ["ws-1", "HarnessMisbehaved", "workspace ws-1's Harness answered more than 4194304 bytes"],
      ["ws-1", "HarnessMisbehaved", "slow"],
      ["ws-2", "HarnessMisbehaved", "other"],
      ["ws-1", "HarnessMisbehaved", "a minute later"],
    ]);
    expect(events[0]).toMatchObject({
      type: "Warning",
      involvedObject: { kind: "Sandbox", name: "ws-1", namespace: "ns", uid: "uid-ws-1" },
    });
  });
});
