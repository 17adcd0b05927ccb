// The body of POST /attach. Strict objects, so a misspelt field is an error rather than silently
// ignored. The slot, branch, ref and url follow the one rule of names.ts (the Orchestrator's API
// uses the same); the branch name is also checked by git itself (harness/attach-git.ts
// checkBranchName), which this schema cannot do synchronously.
import { z } from "zod";
import { fieldPath } from "./field-path";
import { BranchName, RefName, SlotName, SlotUrl } from "./names";

export { DEFAULT_DIR } from "./names";

/** A key names /repos/<key>: a plain directory name, nothing that resolves elsewhere. */
const CacheKey = z
  .string()
  .min(1, "must not be empty")
  .refine((s) => s !== "." && s !== "..", "must be a plain directory name")
  .refine((s) => !s.includes("/") && !s.includes("\\") && !s.includes("\0"), "must be a plain directory name");

const Slot = z.strictObject({
  slot: SlotName,
  url: SlotUrl,
  identity: z.string().min(1, "must not be empty"),
  key: CacheKey,
  ref: RefName.optional(),
});

export const AttachBody = z
  .strictObject({
    slots: z.array(Slot).min(1, "must name at least one slot"),
    branch: BranchName,
    // A commit id: hex only, so it can never be read as an option or a revision expression.
    reviewSha: z
      .string()
      .regex(/^[0-9a-f]{4,64}$/i, "must be a hexadecimal commit id")
      .optional(),
  })
  .superRefine((body, ctx) => {
    // Two entries for one slot would fight over the same directory.
    const seen = new Set<string>();
    body.slots.forEach((s, i) => {
      if (seen.has(s.slot)) ctx.addIssue({ code: "custom", path: ["slots", i, "slot"], message: "duplicate slot" });
      seen.add(s.slot);
    });
  });

export type AttachBody = z.infer<typeof AttachBody>;

/** The Harness's answer: per slot, the worktree it made and where it stands. */
export const AttachAnswer = z
  .strictObject({
    repos: z.record(
      z.string(),
      z.strictObject({
        path: z.string().meta({ description: "The worktree on the Machine's branch." }),
        branch: z.string(),
        head: z.string().meta({ description: "The commit the worktree is at." }),
      }),
    ),
  })
  .meta({ description: "What the Harness's attach did, per slot." });
export type AttachAnswer = z.infer<typeof AttachAnswer>;
export type RepoAnswer = AttachAnswer["repos"][string];
export type SlotSpec = AttachBody["slots"][number];

export { fieldPath } from "./field-path";

// zod 4 says "expected string, received undefined" for a missing field; "Required" is what a
// client reads faster (and what the issue's examples show).
const requiredMessage: z.core.$ZodErrorMap = (iss) =>
  iss.code === "invalid_type" && iss.input === undefined ? "Required" : undefined;

export type Parsed = { ok: true; body: AttachBody } | { ok: false; message: string };

/** Validates a decoded JSON body; on failure, one message naming every bad field's path. */
export function parseAttachBody(input: unknown): Parsed {
  const r = AttachBody.safeParse(input, { error: requiredMessage });
  if (r.success) return { ok: true, body: r.data };
  const message = r.error.issues.map((iss) => `${fieldPath(iss.path)}: ${iss.message}`).join("; ");
  return { ok: false, message };
}
