// A workspace's Size split inside its pod (decision 0015), pure: the Size is the pod-level
// ceiling (`podResources`); the Custodian takes a fixed slice, the User Container its own Size when
// the request states one, and the Harness container the rest. Every request equals its limit, so
// the pod is Guaranteed and the CPU limit is enforced (pod-level resources decide the QoS class),
// but for the Custodian's CPU: a request with no limit of its own, as its start (Node reading its
// bundle, 0.3 s of CPU) throttled under a 100m limit took 2.3 s of every workspace's create
// (decision 0056); the pod's limit still bounds it. `disk` is the Harness's ephemeral-storage
// request (for `/work`), with no limit: a full disk is a tool's error, not an eviction.
import { bytesOf, formatBytes, formatMilliCpu, milliCpu } from "../../lib/quantity";
import type { Size } from "../../api/orchestrator-schemas";

export type Resources = { requests: Record<string, string>; limits: Record<string, string> };

export type SizeSplit = {
  /** The whole Size, for spec.podResources; absent when the request states no Size. */
  pod?: Resources;
  /** The Harness container's (spec.resources). */
  harness?: Resources;
  custodian: Resources;
  user?: Resources;
  /** /dev/shm's sizeLimit: a quarter of the Harness's memory, at least 64Mi. */
  shmSize?: string;
};

/** The Custodian's fixed slice: enough for its proxy under 100 concurrent streams (bench custodian). */
export const CUSTODIAN_SLICE = { cpu: "100m", memory: "192Mi" } as const;

/** Below these the Harness cannot run its Agents: a Size that leaves less is refused. */
export const HARNESS_FLOOR = { cpu: 100, memory: 128 * 2 ** 20 };
const SHM_FLOOR = 64 * 2 ** 20;

export class SizeError extends Error {}

/** The resources a Size splits, each read and written in whole units of its own. */
const RESOURCES = [
  { name: "cpu", read: milliCpu, format: formatMilliCpu, floor: HARNESS_FLOOR.cpu },
  { name: "memory", read: bytesOf, format: formatBytes, floor: HARNESS_FLOOR.memory },
] as const;

const equal = (r: Record<string, string>): Resources => ({ requests: { ...r }, limits: { ...r } });

/**
 * Splits `size` (the pod's) between the containers. Throws a SizeError naming the field and the fix
 * when the Custodian's slice and the User Container's Size leave the Harness less than its floor,
 * or when `user` names what `size` does not bound.
 */
export function splitSize(
  size: Size | undefined,
  user?: Size,
  slice: { cpu: string; memory: string } = CUSTODIAN_SLICE,
): SizeSplit {
  const custodian: Resources = {
    requests: { cpu: slice.cpu, memory: slice.memory },
    limits: { memory: slice.memory },
  };
  if (!size) {
    if (user) throw new SizeError("userSize needs size: the User Container's share is taken from the pod's Size");
    return { custodian };
  }
  const pod: Record<string, string> = {};
  const harness: Record<string, string> = {};
  const userShare: Record<string, string> = {};
  let shmSize: string | undefined;

  // The same split for each resource, in its own units (millicores, bytes).
  for (const r of RESOURCES) {
    const stated = size[r.name];
    if (stated === undefined) {
      if (user?.[r.name] !== undefined)
        throw new SizeError(
          `userSize.${r.name} needs size.${r.name}: the User Container's share is taken from the pod's`,
        );
      continue;
    }
    const total = r.read(stated)!;
    const u = user?.[r.name] !== undefined ? r.read(user[r.name]!)! : 0;
    const left = total - r.read(slice[r.name])! - u;
    if (left < r.floor) {
      throw new SizeError(
        `size.${r.name} ${stated} leaves the Harness ${r.format(Math.max(left, 0))} after the Custodian's ` +
          `${slice[r.name]}${u ? ` and the User Container's ${user![r.name]}` : ""}; it needs at least ` +
          `${r.format(r.floor)}: raise size.${r.name} to ${r.format(total - left + r.floor)} or more`,
      );
    }
    pod[r.name] = r.format(total);
    harness[r.name] = r.format(left);
    if (u) userShare[r.name] = r.format(u);
    if (r.name === "memory") shmSize = formatBytes(Math.max(SHM_FLOOR, Math.floor(left / 4 / 2 ** 20) * 2 ** 20));
  }

  const out: SizeSplit = { custodian };
  if (Object.keys(pod).length) out.pod = equal(pod);
  if (Object.keys(harness).length) out.harness = equal(harness);
  if (size.disk !== undefined) {
    // A request alone: the scheduler reserves it, and nothing evicts the pod for using more.
    out.harness = {
      requests: { ...(out.harness?.requests ?? {}), "ephemeral-storage": formatBytes(bytesOf(size.disk)!) },
      limits: { ...(out.harness?.limits ?? {}) },
    };
  }
  if (Object.keys(userShare).length) out.user = equal(userShare);
  if (shmSize) out.shmSize = shmSize;
  return out;
}
