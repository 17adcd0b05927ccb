// What a Sandbox's status means to a workspace (pure): placed or waiting for a node, Ready or
// waiting (on which wait) or failed (by which name), which budget applies, and its continuity.
// The Orchestrator never reads a Pod (decision 0013): the operator publishes everything judged
// here on the Sandbox's status (capabilities/sandbox/status.ts, capabilities/repo/caches.ts).
// The real gateway (kube-gateway.ts) runs these on every watch event of one Sandbox.
import type { SandboxModel } from "../../api/crd/models";
import type { Condition } from "../../api/crd/sources/common";
import type { ContainerReport, ContainerWaiting } from "../../api/crd/sources/sandbox";
import { EFFECTOR, HARNESS } from "../../api/wire";
import type { Loss } from "../../api/orchestrator-schemas";
import { PlaceFailure, ProvisionFailure, type Budgets, type Continuity, type Wait } from "./sandbox-gateway";
import {
  CONDITION,
  FINAL_REFUSALS,
  REPO_HOLD,
  REPO_WAITS,
  SCHEDULED_REASON,
  type RepoWait,
} from "../../api/conditions";

/** A Sandbox as the watch holds it (a SandboxModel or anything shaped like one). */
export type SandboxObject = Pick<SandboxModel, "metadata" | "status">;

/** A Harness that ended this many times before it was ever Ready fails the provision (decision 0015):
 * two, not one, since one restart on the way up may still come up. */
export const CRASH_LOOP_RESTARTS = 2;

/** Waiting reasons no retry mends. A failing pull is not here: it may recover, so the pod budget
 * decides (decision 0015). */
const TERMINAL_WAITING: ReadonlySet<string> = new Set(["InvalidImageName", "ErrImageNeverPull"]);

/** The kubelet's refusal of an image that runs as root under runAsNonRoot. Reason and message: the
 * reason alone also covers a missing Secret key, another fault with another fix. */
const CONFIG_ERROR = "CreateContainerConfigError";
const RUN_AS_NON_ROOT = /runAsNonRoot/i;

/** Routine waits every container passes through (the operator leaves them out already). */
const ROUTINE_WAITING: ReadonlySet<string> = new Set(["ContainerCreating", "PodInitializing"]);

/** The operator's Repo holds on Ready (api/conditions.ts): a clone that failed on the pod's node is
 * terminal for the provision; the others hold a Ready pod on its Repos. */
const REPO_HELD: ReadonlySet<string> = new Set(REPO_WAITS);
const isRepoWait = (reason: string): reason is RepoWait => REPO_HELD.has(reason);

export const conditionOf = (sandbox: SandboxObject | undefined, type: string): Condition | undefined =>
  sandbox?.status?.conditions?.find((c) => c.type === type);

const nameOf = (sandbox: SandboxObject | undefined) => sandbox?.metadata?.name ?? "?";

// ---------------------------------------------------------------------------------------------
// Loss and continuity

/** Gone for good: phase Lost (with the operator's reason and the pod's words), or being deleted.
 * Either way no pod comes back (decision 0013). */
export function lossOf(sandbox: SandboxObject | undefined): Loss | undefined {
  const status = sandbox?.status;
  if (status?.phase === "Lost") {
    const c = conditionOf(sandbox, CONDITION.Lost);
    return { reason: c?.reason || "Lost", message: c?.message || "the operator reports its pod gone or ended" };
  }
  if (status?.phase === "Terminating" || sandbox?.metadata?.deletionTimestamp) {
    return { reason: "Terminating", message: `Sandbox "${nameOf(sandbox)}" is being deleted` };
  }
  return undefined;
}

/** The Loss of a Sandbox that is no longer there at all. */
export const absentLoss = (name: string): Loss => ({
  reason: "Absent",
  message: `Sandbox "${name}" no longer exists (deleted, or reaped when its lease lapsed)`,
});

/** `undefined` is a Sandbox the watch has listed and does not hold: absent. */
export function continuityOf(sandbox: SandboxObject | undefined): Continuity {
  if (!sandbox) return { kind: "absent" };
  const loss = lossOf(sandbox);
  return loss ? { kind: "lost", ...loss } : { kind: "present" };
}

// ---------------------------------------------------------------------------------------------
// Placing: the wait for a node, with no deadline (decision 0015)

export type PlacingVerdict =
  | { kind: "placed" }
  | { kind: "waiting"; wait?: Wait }
  | { kind: "failed"; failure: PlaceFailure };

/**
 * Why a Sandbox with no node waits: Scheduled=False with QuotaExceeded is a quota refusing the pod
 * create, any other False the scheduler. Unknown is no reason yet: most pods are placed at once.
 */
export function placingWaitOf(sandbox: SandboxObject | undefined): Wait | undefined {
  const c = conditionOf(sandbox, CONDITION.Scheduled);
  if (c?.status !== "False") return undefined;
  const message = c.message || c.reason || "no reason given";
  return c.reason === SCHEDULED_REASON.QuotaExceeded ? { kind: "quota", message } : { kind: "node", message };
}

/** `sandbox` undefined: the watch has listed and does not hold it (deleted after the write). */
export function placingVerdict(sandbox: SandboxObject | undefined, name: string): PlacingVerdict {
  const loss = sandbox ? lossOf(sandbox) : absentLoss(name);
  if (loss) {
    return {
      kind: "failed",
      failure: new PlaceFailure(
        "Lost",
        `Sandbox "${name}" is lost while it waited for a node: ${loss.reason}: ${loss.message}`,
        {
          ...loss,
        },
      ),
    };
  }
  // The operator's own admission check refused the spec (or its namespace): no pod will ever come.
  const scheduled = conditionOf(sandbox, CONDITION.Scheduled);
  if (scheduled?.status === "False" && FINAL_REFUSALS.includes(scheduled.reason)) {
    return {
      kind: "failed",
      failure: new PlaceFailure("Refused", `Sandbox "${name}" is refused by the operator: ${scheduled.message}`, {
        operatorReason: scheduled.reason,
      }),
    };
  }
  // Scheduled, or an operator that already reports Ready (it was placed, whatever it says).
  if (conditionOf(sandbox, CONDITION.Scheduled)?.status === "True" || sandbox?.status?.phase === "Ready") {
    return { kind: "placed" };
  }
  const wait = placingWaitOf(sandbox);
  return wait ? { kind: "waiting", wait } : { kind: "waiting" };
}

// ---------------------------------------------------------------------------------------------
// Provisioning: Ready, waiting, or failed by name

export type ProvisionVerdict =
  | { kind: "ready"; endpoint: string; stale?: string }
  | { kind: "waiting"; wait?: Wait; held: boolean }
  | { kind: "failed"; failure: ProvisionFailure };

/**
 * The verdict on one version of the Sandbox. `sandbox` undefined: the watch has listed and does not
 * hold it, so it was deleted. Only `phase: Ready` is Ready, never the endpoint alone (decision 0013).
 */
export function provisionVerdict(sandbox: SandboxObject | undefined, name: string): ProvisionVerdict {
  const loss = sandbox ? lossOf(sandbox) : absentLoss(name);
  if (loss) return { kind: "failed", failure: lostFailure(name, loss) };
  const status = sandbox!.status;
  const ready = conditionOf(sandbox, CONDITION.Ready);
  if (status?.phase === "Ready") {
    // The operator writes the endpoint with Ready; a status without one is a moment to wait out.
    if (!status.endpoint) return { kind: "waiting", held: false };
    const fresh = conditionOf(sandbox, CONDITION.ReposFresh);
    const stale = fresh?.status === "False" && fresh.message ? fresh.message : undefined;
    return { kind: "ready", endpoint: status.endpoint, ...(stale ? { stale } : {}) };
  }
  const failure =
    waitingFailure(name, status?.waiting) ??
    (ready?.reason === REPO_HOLD.RepoCloneFailed ? repoCloneFailure(name, ready) : undefined) ??
    crashLoopFailure(name, status?.harness) ??
    effectorFailure(name, status?.effector);
  if (failure) return { kind: "failed", failure };
  const held = ready !== undefined && isRepoWait(ready.reason);
  const wait = held ? repoWait(ready) : containerWait(status?.waiting);
  return { kind: "waiting", held, ...(wait ? { wait } : {}) };
}

function repoWait(ready: Condition): Wait {
  return { kind: "repo", reason: ready.reason as RepoWait, message: ready.message };
}

/** The first container still waiting for a reason worth a client's attention (init containers first). */
function containerWait(waiting: ContainerWaiting[] | undefined): Wait | undefined {
  const w = (waiting ?? []).find((x) => !ROUTINE_WAITING.has(x.reason));
  return w ? { kind: "container", container: w.container, reason: w.reason, message: w.message ?? "" } : undefined;
}

function lostFailure(name: string, loss: Loss): ProvisionFailure {
  return new ProvisionFailure(
    "Lost",
    `Sandbox "${name}" is lost while it was provisioned: ${loss.reason}: ${loss.message}. A Sandbox has one pod ` +
      "for its life; ask for a new workspace.",
    { ...loss },
  );
}

/** A container the kubelet will never start: its waiting reason is the only evidence (no log). */
function waitingFailure(name: string, waiting: ContainerWaiting[] | undefined): ProvisionFailure | undefined {
  for (const w of waiting ?? []) {
    if (w.reason === CONFIG_ERROR && w.message && RUN_AS_NON_ROOT.test(w.message)) {
      return new ProvisionFailure(
        "RunAsNonRoot",
        `Sandbox "${name}" cannot start: container "${w.container}" runs as root (or as a user name), and the ` +
          `Sandbox is hardened with runAsNonRoot: ${w.message}. The fix is one line in the image: a numeric ` +
          "non-root USER, e.g. `USER 1000` (numeric, because the kubelet cannot read the image's /etc/passwd).",
        { container: w.container, kubeletMessage: w.message },
      );
    }
    if (TERMINAL_WAITING.has(w.reason)) {
      return new ProvisionFailure(
        "TerminalWaiting",
        `Sandbox "${name}" cannot start: container "${w.container}" ${w.reason}${w.message ? `: ${w.message}` : ""}`,
        { container: w.container, waitingReason: w.reason, ...(w.message ? { kubeletMessage: w.message } : {}) },
      );
    }
  }
  return undefined;
}

function repoCloneFailure(name: string, ready: Condition): ProvisionFailure {
  return new ProvisionFailure(
    REPO_HOLD.RepoCloneFailed,
    `Sandbox "${name}" cannot start: ${ready.message || ready.reason}. The node's cache agent keeps retrying on its ` +
      "own: fix the url or its git.credentials entry, then ask for a new workspace.",
    { operatorMessage: ready.message },
  );
}

/** The Harness ended twice before it was ever Ready: quote the kubelet's reason, exit code and
 * the Harness's own last words (its termination message), never interpreted. */
function crashLoopFailure(name: string, harness: ContainerReport | undefined): ProvisionFailure | undefined {
  if (!harness || harness.restartCount < CRASH_LOOP_RESTARTS) return undefined;
  const last = harness.lastTerminated;
  const words = last?.message?.trim();
  return new ProvisionFailure(
    "HarnessCrashLoop",
    `Sandbox "${name}" cannot start: its Harness has ended ${harness.restartCount} times before it was ever Ready ` +
      `(last: ${last?.reason ?? "?"}, exit ${last?.exitCode ?? "?"})` +
      (words ? `; its last words: ${words}` : "") +
      `. See \`kubectl logs ${name} -c ${HARNESS} --previous\`.`,
    {
      restartCount: harness.restartCount,
      ...(last?.reason ? { lastReason: last.reason } : {}),
      ...(last?.exitCode !== undefined ? { exitCode: last.exitCode } : {}),
      ...(words ? { terminationMessage: words } : {}),
    },
  );
}

/** The Sandbox Effector ends only on a start it cannot serve, and says why; no retry mends it. */
function effectorFailure(name: string, effector: ContainerReport | undefined): ProvisionFailure | undefined {
  const last = effector?.lastTerminated;
  if (!last) return undefined;
  const words = last.message?.trim();
  return new ProvisionFailure(
    "EffectorEnded",
    `Sandbox "${name}" cannot start: its Sandbox Effector ended before the Sandbox was Ready ` +
      `(${last.reason ?? "?"}, exit ${last.exitCode ?? "?"})${words ? `: ${words}` : ""}. ` +
      `See \`kubectl logs ${name} -c ${EFFECTOR} --previous\`.`,
    {
      ...(last.reason ? { lastReason: last.reason } : {}),
      ...(last.exitCode !== undefined ? { exitCode: last.exitCode } : {}),
      ...(words ? { terminationMessage: words } : {}),
    },
  );
}

// ---------------------------------------------------------------------------------------------
// Budgets

/** When the operator saw the pod scheduled (the Scheduled condition's last transition to True). */
export function scheduledAt(sandbox: SandboxObject | undefined): number | undefined {
  const c = conditionOf(sandbox, CONDITION.Scheduled);
  if (c?.status !== "True") return undefined;
  const t = Date.parse(c.lastTransitionTime);
  return Number.isNaN(t) ? undefined : t;
}

export type Budget = { kind: "pod" | "repo"; deadline: number };

/**
 * Which budget applies and when it ends. Both count from the pod's scheduling (decision 0015):
 * the earlier of the provision's start and the Scheduled condition's time, so an Orchestrator that
 * restarts mid-provision does not get a fresh budget, and a clock ahead of ours does not shorten
 * one. The repo budget applies once the Sandbox was ever held on its Repos (`held` is sticky: the
 * caller remembers it across events).
 */
export function budgetOf(
  sandbox: SandboxObject | undefined,
  startedAt: number,
  held: boolean,
  budgets: Budgets,
): Budget {
  const start = Math.min(startedAt, scheduledAt(sandbox) ?? startedAt);
  return held ? { kind: "repo", deadline: start + budgets.repoMs } : { kind: "pod", deadline: start + budgets.podMs };
}

/** The budget ran out: named, with the operator's last word on Ready and what the kubelet waits on. */
export function budgetFailure(name: string, budget: Budget, budgets: Budgets, last: SandboxObject | undefined) {
  const ready = conditionOf(last, CONDITION.Ready);
  const said = ready ? `${ready.reason}: ${ready.message}` : "no Ready condition reported";
  const waiting = (last?.status?.waiting ?? []).map(
    (w) => `${w.container}: ${w.reason}${w.message ? ` (${w.message})` : ""}`,
  );
  const details = {
    lastPhase: last?.status?.phase ?? "absent",
    ...(ready ? { readyReason: ready.reason, readyMessage: ready.message } : {}),
    ...(waiting.length ? { waiting } : {}),
  };
  if (budget.kind === "repo") {
    return new ProvisionFailure(
      "RepoBudgetExceeded",
      `Sandbox "${name}" waited ${minutes(budgets.repoMs)} for its Repos and the operator still holds it (${said}). ` +
        "The node's cache agent is still at it; ask again once the cache is present, or raise the repo budget.",
      { budgetMs: budgets.repoMs, ...details },
    );
  }
  return new ProvisionFailure(
    "PodBudgetExceeded",
    `Sandbox "${name}" was not Ready ${seconds(budgets.podMs)} after its pod was scheduled (last phase: ` +
      `${details.lastPhase}; ${said})${waiting.length ? `; waiting: ${waiting.join("; ")}` : ""}.`,
    { budgetMs: budgets.podMs, ...details },
  );
}

const minutes = (ms: number) => `${Math.round(ms / 60_000)}m`;
const seconds = (ms: number) => `${Math.round(ms / 1000)}s`;

// ---------------------------------------------------------------------------------------------
// Trackers: the per-wait memory a gateway keeps across watch events (a said wait, a sticky hold)

const sameWait = (a: Wait | undefined, b: Wait | undefined) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/** Placing across events: reports each new wait once. */
export function placingTracker(name: string, onWait: (w: Wait) => void) {
  let said: Wait | undefined;
  return (sandbox: SandboxObject | undefined): PlacingVerdict => {
    const v = placingVerdict(sandbox, name);
    if (v.kind === "waiting" && v.wait && !sameWait(v.wait, said)) {
      said = v.wait;
      onWait(v.wait);
    }
    return v;
  };
}

/** Provisioning across events: each new wait once, the hold made sticky, the budget re-read. */
export function provisionTracker(name: string, startedAt: number, budgets: Budgets, onWait: (w: Wait) => void) {
  let said: Wait | undefined;
  let held = false;
  return (sandbox: SandboxObject | undefined): { verdict: ProvisionVerdict; budget: Budget } => {
    const verdict = provisionVerdict(sandbox, name);
    if (verdict.kind === "waiting") {
      held ||= verdict.held;
      if (verdict.wait && !sameWait(verdict.wait, said)) {
        said = verdict.wait;
        onWait(verdict.wait);
      }
    }
    return { verdict, budget: budgetOf(sandbox, startedAt, held, budgets) };
  };
}

// ---------------------------------------------------------------------------------------------
// Stale slots

/**
 * The `ReposFresh=False` message keyed back to slots for the attach's answer. The operator writes
 * one clause per stale Repo, `Repo "<key>" on node <n> is stale: <error>`, joined by `; `; a slot
 * whose key a clause names gets that clause, and a message naming no key lands on every slot.
 */
export function staleSlots(
  slots: ReadonlyArray<{ slot: string; key: string }>,
  message: string | undefined,
): Record<string, string> | undefined {
  if (!message) return undefined;
  const byKey = new Map<string, string>();
  // Split only where a clause begins: git's own words may hold a "; " too.
  for (const clause of message.split(/; (?=Repo ")/)) {
    const key = /^Repo "([^"]+)"/.exec(clause)?.[1];
    if (key !== undefined) byKey.set(key, clause);
  }
  const stale: Record<string, string> = {};
  for (const { slot, key } of slots) {
    const clause = byKey.size === 0 ? message : byKey.get(key);
    if (clause !== undefined) stale[slot] = clause;
  }
  return Object.keys(stale).length ? stale : undefined;
}
