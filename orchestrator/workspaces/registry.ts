// The registry of workspace actors: what the HTTP API serves (api-server.ts Workspaces). One xstate
// actor per workspace, every event kept for its stream; on boot, the Sandboxes an Orchestrator
// wrote are read back from the one watch and each actor is rebuilt in the state the Sandbox's
// status says, renewing again at once (restart re-attach, decision 0011). Several Orchestrators
// share the workspaces by shard (decision 0079): this one runs actors only for the shards its
// replica holds, names a new workspace inside one of them, adopts a shard it gains the same way a
// restart restores, and lets a shard it loses go (actors stopped, the CRs left for the new owner).
import type { EgressLogEntry } from "../../api/egress-point";
import { randomBytes } from "node:crypto";
import { attachBodyOf, readAttach } from "./attach-body";
import {
  FINAL_STATES,
  type CreateWorkspaceBody,
  type WorkspaceEvent,
  type WorkspaceView,
} from "../../api/orchestrator-schemas";
import { HttpError } from "../../api/orchestrator-errors";
import { fenceSlots, pushCredentials, type CredentialEntry } from "./fence";
import {
  DEFAULT_POD_CONFIG,
  effectSecretsFor,
  effectorImageFor,
  egressWithinCeiling,
  runtimeClassFor,
  type PodConfig,
} from "./pod-config";
import { SizeError, splitSize } from "./size";
import { RUN_LABEL, TENANT_LABEL } from "../../api/wire";
import { SoleOwnership, type Ownership } from "../replicas/ownership";
import { lossOf } from "./provision-rules";
import {
  startWorkspace,
  viewOf,
  type LeaseOptions,
  type Resume,
  type WorkspaceActor,
  type WorkspaceInput,
} from "./lifecycle";
import type { Workspaces } from "./service";
import type { Budgets, PlaceRequest, SandboxGateway } from "./sandbox-gateway";
import type { SandboxWatch } from "./sandbox-watch";
import type { SandboxModel } from "../../api/crd";

export type RegistryOptions = {
  gateway: SandboxGateway;
  watch: SandboxWatch;
  credentials: readonly CredentialEntry[];
  /** The installation's pod composition (its Custodian slice bounds what a Size may split). */
  podConfig?: PodConfig;
  budgets?: Budgets;
  lease?: LeaseOptions;
  log?: (entry: Record<string, unknown>) => void;
  /** Called for every event of every workspace (metrics). */
  onEvent?: (name: string, event: WorkspaceEvent) => void;
  /** Which workspaces this replica owns (decision 0079). Default: all of them (SoleOwnership). */
  ownership?: Ownership;
};

type Entry = {
  actor: WorkspaceActor;
  events: WorkspaceEvent[];
  /** Each subscriber, with how its stream is ended when this replica lets the workspace go. */
  listeners: Map<(e: WorkspaceEvent) => void, (() => void) | undefined>;
  /** The tenant that created it (decision 0042); undefined: an admin. */
  tenant: string | undefined;
};

const MAX_EVENTS = 200;

/** How many names a create draws before it gives up on finding one in a shard held here: with one
 * shard of 16 held, all of them missing is a chance of about e^-264 (the shards moved meanwhile). */
const MAX_NAME_DRAWS = 4096;

const hasRunLabel = (sandbox: SandboxModel | undefined) => sandbox?.metadata?.labels?.[RUN_LABEL] !== undefined;

export class WorkspaceRegistry implements Workspaces {
  readonly #entries = new Map<string, Entry>();
  readonly #ownership: Ownership;

  constructor(readonly opts: RegistryOptions) {
    this.#ownership = opts.ownership ?? new SoleOwnership();
  }

  async create(body: CreateWorkspaceBody, tenant?: string): Promise<string> {
    // The fence answers before anything is written, by name; it runs once, here: its repos
    // (identity, key, entry) are what the gateway writes and what the attach body carries.
    const fenced = fenceSlots(body.repos, this.opts.credentials, tenant);
    if (!fenced.ok) throw new HttpError("fence_refused", fenced.error.message);
    // The Size split and the Effector's push Secrets are checked here too: a refusal writes nothing.
    try {
      splitSize(body.size, body.userSize, (this.opts.podConfig ?? DEFAULT_POD_CONFIG).custodian.resources);
    } catch (err) {
      if (err instanceof SizeError) throw new HttpError("invalid_size", err.message);
      throw err;
    }
    const pushes = body.effector ? pushCredentials(fenced.repos, body.effector.pushes) : undefined;
    if (pushes && !pushes.ok) throw new HttpError("fence_refused", pushes.message);
    // The Effector holds push credentials: its image is the installation's (decision 0048).
    const effectorImage = body.effector
      ? effectorImageFor(body.effector.image, this.opts.podConfig ?? DEFAULT_POD_CONFIG)
      : undefined;
    if (effectorImage && !effectorImage.ok) throw new HttpError("image_refused", effectorImage.message);
    // The effect secrets it mounts: entries of the pod config's effector.secrets this tenant may use,
    // as a fence entry's tenants say (decision 0070), refused by name before anything is written.
    const effectSecrets = body.effector
      ? effectSecretsFor(body.effector.secrets, this.opts.podConfig ?? DEFAULT_POD_CONFIG, tenant)
      : undefined;
    if (effectSecrets && !effectSecrets.ok) throw new HttpError("fence_refused", effectSecrets.message);
    // What the pod runs under is the installation's choice too (decision 0055).
    const runtime = runtimeClassFor(body.runtimeClassName, this.opts.podConfig ?? DEFAULT_POD_CONFIG);
    if (!runtime.ok) throw new HttpError("runtime_class_refused", runtime.message);
    // The workspace's own egress rules stay within the installation's ceiling (decision 0076).
    if (body.egress) {
      const within = egressWithinCeiling(body.egress.allow, this.opts.podConfig ?? DEFAULT_POD_CONFIG);
      if (!within.ok) throw new HttpError("invalid", within.message);
    }
    const name = this.#ownName();
    const attach = attachBodyOf({ branch: body.branch, repos: fenced.repos });
    const place: PlaceRequest = {
      name,
      image: body.image,
      repos: fenced.repos,
      ...(attach ? { attach } : {}),
      ...(body.userImage ? { userImage: body.userImage } : {}),
      ...(body.size ? { size: body.size } : {}),
      ...(body.userSize ? { userSize: body.userSize } : {}),
      ...(body.effector && pushes?.ok && effectorImage?.ok && effectSecrets?.ok
        ? {
            effector: {
              image: effectorImage.image,
              gitCredentials: pushes.secrets,
              ...(effectSecrets.secrets.length ? { secrets: effectSecrets.secrets } : {}),
            },
          }
        : {}),
      ...(body.idleTimeout ? { idleTimeout: body.idleTimeout } : {}),
      ...(runtime.className ? { runtimeClassName: runtime.className } : {}),
      ...(body.egress ? { egressAllow: body.egress.allow } : {}),
      labels: { run: body.run ?? name, workflow: body.workflow ?? "api", ...(tenant ? { tenant } : {}) },
    };
    this.#start(name, tenant, { place, ...(attach ? { attach } : {}) });
    return name;
  }

  /** The workspaces this replica owns now; a shard being let go is left out already. */
  async list(): Promise<WorkspaceView[]> {
    return [...this.#entries.keys()].filter((name) => this.#ownership.owns(name)).map((name) => this.#view(name)!);
  }

  /** Every workspace an Orchestrator wrote that the watch holds, whoever owns it, with its tenant. */
  known(): Array<{ name: string; tenant: string | undefined }> {
    return this.opts.watch.all().flatMap((s) => {
      const name = s.metadata?.name;
      return name && hasRunLabel(s) ? [{ name, tenant: s.metadata?.labels?.[TENANT_LABEL] }] : [];
    });
  }

  /**
   * A workspace's view from its Sandbox alone (decision 0079), for one whose shard no replica
   * answers for now: the state the Sandbox's status says, as a restore would resume it (Ready:
   * ready; Lost or being deleted: lost, as its first check would report; else provisioning). What
   * only an actor knows (a wait, the attach's answer, a failure, the last renewal it wrote) is
   * not there.
   */
  sandboxView(name: string): WorkspaceView | undefined {
    const sandbox = this.opts.watch.get(name);
    if (!sandbox || !hasRunLabel(sandbox)) return undefined;
    const status = sandbox.status;
    const lost = lossOf(sandbox);
    const createdAt = Date.parse(String(sandbox.metadata?.creationTimestamp ?? ""));
    return {
      name,
      state: lost ? "lost" : status?.phase === "Ready" ? "ready" : "provisioning",
      ...(status?.phase ? { phase: status.phase } : {}),
      ...(status?.endpoint ? { endpoint: status.endpoint } : {}),
      conditions: status?.conditions ?? [],
      ...(lost ? { lost } : {}),
      ...(Number.isFinite(createdAt) ? { createdAt: new Date(createdAt).toISOString() } : {}),
    };
  }

  /** The tenant that created it (undefined: an admin), for a workspace held here or any other the
   * watch holds (its tenant label: the replica asked need not own it); null when there is none. */
  ownerOf(name: string): string | undefined | null {
    const entry = this.#entries.get(name);
    if (entry) return entry.tenant;
    const sandbox = this.opts.watch.get(name);
    return hasRunLabel(sandbox) ? sandbox!.metadata?.labels?.[TENANT_LABEL] : null;
  }

  async get(name: string): Promise<WorkspaceView | undefined> {
    return this.#view(name);
  }

  async delete(name: string): Promise<boolean> {
    const entry = this.#entries.get(name);
    if (!entry) return false;
    const state = entry.actor.getSnapshot().context.state;
    // A lost or failed workspace is final: its CR (if any is left) is deleted here.
    if (state && FINAL_STATES.includes(state)) await this.opts.gateway.destroy(name);
    else entry.actor.send({ type: "DESTROY" });
    return true;
  }

  /** The workspace's egress list (decision 0051); undefined when no such workspace. Refuses with
   * 404 where no egress point keeps lists, 409 while the workspace has no Sandbox. */
  async egress(name: string): Promise<string[] | undefined> {
    if (!this.#entries.has(name)) return undefined;
    const gateway = this.#egressGateway();
    const allow = await gateway.egress!(name);
    if (allow === undefined) throw this.#noSandbox(name);
    return allow;
  }

  /** Replaces the list; false when no such workspace. */
  async setEgress(name: string, allow: string[]): Promise<boolean> {
    if (!this.#entries.has(name)) return false;
    const within = egressWithinCeiling(allow, this.opts.podConfig ?? DEFAULT_POD_CONFIG, "allow");
    if (!within.ok) throw new HttpError("invalid", within.message);
    const gateway = this.#egressGateway();
    if ((await gateway.egress!(name)) === undefined) throw this.#noSandbox(name);
    await gateway.setEgress!(name, allow);
    return true;
  }

  /** The egress point's log of the workspace's Sandbox; undefined when no such workspace. */
  async egressLog(name: string): Promise<EgressLogEntry[] | undefined> {
    if (!this.#entries.has(name)) return undefined;
    return this.#egressGateway().egressLog!(name);
  }

  #egressGateway() {
    const g = this.opts.gateway;
    if (!g.egress || !g.setEgress || !g.egressLog)
      throw new HttpError(
        "not_found",
        "egress lists are kept by the egress point, which this Orchestrator does not use (local mode): run in a cluster",
      );
    return g;
  }

  #noSandbox(name: string) {
    const state = this.#entries.get(name)?.actor.getSnapshot().context.state;
    return new HttpError(
      "no_sandbox",
      `workspace "${name}" has no Sandbox now (state ${state ?? "unknown"}): its egress list is read and set once it is placed`,
    );
  }

  /** Every event from now on; `onEnd` is called (and the listener dropped) when this replica lets
   * the workspace go to another (release), so its stream ends and the Machine reconnects to the
   * new owner. */
  subscribe(name: string, listener: (event: WorkspaceEvent) => void, onEnd?: () => void): (() => void) | undefined {
    const entry = this.#entries.get(name);
    if (!entry) return undefined;
    entry.listeners.set(listener, onEnd);
    return () => entry.listeners.delete(listener);
  }

  /** The events so far (newest last), for a view or a test. */
  events(name: string): WorkspaceEvent[] {
    return [...(this.#entries.get(name)?.events ?? [])];
  }

  /** On boot: adopts every shard this replica holds (all of them when it is the only one). */
  async restore(): Promise<number> {
    return this.adopt(this.#ownership.owned());
  }

  /**
   * Every Sandbox an Orchestrator wrote (the run label, in its namespace) in `shards`, and in a
   * shard this replica still holds, becomes an actor again, in the state its status says: on boot,
   * and when a shard is gained from another replica (decision 0079). Ready resumes at the attach
   * (idempotent on the Harness: the same answer again), anything not yet Ready at the provision,
   * Lost or being deleted is reported lost by the first check. Answers how many were restored.
   */
  async adopt(shards: number[]): Promise<number> {
    await this.opts.watch.whenListed();
    const wanted = new Set(shards);
    let n = 0;
    for (const sandbox of this.opts.watch.all()) {
      const name = sandbox.metadata?.name;
      if (!name || this.#entries.has(name) || !hasRunLabel(sandbox)) continue;
      // Read after the wait: a shard lost meanwhile is not taken up again.
      if (!wanted.has(this.#ownership.shardOf(name)) || !this.#ownership.owns(name)) continue;
      const attach = readAttach(sandbox);
      const resume: Resume = {
        // Ready with no attach body (no Repo Slots): nothing to send again, so ready at once.
        at: sandbox.status?.phase === "Ready" ? (attach ? "attaching" : "ready") : "provisioning",
        ...(sandbox.status?.endpoint ? { endpoint: sandbox.status.endpoint } : {}),
        createdAt: Date.parse(String(sandbox.metadata?.creationTimestamp ?? "")) || undefined,
        // The renewal interval follows the Sandbox's own idle timeout (orchestrator/workspaces/keepalive.ts).
        ...(sandbox.spec?.idleTimeout ? { idleTimeout: sandbox.spec.idleTimeout } : {}),
      };
      if (resume.at === "provisioning" && this.opts.gateway.resumeOwned) {
        this.opts.gateway.resumeOwned(sandbox).catch((err: unknown) =>
          this.opts.log?.({
            level: "warn",
            message: "the Sandbox's owned objects could not be made sure of",
            workspace: name,
            detail: err instanceof Error ? err.message : String(err),
          }),
        );
      }
      this.#start(name, sandbox.metadata?.labels?.[TENANT_LABEL], { resume, ...(attach ? { attach } : {}) });
      n++;
    }
    this.opts.log?.({ level: "info", message: "workspaces restored from their Sandboxes", count: n, shards });
    return n;
  }

  /**
   * Lets `shards` go to another replica (decision 0079): each of their workspaces' actor is stopped
   * (its keepalive renewals with it) and forgotten, and its event streams end, so a Machine
   * reconnects to the new owner. Nothing is deleted: the CRs stay for the replica that adopts them.
   */
  async release(shards: number[]): Promise<void> {
    const gone = new Set(shards);
    let n = 0;
    for (const [name, entry] of [...this.#entries]) {
      if (!gone.has(this.#ownership.shardOf(name))) continue;
      this.#entries.delete(name);
      entry.actor.stop();
      for (const end of [...entry.listeners.values()]) end?.();
      entry.listeners.clear();
      n++;
    }
    this.opts.log?.({ level: "info", message: "workspaces let go to another replica", count: n, shards });
  }

  /** Stops every actor (their leases with them); the CRs stay for the next Orchestrator. */
  stop(): void {
    for (const { actor } of this.#entries.values()) actor.stop();
  }

  /** A new workspace's name, in a shard this replica holds (decision 0079): the shard is the name's,
   * so a name is drawn until one falls in a held shard. None held: the shards are moving. */
  #ownName(): string {
    if (this.#ownership.owned().length > 0)
      for (let i = 0; i < MAX_NAME_DRAWS; i++) {
        const name = `ws-${randomBytes(5).toString("hex")}`;
        if (this.#ownership.owns(name)) return name;
      }
    throw new HttpError(
      "unavailable",
      `Orchestrator ${this.#ownership.identity} holds no shard of workspaces now (they are moving between replicas): ` +
        "nothing was created; retry after the Retry-After seconds",
    );
  }

  #start(name: string, tenant: string | undefined, input: Pick<WorkspaceInput, "place" | "attach" | "resume">) {
    const entry: Entry = { actor: undefined as unknown as WorkspaceActor, events: [], listeners: new Map(), tenant };
    this.#entries.set(name, entry);
    const onEvent = (event: WorkspaceEvent) => {
      entry.events.push(event);
      if (entry.events.length > MAX_EVENTS) entry.events.shift();
      this.opts.onEvent?.(name, event);
      for (const l of [...entry.listeners.keys()]) l(event);
      if (event.type === "transition") {
        this.opts.log?.({
          level: event.to === "failed" || event.to === "lost" ? "warn" : "info",
          message: `workspace ${event.to}`,
          workspace: name,
          ...(event.failure ? { reason: event.failure.reason, detail: event.failure.message } : {}),
          ...(event.lost ? { reason: event.lost.reason } : {}),
        });
      }
    };
    entry.actor = startWorkspace({
      name,
      gateway: this.opts.gateway,
      ...input,
      ...(this.opts.budgets ? { budgets: this.opts.budgets } : {}),
      ...(this.opts.lease ? { lease: this.opts.lease } : {}),
      onEvent,
    });
  }

  #view(name: string): WorkspaceView | undefined {
    const entry = this.#entries.get(name);
    if (!entry) return undefined;
    return viewOf(entry.actor.getSnapshot().context, this.opts.watch.get(name));
  }
}
