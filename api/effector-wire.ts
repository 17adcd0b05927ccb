// The wire between the Orchestrator and a Sandbox Effector (decision 0070): every
// request signed with the Sandbox's Effector key, every answer signed back (decision 0070). The
// pod's containers share one network namespace, so the Harness can reach :8082: the signature is
// the barrier. A request is bound to its method, path, body, the pod address it is meant for, a
// time and a nonce; the Effector refuses what is unsigned, stale, replayed, meant for another pod
// or signed with another key. An answer is bound to the request's nonce, its status and body, so
// a process that binds :8082 while the Effector is down can neither run nor fake an Effect.
//
// Pure: hashing and comparing only. The signature is api/effector-sign.ts (zod-free, so the Effector
// at rest holds no zod); re-exported here, so this file is still the whole wire.
import { z } from "zod";
import { EffectError, EffectId, EffectResult, SecretRef } from "./effects";

export * from "./effector-sign";

// ---------------------------------------------------------------------------------------------
// The order: an Effect as the Orchestrator resolved it (every path, url and secret name decided
// by the Orchestrator from what jr2 recorded, decision 0070); the Effector checks it again.

const AbsPath = z.string().startsWith("/").max(4096);

export const PushOrder = z.strictObject({
  kind: z.literal("push"),
  /** The slot's worktree, /work/<slot>/<branch>: its objects (and the Repo cache's, by alternates). */
  worktree: AbsPath,
  /** What to push: a local branch's head (`refs/heads/<b>`) or a commit id. */
  source: z.union([z.strictObject({ branch: z.string() }), z.strictObject({ commit: z.string() })]),
  /** The remote: the slot's url, which its fence entry admits. */
  url: z.string(),
  /** The push Secret's name: /run/jr2/secrets/@git/<credential>/. */
  credential: z.string(),
  /** refs/heads/<to>. */
  ref: z.string(),
  expect: z.string().optional(),
  timeoutSeconds: z.number().int(),
});
export const HttpOrder = z.strictObject({
  kind: z.literal("http"),
  method: z.string(),
  url: z.string(),
  headers: z.record(z.string(), z.union([z.string(), SecretRef])),
  body: z
    .union([
      z.strictObject({ json: z.unknown() }),
      /** `root` the slot's worktree, `path` inside it (relative). */
      z.strictObject({ file: z.strictObject({ root: AbsPath, path: z.string() }) }),
    ])
    .optional(),
  maxResponseBytes: z.number().int(),
  timeoutSeconds: z.number().int(),
});
export const CommandOrder = z.strictObject({
  kind: z.literal("command"),
  argv: z.array(z.string()).min(1),
  /** The worktree and the directory inside it the command runs in. */
  root: AbsPath,
  cwd: z.string(),
  env: z.record(z.string(), z.union([z.string(), SecretRef])),
  timeoutSeconds: z.number().int(),
  maxOutputBytes: z.number().int(),
});
export const EffectorOrder = z.strictObject({
  id: EffectId,
  idempotent: z.boolean(),
  effect: z.discriminatedUnion("kind", [PushOrder, HttpOrder, CommandOrder]),
});
export type EffectorOrder = z.infer<typeof EffectorOrder>;

/** What the Effector knows of an id: running, settled, or (after its own restart mid-run) unknown. */
export const EffectorAnswer = z.strictObject({
  id: EffectId,
  state: z.enum(["running", "succeeded", "failed", "unknown"]),
  /** True when this answer is the record of an earlier run of the id: nothing ran now. */
  replayed: z.boolean(),
  result: EffectResult.optional(),
  error: EffectError.optional(),
});
export type EffectorAnswer = z.infer<typeof EffectorAnswer>;
