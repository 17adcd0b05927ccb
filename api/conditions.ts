// The words of a Sandbox's status that clients act on: condition types and every reason the
// operator writes. The operator (capabilities/) produces them and the Orchestrator reads them;
// both import them from here, so the contract holds by construction, not because two strings
// happen to match (docs/decisions/0012-shared-contracts.md).

/** The Sandbox's condition types. */
export const CONDITION = {
  Scheduled: "Scheduled",
  Ready: "Ready",
  ReposFresh: "ReposFresh",
  Lost: "Lost",
  /** Whether the pod runs the Sandbox's current spec (a spec changed later never reaches it). */
  SpecApplied: "SpecApplied",
} as const;

/** Scheduled: placed, waiting for the scheduler, or the pod create refused (a refusal's reason). */
export const SCHEDULED_REASON = {
  Scheduled: "Scheduled",
  PodNotCreated: "PodNotCreated",
  SchedulerPending: "SchedulerPending",
  /** The scheduler's own reason when it gives none. */
  Unschedulable: "Unschedulable",
  /** A ResourceQuota refused the pod create: the client waits on a quota, not a node. */
  QuotaExceeded: "QuotaExceeded",
  PriorityClassNotFound: "PriorityClassNotFound",
  PodInvalid: "PodInvalid",
  CreateRefused: "CreateRefused",
  /** The reconcile's own admission check refused the spec: no pod is built from it. */
  SpecRefused: "SpecRefused",
  /** The Sandbox lives in a namespace admission ignores: the operator ignores it too. */
  NamespaceIgnored: "NamespaceIgnored",
  /** The Sandbox's namespace is not one the installation opted in: the operator may not write its
   * pod there (decision 0047). Mended by the installation, not the spec: retried, slowly. */
  NamespaceNotEnabled: "NamespaceNotEnabled",
} as const;

/** Refusals no retry mends: only a new spec (or namespace) does. */
export const FINAL_REFUSALS: readonly string[] = [SCHEDULED_REASON.SpecRefused, SCHEDULED_REASON.NamespaceIgnored];

/** Why the Sandbox's Repo caches hold Ready (capabilities/repo/caches.ts), in the order they outrank
 * each other: a failed clone is terminal for a client, the other two are waits. */
export const REPO_HOLD = {
  RepoCloneFailed: "RepoCloneFailed",
  RepoMissing: "RepoMissing",
  RepoPending: "RepoPending",
} as const;
export type RepoHold = (typeof REPO_HOLD)[keyof typeof REPO_HOLD];
/** The holds a client waits out (the clone failure is not one). */
export const REPO_WAITS = [REPO_HOLD.RepoMissing, REPO_HOLD.RepoPending] as const;
export type RepoWait = (typeof REPO_WAITS)[number];

/** Ready: True only with the pod Ready, the Service created and no Repo hold. */
export const READY_REASON = {
  PodReady: "PodReady",
  PodNotReady: "PodNotReady",
  PodNotCreated: "PodNotCreated",
  ServiceNotCreated: "ServiceNotCreated",
  Lost: "Lost",
  ...REPO_HOLD,
} as const;

/** ReposFresh: every cache fetched since the Sandbox asked, or which one is stale. */
export const REPOS_FRESH_REASON = { Fetched: "Fetched", FetchFailed: "FetchFailed" } as const;

/** SpecApplied: the pod runs the current spec, or which fields changed after it was built. */
export const SPEC_APPLIED_REASON = { Applied: "Applied", PodSpecChanged: "PodSpecChanged" } as const;

/** Lost (terminal): why the Sandbox's one pod is gone or ended. */
export const LOST_REASON = {
  PodDeleted: "PodDeleted",
  Evicted: "Evicted",
  Preempted: "Preempted",
  PodFailed: "PodFailed",
  PodSucceeded: "PodSucceeded",
} as const;
