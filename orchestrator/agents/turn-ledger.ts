// The turns ledger's rules, pure (decisions 0025, 0042). Per workspace, each conversation (iid) the
// Orchestrator admitted a turn on: its Agent, the Harness's admission, when, and while its turn runs
// the turn's Menu names and Allowed picks. This is what the Orchestrator itself recorded, so it is
// what a Sandbox's words are checked against: a pick is taken only for the running turn of its
// conversation, only for a name on that turn's Menu and in its Allowed picks now.
//   - A turn ends for the Orchestrator when it reads the turn's `end` on the stream, when an abort
//     is answered, and when the Harness admits another turn in the workspace (the Harness runs one
//     turn at a time per workspace, decision 0025), so at most one conversation is running.
//   - An ended conversation keeps only its Agent and admission (a later turn continues it; its
//     stream can still be read); when the ledger would pass its bound, the oldest ended
//     conversations are dropped: the bound is stated, and no one conversation can wedge the ledger.
//   - The Allowed picks change only with an admitted submit or the Machine's `PUT .../allowed`.
//   - A pick's args are checked against its Menu tool's `parameters` (a JSON Schema), kept with
//     the running turn (decision 0049).
import { z } from "zod";
import { Check, Errors } from "typebox/schema";
import { Admission, MenuName, type TurnBody } from "../../api/agent-protocol";
import { fieldPath } from "../../api/field-path";
import type { ErrorCode } from "../../api/orchestrator-errors";

export const TurnEntry = z.strictObject({
  agent: z.string().min(1),
  admission: Admission,
  /** When the turn was admitted (ISO): the oldest ended conversations go first. */
  at: z.string(),
  /** The running turn's Menu names (absent once it ended). */
  menu: z.array(MenuName).optional(),
  /** The running turn's Allowed picks now, sorted (absent once it ended). */
  allowed: z.array(MenuName).optional(),
  /** The running turn's Menu tools' `parameters` schemas, by name, for those that have one (absent
   * once it ended, and in entries written before they were kept: their args are not checked). */
  parameters: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
  ended: z.literal(true).optional(),
});
export type TurnEntry = z.infer<typeof TurnEntry>;

export const TurnsLedger = z.strictObject({
  version: z.literal(2),
  conversations: z.record(z.string(), TurnEntry),
});
export type TurnsLedger = z.infer<typeof TurnsLedger>;

/** The ledger's bound (a ConfigMap holds 1 MiB with its metadata): about 3,500 ended conversations,
 * each some 250 bytes; past it the oldest ended ones are dropped. */
export const MAX_TURNS_LEDGER_BYTES = 900 * 1024;

export const turnsConfigMap = (workspace: string) => `${workspace}-turns`;
export const TURNS_KEY = "turns.json";

export const emptyTurns = (): TurnsLedger => ({ version: 2, conversations: {} });

/** The ledger as the first Orchestrators wrote it: `iid → {agent, admission}`. */
const LegacyLedger = z.record(z.string(), z.object({ agent: z.string(), admission: Admission }));

/** A stored ledger read back. A legacy one is read as ended conversations (no Menu was recorded,
 * so no pick is taken for them). Anything else that does not parse throws: never emptied. */
export function parseTurnsLedger(text: string): TurnsLedger {
  const json = JSON.parse(text) as unknown;
  const now = TurnsLedger.safeParse(json);
  if (now.success) return now.data;
  if (json && typeof json === "object" && !("version" in json)) {
    const legacy = LegacyLedger.safeParse(json);
    if (legacy.success) {
      const conversations: Record<string, TurnEntry> = {};
      for (const [iid, e] of Object.entries(legacy.data))
        conversations[iid] = { agent: e.agent, admission: e.admission, at: "", ended: true };
      return { version: 2, conversations };
    }
  }
  const issue = now.error.issues[0];
  throw new Error(`not a turns ledger: ${issue?.path.join(".") || "ledger"}: ${issue?.message}`);
}

export const serializeTurns = (ledger: TurnsLedger) => JSON.stringify(ledger);

const size = (ledger: TurnsLedger) => Buffer.byteLength(serializeTurns(ledger), "utf8");
const names = (list: readonly string[]) => [...new Set(list)].sort();

/** What is kept of a conversation whose turn ended. */
const ended = (e: TurnEntry): TurnEntry => ({ agent: e.agent, admission: e.admission, at: e.at, ended: true });

/**
 * The ledger after the Harness admitted `turn` on `iid`: the entry written, every other
 * conversation ended (the Harness admits one turn at a time in a workspace), and the oldest ended
 * conversations dropped while the ledger is past `max`. Undefined when even that does not fit.
 */
export function admitTurn(
  ledger: TurnsLedger,
  iid: string,
  turn: { agent: string; admission: Admission; at: string; body: Pick<TurnBody, "menu" | "allowed"> },
  max = MAX_TURNS_LEDGER_BYTES,
): TurnsLedger | undefined {
  const conversations: Record<string, TurnEntry> = {};
  for (const [other, e] of Object.entries(ledger.conversations)) if (other !== iid) conversations[other] = ended(e);
  conversations[iid] = {
    agent: turn.agent,
    admission: turn.admission,
    at: turn.at,
    menu: names(turn.body.menu.map((m) => m.name)),
    allowed: names(turn.body.allowed),
    parameters: Object.fromEntries(turn.body.menu.flatMap((m) => (m.parameters ? [[m.name, m.parameters]] : []))),
  };
  return compact({ version: 2, conversations }, iid, max);
}

/** The oldest ended conversations (not `keep`) dropped until the ledger fits `max`. */
export function compact(ledger: TurnsLedger, keep: string, max = MAX_TURNS_LEDGER_BYTES): TurnsLedger | undefined {
  if (size(ledger) <= max) return ledger;
  const conversations = { ...ledger.conversations };
  const oldest = Object.entries(conversations)
    .filter(([iid, e]) => iid !== keep && e.ended)
    .sort(([, a], [, b]) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
    .map(([iid]) => iid);
  // Each entry's share of the text is counted once; one serialization checks the result.
  let total = size(ledger);
  for (const iid of oldest) {
    if (total <= max) break;
    total -= Buffer.byteLength(`${JSON.stringify(iid)}:${JSON.stringify(conversations[iid])},`, "utf8");
    delete conversations[iid];
  }
  const next: TurnsLedger = { version: 2, conversations };
  return size(next) <= max ? next : undefined;
}

/** The ledger with `iid`'s turn `submissionId` ended; undefined when nothing changes. */
export function endTurn(ledger: TurnsLedger, iid: string, submissionId: string): TurnsLedger | undefined {
  const e = ledger.conversations[iid];
  if (!e || e.ended || e.admission.submissionId !== submissionId) return undefined;
  return { version: 2, conversations: { ...ledger.conversations, [iid]: ended(e) } };
}

export type AllowedChange =
  | { kind: "set"; allowed: string[]; ledger: TurnsLedger }
  | { kind: "same"; allowed: string[] }
  | { kind: "unknown"; message: string }
  | { kind: "over"; message: string };

/** The Machine's `PUT .../allowed`: the running turn's Allowed picks set to `allowed`. */
export function setTurnAllowed(ledger: TurnsLedger, iid: string, allowed: readonly string[]): AllowedChange {
  const e = ledger.conversations[iid];
  if (!e) return { kind: "unknown", message: `the workspace has no conversation ${iid}` };
  if (e.ended || !e.allowed)
    return {
      kind: "over",
      message: `conversation ${iid} has no running turn: its next turn's submit carries its Allowed picks`,
    };
  const next = names(allowed);
  if (next.length === e.allowed.length && next.every((n, i) => n === e.allowed![i]))
    return { kind: "same", allowed: next };
  return {
    kind: "set",
    allowed: next,
    ledger: { version: 2, conversations: { ...ledger.conversations, [iid]: { ...e, allowed: next } } },
  };
}

/** The running turn of `iid`, as the Orchestrator recorded it; undefined when there is none. */
export function runningTurn(
  ledger: TurnsLedger,
  iid: string,
): (TurnEntry & { menu: string[]; allowed: string[] }) | undefined {
  const e = ledger.conversations[iid];
  return e && !e.ended && e.menu && e.allowed ? (e as TurnEntry & { menu: string[]; allowed: string[] }) : undefined;
}

// ---------------------------------------------------------------------------------------------
// A pick, judged against the turn it claims

/** A pick refused: its code (api/orchestrator-errors.ts) gives its status. */
export type PickRefusal = {
  code: Extract<
    ErrorCode,
    "unknown_conversation" | "turn_over" | "not_running" | "not_on_menu" | "not_allowed" | "invalid_args"
  >;
  message: string;
};

/**
 * Whether a Sandbox's pick may be taken: only for the running turn of its conversation (the
 * submission the Orchestrator admitted), only for a name on that turn's Menu and in its Allowed
 * picks now. Undefined: it may; else the refusal, with its reason.
 */
export function judgePick(
  ledger: TurnsLedger,
  iid: string,
  pick: { pick: string; submissionId: string; args?: unknown },
): PickRefusal | undefined {
  const e = ledger.conversations[iid];
  if (!e)
    return {
      code: "unknown_conversation",
      message: `conversation ${iid} has no turn the Orchestrator admitted: a pick is taken only for an admitted, running turn`,
    };
  const turn = runningTurn(ledger, iid);
  if (!turn)
    return {
      code: "turn_over",
      message: `the turn of conversation ${iid} is over: no pick is taken for it`,
    };
  if (pick.submissionId !== turn.admission.submissionId)
    return {
      code: "not_running",
      message: `submission ${pick.submissionId} is not the running turn of conversation ${iid}`,
    };
  if (!turn.menu.includes(pick.pick))
    return {
      code: "not_on_menu",
      message: `"${pick.pick}" is not on the turn's Menu (${turn.menu.join(", ") || "an empty Menu"})`,
    };
  if (!turn.allowed.includes(pick.pick))
    return {
      code: "not_allowed",
      message: `"${pick.pick}" is not among the turn's Allowed picks now (${turn.allowed.join(", ") || "none"})`,
    };
  const schema = turn.parameters?.[pick.pick];
  return schema ? judgeArgs(pick.pick, schema, pick.args) : undefined;
}

/**
 * A pick's args against its Menu tool's `parameters` (a JSON Schema, checked by typebox's
 * interpreter: no code is generated from a Machine's schema). Absent args are checked as `{}`, the
 * arguments of a call that gave none. The refusal names the first place inside `args` that fails.
 */
export function judgeArgs(pick: string, schema: Record<string, unknown>, args: unknown): PickRefusal | undefined {
  const value = args === undefined ? {} : args;
  try {
    if (Check(schema as never, value)) return undefined;
    const [, errors] = Errors(schema as never, value);
    const first = errors[0];
    const where = fieldPath(["args", ...pointerPath(value, first?.instancePath ?? "")]);
    return {
      code: "invalid_args",
      message: `${where}: ${first?.message ?? "does not match"} (the parameters of "${pick}" on the turn's Menu)`,
    };
  } catch (err) {
    return {
      code: "invalid_args",
      message: `args: cannot be checked against the parameters of "${pick}" on the turn's Menu: ${err instanceof Error ? err.message : String(err)}`,
    };
  }
}

/** A JSON Pointer inside `value` as path segments: an array's index as a number. */
function pointerPath(value: unknown, pointer: string): PropertyKey[] {
  const path: PropertyKey[] = [];
  let at = value;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    const index = Array.isArray(at) && /^\d+$/.test(key) ? Number(key) : undefined;
    path.push(index ?? key);
    at = at && typeof at === "object" ? (at as Record<string, unknown>)[key] : undefined;
  }
  return path;
}
