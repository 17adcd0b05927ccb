// The Orchestrator's reading of a Sandbox's status (pure). Fixtures are typed SandboxModels; a
// second set goes through the operator's own computeStatus from a Pod, so the two ends of the
// contract (what the operator publishes, what the Orchestrator judges) are tested together.
import type { SandboxModel } from "../../api/crd/models";
import type { Condition } from "../../api/crd/sources/common";
import type { SandboxStatus } from "../../api/crd/sources/sandbox";
import type { RepoNode } from "../../api/crd/sources/repo";
import { repoVerdict, type RepoView } from "../../capabilities/repo/caches";
import { computeStatus, type Observed } from "../../capabilities/sandbox/status";
import { DEFAULT_BUDGETS, ProvisionFailure } from "../../orchestrator/workspaces/sandbox-gateway";
import {
  budgetFailure,
  budgetOf,
  continuityOf,
  lossOf,
  placingTracker,
  placingVerdict,
  placingWaitOf,
  provisionTracker,
  provisionVerdict,
  scheduledAt,
  staleSlots,
  type ProvisionVerdict,
} from "../../orchestrator/workspaces/provision-rules";
import { NAME, NAMESPACE, podOf, readyPod, sandboxOf, serviceOf, unreadyPod } from "./unit-fixtures";

const T = "2026-03-01T12:00:00Z";
const T_MS = Date.parse(T);
const ENDPOINT = `http://${NAME}.${NAMESPACE}.svc:8080`;

const cond = (type: string, status: Condition["status"], reason: string, message = "", at = T): Condition => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: at,
});

function sandbox(status?: SandboxStatus, metadata: SandboxModel["metadata"] = {}): SandboxModel {
  return {
    apiVersion: "core.jr2.dev/v1alpha1",
    kind: "Sandbox",
    metadata: { name: NAME, namespace: NAMESPACE, ...metadata },
    spec: { image: "harness:1" },
    ...(status ? { status } : {}),
  };
}

const scheduled = cond("Scheduled", "True", "Scheduled", "placed on node node-a");
const pending = (extra: Partial<SandboxStatus> = {}, ready = cond("Ready", "False", "PodNotReady", "not ready")) =>
  sandbox({ phase: "Pending", conditions: [scheduled, ready], ...extra });
const readySandbox = (extra: Partial<SandboxStatus> = {}, more: Condition[] = []) =>
  sandbox({
    phase: "Ready",
    endpoint: ENDPOINT,
    conditions: [scheduled, cond("Ready", "True", "PodReady", "the pod is Ready"), ...more],
    ...extra,
  });

function failed(v: ProvisionVerdict): ProvisionFailure {
  if (v.kind !== "failed") throw new Error(`expected a failure, got ${JSON.stringify(v)}`);
  expect(v.failure).toBeInstanceOf(ProvisionFailure);
  expect(v.failure.stage).toBe("provision");
  return v.failure;
}

describe("placing", () => {
  it("waits without a reason while the scheduler has not looked", () => {
    const sb = sandbox({ phase: "Pending", conditions: [cond("Scheduled", "Unknown", "SchedulerPending")] });
    expect(placingVerdict(sb, NAME)).toEqual({ kind: "waiting" });
    expect(placingVerdict(sandbox(), NAME)).toEqual({ kind: "waiting" });
  });

  it("reports a node wait with the scheduler's words", () => {
    const msg = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.";
    const sb = sandbox({ phase: "Pending", conditions: [cond("Scheduled", "False", "Unschedulable", msg)] });
    expect(placingVerdict(sb, NAME)).toEqual({ kind: "waiting", wait: { kind: "node", message: msg } });
  });

  it("reports a quota wait on QuotaExceeded", () => {
    const msg = 'pods "sb" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1';
    const sb = sandbox({ phase: "Pending", conditions: [cond("Scheduled", "False", "QuotaExceeded", msg)] });
    expect(placingWaitOf(sb)).toEqual({ kind: "quota", message: msg });
  });

  it("falls back to the reason when the scheduler gave no message", () => {
    const sb = sandbox({ conditions: [cond("Scheduled", "False", "Unschedulable")] });
    expect(placingWaitOf(sb)).toEqual({ kind: "node", message: "Unschedulable" });
  });

  it("is placed once Scheduled is True, or when an operator already reports Ready", () => {
    expect(placingVerdict(pending(), NAME)).toEqual({ kind: "placed" });
    expect(placingVerdict(sandbox({ phase: "Ready", endpoint: ENDPOINT }), NAME)).toEqual({ kind: "placed" });
  });

  it("fails as Lost when the Sandbox is Lost or gone while it waits", () => {
    const lost = sandbox({ phase: "Lost", conditions: [cond("Lost", "True", "PodDeleted", "its pod was deleted")] });
    const v = placingVerdict(lost, NAME);
    expect(v.kind).toBe("failed");
    if (v.kind !== "failed") return;
    expect(v.failure.reason).toBe("Lost");
    expect(v.failure.details).toEqual({ reason: "PodDeleted", message: "its pod was deleted" });
    const gone = placingVerdict(undefined, NAME);
    expect(gone.kind === "failed" && gone.failure.details?.reason).toBe("Absent");
  });

  it("the tracker says each new wait once", () => {
    const said: unknown[] = [];
    const judge = placingTracker(NAME, (w) => said.push(w));
    const node = (m: string) => sandbox({ conditions: [cond("Scheduled", "False", "Unschedulable", m)] });
    judge(node("a"));
    judge(node("a"));
    judge(node("b"));
    judge(sandbox({ conditions: [cond("Scheduled", "False", "QuotaExceeded", "b")] }));
    expect(judge(pending())).toEqual({ kind: "placed" });
    expect(said).toEqual([
      { kind: "node", message: "a" },
      { kind: "node", message: "b" },
      { kind: "quota", message: "b" },
    ]);
  });
});

describe("provisioning: ready", () => {
  it("is ready only on phase Ready, with the endpoint", () => {
    expect(provisionVerdict(readySandbox(), NAME)).toEqual({ kind: "ready", endpoint: ENDPOINT });
  });

  it("is not ready on the endpoint alone", () => {
    const v = provisionVerdict(pending({ endpoint: ENDPOINT }), NAME);
    expect(v.kind).toBe("waiting");
  });

  it("waits out a Ready status that has no endpoint yet", () => {
    expect(provisionVerdict(sandbox({ phase: "Ready" }), NAME)).toEqual({ kind: "waiting", held: false });
  });

  it("carries ReposFresh=False's message as stale", () => {
    const msg = 'Repo "app-1" on node n is stale: fatal: unable to access';
    const v = provisionVerdict(readySandbox({}, [cond("ReposFresh", "False", "FetchFailed", msg)]), NAME);
    expect(v).toEqual({ kind: "ready", endpoint: ENDPOINT, stale: msg });
    const fresh = provisionVerdict(readySandbox({}, [cond("ReposFresh", "True", "Fetched", "ok")]), NAME);
    expect(fresh).toEqual({ kind: "ready", endpoint: ENDPOINT });
  });
});

describe("provisioning: waits", () => {
  it("is held on RepoMissing and RepoPending, with a repo wait", () => {
    for (const reason of ["RepoMissing", "RepoPending"]) {
      const v = provisionVerdict(pending({}, cond("Ready", "False", reason, `Repo "k": ${reason}`)), NAME);
      expect(v).toEqual({
        kind: "waiting",
        held: true,
        wait: { kind: "repo", reason, message: `Repo "k": ${reason}` },
      });
    }
  });

  it("reports a container wait worth naming, not a routine one", () => {
    const v = provisionVerdict(
      pending({
        waiting: [
          { container: "preflight", reason: "PodInitializing" },
          { container: "harness", reason: "ImagePullBackOff", message: 'Back-off pulling image "x"' },
        ],
      }),
      NAME,
    );
    expect(v).toEqual({
      kind: "waiting",
      held: false,
      wait: {
        kind: "container",
        container: "harness",
        reason: "ImagePullBackOff",
        message: 'Back-off pulling image "x"',
      },
    });
    expect(provisionVerdict(pending(), NAME)).toEqual({ kind: "waiting", held: false });
  });

  it("a single Harness restart is still a pod that may come up", () => {
    const v = provisionVerdict(
      pending({ harness: { restartCount: 1, lastTerminated: { reason: "OOMKilled" } } }),
      NAME,
    );
    expect(v.kind).toBe("waiting");
  });

  it("a CreateContainerConfigError that is not about runAsNonRoot is a wait, not a failure", () => {
    const w = { container: "harness", reason: "CreateContainerConfigError", message: 'secret "x" not found' };
    const v = provisionVerdict(pending({ waiting: [w] }), NAME);
    expect(v).toEqual({
      kind: "waiting",
      held: false,
      wait: { kind: "container", container: "harness", reason: w.reason, message: w.message },
    });
  });
});

describe("provisioning: named failures", () => {
  it("RepoCloneFailed, with the operator's words", () => {
    const msg = 'Repo "app-1" on node node-a: the clone failed: fatal: repository not found';
    const f = failed(provisionVerdict(pending({}, cond("Ready", "False", "RepoCloneFailed", msg)), NAME));
    expect(f.reason).toBe("RepoCloneFailed");
    expect(f.message).toContain(msg);
    expect(f.details).toEqual({ operatorMessage: msg });
  });

  it("HarnessCrashLoop after two ends, quoting reason, exit code and termination message", () => {
    const f = failed(
      provisionVerdict(
        pending({
          harness: {
            restartCount: 2,
            lastTerminated: { reason: "Error", exitCode: 3, message: "node: cannot open shared object\n" },
          },
        }),
        NAME,
      ),
    );
    expect(f.reason).toBe("HarnessCrashLoop");
    expect(f.details).toEqual({
      restartCount: 2,
      lastReason: "Error",
      exitCode: 3,
      terminationMessage: "node: cannot open shared object",
    });
    expect(f.message).toContain("ended 2 times");
    expect(f.message).toContain("Error, exit 3");
    expect(f.message).toContain("node: cannot open shared object");
  });

  it("HarnessCrashLoop with no last end reported still names the count", () => {
    const f = failed(provisionVerdict(pending({ harness: { restartCount: 5 } }), NAME));
    expect(f.reason).toBe("HarnessCrashLoop");
    expect(f.details).toEqual({ restartCount: 5 });
  });

  it.each(["InvalidImageName", "ErrImageNeverPull"])("TerminalWaiting on %s", (reason) => {
    const f = failed(
      provisionVerdict(pending({ waiting: [{ container: "harness", reason, message: "bad ref" }] }), NAME),
    );
    expect(f.reason).toBe("TerminalWaiting");
    expect(f.details).toEqual({ container: "harness", waitingReason: reason, kubeletMessage: "bad ref" });
  });

  it("a failing pull is not terminal: the pod budget decides", () => {
    const v = provisionVerdict(pending({ waiting: [{ container: "harness", reason: "ErrImagePull" }] }), NAME);
    expect(v.kind).toBe("waiting");
  });

  it("RunAsNonRoot, with the one-line fix", () => {
    const message = "container has runAsNonRoot and image will run as root (pod: sb, container: preflight)";
    const f = failed(
      provisionVerdict(
        pending({ waiting: [{ container: "preflight", reason: "CreateContainerConfigError", message }] }),
        NAME,
      ),
    );
    expect(f.reason).toBe("RunAsNonRoot");
    expect(f.message).toContain("numeric");
    expect(f.message).toContain("USER 1000");
    expect(f.details).toEqual({ container: "preflight", kubeletMessage: message });
  });

  it("EffectorEnded, in its own words", () => {
    const f = failed(
      provisionVerdict(
        pending({
          effector: { restartCount: 0, lastTerminated: { reason: "Error", exitCode: 78, message: "no Landlock" } },
        }),
        NAME,
      ),
    );
    expect(f.reason).toBe("EffectorEnded");
    expect(f.details).toEqual({ lastReason: "Error", exitCode: 78, terminationMessage: "no Landlock" });
    expect(f.message).toContain("no Landlock");
  });

  it("Lost, with the operator's reason; deleted and being deleted too", () => {
    const lost = sandbox({ phase: "Lost", conditions: [cond("Lost", "True", "Evicted", "node pressure")] });
    const f = failed(provisionVerdict(lost, NAME));
    expect(f.reason).toBe("Lost");
    expect(f.details).toEqual({ reason: "Evicted", message: "node pressure" });
    expect(failed(provisionVerdict(undefined, NAME)).details?.reason).toBe("Absent");
    expect(failed(provisionVerdict(sandbox({ phase: "Terminating" }), NAME)).details?.reason).toBe("Terminating");
  });

  it("Lost outranks everything else the status says", () => {
    const lost = sandbox({
      phase: "Lost",
      conditions: [cond("Lost", "True", "PodFailed", "x")],
      harness: { restartCount: 4 },
    });
    expect(failed(provisionVerdict(lost, NAME)).reason).toBe("Lost");
  });

  it("a terminal waiting reason outranks a crash loop (it is the cause the kubelet names)", () => {
    const sb = pending({
      harness: { restartCount: 3 },
      waiting: [{ container: "harness", reason: "InvalidImageName" }],
    });
    expect(failed(provisionVerdict(sb, NAME)).reason).toBe("TerminalWaiting");
  });

  it("nothing fails once the Sandbox is Ready, whatever its history", () => {
    const v = provisionVerdict(
      readySandbox({ harness: { restartCount: 3 }, effector: { restartCount: 1, lastTerminated: { exitCode: 1 } } }),
      NAME,
    );
    expect(v.kind).toBe("ready");
  });
});

describe("budgets", () => {
  const budgets = { podMs: 120_000, repoMs: 25 * 60_000 };

  it("counts the pod budget from the scheduling", () => {
    const sb = pending({}, cond("Ready", "False", "PodNotReady", "x"));
    expect(scheduledAt(sb)).toBe(T_MS);
    // A restart long after the scheduling does not get a fresh budget.
    expect(budgetOf(sb, T_MS + 60_000, false, budgets)).toEqual({ kind: "pod", deadline: T_MS + 120_000 });
  });

  it("never counts from a Scheduled time ahead of the provision's start (a clock ahead of ours)", () => {
    expect(budgetOf(pending(), T_MS - 5_000, false, budgets)).toEqual({
      kind: "pod",
      deadline: T_MS - 5_000 + 120_000,
    });
  });

  it("uses the provision's start when the Sandbox says nothing of its scheduling", () => {
    expect(scheduledAt(sandbox())).toBeUndefined();
    expect(budgetOf(undefined, 1_000, false, budgets)).toEqual({ kind: "pod", deadline: 121_000 });
    const bad = sandbox({ conditions: [cond("Scheduled", "True", "Scheduled", "", "garbage")] });
    expect(scheduledAt(bad)).toBeUndefined();
  });

  it("switches to the repo budget once held", () => {
    expect(budgetOf(pending(), T_MS, true, budgets)).toEqual({ kind: "repo", deadline: T_MS + 25 * 60_000 });
  });

  it("the tracker makes the hold sticky and says each new wait once", () => {
    const said: unknown[] = [];
    const judge = provisionTracker(NAME, T_MS, DEFAULT_BUDGETS, (w) => said.push(w));
    expect(judge(pending()).budget.kind).toBe("pod");
    const held = pending({}, cond("Ready", "False", "RepoPending", 'Repo "k" is not yet present on node n'));
    expect(judge(held).budget.kind).toBe("repo");
    expect(judge(held).budget.kind).toBe("repo");
    // Held once, the repo budget stays: the pod came up, whatever it does next.
    expect(judge(pending()).budget).toEqual({ kind: "repo", deadline: T_MS + DEFAULT_BUDGETS.repoMs });
    expect(said).toEqual([{ kind: "repo", reason: "RepoPending", message: 'Repo "k" is not yet present on node n' }]);
    expect(judge(readySandbox()).verdict).toEqual({ kind: "ready", endpoint: ENDPOINT });
  });

  it("names the budget that ran out, with the last word on Ready", () => {
    const last = pending({ waiting: [{ container: "harness", reason: "ImagePullBackOff", message: "back-off" }] });
    const pod = budgetFailure(NAME, { kind: "pod", deadline: 0 }, budgets, last);
    expect(pod.reason).toBe("PodBudgetExceeded");
    expect(pod.message).toContain("120s");
    expect(pod.message).toContain("harness: ImagePullBackOff (back-off)");
    expect(pod.details).toMatchObject({ budgetMs: 120_000, lastPhase: "Pending", readyReason: "PodNotReady" });
    const repo = budgetFailure(
      NAME,
      { kind: "repo", deadline: 0 },
      budgets,
      pending({}, cond("Ready", "False", "RepoPending", "m")),
    );
    expect(repo.reason).toBe("RepoBudgetExceeded");
    expect(repo.message).toContain("25m");
    expect(repo.details).toMatchObject({ budgetMs: 25 * 60_000, readyReason: "RepoPending", readyMessage: "m" });
    expect(budgetFailure(NAME, { kind: "pod", deadline: 0 }, budgets, undefined).details).toMatchObject({
      lastPhase: "absent",
    });
  });
});

describe("continuity", () => {
  it("present, absent, lost with the reason", () => {
    expect(continuityOf(readySandbox())).toEqual({ kind: "present" });
    expect(continuityOf(pending())).toEqual({ kind: "present" });
    expect(continuityOf(undefined)).toEqual({ kind: "absent" });
    const lost = sandbox({ phase: "Lost", conditions: [cond("Lost", "True", "Preempted", "by the scheduler")] });
    expect(continuityOf(lost)).toEqual({ kind: "lost", reason: "Preempted", message: "by the scheduler" });
  });

  it("a Lost phase without its condition still says Lost", () => {
    expect(lossOf(sandbox({ phase: "Lost" }))).toEqual({
      reason: "Lost",
      message: "the operator reports its pod gone or ended",
    });
  });

  it("a Sandbox being deleted is lost", () => {
    expect(continuityOf(sandbox(undefined, { deletionTimestamp: new Date(T_MS) }))).toMatchObject({
      kind: "lost",
      reason: "Terminating",
    });
  });
});

describe("stale slots", () => {
  const slots = [
    { slot: "app", key: "app-1" },
    { slot: "lib", key: "lib-2" },
    { slot: "docs", key: "docs-3" },
  ];

  it("keys each clause back to its slots", () => {
    const m = 'Repo "app-1" on node n is stale: fatal: x; y; Repo "lib-2" on node n is stale: timeout';
    expect(staleSlots(slots, m)).toEqual({
      app: 'Repo "app-1" on node n is stale: fatal: x; y',
      lib: 'Repo "lib-2" on node n is stale: timeout',
    });
  });

  it("puts a message naming no key on every slot, and says nothing without a message", () => {
    expect(staleSlots(slots.slice(0, 1), "the caches are stale")).toEqual({ app: "the caches are stale" });
    expect(staleSlots(slots, undefined)).toBeUndefined();
    expect(staleSlots(slots, 'Repo "other" on node n is stale: x')).toBeUndefined();
  });
});

// The operator's computeStatus (capabilities/sandbox/status.ts) from real Pod shapes, judged here.
describe("through the operator's own status", () => {
  const now = new Date(T_MS + 30_000);
  const statusOf = (o: Partial<Observed>) => computeStatus({ sandbox: sandboxOf(), now, ...o });
  const judge = (status: SandboxStatus) => provisionVerdict(sandbox(status), NAME);

  it("a Ready pod with its Service is ready at the Service's endpoint", () => {
    expect(judge(statusOf({ pod: readyPod(), service: serviceOf() }))).toEqual({ kind: "ready", endpoint: ENDPOINT });
  });

  it("a Ready pod without its Service is not", () => {
    expect(judge(statusOf({ pod: readyPod() })).kind).toBe("waiting");
  });

  it("an unschedulable pod is a node wait with the scheduler's message", () => {
    const message = "0/2 nodes are available: 2 Insufficient cpu.";
    const pod = podOf({ conditions: [{ type: "PodScheduled", status: "False", reason: "Unschedulable", message }] });
    expect(placingWaitOf(sandbox(statusOf({ pod })))).toEqual({ kind: "node", message });
  });

  it("a quota refusal of the pod create is a quota wait", () => {
    const refusal = { reason: "QuotaExceeded", message: "exceeded quota: compute" };
    expect(placingWaitOf(sandbox(statusOf({ refusal })))).toEqual({ kind: "quota", message: refusal.message });
  });

  it("a Harness ended twice is a crash loop, quoted", () => {
    const pod = unreadyPod({
      containerStatuses: [
        {
          name: "harness",
          restartCount: 2,
          ready: false,
          state: { waiting: { reason: "CrashLoopBackOff", message: "back-off 20s" } },
          lastState: { terminated: { reason: "Error", exitCode: 1, message: "Error: listen EADDRINUSE :8080" } },
        },
      ],
    });
    const f = failed(judge(statusOf({ pod, service: serviceOf() })));
    expect(f.reason).toBe("HarnessCrashLoop");
    expect(f.details).toMatchObject({
      exitCode: 1,
      lastReason: "Error",
      terminationMessage: "Error: listen EADDRINUSE :8080",
    });
  });

  it("a root image refused by the kubelet in the init step is RunAsNonRoot", () => {
    const pod = unreadyPod({
      initContainerStatuses: [
        {
          name: "preflight",
          restartCount: 0,
          ready: false,
          state: {
            waiting: {
              reason: "CreateContainerConfigError",
              message: "container has runAsNonRoot and image will run as root",
            },
          },
        },
      ],
    });
    expect(failed(judge(statusOf({ pod, service: serviceOf() }))).reason).toBe("RunAsNonRoot");
  });

  it("an ended effector is EffectorEnded", () => {
    const pod = unreadyPod({
      containerStatuses: [
        { name: "harness", restartCount: 0, ready: true, state: { running: {} } },
        {
          name: "effector",
          restartCount: 1,
          ready: false,
          lastState: { terminated: { reason: "Error", exitCode: 2, message: "cannot confine" } },
        },
      ],
    });
    expect(failed(judge(statusOf({ pod, service: serviceOf() }))).reason).toBe("EffectorEnded");
  });

  it("a Lost Sandbox is Lost with the operator's reason", () => {
    const loss = { reason: "PodDeleted", message: "its pod (uid u) was deleted" };
    const f = failed(judge(statusOf({ loss })));
    expect(f.details).toEqual(loss);
  });

  it("Repo gates: RepoPending holds, RepoCloneFailed fails, a stale fetch is ready and stale", () => {
    const node = "node-a";
    const asked = new Date(T_MS);
    const spec = { repos: [{ key: "app-1", url: "https://git.example.com/team/app.git" }] };
    const base = { pod: readyPod(), service: serviceOf() };
    const withRepo = (entry: RepoNode | undefined) => {
      const view = (): RepoView | undefined =>
        entry ? { name: "app", key: "app-1", nodes: { [node]: entry } } : undefined;
      const v = repoVerdict(spec, node, asked, view);
      return statusOf({ ...base, gates: v.gates, ...(v.fresh ? { extraConditions: [v.fresh] } : {}) });
    };
    expect(judge(withRepo(undefined))).toMatchObject({ kind: "waiting", held: true, wait: { reason: "RepoMissing" } });
    expect(judge(withRepo({ phase: "Cloning" }))).toMatchObject({
      kind: "waiting",
      held: true,
      wait: { reason: "RepoPending" },
    });
    expect(failed(judge(withRepo({ phase: "Failed", error: "fatal: auth" }))).reason).toBe("RepoCloneFailed");
    const stale = judge(withRepo({ phase: "Present", fetchedAt: "2026-03-01T11:00:00Z", error: "fatal: timeout" }));
    expect(stale).toMatchObject({ kind: "ready", stale: 'Repo "app-1" on node node-a is stale: fatal: timeout' });
  });
});
