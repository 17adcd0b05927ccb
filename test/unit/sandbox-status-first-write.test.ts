// The rule that lets a new Sandbox's first status wait for its pod's news (decisions 0031, 0043).
import type { SandboxStatus } from "../../api/crd";
import {
  FIRST_STATUS_LIMIT_MS,
  FIRST_STATUS_QUIET_MS,
  computeStatus,
  firstStatusWaitMs,
  type Observed,
} from "../../capabilities/sandbox/status";
import { podOf, readyPod, sandboxOf, serviceOf, unreadyPod } from "./unit-fixtures";

const now = new Date("2026-03-01T12:00:00.000Z");
const status = (o: Partial<Observed> = {}): SandboxStatus => computeStatus({ sandbox: sandboxOf(), now, ...o });
/** Created 100 ms ago and seen placed 50 ms ago. */
const young = { createdMs: 100, placedMs: 50 };

describe("firstStatusWaitMs", () => {
  it("lets a placed first Pending status that says only 'under way' wait out the quiet time from its placement", () => {
    expect(firstStatusWaitMs(undefined, status({ pod: unreadyPod(), service: serviceOf() }), young)).toBe(
      FIRST_STATUS_QUIET_MS - 50,
    );
    // Its Service still being made: the same.
    expect(firstStatusWaitMs(undefined, status({ pod: readyPod() }), young)).toBe(FIRST_STATUS_QUIET_MS - 50);
    // Placed late (the scheduler busy): the quiet time counts from the placement, not the create.
    const placedLate = { createdMs: 5000, placedMs: 300 };
    expect(firstStatusWaitMs(undefined, status({ pod: unreadyPod(), service: serviceOf() }), placedLate)).toBe(
      FIRST_STATUS_QUIET_MS - 300,
    );
  });

  it("lets a status that says only 'not placed yet' wait for the scheduler, up to the limit from the create", () => {
    // Nothing a client reads: the same as no status at all (decision 0043).
    const unplaced = status({ pod: podOf(), service: serviceOf() });
    expect(firstStatusWaitMs(undefined, unplaced, { createdMs: 100 })).toBe(FIRST_STATUS_LIMIT_MS - 100);
    expect(firstStatusWaitMs(undefined, unplaced, { createdMs: FIRST_STATUS_QUIET_MS + 500 })).toBe(
      FIRST_STATUS_LIMIT_MS - FIRST_STATUS_QUIET_MS - 500,
    );
    expect(firstStatusWaitMs(undefined, unplaced, { createdMs: FIRST_STATUS_LIMIT_MS })).toBe(0);
  });

  it("writes the placed status of a Sandbox waiting on Repo caches at once: it tells the node's cache agent to fetch", () => {
    const placed = status({ pod: unreadyPod(), service: serviceOf() });
    const young = { createdMs: 100, placedMs: 50 };
    expect(firstStatusWaitMs(undefined, placed, young, true)).toBe(0);
    // Not placed yet: it still waits for the scheduler's word, caches or not.
    const unplaced = status({ pod: podOf(), service: serviceOf() });
    expect(firstStatusWaitMs(undefined, unplaced, { createdMs: 100 }, true)).toBe(FIRST_STATUS_LIMIT_MS - 100);
    // Without Repos the quiet time holds.
    expect(firstStatusWaitMs(undefined, placed, young, false)).toBe(FIRST_STATUS_QUIET_MS - 50);
  });

  it("writes at once once the quiet time since the placement is over, or the limit since the create", () => {
    const pending = status({ pod: unreadyPod(), service: serviceOf() });
    expect(firstStatusWaitMs(undefined, pending, { createdMs: 3000, placedMs: FIRST_STATUS_QUIET_MS })).toBe(0);
    expect(firstStatusWaitMs(undefined, pending, { createdMs: 9000, placedMs: FIRST_STATUS_QUIET_MS + 5000 })).toBe(0);
    expect(firstStatusWaitMs(undefined, pending, { createdMs: FIRST_STATUS_LIMIT_MS - 100, placedMs: 10 })).toBe(100);
    expect(firstStatusWaitMs(undefined, pending, { createdMs: FIRST_STATUS_LIMIT_MS + 1, placedMs: 10 })).toBe(0);
  });

  it("writes at once when this process did not create the pod (a restart, a pod made earlier)", () => {
    expect(firstStatusWaitMs(undefined, status({ pod: unreadyPod(), service: serviceOf() }), undefined)).toBe(0);
  });

  it("never holds back a later status, Ready, or Lost", () => {
    const pending = status({ pod: unreadyPod(), service: serviceOf() });
    expect(firstStatusWaitMs(pending, pending, young)).toBe(0);
    expect(firstStatusWaitMs(undefined, status({ pod: readyPod(), service: serviceOf() }), young)).toBe(0);
    const lost = status({ loss: { reason: "PodDeleted", message: "its pod was deleted" } });
    expect(firstStatusWaitMs(undefined, lost, young)).toBe(0);
  });

  it("writes at once what a client acts on: a refusal, the scheduler's no, a Repo hold, a container's wait", () => {
    const refused = status({ refusal: { reason: "QuotaExceeded", message: "exceeded quota: q" } });
    expect(firstStatusWaitMs(undefined, refused, young)).toBe(0);

    const unschedulable = podOf({
      conditions: [
        { type: "PodScheduled", status: "False", reason: "Unschedulable", message: "0/3 nodes are available" },
      ],
    });
    expect(firstStatusWaitMs(undefined, status({ pod: unschedulable, service: serviceOf() }), young)).toBe(0);

    const held = status({
      pod: readyPod(),
      service: serviceOf(),
      gates: [{ reason: "RepoPending", message: "repo r is being cloned on node n" }],
    });
    expect(firstStatusWaitMs(undefined, held, young)).toBe(0);

    const pulling = podOf({
      nodeName: "node-a",
      containerStatuses: [
        { name: "harness", ready: false, restartCount: 0, state: { waiting: { reason: "ImagePullBackOff" } } },
      ],
    });
    expect(firstStatusWaitMs(undefined, status({ pod: pulling, service: serviceOf() }), young)).toBe(0);
  });
});
