// The Orchestrator's HTTP API v1 as zod schemas: every body it reads and every answer it writes,
// in one home the server validates with, `/v1/openapi.json` (docs/api/openapi.json) is generated
// from and the typed client reads with (docs/decisions/0003, 0057). It lives in api/ beside the
// route table because these are words on the wire between a Machine and the Orchestrator: a
// client imports them without the Orchestrator. Shapes the Orchestrator shares with others come
// from their owners: the Sandbox's conditions and phases from the CRD sources, the slot, branch,
// ref and url rules from api/names.ts, which the Harness's `/attach` schema uses too, so a body
// this API accepts is one the Harness accepts; a turn and a pick from api/agent-protocol.ts.
import { z } from "zod";
import { SecretRef } from "./effects";
import { EgressAllowList } from "./egress-point";
import { Condition } from "./crd/sources/common";
import { IDLE_TIMEOUT_RANGE, SANDBOX_PHASES, idleTimeoutField } from "./crd/sources/sandbox";
import { AttachAnswer, fieldPath } from "./attach";
import { BranchName, RefName, RepoUrl, SlotName } from "./names";
import { REPO_WAITS } from "./conditions";
import { ERROR_CODES } from "./orchestrator-errors";
import { Admission, AgentName, ConversationId, LIMITS, MenuName, TurnBody } from "./agent-protocol";
import { EFFECT_STATES, EffectBody, EffectError, EffectId, EffectResult } from "./effects";

// ---------------------------------------------------------------------------------------------
// Names and small shapes

/** A workspace is named after its Sandbox, and the Sandbox's Service takes the same name: a
 * DNS-1035 label (a letter first), at most 63 characters. */
export const WorkspaceName = z
  .string()
  .max(63, "must be at most 63 characters")
  .regex(/^[a-z]([-a-z0-9]*[a-z0-9])?$/, "must be a DNS label starting with a letter (a-z, 0-9, '-')")
  .meta({ description: "The workspace's name, which is also its Sandbox's." });

/** A Kubernetes label value: what `jr2.dev/run` and `jr2.dev/workflow` carry. */
const LabelValue = z
  .string()
  .max(63, "must be at most 63 characters")
  .regex(/^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/, "must be a Kubernetes label value");

/** A Kubernetes quantity in its common spellings (`500m`, `2`, `4Gi`). */
const Quantity = z
  .string()
  .regex(
    /^(\d+(\.\d+)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/,
    "must be a Kubernetes quantity such as 500m or 4Gi",
  );

/** A RuntimeClass's name (a DNS-1123 subdomain): what a Sandbox pod runs under (decision 0055). The
 * create body and the pod config both take it. */
export const RuntimeClassName = z
  .string()
  .max(253, "must be at most 253 characters")
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
    message: "must be a RuntimeClass's name (lower-case DNS subdomain), e.g. gvisor",
  });

export const Size = z
  .strictObject({
    cpu: Quantity.optional().meta({ description: "CPU for the whole pod (e.g. `2`, `500m`)." }),
    memory: Quantity.optional().meta({ description: "Memory for the whole pod (e.g. `4Gi`)." }),
    disk: Quantity.optional().meta({
      description: "Disk for `/work`: the Harness's ephemeral-storage request (e.g. `20Gi`), with no limit.",
    }),
  })
  .refine((s) => s.cpu !== undefined || s.memory !== undefined || s.disk !== undefined, "must name cpu, memory or disk")
  .meta({ description: "The workspace's Size: the pod-level ceiling (decision 0015)." });
export type Size = z.infer<typeof Size>;

// The one rule for names that cross a process (api/names.ts), which the Harness's /attach uses
// too: a slot name that cannot climb out of /work, a branch and a ref by git's ref-name rules (and
// not the default checkout's directory), a url read once into its Repo identity (no '..', no
// encoded '/') that carries no credential. A bad one is answered 400, naming the field, before
// anything is written.
export const RepoSlot = z
  .strictObject({
    slot: SlotName.meta({ description: "The Repo Slot: the checkout lands at /work/<slot>/." }),
    url: RepoUrl.meta({
      description:
        "The repository (https, ssh, scp-like `git@host:path`, or a path), without credentials (they come from the fence entry's Secret).",
    }),
    ref: RefName.optional().meta({ description: "What `/work/<slot>/default` checks out (default: HEAD)." }),
  })
  .meta({ description: "One Repo Slot of the workspace." });
export type RepoSlot = z.infer<typeof RepoSlot>;

// ---------------------------------------------------------------------------------------------
// Bodies

/** Egress rules (decision 0051) as a classic schema, which carries a description: the list's own
 * refusals (api/egress-point.ts EgressAllowList), each at its index. The API's body and the pod
 * config's base list both take it. */
export const EgressRules = z.array(z.string()).check(
  z.superRefine((list, ctx) => {
    const r = EgressAllowList.safeParse(list);
    if (!r.success) for (const i of r.error.issues) ctx.addIssue({ code: "custom", path: i.path, message: i.message });
  }),
);

/** A workspace's egress list (decision 0051): what its Sandbox may reach through the egress point
 * beside the installation's base list and its Repos' remotes. */
export const EgressList = z
  .strictObject({
    allow: EgressRules.meta({
      description:
        "Hosts the Sandbox may reach: `host`, `host:port`, `*.suffix` (deeper names only, never the suffix " +
        "itself), `*.suffix:port`, or an IP literal (`[v6]:port`). No port: any port. At most 256.",
    }),
  })
  .meta({ description: "A workspace's egress list: the Sandbox's spec.egress.allow (decision 0051)." });
export type EgressList = z.infer<typeof EgressList>;

export const CreateWorkspaceBody = z
  .strictObject({
    image: z
      .string()
      .min(1, "must not be empty")
      .meta({ description: "The Harness image (the Sandbox's spec.image)." }),
    repos: z
      .array(RepoSlot)
      .default([])
      .meta({ description: "The Repo Slots to attach; none skips the attach. Each url must pass the fence." }),
    branch: BranchName.meta({ description: "The Machine's branch: a worktree per slot at /work/<slot>/<branch>." }),
    userImage: z
      .string()
      .min(1, "must not be empty")
      .optional()
      .meta({ description: "The User Container's image, when the workspace has one." }),
    size: Size.optional(),
    userSize: Size.optional().meta({
      description:
        "The User Container's share of `size` (cpu, memory), requests equal to limits; absent, it shares the pod's.",
    }),
    effector: z
      .strictObject({
        image: z
          .string()
          .min(1, "must not be empty")
          .optional()
          .meta({
            description:
              "The Sandbox Effector's image (default: the pod config's effector.image, else the companions image). " +
              "It holds push credentials and effect secrets, so only the pod config's image or one of its " +
              "effector.allowedImages digests is accepted (decision 0048); its command is jr2's Effector (decision 0070).",
          }),
        pushes: z
          .array(SlotName)
          .default([])
          .meta({
            description:
              "The Repo Slots the Effector pushes: each slot's fence entry must name its push `secret`, which the " +
              "Sandbox's spec.gitCredentials then names.",
          }),
        secrets: z
          .array(SecretRef)
          .max(64, "must name at most 64 effect secrets")
          .default([])
          .superRefine((refs, ctx) => {
            const seen = new Set<string>();
            refs.forEach((r, i) => {
              const id = `${r.secret}/${r.key}`;
              if (seen.has(id)) ctx.addIssue({ code: "custom", path: [i], message: `repeats ${id}: name it once` });
              seen.add(id);
            });
          })
          .meta({
            description:
              "The effect secrets this workspace's Effector mounts (decision 0070), each {secret, key} an entry of " +
              "the pod config's effector.secrets this tenant may use: read-only at /run/jr2/secrets/<secret>/<key> " +
              "in the effector alone, what an Effect's headers and env may name. Fixed at the create.",
          }),
      })
      .optional()
      .meta({ description: "A Sandbox Effector beside the Harness (decision 0021)." }),
    runtimeClassName: RuntimeClassName.optional().meta({
      description:
        "The RuntimeClass every container of the Sandbox pod runs under (the Sandbox's spec.runtimeClassName; " +
        "decision 0055): the pod config's runtime.className or one of its runtime.allowedClassNames. Absent: " +
        "the pod config's runtime.className, else the cluster's default runtime.",
    }),
    egress: EgressList.optional().meta({
      description:
        "The hosts the Sandbox may reach beside the installation's base list (decision 0051); read and replaced " +
        "later with GET and PUT /v1/workspaces/{name}/egress. Absent: the base list alone.",
    }),
    idleTimeout: idleTimeoutField("idleTimeout")
      .optional()
      .meta({
        description:
          "How long the Sandbox may go unrenewed before the operator reaps it: a Go duration " +
          `${IDLE_TIMEOUT_RANGE}, the Sandbox's spec.idleTimeout (absent, the CRD's default, 30m). ` +
          "The Orchestrator renews its keepalive at least every third of it.",
      }),
    run: LabelValue.optional().meta({ description: "The `jr2.dev/run` label (default: the workspace's name)." }),
    workflow: LabelValue.optional().meta({ description: "The `jr2.dev/workflow` label (default: `api`)." }),
  })
  .superRefine((body, ctx) => {
    // Two entries for one slot would fight over one directory; the Harness refuses them too.
    const seen = new Set<string>();
    body.repos.forEach((r, i) => {
      if (seen.has(r.slot)) ctx.addIssue({ code: "custom", path: ["repos", i, "slot"], message: "duplicate slot" });
      seen.add(r.slot);
    });
    body.effector?.pushes.forEach((slot, i) => {
      if (!seen.has(slot))
        ctx.addIssue({
          code: "custom",
          path: ["effector", "pushes", i],
          message: `names Repo Slot "${slot}", which repos does not attach: add it to repos or drop the push`,
        });
    });
    if (body.userSize?.disk !== undefined)
      ctx.addIssue({
        code: "custom",
        path: ["userSize", "disk"],
        message: "is not split: /work is one volume, sized by size.disk",
      });
  })
  .meta({ description: "A request for a workspace: a Sandbox placed, provisioned and attached." });
export type CreateWorkspaceBody = z.infer<typeof CreateWorkspaceBody>;

// ---------------------------------------------------------------------------------------------
// An Agent's turns and its Menu picks (decision 0025)

/** What a Machine sends: a turn for one Agent, on a conversation (`iid`; a new one when absent). */
export const SubmitTurnBody = TurnBody.extend({
  agent: AgentName,
  iid: ConversationId.optional(),
}).meta({ description: "A turn for one of the workspace's Agents." });
export type SubmitTurnBody = z.infer<typeof SubmitTurnBody>;

/** `POST .../turns` answers the conversation and the Harness's admission: the durable handle. */
export const TurnSubmitted = z
  .strictObject({ iid: ConversationId, admission: Admission })
  .meta({ description: "The conversation and its turn's admission." });
export type TurnSubmitted = z.infer<typeof TurnSubmitted>;

/** `POST .../turns/{iid}/abort` answers whether a running turn was aborted. */
export const AbortReceipt = z
  .strictObject({ aborted: z.boolean().meta({ description: "False when no turn ran." }) })
  .meta({ description: "Whether a running turn was aborted." });
export type AbortReceipt = z.infer<typeof AbortReceipt>;

/** The Machine's `PUT .../turns/{iid}/allowed`: the picks the conversation's running turn allows now. */
export const AllowedBody = z
  .strictObject({
    allowed: z.array(MenuName).max(LIMITS.allowed, `must be at most ${LIMITS.allowed} picks`),
  })
  .meta({ description: "The Allowed picks the conversation's running turn has from now." });
export type AllowedBody = z.infer<typeof AllowedBody>;

/** `PUT .../turns/{iid}/allowed` answers the Allowed picks now, sorted. */
export const AllowedSet = z
  .strictObject({ iid: ConversationId, allowed: z.array(z.string()) })
  .meta({ description: "The conversation's Allowed picks now, sorted." });
export type AllowedSet = z.infer<typeof AllowedSet>;

/** One outstanding pick as the Machine lists it. */
export const OutstandingPick = z.strictObject({
  iid: z.string(),
  deliveryId: z.string(),
  submissionId: z.string(),
  callId: z.string(),
  pick: z.string(),
  args: z.unknown().optional(),
  at: z.string(),
});
export type OutstandingPick = z.infer<typeof OutstandingPick>;

export const PickList = z
  .strictObject({ items: z.array(OutstandingPick) })
  .meta({ description: "The picks the workspace's Agents wait on, oldest first." });
export type PickList = z.infer<typeof PickList>;

/** `POST /v1/workspaces/{name}/picks/{deliveryId}/answer`: the answer, the text the model reads. */
export const AnswerBody = z
  .strictObject({
    answer: z.string().max(256 * 1024, "must be at most 262144 characters"),
  })
  .meta({ description: "The answer to a pick: the text the Agent reads as the Menu tool's result." });
export type AnswerBody = z.infer<typeof AnswerBody>;

export const AnswerReceipt = z
  .strictObject({ deliveryId: z.string(), answered: z.literal(true) })
  .meta({ description: "The pick's delivery, answered." });
export type AnswerReceipt = z.infer<typeof AnswerReceipt>;

// ---------------------------------------------------------------------------------------------
// What the lifecycle reports (lifecycle.ts emits these; the SSE stream carries them verbatim)

/** The workspace lifecycle's states, in order; the last three are final. */
export const WORKSPACE_STATES = [
  "placing",
  "provisioning",
  "attaching",
  "ready",
  "destroying",
  "lost",
  "failed",
  "destroyed",
] as const;
export const FINAL_STATES: readonly WorkspaceState[] = ["lost", "failed", "destroyed"];
export const WorkspaceState = z.enum(WORKSPACE_STATES).meta({ description: "Where the workspace's lifecycle is." });
export type WorkspaceState = z.infer<typeof WorkspaceState>;

/** Why a workspace waits, as the operator explained it on the Sandbox's status. */
export const Wait = z
  .discriminatedUnion("kind", [
    z.strictObject({
      kind: z.literal("node"),
      message: z.string().meta({ description: "The scheduler's words." }),
    }),
    z.strictObject({
      kind: z.literal("quota"),
      message: z.string().meta({ description: "The ResourceQuota's refusal of the pod create." }),
    }),
    z.strictObject({
      kind: z.literal("repo"),
      reason: z.enum(REPO_WAITS),
      message: z.string().meta({ description: "Which Repo, on which node." }),
    }),
    z.strictObject({
      kind: z.literal("container"),
      container: z.string(),
      reason: z.string().meta({ description: "The kubelet's waiting reason (e.g. ImagePullBackOff)." }),
      message: z.string(),
    }),
  ])
  .meta({ description: "What the workspace waits for: a node, a quota, its Repos, or a container." });
export type Wait = z.infer<typeof Wait>;

export const Failure = z
  .strictObject({
    stage: z.enum(["place", "provision", "attach", "destroy"]),
    reason: z.string().meta({ description: "The failure's name (e.g. HarnessCrashLoop, FenceRefused)." }),
    message: z.string(),
    details: z.record(z.string(), z.unknown()).optional(),
  })
  .meta({ description: "A named failure: which stage, why, and the words that explain it." });
export type Failure = z.infer<typeof Failure>;

export const Loss = z
  .strictObject({
    reason: z.string().meta({ description: "The operator's Lost reason (PodDeleted, Evicted, ...), or Absent." }),
    message: z.string(),
  })
  .meta({ description: "Why the workspace's Sandbox is gone for good." });
export type Loss = z.infer<typeof Loss>;

/** The Harness's `/attach` answer, as the API passes it on. */
export { AttachAnswer };

export const StaleSlots = z
  .record(z.string(), z.string())
  .meta({ description: "Slots attached from a cache whose fetch failed (ReposFresh=False), with the reason." });

const At = z.string().meta({ format: "date-time" });

export const WorkspaceEvent = z
  .discriminatedUnion("type", [
    z.strictObject({
      type: z.literal("transition"),
      from: WorkspaceState.nullable().meta({ description: "null for the first state (or a restore)." }),
      to: WorkspaceState,
      at: At,
      restored: z.boolean().optional().meta({ description: "Rebuilt from the Sandbox after a restart." }),
      failure: Failure.optional(),
      lost: Loss.optional(),
    }),
    z.strictObject({ type: z.literal("wait"), wait: Wait, at: At }),
    z.strictObject({ type: z.literal("renewed"), count: z.number().int(), at: At }),
    z.strictObject({ type: z.literal("renew_failed"), message: z.string(), at: At }),
  ])
  .meta({ description: "One event of a workspace: a transition, a wait, or its lease." });
export type WorkspaceEvent = z.infer<typeof WorkspaceEvent>;

// ---------------------------------------------------------------------------------------------
// Answers

export const Created = z.strictObject({ name: WorkspaceName }).meta({ description: "The workspace's name." });
export type Created = z.infer<typeof Created>;

/** A delete's answer: its own schema, so a generator names it apart from a create's (decision 0077). */
export const Deleted = z
  .strictObject({ name: WorkspaceName })
  .meta({ description: "The workspace being destroyed: its name. Its events end at `destroyed`." });
export type Deleted = z.infer<typeof Deleted>;

export const WorkspaceView = z
  .strictObject({
    name: WorkspaceName,
    state: WorkspaceState,
    phase: z
      .enum(SANDBOX_PHASES)
      .optional()
      .meta({ description: "The Sandbox's status.phase, once the operator wrote one." }),
    endpoint: z.string().optional().meta({ description: "The Harness's address (status.endpoint)." }),
    conditions: z.array(Condition).meta({ description: "The Sandbox's conditions." }),
    wait: Wait.optional(),
    attach: AttachAnswer.optional(),
    stale: StaleSlots.optional(),
    failure: Failure.optional(),
    lost: Loss.optional(),
    createdAt: At.optional(),
    readyAt: At.optional(),
    renewedAt: At.optional().meta({ format: "date-time", description: "The last keepalive this Orchestrator wrote." }),
  })
  .meta({ description: "A workspace: its lifecycle state and what its Sandbox reports." });
export type WorkspaceView = z.infer<typeof WorkspaceView>;

export const WorkspaceList = z
  .strictObject({ items: z.array(WorkspaceView) })
  .meta({ description: "Every workspace." });
export type WorkspaceList = z.infer<typeof WorkspaceList>;

export const EgressLog = z
  .strictObject({
    entries: z
      .array(
        z.strictObject({
          time: z.string().meta({ format: "date-time", description: "When the connection was decided." }),
          host: z.string().meta({ description: "The host asked for, as the egress point matched it." }),
          port: z.number().int().meta({ description: "The port asked for." }),
          decision: z.enum(["allowed", "refused", "unreachable"]).meta({
            description: "allowed: connected; refused: a rule or limit said no; unreachable: allowed, not connected.",
          }),
          reason: z.string().optional().meta({
            description: "Why it was refused (not_listed, internal, limit) or not connected (dns, connect, timeout).",
          }),
          bytesOut: z.number().int().meta({ description: "Bytes the Sandbox sent." }),
          bytesIn: z.number().int().meta({ description: "Bytes the Sandbox received." }),
          durationMs: z.number().meta({ description: "How long the connection lasted." }),
        }),
      )
      .meta({ description: "The Sandbox's latest connections, oldest first (bounded; older ones dropped)." }),
  })
  .meta({ description: "Every connection the egress point decided for the workspace's Sandbox (decision 0051)." });
export type EgressLog = z.infer<typeof EgressLog>;

export const Health = z.strictObject({ ok: z.literal(true) }).meta({ description: "The Orchestrator serves." });
export type Health = z.infer<typeof Health>;

// ---------------------------------------------------------------------------------------------
// A Machine's Effects (decision 0070): the body is api/effects.ts EffectBody, its
// owner; the record is what the Orchestrator's ledger `<workspace>-effects` holds of it.

export { EffectBody };

export const EffectState = z.enum(EFFECT_STATES).meta({
  description:
    "queued: recorded, waiting its turn; sent: handed to the Effector (recorded before the send); succeeded, " +
    "failed: settled; unknown: its answer was lost and it is not idempotent, so it never runs again.",
});

export const EffectRecord = z
  .strictObject({
    id: EffectId,
    kind: z.enum(["push", "http", "command"]),
    idempotent: z.boolean(),
    state: EffectState,
    acceptedAt: At,
    sentAt: At.optional(),
    settledAt: At.optional(),
    result: EffectResult.optional().meta({
      description:
        "What it did, once it ran (a failed command or a refused push included); an http body or a command's " +
        "output as kept by the ledger (truncated says when cut).",
    }),
    error: EffectError.optional().meta({
      description: "Why it failed or is unknown (e.g. answer_lost, answer_unsigned, refused, push_rejected).",
    }),
    request: EffectBody.meta({ description: "The Effect as the Machine sent it: secrets by reference only." }),
  })
  .meta({ description: "One of a workspace's Effects, as its ledger records it." });
export type EffectRecord = z.infer<typeof EffectRecord>;

export const EffectList = z
  .strictObject({ items: z.array(EffectRecord) })
  .meta({ description: "The workspace's Effects, in the order the Machine sent them." });
export type EffectList = z.infer<typeof EffectList>;

export const ErrorBody = z
  .strictObject({
    error: z.strictObject({
      // The enum is the catalogue's (api/orchestrator-errors.ts), stated in the document; the schema
      // reads any word, so a client meeting a code newer than itself still reads the message.
      code: z.string().meta({
        description: "A stable word from the error catalogue (docs/api/errors.md): what happened and what to do.",
        enum: ERROR_CODES,
      }),
      message: z.string(),
    }),
  })
  .meta({ description: "Every error the API answers." });
export type ErrorBody = z.infer<typeof ErrorBody>;

// ---------------------------------------------------------------------------------------------
// Validation

// zod 4 says "expected string, received undefined" for a missing field; "Required" reads faster
// (the Harness says the same).
const requiredMessage: z.core.$ZodErrorMap = (iss) =>
  iss.code === "invalid_type" && iss.input === undefined ? "Required" : undefined;

/** `repos[0].slot: must not contain '/'; branch: Required`: every issue with its field path. */
export function zodIssuesToMessage(issues: readonly z.core.$ZodIssue[]): string {
  return issues.map((iss) => `${fieldPath(iss.path)}: ${iss.message}`).join("; ");
}

export type ParsedBody<T> = { ok: true; body: T } | { ok: false; message: string };

/** Validates a decoded JSON value against `schema`; on failure, one message naming every bad field. */
export function parseBody<S extends z.ZodType>(schema: S, input: unknown): ParsedBody<z.output<S>> {
  const r = schema.safeParse(input, { error: requiredMessage });
  return r.success ? { ok: true, body: r.data } : { ok: false, message: zodIssuesToMessage(r.error.issues) };
}

export const parseCreateBody = (input: unknown) => parseBody(CreateWorkspaceBody, input);
