// The Sandbox controller: a cache of what the watches delivered (Sandboxes whole; Pods and Services
// only those the operator labels, decision 0006), a work queue, and the level-based reconcile that turns
// one Sandbox into one Pod, one Service and a status. Running it twice gives the same result.
import type { kind } from "kubernetes-fluent-client";
import { Log } from "pepr";
import { SandboxModel, type SandboxSpec } from "../../api/crd";
import { API_VERSION } from "../../api/crd/sources/common";
import { apiError, getOrUndefined, isConflict, isNotFound, type ApiError, type ApiWriter } from "../../lib/api-writer";
import { applyRequest, kubeRequest, paths } from "../../lib/kube";
import type { OperatorMetrics } from "../../lib/operator-metrics";
import { statusMergePatch } from "../../lib/patch";
import { WorkQueue } from "../../lib/queue";
import { ObjectCache } from "../../lib/cache";
import { COMPANION_NAMESPACE, KEEPALIVE_ANNOTATION, OPERATOR_FIELD_MANAGER, SANDBOX_NAME_LABEL } from "../../api/wire";
import { sandboxPolicies } from "../../api/sandbox-policies";
import {
  NOT_ENABLED_RETRY_MS,
  POLICIES_CHECKED_FOR_MS,
  isRbacRefusal,
  namespaceNotEnabled,
  policyNeedsWrite,
} from "./policies";
import { KeepaliveSightings, leaseOf } from "./lease";
import { buildPod, type PodContribution } from "./pod";
import { buildService } from "./service";
import {
  computeStatus,
  firstStatusWaitMs,
  lossOf,
  statusEvents,
  type PodLoss,
  type ReadyGate,
  type PodRefusal,
} from "./status";
import type { Condition } from "../../api/crd";
import { SCHEDULED_REASON } from "../../api/conditions";
import { specAppliedCondition, withSpecDigest } from "./spec-changes";

/** A fixed number of workers; one Sandbox is never reconciled twice at once (decision 0034). */
export const SANDBOX_WORKERS = 16;
/** Beyond those, workers only a key whose pod news finishes its Sandbox may take (decision 0034). */
export const SANDBOX_WORKERS_FOR_FINISHING = 16;

export type Sandbox = SandboxModel & {
  metadata: { name: string; namespace: string; uid: string };
  spec: SandboxSpec;
};

/** A pod this process created whose uid no status records yet (decision 0031), and when it was
 * created and first seen placed (performance.now(); decision 0043). */
type OwnCreate = { sandboxUID: string; podUID: string; at: number; placedAt?: number };

/** Raised after a refused pod create is written to status, so the queue retries with backoff. */
class RetryLater extends Error {}

/** Contributions other capabilities add to a Sandbox's pod (the Repo caches). */
export type PodContributor = (sandbox: Sandbox) => PodContribution | undefined;

/** What another capability says about a Sandbox's Ready (the Repo caches): holds, and conditions. */
export type ReadyContributor = (
  sandbox: Sandbox,
  pod: kind.Pod | undefined,
) => { gates?: ReadyGate[]; conditions?: Omit<Condition, "lastTransitionTime">[] };

/** Why no pod may be built from a Sandbox (`spec`), or written as built (`pod`); undefined when it may. */
export type PodGate = {
  spec: (sandbox: Sandbox) => PodRefusal | undefined;
  pod: (sandbox: Sandbox, pod: kind.Pod) => PodRefusal | undefined;
};

/** What the controller is built with. */
export type SandboxControllerParts = {
  /** The process's one writer: every write waits on its bucket (decision 0006). */
  api: ApiWriter;
  metrics: OperatorMetrics;
  /** The checks a Sandbox passes before its pod is built, and its pod before it is written (gate.ts). */
  gate: PodGate;
  /** Where the egress point and the Orchestrator run: the namespaces' policies admit them there
   * alone (api/sandbox-policies.ts; default COMPANION_NAMESPACE, decision 0067). */
  companionNamespace?: string;
};

/** Told of every Sandbox the cache takes in (or, undefined, lets go), by key. */
export type SandboxListener = (key: string, sandbox: Sandbox | undefined) => void;

const keyOf = (namespace: string | undefined, name: string | undefined) => `${namespace}/${name}`;

export class SandboxController {
  readonly sandboxes = new ObjectCache<Sandbox>();
  readonly pods = new ObjectCache<kind.Pod>();
  readonly services = new ObjectCache<kind.Service>();
  readonly #warnedKeepalive = new Map<string, string>();
  /** The pods this process created whose uid no status records yet (decision 0031): while a first
   * status waits, this is the record that makes a vanished pod Lost rather than replaced. */
  readonly #created = new Map<string, OwnCreate>();
  /** When each keepalive value was first seen: a future one counts from then (leaseOf). */
  readonly #keepalives = new KeepaliveSightings();
  readonly #contributors: PodContributor[] = [];
  readonly #readiness: ReadyContributor[] = [];
  readonly #listeners: SandboxListener[] = [];
  readonly #gate: PodGate;
  /** Per namespace: its NetworkPolicies' last check (decision 0047), shared by the workers while it
   * runs, and until when it stands: undefined when they are as wanted, a refusal when the namespace
   * is not opted in. */
  readonly #policies = new Map<string, { until: number; result: Promise<PodRefusal | undefined> }>();
  readonly #api: ApiWriter;
  readonly #companions: string;
  readonly #metrics: OperatorMetrics;
  readonly queue: WorkQueue;

  /** Built once, in the watching process (capabilities/bindings.ts). */
  constructor({ api, metrics, gate, companionNamespace }: SandboxControllerParts) {
    this.#companions = companionNamespace ?? COMPANION_NAMESPACE;
    this.#api = api;
    this.#metrics = metrics;
    this.#gate = gate;
    this.queue = new WorkQueue({
      name: "sandbox",
      workers: SANDBOX_WORKERS,
      extraForFirst: SANDBOX_WORKERS_FOR_FINISHING,
      reconcile: (key) => this.reconcile(key),
      baseDelayMs: 200,
      maxDelayMs: 10_000,
      onError: (key, err, retryInMs) => {
        const e = err instanceof RetryLater ? undefined : apiError(err);
        const [namespace, name] = key.split("/");
        if (err instanceof RetryLater) Log.info({ namespace, name, retryInMs }, `Sandbox waits: ${err.message}`);
        else
          Log.warn(
            { namespace, name, retryInMs, status: e?.status, reason: e?.reason },
            `reconcile failed: ${e?.message}`,
          );
      },
      onDone: (_key, result, ms, err) => {
        // A refused create waiting for its retry is not a failure of the operator.
        this.#metrics.reconciled("sandbox", err instanceof RetryLater ? "waiting" : result, ms);
        this.#metrics.queueDepth("sandbox", this.queue.depth);
      },
    });
  }

  /** Lets another capability add volumes, mounts or affinity to every pod built from now on. */
  contribute(c: PodContributor) {
    this.#contributors.push(c);
  }

  /** Lets another capability hold a Sandbox's Ready and add conditions to its status. */
  gateReady(c: ReadyContributor) {
    this.#readiness.push(c);
  }

  /** Lets another capability keep an index of the Sandboxes (the Repo capability's key index). */
  onSandboxChange(l: SandboxListener) {
    this.#listeners.push(l);
  }

  // --- watch events: update the cache, then enqueue the Sandbox's key ---

  onSandbox(sbx: SandboxModel, deleted: boolean) {
    const key = keyOf(sbx.metadata?.namespace, sbx.metadata?.name);
    if (deleted) {
      this.#store(key, undefined, sbx as Sandbox);
      this.#warnedKeepalive.delete(key);
      this.#keepalives.forget(key);
      this.#created.delete(key);
      return;
    }
    if (!this.#store(key, sbx as Sandbox)) return;
    this.queue.add(key);
  }

  /** Caches a Sandbox unless the cache holds a newer one; keeps the phase gauge. */
  #store(key: string, next: Sandbox | undefined, gone?: Sandbox): boolean {
    const old = this.sandboxes.get(key);
    if (next && !this.sandboxes.set(key, next)) return false;
    if (!next) this.sandboxes.delete(key, gone);
    const phase = (s: Sandbox | undefined) => (s ? (s.status?.phase ?? "Pending") : undefined);
    this.#metrics.phase(phase(old), phase(this.sandboxes.get(key)));
    for (const l of this.#listeners) l(key, this.sandboxes.get(key));
    return true;
  }

  /** When the pod event that finishes a Sandbox arrived, until its finishing status is written. */
  readonly #finishSeen = new Map<string, number>();

  onPod(pod: kind.Pod, deleted: boolean) {
    const key = keyOf(pod.metadata?.namespace, pod.metadata?.labels?.[SANDBOX_NAME_LABEL]);
    if (deleted) this.pods.delete(key, pod);
    else this.pods.set(key, pod);
    // A pod that turned Ready, ended or went finishes its Sandbox: that goes first (decision 0020).
    if (deleted || finishes(pod)) {
      if (!this.#finishSeen.has(key)) this.#finishSeen.set(key, performance.now());
      this.queue.addFirst(key);
    } else this.queue.add(key);
  }

  onService(svc: kind.Service, deleted: boolean) {
    const key = keyOf(svc.metadata?.namespace, svc.metadata?.labels?.[SANDBOX_NAME_LABEL]);
    if (deleted) this.services.delete(key, svc);
    else this.services.set(key, svc);
    this.queue.add(key);
  }

  // --- the reconcile ---

  async reconcile(key: string): Promise<void | { requeueAfterMs: number }> {
    const sbx = this.sandboxes.get(key);
    if (!sbx) return;
    const now = Date.now();

    // The one judge of the lease: leaseOf, on the cached Sandbox (the Orchestrator only renews).
    const seenAt = this.#keepalives.seenAt(key, sbx.metadata.annotations?.[KEEPALIVE_ANNOTATION], now);
    const lease = leaseOf(sbx, now, seenAt);
    if (now >= lease.deadline) return this.#reap(sbx);

    if (sbx.metadata.deletionTimestamp) {
      // Being deleted (a finalizer elsewhere, or foreground deletion): say so, create nothing.
      const pod = this.pods.get(key);
      await this.#writeStatus(
        key,
        sbx,
        computeStatus({ sandbox: sbx, pod, service: this.services.get(key), now: new Date(now) }),
      );
      return;
    }

    // The second gate (decision 0017): a spec admission would refuse, or one from a namespace it
    // ignores, never becomes a pod or a Service; the status and an Event say why. A pod built
    // from an admitted spec is left as it is: a later spec never reaches it anyway.
    const gated = this.pods.get(key) || sbx.status?.podUID ? undefined : this.#gate.spec(sbx);
    if (gated) {
      await this.#writeStatus(key, sbx, computeStatus({ sandbox: sbx, refusal: gated, now: new Date(now) }));
      return { requeueAfterMs: lease.deadline - now };
    }

    // The namespace's NetworkPolicies before any pod of it runs (decision 0047). A namespace the
    // installation did not opt in gets no pod: the status names it and the fix, and the Sandbox is
    // looked at again slowly, since only the installation mends it.
    const notEnabled = sbx.status?.phase === "Lost" ? undefined : await this.#ensurePolicies(sbx.metadata.namespace);
    if (notEnabled && !this.pods.get(key) && !sbx.status?.podUID) {
      await this.#writeStatus(key, sbx, computeStatus({ sandbox: sbx, refusal: notEnabled, now: new Date(now) }));
      return { requeueAfterMs: Math.min(NOT_ENABLED_RETRY_MS, lease.deadline - now) };
    }

    // The pod and the Service in parallel: one round trip less for a new Sandbox.
    const cachedService = this.services.get(key);
    const [podResult, serviceResult] = await Promise.allSettled([
      this.#ensurePod(key, sbx),
      cachedService || sbx.status?.phase === "Lost" ? cachedService : this.#ensureService(key, sbx),
    ]);
    if (podResult.status === "rejected") throw podResult.reason;
    const { pod: placed, refusal, loss } = podResult.value;
    // A Service that could not be made yet holds back the endpoint, not the rest of the status.
    const service = serviceResult.status === "fulfilled" ? serviceResult.value : undefined;
    // Events that arrived while this reconcile waited on the API server are in the cache by now
    // (kwok often reports a pod Ready before its create has answered): use the newest copy.
    const newest = this.pods.get(key);
    const pod = placed && newest?.metadata?.uid === placed.metadata?.uid ? newest : placed;

    const said = this.#readiness.map((r) => r(sbx, pod));
    const applied = loss ? undefined : specAppliedCondition(sbx.spec, pod);
    const status = computeStatus({
      sandbox: sbx,
      pod,
      service,
      refusal,
      loss,
      gates: said.flatMap((x) => x.gates ?? []),
      extraConditions: [...said.flatMap((x) => x.conditions ?? []), ...(applied ? [applied] : [])],
      now: new Date(now),
    });
    // A new Sandbox's first status waits a moment for its pod's news (decisions 0031 and 0043):
    // counted from the create while the pod is not placed, from its placement once it is.
    const created = this.#ownCreate(key, sbx);
    const at = performance.now();
    if (created && pod?.spec?.nodeName && created.placedAt === undefined) created.placedAt = at;
    const since = created && {
      createdMs: at - created.at,
      ...(created.placedAt !== undefined ? { placedMs: at - created.placedAt } : {}),
    };
    const awaitsCaches = (sbx.spec?.repos?.length ?? 0) > 0;
    const wait = serviceResult.status === "fulfilled" ? firstStatusWaitMs(sbx.status, status, since, awaitsCaches) : 0;
    if (wait > 0) return { requeueAfterMs: Math.min(wait, lease.deadline - now) };
    await this.#writeStatus(key, sbx, status);
    // Last, so the Warning also tells an observer that this reconcile is done.
    this.#warnInvalidKeepalive(key, sbx, lease.invalidKeepalive);
    if (refusal?.reason === SCHEDULED_REASON.NamespaceNotEnabled)
      return { requeueAfterMs: Math.min(NOT_ENABLED_RETRY_MS, lease.deadline - now) };
    if (refusal) throw new RetryLater(`pod create refused: ${refusal.reason}: ${refusal.message}`);
    if (serviceResult.status === "rejected") throw serviceResult.reason;
    // Look again at the lease's deadline: no periodic scan of every Sandbox.
    return { requeueAfterMs: lease.deadline - now };
  }

  /** The Sandbox's one pod: created when it never had one, confirmed by a direct GET before it is called lost. */
  async #ensurePod(key: string, sbx: Sandbox): Promise<{ pod?: kind.Pod; refusal?: PodRefusal; loss?: PodLoss }> {
    if (sbx.status?.phase === "Lost") return {};
    const recorded = sbx.status?.podUID ?? this.#ownCreate(key, sbx)?.podUID;
    let pod = this.pods.get(key);
    if (pod && !ownedBy(pod, sbx)) pod = undefined;

    if (!pod && !recorded) return this.#createPod(key, sbx);

    if (!pod || lossOf(pod, recorded, false)) {
      // The cache may lag: only the API server's own answer makes a Sandbox Lost (decision 0006).
      const fresh = await this.#getPod(sbx);
      if (fresh) this.pods.set(key, fresh);
      else this.pods.delete(key);
      const mine = fresh && ownedBy(fresh, sbx) ? fresh : undefined;
      if (!mine && !recorded) return this.#createPod(key, sbx);
      const loss = lossOf(mine, recorded, true);
      return { pod: mine, loss };
    }
    return { pod };
  }

  async #createPod(key: string, sbx: Sandbox): Promise<{ pod?: kind.Pod; refusal?: PodRefusal }> {
    const parts = this.#contributors.map((c) => c(sbx)).filter((p): p is PodContribution => !!p);
    const built = withSpecDigest(buildPod(sbx, parts), sbx.spec);
    // The pod guard's rules, on exactly what is written: the operator's own creates skip the
    // webhook (decision 0029).
    const refusal = this.#gate.pod(sbx, built);
    if (refusal) return { refusal };
    try {
      const pod = await this.#api.write("Pod.create", () =>
        kubeRequest<kind.Pod>("POST", paths.pods(sbx.metadata.namespace), built),
      );
      this.pods.set(key, pod);
      if (pod.metadata?.uid)
        this.#created.set(key, { sandboxUID: sbx.metadata.uid, podUID: pod.metadata.uid, at: performance.now() });
      return { pod };
    } catch (err) {
      if (isConflict(err)) {
        const existing = await this.#getPod(sbx);
        if (existing && ownedBy(existing, sbx)) {
          this.pods.set(key, existing);
          return { pod: existing };
        }
        // An earlier Sandbox of the same name still has its pod: the collector is taking it.
        throw new RetryLater(`pod ${sbx.metadata.name} of an earlier Sandbox of this name is still being deleted`);
      }
      const refusal = refusalOf(apiError(err), sbx.metadata.namespace);
      if (!refusal) throw err;
      return { refusal };
    }
  }

  /** The namespace's two NetworkPolicies as wanted, checked at most once per POLICIES_CHECKED_FOR_MS
   * (a namespace not opted in: per NOT_ENABLED_RETRY_MS); written only when absent or different. */
  #ensurePolicies(namespace: string): Promise<PodRefusal | undefined> {
    const now = Date.now();
    const held = this.#policies.get(namespace);
    if (held && held.until > now) return held.result;
    const entry = { until: Number.POSITIVE_INFINITY, result: this.#checkPolicies(namespace) };
    this.#policies.set(namespace, entry);
    entry.result.then(
      (refusal) => (entry.until = Date.now() + (refusal ? NOT_ENABLED_RETRY_MS : POLICIES_CHECKED_FOR_MS)),
      () => this.#policies.get(namespace) === entry && this.#policies.delete(namespace),
    );
    return entry.result;
  }

  async #checkPolicies(namespace: string): Promise<PodRefusal | undefined> {
    try {
      for (const wanted of sandboxPolicies(namespace, this.#companions)) {
        const path = paths.networkPolicy(namespace, wanted.metadata.name);
        const live = await getOrUndefined(() => kubeRequest<{ spec?: unknown }>("GET", path));
        if (!policyNeedsWrite(live, wanted)) continue;
        await this.#api.write("NetworkPolicy.apply", () => applyRequest(path, wanted, OPERATOR_FIELD_MANAGER));
        Log.info({ namespace, name: wanted.metadata.name }, "NetworkPolicy written");
      }
      return undefined;
    } catch (err) {
      const e = apiError(err);
      if (isRbacRefusal(e)) return namespaceNotEnabled(namespace);
      throw e;
    }
  }

  /** This process's create of this very Sandbox's pod, while no status records it (decision 0031). */
  #ownCreate(key: string, sbx: Sandbox): OwnCreate | undefined {
    const c = this.#created.get(key);
    return c && c.sandboxUID === sbx.metadata.uid ? c : undefined;
  }

  async #ensureService(key: string, sbx: Sandbox): Promise<kind.Service | undefined> {
    try {
      const svc = await this.#api.write("Service.create", () =>
        kubeRequest<kind.Service>("POST", paths.services(sbx.metadata.namespace), buildService(sbx)),
      );
      this.services.set(key, svc);
      return svc;
    } catch (err) {
      if (!isConflict(err)) throw err;
      const svc = await getOrUndefined(() =>
        kubeRequest<kind.Service>("GET", paths.service(sbx.metadata.namespace, sbx.metadata.name)),
      );
      if (svc) this.services.set(key, svc);
      return svc;
    }
  }

  /** Writes status only when it changed (decision 0006: every write wakes every client's watch). */
  async #writeStatus(key: string, sbx: Sandbox, status: NonNullable<Sandbox["status"]>) {
    const patch = statusMergePatch(sbx.status, status);
    if (!patch) return;
    // A status that finishes a Sandbox (Ready, Lost) goes before new work (decision 0020).
    const lane = status.phase === "Ready" || status.phase === "Lost" ? "finish" : "start";
    const updated = await this.#api.write(
      "Sandbox.status",
      () =>
        kubeRequest<Sandbox>(
          "PATCH",
          paths.sandboxStatus(sbx.metadata.namespace, sbx.metadata.name),
          { status: patch },
          "application/merge-patch+json",
        ),
      lane,
    );
    this.#store(key, updated as Sandbox);
    // The status records the pod now (a Lost one too, lossOf names it): the in-memory record is done.
    if (status.podUID) this.#created.delete(key);
    if (lane === "finish") {
      // The operator's own share of pod Ready -> Sandbox Ready: from the pod event to this write.
      const seen = this.#finishSeen.get(key);
      if (seen !== undefined) this.#metrics.finished(seen);
    }
    this.#finishSeen.delete(key);
    for (const e of statusEvents(sbx.status, status)) this.#event(sbx, e.type, e.reason, e.message);
    Log.debug(
      { namespace: sbx.metadata.namespace, name: sbx.metadata.name, phase: status.phase },
      "Sandbox status written",
    );
  }

  async #reap(sbx: Sandbox): Promise<void> {
    const { name, namespace } = sbx.metadata;
    try {
      // Background propagation: the garbage collector takes the pod and Service. Only the Sandbox
      // as judged: a keepalive renewed since (a newer resourceVersion) is a 409, and the watch
      // brings the renewed Sandbox back to the lease's judge.
      await this.#api.write(
        "Sandbox.delete",
        () =>
          kubeRequest("DELETE", `${paths.sandbox(namespace, name)}?propagationPolicy=Background`, {
            apiVersion: "v1",
            kind: "DeleteOptions",
            preconditions: { uid: sbx.metadata.uid, resourceVersion: sbx.metadata.resourceVersion },
          }),
        "finish",
      );
    } catch (err) {
      if (isConflict(err)) {
        Log.info({ namespace, name }, "not reaped: the Sandbox changed since its lease was judged");
        return;
      }
      if (isNotFound(err)) return;
      throw err;
    }
    Log.info({ namespace, name }, `reaped Sandbox: no keepalive within spec.idleTimeout ${sbx.spec.idleTimeout}`);
    this.#event(sbx, "Normal", "Reaped", `no keepalive for spec.idleTimeout (${sbx.spec.idleTimeout}): deleted`);
  }

  #getPod(sbx: Sandbox): Promise<kind.Pod | undefined> {
    return getOrUndefined(() => kubeRequest<kind.Pod>("GET", paths.pod(sbx.metadata.namespace, sbx.metadata.name)));
  }

  #warnInvalidKeepalive(key: string, sbx: Sandbox, value: string | undefined) {
    if (value === undefined || this.#warnedKeepalive.get(key) === value) return;
    this.#warnedKeepalive.set(key, value);
    this.#event(
      sbx,
      "Warning",
      "KeepaliveInvalid",
      `annotation jr2.dev/keepalive is not an RFC 3339 time (${JSON.stringify(value.slice(0, 64))}): ` +
        "it counts as absent; write the time, e.g. 2026-01-02T15:04:05Z",
    );
  }

  #event(sbx: Sandbox, type: "Normal" | "Warning", reason: string, message: string) {
    const { name, namespace, uid } = sbx.metadata;
    void this.#api.recordEvent(
      { apiVersion: API_VERSION, kind: "Sandbox", name, namespace, uid },
      type,
      reason,
      message,
      (err) => Log.debug({ namespace, name, err: String(err) }, "event not recorded"),
    );
  }
}

/** A pod event whose news finishes its Sandbox: Ready, or ended (its Sandbox is Lost). */
const finishes = (pod: kind.Pod) =>
  pod.status?.phase === "Failed" ||
  pod.status?.phase === "Succeeded" ||
  !!pod.metadata?.deletionTimestamp ||
  !!pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");

const ownedBy = (obj: { metadata?: { ownerReferences?: { uid: string }[] } }, sbx: Sandbox) =>
  !!obj.metadata?.ownerReferences?.some((o) => o.uid === sbx.metadata.uid);

/** A pod create the API server refused for a reason worth waiting on, named (pure). */
export function refusalOf(e: ApiError, namespace: string): PodRefusal | undefined {
  if (isRbacRefusal(e)) return namespaceNotEnabled(namespace);
  if (e.status === 403 && /exceeded quota/i.test(e.message))
    return { reason: SCHEDULED_REASON.QuotaExceeded, message: e.message };
  if (e.status === 403 && /no PriorityClass with name/i.test(e.message)) {
    return { reason: SCHEDULED_REASON.PriorityClassNotFound, message: e.message };
  }
  if (e.status === 403 || e.status === 422 || e.status === 400) {
    return {
      reason: e.status === 422 ? SCHEDULED_REASON.PodInvalid : e.reason || SCHEDULED_REASON.CreateRefused,
      message: e.message,
    };
  }
  return undefined;
}
