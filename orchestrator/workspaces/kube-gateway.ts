// The real Sandbox port (its rules: decisions 0011, 0013, 0014 and 0015): writes go to
// the API server through the pooled client, reads come only from the one Sandbox watch, and the
// Harness is reached over undici at the Sandbox's endpoint (or, outside the cluster, wherever the
// endpoint resolver says). Every operation is idempotent, so a restarted Orchestrator may repeat
// any of them for the same name.
import { randomBytes } from "node:crypto";
import { lookup as dnsLookup } from "node:dns/promises";
import { isIP } from "node:net";
import { request } from "undici";
import { ORCHESTRATOR_ENV } from "../../api/env";
import { egressLogPath, mergeEgressLogs, type EgressLogEntry } from "../../api/egress-point";
import type { HostAlias } from "../../api/crd/generated/corev1";
import {
  EFFECTOR,
  EFFECTOR_PORT,
  KEEPALIVE_ANNOTATION,
  ORCHESTRATOR_FIELD_MANAGER,
  effectorServiceName,
} from "../../api/wire";
import { SIGNATURE_HEADERS, answerSigned, signRequest } from "../../api/effector-wire";
import { ApiError } from "../../lib/api-error";
import { applyRequest, kubeRequest, paths } from "../../lib/kube";
import { againIfClosed, closedUnder } from "../../lib/closed-under";
import { AtMost } from "../../lib/at-most";
import { AnswerTooLarge, boundedText } from "../../lib/http-json";
import { API_VERSION, type SandboxModel } from "../../api/crd";
import type { AttachBody } from "../../api/attach";
import { AttachAnswer, EgressLog } from "../../api/orchestrator-schemas";
import { HttpError } from "../../api/orchestrator-errors";
import type { CredentialEntry } from "./fence";
import { composeSandbox, custodianConfigFor, ownedObjects, type ComposeInput, type Composition } from "./compose";
import { custodianCaSecret, periodStart } from "./custodian-ca";
import {
  DEFAULT_CUSTODIAN_IMAGE,
  DEFAULT_ORCHESTRATOR_URL,
  ensureInstallationCa,
  type EgressSettings,
} from "./installation";
import { DEFAULT_POD_CONFIG, type PodConfig } from "./pod-config";
import {
  AttachFailure,
  EffectorUnreachable,
  HarnessMisbehaved,
  type EffectorAddress,
  type EffectorReply,
  PlaceFailure,
  SMALL_ANSWER,
  type HarnessLimits,
  type Misbehaviour,
  type Attached,
  type Budgets,
  type Continuity,
  type PlaceHooks,
  type PlaceRequest,
  type PlacedRepo,
  type ProvisionHooks,
  type Provisioned,
  type SandboxGateway,
} from "./sandbox-gateway";
import {
  budgetFailure,
  conditionOf,
  continuityOf,
  placingTracker,
  provisionTracker,
  staleSlots,
} from "./provision-rules";
import type { SandboxWatch } from "./sandbox-watch";
import { effectorKey, harnessToken } from "../tokens";
import { CONDITION } from "../../api/conditions";
import { boundHosts } from "../../api/custodian-config";
import type { CaPem } from "../../lib/ca";

const enc = encodeURIComponent;
const PLURAL: Record<string, string> = { Secret: "secrets", ConfigMap: "configmaps", Service: "services" };

/** Maps a Sandbox to the base url its Harness answers on. In the cluster: its status.endpoint. */
export type EndpointResolver = (sandbox: SandboxModel) => Promise<string>;

export type KubeGatewayOptions = {
  namespace: string;
  watch: SandboxWatch;
  signingKey: Buffer;
  /** Outside the cluster only (local mode): the Service name does not resolve there. */
  resolveEndpoint?: EndpointResolver;
  /** At most this many attaches in flight (local mode's Harnesses run here); absent: no bound. In a
   * cluster an attach's work is its pod's, and a bound would let a few slow clones or Harnesses
   * hold back every other tenant's attach for up to the attach deadline (decision 0080). */
  attachesAtOnce?: number;
  /** Where a Sandbox's Effector answers (local mode: the local Effector); undefined: none now.
   * Absent: its headless Service `<name>-effector` resolved by DNS. */
  resolveEffector?: (sandbox: SandboxModel) => EffectorAddress | undefined | Promise<EffectorAddress | undefined>;
  /** What every Sandbox pod holds (pod-config.ts), the custodian image and the Orchestrator's url
   * as a Custodian reaches it. Absent: the defaults (installation.ts). */
  pod?: { config: PodConfig; custodianImage: string; orchestratorUrl: string; egress?: EgressSettings };
  /** How a name the pod must find without DNS is resolved here (decision 0051). Default: the system's. */
  lookup?: (host: string) => Promise<string>;
  /** The installation root that signs each Custodian's CA (decision 0037). Absent: read from its
   * Secret (installation.ts) when first needed. */
  custodianRoot?: CaPem;
  /** How long an attach that never reached the Harness is re-sent. Default 90 s. */
  attachWindowMs?: number;
  /** The whole attach's deadline, its answer read to the end included (decision 0049). Default ATTACH_DEADLINE_MS. */
  attachDeadlineMs?: number;
  /** A workspace's Harness broke a bound (an attach answer past its deadline): its metric, Event and log line. */
  onMisbehaviour?: (workspace: string, reason: Misbehaviour, message: string) => void;
  now?: () => number;
};

/** The egress point's log: read within 5 s, at most 1 MiB (its bound is 500 entries). */
const EGRESS_LOG_TIMEOUT_MS = 5_000;
const EGRESS_LOG_MAX_BYTES = 1024 * 1024;

/** An attach clones and checks out every slot before it answers, so it may take minutes; past ten,
 * or an answer drip-fed past it, the Harness is misbehaving (decision 0049). */
export const ATTACH_DEADLINE_MS = 600_000;

/** How many workspaces' writes (Repos, the CR, its owned objects; a keepalive) are in flight at once. */
export const PLACE_WRITES_AT_ONCE = 32;
/** How many attaches are in flight at once where the Harnesses run in the Orchestrator's own process
 * (local mode): a replica that adopts a dead one's shards re-attaches each workspace at once, and
 * unpaced those clones starved its own Lease renewals (decision 0080). */
export const LOCAL_ATTACHES_AT_ONCE = 64;

export class KubeSandboxGateway implements SandboxGateway {
  readonly #writes = new AtMost(PLACE_WRITES_AT_ONCE);
  readonly #attaches: AtMost | undefined;

  constructor(readonly opts: KubeGatewayOptions) {
    this.#attaches = opts.attachesAtOnce ? new AtMost(opts.attachesAtOnce) : undefined;
  }

  get #ns() {
    return this.opts.namespace;
  }

  async place(req: PlaceRequest, hooks: PlaceHooks): Promise<void> {
    // A burst's writes go PLACE_WRITES_AT_ONCE workspaces at a time (decision 0080): a thousand
    // creates in flight at once held the API server's handlers past their timeout.
    await this.#writes.run(async () => {
      // The fence ran before (fence.ts fenceSlots): req.repos are admitted, with their identity,
      // key and entry. The Repo resources before the CR names them (the operator holds Ready on
      // RepoMissing).
      const composed = this.#compose(req, await this.#podEgress(req.name));
      // The Repos at once: none depends on another, and a create waits on the slowest, not the sum.
      await Promise.all(req.repos.map((r) => this.#ensureRepo(r)));
      const sandbox = await this.#createSandbox(req, composed);
      // After the CR, owned by its uid from birth: no path leaves a token or a config behind. The
      // kubelet retries the pod's mounts until they land, so the owned objects and the Custodian's
      // CA are written together (one round trip, not one each), while the operator builds the pod.
      const uid = sandbox.metadata!.uid!;
      await Promise.all([
        this.#applyOwned(req.name, composed, uid),
        this.#writeCustodianCa(req.name, uid).catch((err) => {
          throw new PlaceFailure("Refused", `Sandbox "${req.name}"'s Custodian CA was refused: ${messageOf(err)}`);
        }),
      ]);
    });
    hooks.onWritten();
    const judge = placingTracker(req.name, hooks.onWait);
    await this.#waitFor(
      req.name,
      (s) => {
        const v = judge(s);
        if (v.kind === "failed") throw v.failure;
        return v.kind === "placed" ? true : undefined;
      },
      { signal: hooks.signal },
    );
  }

  async provision(name: string, budgets: Budgets, hooks: ProvisionHooks): Promise<Provisioned> {
    const track = provisionTracker(name, this.#now(), budgets, hooks.onWait);
    let budget = track(this.opts.watch.get(name)).budget;
    return this.#waitFor(
      name,
      (s) => {
        const { verdict, budget: b } = track(s);
        budget = b;
        if (verdict.kind === "failed") throw verdict.failure;
        if (verdict.kind !== "ready") return undefined;
        return { endpoint: verdict.endpoint };
      },
      {
        signal: hooks.signal,
        deadline: () => budget.deadline,
        expire: (last) => budgetFailure(name, budget, budgets, last),
      },
    );
  }

  async attach(name: string, body: AttachBody): Promise<Attached> {
    const sandbox = this.opts.watch.get(name);
    if (!sandbox?.status?.endpoint) {
      throw new AttachFailure("NoEndpoint", `Sandbox "${name}" has no endpoint to attach through: is it gone?`);
    }
    const endpoint = sandbox.status.endpoint;
    const send = async () =>
      this.#postAttach(name, this.opts.resolveEndpoint ? await this.opts.resolveEndpoint(sandbox) : endpoint, body);
    const answer = await (this.#attaches ? this.#attaches.run(send) : send());
    // ReposFresh as the operator last said it: fixed once per pod, so the provision's verdict.
    const fresh = conditionOf(sandbox, CONDITION.ReposFresh);
    const stale = staleSlots(body.slots, fresh?.status === "False" ? fresh.message : undefined);
    return { answer, ...(stale ? { stale } : {}) };
  }

  /**
   * A restored Orchestrator's repair: what the Sandbox owns, created where absent (never
   * rewritten: a pod that mounts them already has them). An Orchestrator killed between the CR and
   * its owned objects would otherwise leave a pod waiting on mounts until its budget ends.
   */
  async resumeOwned(sandbox: SandboxModel): Promise<void> {
    const name = sandbox.metadata?.name;
    const uid = sandbox.metadata?.uid;
    if (!name || !uid) return;
    const config = custodianConfigFor(
      {
        pod: this.opts.pod?.config ?? DEFAULT_POD_CONFIG,
        signingKey: this.opts.signingKey,
        orchestratorUrl: this.opts.pod?.orchestratorUrl ?? DEFAULT_ORCHESTRATOR_URL,
        ...(this.opts.pod?.egress ? { egress: { proxyUrl: this.opts.pod.egress.proxyUrl } } : {}),
      },
      name,
    );
    const effector = (sandbox.spec?.sidecars ?? []).some((c) => c.name === EFFECTOR);
    const owned = ownedObjects({ name, namespace: this.#ns, signingKey: this.opts.signingKey, config, effector }, uid);
    for (const object of owned) {
      await createOrKeep(`/api/v1/namespaces/${enc(this.#ns)}/${PLURAL[object.kind]}`, object);
    }
    // Derived for the period: written whole, so one past its end is replaced too.
    await this.#writeCustodianCa(name, uid);
  }

  /**
   * One call to the Sandbox's Harness with its bearer (the agent protocol, decision 0025): the
   * status and the JSON answer. A POST is not re-sent: the caller decides what a failure means. A
   * GET (a stream page: safe to repeat) is sent once more when a kept-alive connection turns out
   * closed under it: the Harness's server closes an idle connection as the client reuses it, a race
   * heavy load widens (the agents bench saw it). The answer is input, not truth (decision 0042):
   * `path` is a path on the Harness's own origin and nothing else, at most `limits.maxBytes` are
   * read, within `limits.timeoutMs`; past either the call ends as HarnessMisbehaved.
   */
  async harness(
    name: string,
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    signal?: AbortSignal,
    limits: HarnessLimits = SMALL_ANSWER,
  ): Promise<{ status: number; body: unknown }> {
    const sandbox = this.opts.watch.get(name);
    if (!sandbox?.status?.endpoint) throw new Error(`Sandbox "${name}" has no endpoint: is it Ready?`);
    const base = new URL(
      this.opts.resolveEndpoint ? await this.opts.resolveEndpoint(sandbox) : sandbox.status.endpoint,
    );
    // Never another host: a path the Orchestrator built, on the endpoint's own origin.
    const url = new URL(path, base);
    if (!path.startsWith("/") || path.startsWith("//") || url.origin !== base.origin)
      throw new Error(`${JSON.stringify(path.slice(0, 200))} is not a path on workspace ${name}'s Harness`);
    const deadline = AbortSignal.timeout(limits.timeoutMs);
    const both = signal ? AbortSignal.any([signal, deadline]) : deadline;
    const what = `${method} ${url.pathname}`;
    const send = async () => {
      const res = await request(url, {
        method,
        headers: {
          authorization: `Bearer ${harnessToken(this.opts.signingKey, name)}`,
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: both,
        headersTimeout: limits.timeoutMs,
        bodyTimeout: limits.timeoutMs,
      });
      const text = await boundedText(res.body, limits.maxBytes);
      return { status: res.statusCode, body: safeJson(text) ?? text };
    };
    try {
      try {
        return await send();
      } catch (err) {
        if (method !== "GET" || both.aborted || !closedUnder(err)) throw err;
        return await send();
      }
    } catch (err) {
      if (err instanceof AnswerTooLarge)
        throw new HarnessMisbehaved(
          name,
          "too_large",
          `workspace ${name}'s Harness answered ${what} with more than ${limits.maxBytes} bytes`,
        );
      if (deadline.aborted && !signal?.aborted)
        throw new HarnessMisbehaved(
          name,
          "too_slow",
          `workspace ${name}'s Harness did not answer ${what} within ${limits.timeoutMs} ms`,
        );
      throw err;
    }
  }

  /**
   * One call to the Sandbox's Effector, signed with its key for its pod (api/effector-wire.ts,
   * decision 0070). Like `harness`, the answer is input, not truth (decisions 0042, 0049): a path on
   * the Effector's own address, at most `limits.maxBytes` read within `limits.timeoutMs`, and the
   * answer's signature checked over this request's nonce, its status and body (`signed`): a process
   * that bound :8082 while the Effector is down can answer, but not as the Effector. Never re-sent:
   * the caller decides what a failure means (an Effect runs at most once, decision 0070). Throws
   * EffectorUnreachable when no answer came, saying whether the request may have been delivered.
   */
  async effector(
    name: string,
    method: "GET" | "POST",
    path: string,
    body: unknown,
    limits: HarnessLimits,
  ): Promise<EffectorReply> {
    const sandbox = this.opts.watch.get(name);
    if (!sandbox) throw new EffectorUnreachable(false, `workspace ${name} has no Sandbox`);
    let address: EffectorAddress | undefined;
    try {
      address = this.opts.resolveEffector ? await this.opts.resolveEffector(sandbox) : await this.#effectorByDns(name);
    } catch (err) {
      throw new EffectorUnreachable(false, `workspace ${name}'s Effector has no address: ${messageOf(err)}`);
    }
    if (!address) throw new EffectorUnreachable(false, `workspace ${name}'s Effector has no address yet`);
    const base = new URL(address.url);
    const url = new URL(path, base);
    if (!path.startsWith("/") || path.startsWith("//") || url.origin !== base.origin)
      throw new Error(`${JSON.stringify(path.slice(0, 200))} is not a path on workspace ${name}'s Effector`);
    const text = body === undefined ? "" : JSON.stringify(body);
    const nonce = randomBytes(16).toString("base64url");
    const key = effectorKey(this.opts.signingKey, name);
    const headers = signRequest(key, { method, path, body: text, pod: address.pod, time: this.#now(), nonce });
    const deadline = AbortSignal.timeout(limits.timeoutMs);
    const what = `${method} ${url.pathname}`;
    try {
      const res = await request(url, {
        method,
        headers: { ...headers, ...(body !== undefined ? { "content-type": "application/json" } : {}) },
        ...(body !== undefined ? { body: text } : {}),
        signal: deadline,
        headersTimeout: limits.timeoutMs,
        bodyTimeout: limits.timeoutMs,
      });
      const answer = await boundedText(res.body, limits.maxBytes);
      const signature = res.headers[SIGNATURE_HEADERS.signature];
      return {
        status: res.statusCode,
        text: answer,
        signed: answerSigned(key, nonce, res.statusCode, answer, typeof signature === "string" ? signature : undefined),
      };
    } catch (err) {
      // Refused at connect: nothing of the request left this process.
      const code = (err as { code?: string } | undefined)?.code;
      if (code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EHOSTUNREACH")
        throw new EffectorUnreachable(false, `workspace ${name}'s Effector refused ${what}: ${messageOf(err)}`);
      if (err instanceof AnswerTooLarge)
        throw new EffectorUnreachable(
          true,
          `workspace ${name}'s Effector answered ${what} with more than ${limits.maxBytes} bytes`,
        );
      if (deadline.aborted)
        throw new EffectorUnreachable(
          true,
          `workspace ${name}'s Effector did not answer ${what} within ${limits.timeoutMs} ms`,
        );
      throw new EffectorUnreachable(true, `workspace ${name}'s Effector: ${what}: ${messageOf(err)}`);
    }
  }

  /** The Effector's headless Service resolved to its pod's address (api/wire.ts effectorServiceName). */
  async #effectorByDns(name: string): Promise<EffectorAddress | undefined> {
    const lookup = this.opts.lookup ?? (async (host: string) => (await dnsLookup(host)).address);
    const ip = await lookup(`${effectorServiceName(name)}.${this.#ns}.svc`);
    const host = ip.includes(":") ? `[${ip}]` : ip;
    return { url: `http://${host}:${EFFECTOR_PORT}`, pod: ip };
  }

  /** The keepalive, then the Custodian's CA when a new period has begun (decision 0037). */
  async renew(name: string): Promise<void> {
    // With the place writes' bound: an adoption renews every adopted workspace's keepalive at once.
    await this.#writes.run(() => {
      const patch = { metadata: { annotations: { [KEEPALIVE_ANNOTATION]: new Date(this.#now()).toISOString() } } };
      return kubeRequest("PATCH", this.#sandboxPath(name), patch, "application/merge-patch+json");
    });
    const uid = this.opts.watch.get(name)?.metadata?.uid;
    if (!uid) return;
    await this.#writeCustodianCa(name, uid).catch((err) => {
      throw new Error(`the keepalive is renewed, but the Custodian's CA could not be written: ${messageOf(err)}`);
    });
  }

  async continuity(name: string): Promise<Continuity> {
    await this.opts.watch.whenListed();
    return continuityOf(this.opts.watch.get(name));
  }

  watchContinuity(name: string, listener: (c: Continuity) => void): () => void {
    return this.opts.watch.subscribe(name, (s) => listener(continuityOf(s)));
  }

  async destroy(name: string): Promise<void> {
    this.#caWritten.delete(name);
    try {
      await kubeRequest("DELETE", `${this.#sandboxPath(name)}?propagationPolicy=Background`);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    }
  }

  // -------------------------------------------------------------------------------------------

  #now() {
    return (this.opts.now ?? Date.now)();
  }

  /** The names a Sandbox pod finds by hostAliases, resolved once each (a Service's address is its
   * own for the Service's life). */
  readonly #aliases = new Map<string, string>();

  /**
   * The egress point as the pod reaches it (decision 0051): its proxy url, and the addresses of it
   * and of the Orchestrator for the pod's /etc/hosts, since the pod reaches no resolver. A name
   * that does not resolve refuses the create, naming what to deploy.
   */
  async #podEgress(name: string): Promise<ComposeInput["egress"]> {
    const egress = this.opts.pod?.egress;
    if (!egress) return undefined;
    const hosts = [
      new URL(egress.proxyUrl).hostname,
      new URL(this.opts.pod?.orchestratorUrl ?? DEFAULT_ORCHESTRATOR_URL).hostname,
    ];
    const lookup = this.opts.lookup ?? (async (host: string) => (await dnsLookup(host)).address);
    const hostAliases: HostAlias[] = [];
    for (const host of new Set(hosts)) {
      if (isIP(host.replace(/^\[|\]$/g, ""))) continue;
      let ip = this.#aliases.get(host);
      if (!ip) {
        try {
          ip = await lookup(host);
        } catch (err) {
          throw new PlaceFailure(
            "Refused",
            `Sandbox "${name}" cannot be composed: ${host} does not resolve here (${messageOf(err)}); a Sandbox pod ` +
              `reaches no resolver and finds it by this address: deploy the egress point (dist/jr2-egress.yaml) ` +
              `and the Orchestrator's Service, or set ${ORCHESTRATOR_ENV.egressUrl}`,
          );
        }
        this.#aliases.set(host, ip);
      }
      const same = hostAliases.find((a) => a.ip === ip);
      if (same) same.hostnames!.push(host);
      else hostAliases.push({ ip, hostnames: [host] });
    }
    return { proxyUrl: egress.proxyUrl, hostAliases };
  }

  async egress(name: string): Promise<string[] | undefined> {
    await this.opts.watch.whenListed();
    const sandbox = this.opts.watch.get(name);
    if (!sandbox || sandbox.metadata?.deletionTimestamp) return undefined;
    return [...(sandbox.spec?.egress?.allow ?? [])];
  }

  async setEgress(name: string, allow: string[]): Promise<void> {
    // A merge patch replaces the list whole; admission judges each entry (decision 0051).
    try {
      await kubeRequest(
        "PATCH",
        this.#sandboxPath(name),
        { spec: { egress: { allow } } },
        "application/merge-patch+json",
      );
    } catch (err) {
      if (err instanceof ApiError && err.status === 404)
        throw new HttpError("no_sandbox", `workspace "${name}" has no Sandbox now: its egress list cannot be set`);
      if (err instanceof ApiError && (err.status === 400 || err.status === 422 || err.status === 403))
        throw new HttpError("invalid", `allow: ${messageOf(err)}`);
      throw err;
    }
  }

  async egressLog(name: string): Promise<EgressLogEntry[]> {
    const egress = this.opts.pod?.egress;
    if (!egress)
      throw new HttpError(
        "not_found",
        "no egress point is configured here: its log is the egress point's (decision 0051)",
      );
    if (!egress.replicas) return this.#egressLogAt(egress.adminUrl, name);
    // Each replica decided the connections the Service sent it, and keeps their log: the answer is
    // every ready replica's, merged by time (decision 0076).
    const { namespace, service, port } = egress.replicas;
    const at = await egressReplicas(namespace, service).catch((err: unknown) => {
      throw new HttpError(
        "egress_unreadable",
        `the egress point's replicas (the EndpointSlices of Service ${namespace}/${service}) could not be listed: ${messageOf(err)}`,
      );
    });
    if (!at.length)
      throw new HttpError(
        "egress_unreadable",
        `the egress point has no ready replica (Service ${namespace}/${service}): see its Deployment's pods`,
      );
    const logs = await Promise.all(
      at.map(({ address, pod }) =>
        this.#egressLogAt(`http://${isIP(address) === 6 ? `[${address}]` : address}:${port}`, name, pod),
      ),
    );
    return mergeEgressLogs(logs);
  }

  /** One egress point's (one replica's) log of the Sandbox. */
  async #egressLogAt(admin: string, name: string, pod?: string): Promise<EgressLogEntry[]> {
    const which = pod ? `the egress point's replica ${pod} at ${admin}` : `the egress point at ${admin}`;
    let res;
    try {
      res = await request(`${admin}${egressLogPath(this.#ns, name)}`, {
        signal: AbortSignal.timeout(EGRESS_LOG_TIMEOUT_MS),
        headersTimeout: EGRESS_LOG_TIMEOUT_MS,
        bodyTimeout: EGRESS_LOG_TIMEOUT_MS,
      });
    } catch (err) {
      throw new HttpError("egress_unreadable", `${which} could not be read: ${messageOf(err)}`);
    }
    const text = await boundedText(res.body, EGRESS_LOG_MAX_BYTES).catch((err: unknown) => {
      throw new HttpError("egress_unreadable", `${which}: its log could not be read: ${messageOf(err)}`);
    });
    // Nothing decided for the Sandbox yet: an empty log, not an error.
    if (res.statusCode === 404) return [];
    const parsed = res.statusCode === 200 ? EgressLog.safeParse(safeJson(text)) : undefined;
    if (!parsed?.success) throw new HttpError("egress_unreadable", `${which} answered ${res.statusCode} without a log`);
    return parsed.data.entries;
  }

  /** The CR and what it owns (compose.ts); a Size the split refuses is refused before any write. */
  #compose(req: PlaceRequest, egress?: ComposeInput["egress"]): Composition {
    try {
      return composeSandbox({
        req,
        namespace: this.#ns,
        signingKey: this.opts.signingKey,
        pod: this.opts.pod?.config ?? DEFAULT_POD_CONFIG,
        custodianImage: this.opts.pod?.custodianImage ?? DEFAULT_CUSTODIAN_IMAGE,
        orchestratorUrl: this.opts.pod?.orchestratorUrl ?? DEFAULT_ORCHESTRATOR_URL,
        now: this.#now(),
        ...(egress ? { egress } : {}),
      });
    } catch (err) {
      throw new PlaceFailure("Refused", `Sandbox "${req.name}" cannot be composed: ${messageOf(err)}`);
    }
  }

  #sandboxPath(name: string) {
    return paths.sandbox(this.#ns, name);
  }

  /** What this process last wrote as each Sandbox's Custodian CA: its uid, period and hosts. */
  readonly #caWritten = new Map<string, string>();
  #rootCa?: Promise<CaPem>;

  /**
   * The Sandbox's Custodian CA for the period now (custodian-ca.ts), by server-side apply, unless
   * this process wrote that one already; none where no host is bound (nothing is intercepted).
   */
  async #writeCustodianCa(name: string, uid: string): Promise<void> {
    const hosts = boundHosts((this.opts.pod?.config ?? DEFAULT_POD_CONFIG).custodian.held);
    if (!hosts.length) return;
    const now = this.#now();
    const written = `${uid}/${periodStart(name, now)}/${hosts.join(",")}`;
    if (this.#caWritten.get(name) === written) return;
    const root = await this.#root();
    const secret = custodianCaSecret({
      root,
      signingKey: this.opts.signingKey,
      sandbox: name,
      hosts,
      now,
      namespace: this.#ns,
      uid,
    });
    await againIfClosed(() =>
      applyRequest(
        `/api/v1/namespaces/${enc(this.#ns)}/secrets/${enc(secret.metadata.name)}`,
        secret,
        ORCHESTRATOR_FIELD_MANAGER,
      ),
    );
    this.#caWritten.set(name, written);
  }

  /** The installation root: given, or read once (a failed read is not kept). */
  #root(): Promise<CaPem> {
    if (this.opts.custodianRoot) return Promise.resolve(this.opts.custodianRoot);
    if (!this.#rootCa) {
      const reading = ensureInstallationCa(this.#ns);
      this.#rootCa = reading;
      reading.catch(() => {
        if (this.#rootCa === reading) this.#rootCa = undefined;
      });
    }
    return this.#rootCa;
  }

  /** Repos this process made sure of in the last minute: a burst of workspaces on one Repo asks
   * the API once, and a Repo deleted meanwhile is written again within a minute. */
  readonly #repos = new Map<string, { at: number; done: Promise<void> }>();

  /** Create if absent. An existing Repo is left as its owner wrote it (a bound one's spec is the boot's). */
  #ensureRepo(repo: PlacedRepo): Promise<void> {
    const held = this.#repos.get(repo.key);
    if (held && this.#now() - held.at < 60_000) return held.done;
    const done = this.#writeRepo(repo);
    this.#repos.set(repo.key, { at: this.#now(), done });
    done.catch(() => this.#repos.delete(repo.key)); // a failure is not remembered
    return done;
  }

  async #writeRepo({ key, url, identity, entry }: PlacedRepo) {
    const secret = secretOf(entry);
    const body = {
      apiVersion: API_VERSION,
      kind: "Repo",
      metadata: { name: key, namespace: this.#ns },
      spec: { url, ...(secret ? { secretRef: { name: secret } } : {}) },
    };
    await createOrKeep(paths.repos(this.#ns), body).catch((err) => {
      throw new PlaceFailure("Refused", `the Repo for ${identity} could not be written: ${messageOf(err)}`);
    });
  }

  async #createSandbox(req: PlaceRequest, composed: Composition): Promise<SandboxModel> {
    try {
      return await createOrKeep<SandboxModel>(paths.sandboxes(this.#ns), composed.sandbox);
    } catch (err) {
      throw new PlaceFailure("Refused", `Sandbox "${req.name}" was refused: ${messageOf(err)}`);
    }
  }

  /** Each object the CR owns, by server-side apply: a re-provision restates the same fields (the
   * values are derived, so the same bytes) and changes nothing. */
  async #applyOwned(name: string, composed: Composition, uid: string) {
    await Promise.all(
      composed.owned(uid).map((object) => {
        const plural = PLURAL[object.kind];
        const path = `/api/v1/namespaces/${enc(this.#ns)}/${plural}/${enc(object.metadata.name)}`;
        return againIfClosed(() => applyRequest(path, object, ORCHESTRATOR_FIELD_MANAGER)).catch((err) => {
          throw new PlaceFailure(
            "Refused",
            `Sandbox "${name}"'s ${object.kind} ${object.metadata.name} was refused: ${messageOf(err)}`,
          );
        });
      }),
    );
  }

  /**
   * The Harness's POST /attach, re-sent only while it never reached the Harness (a transport
   * error), for up to the attach window with backoff from 250 ms to 5 s: an HTTP answer is an answer.
   * The whole of it, the answer read to its end, within the attach deadline (decision 0049): a
   * Harness that holds it past or drip-feeds its answer is misbehaving, named as such, and the
   * attach fails TooSlow (a restore sends it again, bounded again).
   */
  async #postAttach(name: string, base: string, body: AttachBody): Promise<Attached["answer"]> {
    const deadlineMs = this.opts.attachDeadlineMs ?? ATTACH_DEADLINE_MS;
    const deadline = AbortSignal.timeout(deadlineMs);
    try {
      return await this.#sendAttach(name, base, body, deadline, deadlineMs);
    } catch (err) {
      if (!deadline.aborted || err instanceof AttachFailure) throw err;
      const message = `workspace ${name}'s Harness did not answer its attach, to the end, within ${deadlineMs} ms`;
      this.opts.onMisbehaviour?.(name, "too_slow", message);
      throw new AttachFailure("TooSlow", `Sandbox "${name}": ${message}`, { deadlineMs });
    }
  }

  async #sendAttach(
    name: string,
    base: string,
    body: AttachBody,
    deadline: AbortSignal,
    deadlineMs: number,
  ): Promise<Attached["answer"]> {
    const url = new URL("/attach", base).toString();
    const headers = {
      "content-type": "application/json",
      authorization: `Bearer ${harnessToken(this.opts.signingKey, name)}`,
    };
    const until = this.#now() + (this.opts.attachWindowMs ?? 90_000);
    for (let backoff = 250; ; backoff = Math.min(backoff * 2, 5_000)) {
      let res: Awaited<ReturnType<typeof request>>;
      try {
        res = await request(url, {
          method: "POST",
          headers,
          body: JSON.stringify(body),
          signal: deadline,
          headersTimeout: deadlineMs,
          bodyTimeout: deadlineMs,
        });
      } catch (err) {
        if (deadline.aborted) throw err;
        if (this.#now() >= until) {
          throw new AttachFailure(
            "Unreachable",
            `Sandbox "${name}": the attach never reached its Harness at ${base}: ${messageOf(err)}`,
          );
        }
        await new Promise((r) => setTimeout(r, backoff));
        continue;
      }
      let text: string;
      try {
        text = await boundedText(res.body, SMALL_ANSWER.maxBytes);
      } catch (err) {
        if (!(err instanceof AnswerTooLarge)) throw err;
        throw new AttachFailure(
          "BadAnswer",
          `Sandbox "${name}": the Harness's attach answer exceeds ${err.limit} bytes`,
        );
      }
      if (res.statusCode >= 200 && res.statusCode < 300) {
        const parsed = AttachAnswer.safeParse(safeJson(text));
        if (!parsed.success)
          throw new AttachFailure("BadAnswer", `Sandbox "${name}": the Harness's answer is not an attach answer`);
        return parsed.data;
      }
      const said = (safeJson(text) as { error?: unknown } | undefined)?.error;
      throw new AttachFailure(
        "AttachRefused",
        `Sandbox "${name}": the attach failed (${res.statusCode}): ${typeof said === "string" ? said : text.slice(0, 2000)}`,
        { status: res.statusCode },
      );
    }
  }

  /**
   * Resolves with the first value `judge` returns for the watch's copy of `name`; rejects with what
   * it throws, with `expire(last)` once `deadline()` passes, or with the signal's reason. `judge`
   * hears "absent" (undefined) only after it has seen the Sandbox.
   */
  #waitFor<T>(
    name: string,
    judge: (s: SandboxModel | undefined) => T | undefined,
    opts: { signal?: AbortSignal; deadline?: () => number; expire?: (last: SandboxModel | undefined) => Error },
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let done = false;
      let timer: NodeJS.Timeout | undefined;
      let last: SandboxModel | undefined;
      let unsubscribe: (() => void) | undefined;
      const finish = (fn: () => void) => {
        if (done) return;
        done = true;
        if (timer) clearTimeout(timer);
        unsubscribe?.();
        opts.signal?.removeEventListener("abort", onAbort);
        fn();
      };
      const onAbort = () => finish(() => reject(opts.signal!.reason ?? new Error("aborted")));
      const arm = () => {
        if (!opts.deadline || done) return;
        if (timer) clearTimeout(timer);
        const ms = opts.deadline() - this.#now();
        if (ms <= 0) return finish(() => reject(opts.expire!(last)));
        timer = setTimeout(arm, Math.min(ms, 2 ** 31 - 1));
      };
      // The watch may not have delivered a CR written a moment ago: absence counts only once this
      // wait has seen the Sandbox (a CR gone before that is the lease's news, at its next check).
      let seen = false;
      const onChange = (s: SandboxModel | undefined) => {
        if (done) return;
        if (!s && !seen) return arm();
        seen = true;
        last = s ?? last;
        try {
          const v = judge(s);
          if (v !== undefined) return finish(() => resolve(v));
        } catch (err) {
          return finish(() => reject(err));
        }
        arm();
      };
      if (opts.signal?.aborted) return onAbort();
      opts.signal?.addEventListener("abort", onAbort);
      unsubscribe = this.opts.watch.subscribe(name, onChange);
      if (done) unsubscribe();
      arm();
    });
  }
}

/** POST; an AlreadyExists answer reads back what is there (a repeat is a no-op). A POST whose
 * connection closed under it is sent again: the name is this workspace's own (or its Repo's), so an
 * earlier attempt that landed is kept, never doubled. */
async function createOrKeep<T>(collection: string, body: { metadata: { name: string } }): Promise<T> {
  try {
    return await againIfClosed(() => kubeRequest<T>("POST", collection, body));
  } catch (err) {
    if (err instanceof ApiError && err.status === 409)
      return againIfClosed(() => kubeRequest<T>("GET", `${collection}/${enc(body.metadata.name)}`));
    throw err;
  }
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** The push Secret a fence entry names (`secret`), which a new Repo takes as its secretRef. */
const secretOf = (entry: CredentialEntry | undefined) =>
  typeof entry?.extra?.secret === "string" ? entry.extra.secret : undefined;

/** The ready endpoints of a Service (its EndpointSlices): a terminating replica is draining and
 * soon gone with its log, so only the ready are read. A `ready` left unset counts as ready (the API's word). */
async function egressReplicas(namespace: string, service: string): Promise<Array<{ address: string; pod?: string }>> {
  type Slice = {
    endpoints?: Array<{ addresses?: string[]; conditions?: { ready?: boolean | null }; targetRef?: { name?: string } }>;
  };
  const list = await kubeRequest<{ items?: Slice[] }>(
    "GET",
    `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/endpointslices?labelSelector=${encodeURIComponent(
      `kubernetes.io/service-name=${service}`,
    )}`,
  );
  const seen = new Map<string, { address: string; pod?: string }>();
  for (const slice of list.items ?? [])
    for (const e of slice.endpoints ?? []) {
      const address = e.addresses?.[0];
      if (!address || e.conditions?.ready === false) continue;
      // A dual-stack Service lists a pod in two slices: read it once, by its pod.
      const key = e.targetRef?.name ?? address;
      if (!seen.has(key)) seen.set(key, { address, ...(e.targetRef?.name ? { pod: e.targetRef.name } : {}) });
    }
  return [...seen.values()];
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
