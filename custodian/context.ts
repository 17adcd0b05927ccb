// What every Custodian handler shares: the config, the held values once loaded, the upstream
// client, the leaf issuer, metrics and the log; and the trace each request leaves (one log line,
// one count), which never holds a header, a body, a path or a value.
import type { CustodianConfig } from "../api/custodian-config";
import type { LeafIssuer } from "./leaf";
import type { CustodianMetrics, Outcome } from "./custodian-metrics";
import type { Via } from "./egress-via";
import type { HeldTable } from "./rules";
import type { Upstream } from "./upstream";

export type Log = (entry: Record<string, unknown>) => void;

/** The held values once loaded. */
export type Held = {
  table: HeldTable;
  /** The Sandbox token (with an Orchestrator). */
  token?: string;
  /** Every held value and the token, as bytes: masked in answers that carried one. */
  masks: Buffer[];
  /** The same, and every Stand-in, as text: redacted from any message or log line. */
  redactions: string[];
};

export type Ctx = {
  config: CustodianConfig;
  upstream: Upstream;
  /** The egress point (`egress.via`): every connection but the Orchestrator's goes through it. */
  via?: Via;
  metrics: CustodianMetrics;
  log: Log;
  /** Present when the installation CA is mounted: bound hosts are intercepted. */
  leaves?: LeafIssuer;
  /** The held values, or undefined until every one is loaded. */
  held(): Held | undefined;
  /** Why it is not ready yet. */
  problems(): string[];
};

/** What one request leaves behind for its log line and its count. */
export type Trace = {
  route: string;
  host?: string;
  outcome: Outcome;
  /** The egress point it went through (host:port), when it did. */
  via?: string;
  /** A CONNECT's status (an HTTP response's own is read from it). */
  status?: number;
};
