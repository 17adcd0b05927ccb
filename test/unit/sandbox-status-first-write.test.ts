// The rule that lets a new Sandbox's first status wait for its pod's news (decision 0031).
import type { SandboxStatus } from "../../api/crd";
import {
  FIRST_STATUS_QUIET_MS,
  computeStatus,
  firstStatusWaitMs,
  type Observed,
} from "../../capabilities/sandbox/status";
import { podOf, readyPod, sandboxOf, serviceOf, unreadyPod } from "./unit-fixtures";

const now = new Date("2026-03-01T12:00:00.000Z");
const status = (o: Partial<Observed> = {}): SandboxStatus => computeStatus({ sandbox: sandboxOf(), now, ...o });
const young = 100;

describe("firstStatusWaitMs", () => {
  it("lets a first Pending status that says only 'under way' wait out the rest of the quiet time", () => {
    expect(firstStatusWaitMs(undefined, status({ pod: unreadyPod(), service: serviceOf() }), young)).toBe(
      FIRST_STATUS_QUIET_MS - young,
    );
    // Not yet placed, or its Service still being made: the same.
    expect(firstStatusWaitMs(undefined, status({ pod: podOf() }), young)).toBe(FIRST_STATUS_QUIET_MS - young);
    expect(firstStatusWaitMs(undefined, status({ pod: readyPod() }), young)).toBe(FIRST_STATUS_QUIET_MS - young);
  });

  it("writes at once once the pod is older than the quiet time", () => {
    const pending = status({ pod: unreadyPod(), service: serviceOf() });
    expect(firstStatusWaitMs(undefined, pending, FIRST_STATUS_QUIET_MS)).toBe(0);
    expect(firstStatusWaitMs(undefined, pending, FIRST_STATUS_QUIET_MS + 5000)).toBe(0);
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
