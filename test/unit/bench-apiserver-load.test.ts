// The benchmarks' reading of the API server's own counters (bench/apiserver-load.ts).
import { describeLoad, parseLoad } from "../../bench/apiserver-load";

const text = (n: number) =>
  [
    "# HELP apiserver_request_total Counter of apiserver requests",
    `apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} ${10 * n}`,
    `apiserver_request_total{code="409",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} ${n}`,
    `apiserver_request_duration_seconds_sum{component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} ${0.5 * n}`,
    `apiserver_request_total{code="200",component="apiserver",group="core.jr2.dev",resource="sandboxes",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} ${2 * n}`,
    `apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="WATCH",version="v1"} ${99 * n}`,
    `apiserver_request_total{code="200",component="",group="",resource="",scope="",subresource="/healthz",verb="GET",version=""} ${n}`,
    `apiserver_watch_events_total{group="",resource="pods",version="v1"} ${7 * n}`,
    `apiserver_admission_webhook_admission_duration_seconds_count{name="v.pepr.dev",operation="CREATE",rejected="false",type="validating"} ${3 * n}`,
    `apiserver_admission_webhook_admission_duration_seconds_sum{name="v.pepr.dev",operation="CREATE",rejected="false",type="validating"} ${0.03 * n}`,
    `apiserver_mutating_admission_policy_check_duration_seconds_count{enforcement_action="allow",error_type="no_error",policy="jr2-sandbox-defaults",policy_binding="b",state="active"} ${n}`,
    `apiserver_mutating_admission_policy_check_duration_seconds_sum{enforcement_action="allow",error_type="no_error",policy="jr2-sandbox-defaults",policy_binding="b",state="active"} ${0.001 * n}`,
  ].join("\n");

describe("parseLoad", () => {
  it("sums requests by verb and resource (every code), skips watches and unnamed paths, and reads watch events, webhook calls and policy checks", () => {
    const load = parseLoad(text(1));
    expect(load.get("POST pods")).toEqual({ count: 11, seconds: 0.5 });
    expect(load.get("PATCH sandboxes/status")).toEqual({ count: 2, seconds: 0 });
    expect(load.has("WATCH pods")).toBe(false);
    expect([...load.keys()].some((k) => k.includes("healthz"))).toBe(false);
    expect(load.get("watch pods")).toEqual({ count: 7, seconds: 0 });
    expect(load.get("webhook validating")).toEqual({ count: 3, seconds: 0.03 });
    expect(load.get("policy jr2-sandbox-defaults")).toEqual({ count: 1, seconds: 0.001 });
  });

  it("describes the difference of two readings per unit of work, busiest first", () => {
    const lines = describeLoad(parseLoad(text(1)), parseLoad(text(3)), 2);
    expect(lines[0]).toBe("POST pods: 11.00 (500.0 ms)");
    expect(lines).toContain("watch pods: 7.00");
    expect(lines).toContain("webhook validating: 3.00 (30.0 ms)");
  });
});
