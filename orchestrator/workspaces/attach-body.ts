// The Harness's attach request for a workspace, and where it is kept on the Sandbox (an
// annotation), so a restarted Orchestrator can send it again: the attach is idempotent.
import type { SandboxModel } from "../../api/crd";
import type { AttachBody } from "../../api/attach";
import { ATTACH_ANNOTATION } from "../../api/wire";
import type { PlacedRepo } from "./sandbox-gateway";

/** The Harness's attach body from the fenced repos (fence.ts fenceSlots): their identity and key
 * as the fence computed them, once. None when the workspace names no Repo Slot. */
export function attachBodyOf(req: { branch: string; repos: readonly PlacedRepo[] }): AttachBody | undefined {
  if (!req.repos.length) return undefined;
  return {
    branch: req.branch,
    slots: req.repos.map((r) => ({
      slot: r.slot,
      url: r.url,
      identity: r.identity,
      key: r.key,
      ...(r.ref ? { ref: r.ref } : {}),
    })),
  };
}

export function readAttach(sandbox: SandboxModel): AttachBody | undefined {
  const raw = sandbox.metadata?.annotations?.[ATTACH_ANNOTATION];
  if (!raw) return undefined;
  try {
    return JSON.parse(raw) as AttachBody;
  } catch {
    return undefined;
  }
}
