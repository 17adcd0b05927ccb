// What the HTTP API asks of the workspaces (the registry, registry.ts, answers it): defined in this
// room, which the API's room (http/) imports, so no room imports one that imports it back
// (eslint.config.mjs ORCHESTRATOR_ROOMS, decision 0012).
import type { EgressLogEntry } from "../../api/egress-point";
import type { CreateWorkspaceBody, WorkspaceEvent, WorkspaceView } from "../../api/orchestrator-schemas";

export interface Workspaces {
  /** Starts a workspace owned by `tenant` (undefined: an admin's) and answers its name. Throws
   * HttpError to refuse (e.g. 403 for the fence). */
  create(body: CreateWorkspaceBody, tenant: string | undefined): Promise<string>;
  /** The workspaces this replica owns (all of them when it is the only one; decision 0079). */
  list(): Promise<WorkspaceView[]>;
  /** Every workspace the Sandbox watch holds, whoever owns it, with its tenant (its label). */
  known?(): Array<{ name: string; tenant: string | undefined }>;
  /** A view read from the Sandbox alone, for a workspace no replica answered a list for (its shard
   * is moving): undefined when the watch has no such Sandbox. */
  sandboxView?(name: string): WorkspaceView | undefined;
  /** The tenant that created it (undefined: an admin); null when there is no such workspace. */
  ownerOf(name: string): string | undefined | null;
  get(name: string): Promise<WorkspaceView | undefined>;
  /** Starts its destruction; false when no such workspace. */
  delete(name: string): Promise<boolean>;
  /** The workspace's egress list, its replacement and the egress point's log of it (decision
   * 0051); undefined / false when no such workspace. Throw HttpError to refuse. */
  egress(name: string): Promise<string[] | undefined>;
  setEgress(name: string, allow: string[]): Promise<boolean>;
  egressLog(name: string): Promise<EgressLogEntry[] | undefined>;
  /** Every event from now on; undefined when no such workspace. Returns the unsubscribe. */
  /** `onEnd`: called when the stream must end without a final event (the workspace moved to
   * another replica, decision 0079: the Machine reconnects and gets a snapshot there). */
  subscribe(name: string, listener: (event: WorkspaceEvent) => void, onEnd?: () => void): (() => void) | undefined;
}
