import type { SandboxStatus } from "../../api/crd";
import { computeStatus, statusEvents, type Observed } from "../../capabilities/sandbox/status";
import { NODE, POD_UID, podOf, readyPod, sandboxOf, serviceOf, unreadyPod } from "./unit-fixtures";

const NOW = new Date("2026-03-01T12:00:00Z");
const next = (prev: SandboxStatus | undefined, o: Partial<Observed>) =>
  computeStatus({ sandbox: sandboxOf({}, prev), now: NOW, ...o });

describe("statusEvents", () => {
  const scheduled = next(undefined, { pod: unreadyPod(), service: serviceOf() });
  const ready = next(scheduled, { pod: readyPod(), service: serviceOf() });

  // Placed and Ready are in the status (conditions, node, endpoint, each with its time): no Normal
  // Event repeats them (decision 0043).
  it("emits nothing when the pod is placed", () => {
    expect(statusEvents(undefined, scheduled)).toEqual([]);
  });

  it("emits nothing when the pod is placed and Ready in one status", () => {
    expect(statusEvents(undefined, next(undefined, { pod: readyPod(), service: serviceOf() }))).toEqual([]);
  });

  it("emits nothing for a repeat of the same status", () => {
    expect(statusEvents(scheduled, next(scheduled, { pod: unreadyPod(), service: serviceOf() }))).toEqual([]);
  });

  it("emits nothing on Pending -> Ready, which the status says with its endpoint and node", () => {
    expect(statusEvents(scheduled, ready)).toEqual([]);
    expect(ready.phase).toBe("Ready");
    expect(ready.endpoint).toBe("http://sb.team-a.svc:8080");
    expect(ready.nodeName).toBe(NODE);
    expect(ready.conditions?.find((c) => c.type === "Scheduled")?.message).toContain(NODE);
  });

  it("emits one Warning when the scheduler cannot place the pod, and none for its repeat", () => {
    const unschedulable = podOf({
      conditions: [
        { type: "PodScheduled", status: "False", reason: "Unschedulable", message: "0/3 nodes are available" },
      ],
    });
    const first = next(undefined, { pod: unschedulable, service: serviceOf() });
    expect(statusEvents(undefined, first)).toEqual([
      { type: "Warning", reason: "Unschedulable", message: "0/3 nodes are available" },
    ]);
    expect(statusEvents(first, next(first, { pod: unschedulable, service: serviceOf() }))).toEqual([]);
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
