// Names that cross a process, checked once at the edge with one rule: a Repo Slot (a directory
// under /work), a branch and a ref (git ref names, after `git check-ref-format`), and a repo url
// (read once by repo-identity.ts). The Orchestrator's API (api/orchestrator-schemas.ts) and the Harness's
// /attach (api/attach.ts) build their bodies from these schemas, so a body one accepts the other does
// too, and each refusal says what is wrong and the fix. The Harness still asks git itself about
// the branch (harness/attach-git.ts checkBranchName), which no schema can do synchronously.
import { z } from "zod";
import { RepoUrlError, checkRepoUrl, repoIdentity } from "./repo-identity";

/** The directory the default checkout lives in; a branch of that name would land on top of it. */
export const DEFAULT_DIR = "default";

export const MAX_SLOT_BYTES = 63;
export const MAX_BRANCH_BYTES = 255;

const bytes = (s: string) => new TextEncoder().encode(s).length;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;

const SLOT_FIX = "name the slot with letters, digits, '-', '_' or '.', e.g. app";

/** Why `name` cannot be a Repo Slot (one directory under /work), or undefined when it can. */
export function slotNameProblem(name: string): string | undefined {
  if (name === "") return `must not be empty: ${SLOT_FIX}`;
  if (bytes(name) > MAX_SLOT_BYTES) return `must be at most ${MAX_SLOT_BYTES} bytes: shorten it`;
  if (CONTROL.test(name)) return `must not contain a control character (NUL, newline, ...): ${SLOT_FIX}`;
  if (name.includes("/")) return `must not contain '/' (a slot is one directory under /work): ${SLOT_FIX}`;
  if (name.includes("\\")) return `must not contain '\\' (a slot is one directory under /work): ${SLOT_FIX}`;
  if (name === ".") return `must not be '.': ${SLOT_FIX}`;
  if (name.includes("..")) return `must not contain '..': ${SLOT_FIX}`;
  if (name.startsWith(".")) return `must not start with '.' (a hidden directory such as .git): ${SLOT_FIX}`;
  if (name.startsWith("-")) return `must not start with '-' (a tool could read it as an option): ${SLOT_FIX}`;
  return undefined;
}

const REF_FIX = "follow git's ref-name rules (git check-ref-format), e.g. feature/login";

/**
 * Why `name` is no git ref name git would accept as written (check-ref-format's rules, with a
 * one-level name allowed), nor one safe on a command line (no leading '-'), or undefined.
 */
export function refNameProblem(name: string, maxBytes = MAX_BRANCH_BYTES): string | undefined {
  if (name === "") return `must not be empty: ${REF_FIX}`;
  if (bytes(name) > maxBytes) return `must be at most ${maxBytes} bytes: shorten it`;
  if (name.startsWith("-")) return `must not start with '-' (git would read it as an option): ${REF_FIX}`;
  // The rest is `git check-ref-format`'s own list, in its words' order.
  if (CONTROL.test(name) || name.includes(" ")) {
    return "git refuses a space or a control character (NUL, newline, ...) in a ref name: use '-' instead";
  }
  const bad = ["~", "^", ":", "?", "*", "[", "\\"].find((c) => name.includes(c));
  if (bad) return `git refuses '${bad}' in a ref name: ${REF_FIX}`;
  if (name.includes("..")) return `git refuses '..' in a ref name: ${REF_FIX}`;
  if (name.includes("@{")) return `git refuses '@{' in a ref name (a reflog expression): ${REF_FIX}`;
  if (name === "@") return `git refuses the ref name '@' (it means HEAD): ${REF_FIX}`;
  if (name.startsWith("/") || name.endsWith("/"))
    return `git refuses a ref name that starts or ends with '/': ${REF_FIX}`;
  if (name.includes("//")) return `git refuses '//' in a ref name: ${REF_FIX}`;
  if (name.endsWith(".")) return `git refuses a ref name ending with '.': ${REF_FIX}`;
  for (const part of name.split("/")) {
    if (part.startsWith(".")) return `git refuses a part of a ref name starting with '.' (here '${part}'): ${REF_FIX}`;
    if (part.endsWith(".lock"))
      return `git refuses a part of a ref name ending with '.lock' (here '${part}'): ${REF_FIX}`;
  }
  return undefined;
}

/** Why `name` cannot be the Machine's branch (a worktree at /work/<slot>/<branch>), or undefined. */
export function branchNameProblem(name: string): string | undefined {
  if (name === DEFAULT_DIR || name.startsWith(`${DEFAULT_DIR}/`)) {
    return `must not be '${DEFAULT_DIR}' nor start with '${DEFAULT_DIR}/' (the default checkout lives at /work/<slot>/${DEFAULT_DIR}): pick another branch name`;
  }
  if (name === "HEAD") return `must not be 'HEAD' (git's name for the current commit): ${REF_FIX}`;
  return refNameProblem(name);
}

/** A string schema whose one issue (at most) is `problem`'s answer. */
const ruled = (problem: (s: string) => string | undefined) =>
  z.string().superRefine((s, ctx) => {
    const p = problem(s);
    if (p) ctx.addIssue({ code: "custom", message: p });
  });

/** A Repo Slot: /work/<slot>, one path component that cannot climb out of the work root. */
export const SlotName = ruled(slotNameProblem);

/** The Machine's branch: a git branch name that is not the default checkout's directory. */
export const BranchName = ruled(branchNameProblem);

/** What a slot's default checkout checks out (`git clone --branch`): a branch or a tag. */
export const RefName = ruled((s) => refNameProblem(s));

const urlProblem = (check: (url: string) => unknown) => (url: string) => {
  if (url === "") return "must not be empty: give an https or ssh url, an ssh address (git@host:path) or a path";
  // A leading '-' could be read by git as an option; a url never starts with one.
  if (url.startsWith("-")) return "must not start with '-': give an https or ssh url, or a path";
  try {
    check(url);
    return undefined;
  } catch (err) {
    if (err instanceof RepoUrlError) return err.message;
    throw err;
  }
};

/**
 * A repo url as the Harness takes it (the slot's push url): one the Repo identity can read (no
 * '..' segment, no encoded '/', ...). A credential in it is the caller's business (the Harness
 * redacts it from every message).
 */
export const SlotUrl = ruled(urlProblem(repoIdentity));

/** A repo url as a Machine may give it: readable, and carrying no credential (no password, no
 * http(s) user: those come from the fence entry's Secret), so none is ever stored in a Repo, a
 * Sandbox, an annotation or a work tree's config. */
export const RepoUrl = ruled(urlProblem(checkRepoUrl));
