// What each admission review is judged by, in one table: Pepr's bindings (bindings.ts) are made from
// it, and the module's review server (review-server.ts) routes by it, so the two can never disagree. The
// rules themselves are pure (capabilities/rules/); a judge turns their violations into a verdict,
// and a thrown error into a refusal, never an approval (decision 0028).
import { modelToGroupVersionKind } from "kubernetes-fluent-client";
import { Log, a } from "pepr";
import { RepoModel, SandboxModel } from "../../api/crd";
import { localRepoRootsFrom, localUrlRefusal } from "../../api/repo-fetch-policy";
import { SANDBOX_NAME_LABEL } from "../../api/wire";
import cfg from "../../package.json";
import { ApiError } from "../../lib/api-error";
import { kubeRequest, paths } from "../../lib/kube";
import { operatorIdentity } from "./identity";
import {
  CONTAINER_CONNECTS,
  CREDENTIAL_HOLDERS,
  connectRefusal,
  jr2MetadataChanged,
  podRulesFromEnv,
  podUpdateViolations,
  podViolations,
  sandboxLabelChanged,
  type PodRules,
} from "../rules/pods";
import { namespaceViolations } from "./namespaces";
import { sandboxRepoKeyViolations } from "./repo-keys";
import { rulesFromEnv, sandboxNameViolations, sandboxViolations, type SandboxRules } from "../rules/sandbox-rules";
import { describe, violation, type Violation } from "../rules/violations";

type Obj = { metadata?: { name?: string; namespace?: string; labels?: Record<string, string> }; [k: string]: unknown };

/** The part of an AdmissionReview's request the judges read (admission.k8s.io/v1). */
export type ReviewRequest = {
  uid: string;
  kind: { group: string; version: string; kind: string };
  operation: string;
  name?: string;
  namespace?: string;
  subResource?: string;
  /** The resource addressed (a CONNECT's `pods`; its object is the options, e.g. PodExecOptions). */
  resource?: { group: string; version: string; resource: string };
  userInfo?: { username?: string };
  object?: Obj | null;
  oldObject?: Obj | null;
};

export type Verdict = { allowed: true } | { allowed: false; code: number; message: string };

const rules: SandboxRules = rulesFromEnv();

const podRules: PodRules = podRulesFromEnv();

/** Local mode's roots (decision 0066): unset in every built manifest, so a cluster admits no local url. */
const localRepoRoots = localRepoRootsFrom(process.env);

const nameOf = (req: ReviewRequest) =>
  `${req.kind.kind} ${req.namespace ?? req.object?.metadata?.namespace ?? ""}/${req.name || req.object?.metadata?.name || "(generated)"}`;

/** Runs a check; a thrown error becomes a refusal naming what failed, never an approval. */
async function verdict(req: ReviewRequest, check: () => Violation[] | Promise<Violation[]>): Promise<Verdict> {
  const what = nameOf(req);
  try {
    const found = await check();
    return found.length ? { allowed: false, code: 422, message: describe(what, found) } : { allowed: true };
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    Log.error({ err: reason }, `admission check of ${what} failed`);
    return {
      allowed: false,
      code: 503,
      message: `${what} refused: the jr2 admission check failed (${reason}); retry`,
    };
  }
}

// A spec change is judged as a create is; an unchanged spec (a keepalive, a re-apply) is not judged
// again. The name, which names the Service, and the namespace's opt-in only at create.
// Its Repo keys must name Repos of its own namespace (decision 0046): read from the API server only
// for keys a create or a spec change adds.
const judgeSandbox = (req: ReviewRequest) =>
  verdict(req, async () => {
    const update = req.operation === "UPDATE";
    const namespace = req.object?.metadata?.namespace ?? req.namespace;
    return [
      // Created only where the installation opted in (decision 0067): in every mode, not by the
      // deployed module's RBAC alone. An update of one already there is not refused for it.
      ...(update ? [] : await namespaceViolations(namespace)),
      ...(update ? [] : sandboxNameViolations(req.object?.metadata?.name || req.name)),
      ...sandboxViolations(req.object?.spec, update ? (req.oldObject?.spec ?? {}) : undefined, rules),
      ...(await sandboxRepoKeyViolations(namespace, req.object?.spec, update ? req.oldObject?.spec : undefined)),
    ];
  });

// A Repo's url is a network remote (decision 0066): a local path would have every node's cache
// agent copy that directory of its disk (another namespace's cache) into this namespace's. Judged
// on create and on a spec change; the agents refuse it again, and their git speaks no file://.
const judgeRepo = (req: ReviewRequest) =>
  verdict(req, () => {
    const url = (req.object?.spec as { url?: unknown } | undefined)?.url;
    const why = typeof url === "string" ? localUrlRefusal(url, localRepoRoots) : undefined;
    return why ? [violation("spec.url", why)] : [];
  });

// The pod's namespace decides which caches it may mount (decision 0046): the request's, should the
// object not state it.
const withNamespace = (req: ReviewRequest): Obj | null | undefined =>
  req.object && {
    ...req.object,
    metadata: { ...req.object.metadata, namespace: req.object.metadata?.namespace ?? req.namespace },
  };

const judgePodCreate = (req: ReviewRequest) =>
  verdict(req, async () =>
    podViolations(withNamespace(req), req.userInfo?.username, await operatorIdentity(), podRules),
  );

// No label filter: a filter reads the new object only, so it would miss a label added to an
// ordinary pod (and see no removal). The rule decides: the Sandbox label added, changed or removed,
// and a Sandbox pod's other jr2 labels and annotations (on the pod or its status), are the
// operator's alone (decision 0067); a Sandbox pod's added ephemeral containers are checked. The
// webhook configuration's objectSelector keeps unlabelled pods away (an update matches if either
// the old or the new object carries the label), and sends a status update only when it changes
// labels or annotations (scripts/webhooks.ts).
const judgePodUpdate = (req: ReviewRequest) =>
  verdict(req, async () => {
    const asksOperator =
      sandboxLabelChanged(req.object, req.oldObject) || jr2MetadataChanged(req.object, req.oldObject);
    const operator = asksOperator ? await operatorIdentity() : undefined;
    return podUpdateViolations(req.object, req.oldObject, req.userInfo?.username, operator, req.subResource);
  });

/**
 * An exec or attach into a Sandbox pod's container (decision 0048). The request's object is the
 * options (which container), not the pod, so the webhook is called for every exec or attach into a
 * container named like a credential holder (scripts/webhooks.ts) and the pod is read here. The
 * operator's identity opens nothing: no one enters a credential holder. A pod that cannot be read
 * refuses the request: fail closed, as the webhook's failurePolicy does when the module is down.
 */
async function judgeConnect(req: ReviewRequest): Promise<Verdict> {
  const subResource = req.subResource ?? "";
  const options = (req.object ?? {}) as { container?: unknown };
  const container = typeof options.container === "string" ? options.container : "";
  if (!CONTAINER_CONNECTS.includes(subResource) || (container && !CREDENTIAL_HOLDERS.includes(container))) {
    return { allowed: true };
  }
  const namespace = req.namespace ?? "";
  const name = req.name ?? "";
  let pod: unknown;
  try {
    pod = await kubeRequest("GET", paths.pod(namespace, name));
  } catch (err) {
    // No such pod: the API server answers the request itself.
    if (err instanceof ApiError && err.status === 404) return { allowed: true };
    const reason = err instanceof Error ? err.message : String(err);
    Log.error({ err: reason }, `admission check of ${subResource} into pod ${namespace}/${name} failed`);
    return {
      allowed: false,
      code: 503,
      message: `${subResource} into pod ${namespace}/${name} refused: the jr2 admission check could not read the pod (${reason}); retry`,
    };
  }
  const why = connectRefusal(pod, subResource, container || undefined);
  return why ? { allowed: false, code: 403, message: why } : { allowed: true };
}

/** A CONNECT on a pod: the validating configuration's third webhook (scripts/webhooks.ts) sends exec
 * and attach; any other subresource is allowed (judgeConnect). */
const isPodConnect = (req: ReviewRequest) =>
  req.operation === "CONNECT" && req.kind.group === "" && (req.resource?.resource ?? "pods") === "pods";

type Model = typeof SandboxModel | typeof RepoModel | typeof a.Pod;

export type Review = {
  /** The kind judged, as Pepr binds it. */
  model: Model;
  /** The model's group and kind, as Pepr reads them (the kind's registration). */
  group: string;
  kind: string;
  operations: readonly ("CREATE" | "UPDATE")[];
  /** Judged only when the new object carries this label. */
  label?: string;
  judge: (req: ReviewRequest) => Promise<Verdict>;
};

const review = (model: Model, r: Omit<Review, "model" | "group" | "kind">): Review => {
  const { group, kind } = modelToGroupVersionKind(model.name);
  return { model, group, kind, ...r };
};

/** Every review the module judges. A request none of them takes is allowed, as Pepr allows it. */
export const REVIEWS: readonly Review[] = [
  review(SandboxModel, { operations: ["CREATE", "UPDATE"], judge: judgeSandbox }),
  review(RepoModel, { operations: ["CREATE", "UPDATE"], judge: judgeRepo }),
  review(a.Pod, { operations: ["CREATE"], label: SANDBOX_NAME_LABEL, judge: judgePodCreate }),
  review(a.Pod, { operations: ["UPDATE"], judge: judgePodUpdate }),
];

/** Namespaces Pepr never judges (package.json pepr.alwaysIgnore; the webhooks' namespaceSelector too). */
const IGNORED = new Set(cfg.pepr.alwaysIgnore.namespaces);

/** The reviews a request is judged by, as Pepr's binding filters pick them. Pure. */
export function reviewsFor(req: ReviewRequest): Review[] {
  const namespace = req.object?.metadata?.namespace ?? req.namespace;
  if (namespace && IGNORED.has(namespace)) return [];
  return REVIEWS.filter(
    (r) =>
      r.group === req.kind.group &&
      r.kind === req.kind.kind &&
      r.operations.includes(req.operation as "CREATE") &&
      (!r.label || req.object?.metadata?.labels?.[r.label] !== undefined),
  );
}

/** The verdict on a request: every review that takes it must allow it. */
export async function judge(req: ReviewRequest): Promise<Verdict> {
  if (isPodConnect(req)) {
    const namespace = req.namespace;
    return namespace && IGNORED.has(namespace) ? { allowed: true } : judgeConnect(req);
  }
  const denials: { code: number; message: string }[] = [];
  for (const r of reviewsFor(req)) {
    const v = await r.judge(req);
    if (!v.allowed) denials.push(v);
  }
  if (!denials.length) return { allowed: true };
  return {
    allowed: false,
    code: Math.max(...denials.map((d) => d.code)),
    message: denials.map((d) => d.message).join("; "),
  };
}
