// The workspace lifecycle (xstate v5) against a hand-written fake gateway, under jest's fake timers:
// the machine's transitions, waits, failures and lease are pure logic, so time is the test's.
import type { AttachBody } from "../../api/attach";
import { WorkspaceEvent, WorkspaceView } from "../../api/orchestrator-schemas";
import {
  startWorkspace,
  viewOf,
  type LeaseOptions,
  type WorkspaceActor,
  type WorkspaceInput,
} from "../../orchestrator/workspaces/lifecycle";
import {
  AttachFailure,
  PlaceFailure,
  ProvisionFailure,
  type Attached,
  type Budgets,
  type Continuity,
  type PlaceHooks,
  type PlaceRequest,
  type Provisioned,
  type ProvisionHooks,
  type SandboxGateway,
} from "../../orchestrator/workspaces/sandbox-gateway";
import { deferred } from "./unit-fixtures";

const NAME = "ws-1";
const T0 = Date.parse("2026-03-01T12:00:00.000Z");
const MIN = 60_000;
const ENDPOINT = `http://${NAME}.team-a.svc:8080`;

const ATTACH: AttachBody = {
  slots: [{ slot: "app", url: "https://github.com/acme/app.git", identity: "github.com/acme/app", key: "app-1" }],
  branch: "feat",
};
const PLACE: PlaceRequest = {
  name: NAME,
  image: "harness:1",
  repos: [{ ...ATTACH.slots[0], bound: false }],
  attach: ATTACH,
  labels: { run: NAME, workflow: "api" },
};
const ATTACHED: Attached = {
  answer: { repos: { app: { path: "/work/app/feat", branch: "feat", head: "abc123" } } },
  stale: { app: 'Repo "app-1" on node n is stale: timeout' },
};

/** A gateway whose every answer the test gives, recording what was asked. */
class FakeGateway implements SandboxGateway {
  calls: string[] = [];
  placing = deferred<void>();
  provisioning = deferred<Provisioned>();
  attaching = deferred<Attached>();
  destroying = deferred<void>();
  placeHooks?: PlaceHooks;
  provisionHooks?: ProvisionHooks;
  budgets?: Budgets;
  attachBody?: AttachBody;
  renewals: number[] = [];
  renewError?: Error;
  state: Continuity = { kind: "present" };
  watchers = new Set<(c: Continuity) => void>();

  place(req: PlaceRequest, hooks: PlaceHooks) {
    this.calls.push(`place ${req.name}`);
    this.placeHooks = hooks;
    return this.placing.promise;
  }
  provision(name: string, budgets: Budgets, hooks: ProvisionHooks) {
    this.calls.push(`provision ${name}`);
    this.budgets = budgets;
    this.provisionHooks = hooks;
    return this.provisioning.promise;
  }
  attach(name: string, body: AttachBody) {
    this.calls.push(`attach ${name}`);
    this.attachBody = body;
    return this.attaching.promise;
  }
  async renew(name: string) {
    this.calls.push(`renew ${name}`);
    if (this.renewError) throw this.renewError;
    this.renewals.push(Date.now());
  }
  async continuity(name: string) {
    this.calls.push(`continuity ${name}`);
    return this.state;
  }
  destroy(name: string) {
    this.calls.push(`destroy ${name}`);
    return this.destroying.promise;
  }
  /** Says `c` to every watcher, as the watch would on an event. */
  say(c: Continuity) {
    this.state = c;
    for (const w of this.watchers) w(c);
  }
  count = (prefix: string) => this.calls.filter((c) => c.startsWith(prefix)).length;
}

/** The same gateway, with a continuity watch. */
class WatchingPort extends FakeGateway {
  watchContinuity(_name: string, listener: (c: Continuity) => void) {
    this.watchers.add(listener);
    return () => void this.watchers.delete(listener);
  }
}

let actors: WorkspaceActor[] = [];
let events: WorkspaceEvent[] = [];

function start(gateway: SandboxGateway, input: Partial<WorkspaceInput> = {}, lease: LeaseOptions = {}) {
  const actor = startWorkspace({
    name: NAME,
    gateway,
    place: PLACE,
    attach: ATTACH,
    lease: { random: () => 0.5, jitter: 0, ...lease },
    onEvent: (e) => events.push(e),
    ...input,
  });
  actors.push(actor);
  return actor;
}

/** Lets promises settle without moving the clock. */
const settle = () => jest.advanceTimersByTimeAsync(0);
const stateOf = (actor: WorkspaceActor) => actor.getSnapshot().context.state;
const transitions = () =>
  events.filter((e) => e.type === "transition").map((e) => (e.type === "transition" ? e.to : ""));

beforeEach(() => {
  jest.useFakeTimers({ now: T0 });
  events = [];
  actors = [];
});

afterEach(() => {
  // Everything the lifecycle said and shows is what the API's schemas promise.
  for (const e of events) expect(WorkspaceEvent.parse(e)).toEqual(e);
  for (const a of actors.slice(0, 5)) expect(() => WorkspaceView.parse(viewOf(a.getSnapshot().context))).not.toThrow();
  for (const a of actors) a.stop();
  jest.useRealTimers();
});

describe("the happy path", () => {
  it("places, provisions, attaches and is ready", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    expect(stateOf(actor)).toBe("placing");
    expect(gateway.calls).toEqual([`place ${NAME}`]);

    gateway.placeHooks!.onWritten();
    gateway.placeHooks!.onWait({ kind: "node", message: "0/3 nodes are available" });
    expect(actor.getSnapshot().context.wait).toEqual({ kind: "node", message: "0/3 nodes are available" });
    gateway.placing.resolve();
    await settle();
    expect(stateOf(actor)).toBe("provisioning");
    expect(actor.getSnapshot().context.wait).toBeUndefined();
    expect(gateway.budgets).toEqual({ podMs: 120_000, repoMs: 25 * MIN });

    gateway.provisionHooks!.onWait({ kind: "repo", reason: "RepoPending", message: 'Repo "app-1" pending' });
    gateway.provisioning.resolve({ endpoint: ENDPOINT });
    await settle();
    expect(stateOf(actor)).toBe("attaching");
    expect(gateway.attachBody).toEqual(ATTACH);

    gateway.attaching.resolve(ATTACHED);
    await settle();
    expect(stateOf(actor)).toBe("ready");
    expect(actor.getSnapshot().status).toBe("active");

    expect(transitions()).toEqual(["placing", "provisioning", "attaching", "ready"]);
    expect(events.filter((e) => e.type === "wait").map((e) => e.type === "wait" && e.wait.kind)).toEqual([
      "node",
      "repo",
    ]);
    expect(events[0]).toEqual({ type: "transition", from: null, to: "placing", at: new Date(T0).toISOString() });
    expect(events.find((e) => e.type === "transition" && e.to === "provisioning")).toMatchObject({ from: "placing" });

    const view = viewOf(actor.getSnapshot().context);
    expect(view).toEqual({
      name: NAME,
      state: "ready",
      endpoint: ENDPOINT,
      conditions: [],
      attach: ATTACHED.answer,
      stale: ATTACHED.stale,
      createdAt: new Date(T0).toISOString(),
      readyAt: new Date(T0).toISOString(),
    });
  });

  it("skips the attach for a workspace with no Repo Slot", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway, { attach: undefined });
    gateway.placing.resolve();
    gateway.provisioning.resolve({ endpoint: ENDPOINT });
    await settle();
    expect(stateOf(actor)).toBe("ready");
    expect(gateway.count("attach")).toBe(0);
    expect(transitions()).toEqual(["placing", "provisioning", "ready"]);
  });

  it("passes its budgets to the provision", async () => {
    const gateway = new FakeGateway();
    start(gateway, { budgets: { podMs: 1_000, repoMs: 2_000 } });
    gateway.placing.resolve();
    await settle();
    expect(gateway.budgets).toEqual({ podMs: 1_000, repoMs: 2_000 });
  });

  it("merges what the Sandbox reports into its view", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placeHooks!.onWait({ kind: "quota", message: "exceeded quota" });
    const condition = {
      type: "Scheduled",
      status: "False" as const,
      reason: "QuotaExceeded",
      message: "exceeded quota",
      lastTransitionTime: "2026-03-01T12:00:00Z",
    };
    const view = viewOf(actor.getSnapshot().context, {
      metadata: { name: NAME },
      status: { phase: "Pending", conditions: [condition] },
    });
    expect(view).toMatchObject({
      state: "placing",
      phase: "Pending",
      conditions: [condition],
      wait: { kind: "quota", message: "exceeded quota" },
    });
  });

  it("refuses to start with neither a place request nor a resume", () => {
    expect(() => startWorkspace({ name: NAME, gateway: new FakeGateway() })).toThrow(
      "give a place request or a resume",
    );
  });

  it("goes on when an event listener throws", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway, {
      onEvent: () => {
        throw new Error("listener bug");
      },
    });
    gateway.placing.resolve();
    await settle();
    expect(stateOf(actor)).toBe("provisioning");
  });
});

describe("named failures", () => {
  it("a fence refusal while placing fails it, named", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placing.reject(new PlaceFailure("FenceRefused", "the fence refuses url x", { entries: [] }));
    await settle();
    expect(stateOf(actor)).toBe("failed");
    expect(actor.getSnapshot().status).toBe("done");
    expect(actor.getSnapshot().output).toEqual({
      state: "failed",
      failure: { stage: "place", reason: "FenceRefused", message: "the fence refuses url x", details: { entries: [] } },
    });
    expect(events.at(-1)).toMatchObject({
      type: "transition",
      from: "placing",
      to: "failed",
      failure: { reason: "FenceRefused" },
    });
    expect(gateway.count("renew")).toBe(0);
  });

  it.each([
    ["RepoCloneFailed", { operatorMessage: "fatal" }],
    ["HarnessCrashLoop", { restartCount: 2, lastReason: "Error", exitCode: 1, terminationMessage: "boom" }],
    ["TerminalWaiting", { container: "harness", waitingReason: "InvalidImageName" }],
    ["RunAsNonRoot", { container: "preflight", kubeletMessage: "runAsNonRoot" }],
    ["EffectorEnded", { exitCode: 2 }],
    ["PodBudgetExceeded", { budgetMs: 120_000 }],
    ["RepoBudgetExceeded", { budgetMs: 1_500_000 }],
  ] as const)("a provision that fails with %s fails the workspace, named", async (reason, details) => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placing.resolve();
    await settle();
    gateway.provisioning.reject(new ProvisionFailure(reason, `it failed: ${reason}`, details));
    await settle();
    expect(stateOf(actor)).toBe("failed");
    expect(actor.getSnapshot().context.failure).toEqual({
      stage: "provision",
      reason,
      message: `it failed: ${reason}`,
      details,
    });
    expect(actor.getSnapshot().context.lost).toBeUndefined();
  });

  it("a Sandbox lost while provisioning ends lost, with the operator's reason and the named failure", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placing.resolve();
    await settle();
    gateway.provisioning.reject(new ProvisionFailure("Lost", "lost", { reason: "Evicted", message: "node pressure" }));
    await settle();
    expect(stateOf(actor)).toBe("lost");
    expect(actor.getSnapshot().output).toMatchObject({
      state: "lost",
      lost: { reason: "Evicted", message: "node pressure" },
      failure: { stage: "provision", reason: "Lost" },
    });
    expect(events.at(-1)).toMatchObject({ to: "lost", lost: { reason: "Evicted" } });
  });

  it("a Sandbox lost while placing ends lost", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placing.reject(new PlaceFailure("Lost", "gone", { reason: "Absent", message: "no longer exists" }));
    await settle();
    expect(actor.getSnapshot().output).toMatchObject({ state: "lost", lost: { reason: "Absent" } });
  });

  it("an attach failure fails the workspace, named", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placing.resolve();
    gateway.provisioning.resolve({ endpoint: ENDPOINT });
    await settle();
    gateway.attaching.reject(new AttachFailure("AttachRefused", "the attach failed (500)", { status: 500 }));
    await settle();
    expect(actor.getSnapshot().output).toEqual({
      state: "failed",
      failure: {
        stage: "attach",
        reason: "AttachRefused",
        message: "the attach failed (500)",
        details: { status: 500 },
      },
    });
  });

  it("an unnamed error is a failure named Error, with its words", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placing.reject(new Error("the API server refused the CR: admission denied"));
    await settle();
    expect(actor.getSnapshot().context.failure).toEqual({
      stage: "place",
      reason: "Error",
      message: "the API server refused the CR: admission denied",
    });
  });
});

describe("waits", () => {
  it("reports each wait as an event and keeps the current one in the view", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placeHooks!.onWait({ kind: "quota", message: "exceeded quota: pods" });
    gateway.placeHooks!.onWait({ kind: "node", message: "0/1 nodes: Insufficient cpu" });
    expect(viewOf(actor.getSnapshot().context).wait).toEqual({ kind: "node", message: "0/1 nodes: Insufficient cpu" });
    gateway.placing.resolve();
    await settle();
    gateway.provisionHooks!.onWait({
      kind: "container",
      container: "harness",
      reason: "ImagePullBackOff",
      message: "m",
    });
    gateway.provisionHooks!.onWait({ kind: "repo", reason: "RepoMissing", message: 'no Repo has key "k"' });
    expect(viewOf(actor.getSnapshot().context).wait).toEqual({
      kind: "repo",
      reason: "RepoMissing",
      message: 'no Repo has key "k"',
    });
    gateway.provisioning.resolve({ endpoint: ENDPOINT });
    await settle();
    expect(viewOf(actor.getSnapshot().context).wait).toBeUndefined();
    const waits = events.filter((e) => e.type === "wait");
    expect(waits.map((e) => e.type === "wait" && e.wait.kind)).toEqual(["quota", "node", "container", "repo"]);
    expect(waits[0]).toEqual({
      type: "wait",
      wait: { kind: "quota", message: "exceeded quota: pods" },
      at: new Date(T0).toISOString(),
    });
  });

  it("ignores a wait from a stage it has left (the gateway's hook outlived its call)", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    const hooks = gateway.placeHooks!;
    gateway.placing.resolve();
    await settle();
    hooks.onWait({ kind: "node", message: "late" });
    expect(actor.getSnapshot().context.wait).toBeUndefined();
    expect(events.some((e) => e.type === "wait")).toBe(false);
  });
});

describe("the lease", () => {
  it("starts when the CR is written, while the node wait goes on", async () => {
    const gateway = new FakeGateway();
    start(gateway, {}, { random: () => 0.5 });
    await jest.advanceTimersByTimeAsync(10 * MIN);
    expect(gateway.count("renew")).toBe(0); // not written yet: nothing to renew
    gateway.placeHooks!.onWritten();
    await jest.advanceTimersByTimeAsync(5 * MIN - 1);
    expect(gateway.count("renew")).toBe(0);
    await jest.advanceTimersByTimeAsync(1);
    expect(gateway.count("renew")).toBe(1);
    await jest.advanceTimersByTimeAsync(5 * MIN);
    expect(gateway.count("renew")).toBe(2);
    expect(gateway.count("place")).toBe(1);
  });

  it("starts when the place resolves if the gateway never said it wrote", async () => {
    const gateway = new FakeGateway();
    start(gateway);
    gateway.placing.resolve();
    await settle();
    await jest.advanceTimersByTimeAsync(5 * MIN);
    expect(gateway.count("renew")).toBe(1);
  });

  it("starts once, however often it is told", async () => {
    const gateway = new FakeGateway();
    start(gateway);
    gateway.placeHooks!.onWritten();
    gateway.placeHooks!.onWritten();
    gateway.placing.resolve();
    await settle();
    await jest.advanceTimersByTimeAsync(5 * MIN);
    expect(gateway.count("renew")).toBe(1);
  });

  it("renews every interval through every stage, counting each renewal", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway, {}, { intervalMs: MIN, random: () => 0.5 });
    gateway.placeHooks!.onWritten();
    await jest.advanceTimersByTimeAsync(MIN);
    gateway.placing.resolve();
    await jest.advanceTimersByTimeAsync(MIN);
    gateway.provisioning.resolve({ endpoint: ENDPOINT });
    await jest.advanceTimersByTimeAsync(MIN);
    gateway.attaching.resolve(ATTACHED);
    await jest.advanceTimersByTimeAsync(MIN);
    expect(stateOf(actor)).toBe("ready");
    expect(gateway.renewals).toEqual([T0 + MIN, T0 + 2 * MIN, T0 + 3 * MIN, T0 + 4 * MIN]);
    expect(actor.getSnapshot().context.renewals).toBe(4);
    expect(viewOf(actor.getSnapshot().context).renewedAt).toBe(new Date(T0 + 4 * MIN).toISOString());
    const renewed = events.filter((e) => e.type === "renewed");
    expect(renewed.map((e) => e.type === "renewed" && e.count)).toEqual([1, 2, 3, 4]);
  });

  it("jitters the first delay within +/-20% of the interval, and each later one within +0..20%", async () => {
    // The lowest and the highest random draws: 0.8 (first) or 1.0 (later) and (almost) 1.2 times the interval.
    const draws = [0, 0.999999, 0.25, 0.75, 0];
    let i = 0;
    const gateway = new FakeGateway();
    start(gateway, {}, { jitter: 0.2, random: () => draws[i++ % draws.length] });
    gateway.placeHooks!.onWritten();
    await jest.advanceTimersByTimeAsync(60 * MIN);
    const gaps = gateway.renewals.map((t, k) => t - (k === 0 ? T0 : gateway.renewals[k - 1]));
    expect(gaps.slice(0, 5)).toEqual([
      4 * MIN,
      Math.round(5 * MIN * (1 + 0.2 * 0.999999)),
      5.25 * MIN,
      5.75 * MIN,
      5 * MIN,
    ]);
    expect(gaps[0]).toBeGreaterThanOrEqual(0.8 * 5 * MIN);
    for (const gap of gaps.slice(1)) {
      expect(gap).toBeGreaterThanOrEqual(5 * MIN);
      expect(gap).toBeLessThanOrEqual(1.2 * 5 * MIN);
    }
  });

  it("renews a workspace asking for idleTimeout 1m every 20 s, not at the configured 5m", async () => {
    const gateway = new FakeGateway();
    start(gateway, { place: { ...PLACE, idleTimeout: "1m" } }, { intervalMs: 5 * MIN });
    gateway.placeHooks!.onWritten();
    await jest.advanceTimersByTimeAsync(2 * MIN);
    expect(gateway.renewals).toEqual([1, 2, 3, 4, 5, 6].map((k) => T0 + k * 20_000));
  });

  it("renews a workspace asking for idleTimeout 168h at the configured interval", async () => {
    const gateway = new FakeGateway();
    start(gateway, { place: { ...PLACE, idleTimeout: "168h" } }, { intervalMs: 5 * MIN });
    gateway.placeHooks!.onWritten();
    await jest.advanceTimersByTimeAsync(10 * MIN);
    expect(gateway.renewals).toEqual([T0 + 5 * MIN, T0 + 10 * MIN]);
  });

  it("keeps 1000 workspaces under 1000 / interval renewals a second on average", async () => {
    const gateway = new FakeGateway();
    for (let k = 0; k < 1000; k++) {
      const actor = startWorkspace({
        name: `ws-${k}`,
        gateway,
        resume: { at: "ready", endpoint: ENDPOINT },
        lease: { random: Math.random },
      });
      actors.push(actor);
    }
    await settle();
    const first = gateway.renewals.length; // each renews once at once on a restore
    await jest.advanceTimersByTimeAsync(60 * MIN);
    const perSecond = (gateway.renewals.length - first) / 3600;
    expect(first).toBe(1000);
    // No gap after the first is shorter than the interval: the bound holds for any draws.
    expect(perSecond).toBeLessThanOrEqual(1000 / 300);
    expect(perSecond).toBeGreaterThan((1000 / 300) * 0.8);
  });

  it("retries a failed renewal sooner, and reports it", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway, {}, { intervalMs: 5 * MIN, retryMs: 30_000 });
    gateway.placeHooks!.onWritten();
    gateway.renewError = new Error("etcdserver: request timed out");
    await jest.advanceTimersByTimeAsync(5 * MIN);
    expect(events.filter((e) => e.type === "renew_failed")).toEqual([
      { type: "renew_failed", message: "etcdserver: request timed out", at: new Date(T0 + 5 * MIN).toISOString() },
    ]);
    gateway.renewError = undefined;
    await jest.advanceTimersByTimeAsync(30_000);
    expect(gateway.renewals).toEqual([T0 + 5 * MIN + 30_000]);
    expect(stateOf(actor)).toBe("placing");
  });

  it("treats a failed continuity read as unknown, not loss, and renews anyway", async () => {
    const gateway = new FakeGateway();
    gateway.continuity = async () => {
      throw new Error("watch not synced");
    };
    const actor = start(gateway);
    gateway.placeHooks!.onWritten();
    await jest.advanceTimersByTimeAsync(5 * MIN);
    expect(gateway.renewals).toHaveLength(1);
    expect(stateOf(actor)).toBe("placing");
  });
});

describe("lost", () => {
  async function ready(gateway: FakeGateway, lease: LeaseOptions = {}) {
    const actor = start(gateway, {}, lease);
    gateway.placeHooks!.onWritten();
    gateway.placing.resolve();
    gateway.provisioning.resolve({ endpoint: ENDPOINT });
    gateway.attaching.resolve(ATTACHED);
    await settle();
    expect(stateOf(actor)).toBe("ready");
    return actor;
  }

  it("at the next lease tick when continuity says lost, with the operator's reason", async () => {
    const gateway = new FakeGateway();
    const actor = await ready(gateway);
    gateway.state = { kind: "lost", reason: "PodDeleted", message: "its pod (uid u) was deleted" };
    await jest.advanceTimersByTimeAsync(5 * MIN);
    expect(actor.getSnapshot().output).toEqual({
      state: "lost",
      lost: { reason: "PodDeleted", message: "its pod (uid u) was deleted" },
    });
    expect(events.at(-1)).toMatchObject({
      type: "transition",
      from: "ready",
      to: "lost",
      lost: { reason: "PodDeleted" },
    });
    expect(gateway.count("renew")).toBe(0); // a lost Sandbox is not renewed
    await jest.advanceTimersByTimeAsync(30 * MIN);
    expect(gateway.count("continuity")).toBe(1);
  });

  it("when continuity says absent", async () => {
    const gateway = new FakeGateway();
    const actor = await ready(gateway);
    gateway.state = { kind: "absent" };
    await jest.advanceTimersByTimeAsync(5 * MIN);
    expect(actor.getSnapshot().output).toMatchObject({ state: "lost", lost: { reason: "Absent" } });
  });

  it("at once through a continuity watch", async () => {
    const gateway = new WatchingPort();
    const actor = await ready(gateway);
    gateway.say({ kind: "present" });
    gateway.say({ kind: "lost", reason: "Evicted", message: "The node was low on resource: memory." });
    expect(actor.getSnapshot().output).toMatchObject({ state: "lost", lost: { reason: "Evicted" } });
    expect(gateway.watchers.size).toBe(0); // unsubscribed when the lease stopped
  });

  it("a watch that says absent before it ever said present is not heard as a loss", async () => {
    const gateway = new WatchingPort();
    const actor = start(gateway);
    gateway.placeHooks!.onWritten();
    gateway.watchers.forEach((w) => w({ kind: "absent" }));
    expect(stateOf(actor)).toBe("placing");
    gateway.say({ kind: "present" });
    gateway.say({ kind: "absent" });
    expect(actor.getSnapshot().output).toMatchObject({ state: "lost", lost: { reason: "Absent" } });
  });

  it("while placing or provisioning too, stopping the wait", async () => {
    const gateway = new WatchingPort();
    const actor = start(gateway);
    gateway.placeHooks!.onWritten();
    gateway.say({ kind: "lost", reason: "PodDeleted", message: "deleted" });
    expect(stateOf(actor)).toBe("lost");
    expect(gateway.placeHooks!.signal?.aborted).toBe(true);
  });
});

describe("destroy", () => {
  it("while placing: the place's wait is aborted and the CR deleted", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placeHooks!.onWritten();
    actor.send({ type: "DESTROY" });
    expect(stateOf(actor)).toBe("destroying");
    expect(gateway.placeHooks!.signal?.aborted).toBe(true);
    gateway.destroying.resolve();
    await settle();
    expect(actor.getSnapshot().output).toEqual({ state: "destroyed" });
    expect(transitions()).toEqual(["placing", "destroying", "destroyed"]);
    expect(gateway.calls).toEqual([`place ${NAME}`, `destroy ${NAME}`]);
  });

  it("while placing, before the CR is written (no lease to stop)", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    actor.send({ type: "DESTROY" });
    gateway.destroying.resolve();
    await settle();
    expect(actor.getSnapshot().output).toEqual({ state: "destroyed" });
    expect(gateway.count("destroy")).toBe(1);
  });

  it.each(["provisioning", "attaching", "ready"] as const)("while %s", async (stage) => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placeHooks!.onWritten();
    gateway.placing.resolve();
    if (stage !== "provisioning") gateway.provisioning.resolve({ endpoint: ENDPOINT });
    if (stage === "ready") gateway.attaching.resolve(ATTACHED);
    await settle();
    expect(stateOf(actor)).toBe(stage);
    actor.send({ type: "DESTROY" });
    gateway.destroying.resolve();
    await settle();
    expect(actor.getSnapshot().output).toEqual({ state: "destroyed" });
    expect(gateway.count("destroy")).toBe(1);
    expect(events.at(-2)).toMatchObject({ type: "transition", from: stage, to: "destroying" });
  });

  it("stops the lease before the delete: no renewal after", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placeHooks!.onWritten();
    actor.send({ type: "DESTROY" });
    await jest.advanceTimersByTimeAsync(30 * MIN);
    expect(gateway.count("renew")).toBe(0);
    expect(gateway.count("continuity")).toBe(0);
    expect(stateOf(actor)).toBe("destroying");
  });

  it("a destroy that fails ends failed, named, and the lease stays stopped", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placeHooks!.onWritten();
    actor.send({ type: "DESTROY" });
    gateway.destroying.reject(new Error("connection refused"));
    await settle();
    expect(actor.getSnapshot().output).toEqual({
      state: "failed",
      failure: { stage: "destroy", reason: "Error", message: "connection refused" },
    });
  });

  it("a late loss while destroying changes nothing", async () => {
    const gateway = new WatchingPort();
    const actor = start(gateway);
    gateway.placeHooks!.onWritten();
    gateway.say({ kind: "present" });
    actor.send({ type: "DESTROY" });
    gateway.say({ kind: "absent" });
    expect(stateOf(actor)).toBe("destroying");
    gateway.destroying.resolve();
    await settle();
    expect(stateOf(actor)).toBe("destroyed");
  });

  it("is ignored once the workspace has ended", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway);
    gateway.placing.reject(new Error("x"));
    await settle();
    actor.send({ type: "DESTROY" });
    expect(stateOf(actor)).toBe("failed");
    expect(gateway.count("destroy")).toBe(0);
  });
});

describe("restore", () => {
  it("into ready: no place, no provision, no attach; renews at once, then every interval", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway, {
      place: undefined,
      resume: { at: "ready", endpoint: ENDPOINT, attached: ATTACHED, createdAt: T0 - 60 * MIN },
    });
    expect(stateOf(actor)).toBe("ready");
    await settle();
    expect(gateway.renewals).toEqual([T0]);
    await jest.advanceTimersByTimeAsync(10 * MIN);
    expect(gateway.renewals).toEqual([T0, T0 + 5 * MIN, T0 + 10 * MIN]);
    expect(gateway.count("place") + gateway.count("provision") + gateway.count("attach")).toBe(0);
    expect(events[0]).toEqual({
      type: "transition",
      from: null,
      to: "ready",
      restored: true,
      at: new Date(T0).toISOString(),
    });
    expect(viewOf(actor.getSnapshot().context)).toMatchObject({
      state: "ready",
      endpoint: ENDPOINT,
      attach: ATTACHED.answer,
      createdAt: new Date(T0 - 60 * MIN).toISOString(),
    });
  });

  it("into ready with the Sandbox's idleTimeout 1m: renews at once, then every 20 s (the same rule)", async () => {
    const gateway = new FakeGateway();
    start(gateway, { place: undefined, resume: { at: "ready", endpoint: ENDPOINT, idleTimeout: "1m" } });
    await jest.advanceTimersByTimeAsync(MIN);
    expect(gateway.renewals).toEqual([T0, T0 + 20_000, T0 + 40_000, T0 + MIN]);
  });

  it("into ready, then lost at the next tick", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway, { place: undefined, resume: { at: "ready" } });
    await settle();
    gateway.state = { kind: "lost", reason: "PodDeleted", message: "gone" };
    await jest.advanceTimersByTimeAsync(5 * MIN);
    expect(stateOf(actor)).toBe("lost");
  });

  it("into provisioning: waits for Ready again, never re-places", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway, { place: undefined, resume: { at: "provisioning" } });
    expect(stateOf(actor)).toBe("provisioning");
    await settle();
    expect(gateway.calls).toEqual([`provision ${NAME}`, `continuity ${NAME}`, `renew ${NAME}`]);
    gateway.provisioning.resolve({ endpoint: ENDPOINT });
    gateway.attaching.resolve(ATTACHED);
    await settle();
    expect(stateOf(actor)).toBe("ready");
    expect(gateway.count("place")).toBe(0);
  });

  it("into attaching: attaches again (the Harness's attach is idempotent)", async () => {
    const gateway = new FakeGateway();
    const actor = start(gateway, { place: undefined, resume: { at: "attaching", endpoint: ENDPOINT } });
    expect(stateOf(actor)).toBe("attaching");
    gateway.attaching.resolve(ATTACHED);
    await settle();
    expect(stateOf(actor)).toBe("ready");
    expect(gateway.count("attach")).toBe(1);
  });
});
