import { buildService, endpointOf } from "../../capabilities/sandbox/service";

const svc = buildService({ metadata: { name: "sb", namespace: "team-a", uid: "sbx-uid" } });

describe("buildService", () => {
  it("is a headless Service named after the Sandbox, in its namespace", () => {
    expect(svc.spec?.clusterIP).toBe("None");
    expect(svc.spec?.type).toBeUndefined();
    expect(svc.metadata?.name).toBe("sb");
    expect(svc.metadata?.namespace).toBe("team-a");
  });

  it("is owned by the Sandbox as its controller", () => {
    const [owner] = svc.metadata!.ownerReferences!;
    expect(svc.metadata?.ownerReferences).toHaveLength(1);
    expect(owner.kind).toBe("Sandbox");
    expect(owner.uid).toBe("sbx-uid");
    expect(owner.controller).toBe(true);
  });

  it("publishes the pod's address before it is Ready, as a virtual IP resolved before", () => {
    expect(svc.spec?.publishNotReadyAddresses).toBe(true);
  });

  it("selects the Sandbox's pod by the sandbox.jr2.dev/name label", () => {
    expect(svc.spec?.selector).toEqual({ "sandbox.jr2.dev/name": "sb" });
  });

  it("exposes port 8080 named http", () => {
    expect(svc.spec?.ports).toHaveLength(1);
    expect(svc.spec?.ports?.[0].name).toBe("http");
    expect(svc.spec?.ports?.[0].port).toBe(8080);
    expect(svc.spec?.ports?.[0].targetPort).toBe(8080);
  });
});

describe("endpointOf", () => {
  it("is http://<name>.<namespace>.svc:8080", () => {
    expect(endpointOf("sb", "team-a")).toBe("http://sb.team-a.svc:8080");
  });
});
