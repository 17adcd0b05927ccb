// Every error code the Orchestrator's API answers, once: its HTTP status, what it means and what the
// caller does (decision 0057). One owner per wire word: a throw site names a code from this list
// (HttpError, typed, so an unknown code does not compile) and its status comes from here, so a code
// never answers two statuses. The OpenAPI document's error body and docs/api/errors.md are
// generated from it. It lives in api/ beside the route table: the codes are words a Machine reads.
// The Custodian's own answers to a Sandbox are not here: they are the Custodian's words
// (api/custodian-config.ts), never answered to a Machine.

export type ErrorEntry = {
  readonly status: 400 | 401 | 403 | 404 | 405 | 409 | 413 | 415 | 429 | 500 | 502 | 503;
  /** What happened, in a sentence. */
  readonly meaning: string;
  /** What the caller does about it. */
  readonly action: string;
  /** Who meets it: every caller, a Machine (an API token), a Sandbox's Harness (its Custodian), or
   * only another Orchestrator replica that forwarded the call (decision 0079). */
  readonly caller: "any" | "machine" | "sandbox" | "replica";
};

/** Every code, grouped by where it arises; docs/api/errors.md lists them in this order. */
export const ERRORS = {
  // The request itself: every route.
  unauthorized: {
    status: 401,
    caller: "any",
    meaning:
      "No bearer token, or one that is not valid for this route (an API token, or the Sandbox token of the conversation's workspace).",
    action:
      "Send `Authorization: Bearer <token>` with a token from the installation's tokens file; do not retry with the same token.",
  },
  forbidden: {
    status: 403,
    caller: "machine",
    meaning: "A tenant's token asked for what only an admin token may read (the metrics).",
    action: "Use an admin token, or leave the route to the installation's operators.",
  },
  not_found: {
    status: 404,
    caller: "any",
    meaning:
      "No such route, workspace, conversation or delivery, or one another tenant owns (the same answer, so nothing is learned about what exists); also a feature this Orchestrator does not serve (egress in local mode).",
    action:
      "Check the name in the path; list the workspaces to see the ones this token may see. Do not retry unchanged.",
  },
  method_not_allowed: {
    status: 405,
    caller: "any",
    meaning: "The path exists, but not with this method.",
    action: "Use a method the `Allow` header names.",
  },
  unsupported_media_type: {
    status: 415,
    caller: "any",
    meaning: "The body is not `application/json`.",
    action: "Send the body as JSON with `content-type: application/json`.",
  },
  too_large: {
    status: 413,
    caller: "any",
    meaning:
      "The body, or a field of it, is past its bound (the body 1 MiB; a Menu's parameters 256 KiB; a pick's fields and args; a ledger's size): the message names which.",
    action: "Send less: the message names the field and its bound.",
  },
  invalid: {
    status: 400,
    caller: "any",
    meaning:
      "The body or a header is not one the route takes: not JSON, nested too deep, a field missing or wrong, a `Last-Event-ID` this stream never sent.",
    action: "Fix the request: the message names each field path and what it must be. Do not retry unchanged.",
  },
  rate_limited: {
    status: 429,
    caller: "sandbox",
    meaning: "The workspace's Sandbox calls are over their rate (decision 0042).",
    action: "Retry after the `retry-after` header's seconds.",
  },
  unavailable: {
    status: 503,
    caller: "any",
    meaning:
      "No Orchestrator replica holds the workspace's shard now: it is moving from one replica to another (a rollout, or a replica that went away; decision 0079).",
    action: "Retry after the `retry-after` header's seconds: a move ends within seconds, about 15 at most.",
  },
  not_owner: {
    status: 503,
    caller: "replica",
    meaning:
      "A call one replica forwarded (`x-jr2-forwarded-by`) reached a replica that no longer owns the workspace: a forwarded call is never forwarded again (decision 0079).",
    action:
      "The forwarding replica looks up the owner again and sends the call there; a Machine or a Harness never meets it.",
  },
  internal: {
    status: 500,
    caller: "any",
    meaning: "The Orchestrator failed in a way it did not expect; the details are in its log, not in the answer.",
    action: "Retry later; if it persists, read the Orchestrator's log for the request's path.",
  },
  // A workspace's create, as the installation's pod config and fence judge it.
  fence_refused: {
    status: 403,
    caller: "machine",
    meaning:
      "A Repo's url, or a slot the Effector pushes, is outside the fence: no `git.credentials` entry admits it (or names its push secret).",
    action: "Use a url the installation's fence admits, or ask its operators to add an entry.",
  },
  image_refused: {
    status: 403,
    caller: "machine",
    meaning: "`effector.image` is not one the pod config lets hold push credentials (decision 0048).",
    action: "Leave `effector.image` out (the pod config's image), or use one of its `effector.allowedImages` digests.",
  },
  runtime_class_refused: {
    status: 403,
    caller: "machine",
    meaning: "`runtimeClassName` is not one the pod config lets a workspace choose (decision 0055).",
    action: "Leave it out, or name the pod config's `runtime.className` or one of its `runtime.allowedClassNames`.",
  },
  invalid_size: {
    status: 400,
    caller: "machine",
    meaning: "`size` or `userSize` cannot be placed as asked: the message says which part and why.",
    action: "Change the Size as the message says.",
  },
  // A workspace that exists.
  no_sandbox: {
    status: 409,
    caller: "machine",
    meaning: "The workspace has no Sandbox now (being placed, or ended): its egress list cannot be read or set.",
    action: "Wait until the workspace is placed (its events say when), or create another if it ended.",
  },
  egress_unreadable: {
    status: 502,
    caller: "machine",
    meaning: "The egress point could not be read, or answered no log.",
    action: "Retry later; if it persists, check the egress point's health.",
  },
  // An Agent's turns (decision 0025).
  not_ready: {
    status: 409,
    caller: "machine",
    meaning: "The workspace's Sandbox is not Ready, so its Agents take no turn.",
    action: "Wait until the workspace is ready (GET it, or read its events), then submit again.",
  },
  conflict: {
    status: 409,
    caller: "machine",
    meaning: "The conversation (`iid`) belongs to another Agent than the one named.",
    action: "Name the conversation's own Agent, or leave `iid` out to start a new conversation.",
  },
  busy: {
    status: 409,
    caller: "machine",
    meaning: "Another turn runs in the workspace (one Agent at a time), as its Harness answered.",
    action: "Read the running turn's events to its end, or abort it, then submit again.",
  },
  turn_over: {
    status: 409,
    caller: "any",
    meaning: "The conversation's turn is over: its Allowed picks are not changed, its picks not taken or answered.",
    action: "Submit a new turn if there is more to do; a pick of the old turn needs no answer.",
  },
  too_many_streams: {
    status: 429,
    caller: "machine",
    meaning: "The workspace has as many turn event streams open as it may (8).",
    action: "Close a stream you no longer read, then open this one.",
  },
  harness_misbehaved: {
    status: 502,
    caller: "machine",
    meaning:
      "The workspace's Harness broke a bound or answered something that is not an answer (decision 0042); it is named on the workspace's Event and metric.",
    action: "Do not retry at once: the Sandbox's Harness is faulty; destroy the workspace if it persists.",
  },
  harness_error: {
    status: 502,
    caller: "machine",
    meaning:
      "The workspace's Harness answered an error this API does not pass on as its own: the message carries its status and words.",
    action: "Retry later; if it persists, read the message and the Harness's log.",
  },
  ledger_unreadable: {
    status: 500,
    caller: "any",
    meaning:
      "A workspace's turns, picks or effects ledger (a ConfigMap) cannot be read; it is kept as it is and nothing is written over it.",
    action: "An operator repairs the ConfigMap the message names, or deletes it to start the ledger empty.",
  },
  // Menu picks: a Harness's pick (through its Custodian) and a Machine's answer (decision 0025).
  unknown_conversation: {
    status: 404,
    caller: "sandbox",
    meaning: "The pick's conversation has no turn the Orchestrator admitted.",
    action: "A Harness takes picks only for a turn the Orchestrator admitted: end the tool call with the message.",
  },
  not_running: {
    status: 409,
    caller: "sandbox",
    meaning: "The pick's submission is not the conversation's running turn.",
    action: "End the tool call: only the running turn picks.",
  },
  not_on_menu: {
    status: 403,
    caller: "sandbox",
    meaning: "The pick is not on the turn's Menu.",
    action: "Pick one of the Menu's tools.",
  },
  not_allowed: {
    status: 403,
    caller: "sandbox",
    meaning: "The pick is on the Menu but not among the turn's Allowed picks now.",
    action: "Pick one of the Allowed picks (read again at the next step boundary).",
  },
  invalid_args: {
    status: 400,
    caller: "sandbox",
    meaning: "The pick's `args` do not match its Menu tool's `parameters`: the message names the place inside args.",
    action: "Call the tool again with arguments its parameters take.",
  },
  pick_outstanding: {
    status: 409,
    caller: "sandbox",
    meaning: "Another pick of this turn waits for the Machine: one pick is outstanding at a time in a turn.",
    action: "Wait for the outstanding pick's delivery before picking again.",
  },
  call_reused: {
    status: 409,
    caller: "sandbox",
    meaning: "The callId already named another pick in this turn.",
    action: "Use a new callId for a new pick; send the same pick again only with the same name and args.",
  },
  already_answered: {
    status: 409,
    caller: "machine",
    meaning: "The pick of this delivery is answered already: a delivery is answered once.",
    action: "Nothing to do: the first answer stands. List the picks to see what still waits.",
  },
  // A Machine's Effects (decision 0070).
  effector_absent: {
    status: 409,
    caller: "machine",
    meaning: "The workspace was created without an Effector (`effector` in its create body), so it runs no Effect.",
    action: "Create the workspace with `effector` (its `pushes` naming the slots it pushes) to run Effects.",
  },
  effect_refused: {
    status: 403,
    caller: "machine",
    meaning:
      "The Effect asks for what the workspace may not do: a url under no fence entry or origin of a secret it names, a " +
      "secret the workspace did not declare or sent to another origin, a slot it does not attach or push: the message " +
      "names the field.",
    action:
      "Change the field the message names, or ask the installation's operators for the fence entry or the " +
      "`effector.secrets` origin it names. Do not retry unchanged.",
  },
  effect_conflict: {
    status: 409,
    caller: "machine",
    meaning:
      "The Effect's `id` was used already on this workspace for a different Effect: an id runs one Effect, at most once.",
    action:
      "Use a new id for a new Effect; send the same id again only with the very same body (it answers its record).",
  },
  too_many_effects: {
    status: 429,
    caller: "machine",
    meaning: "The workspace has as many Effects waiting to run as it may (64): they run one after another.",
    action: "Wait for some to settle (GET the Effect with `?wait=`), then send more.",
  },
} as const satisfies Record<string, ErrorEntry>;

export type ErrorCode = keyof typeof ERRORS;

/** Every code, in the catalogue's order. */
export const ERROR_CODES = Object.keys(ERRORS) as [ErrorCode, ...ErrorCode[]];

/** The codes a Machine may meet (the public OpenAPI document's, the clients'): not a Harness's own,
 * not those only a replica meets. */
export const MACHINE_ERROR_CODES = ERROR_CODES.filter(
  (c) => ERRORS[c].caller === "any" || ERRORS[c].caller === "machine",
);

export const isErrorCode = (code: unknown): code is ErrorCode =>
  typeof code === "string" && Object.prototype.hasOwnProperty.call(ERRORS, code);

/** An error a service throws to be answered as `{error: {code, message}}` with its code's status. */
export class HttpError extends Error {
  readonly status: ErrorEntry["status"];

  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.status = ERRORS[code].status;
  }
}

/** A call cut because its workspace moved to another Orchestrator replica before any answer was
 * sent (decision 0079): the API places it again (waits for the new owner, forwards), so a caller
 * meets this code only when no owner appears in time. */
export class WorkspaceMoved extends HttpError {
  constructor(message: string) {
    super("unavailable", message);
  }
}
