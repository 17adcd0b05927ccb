// A Machine's Effects (decision 0070): what the Machine asks a workspace's
// Sandbox Effector to do with the Agent's work, the secrets it spends named by reference only.
// One owner for these words: the Orchestrator's API (api/orchestrator-schemas.ts re-uses them),
// the order the Orchestrator signs to the Effector (api/effector-wire.ts), the Effector
// (effector/), the ledger and both clients read them from here.
//
// An Effect runs at most once (decision 0071): its `id` is the Machine's; the Orchestrator records it
// before it sends, the Effector remembers every id it ran for its pod's life, and an Effect whose
// answer was lost settles `unknown` and never runs again unless the Machine marked it
// `idempotent`. A secret's value never passes through the Orchestrator: a header or env value
// names `{secret, key}`, a file the Effector alone mounts (decision 0070).
import { z } from "zod";
import { BranchName, SlotName } from "./names";
import { HOP_BY_HOP_HEADERS } from "./wire";

/** An Effect's id, the Machine's: its retry key. Letters, digits, '.', '_' and '-', at most 128. */
export const EffectId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, {
    message: "must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit, e.g. push-1",
  })
  .meta({ description: "The Machine's id for this Effect: sending it again answers the recorded result." });

export const SecretName = z
  .string()
  .max(253, "must be at most 253 characters")
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/, {
    message: "must be a Secret's name (lower-case DNS subdomain), e.g. forge-token",
  });
export const SecretKey = z
  .string()
  .max(253, "must be at most 253 characters")
  .regex(/^[-._a-zA-Z0-9]+$/, { message: "must be a Secret's key (letters, digits, '-', '_', '.'), e.g. token" });

/** A secret by reference: a key of a Secret in the Sandboxes' namespace the workspace's Effector mounts. */
export const SecretRef = z
  .strictObject({ secret: SecretName, key: SecretKey })
  .meta({ description: "A key of a Secret the workspace's Effector mounts (effector.secrets at create)." });
export type SecretRef = z.infer<typeof SecretRef>;

/** Where the Effector finds a secret it mounts: `/run/jr2/secrets/<secret>/<key>` (decision 0070). The
 * push Secrets are under `@git/`, which no Secret's name can take. */
export const effectSecretPath = (secretsDir: string, ref: SecretRef) => `${secretsDir}/${ref.secret}/${ref.key}`;

/** A request header an Effect sets: lower case, not hop-by-hop, not one the client computes. */
export const EffectHeaderName = z
  .string()
  .regex(/^[a-z0-9!#$%&'*+.^_`|~-]+$/, { message: "must be a header name in lower case, e.g. authorization" })
  .refine((h) => !(HOP_BY_HOP_HEADERS as readonly string[]).includes(h) && !["host", "content-length"].includes(h), {
    message: "names a header the Effector's client sets itself (host, content-length, hop-by-hop): leave it out",
  });
export const EffectEnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, {
  message: "must be an environment variable name, e.g. GH_TOKEN",
});

/** A header's or an env variable's value: literal, or a secret by reference. */
export const ValueOrSecret = z.union([z.string().max(16_384, "must be at most 16384 characters"), SecretRef]);
export type ValueOrSecret = z.infer<typeof ValueOrSecret>;

const CommitId = z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, {
  message: "must be a full commit id (40 or 64 lower-case hex digits)",
});

/** A path inside a Repo Slot's worktree: relative, no '..' component, no NUL. Symlinks are judged
 * by the Effector, which resolves it (none may lead out of the worktree). */
export const WorktreePath = z
  .string()
  .min(1, "must not be empty")
  .max(4096, "must be at most 4096 characters")
  .refine((p) => !p.startsWith("/") && !p.includes("\0") && !p.split("/").includes(".."), {
    message: "must be a relative path inside the worktree with no '..' component, e.g. docs/PR.md",
  });

export const EFFECT_LIMITS = {
  /** An http answer's body, and a command's stdout and stderr each, at most this many bytes kept. */
  maxBodyBytes: 1024 * 1024,
  defaultBodyBytes: 64 * 1024,
  /** An http Effect's request body from a file, at most. */
  maxFileBytes: 8 * 1024 * 1024,
  maxHttpSeconds: 300,
  defaultHttpSeconds: 60,
  maxCommandSeconds: 3600,
  defaultCommandSeconds: 300,
  maxPushSeconds: 600,
  /** The Effects one workspace's ledger keeps (oldest settled ones go first). */
  ledgerEffects: 256,
} as const;

const Base = {
  id: EffectId,
  idempotent: z
    .boolean()
    .default(false)
    .meta({
      description: "Safe to run again: an Effect whose answer was lost is sent again instead of settling unknown.",
    }),
};

export const PushEffect = z
  .strictObject({
    ...Base,
    kind: z.literal("push"),
    slot: SlotName.meta({
      description: "The Repo Slot: pushed to its url under its fence entry, with that entry's push secret.",
    }),
    branch: BranchName.optional().meta({
      description: "The worktree's branch to push (default: the workspace's branch).",
    }),
    commit: CommitId.optional().meta({ description: "Push this commit instead of the branch's head." }),
    to: BranchName.optional().meta({ description: "The remote branch (default: the branch pushed)." }),
    expect: CommitId.optional().meta({
      description: "Force, as a lease: the remote branch must hold this commit now, or the push is refused.",
    }),
  })
  .meta({ description: "Push a Repo Slot's branch (or a commit) to the slot's remote, unattended." });

export const HttpEffect = z
  .strictObject({
    ...Base,
    kind: z.literal("http"),
    method: z.enum(["GET", "POST", "PUT", "PATCH", "DELETE"]),
    url: z
      .string()
      .max(8192)
      .refine((u) => /^https?:\/\//.test(u) && URL.canParse(u), { message: "must be an absolute http(s) url" })
      .meta({ description: "Under a fence entry, or an origin of a secret the Effect names (decision 0070)." }),
    headers: z.record(EffectHeaderName, ValueOrSecret).default({}),
    body: z
      .union([
        z.strictObject({ json: z.unknown() }),
        z.strictObject({ file: z.strictObject({ slot: SlotName, path: WorktreePath }) }),
      ])
      .optional()
      .meta({ description: "JSON, or a Worktree file of the workspace's branch (resolved inside its worktree)." }),
    maxResponseBytes: z.number().int().min(0).max(EFFECT_LIMITS.maxBodyBytes).default(EFFECT_LIMITS.defaultBodyBytes),
    timeoutSeconds: z.number().int().min(1).max(EFFECT_LIMITS.maxHttpSeconds).default(EFFECT_LIMITS.defaultHttpSeconds),
  })
  .meta({ description: "An HTTP request from the Effector, through the egress point (e.g. opening a pull request)." });

export const CommandEffect = z
  .strictObject({
    ...Base,
    kind: z.literal("command"),
    argv: z
      .array(
        z
          .string()
          .max(32_768)
          .refine((a) => !a.includes("\0"), "must not contain NUL"),
      )
      .min(1)
      .max(256),
    cwd: z
      .strictObject({ slot: SlotName, path: WorktreePath.optional() })
      .meta({ description: "Where it runs: a directory of a Repo Slot's worktree (read-only)." }),
    env: z.record(EffectEnvName, ValueOrSecret).default({}),
    timeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(EFFECT_LIMITS.maxCommandSeconds)
      .default(EFFECT_LIMITS.defaultCommandSeconds),
    maxOutputBytes: z.number().int().min(0).max(EFFECT_LIMITS.maxBodyBytes).default(EFFECT_LIMITS.defaultBodyBytes),
  })
  .meta({ description: "A credentialed command, confined with Landlock (decision 0070)." });

/** POST /v1/workspaces/{name}/effects. */
export const EffectBody = z.discriminatedUnion("kind", [PushEffect, HttpEffect, CommandEffect]);
export type EffectBody = z.infer<typeof EffectBody>;
export type EffectKind = EffectBody["kind"];

// ---------------------------------------------------------------------------------------------
// Results

export const PushResult = z.strictObject({
  kind: z.literal("push"),
  remote: z.string().meta({ description: "The url pushed to, without credentials." }),
  ref: z.string().meta({ description: "The remote ref, refs/heads/<to>." }),
  commit: z.string().meta({ description: "The commit the remote ref now holds." }),
  forced: z.boolean(),
});
export const HttpResult = z.strictObject({
  kind: z.literal("http"),
  status: z.number().int(),
  headers: z.record(z.string(), z.string()),
  body: z.string(),
  bodyEncoding: z.enum(["utf8", "base64"]),
  truncated: z.boolean(),
});
export const CommandResult = z.strictObject({
  kind: z.literal("command"),
  exitCode: z.number().int().nullable(),
  signal: z.string().nullable(),
  timedOut: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  truncated: z.strictObject({ stdout: z.boolean(), stderr: z.boolean() }),
  /** Processes the command left behind, ended before it settled. */
  ended: z.number().int(),
});
export const EffectResult = z.discriminatedUnion("kind", [PushResult, HttpResult, CommandResult]);
export type EffectResult = z.infer<typeof EffectResult>;

/**
 * queued: recorded, waiting its turn; sent: handed to the Effector (recorded before the send);
 * succeeded: ran to its end (a push accepted, an http answer of any status, a command exiting 0);
 * failed: refused, or ran and failed (the result says how, when it ran); unknown: its answer was
 * lost and it is not idempotent, so it never runs again.
 */
export const EFFECT_STATES = ["queued", "sent", "succeeded", "failed", "unknown"] as const;
export type EffectState = (typeof EFFECT_STATES)[number];
export const SETTLED: readonly EffectState[] = ["succeeded", "failed", "unknown"];

export const EffectError = z.strictObject({
  code: z.string().meta({ description: "e.g. push_rejected, lease_broken, refused, timeout, interrupted, unconfined" }),
  message: z.string(),
});
export type EffectError = z.infer<typeof EffectError>;
