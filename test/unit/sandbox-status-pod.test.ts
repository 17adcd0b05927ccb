import { lossOf, reportOf, waitingOf } from "../../capabilities/sandbox/status";
import { POD_UID, podOf, readyPod } from "./unit-fixtures";

describe("lossOf", () => {
  it("is PodFailed with the pod's message when the pod Failed", () => {
    const loss = lossOf(podOf({ phase: "Failed", message: "the node was lost" }), POD_UID, false);
    expect(loss?.reason).toBe("PodFailed");
    expect(loss?.message).toBe("the node was lost");
  });

  it("is Evicted when the pod Failed with reason Evicted", () => {
    const message = "The node was low on resource: memory.";
    const loss = lossOf(podOf({ phase: "Failed", reason: "Evicted", message }), POD_UID, false);
    expect(loss?.reason).toBe("Evicted");
    expect(loss?.message).toBe(message);
  });

  it("is PodSucceeded when the pod Succeeded", () => {
    expect(lossOf(podOf({ phase: "Succeeded" }), POD_UID, false)?.reason).toBe("PodSucceeded");
  });

  it("is PodDeleted when the recorded pod is confirmed absent", () => {
    const loss = lossOf(undefined, POD_UID, true);
    expect(loss?.reason).toBe("PodDeleted");
    expect(loss?.message).toContain(POD_UID);
  });

  it("is undefined when the pod is absent but its absence is not confirmed", () => {
    expect(lossOf(undefined, POD_UID, false)).toBeUndefined();
  });

  it("is undefined when the pod is absent and none was ever recorded", () => {
    expect(lossOf(undefined, undefined, true)).toBeUndefined();
  });

  it("is PodDeleted when the pod has another uid than the recorded one", () => {
    expect(lossOf(readyPod({ uid: "another-uid" }), POD_UID, true)?.reason).toBe("PodDeleted");
  });

  it("is PodDeleted when the pod is being deleted", () => {
    expect(lossOf(readyPod({ deletionTimestamp: "2026-03-01T12:00:00Z" }), POD_UID, false)?.reason).toBe("PodDeleted");
  });

  it("names the pod it is about: the recorded uid, else the uid of the pod seen (decision 0031)", () => {
    // A pod deleted before any status named it is seen with its deletionTimestamp and no record.
    const deleting = readyPod({ deletionTimestamp: "2026-03-01T12:00:00Z" });
    expect(lossOf(deleting, undefined, false)?.podUID).toBe(POD_UID);
    expect(lossOf(podOf({ phase: "Failed" }), undefined, false)?.podUID).toBe(POD_UID);
    // Replaced by another pod: the verdict is about the recorded one, not the newcomer.
    expect(lossOf(readyPod({ uid: "another-uid" }), POD_UID, true)?.podUID).toBe(POD_UID);
  });

  it("is undefined for a running pod with the recorded uid", () => {
    expect(lossOf(readyPod(), POD_UID, true)).toBeUndefined();
  });
});

describe("reportOf", () => {
  it("is undefined for a container the pod does not report", () => {
    expect(reportOf(readyPod(), "harness")).toBeUndefined();
    expect(reportOf(undefined, "harness")).toBeUndefined();
  });

  it("reports restartCount and the last termination, finishedAt without millis", () => {
    const pod = readyPod({
      containerStatuses: [
        {
          name: "harness",
          restartCount: 3,
          lastState: {
            terminated: { reason: "Error", exitCode: 2, message: "boom", finishedAt: "2026-03-01T10:00:00.999Z" },
          },
        },
      ],
    });
    const r = reportOf(pod, "harness");
    expect(r?.restartCount).toBe(3);
    expect(r?.lastTerminated?.reason).toBe("Error");
    expect(r?.lastTerminated?.exitCode).toBe(2);
    expect(r?.lastTerminated?.message).toBe("boom");
    expect(r?.lastTerminated?.finishedAt).toBe("2026-03-01T10:00:00Z");
  });

  it("reports no lastTerminated for a container that never ended", () => {
    const pod = readyPod({ containerStatuses: [{ name: "effector", restartCount: 0, state: { running: {} } }] });
    expect(reportOf(pod, "effector")?.restartCount).toBe(0);
    expect(reportOf(pod, "effector")).not.toHaveProperty("lastTerminated");
  });
});

describe("waitingOf", () => {
  const pod = podOf({
    initContainerStatuses: [
      { name: "init-a", state: { waiting: { reason: "PodInitializing" } } },
      { name: "init-b", state: { waiting: { reason: "ImagePullBackOff", message: 'Back-off pulling image "b:1"' } } },
    ],
    containerStatuses: [
      { name: "harness", state: { waiting: { reason: "CrashLoopBackOff", message: "back-off 20s" } } },
      { name: "effector", state: { waiting: { reason: "ContainerCreating" } } },
      { name: "custodian", state: { running: {} } },
    ],
  });
  const waiting = waitingOf(pod);

  it("lists init containers first, then containers", () => {
    expect(waiting.map((w) => w.container)).toEqual(["init-b", "harness"]);
  });

  it("keeps ImagePullBackOff and CrashLoopBackOff with their messages", () => {
    expect(waiting[0]).toEqual({
      container: "init-b",
      reason: "ImagePullBackOff",
      message: 'Back-off pulling image "b:1"',
    });
    expect(waiting[1]).toEqual({ container: "harness", reason: "CrashLoopBackOff", message: "back-off 20s" });
  });

  it("skips the routine ContainerCreating and PodInitializing", () => {
    const reasons = waiting.map((w) => w.reason);
    expect(reasons).not.toContain("ContainerCreating");
    expect(reasons).not.toContain("PodInitializing");
  });

  it("is empty without a pod", () => {
    expect(waitingOf(undefined)).toEqual([]);
  });
});
