// The Harness's attach request for a workspace, and where it is kept on the Sandbox (an
// annotation), so a restarted Orchestrator can send it again: the attach is idempotent.
import type { SandboxModel } from "../api/crd";
import { repoIdentity, repoKey } from "../api/repo-identity";
import type { AttachBody } from "../api/attach";
import { ATTACH_ANNOTATION } from "../api/wire";
import type { CreateWorkspaceBody } from "./api";

/** The Harness's attach body for a request; none when it names no Repo Slot. */
export function attachBodyOf(body: Pick<CreateWorkspaceBody, "repos" | "branch">): AttachBody | undefined {
  if (!body.repos.length) return undefined;
  return {
    branch: body.branch,
    slots: body.repos.map((r) => {
      const identity = repoIdentity(r.url);
      return { slot: r.slot, url: r.url, identity, key: repoKey(identity), ...(r.ref ? { ref: r.ref } : {}) };
    }),
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
