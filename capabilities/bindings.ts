// The module's bindings, in one place: each kind the operator watches and the controller that hears
// it, the admission reviews it answers (their table is admission/reviews.ts), and how the
// controllers are built and joined. Nothing here runs at import: pepr.ts asks for Pepr's
// capabilities, and in the watching process only builds the controllers and starts the watches
// (decision 0035).
//
// Both controllers run on the project's own watches and work queues (decisions 0006 and 0023):
// the controllers (sandbox/controller.ts, repo/controller.ts) hold the cache, the queue and the
// reconcile; the pure parts decide (sandbox/pod.ts, service.ts, status.ts, lease.ts; repo/caches.ts;
// the rules in rules/). Where a Sandbox becomes Lost: sandbox/status.ts `lossOf`, confirmed in
// sandbox/controller.ts `#ensurePod`.
import type { V1Pod } from "@kubernetes/client-node";
import { K8s, WatchEvent, type GenericClass, type KubernetesObject } from "kubernetes-fluent-client";
import { WatchPhase } from "kubernetes-fluent-client/dist/fluent/shared-types";
import { Capability, Log, a, type PeprValidateRequest } from "pepr";
import cfg from "../package.json";
import { RepoModel, SandboxModel } from "../api/crd";
import { cacheRootFrom, companionNamespaceFrom } from "../api/env";
import { MANAGED_BY, MANAGED_BY_LABEL } from "../api/wire";
import { ApiWriter } from "../lib/api-writer";
import type { OperatorMetrics } from "../lib/operator-metrics";
import { REVIEWS, type Review, type ReviewRequest } from "./admission/reviews";
import { RepoController } from "./repo/repo-controller";
import { podRulesFromEnv } from "./rules/pods";
import { rulesFromEnv } from "./rules/sandbox-rules";
import { SandboxController } from "./sandbox/sandbox-controller";
import { builtPodRefusal, gateRefusal } from "./sandbox/gate";

/** The controllers of the watching process. */
export type Controllers = { sandbox: SandboxController; repo: RepoController };

/** One watch: a kind, which of its objects, and who hears each event. */
export type Watch = {
  /** What is watched, as the logs name it. */
  what: string;
  /** The Pepr capability that declares it to Pepr's build (`capabilities`). */
  capability: "sandbox" | "repo";
  model: GenericClass;
  /** Only objects carrying this label: a selector the API server applies. */
  label?: readonly [string, string];
  /** Objects in the namespaces admission ignores are not heard. */
  skipIgnoredNamespaces?: boolean;
  hear: (c: Controllers, obj: KubernetesObject, deleted: boolean) => void;
};

/** A table entry, typed by its model. */
const watch = <M extends GenericClass>(
  w: Omit<Watch, "model" | "hear"> & {
    model: M;
    hear: (c: Controllers, obj: InstanceType<M>, deleted: boolean) => void;
  },
): Watch => w as unknown as Watch;

const OPERATOR_LABELLED = [MANAGED_BY_LABEL, MANAGED_BY] as const;

/**
 * Everything the watching process watches, and who hears it: one watch per kind, hearing every
 * phase (decision 0023: a kind watched twice, once for its deletes, was held three times).
 */
export const WATCHES: readonly Watch[] = [
  // Every namespace, the ones admission ignores too: the gate refuses those on their status
  // (decision 0017).
  watch({
    what: "Sandbox",
    capability: "sandbox",
    model: SandboxModel,
    hear: (c, sbx, deleted) => c.sandbox.onSandbox(sbx, deleted),
  }),
  // Pods and Services only as the operator labels them (decision 0006: O(Sandboxes), not O(cluster)).
  watch({
    what: "Sandbox pod",
    capability: "sandbox",
    model: a.Pod,
    label: OPERATOR_LABELLED,
    hear: (c, pod, deleted) => c.sandbox.onPod(pod, deleted),
  }),
  watch({
    what: "Sandbox Service",
    capability: "sandbox",
    model: a.Service,
    label: OPERATOR_LABELLED,
    hear: (c, svc, deleted) => c.sandbox.onService(svc, deleted),
  }),
  // Not in the namespaces admission ignores, as Pepr's bindings skipped them when they watched
  // Repos (decision 0035).
  watch({
    what: "Repo",
    capability: "repo",
    model: RepoModel,
    skipIgnoredNamespaces: true,
    hear: (c, repo, deleted) => c.repo.onRepo(repo, deleted),
  }),
];

/**
 * Pepr's capabilities. Admission's Validate bindings are made from the review table (decision
 * 0028). Pepr renders its watcher Deployment only for a module with a Watch binding, and learns the
 * bindings by running the module in its build (PEPR_MODE=build): there, and only there, each watch
 * of the table is also declared as Pepr Watch bindings whose callback never runs (decision 0035).
 */
export function capabilities(env: NodeJS.ProcessEnv = process.env): Capability[] {
  const admission = new Capability({
    name: "admission",
    description: "Enforces the hardened context of Sandboxes and their pods",
  });
  for (const r of REVIEWS) bindReview(admission, r);
  const declared = {
    sandbox: new Capability({
      name: "sandbox",
      description: "Reconciles each Sandbox into one hardened Pod and one Service, and reports on its status",
    }),
    repo: new Capability({
      name: "repo",
      description: "Keeps each Repo's identity and wakes the Sandboxes whose node caches changed",
    }),
  };
  if (env.PEPR_MODE === "build") for (const w of WATCHES) declare(declared[w.capability], w);
  return [admission, declared.sandbox, declared.repo];
}

/**
 * A review as a Pepr Validate binding. The module answers reviews itself, in front of Pepr's
 * server (admission/server.ts, decision 0028); Pepr's own pipeline judges by the same table, and
 * Pepr generates the webhook configurations from these bindings (scripts/webhooks.ts scopes them).
 * Every failure is a denial that says what failed (onError: reject, failurePolicy Fail). The
 * Sandbox defaults are not bound here: the API server writes them in-process, a
 * MutatingAdmissionPolicy (admission/policy.ts, decision 0026).
 */
function bindReview(capability: Capability, r: Review) {
  const w = capability.When(r.model);
  const event =
    r.operations.length === 2 ? w.IsCreatedOrUpdated() : r.operations[0] === "CREATE" ? w.IsCreated() : w.IsUpdated();
  (r.label ? event.WithLabel(r.label) : event).Validate(
    async (req: PeprValidateRequest<SandboxModel | RepoModel | V1Pod>) => {
      const v = await r.judge(req.Request as unknown as ReviewRequest);
      return v.allowed ? req.Approve() : req.Deny(v.message, v.code);
    },
  );
}

/** A watch as Pepr's build sees one: bindings for every phase, as the watch hears. */
function declare(capability: Capability, w: Watch) {
  for (const event of [capability.When(w.model).IsCreatedOrUpdated(), capability.When(w.model).IsDeleted()]) {
    (w.label ? event.WithLabel(...w.label) : event).Watch(() => undefined);
  }
}

/** The namespaces admission ignores: Pepr's alwaysIgnore and PEPR_ADDITIONAL_IGNORED_NAMESPACES. */
export function ignoredNamespaces(env: NodeJS.ProcessEnv = process.env): string[] {
  const extra = (env.PEPR_ADDITIONAL_IGNORED_NAMESPACES ?? "")
    .split(",")
    .map((n) => n.trim())
    .filter(Boolean);
  return [...new Set([...cfg.pepr.alwaysIgnore.namespaces, ...extra])];
}

/**
 * The controllers, built and joined: both write through one writer, so every write of the process
 * waits on the one bucket (decision 0006); the Repo controller adds the caches' mounts to each
 * Sandbox pod and holds its Ready while they are missing, keeps its index of which Sandboxes name
 * which Repo, and wakes only the Sandboxes a Repo change concerns (decision 0010).
 */
export function buildControllers(metrics: OperatorMetrics, env: NodeJS.ProcessEnv = process.env): Controllers {
  const api = new ApiWriter(metrics, env);
  // The reconcile runs admission's rules before it builds a pod (decision 0017), and the pod
  // guard's on the pod it built before writing it (decision 0029).
  const gate = { rules: rulesFromEnv(env), ignoredNamespaces: ignoredNamespaces(env) };
  const podRules = podRulesFromEnv(env);
  const sandbox = new SandboxController({
    api,
    metrics,
    companionNamespace: companionNamespaceFrom(env),
    gate: {
      spec: (sbx) => gateRefusal(sbx, gate),
      pod: (sbx, pod) => builtPodRefusal(sbx, pod, podRules),
    },
  });
  const repo = new RepoController({ sandboxes: sandbox, api, metrics, cacheRoot: cacheRootFrom(env) });
  sandbox.contribute((sbx) => repo.podContribution(sbx));
  sandbox.gateReady((sbx, pod) => repo.readiness(sbx, pod));
  sandbox.onSandboxChange((key, sbx) => repo.onSandboxChange(key, sbx));
  return { sandbox, repo };
}

/** Pepr's watch settings (its PEPR_* variables and defaults), so these watches behave as its own do. */
export function watchConfig(env: NodeJS.ProcessEnv = process.env) {
  const int = (name: string, fallback: number) => {
    const n = Number.parseInt(env[name] ?? "", 10);
    return Number.isFinite(n) ? n : fallback;
  };
  return {
    resyncFailureMax: int("PEPR_RESYNC_FAILURE_MAX", 5),
    resyncDelaySec: int("PEPR_RESYNC_DELAY_SECONDS", 5),
    lastSeenLimitSeconds: int("PEPR_LAST_SEEN_LIMIT_SECONDS", 300),
    relistIntervalSec: int("PEPR_RELIST_INTERVAL_SECONDS", 600),
  };
}

/** The phases that carry an object, as Pepr's bindings hear them; an ERROR event carries a Status. */
const HEARD: readonly string[] = [WatchPhase.Added, WatchPhase.Modified, WatchPhase.Deleted];

/**
 * Starts every watch of the table, in the watching process only (pepr.ts); resolves once each has
 * listed. A kubernetes-fluent-client watch per kind with Pepr's settings, not Pepr's `When(...)`:
 * each of Pepr's bindings is a watch of its own (decision 0023).
 */
export async function startWatches(controllers: Controllers, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const settings = watchConfig(env);
  const ignored = new Set(ignoredNamespaces(env));
  const watchers = WATCHES.map((w) => {
    const kind = K8s(w.model);
    const watcher = (w.label ? kind.WithLabel(...w.label) : kind).Watch((obj, phase) => {
      if (!HEARD.includes(phase)) return;
      const namespace = obj.metadata?.namespace;
      if (w.skipIgnoredNamespaces && namespace && ignored.has(namespace)) return;
      w.hear(controllers, obj, phase === WatchPhase.Deleted);
    }, settings);
    // As Pepr does: a watch that gave up leaves the controller blind, so the process ends and its
    // Deployment starts a new one.
    watcher.events.on(WatchEvent.GIVE_UP, (err: unknown) => {
      Log.error({ err: String(err) }, `a ${w.what} watch gave up: exiting so the process restarts`);
      process.exit(1);
    });
    // As Pepr logged a failing callback of its own watches. The library keeps its copy unchanged
    // when a callback throws, so the next list hands the object again (decision 0078).
    watcher.events.on(WatchEvent.DATA_ERROR, (err: unknown) =>
      Log.error({ err: String(err) }, `a ${w.what} watch event was not handled: the next list hands it again`),
    );
    return watcher;
  });
  await Promise.all(watchers.map((w) => w.start()));
}
