// The agent protocol's words on the wire (decision 0025), pure: what the
// Orchestrator sends the Harness to admit a turn and what it answers (the admission, the durable
// handle), the turn's stream read from an offset, the abort, and the Harness's picks and their
// delivery polls to the Orchestrator (through the Custodian, with the Sandbox token). Both sides
// import these schemas; nothing here does I/O.
import { z } from "zod";
import { pathFor } from "./orchestrator-routes";

// ---------------------------------------------------------------------------------------------
// Names and paths

/** An Agent's name, and a conversation's id (the `iid`): one path segment each. */
export const AgentName = z
  .string()
  .regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, "must be a DNS label (lower-case letters, digits, '-'), e.g. coder");
export const ConversationId = z
  .string()
  .regex(/^[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?$/, "must be 1 to 128 letters, digits, '.', '_' or '-'");

/** The Harness's routes. */
export const agentPath = (name: string, id: string) => `/agents/${encodeURIComponent(name)}/${encodeURIComponent(id)}`;
export const streamPath = (name: string, id: string) => `${agentPath(name, id)}/stream`;
export const abortPath = (name: string, id: string) => `${agentPath(name, id)}/abort`;

/** The Orchestrator's routes for a Harness (behind the Custodian's `/orchestrator` route). */
export const picksPath = (iid: string) => pathFor("takePick", { iid });
export const deliveryPath = (iid: string, deliveryId: string) => pathFor("readDelivery", { iid, deliveryId });
export const allowedPath = (iid: string) => pathFor("readAllowed", { iid });

/** A long-poll's hold (decision 0025: about 25 s a request, so no timer on the path ever fires). */
export const LONG_POLL_MS = 25_000;

// ---------------------------------------------------------------------------------------------
// Admitting a turn

/** A Menu tool's name, and so a pick's: a letter, then up to 63 letters, digits, '_' or '-'. */
export const MenuName = z
  .string()
  .regex(/^[a-zA-Z][a-zA-Z0-9_-]{0,63}$/, "must be a tool name: a letter, then letters, digits, '_' or '-'");

/** The bounds on what a turn and a pick carry (decision 0042): a Sandbox's words are input, and
 * what the Orchestrator keeps of them must fit its ledgers. */
export const LIMITS = {
  /** Menu tools in one turn. */
  menu: 128,
  /** Allowed picks named at once. */
  allowed: 256,
  /** A submissionId's and a callId's length. */
  id: 128,
  /** A pick's `args`, as JSON, in bytes. */
  pickArgsBytes: 64 * 1024,
  /** A pick's whole body, in bytes (args and the rest). */
  pickBodyBytes: 96 * 1024,
  /** Events in one page of a conversation's stream (`?limit=`, the most a Harness answers). */
  pageEvents: 500,
  /** A Menu's tools' `parameters` schemas, as JSON together, in bytes (the Orchestrator keeps them
   * with the running turn to check each pick's args). */
  menuParametersBytes: 256 * 1024,
} as const;

/** One Menu tool: a transition the invoking state offers (decision 0025), presented to the model as a tool. */
export const MenuTool = z.strictObject({
  name: MenuName,
  description: z.string().max(4096, "must be at most 4096 characters"),
  /** A JSON schema of the pick's arguments (an object schema); absent: no arguments. */
  parameters: z.record(z.string(), z.unknown()).optional(),
});
export type MenuTool = z.infer<typeof MenuTool>;

export const TurnImage = z.strictObject({
  mediaType: z.enum(["image/png", "image/jpeg", "image/gif", "image/webp"]),
  /** Base64, at most 5 MiB decoded. */
  data: z.string().max(7_000_000, "must be at most 5 MiB decoded"),
});

/** `POST /agents/:name/:id`: a turn. A later turn on the same id continues the conversation. */
export const TurnBody = z.strictObject({
  message: z.string().min(1, "must not be empty").max(1_000_000, "must be at most 1,000,000 characters"),
  images: z.array(TurnImage).max(16, "must be at most 16 images").optional(),
  /** The Menu: fixed for a conversation (decision 0025); repeated on each turn so a restart needs nothing kept. */
  menu: z.array(MenuTool).max(LIMITS.menu, `must be at most ${LIMITS.menu} tools`).default([]),
  /** The picks this turn allows now (names in `menu`); re-read from the Orchestrator at each step. */
  allowed: z.array(MenuName).max(LIMITS.allowed, `must be at most ${LIMITS.allowed} names`).default([]),
  /** The caller's id for this submission: a repeat with the same one is the same turn, not a second. */
  submissionId: z.string().min(1).max(LIMITS.id).optional(),
});
export type TurnBody = z.infer<typeof TurnBody>;

/** The admission: the durable handle (decision 0025). `offset` is where this turn's events begin. */
export const Admission = z.strictObject({
  streamUrl: z.string(),
  offset: z.number().int().min(0),
  submissionId: z.string(),
});
export type Admission = z.infer<typeof Admission>;

// ---------------------------------------------------------------------------------------------
// The stream: progress (lossy) and the end (exact)

const at = { offset: z.number().int().min(0), at: z.string() };

export const StreamEvent = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("turn"), ...at, submissionId: z.string() }),
  z.strictObject({ kind: z.literal("text"), ...at, text: z.string() }),
  z.strictObject({ kind: z.literal("tool"), ...at, tool: z.string(), callId: z.string(), args: z.unknown() }),
  z.strictObject({
    kind: z.literal("toolResult"),
    ...at,
    tool: z.string(),
    callId: z.string(),
    isError: z.boolean(),
    text: z.string(),
  }),
  z.strictObject({ kind: z.literal("pick"), ...at, pick: z.string(), deliveryId: z.string().optional() }),
  z.strictObject({ kind: z.literal("working"), ...at, note: z.string() }),
  /** One model call's tokens as the provider counted them (docs/decisions/0054). */
  z.strictObject({
    kind: z.literal("usage"),
    ...at,
    model: z.string(),
    input: z.number().int().min(0),
    output: z.number().int().min(0),
    cacheRead: z.number().int().min(0),
    cacheWrite: z.number().int().min(0),
  }),
  /** The Allowed picks changed mid-turn and the model was told the new list (the restated Turn part). */
  z.strictObject({ kind: z.literal("allowed"), ...at, allowed: z.array(z.string()) }),
  z.strictObject({
    kind: z.literal("end"),
    ...at,
    submissionId: z.string(),
    outcome: z.enum(["completed", "aborted", "failed"]),
    message: z.string().optional(),
    error: z.string().optional(),
  }),
]);
export type StreamEvent = z.infer<typeof StreamEvent>;

/** `GET <streamUrl>?offset=N`: the events from N on (possibly none after a long-poll's hold), and
 * the offset to read from next. Reading an old offset again answers what followed it. */
export const StreamPage = z.strictObject({
  events: z.array(StreamEvent),
  next: z.number().int().min(0),
  /** True when the conversation has no running turn and every event up to `next` is read. */
  idle: z.boolean(),
});
export type StreamPage = z.infer<typeof StreamPage>;

// ---------------------------------------------------------------------------------------------
// Picks and their deliveries (the Harness to the Orchestrator)

export const PickBody = z.strictObject({
  pick: MenuName,
  args: z.unknown().optional(),
  /** The turn the pick belongs to. */
  submissionId: z.string().min(1).max(LIMITS.id),
  /** The tool call's id, unique in its turn: a pick re-sent after an unknown outcome carries the same one. */
  callId: z.string().min(1).max(LIMITS.id),
});
export type PickBody = z.infer<typeof PickBody>;

/** The pick's POST answers at once: taken, with the delivery to poll. */
export const PickReceipt = z.strictObject({ outstanding: z.literal(true), deliveryId: z.string().min(1) });
export type PickReceipt = z.infer<typeof PickReceipt>;

/** A delivery poll: still outstanding after the hold, or the Machine's answer (its text for the model). */
export const Delivery = z.discriminatedUnion("state", [
  z.strictObject({ state: z.literal("outstanding") }),
  z.strictObject({ state: z.literal("answered"), answer: z.string() }),
]);
export type Delivery = z.infer<typeof Delivery>;

/** The Allowed picks now (read at each step boundary; decision 0025), and the turn they are for:
 * a Harness keeps its list when they are another turn's (a new turn's admission not yet recorded). */
export const Allowed = z.strictObject({ allowed: z.array(z.string()), submissionId: z.string().optional() });
