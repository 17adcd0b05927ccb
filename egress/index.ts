// Who is asking, and what its list is (docs/decisions/0051): the egress point knows a connection's
// Sandbox by the source address alone, from the Sandbox pods it watches (pod IP -> the Sandbox its
// `sandbox.jr2.dev/name` label names), and keeps each Sandbox's list compiled (base list + its
// spec.egress.allow + its git remotes). A change to a Sandbox's list is in force from its watch
// event; a pod that starts terminating (or ends, or goes) gives up its address at once, so a reused
// IP is never attributed to the Sandbox that held it. Pure apart from `watchIndex`, the watch I/O.
import { K8s, WatchEvent, kind } from "kubernetes-fluent-client";
import { SandboxModel } from "../api/crd";
import { EGRESS_ENV, ceilingProblem, parseEgressRule, repoRulesOf, type EgressRule } from "../api/egress-point";
import { envDuration } from "../lib/duration";
import { MANAGED_BY, MANAGED_BY_LABEL, SANDBOX_NAME_LABEL } from "../api/wire";

export type SandboxRef = { namespace: string; name: string };
export const refKey = (r: SandboxRef) => `${r.namespace}/${r.name}`;

/** A Sandbox's list, compiled. `base` is shared by every Sandbox (one array, not a copy each). */
export type CompiledList = {
  base: readonly EgressRule[];
  /** The base list's exact rules (a name or an IP literal): the only rules that reach an internal address. */
  vouched: readonly EgressRule[];
  /** The Sandbox's own: spec.egress.allow, then its git remotes. */
  own: readonly EgressRule[];
  /** spec.egress.allow entries that are no rule (admission refuses them; an older object may hold one). */
  problems: readonly string[];
};

type SandboxLike = {
  metadata?: { name?: string; namespace?: string; uid?: string };
  spec?: { egress?: { allow?: unknown }; repos?: Array<{ url?: unknown }> };
};

type PodLike = {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    labels?: Record<string, string>;
    deletionTimestamp?: unknown;
  };
  status?: { phase?: string; podIP?: string; podIPs?: Array<{ ip?: string }> };
};

export const vouchedOf = (base: readonly EgressRule[]) => base.filter((r) => r.kind !== "wildcard");

/** The inputs of a Sandbox's list, read tolerantly (spec.egress may be absent, or any shape). */
function inputsOf(sbx: SandboxLike): { allow: unknown[]; repos: string[] } {
  const allow = sbx.spec?.egress?.allow;
  return {
    allow: Array.isArray(allow) ? allow : [],
    repos: (sbx.spec?.repos ?? []).map((r) => r?.url).filter((u): u is string => typeof u === "string"),
  };
}

/** One Sandbox's list from the base list and its spec. Pure. */
export function compileList(
  base: readonly EgressRule[],
  vouched: readonly EgressRule[],
  sbx: SandboxLike,
  ceiling?: readonly EgressRule[],
): CompiledList {
  const { allow, repos } = inputsOf(sbx);
  const own: EgressRule[] = [];
  const problems: string[] = [];
  allow.forEach((text, i) => {
    const p = parseEgressRule(String(text));
    if (!p.ok) return void problems.push(`spec.egress.allow[${i}]: ${p.message}`);
    // Outside the installation's ceiling a Sandbox's own rule never allows (decision 0076): the
    // Orchestrator refuses it at create, and a Sandbox written directly gets no further.
    const outside = ceiling ? ceilingProblem(p.rule, ceiling, `spec.egress.allow[${i}]`) : undefined;
    if (outside) problems.push(outside);
    else own.push(p.rule);
  });
  own.push(...repoRulesOf(repos));
  return { base, vouched, own, problems };
}

type PodEntry = { uid: string; ref: SandboxRef; ips: string[] };

/** How often each watch lists again (JR2_EGRESS_RELIST_INTERVAL's default): the longest a stalled
 * watch leaves a gone pod's address or a narrowed list in force. */
export const EGRESS_RELIST_DEFAULT_MS = 10_000;
const ENDED_KEPT_MS = 15 * 60_000;

/** JR2_EGRESS_RELIST_INTERVAL, from 1s to 10m; throws naming the variable and the fix. */
export function relistInterval(env: NodeJS.ProcessEnv): number {
  const ms = envDuration(EGRESS_ENV.relistInterval, EGRESS_RELIST_DEFAULT_MS, env);
  if (ms < 1000 || ms > 600_000)
    throw new Error(
      `${EGRESS_ENV.relistInterval}=${env[EGRESS_ENV.relistInterval]} is not from 1s to 10m: it bounds how long a ` +
        "stalled watch leaves a gone pod's address in force; set e.g. 10s, or unset it",
    );
  return ms;
}

export class EgressIndex {
  /** Changes a relist found that its watch had not delivered (watchIndex). */
  corrections = 0;
  readonly #sandboxes = new Map<string, { uid?: string; inputs: string; list: CompiledList }>();
  /** pod uid -> its addresses and Sandbox. */
  readonly #pods = new Map<string, PodEntry>();
  /** address -> pod uid. */
  readonly #ips = new Map<string, string>();
  #base: readonly EgressRule[];
  #vouched: readonly EgressRule[];
  #ceiling: readonly EgressRule[] | undefined;

  constructor(
    base: readonly EgressRule[],
    readonly hooks: {
      /** The installation's ceiling (pod config egress.ceiling, decision 0076); absent: none. */
      ceiling?: readonly EgressRule[];
      /** A Sandbox gone: its log and limits are dropped. */
      onForget?: (ref: SandboxRef) => void;
      /** spec.egress.allow entries that are no rule, once per change. */
      onProblems?: (ref: SandboxRef, problems: readonly string[]) => void;
    } = {},
  ) {
    this.#base = base;
    this.#vouched = vouchedOf(base);
    this.#ceiling = hooks.ceiling;
  }

  onSandbox(sbx: SandboxLike, deleted: boolean): void {
    const name = sbx.metadata?.name;
    const namespace = sbx.metadata?.namespace;
    if (!name || !namespace) return;
    const key = refKey({ namespace, name });
    const held = this.#sandboxes.get(key);
    if (deleted) {
      // A late delete of an older object of the same name leaves the new one.
      if (held && sbx.metadata?.uid && held.uid && held.uid !== sbx.metadata.uid) return;
      this.#sandboxes.delete(key);
      this.hooks.onForget?.({ namespace, name });
      return;
    }
    // Most events are status writes: the list is compiled again only when its inputs changed.
    const inputs = JSON.stringify(inputsOf(sbx));
    if (held && held.uid === sbx.metadata?.uid && held.inputs === inputs) return;
    const list = compileList(this.#base, this.#vouched, sbx, this.#ceiling);
    this.#sandboxes.set(key, { uid: sbx.metadata?.uid, inputs, list });
    if (list.problems.length) this.hooks.onProblems?.({ namespace, name }, list.problems);
  }

  onPod(pod: PodLike, deleted: boolean): void {
    const uid = pod.metadata?.uid;
    const namespace = pod.metadata?.namespace;
    if (!uid || !namespace) return;
    const labels = pod.metadata?.labels ?? {};
    const name = labels[SANDBOX_NAME_LABEL];
    // A pod that is terminating gives up its address now: the network plugin frees it at teardown,
    // before the pod object is gone, and a new pod given it must not inherit this list (decision 0068).
    const ended =
      pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed" || !!pod.metadata?.deletionTimestamp;
    this.#dropPod(uid);
    // Ending is for good (no pod comes back from a deletionTimestamp or a terminal phase): a relist's
    // answer read before it and handed over after (the library's relist races its watch) must not
    // give the address back.
    if (ended) this.#ended(uid);
    if (deleted || ended || this.#gone.has(uid) || !name || labels[MANAGED_BY_LABEL] !== MANAGED_BY) return;
    const ips = [
      ...new Set(
        [pod.status?.podIP, ...(pod.status?.podIPs ?? []).map((p) => p?.ip)].filter((ip): ip is string => !!ip),
      ),
    ];
    if (!ips.length) return;
    const entry: PodEntry = { uid, ref: { namespace, name }, ips };
    this.#pods.set(uid, entry);
    // The newest pod to claim an address holds it (the older one's delete may not have come yet).
    for (const ip of ips) this.#ips.set(ip, uid);
  }

  /** Pods seen ending (uid -> when), kept ENDED_KEPT_MS: longer than any relist's answer takes. */
  readonly #gone = new Map<string, number>();

  #ended(uid: string, now = Date.now()): void {
    this.#gone.delete(uid);
    this.#gone.set(uid, now);
    for (const [old, at] of this.#gone) {
      if (now - at < ENDED_KEPT_MS) break;
      this.#gone.delete(old);
    }
  }

  #dropPod(uid: string): void {
    const held = this.#pods.get(uid);
    if (!held) return;
    this.#pods.delete(uid);
    for (const ip of held.ips) if (this.#ips.get(ip) === uid) this.#ips.delete(ip);
  }

  /** The Sandbox behind a source address and its list; undefined when no Sandbox pod holds the
   * address or its Sandbox is not (or no longer) known. */
  lookup(ip: string): { ref: SandboxRef; list: CompiledList } | undefined {
    const uid = this.#ips.get(ip.replace(/^::ffff:/, ""));
    const pod = uid ? this.#pods.get(uid) : undefined;
    if (!pod) return undefined;
    const sbx = this.#sandboxes.get(refKey(pod.ref));
    return sbx ? { ref: pod.ref, list: sbx.list } : undefined;
  }

  /** The Sandbox's uid (an Event's involvedObject names it). */
  uidOf(ref: SandboxRef): string | undefined {
    return this.#sandboxes.get(refKey(ref))?.uid;
  }

  has(ref: SandboxRef): boolean {
    return this.#sandboxes.has(refKey(ref));
  }

  get sizes(): { sandboxes: number; pods: number; corrections: number } {
    return { sandboxes: this.#sandboxes.size, pods: this.#pods.size, corrections: this.corrections };
  }
}

/**
 * Watches Sandboxes and Sandbox pods in each namespace (the egress point's role is bound in those
 * alone, decision 0047) into `index`. `ready` resolves once every watch's first list is applied.
 *
 * A watch that stalls (its connection alive, nothing delivered) would leave a gone pod's address
 * and a narrowed list in force. The library's own relist is the check (decision 0068): every
 * `relistMs` each watch lists again and hands the index every difference from what it delivered
 * (a pod gone or terminating, a list changed), so a stalled watch costs at most that long. Its
 * other guards are slower or absent: the stream's silence limit (10 minutes) arms only after a
 * first event, the library asks for no bookmarks, and its HTTP client has no body timeout. A difference
 * found after the first list is counted (`corrections`): the watch had not delivered it yet.
 */
export function watchIndex(
  index: EgressIndex,
  namespaces: readonly string[],
  log: (level: "info" | "warn", message: string, fields?: Record<string, unknown>) => void,
  relistMs: number = EGRESS_RELIST_DEFAULT_MS,
): { ready: Promise<void>; close(): void } {
  const cfg = { relistIntervalSec: relistMs / 1000 };
  const watchers: Array<{ close(): void }> = [];
  const lists: Array<Promise<void>> = [];
  const started: Array<Promise<unknown>> = [];
  for (const ns of namespaces) {
    const pods = K8s(kind.Pod)
      .InNamespace(ns)
      .WithLabel(MANAGED_BY_LABEL, MANAGED_BY)
      .WithLabel(SANDBOX_NAME_LABEL)
      .Watch((p, phase) => index.onPod(p, phase === "DELETED"), { ...cfg });
    const sandboxes = K8s(SandboxModel)
      .InNamespace(ns)
      .Watch((s, phase) => index.onSandbox(s, phase === "DELETED"), { ...cfg });
    for (const [what, w, apply] of [
      ["pods", pods, (o: unknown) => index.onPod(o as PodLike, false)],
      ["sandboxes", sandboxes, (o: unknown) => index.onSandbox(o as SandboxLike, false)],
    ] as const) {
      // The list event comes before its items are handed to the callback: applied here, so ready
      // means the index holds them.
      lists.push(
        new Promise<void>((resolve) =>
          w.events.once(WatchEvent.LIST, (list: { items?: unknown[] }) => {
            for (const item of list.items ?? []) apply(item);
            resolve();
          }),
        ),
      );
      let listed = false;
      w.events.once(WatchEvent.LIST, () => setImmediate(() => (listed = true)));
      w.events.on(WatchEvent.CACHE_MISS, () => {
        if (!listed) return;
        index.corrections += 1;
        log("warn", "a relist found a change the watch had not delivered; applied", { namespace: ns, what });
      });
      w.events.on(WatchEvent.LIST_ERROR, (err: unknown) =>
        log("warn", "a watch could not list", { namespace: ns, what, err: String((err as Error)?.message ?? err) }),
      );
      watchers.push(w);
      started.push(w.start());
    }
  }
  return {
    ready: Promise.all([...lists, ...started]).then(() => undefined),
    close: () => watchers.forEach((w) => w.close()),
  };
}
