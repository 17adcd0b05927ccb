// Where the Orchestrator's Sandboxes find the egress point (orchestrator/workspaces/installation.ts,
// decision 0051): its Service in the Orchestrator's namespace by default, a url the installation
// names (held to the Custodian's own rule for egress.via), or none.
import { egressSettingsFrom } from "../../orchestrator/workspaces/installation";

describe("the egress point's settings", () => {
  it("default to its Service in the Orchestrator's namespace, proxy and admin", () => {
    expect(egressSettingsFrom({}, "jr2-system")).toEqual({
      proxyUrl: "http://jr2-egress.jr2-system.svc:3128",
      adminUrl: "http://jr2-egress.jr2-system.svc:9091",
      // Each replica keeps its own log: the Orchestrator reads every one its EndpointSlices list (decision 0076).
      replicas: { namespace: "jr2-system", service: "jr2-egress", port: 9091 },
    });
  });

  it("read every replica of the installation's Service when its url names it, one url otherwise (decision 0076)", () => {
    expect(egressSettingsFrom({ JR2_EGRESS_URL: "http://jr2-egress.jr2-system.svc:3128" }, undefined)).toEqual({
      proxyUrl: "http://jr2-egress.jr2-system.svc:3128",
      adminUrl: "http://jr2-egress.jr2-system.svc:9091",
      replicas: { namespace: "jr2-system", service: "jr2-egress", port: 9091 },
    });
    expect(
      egressSettingsFrom(
        { JR2_EGRESS_URL: "http://jr2-egress.jr2-system.svc:3128", JR2_EGRESS_ADMIN_URL: "http://admin:1" },
        undefined,
      )?.replicas,
    ).toBeUndefined();
    expect(egressSettingsFrom({ JR2_EGRESS_URL: "http://egress.example:3128" }, "ns")!.replicas).toBeUndefined();
  });

  it("are none outside a cluster unless named, and none when named off", () => {
    expect(egressSettingsFrom({}, undefined)).toBeUndefined();
    expect(egressSettingsFrom({ JR2_EGRESS_URL: "off" }, "jr2-system")).toBeUndefined();
    expect(egressSettingsFrom({ JR2_EGRESS_URL: "http://10.0.0.9:3128" }, undefined)).toEqual({
      proxyUrl: "http://10.0.0.9:3128",
      adminUrl: "http://10.0.0.9:9091",
    });
    expect(
      egressSettingsFrom(
        { JR2_EGRESS_URL: "http://egress.example:3128", JR2_EGRESS_ADMIN_URL: "http://admin:1/" },
        "ns",
      ),
    ).toEqual({ proxyUrl: "http://egress.example:3128", adminUrl: "http://admin:1" });
  });

  it.each([
    ["https://egress.example:3128", /JR2_EGRESS_URL: .* must be http/],
    ["http://egress.example:3128/path", /JR2_EGRESS_URL: .* a host and a port and nothing more/],
    ["http://user:pw@egress.example:3128", /JR2_EGRESS_URL: .* must not carry a credential/],
    ["egress.example", /JR2_EGRESS_URL: .* is not a url/],
  ])("refuse %s, naming the variable and the fix", (url, message) => {
    expect(() => egressSettingsFrom({ JR2_EGRESS_URL: url }, "ns")).toThrow(message);
    expect(() => egressSettingsFrom({ JR2_EGRESS_URL: url }, "ns")).toThrow(/or write off/);
    // A credential in it is never repeated.
    expect(() => egressSettingsFrom({ JR2_EGRESS_URL: url }, "ns")).not.toThrow(/pw@/);
  });
});
