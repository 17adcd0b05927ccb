// The lease loop of several Orchestrators (decision 0079): this replica's member Lease renewed,
// the shard Leases watched, and every tick the plan (shard-plan.ts) carried out: shards taken,
// renewed, handed over or given up as lost. Every write of a shard Lease carries the
// resourceVersion it was decided on, so of two replicas deciding on the same sight of it only one
// writes; a renewal refused that way means another replica holds it now. Listeners hear each change
// one at a time; a loss is told and awaited before the shard is written again (or given up), a
// gain after its Lease was written.
import { K8s } from "kubernetes-fluent-client";
import { V1Lease } from "@kubernetes/client-node";
import { kubeRequest } from "../../lib/kube";
import { ApiError } from "../../lib/api-error";
import {
  ORCHESTRATOR_LEASE_LABEL,
  PEER_URL_ANNOTATION,
  SHARD_COUNT,
  memberLeaseName,
  shardLeaseName,
} from "../../api/wire";
import { shardOf, type Owner, type Ownership, type OwnershipChange } from "./ownership";
import {
  expired,
  liveMembers,
  plan,
  type Action,
  type Held,
  type MemberSeen,
  type ShardSeen,
  type ShardTiming,
} from "./shard-plan";

type Lease = {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: {
    holderIdentity?: string | null;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
};

export type ShardLeaseTiming = ShardTiming & {
  /** How often the plan is evaluated (also on every change the watch sees). */
  tickMs: number;
};

/** The decision's timing: a dead replica's shards are taken within about 15 s. */
export const DEFAULT_SHARD_TIMING: ShardLeaseTiming = {
  leaseDurationMs: 12_000,
  renewEveryMs: 4_000,
  renewDeadlineMs: 8_000,
  tickMs: 1_000,
};

/** The watch lists again this often (never more often than every 10 s: one list per replica). */
const RELIST_SECONDS = 10;

export type ShardLeasesOptions = {
  namespace: string;
  identity: string;
  peerUrl: string;
  log?: (entry: Record<string, unknown>) => void;
  count?: number;
  timing?: Partial<ShardLeaseTiming>;
};

const GROUP_PATH = "/apis/coordination.k8s.io/v1/namespaces";
const MEMBER_PREFIX = memberLeaseName("");
const SHARD_NAME = new RegExp(`^${shardLeaseName(0).replace(/0$/, "")}(\\d+)$`);

/** A Lease's MicroTime: six fractional digits (the API server's RFC3339Micro). */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

/** Whether `next` is older than `prev`: only when both are the integers etcd hands out; otherwise
 * opaque, and taken as news. A watch event may land after the answer to this replica's own later
 * write; it must not put the older Lease back. */
function older(next: string, prev: string | undefined): boolean {
  return prev !== undefined && /^\d+$/.test(next) && /^\d+$/.test(prev) && BigInt(next) < BigInt(prev);
}

type Observed = { rv: string; seen: ShardSeen; lease?: Lease };
type Member = { rv: string; seen: MemberSeen; url?: string };
/** `adopting`: its Lease written, its gain not yet heard (the workspaces in it not yet adopted). */
type Mine = Held & { rv: string; adopting?: boolean };

export class ShardLeases implements Ownership {
  readonly identity: string;
  readonly count: number;
  readonly #namespace: string;
  readonly #peerUrl: string;
  readonly #log: (entry: Record<string, unknown>) => void;
  readonly #timing: ShardLeaseTiming;

  /** Each shard Lease as seen (undefined before the first read). */
  readonly #shards: Array<Observed | undefined>;
  readonly #members = new Map<string, Member>();
  /** The shards this replica holds, with the resourceVersion of its own last write of each. */
  readonly #held = new Map<number, Mine>();
  /** Shards with a write in flight, and the write. */
  readonly #writing = new Map<number, Promise<unknown>>();
  /** Shards whose loss is being told: nothing else happens to them until it was heard. */
  readonly #telling = new Set<number>();
  readonly #inflight = new Set<Promise<unknown>>();
  #memberRenewedAt: number | undefined;
  /** Gone members whose Lease this replica deleted (or tried to): once each. */
  readonly #swept = new Set<string>();
  #memberWriting = false;

  readonly #listeners = new Set<(change: OwnershipChange) => void | Promise<void>>();
  #changes: Promise<void> = Promise.resolve();
  readonly #waiters = new Set<() => void>();

  #watcher?: { close(): void };
  #tick?: NodeJS.Timeout;
  #evalQueued = false;
  #joined = false;
  #stopping = false;
  #gained = 0;
  #lost = 0;

  constructor(opts: ShardLeasesOptions) {
    this.identity = opts.identity;
    this.count = opts.count ?? SHARD_COUNT;
    this.#namespace = opts.namespace;
    this.#peerUrl = opts.peerUrl;
    this.#log = opts.log ?? (() => {});
    this.#timing = { ...DEFAULT_SHARD_TIMING, ...opts.timing };
    const t = this.#timing;
    if (!(t.renewEveryMs < t.renewDeadlineMs && t.renewDeadlineMs < t.leaseDurationMs))
      throw new Error(
        `ShardLeases timing: renewEveryMs (${t.renewEveryMs}) < renewDeadlineMs (${t.renewDeadlineMs}) < ` +
          `leaseDurationMs (${t.leaseDurationMs}) must hold, or a holder could act past the moment another takes over: fix the timing`,
      );
    this.#shards = Array.from({ length: this.count }, () => undefined);
  }

  get joined(): boolean {
    return this.#joined;
  }

  stats(): { held: number; gained: number; lost: number } {
    return { held: this.owned().length, gained: this.#gained, lost: this.#lost };
  }

  /** Writes the member Lease, reads the Leases, starts the watch and the tick; resolves once
   * joined (the first plan's writes go on after it). */
  async start(): Promise<void> {
    if (this.#joined || this.#stopping) throw new Error(`ShardLeases ${this.identity}: start() called twice`);
    await this.#writeMember();
    const list = await kubeRequest<{ items?: Lease[] }>(
      "GET",
      `${this.#collection()}?labelSelector=${encodeURIComponent(ORCHESTRATOR_LEASE_LABEL)}`,
    );
    const now = Date.now();
    for (const lease of list.items ?? []) this.#observe(lease, false, now);
    for (let i = 0; i < this.count; i++)
      this.#shards[i] ??= { rv: "", seen: { holder: "", changedAt: now, durationMs: this.#timing.leaseDurationMs } };
    const watcher = K8s(V1Lease, {
      kindOverride: { group: "coordination.k8s.io", version: "v1", kind: "Lease", plural: "leases" },
    })
      .InNamespace(this.#namespace)
      .WithLabel(ORCHESTRATOR_LEASE_LABEL)
      .Watch((lease, phase) => this.#observe(lease as Lease, phase === "DELETED", Date.now()), {
        relistIntervalSec: RELIST_SECONDS,
      });
    this.#watcher = watcher;
    this.#joined = true;
    this.#tick = setInterval(() => this.#evaluate(), this.#timing.tickMs);
    this.#evaluate();
    // The watch starts with a list of its own; the one above already counts as the first read.
    void watcher.start().catch((err: unknown) => this.#warn("the shard Lease watch did not start", err));
  }

  /** Hands every held shard over: its loss told and awaited, then its Lease given up; then the
   * member Lease deleted. */
  async stop(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    const giving = [...this.#held.entries()].filter(([, h]) => !h.releasing).map(([s]) => s);
    for (const s of giving) this.#held.get(s)!.releasing = true;
    this.#wake();
    // Renewals go on (the tick still runs) while the listeners stop the shards' workspaces.
    await this.#tell({ gained: [], lost: giving });
    clearInterval(this.#tick);
    this.#tick = undefined;
    this.#watcher?.close();
    await this.#settled();
    await Promise.all([...this.#held.keys()].map((s) => this.#release(s)));
    this.#held.clear();
    try {
      await kubeRequest("DELETE", `${this.#collection()}/${memberLeaseName(this.identity)}`);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) this.#warn("the member Lease was not deleted", err);
    }
    this.#joined = false;
    await this.#changes;
    this.#wake();
  }

  shardOf(workspace: string): number {
    return shardOf(workspace, this.count);
  }

  ownerOf(workspace: string): Owner {
    const shard = this.shardOf(workspace);
    const now = Date.now();
    // Held but not yet adopted: nobody serves it for that moment (a call waits for the adoption).
    if (this.#holds(shard, now)) return this.#held.get(shard)!.adopting ? { kind: "none" } : { kind: "self" };
    const seen = this.#shards[shard]?.seen;
    if (!seen || seen.holder === "" || seen.holder === this.identity || expired(seen, now)) return { kind: "none" };
    const url = this.#members.get(seen.holder)?.url;
    if (!url || !this.#live(now).includes(seen.holder)) return { kind: "none" };
    return { kind: "peer", identity: seen.holder, url };
  }

  owns(workspace: string): boolean {
    return this.#holds(this.shardOf(workspace), Date.now());
  }

  owned(): number[] {
    const now = Date.now();
    return [...this.#held.keys()].filter((s) => this.#holds(s, now)).sort((a, b) => a - b);
  }

  waitForOwner(workspace: string, ms: number, signal?: AbortSignal): Promise<Owner> {
    const first = this.ownerOf(workspace);
    if (first.kind !== "none" || signal?.aborted) return Promise.resolve(first);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#waiters.delete(check);
        signal?.removeEventListener("abort", done);
        resolve(this.ownerOf(workspace));
      };
      const check = () => {
        if (this.ownerOf(workspace).kind !== "none") done();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done);
      this.#waiters.add(check);
    });
  }

  peers(): Array<{ identity: string; url: string }> {
    const out: Array<{ identity: string; url: string }> = [];
    for (const identity of this.#live(Date.now())) {
      const url = this.#members.get(identity)?.url;
      if (identity !== this.identity && url) out.push({ identity, url });
    }
    return out;
  }

  onChange(listener: (change: OwnershipChange) => void | Promise<void>): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #holds(shard: number, now: number): boolean {
    const h = this.#held.get(shard);
    return !!h && !h.releasing && now - h.renewedAt <= this.#timing.renewDeadlineMs;
  }

  #live(now: number): string[] {
    return liveMembers({
      me: this.identity,
      now,
      timing: this.#timing,
      members: [...this.#members.values()].map((m) => m.seen),
      memberRenewedAt: this.#joined && !this.#stopping ? this.#memberRenewedAt : undefined,
    });
  }

  #collection(): string {
    return `${GROUP_PATH}/${encodeURIComponent(this.#namespace)}/leases`;
  }

  /** Takes in one Lease as read or watched, or written by this replica. */
  #observe(lease: Lease, deleted: boolean, now: number): void {
    const name = lease.metadata?.name ?? "";
    const rv = lease.metadata?.resourceVersion ?? "";
    const durationMs = (lease.spec?.leaseDurationSeconds ?? this.#timing.leaseDurationMs / 1000) * 1000;
    const holder = lease.spec?.holderIdentity ?? "";
    const shardMatch = SHARD_NAME.exec(name);
    if (shardMatch) {
      const shard = Number(shardMatch[1]);
      if (shard >= this.count) return;
      const prev = this.#shards[shard];
      if (deleted) {
        // A late DELETED of an older incarnation: the one seen since stands.
        if (prev && prev.rv !== "" && older(rv, prev.rv)) return;
        this.#shards[shard] = {
          rv: "",
          seen: { holder: "", changedAt: now, durationMs: this.#timing.leaseDurationMs },
        };
      } else {
        if (prev && (prev.rv === rv || older(rv, prev.rv))) return;
        this.#shards[shard] = { rv, lease, seen: { holder, changedAt: now, durationMs } };
      }
    } else if (name.startsWith(MEMBER_PREFIX)) {
      const identity = name.slice(MEMBER_PREFIX.length);
      const prev = this.#members.get(identity);
      if (deleted) {
        if (prev && older(rv, prev.rv)) return;
        this.#members.delete(identity);
      } else {
        if (prev && (prev.rv === rv || older(rv, prev.rv))) return;
        const url = lease.metadata?.annotations?.[PEER_URL_ANNOTATION];
        this.#members.set(identity, { rv, url, seen: { identity, changedAt: now, durationMs } });
      }
    } else return;
    this.#queueEvaluate();
  }

  #queueEvaluate(): void {
    if (this.#evalQueued || !this.#joined) return;
    this.#evalQueued = true;
    setImmediate(() => {
      this.#evalQueued = false;
      this.#evaluate();
    });
  }

  /** One pass of the plan: losses first, then hand-overs, gains, renewals. */
  #evaluate(): void {
    if (!this.#joined) return;
    const now = Date.now();
    this.#sweepMembers(now);
    const shards = this.#shards.map((o) => o?.seen);
    const { actions } = plan({
      me: this.identity,
      now,
      count: this.count,
      timing: this.#timing,
      shards,
      members: [...this.#members.values()].map((m) => m.seen),
      memberRenewedAt: this.#stopping ? undefined : this.#memberRenewedAt,
      held: this.#held,
    });
    const of = (kind: Action["kind"]) =>
      actions.flatMap((a) => (a.kind === kind && "shard" in a ? [a.shard] : [])).filter((s) => s !== undefined);

    const lost: number[] = [];
    for (const s of of("lose")) {
      const h = this.#held.get(s)!;
      this.#held.delete(s);
      if (!h.releasing) lost.push(s);
    }
    if (lost.length) this.#loseTold(lost, "its renewal deadline passed");

    if (!this.#stopping) {
      const handing = of("release").filter((s) => !this.#held.get(s)!.releasing);
      if (handing.length) this.#handOver(handing);
      const taking = of("acquire").filter((s) => !this.#held.has(s) && !this.#writing.has(s) && !this.#telling.has(s));
      if (taking.length) this.#acquireAll(taking);
    }
    for (const s of of("renew")) if (!this.#writing.has(s)) this.#track(this.#writeOn(s, () => this.#renew(s)));
    if (actions.some((a) => a.kind === "renewMember") && !this.#memberWriting && !this.#stopping)
      this.#track(this.#renewMember());
    this.#wake();
  }

  /**
   * Deletes the member Leases of replicas gone for ten Lease durations: every process has an
   * identity of its own (decision 0079), so each restart and each rollout leaves one behind. Any
   * replica may; the resourceVersion precondition keeps a member that came back.
   */
  #sweepMembers(now: number): void {
    for (const [identity, m] of this.#members) {
      if (identity === this.identity || this.#swept.has(identity)) continue;
      if (now - m.seen.changedAt <= 10 * Math.max(m.seen.durationMs, this.#timing.leaseDurationMs)) continue;
      this.#swept.add(identity);
      this.#track(
        kubeRequest("DELETE", `${this.#collection()}/${memberLeaseName(identity)}`, {
          preconditions: { resourceVersion: m.rv },
        }).catch((err: unknown) => {
          if (!(err instanceof ApiError && (err.status === 404 || err.status === 409)))
            this.#warn(`the member Lease of ${identity}, gone, was not deleted`, err);
        }),
      );
    }
  }

  /** Tells losses already taken out of #held; the shards stay untouched until they were heard. */
  #loseTold(lost: number[], why: string): void {
    for (const s of lost) this.#telling.add(s);
    this.#log({ level: "warn", message: `shards lost: ${why}`, identity: this.identity, shards: lost });
    this.#track(this.#tell({ gained: [], lost }).finally(() => lost.forEach((s) => this.#telling.delete(s))));
  }

  /** Hands shards over to their desired holders: their loss heard first, then the Leases freed. */
  #handOver(shards: number[]): void {
    for (const s of shards) this.#held.get(s)!.releasing = true;
    this.#log({ level: "info", message: "shards handed over", identity: this.identity, shards });
    this.#track(
      (async () => {
        await this.#tell({ gained: [], lost: shards });
        await Promise.all(shards.map((s) => this.#release(s)));
      })(),
    );
  }

  #acquireAll(shards: number[]): void {
    const writes = shards.map((s) => this.#writeOn(s, () => this.#acquire(s)));
    this.#track(
      (async () => {
        const won: number[] = [];
        for (const [i, w] of writes.entries()) if (await w) won.push(shards[i]);
        if (won.length === 0) return;
        this.#log({ level: "info", message: "shards gained", identity: this.identity, shards: won });
        await this.#tell({ gained: won, lost: [] });
        // Adopted: calls for its workspaces are served here from now on (ownerOf says self).
        for (const s of won) {
          const h = this.#held.get(s);
          if (h) h.adopting = false;
        }
        this.#wake();
      })(),
    );
  }

  /** Writes this replica as the holder of a shard over the Lease as seen; true when it did. */
  async #acquire(shard: number): Promise<boolean> {
    const sentAt = Date.now();
    const observed = this.#shards[shard];
    const name = shardLeaseName(shard);
    const spec = {
      holderIdentity: this.identity,
      leaseDurationSeconds: Math.ceil(this.#timing.leaseDurationMs / 1000),
      acquireTime: microTime(sentAt),
      renewTime: microTime(sentAt),
    };
    try {
      let lease: Lease;
      if (!observed?.lease) {
        lease = await kubeRequest<Lease>("POST", this.#collection(), {
          apiVersion: "coordination.k8s.io/v1",
          kind: "Lease",
          metadata: { name, namespace: this.#namespace, labels: { [ORCHESTRATOR_LEASE_LABEL]: "shard" } },
          spec: { ...spec, leaseTransitions: 0 },
        });
      } else {
        const before = observed.lease.spec ?? {};
        const transitions = (before.leaseTransitions ?? 0) + (before.holderIdentity === this.identity ? 0 : 1);
        // A merge patch that carries the resourceVersion is refused (409) if the Lease moved on.
        lease = await kubeRequest<Lease>(
          "PATCH",
          `${this.#collection()}/${name}`,
          { metadata: { resourceVersion: observed.rv }, spec: { ...spec, leaseTransitions: transitions } },
          "application/merge-patch+json",
        );
      }
      if (this.#stopping) {
        // Stopped meanwhile: hand it straight back.
        this.#held.set(shard, { renewedAt: sentAt, releasing: true, rv: lease.metadata?.resourceVersion ?? "" });
        this.#observe(lease, false, Date.now());
        return false;
      }
      this.#held.set(shard, {
        renewedAt: sentAt,
        releasing: false,
        rv: lease.metadata?.resourceVersion ?? "",
        adopting: true,
      });
      this.#observe(lease, false, Date.now());
      return true;
    } catch (err) {
      // 409: another replica wrote it (or created it) since it was seen; 404: deleted. Read again.
      if (err instanceof ApiError && (err.status === 409 || err.status === 404)) await this.#reread(shard);
      else this.#warn(`shard Lease ${name} was not taken`, err);
      return false;
    }
  }

  async #renew(shard: number): Promise<void> {
    const mine = this.#held.get(shard);
    if (!mine) return;
    const sentAt = Date.now();
    const name = shardLeaseName(shard);
    try {
      const lease = await kubeRequest<Lease>(
        "PATCH",
        `${this.#collection()}/${name}`,
        {
          metadata: { resourceVersion: mine.rv },
          spec: {
            holderIdentity: this.identity,
            leaseDurationSeconds: Math.ceil(this.#timing.leaseDurationMs / 1000),
            renewTime: microTime(sentAt),
          },
        },
        "application/merge-patch+json",
      );
      // Lost meanwhile (its deadline passed while the write was under way): it stays lost.
      if (this.#held.get(shard) === mine) {
        mine.renewedAt = sentAt;
        mine.rv = lease.metadata?.resourceVersion ?? mine.rv;
      }
      this.#observe(lease, false, Date.now());
    } catch (err) {
      if (err instanceof ApiError && (err.status === 409 || err.status === 404)) {
        // Another replica holds it now (or it was deleted): lost, told at once.
        if (this.#held.get(shard) === mine) {
          this.#held.delete(shard);
          if (!mine.releasing) this.#loseTold([shard], `shard Lease ${name} was written by another replica`);
        }
        await this.#reread(shard);
      } else this.#warn(`shard Lease ${name} was not renewed`, err);
    }
  }

  /** Gives up a held shard's Lease (holder cleared over this replica's own last write). */
  async #release(shard: number): Promise<void> {
    for (let w = this.#writing.get(shard); w; w = this.#writing.get(shard)) await w;
    await this.#writeOn(shard, () => this.#releaseNow(shard));
  }

  async #releaseNow(shard: number): Promise<void> {
    const mine = this.#held.get(shard);
    if (!mine) return;
    const name = shardLeaseName(shard);
    try {
      const lease = await kubeRequest<Lease>(
        "PATCH",
        `${this.#collection()}/${name}`,
        { metadata: { resourceVersion: mine.rv }, spec: { holderIdentity: null } },
        "application/merge-patch+json",
      );
      this.#observe(lease, false, Date.now());
    } catch (err) {
      // 409/404: another replica holds it already; otherwise it expires by itself.
      if (!(err instanceof ApiError && (err.status === 409 || err.status === 404)))
        this.#warn(`shard Lease ${name} was not given up: it expires unrenewed instead`, err);
    } finally {
      if (this.#held.get(shard) === mine) this.#held.delete(shard);
      this.#wake();
    }
  }

  /** Runs one write of a shard's Lease, marked in flight until it ends (it never rejects). */
  #writeOn<T>(shard: number, write: () => Promise<T>): Promise<T | undefined> {
    const w = write().catch((err: unknown) => {
      this.#warn(`a write of shard Lease ${shardLeaseName(shard)} failed`, err);
      return undefined;
    });
    const marked = w.finally(() => {
      if (this.#writing.get(shard) === marked) this.#writing.delete(shard);
    });
    this.#writing.set(shard, marked);
    return marked;
  }

  async #reread(shard: number): Promise<void> {
    try {
      const lease = await kubeRequest<Lease>("GET", `${this.#collection()}/${shardLeaseName(shard)}`);
      this.#observe(lease, false, Date.now());
    } catch (err) {
      if (err instanceof ApiError && err.status === 404)
        this.#observe({ metadata: { name: shardLeaseName(shard) } }, true, Date.now());
      else this.#warn(`shard Lease ${shardLeaseName(shard)} was not read`, err);
    }
  }

  #memberBody(now: number) {
    return {
      metadata: {
        labels: { [ORCHESTRATOR_LEASE_LABEL]: "member" },
        annotations: { [PEER_URL_ANNOTATION]: this.#peerUrl },
      },
      spec: {
        holderIdentity: this.identity,
        leaseDurationSeconds: Math.ceil(this.#timing.leaseDurationMs / 1000),
        renewTime: microTime(now),
      },
    };
  }

  /** Creates or renews the member Lease (only this replica writes it: no precondition). */
  async #writeMember(): Promise<void> {
    const sentAt = Date.now();
    const name = memberLeaseName(this.identity);
    const body = this.#memberBody(sentAt);
    let lease: Lease;
    try {
      lease = await kubeRequest<Lease>("PATCH", `${this.#collection()}/${name}`, body, "application/merge-patch+json");
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      lease = await kubeRequest<Lease>("POST", this.#collection(), {
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name, namespace: this.#namespace, ...body.metadata },
        spec: { ...body.spec, acquireTime: microTime(sentAt) },
      });
    }
    this.#memberRenewedAt = sentAt;
    this.#observe(lease, false, Date.now());
  }

  async #renewMember(): Promise<void> {
    this.#memberWriting = true;
    try {
      await this.#writeMember();
    } catch (err) {
      this.#warn(`member Lease ${memberLeaseName(this.identity)} was not renewed`, err);
    } finally {
      this.#memberWriting = false;
    }
  }

  /** Tells one change to every listener, one change at a time; resolves once it was heard. */
  #tell(change: OwnershipChange): Promise<void> {
    if (change.gained.length === 0 && change.lost.length === 0) return this.#changes;
    this.#gained += change.gained.length;
    this.#lost += change.lost.length;
    const told = this.#changes.then(async () => {
      for (const listener of [...this.#listeners]) {
        try {
          await listener(change);
        } catch (err) {
          this.#warn("a shard change listener failed", err);
        }
      }
    });
    this.#changes = told;
    return told;
  }

  #track(p: Promise<unknown>): void {
    const t = p
      .catch((err: unknown) => this.#warn("a shard Lease step failed", err))
      .finally(() => {
        this.#inflight.delete(t);
        this.#wake();
      });
    this.#inflight.add(t);
  }

  /** Waits until nothing is in flight. */
  async #settled(): Promise<void> {
    while (this.#inflight.size) await Promise.all([...this.#inflight]);
  }

  #wake(): void {
    for (const check of [...this.#waiters]) check();
  }

  #warn(message: string, err: unknown): void {
    this.#log({
      level: "warn",
      message,
      identity: this.identity,
      detail: err instanceof Error ? err.message : String(err),
    });
  }
}
