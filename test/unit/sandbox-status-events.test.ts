import type { SandboxStatus } from "../../api/crd";
import { computeStatus, statusEvents, type Observed } from "../../capabilities/sandbox/status";
import { NODE, POD_UID, readyPod, sandboxOf, serviceOf, unreadyPod } from "./unit-fixtures";

const NOW = new Date("2026-03-01T12:00:00Z");
const next = (prev: SandboxStatus | undefined, o: Partial<Observed>) =>
  computeStatus({ sandbox: sandboxOf({}, prev), now: NOW, ...o });

describe("statusEvents", () => {
  const scheduled = next(undefined, { pod: unreadyPod(), service: serviceOf() });
  const ready = next(scheduled, { pod: readyPod(), service: serviceOf() });

  it("emits one Normal Scheduled event when the pod is placed", () => {
    const events = statusEvents(undefined, scheduled);
    expect(events).toHaveLength(1);
    expect(events[0].type).toBe("Normal");
    expect(events[0].reason).toBe("Scheduled");
    expect(events[0].message).toContain(NODE);
  });

  it("emits one Ready event, naming the node, when the pod is placed and Ready in one status", () => {
    const events = statusEvents(undefined, next(undefined, { pod: readyPod(), service: serviceOf() }));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: "Normal", reason: "Ready" });
    expect(events[0].message).toContain("http://sb.team-a.svc:8080");
    expect(events[0].message).toContain(NODE);
  });

  it("emits nothing for a repeat of the same status", () => {
    expect(statusEvents(scheduled, next(scheduled, { pod: unreadyPod(), service: serviceOf() }))).toEqual([]);
  });

  it("emits one Normal Ready event on Pending -> Ready", () => {
    const events = statusEvents(scheduled, ready);
    expect(events).toHaveLength(1);
    expect(events[0].type).toBe("Normal");
    expect(events[0].reason).toBe("Ready");
    expect(events[0].message).toContain("http://sb.team-a.svc:8080");
  });

  it("emits one Warning Lost event when the Sandbox becomes Lost", () => {
    const lost = next(ready, { loss: { reason: "PodDeleted", message: `its pod (uid ${POD_UID}) was deleted` } });
    const events = statusEvents(ready, lost);
    expect(events).toHaveLength(1);
    expect(events[0].type).toBe("Warning");
    expect(events[0].reason).toBe("Lost");
    expect(events[0].message).toContain("PodDeleted");
  });

  it("emits a Warning QuotaExceeded event when the pod create is refused for quota", () => {
    const message = 'pods "sb" is forbidden: exceeded quota: compute';
    const refused = next(undefined, { refusal: { reason: "QuotaExceeded", message } });
    const events = statusEvents(undefined, refused);
    expect(events).toHaveLength(1);
    expect(events[0].type).toBe("Warning");
    expect(events[0].reason).toBe("QuotaExceeded");
    expect(events[0].message).toBe(message);
  });
});
