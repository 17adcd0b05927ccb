// The picks ledger's rules, pure (decisions 0025, 0042): a workspace's Agents' picks as the Harness
// sends them (through the Custodian, with the Sandbox token) and the Machine's answers. One ledger
// per workspace, kept by pick-store.ts in a ConfigMap the workspace's Sandbox owns, so an
// Orchestrator restarted while a pick is outstanding still knows it and answers it. A pick reaches
// these rules only once the turns ledger (turn-ledger.ts judgePick) has found it is for the running
// turn of its conversation, on that turn's Menu and Allowed now. The rules here:
//   - a conversation (iid) belongs to the workspace its name begins with: `<workspace>.<rest>`
//     (a workspace's name has no dot, so the first dot ends it);
//   - a pick is named by (iid, submissionId, callId), and a callId is unique in its turn: the same
//     pick again (same name, same args) answers the same delivery (the Harness re-sends after an
//     unknown outcome); another pick under a callId already used is refused (409);
//   - one pick is outstanding at a time per turn (iid, submissionId): a different one meanwhile is
//     refused (409). Since one turn runs at a time in a workspace, at most one pick of the
//     workspace waits for its Machine, and a pick's args are bounded (LIMITS);
//   - a pick of a turn that is over leaves the ledger when the next pick is taken or answered
//     (withoutEnded), answered or not: no run of ended turns can wedge the ledger (decision 0049);
//   - a delivery is answered once: a second answer is refused (409), an unknown one is 404;
//   - answered picks are kept, newest last, only while the ledger stays within its size bound.
import { z } from "zod";
import { ConversationId, type PickBody } from "../../api/agent-protocol";
import { WorkspaceName, type OutstandingPick } from "../../api/orchestrator-schemas";

// ---------------------------------------------------------------------------------------------
// The ledger

export const LedgerPick = z.strictObject({
  deliveryId: z.string().min(1),
  iid: z.string().min(1),
  submissionId: z.string().min(1),
  callId: z.string().min(1),
  pick: z.string().min(1),
  args: z.unknown().optional(),
  /** When the pick was taken (ISO). */
  at: z.string(),
  /** The Machine's answer, once given. */
  answer: z.string().optional(),
  answeredAt: z.string().optional(),
});
export type LedgerPick = z.infer<typeof LedgerPick>;

export const Ledger = z.strictObject({
  version: z.literal(1),
  picks: z.array(LedgerPick),
  /** Read from ledgers written before the Allowed picks moved to the turns ledger; never written. */
  allowed: z.record(z.string(), z.array(z.string())).optional(),
});
export type Ledger = z.infer<typeof Ledger>;

export const EMPTY_LEDGER: Ledger = { version: 1, picks: [] };

/** The ledger's serialized size bound: a ConfigMap holds at most 1 MiB, its metadata included. */
export const MAX_LEDGER_BYTES = 900 * 1024;

/** The ConfigMap key the ledger is kept under, and the ConfigMap's name. */
export const LEDGER_KEY = "ledger.json";
export const ledgerConfigMapName = (workspace: string) => `${workspace}-agents`;

/** A stored ledger's text read back; anything unreadable is an error (never silently emptied). */
export function parseLedger(text: string | undefined): Ledger {
  if (text === undefined || text === "") return EMPTY_LEDGER;
  const parsed = Ledger.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`the picks ledger is not a ledger: ${parsed.error.issues[0]?.message}`);
  const { allowed: _moved, ...ledger } = parsed.data;
  return ledger;
}

export const serializeLedger = (ledger: Ledger) => JSON.stringify(ledger);

// ---------------------------------------------------------------------------------------------
// Which workspace a conversation belongs to

/** The workspace of `iid` (`<workspace>.<rest>`), or undefined when it names none. */
export function workspaceOfIid(iid: string): string | undefined {
  if (!ConversationId.safeParse(iid).success) return undefined;
  const dot = iid.indexOf(".");
  if (dot <= 0 || dot === iid.length - 1) return undefined;
  const workspace = iid.slice(0, dot);
  return WorkspaceName.safeParse(workspace).success ? workspace : undefined;
}

// ---------------------------------------------------------------------------------------------
// Taking a pick

export type Submitted =
  | { kind: "same"; pick: LedgerPick }
  | { kind: "taken"; pick: LedgerPick; ledger: Ledger }
  | { kind: "busy"; message: string }
  | { kind: "reused"; message: string }
  | { kind: "too-large"; message: string };

/** The same value, as JSON compares it (key order aside). */
function sameJson(a: unknown, b: unknown): boolean {
  const canon = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canon)
      : v && typeof v === "object"
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, canon((v as Record<string, unknown>)[k])]),
          )
        : v;
  return JSON.stringify(canon(a)) === JSON.stringify(canon(b));
}

const isOutstanding = (p: LedgerPick) => p.answer === undefined;

/** A pick as the Harness sends it: the same again (same delivery), taken, or refused. */
export function submitPick(
  ledger: Ledger,
  iid: string,
  body: PickBody,
  fresh: { deliveryId: string; at: string },
): Submitted {
  const same = ledger.picks.find(
    (p) => p.iid === iid && p.submissionId === body.submissionId && p.callId === body.callId,
  );
  if (same && same.pick === body.pick && sameJson(same.args, body.args)) return { kind: "same", pick: same };
  if (same)
    return {
      kind: "reused",
      message: `callId ${body.callId} of this turn already named the pick "${same.pick}": a callId is unique in its turn`,
    };
  const open = ledger.picks.find((p) => p.iid === iid && p.submissionId === body.submissionId && isOutstanding(p));
  if (open) {
    return {
      kind: "busy",
      message:
        `the pick "${open.pick}" of this turn (conversation ${iid}) is still outstanding: one pick waits ` +
        `for the Machine at a time in a turn; "${body.pick}" was not taken`,
    };
  }
  const pick: LedgerPick = {
    deliveryId: fresh.deliveryId,
    iid,
    submissionId: body.submissionId,
    callId: body.callId,
    pick: body.pick,
    ...(body.args !== undefined ? { args: body.args } : {}),
    at: fresh.at,
  };
  const next = bounded({ ...ledger, picks: [...ledger.picks, pick] });
  if (!next) {
    return {
      kind: "too-large",
      message: `the pick "${body.pick}" does not fit the workspace's picks ledger (${MAX_LEDGER_BYTES} bytes)`,
    };
  }
  return { kind: "taken", pick, ledger: next };
}

/** A turn's key: its conversation and submission. */
export const turnKey = (p: Pick<LedgerPick, "iid" | "submissionId">) => `${p.iid}\n${p.submissionId}`;

/**
 * The ledger without the picks of the turns in `ended` (keys by turnKey): their outstanding ones
 * can never be answered (409 turn_over) and are never listed, so they only take room; the same
 * ledger when nothing goes.
 */
export function withoutEnded(ledger: Ledger, ended: ReadonlySet<string>): Ledger {
  if (!ended.size) return ledger;
  const picks = ledger.picks.filter((p) => !ended.has(turnKey(p)));
  return picks.length === ledger.picks.length ? ledger : { ...ledger, picks };
}

// ---------------------------------------------------------------------------------------------
// Answering a pick

export type Answered =
  | { kind: "answered"; pick: LedgerPick; ledger: Ledger }
  | { kind: "unknown"; message: string }
  | { kind: "already"; message: string }
  | { kind: "too-large"; message: string };

/** The Machine's answer to a delivery: once. */
export function answerPick(ledger: Ledger, deliveryId: string, answer: string, at: string): Answered {
  const i = ledger.picks.findIndex((p) => p.deliveryId === deliveryId);
  if (i < 0) return { kind: "unknown", message: `no pick with delivery "${deliveryId}"` };
  const old = ledger.picks[i];
  if (!isOutstanding(old))
    return { kind: "already", message: `the pick of delivery "${deliveryId}" is answered already` };
  const pick: LedgerPick = { ...old, answer, answeredAt: at };
  const picks = [...ledger.picks];
  picks[i] = pick;
  const next = bounded({ ...ledger, picks });
  if (!next) {
    return {
      kind: "too-large",
      message: `the answer does not fit the workspace's picks ledger (${MAX_LEDGER_BYTES} bytes)`,
    };
  }
  return { kind: "answered", pick, ledger: next };
}

// ---------------------------------------------------------------------------------------------
// Reading

/** The delivery of `deliveryId` in conversation `iid`, or undefined (an unknown turn: 404). */
export const deliveryOf = (ledger: Ledger, iid: string, deliveryId: string): LedgerPick | undefined =>
  ledger.picks.find((p) => p.deliveryId === deliveryId && p.iid === iid);

/** The picks waiting for the Machine, oldest first. */
export const outstandingPicks = (ledger: Ledger): LedgerPick[] => ledger.picks.filter(isOutstanding);

/** Answered picks kept, newest last: a Harness that lost an answer (a restart mid-poll) reads it
 * again soon after, never a hundred picks later; the ledger, rewritten at each pick, stays small. */
export const MAX_ANSWERED = 64;

/**
 * The ledger within its bounds: at most `keep` answered picks (the oldest go first) and at most
 * `max` bytes (more of the oldest answered go); undefined when the outstanding ones alone do not fit.
 */
export function bounded(ledger: Ledger, max = MAX_LEDGER_BYTES, keep = MAX_ANSWERED): Ledger | undefined {
  const answered = ledger.picks.filter((p) => !isOutstanding(p)).length;
  let drop = Math.max(0, answered - keep);
  let picks = drop ? ledger.picks.filter((p) => isOutstanding(p) || drop-- <= 0) : ledger.picks;
  // Each pick's share of the text counted once; one serialization checks the result.
  let bytes = Buffer.byteLength(serializeLedger({ ...ledger, picks }), "utf8");
  while (bytes > max) {
    const i = picks.findIndex((p) => !isOutstanding(p));
    if (i < 0) return undefined;
    bytes -= Buffer.byteLength(`${JSON.stringify(picks[i])},`, "utf8");
    picks = [...picks.slice(0, i), ...picks.slice(i + 1)];
  }
  if (picks === ledger.picks) return ledger;
  const next = { ...ledger, picks };
  return Buffer.byteLength(serializeLedger(next), "utf8") <= max ? next : bounded(next, max - 64, keep);
}

// ---------------------------------------------------------------------------------------------
// The Machine's words

/** A ledger pick as the Machine lists it (api/orchestrator-schemas.ts OutstandingPick). */
export const outstandingView = (p: LedgerPick): OutstandingPick => ({
  iid: p.iid,
  deliveryId: p.deliveryId,
  submissionId: p.submissionId,
  callId: p.callId,
  pick: p.pick,
  ...(p.args !== undefined ? { args: p.args } : {}),
  at: p.at,
});

/** The longest a delivery poll holds (decision 0025's 25 s): `?wait=` beyond it is cut to it. */
export function waitOf(query: string | null): number {
  const n = Number(query ?? 0);
  if (!Number.isFinite(n) || n <= 0) return 0;
  return Math.min(Math.floor(n), 25_000);
}
