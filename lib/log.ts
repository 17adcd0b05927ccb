// The companions' log: one JSON line per entry on stdout, each with its time, a level and a
// `message` (decision 0036), so one query reads every workload's lines alike. No header and no
// credential is ever passed in (lib/redact.ts cleans text that might carry one).
export type LogEntry = Record<string, unknown>;
export type Log = (entry: LogEntry) => void;

/** A log whose every line also carries `fields` (a cache agent's node, say). */
export function jsonLog(fields: LogEntry = {}): Log {
  return (entry) =>
    process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...fields, ...entry })}\n`);
}

export const log: Log = jsonLog();

/** A start-up refusal: logged as an error naming what is wrong and the fix, then exit 2. */
export function fail(message: string, to: Log = log): never {
  to({ level: "error", message });
  process.exit(2);
}
