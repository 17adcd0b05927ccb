import type { SandboxStatus } from "../../api/crd";
import { computeStatus, lossOf, type Observed } from "../../capabilities/sandbox/status";
import { NODE, POD_UID, conditionOf, podOf, readyPod, sandboxOf, serviceOf, unreadyPod } from "./unit-fixtures";

const T0 = new Date("2026-03-01T12:00:00.000Z");
const T1 = new Date("2026-03-01T12:05:00.000Z");
const status = (o: Partial<Observed> = {}): SandboxStatus => computeStatus({ sandbox: sandboxOf(), now: T0, ...o });

describe("computeStatus: phase and endpoint", () => {
  it("is Pending with no pod", () => {
    const s = status();
    expect(s.phase).toBe("Pending");
    expect(conditionOf(s, "Ready")?.status).toBe("False");
  });

  it("is Pending while the pod is not Ready", () => {
    const s = status({ pod: unreadyPod() });
    expect(s.phase).toBe("Pending");
    expect(conditionOf(s, "Ready")?.status).toBe("False");
    expect(conditionOf(s, "Ready")?.message).toBe("containers with unready status: [harness]");
  });

  it("is Ready when the pod's Ready condition is True", () => {
    const s = status({ pod: readyPod(), service: serviceOf() });
    expect(s.phase).toBe("Ready");
    expect(conditionOf(s, "Ready")?.status).toBe("True");
  });

  it("stays Pending with an endpoint while the pod is not Ready", () => {
    const s = status({ pod: unreadyPod(), service: serviceOf() });
    expect(s.endpoint).toBe("http://sb.team-a.svc:8080");
    expect(s.phase).toBe("Pending");
  });

  it("sets the endpoint when a Service is given, and not otherwise", () => {
    expect(status({ pod: readyPod(), service: serviceOf() }).endpoint).toBe("http://sb.team-a.svc:8080");
    expect(status({ pod: readyPod() })).not.toHaveProperty("endpoint");
  });

  it("is Terminating when the Sandbox has a deletionTimestamp", () => {
    const s = status({ sandbox: sandboxOf({ deletionTimestamp: "2026-03-01T11:00:00Z" }), pod: readyPod() });
    expect(s.phase).toBe("Terminating");
  });

  it("holds Ready False with the first ReadyGate's reason", () => {
    const gates = [{ reason: "RepoCloning", message: "repo x is being cloned on node-a" }];
    const s = status({ pod: readyPod(), service: serviceOf(), gates });
    expect(s.phase).toBe("Pending");
    expect(conditionOf(s, "Ready")?.status).toBe("False");
    expect(conditionOf(s, "Ready")?.reason).toBe("RepoCloning");
    expect(conditionOf(s, "Ready")?.message).toBe("repo x is being cloned on node-a");
  });
});

describe("computeStatus: the pod's identity", () => {
  it("reports podName, podUID, nodeName and the observed generation", () => {
    const s = status({ sandbox: sandboxOf({ generation: 4 }), pod: readyPod() });
    expect(s.podName).toBe("sb");
    expect(s.podUID).toBe(POD_UID);
    expect(s.nodeName).toBe(NODE);
    expect(s.observedGeneration).toBe(4);
  });
});

describe("computeStatus: Scheduled", () => {
  it("is True once the pod is placed, naming the node", () => {
    const c = conditionOf(status({ pod: unreadyPod() }), "Scheduled");
    expect(c?.status).toBe("True");
    expect(c?.message).toContain(NODE);
  });

  it("is False with the pod's reason and the scheduler's message while unschedulable", () => {
    const message = "0/3 nodes are available: 3 Insufficient memory.";
    const pod = podOf({ conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message }] });
    const c = conditionOf(status({ pod }), "Scheduled");
    expect(c?.status).toBe("False");
    expect(c?.reason).toBe("Unschedulable");
    expect(c?.message).toBe(message);
  });

  it("is False with reason QuotaExceeded when the pod create was refused for quota", () => {
    const message = 'pods "sb" is forbidden: exceeded quota: compute';
    const c = conditionOf(status({ refusal: { reason: "QuotaExceeded", message } }), "Scheduled");
    expect(c?.status).toBe("False");
    expect(c?.reason).toBe("QuotaExceeded");
    expect(c?.message).toBe(message);
  });
});

describe("computeStatus: container reports", () => {
  const pod = readyPod({
    containerStatuses: [
      {
        name: "harness",
        restartCount: 2,
        state: { running: {} },
        lastState: {
          terminated: {
            reason: "OOMKilled",
            exitCode: 137,
            message: "out of memory",
            finishedAt: "2026-03-01T11:59:58.123Z",
          },
        },
      },
      { name: "effector", restartCount: 1, state: { running: {} }, lastState: { terminated: { exitCode: 1 } } },
    ],
  });
  const s = status({ pod });

  it("reports the harness's restarts and last end, finishedAt in RFC 3339 without millis", () => {
    expect(s.harness?.restartCount).toBe(2);
    expect(s.harness?.lastTerminated?.reason).toBe("OOMKilled");
    expect(s.harness?.lastTerminated?.exitCode).toBe(137);
    expect(s.harness?.lastTerminated?.message).toBe("out of memory");
    expect(s.harness?.lastTerminated?.finishedAt).toBe("2026-03-01T11:59:58Z");
  });

  it("reports the effector's restarts and last end", () => {
    expect(s.effector?.restartCount).toBe(1);
    expect(s.effector?.lastTerminated?.exitCode).toBe(1);
  });

  it("lists containers waiting for a reason worth naming", () => {
    const waitingPod = unreadyPod({
      containerStatuses: [
        { name: "harness", state: { waiting: { reason: "CrashLoopBackOff", message: "back-off 10s" } } },
      ],
    });
    expect(status({ pod: waitingPod }).waiting).toEqual([
      { container: "harness", reason: "CrashLoopBackOff", message: "back-off 10s" },
    ]);
  });
});

describe("computeStatus: Lost", () => {
  const loss = { reason: "PodDeleted", message: `its pod (uid ${POD_UID}) was deleted` };

  it("is Lost with a Lost condition True carrying the loss's reason and message, and Ready False", () => {
    const s = status({ loss });
    expect(s.phase).toBe("Lost");
    expect(conditionOf(s, "Lost")?.status).toBe("True");
    expect(conditionOf(s, "Lost")?.reason).toBe("PodDeleted");
    expect(conditionOf(s, "Lost")?.message).toBe(loss.message);
    expect(conditionOf(s, "Ready")?.status).toBe("False");
  });

  it("names the gone pod's uid when only a record of it is left (no status had named it, decision 0031)", () => {
    const gone = lossOf(undefined, POD_UID, true);
    expect(gone?.podUID).toBe(POD_UID);
    expect(status({ loss: gone }).podUID).toBe(POD_UID);
  });

  it("stays Lost once Lost, even when a Ready pod is passed in", () => {
    const lost = status({ pod: readyPod(), service: serviceOf(), loss });
    const again = computeStatus({
      sandbox: sandboxOf({}, lost),
      pod: readyPod({ uid: "another-uid" }),
      service: serviceOf(),
      now: T1,
    });
    expect(again.phase).toBe("Lost");
    expect(conditionOf(again, "Lost")?.reason).toBe("PodDeleted");
    expect(conditionOf(again, "Ready")?.status).toBe("False");
  });
});

describe("computeStatus: the endpoint", () => {
  it("holds Ready back while the Service does not exist, even with the pod Ready", () => {
    const s = computeStatus({ sandbox: sandboxOf(), pod: readyPod(), now: T1 });
    expect(s.phase).toBe("Pending");
    expect(s.endpoint).toBeUndefined();
    expect(conditionOf(s, "Ready")).toMatchObject({ status: "False", reason: "ServiceNotCreated" });
  });
});

describe("computeStatus: lastTransitionTime", () => {
  const before = status({ pod: unreadyPod() });
  const after = computeStatus({ sandbox: sandboxOf({}, before), pod: readyPod(), service: serviceOf(), now: T1 });

  it("is carried over when a condition's status is unchanged", () => {
    expect(conditionOf(before, "Scheduled")?.lastTransitionTime).toBe("2026-03-01T12:00:00Z");
    expect(conditionOf(after, "Scheduled")?.lastTransitionTime).toBe("2026-03-01T12:00:00Z");
  });

  it("is reset to now when a condition's status changes", () => {
    expect(conditionOf(after, "Ready")?.status).toBe("True");
    expect(conditionOf(after, "Ready")?.lastTransitionTime).toBe("2026-03-01T12:05:00Z");
  });
});

describe("computeStatus: determinism", () => {
  it("gives equal outputs for the same input", () => {
    const input: Observed = { sandbox: sandboxOf({ generation: 2 }), pod: unreadyPod(), service: serviceOf(), now: T0 };
    expect(computeStatus(input)).toEqual(computeStatus(input));
  });
});
