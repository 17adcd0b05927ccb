// The Sandbox gateway: the workspace lifecycle's only contact with the world (decision 0011's
// SandboxGateway). The real one (kube-gateway.ts) drives Sandbox CRs over one watch and never reads a
// Pod (decision 0013); the unit tests drive the lifecycle with a fake. Every operation is idempotent,
// so a restarted Orchestrator may repeat any of them for the same name.
import type { SecretRef } from "../../api/effects";
import type { AttachBody } from "../../api/attach";
import type { AttachAnswer, Failure, Loss, RepoSlot, Size, Wait } from "../../api/orchestrator-schemas";
import type { REPO_HOLD } from "../../api/conditions";
import type { CredentialEntry } from "./fence";
import type { SandboxModel } from "../../api/crd";
import type { EgressLogEntry } from "../../api/egress-point";

export type { Wait } from "../../api/orchestrator-schemas";

/** One Repo Slot to fence. `bound`: a url the Machine's own code binds, which passes the fence. */
export type PlaceRepo = RepoSlot & { bound?: boolean };

/** One Repo Slot the fence admitted (fence.ts fenceSlots, once per create): its Repo identity, the
 * cache key derived from it and the entry that admitted it (whose `secret` a new Repo names). The
 * gateway writes these as they are; it never reads the url again. */
export type PlacedRepo = PlaceRepo & { identity: string; key: string; bound: boolean; entry?: CredentialEntry };

/** What `place` writes: the Repos, the Sandbox CR (with its labels and the attach annotation) and
 * the objects it owns (compose.ts). Everything is checked before: the gateway only composes and writes. */
export type PlaceRequest = {
  name: string;
  image: string;
  repos: PlacedRepo[];
  /** The Harness's attach body, kept on the CR as an annotation; absent without Repo Slots. */
  attach?: AttachBody;
  userImage?: string;
  size?: Size;
  /** The User Container's share of `size` (orchestrator/workspaces/size.ts). */
  userSize?: Size;
  /** A Sandbox Effector: its image, as the pod config lets it (pod-config.ts effectorImageFor,
   * decision 0048), and the push Secrets its pushed slots' fence entries name (fence.ts
   * pushCredentials), for spec.gitCredentials; and the effect secrets its create declared, each an
   * entry of the pod config's effector.secrets its tenant may use (decision 0070), none when absent. */
  effector?: { image: string; gitCredentials: string[]; secrets?: SecretRef[] };
  /** spec.idleTimeout, a Go duration (the operator's default when absent). */
  idleTimeout?: string;
  /** spec.runtimeClassName, as the pod config lets it (pod-config.ts runtimeClassFor, decision 0055);
   * absent: the cluster's default runtime. */
  runtimeClassName?: string;
  /** spec.egress.allow: the workspace's egress list (decision 0051); absent, the base list alone. */
  egressAllow?: string[];
  /** The `jr2.dev/run` and `jr2.dev/workflow` labels, and `jr2.dev/tenant` when a tenant owns it. */
  labels: { run: string; workflow: string; tenant?: string };
};

export type PlaceHooks = {
  /** The CR is written: the lease starts now, not once a node is found (decision 0014), since
   * the wait for a node has no deadline and may outlast the idle timeout. */
  onWritten(): void;
  /** Each new wait for a node (`node` with the scheduler's message, or `quota`), said once. */
  onWait(wait: Wait): void;
  /** Aborted when the lifecycle no longer needs the answer (a DESTROY while placing). */
  signal?: AbortSignal;
};

export type ProvisionHooks = {
  /** Each new wait while provisioning (`repo` while the operator holds Ready, `container`). */
  onWait(wait: Wait): void;
  signal?: AbortSignal;
};

/** How long a provision may take (decision 0015). */
export type Budgets = {
  /** From the pod's scheduling until Ready. */
  podMs: number;
  /** Instead of `podMs`, once the operator holds the Sandbox on RepoMissing/RepoPending. */
  repoMs: number;
};
export const DEFAULT_BUDGETS: Budgets = { podMs: 120_000, repoMs: 25 * 60_000 };

export type Provisioned = { endpoint: string };

export type Attached = {
  answer: AttachAnswer;
  /** Slots attached from a stale cache (ReposFresh=False), with the operator's clause. */
  stale?: Record<string, string>;
};

/** The watch's word on a Sandbox: still there, gone, or Lost with the operator's reason. */
export type Continuity = { kind: "present" } | { kind: "absent" } | ({ kind: "lost" } & Loss);

export interface SandboxGateway {
  /** The fenced repos' Repos, then the CR, then its token Secret (owned by the CR's uid), then the
   * wait for a node, with no deadline. Rejects with a PlaceFailure. The fence runs before (a
   * FenceRefused PlaceFailure, answered 403 before anything is written): `req.repos` are admitted. */
  place(req: PlaceRequest, hooks: PlaceHooks): Promise<void>;
  /** On restore, for a Sandbox not yet Ready: what it owns, created where absent. */
  resumeOwned?(sandbox: SandboxModel): Promise<void>;
  /** Waits for `phase: Ready` within the budgets. Rejects with a named ProvisionFailure. */
  provision(name: string, budgets: Budgets, hooks: ProvisionHooks): Promise<Provisioned>;
  /** The Harness's `POST /attach` with the Sandbox's bearer. Rejects with an AttachFailure. */
  attach(name: string, body: AttachBody): Promise<Attached>;
  /** Stamps `jr2.dev/keepalive` with now. */
  renew(name: string): Promise<void>;
  /** The watch's current word. `absent` only once the watch has listed: unknown is never loss. */
  continuity(name: string): Promise<Continuity>;
  /** Optional: hear continuity as the watch changes, so a loss is reported at once rather than at
   * the next lease tick. Returns the unsubscribe. */
  watchContinuity?(name: string, listener: (c: Continuity) => void): () => void;
  /** Deletes the CR (its Secret goes with it through the garbage collector); absent is fine. */
  destroy(name: string): Promise<void>;
  /** The Sandbox's egress list (spec.egress.allow) as the watch last saw it; undefined with no
   * Sandbox. Optional: a gateway without an egress point (local mode) has none (decision 0051). */
  egress?(name: string): Promise<string[] | undefined>;
  /** Replaces the list on the CR: the egress point applies it on the watch event, no restart.
   * Rejects with an HttpError 404 with no Sandbox. */
  setEgress?(name: string, allow: string[]): Promise<void>;
  /** The egress point's log of the Sandbox's connections, oldest first. */
  egressLog?(name: string): Promise<EgressLogEntry[]>;
}

// ---------------------------------------------------------------------------------------------
// Named failures: what the lifecycle reports as `failed` (or `lost`), by stage and reason.

export type PlaceFailureReason = "FenceRefused" | "Refused" | "Lost";

export type ProvisionFailureReason =
  | typeof REPO_HOLD.RepoCloneFailed
  | "HarnessCrashLoop"
  | "TerminalWaiting"
  | "RunAsNonRoot"
  | "EffectorEnded"
  | "Lost"
  | "PodBudgetExceeded"
  | "RepoBudgetExceeded";

export type AttachFailureReason = "NoEndpoint" | "Unreachable" | "AttachRefused" | "BadAnswer" | "TooSlow";

/** How a Harness broke the bounds the Orchestrator reads it within (decision 0042). */
export type Misbehaviour = "too_large" | "too_slow" | "bad_answer";

/** A Harness answer the Orchestrator would not take: too large, too slow, or not what was asked.
 * It names the workspace; the caller answers 502 and reports it, and no other workspace notices. */
export class HarnessMisbehaved extends Error {
  constructor(
    readonly workspace: string,
    readonly reason: Misbehaviour,
    message: string,
  ) {
    super(message);
  }
}

/** How much of a Harness answer is read, and for how long (decision 0042). */
export type HarnessLimits = { maxBytes: number; timeoutMs: number };

/** An admission, an abort, an attach: small answers. */
export const SMALL_ANSWER: HarnessLimits = { maxBytes: 256 * 1024, timeoutMs: 60_000 };

/** Where a Sandbox's Effector answers: its base url and the pod address a request is signed for
 * (the Effector refuses a request meant for another pod, decision 0070). */
export type EffectorAddress = { url: string; pod: string };

/** One signed call to a Sandbox's Effector (kube-gateway.ts `effector`): its status, its body as
 * text, and whether the answer carries the Effector's signature over the request's nonce. */
export type EffectorReply = { status: number; text: string; signed: boolean };

/** A call to an Effector that got no answer. `delivered` false: the connection was refused or the
 * Effector has no address yet, so nothing of the request reached anyone; true: it may have. */
export class EffectorUnreachable extends Error {
  constructor(
    readonly delivered: boolean,
    message: string,
  ) {
    super(message);
  }
}

/** A failure with a stage and a name; `details` carries the facts a client may act on. A failure
 * named `Lost` carries the operator's Loss (`reason`, `message`) as its details, and ends the
 * workspace `lost` rather than `failed`, whichever observer heard it first. */
export class WorkspaceFailure extends Error {
  constructor(
    readonly stage: Failure["stage"],
    readonly reason: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }

  toJSON(): Failure {
    return {
      stage: this.stage,
      reason: this.reason,
      message: this.message,
      ...(this.details ? { details: this.details } : {}),
    };
  }
}

export class PlaceFailure extends WorkspaceFailure {
  constructor(
    override readonly reason: PlaceFailureReason,
    message: string,
    details?: Record<string, unknown>,
  ) {
    super("place", reason, message, details);
  }
}

export class ProvisionFailure extends WorkspaceFailure {
  constructor(
    override readonly reason: ProvisionFailureReason,
    message: string,
    details?: Record<string, unknown>,
  ) {
    super("provision", reason, message, details);
  }
}

export class AttachFailure extends WorkspaceFailure {
  constructor(
    override readonly reason: AttachFailureReason,
    message: string,
    details?: Record<string, unknown>,
  ) {
    super("attach", reason, message, details);
  }
}

/** Any rejection as a Failure: a named one as itself, anything else as `Error` with its words. */
export function failureOf(stage: Failure["stage"], err: unknown): Failure {
  if (err instanceof WorkspaceFailure) return err.toJSON();
  return { stage, reason: "Error", message: err instanceof Error ? err.message : String(err) };
}
