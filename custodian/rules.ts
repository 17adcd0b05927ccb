// The Custodian's pure rules (decision 0018): which route a request takes, where it may go, which
// headers cross, and the Stand-in substitution: a Stand-in leaves as its held secret only toward an
// origin the secret is bound to; toward any other origin the request is refused, never sent. No I/O.
import {
  CUSTODIAN_HEADER,
  HOP_BY_HOP as HOP_BY_HOP_WORDS,
  NEVER_SENT_CODES,
  ORCHESTRATOR_ROUTE,
  PROVIDERS_ROUTE,
  replaceStandIns,
  STAND_IN_PREFIX,
  standInsIn,
  type CustodianConfig,
} from "../api/custodian-config";

export type Header = [name: string, value: string];

// ---------------------------------------------------------------------------------------------
// The held table: Stand-in → secret and where it may go

export type HeldEntry = {
  /** The value's file name: how messages and logs name it (never the value). */
  name: string;
  secret: string;
  origins: ReadonlySet<string>;
  /** Headers it may ride in; undefined: any. */
  headers?: ReadonlySet<string>;
};

export type HeldTable = {
  byStandIn: ReadonlyMap<string, HeldEntry>;
  /** Every origin some held value is bound to: the proxy intercepts exactly these. */
  boundOrigins: ReadonlySet<string>;
};

/** The table from the config and the loaded values (file name → secret). */
export function heldTable(config: CustodianConfig, values: ReadonlyMap<string, string>): HeldTable {
  const byStandIn = new Map<string, HeldEntry>();
  const boundOrigins = new Set<string>();
  for (const h of config.held) {
    const secret = values.get(h.value);
    if (secret === undefined) throw new Error(`held value ${h.value} is not loaded`);
    byStandIn.set(h.standIn, {
      name: h.value,
      secret,
      origins: new Set(h.origins),
      ...(h.headers ? { headers: new Set(h.headers) } : {}),
    });
    h.origins.forEach((o) => boundOrigins.add(o));
  }
  return { byStandIn, boundOrigins };
}

/** Why a value read from its file cannot be held, or undefined: it must fit in a header and be
 * long and distinct enough to be masked in answers without masking ordinary text. */
export function heldValueProblem(value: string): string | undefined {
  if (value.length < 8) return "is shorter than 8 characters";
  if (!/^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(value))
    return "holds a character a header cannot carry (only printable ASCII, no leading or trailing space)";
  if (!/[A-Za-z0-9]/.test(value)) return "holds no letter or digit";
  return undefined;
}

/** A value file's text as held: one trailing newline (as `echo` or an editor leaves it) dropped. */
export const heldValueOf = (text: string) => text.replace(/\r?\n$/, "");

// ---------------------------------------------------------------------------------------------
// Routes

export type Route =
  | { kind: "local"; name: "healthz" | "readyz" | "metrics" }
  /** `rest`: what follows the route's prefix, empty or starting with `/` or `?`. */
  | { kind: "orchestrator"; rest: string }
  | { kind: "provider"; name: string; rest: string }
  | { kind: "proxy"; url: URL }
  | { kind: "unknown" };

const LOCAL = new Set(["/healthz", "/readyz", "/metrics"]);

/** What follows `prefix` at a segment's end (`/`, `?` or nothing), or undefined when `target` is not under it. */
function under(target: string, prefix: string): string | undefined {
  if (!target.startsWith(prefix)) return undefined;
  const rest = target.slice(prefix.length);
  return rest === "" || rest[0] === "/" || rest[0] === "?" ? rest : undefined;
}

/** The route of a request target (origin-form `/...` or absolute-form `http://host/...`). */
export function routeOf(target: string): Route {
  if (/^https?:\/\//i.test(target)) {
    try {
      return { kind: "proxy", url: new URL(target) };
    } catch {
      return { kind: "unknown" };
    }
  }
  const path = target.split("?")[0];
  if (LOCAL.has(path)) return { kind: "local", name: path.slice(1) as "healthz" | "readyz" | "metrics" };
  const orchestrator = under(target, ORCHESTRATOR_ROUTE);
  if (orchestrator !== undefined) return { kind: "orchestrator", rest: orchestrator };
  if (target.startsWith(`${PROVIDERS_ROUTE}/`)) {
    const name = /^[^/?]*/.exec(target.slice(PROVIDERS_ROUTE.length + 1))![0];
    const rest = under(target, `${PROVIDERS_ROUTE}/${name}`);
    if (name && rest !== undefined) return { kind: "provider", name, rest };
  }
  return { kind: "unknown" };
}

/** A dot segment (`.`, `..`, either percent-encoded) in a path: refused, so a route's base path holds. */
export function hasDotSegment(rest: string): boolean {
  return rest
    .split("?")[0]
    .split(/[/\\]/)
    .some((seg) => /^(\.|%2e){1,2}$/i.test(seg));
}

/** `base` (its path kept, a trailing slash dropped) followed by `rest`; undefined if that would
 * leave the base's origin. */
export function joinUrl(base: string, rest: string): URL | undefined {
  const from = new URL(base);
  let url: URL;
  try {
    url = new URL(base.replace(/\/+$/, "") + rest);
  } catch {
    return undefined;
  }
  return url.origin === from.origin ? url : undefined;
}

/** The https origin a CONNECT's `host:port` reaches, and its parts; undefined when malformed. */
export function connectTarget(authority: string): { host: string; port: number; origin: string } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$/.exec(authority);
  if (!m) return undefined;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  try {
    const url = new URL(`https://${m[1]}:${port}`);
    return { host: url.hostname.replace(/^\[|\]$/g, ""), port, origin: url.origin };
  } catch {
    return undefined;
  }
}

/** Whether the egress allowlist lets the proxy reach `host:port` untouched (default port 443;
 * 80 when `plainHttp`). */
export function tunnelAllowed(patterns: readonly string[], host: string, port: number, plainHttp = false): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, "");
  return patterns.some((p) => {
    const m = /^(.*?)(?::([0-9]+))?$/.exec(p)!;
    const wanted = m[2] !== undefined ? Number(m[2]) : plainHttp ? 80 : 443;
    if (wanted !== port) return false;
    const name = m[1].replace(/^\[|\]$/g, "");
    if (name === "*") return true;
    if (name.startsWith("*.")) return h.endsWith(name.slice(1)) && h.length > name.length - 1;
    return h === name;
  });
}

// ---------------------------------------------------------------------------------------------
// Headers

/** The hop-by-hop headers (api/custodian-config.ts), and `expect`: Node answers `100-continue` itself,
 * so the body is already on its way and the upstream is not asked again. */
const HOP_BY_HOP: ReadonlySet<string> = new Set([...HOP_BY_HOP_WORDS, "expect"]);

/** The end-to-end headers of a raw header list (Node's `rawHeaders`), names in lower case. */
export function endToEnd(raw: readonly string[]): Header[] {
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].toLowerCase() === "connection") raw[i + 1].split(",").forEach((t) => named.add(t.trim().toLowerCase()));
  }
  const out: Header[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (!HOP_BY_HOP.has(name) && !named.has(name)) out.push([name, raw[i + 1]]);
  }
  return out;
}

/**
 * An upstream's response headers (Node's raw list) as they go back to the Harness: hop-by-hop ones
 * dropped, and any `x-jr2-custodian` removed, so only the Custodian itself ever says `unreachable`
 * or `refused`.
 */
export function answerHeaders(raw: readonly string[]): Header[] {
  return endToEnd(raw).filter(([name]) => name !== CUSTODIAN_HEADER);
}

export const withoutHeader = (headers: readonly Header[], name: string): Header[] =>
  headers.filter(([n]) => n !== name);

// ---------------------------------------------------------------------------------------------
// The substitution

export type ProxyRefusal = { status: number; code: string; message: string };
export type Substituted = { ok: true; headers: Header[]; used: string[] } | ({ ok: false } & ProxyRefusal);

const BASIC = /^(Basic)([ \t]+)([A-Za-z0-9+/=]+)[ \t]*$/i;

/** A header's value with each Stand-in replaced through `swap`; Basic credentials are looked into. */
function swapIn(value: string, swap: (standIn: string) => string): string {
  const basic = BASIC.exec(value);
  if (basic) {
    const decoded = Buffer.from(basic[3], "base64").toString("latin1");
    if (standInsIn(decoded).length) {
      const replaced = replaceStandIns(decoded, swap);
      return `${basic[1]}${basic[2]}${Buffer.from(replaced, "latin1").toString("base64")}`;
    }
  }
  return replaceStandIns(value, swap);
}

const NONE: readonly string[] = [];

/** The Stand-ins a header value carries, in Basic credentials too (in any header: a tool may put
 * them in its own). Most values hold neither a Stand-in nor Basic credentials, so both are ruled
 * out before a pattern is run (docs/decisions/0044-the-custodian-starts-small.md). */
function standInsOf(value: string): readonly string[] {
  const direct = value.includes(STAND_IN_PREFIX) ? standInsIn(value) : NONE;
  // "b" or "B" first: what BASIC needs before it is worth running.
  const basic = (value.charCodeAt(0) | 0x20) === 0x62 ? BASIC.exec(value) : null;
  const inner = basic ? standInsIn(Buffer.from(basic[3], "base64").toString("latin1")) : NONE;
  return inner.length ? [...direct, ...inner] : direct;
}

/** A provider route's one key header (api/model-kinds.ts): a Stand-in rides there or nowhere. */
export type KeyHeader = { header: string; provider: string; kind: string };

/** Why the Stand-in may not leave in header `name` toward `origin`, or undefined. */
function refusalOf(
  standIn: string,
  entry: HeldEntry | undefined,
  name: string,
  origin: string,
  only: KeyHeader | undefined,
): ProxyRefusal | undefined {
  if (!entry) {
    return {
      status: 400,
      code: "stand_in_unknown",
      message: `header ${name} carries a Stand-in this Custodian holds no value for: use a Stand-in from the Harness's environment`,
    };
  }
  if (!entry.origins.has(origin)) {
    return {
      status: 403,
      code: "stand_in_unbound",
      message: `header ${name} carries the Stand-in of held value ${entry.name}, which is bound to ${[...entry.origins].join(", ")}, not ${origin}: it is sent nowhere else`,
    };
  }
  if (only && name !== only.header) {
    return {
      status: 403,
      code: "stand_in_header",
      message: `provider ${only.provider} (${only.kind}) takes its key in header ${only.header} alone, not in ${name}: set the kind its API speaks on custodian.providers`,
    };
  }
  if (entry.headers && !entry.headers.has(name)) {
    return {
      status: 403,
      code: "stand_in_header",
      message: `held value ${entry.name} rides only in ${[...entry.headers].join(", ")}, not in header ${name}`,
    };
  }
  return undefined;
}

/**
 * The headers as they leave toward `origin`: each Stand-in replaced by its held secret when every
 * Stand-in in the request is known, bound to `origin` and in a header it may ride in (on a provider
 * route, `only` that provider's key header); otherwise a
 * refusal naming the first that is not (the request is then not sent at all). `used` names the
 * held values put in.
 */
export function substitute(
  headers: readonly Header[],
  origin: string,
  table: HeldTable,
  only?: KeyHeader,
): Substituted {
  const used = new Set<string>();
  /** Which headers carry a Stand-in: only those are rewritten. */
  const carrying: boolean[] = [];
  for (const [name, value] of headers) {
    const found = standInsOf(value);
    carrying.push(found.length > 0);
    for (const standIn of found) {
      const entry = table.byStandIn.get(standIn);
      const refusal = refusalOf(standIn, entry, name, origin, only);
      if (refusal) return { ok: false, ...refusal };
      used.add(entry!.name);
    }
  }
  if (used.size === 0) return { ok: true, headers: [...headers], used: [] };
  const swap = (standIn: string) => table.byStandIn.get(standIn)!.secret;
  return { ok: true, headers: headers.map(([n, v], i) => [n, carrying[i] ? swapIn(v, swap) : v]), used: [...used] };
}

// ---------------------------------------------------------------------------------------------
// Upstream failures

/** Whether an upstream failure happened before the request was sent: the connector said so
 * (`connectFailed`), or its code is one only a connect gives. */
export function notSent(err: unknown, connectFailed: boolean): boolean {
  if (connectFailed) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" && NEVER_SENT_CODES.has(code);
}

/** A failure's short detail for a message: its code and message, nothing from the request. */
export function failureDetail(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === "string" ? e.code : undefined;
  const message = typeof e?.message === "string" ? e.message : String(err);
  return code && !message.includes(code) ? `${code}: ${message}` : message;
}
