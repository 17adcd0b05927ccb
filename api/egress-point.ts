// The egress point's words on the wire (docs/decisions/0051): its names and ports, the rule syntax
// of an egress list and its matcher, the base list an installation's pod config yields, the rules
// a Sandbox's git remotes yield, which addresses are internal, and one entry of its per-Sandbox
// log. Pure: no I/O. The CRD, the Orchestrator's API and the pod config take `EgressAllowList`
// (zod/mini, as api/custodian-config.ts, so a small bundle loads little of zod).
//
// A rule is `host`, `host:port`, `*.suffix`, `*.suffix:port`, an IPv4 literal or `[IPv6]`, each
// with an optional `:port`; no port means any port. Hosts compare case-insensitively, a trailing
// dot ignored, an IDN as its punycode (node:url domainToASCII). `*.suffix` matches one or more
// labels before the suffix and never the suffix itself. An IP literal matches only a rule naming
// that literal, so a raw address is refused unless listed.
import { isIPv4, isIPv6 } from "node:net";
import { domainToASCII } from "node:url";
import * as z from "zod/mini";

// ---------------------------------------------------------------------------------------------
// Names, ports, paths

/** The Deployment, Service, ServiceAccount and ClusterRole, in the companions' namespace. */
export const EGRESS = "jr2-egress";
/** The proxy (CONNECT host:port and absolute-form plain HTTP), the Sandbox pods' one way out. */
export const EGRESS_PROXY_PORT = 3128;
/** /healthz, /readyz, /metrics and the per-Sandbox logs: the Orchestrator's pods, each other (none
 * asks today), and the installation's monitoring namespaces (decision 0076). */
export const EGRESS_ADMIN_PORT = 9091;
/** The most rules a Sandbox's `spec.egress.allow` (or a workspace's list) may hold. */
export const EGRESS_LIST_MAX = 256;
/** The longest rule's text: a DNS name (253), a port and its colon, or a bracketed IPv6 literal. */
export const EGRESS_RULE_MAX_LENGTH = 262;
/** The Warning Event on a Sandbox the first time a host is refused for it. */
export const EGRESS_REFUSED_REASON = "EgressRefused";
/** On the egress point's own answers only: `refused` (a rule or a limit of the egress point said
 * no) or `unreachable` (allowed, but no connection was made: nothing reached the host). */
export const EGRESS_HEADER = "x-jr2-egress";
export const EGRESS_REFUSED = "refused";
export const EGRESS_UNREACHABLE = "unreachable";
/** The connections counter (labels `decision`, and `reason` on refusals). */
export const EGRESS_CONNECTIONS_METRIC = "jr2_egress_connections_total";

/** The admin listener's path of one Sandbox's log: `{"entries": EgressLogEntry[]}`. */
export const egressLogPath = (namespace: string, name: string) =>
  `/v1/sandboxes/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}/egress/log`;
/** The same path's shape, for the listener's router. */
export const EGRESS_LOG_PATH = /^\/v1\/sandboxes\/([^/]+)\/([^/]+)\/egress\/log$/;

/** The egress point's environment (egress/main.ts; its Deployment writes them). */
export const EGRESS_ENV = {
  /** The installation's pod config (the Orchestrator's file): the base list. Absent: an empty one. */
  podConfigFile: "JR2_POD_CONFIG_FILE",
  /** The opted-in Sandbox namespaces, comma-separated, as the build read them (api/sandbox-namespaces.ts). */
  sandboxNamespaces: "JR2_SANDBOX_NAMESPACES",
  proxyPort: "JR2_EGRESS_PROXY_PORT",
  adminPort: "JR2_EGRESS_ADMIN_PORT",
  /** The address both listeners bind; unset: every interface. */
  host: "JR2_LISTEN_HOST",
  /** Connections one Sandbox may hold open at once (default 128). */
  maxConnections: "JR2_EGRESS_MAX_CONNECTIONS",
  /** New connections per second one Sandbox may open, sustained (default 50) and in a burst (default 200). */
  connectRate: "JR2_EGRESS_CONNECT_RATE",
  connectBurst: "JR2_EGRESS_CONNECT_BURST",
  /** Entries kept per Sandbox's log (default 500). */
  logEntries: "JR2_EGRESS_LOG_ENTRIES",
  /** The bound on one upstream connect (Go duration, default 10s). */
  connectTimeout: "JR2_EGRESS_CONNECT_TIMEOUT",
  /** How often each watch lists again, the bound on a stalled watch (Go duration, default 10s). */
  relistInterval: "JR2_EGRESS_RELIST_INTERVAL",
  /** After SIGTERM, how long the proxy still accepts while /readyz fails and the Service's endpoints
   * drop the pod (Go duration, default 5s; decision 0076). */
  drainDelay: "JR2_EGRESS_DRAIN_DELAY",
  /** Then how long open tunnels and requests may finish before they are closed (Go duration, default 30s). */
  drainBound: "JR2_EGRESS_DRAIN_BOUND",
} as const;

export const EGRESS_DEFAULTS = {
  maxConnections: 128,
  connectRate: 50,
  connectBurst: 200,
  logEntries: 500,
  connectTimeoutMs: 10_000,
  drainDelayMs: 5_000,
  drainBoundMs: 30_000,
} as const;

// ---------------------------------------------------------------------------------------------
// Rules

export type EgressRule = {
  /** The rule as written canonically (lower case, punycode, no trailing dot). */
  text: string;
  /** `host`: exactly this name; `wildcard`: any name under `host` (never `host`); `ip`: this literal. */
  kind: "host" | "wildcard" | "ip";
  /** The name (for a wildcard, the suffix without `*.`), or the canonical IP (IPv6 without brackets). */
  host: string;
  /** Absent: any port. */
  port?: number;
};

export type Parsed = { ok: true; rule: EgressRule } | { ok: false; message: string };

const RULE_FIX = "write host, host:port, *.example.com:443, an IPv4 literal or [IPv6], each with an optional :port";
const LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;
const DOTTED_QUAD =
  /^(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}$/;

/** An IPv6 literal in its canonical form (lower case, compressed), or undefined. */
function canonicalV6(text: string): string | undefined {
  if (!isIPv6(text) || text.includes("%")) return undefined;
  try {
    return new URL(`http://[${text}]/`).hostname.slice(1, -1);
  } catch {
    return undefined;
  }
}

/** A DNS name lower-cased, its trailing dot dropped, an IDN as punycode; undefined when it is no name. */
function canonicalName(text: string): string | undefined {
  const lower = text.toLowerCase().replace(/\.$/, "");
  if (lower === "" || lower.length > 253) return undefined;
  // domainToASCII also maps full-width dots and the like; it gives "" for what is no domain.
  const ascii = /^[\x21-\x7e]*$/.test(lower) ? lower : domainToASCII(lower);
  if (!ascii || ascii.length > 253) return undefined;
  return ascii.split(".").every((l) => LABEL.test(l)) ? ascii : undefined;
}

/**
 * A host as the matcher compares it: lower case, no trailing dot, an IDN as punycode, an IPv6
 * literal unbracketed and compressed, an IPv4-mapped IPv6 address as its IPv4. Undefined when it is
 * neither a name nor an IP literal.
 */
export function normaliseHost(host: string): string | undefined {
  const h = host.trim().replace(/^\[(.*)\]$/, "$1");
  if (DOTTED_QUAD.test(h)) return h;
  if (h.includes(":")) {
    const v6 = canonicalV6(h);
    if (!v6) return undefined;
    // An IPv4-mapped address (::ffff:a.b.c.d, which the URL parser writes ::ffff:XXXX:XXXX) is its IPv4.
    const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
    if (!mapped) return v6;
    const [hi, lo] = [parseInt(mapped[1], 16), parseInt(mapped[2], 16)];
    return [hi >> 8, hi & 255, lo >> 8, lo & 255].join(".");
  }
  // Digits and dots that are not a dotted quad (1.2.3, 010.1.1.1) are an address in some parsers
  // and a name in none: refused rather than guessed.
  if (/^[0-9.]+$/.test(h)) return undefined;
  return canonicalName(h);
}

const isIpLiteral = (h: string) => DOTTED_QUAD.test(h) || h.includes(":");

/** One rule from its text, or why not (naming the fix). */
export function parseEgressRule(text: string): Parsed {
  const bad = (why: string): Parsed => ({ ok: false, message: `${why}: ${RULE_FIX}` });
  if (typeof text !== "string") return bad("is not a string");
  const t = text.trim();
  if (t === "") return bad("is empty");
  if (t.length > EGRESS_RULE_MAX_LENGTH)
    return bad(`is ${t.length} characters, past the bound of ${EGRESS_RULE_MAX_LENGTH}`);
  if (/[/@?#\s]/.test(t) || /^[a-z][a-z0-9+.-]*:\/\//i.test(t))
    return bad(`${JSON.stringify(text)} is not a host: no scheme, path or user (e.g. api.example.com:443)`);
  let hostPart = t;
  let portText: string | undefined;
  if (t.startsWith("[")) {
    const m = /^\[([^\]]+)\](?::([^:]*))?$/.exec(t);
    if (!m) return bad(`${JSON.stringify(text)} is not a bracketed IPv6 literal (e.g. [2001:db8::1]:443)`);
    hostPart = m[1];
    portText = m[2];
    if (!canonicalV6(hostPart)) return bad(`${JSON.stringify(text)} is not an IPv6 literal (e.g. [2001:db8::1])`);
  } else {
    const colons = t.split(":").length - 1;
    if (colons > 1)
      return bad(`${JSON.stringify(text)}: an IPv6 literal is written in brackets, e.g. [2001:db8::1]:443`);
    if (colons === 1) [hostPart, portText] = t.split(":");
  }
  let port: number | undefined;
  if (portText !== undefined) {
    if (!/^[0-9]{1,5}$/.test(portText) || Number(portText) < 1 || Number(portText) > 65535)
      return bad(`${JSON.stringify(text)} names no port from 1 to 65535`);
    port = Number(portText);
  }
  const suffix = port === undefined ? "" : `:${port}`;
  if (t.startsWith("[")) {
    const ip = normaliseHost(hostPart)!;
    return { ok: true, rule: { text: `${ip.includes(":") ? `[${ip}]` : ip}${suffix}`, kind: "ip", host: ip, port } };
  }
  if (hostPart === "*")
    return bad(`${JSON.stringify(text)} would open every host: name the hosts, e.g. *.example.com:443`);
  if (hostPart.startsWith("*.")) {
    const name = canonicalName(hostPart.slice(2));
    if (!name || name.includes("*"))
      return bad(`${JSON.stringify(text)}: after "*." comes a domain, e.g. *.example.com`);
    if (!name.includes("."))
      return bad(
        `${JSON.stringify(text)} spans a whole top-level domain: name a domain of two labels or more, e.g. *.example.com`,
      );
    return { ok: true, rule: { text: `*.${name}${suffix}`, kind: "wildcard", host: name, port } };
  }
  if (hostPart.includes("*"))
    return bad(
      `${JSON.stringify(text)}: a wildcard is only a whole first label, "*." before a domain (e.g. *.example.com)`,
    );
  const host = normaliseHost(hostPart);
  if (!host) return bad(`${JSON.stringify(text)} is not a host name or an IP literal`);
  if (host.includes(":")) return bad(`${JSON.stringify(text)}: an IPv6 literal is written in brackets`);
  return { ok: true, rule: { text: `${host}${suffix}`, kind: isIpLiteral(host) ? "ip" : "host", host, port } };
}

/** `rule` admits `host` (normalised) and `port`. */
function admits(rule: EgressRule, host: string, literal: boolean, port: number): boolean {
  if (rule.port !== undefined && rule.port !== port) return false;
  switch (rule.kind) {
    case "ip":
      return literal && rule.host === host;
    case "host":
      return !literal && rule.host === host;
    case "wildcard":
      return !literal && host.length > rule.host.length + 1 && host.endsWith(`.${rule.host}`);
  }
}

/** The first rule of `rules` that admits host:port, or undefined (a host that is no host matches nothing). */
export function matchEgress(rules: readonly EgressRule[], host: string, port: number): EgressRule | undefined {
  const h = normaliseHost(host);
  if (h === undefined) return undefined;
  const literal = isIpLiteral(h);
  return rules.find((r) => admits(r, h, literal, port));
}

/** `rule` admits nothing `ceiling` does not: every host:port it matches, the ceiling's rule matches
 * (decision 0076). A wildcard is within a wildcard of the same or a parent suffix; a rule with no port
 * is within a ceiling rule with none alone. */
export function ruleWithin(rule: EgressRule, ceiling: EgressRule): boolean {
  if (ceiling.port !== undefined && rule.port !== ceiling.port) return false;
  switch (ceiling.kind) {
    case "ip":
    case "host":
      return rule.kind === ceiling.kind && rule.host === ceiling.host;
    case "wildcard":
      if (rule.kind === "ip") return false;
      if (rule.kind === "wildcard" && rule.host === ceiling.host) return true;
      return rule.host.length > ceiling.host.length + 1 && rule.host.endsWith(`.${ceiling.host}`);
  }
}

/** Why `rule` (at `field`) passes the installation's ceiling, or undefined when within it (decision 0076). */
export function ceilingProblem(rule: EgressRule, ceiling: readonly EgressRule[], field: string): string | undefined {
  if (ceiling.some((c) => ruleWithin(rule, c))) return undefined;
  const shown = ceiling.length ? ceiling.map((r) => r.text).join(", ") : "no host at all";
  return (
    `${field}: ${JSON.stringify(rule.text)} is outside the installation's egress ceiling (${shown}): ` +
    "name a host within it (a rule with no port passes only a ceiling rule with none), or ask the " +
    "installation's operator to widen the pod config's egress.ceiling"
  );
}

/** Each entry of a workspace's list (`field`, e.g. `egress.allow`) outside the installation's ceiling,
 * named by its index with the fix; none when there is no ceiling (undefined) or the entry is no rule
 * (refused elsewhere). */
export function ceilingProblems(
  texts: readonly unknown[],
  ceiling: readonly EgressRule[] | undefined,
  field = "egress.allow",
): string[] {
  if (!ceiling) return [];
  return texts.flatMap((text, i) => {
    const p = parseEgressRule(String(text));
    const problem = p.ok ? ceilingProblem(p.rule, ceiling, `${field}[${i}]`) : undefined;
    return problem ? [problem] : [];
  });
}

/** The rules of `texts`, or the first refusal with its index (e.g. for a list a client sent). */
export function parseEgressRules(
  texts: readonly string[],
): { ok: true; rules: EgressRule[] } | { ok: false; index: number; message: string } {
  const rules: EgressRule[] = [];
  for (const [index, text] of texts.entries()) {
    const p = parseEgressRule(text);
    if (!p.ok) return { ok: false, index, message: p.message };
    rules.push(p.rule);
  }
  return { ok: true, rules };
}

/** An egress list: at most EGRESS_LIST_MAX rules, each refused at its own index with the fix. Its
 * entries are judged here, not by an element type, so one entry that is no string hides no other's
 * refusal (admission names them all). */
export const EgressAllowList = z.array(z.unknown()).check(
  z.maxLength(EGRESS_LIST_MAX, `must hold at most ${EGRESS_LIST_MAX} rules: use *.domain rules to cover many hosts`),
  z.superRefine((list, ctx) => {
    list.forEach((text, i) => {
      const p =
        typeof text === "string"
          ? parseEgressRule(text)
          : { ok: false as const, message: "must be a string, e.g. api.example.com:443 (quoted in YAML)" };
      if (!p.ok) ctx.addIssue({ code: "custom", path: [i], message: p.message, input: text });
    });
  }),
);

// ---------------------------------------------------------------------------------------------
// Where the lists come from

/** The rule for a url's host and port (the scheme's default port when it names none). */
function urlRule(url: URL, defaults: Record<string, number>): Parsed {
  const port = url.port ? Number(url.port) : defaults[url.protocol];
  if (port === undefined) return { ok: false, message: `${url.protocol} is not a scheme the egress point reaches` };
  return parseEgressRule(`${url.hostname}:${port}`);
}

const WEB = { "https:": 443, "http:": 80 } as const;

/**
 * The installation's base list from its pod config (the Orchestrator's JR2_POD_CONFIG_FILE, parsed):
 * `egress.allow`, the host:port of each `custodian.providers[].url` and `custodian.held[].origins[]`,
 * and each `custodian.tunnel` entry (port 443 unless it names one; `http://host` 80). Read leniently
 * (the Orchestrator validates the file); an entry that yields no rule throws, naming each such field
 * and its fix, so the base list is never silently short of what the installation wrote.
 */
export function baseListOf(podConfigDocument: unknown): EgressRule[] {
  const rules: EgressRule[] = [];
  const problems: string[] = [];
  const obj = (v: unknown): Record<string, unknown> =>
    v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  const list = (v: unknown, field: string): unknown[] => {
    if (v === undefined || v === null) return [];
    if (Array.isArray(v)) return v;
    problems.push(`${field}: must be a list`);
    return [];
  };
  const take = (p: Parsed, field: string) => (p.ok ? rules.push(p.rule) : problems.push(`${field}: ${p.message}`));
  const fromUrl = (v: unknown, field: string) => {
    let url: URL;
    try {
      url = new URL(String(v));
    } catch {
      return problems.push(`${field}: ${JSON.stringify(v)} is not a url: write e.g. https://api.example.com`);
    }
    take(urlRule(url, WEB), field);
  };
  const doc = obj(podConfigDocument);
  const egress = obj(doc.egress);
  const custodian = obj(doc.custodian);
  list(egress.allow, "egress.allow").forEach((v, i) => take(parseEgressRule(String(v)), `egress.allow[${i}]`));
  list(custodian.providers, "custodian.providers").forEach((p, i) =>
    fromUrl(obj(p).url, `custodian.providers[${i}].url`),
  );
  list(custodian.held, "custodian.held").forEach((h, i) =>
    list(obj(h).origins, `custodian.held[${i}].origins`).forEach((o, j) =>
      fromUrl(o, `custodian.held[${i}].origins[${j}]`),
    ),
  );
  list(custodian.tunnel, "custodian.tunnel").forEach((v, i) => {
    const field = `custodian.tunnel[${i}]`;
    const text = String(v).trim();
    const scheme = /^(https?):\/\//i.exec(text);
    const bare = scheme ? text.slice(scheme[0].length).replace(/\/$/, "") : text;
    if (bare === "*")
      return problems.push(
        `${field}: "*" tunnels every host, which the egress point will not open: name the hosts in custodian.tunnel or egress.allow`,
      );
    const p = parseEgressRule(bare);
    if (!p.ok) return problems.push(`${field}: ${p.message}`);
    if (p.rule.port !== undefined) return rules.push(p.rule);
    const port = scheme?.[1].toLowerCase() === "http" ? 80 : 443;
    rules.push({ ...p.rule, port, text: `${p.rule.text}:${port}` });
  });
  if (problems.length) throw new Error(problems.join("; "));
  return rules;
}

/** The installation's ceiling from its pod config (`egress.ceiling`): the rules no workspace's own
 * rule may pass (decision 0076). Absent: undefined, no ceiling; an empty list: a workspace may add
 * no rule. An entry that is no rule throws, naming it (the egress point refuses to start on it). */
export function ceilingOf(podConfigDocument: unknown): EgressRule[] | undefined {
  const doc =
    podConfigDocument && typeof podConfigDocument === "object" ? (podConfigDocument as Record<string, unknown>) : {};
  const egress = doc.egress && typeof doc.egress === "object" ? (doc.egress as Record<string, unknown>) : {};
  const list = egress.ceiling;
  if (list === undefined || list === null) return undefined;
  if (!Array.isArray(list)) throw new Error('egress.ceiling: must be a list of rules, e.g. ["*.example.com:443"]');
  const rules: EgressRule[] = [];
  const problems: string[] = [];
  list.forEach((v, i) => {
    const p = parseEgressRule(String(v));
    if (p.ok) rules.push(p.rule);
    else problems.push(`egress.ceiling[${i}]: ${p.message}`);
  });
  if (problems.length) throw new Error(problems.join("; "));
  return rules;
}

/**
 * The rules of a Sandbox's git remotes (its spec.repos[].url, admitted by the Orchestrator's
 * fence): https -> 443, http -> 80, ssh:// and scp-like user@host:path -> 22, git:// -> 9418, or
 * the url's own port. A url that names no reachable host (a file path) yields none.
 */
export function repoRulesOf(repoUrls: readonly string[]): EgressRule[] {
  const rules: EgressRule[] = [];
  for (const raw of repoUrls) {
    const text = String(raw).trim();
    let p: Parsed | undefined;
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
      try {
        p = urlRule(new URL(text), { ...WEB, "ssh:": 22, "git+ssh:": 22, "ssh+git:": 22, "git:": 9418 });
      } catch {
        p = undefined;
      }
    } else {
      // scp-like: [user@]host:path (a colon before any slash; an IPv6 host in brackets).
      const m = /^(?:[^@/:]+@)?(\[[^\]]+\]|[^/:[\]]+):(?!\/\/)/.exec(text);
      if (m) p = parseEgressRule(`${m[1]}:22`);
    }
    if (p?.ok && !rules.some((r) => r.text === p.rule.text)) rules.push(p.rule);
  }
  return rules;
}

// ---------------------------------------------------------------------------------------------
// Internal addresses (docs/decisions/0051, 0068)
//
// Public is the exception: an address is public only when it is global unicast, outside every
// block of IANA's special-purpose registries (IPv4 and IPv6), multicast and the reserved space,
// outside the known cloud metadata and wire-server addresses, and outside the ranges the
// installation states as its cluster's (`egress.clusterRanges`: pod, service, node). An IPv6
// address that carries an IPv4 one to a translator (NAT64's 64:ff9b::/96, 6to4's 2002::/16) is
// judged as that IPv4 address, where the translator sends it.

/** An address or a block of them: IPv4 as 32 bits, IPv6 as 128, in a bigint. */
export type Cidr = { text: string; v6: boolean; base: bigint; bits: number };
/** The installation's own word on addresses (its pod config's `egress`): its cluster's ranges, all
 * internal, and the documentation ranges a test installation treats as public. */
export type AddressRanges = { cluster: readonly Cidr[]; publicTest: readonly Cidr[] };
export const NO_RANGES: AddressRanges = { cluster: [], publicTest: [] };

/** An IP literal (IPv4, IPv6, IPv4-mapped IPv6 as its IPv4) as bits, or undefined. */
function addressBits(ip: string): { v6: boolean; n: bigint } | undefined {
  const h = normaliseHost(ip);
  if (h === undefined) return undefined;
  if (isIPv4(h)) return { v6: false, n: BigInt(v4Number(h)) };
  if (!isIPv6(h)) return undefined;
  const [head, tail] = h.includes("::") ? h.split("::") : [h, undefined];
  const groups = (part: string | undefined) => (part ? part.split(":") : []);
  const hi = groups(head);
  const lo = groups(tail);
  const all = tail === undefined ? hi : [...hi, ...Array(8 - hi.length - lo.length).fill("0"), ...lo];
  if (all.length !== 8) return undefined;
  return { v6: true, n: all.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n) };
}

function v4Number(ip: string): number {
  return ip.split(".").reduce((n, o) => n * 256 + Number(o), 0);
}

/** A CIDR (`10.96.0.0/12`, `fd00::/8`) or a bare address (a /32 or /128), or why not. */
export function parseCidr(text: string): { ok: true; cidr: Cidr } | { ok: false; message: string } {
  const t = String(text).trim();
  const m = /^([^/]+)(?:\/([0-9]{1,3}))?$/.exec(t);
  const a = m ? addressBits(m[1]) : undefined;
  const literal = m && (DOTTED_QUAD.test(m[1]) || m[1].includes(":"));
  if (!m || !a || !literal)
    return {
      ok: false,
      message: `${JSON.stringify(text)} is not an address range: write e.g. 10.96.0.0/12 or fd00:10::/64`,
    };
  const width = a.v6 ? 128 : 32;
  const bits = m[2] === undefined ? width : Number(m[2]);
  if (bits > width)
    return { ok: false, message: `${JSON.stringify(text)}: an IPv${a.v6 ? 6 : 4} prefix is at most /${width}` };
  const shift = BigInt(width - bits);
  const base = (a.n >> shift) << shift;
  if (base !== a.n)
    return { ok: false, message: `${JSON.stringify(text)} has bits set past its /${bits}: write its network address` };
  return { ok: true, cidr: { text: t, v6: a.v6, base, bits } };
}

const cidr = (text: string): Cidr => {
  const p = parseCidr(text);
  if (!p.ok) throw new Error(p.message);
  return p.cidr;
};
const within = (a: { v6: boolean; n: bigint }, c: Cidr) =>
  a.v6 === c.v6 && a.n >> BigInt((c.v6 ? 128 : 32) - c.bits) === c.base >> BigInt((c.v6 ? 128 : 32) - c.bits);

/** Known cloud metadata and wire-server addresses: never public, whatever block they sit in. */
export const METADATA_ADDRESSES: ReadonlyArray<readonly [string, string]> = [
  [
    "169.254.169.254/32",
    "instance metadata (AWS, GCP's metadata.google.internal, Azure, OpenStack, Oracle, DigitalOcean)",
  ],
  ["169.254.170.2/32", "AWS ECS task metadata"],
  ["169.254.169.253/32", "AWS VPC resolver"],
  ["168.63.129.16/32", "Azure wire server"],
  ["100.100.100.200/32", "Alibaba Cloud metadata"],
  ["169.254.0.23/32", "Tencent Cloud metadata"],
  ["fd00:ec2::254/128", "AWS instance metadata (IPv6)"],
  ["fd00:ec2::253/128", "AWS VPC resolver (IPv6)"],
  ["fd20:ce::254/128", "GCP metadata (IPv6)"],
];

/** IANA's IPv4 special-purpose blocks that are not globally reachable, multicast and the reserved space. */
export const V4_NOT_PUBLIC: ReadonlyArray<readonly [string, string]> = [
  ["0.0.0.0/8", "this network"],
  ["10.0.0.0/8", "private"],
  ["100.64.0.0/10", "shared address space"],
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link-local"],
  ["172.16.0.0/12", "private"],
  ["192.0.0.0/24", "IETF protocol assignments"],
  ["192.0.2.0/24", "documentation (TEST-NET-1)"],
  ["192.88.99.0/24", "6to4 relay anycast"],
  ["192.168.0.0/16", "private"],
  ["198.18.0.0/15", "benchmarking"],
  ["198.51.100.0/24", "documentation (TEST-NET-2)"],
  ["203.0.113.0/24", "documentation (TEST-NET-3)"],
  ["224.0.0.0/4", "multicast"],
  ["240.0.0.0/4", "reserved, and the limited broadcast"],
];

/** Inside global unicast (2000::/3), IANA's IPv6 blocks that are not globally reachable. Everything
 * outside 2000::/3 (loopback, unspecified, IPv4-compatible, discard-only, NAT64's local-use prefix,
 * unique-local, site-local, link-local, multicast, the unassigned space) is not public either, but
 * NAT64's well-known prefix, judged by the IPv4 address it carries. */
export const V6_NOT_PUBLIC: ReadonlyArray<readonly [string, string]> = [
  ["2001::/23", "IETF protocol assignments (Teredo, benchmarking, ORCHID)"],
  ["2001:db8::/32", "documentation"],
  ["3fff::/20", "documentation"],
];

/** The blocks a test installation may call public (`egress.publicTestRanges`): documentation only. */
export const DOCUMENTATION_RANGES: readonly string[] = [
  "192.0.2.0/24",
  "198.51.100.0/24",
  "203.0.113.0/24",
  "2001:db8::/32",
  "3fff::/20",
];

const METADATA = METADATA_ADDRESSES.map(([c, why]) => [cidr(c), why] as const);
const V4_SPECIAL = V4_NOT_PUBLIC.map(([c, why]) => [cidr(c), why] as const);
const V6_SPECIAL = V6_NOT_PUBLIC.map(([c, why]) => [cidr(c), why] as const);
const DOCUMENTATION = DOCUMENTATION_RANGES.map(cidr);
const GLOBAL_UNICAST = cidr("2000::/3");
const NAT64 = cidr("64:ff9b::/96");
const SIX_TO_FOUR = cidr("2002::/16");

/** The IPv4 address an IPv6 one hands to a translator (NAT64's well-known prefix, 6to4), if any. */
function embeddedV4(a: { v6: boolean; n: bigint }): { v6: false; n: bigint } | undefined {
  if (!a.v6) return undefined;
  if (within(a, NAT64)) return { v6: false, n: a.n & 0xffffffffn };
  if (within(a, SIX_TO_FOUR)) return { v6: false, n: (a.n >> 80n) & 0xffffffffn };
  return undefined;
}

/**
 * Why `ip` is not a public address (a few words: "private", "Azure wire server", "the cluster's
 * range 10.96.0.0/12"), or undefined when it is public. Anything that is no IP literal is not
 * public. `ranges`: the installation's (addressRangesOf); the cluster's ranges are never public,
 * and a test installation's documentation ranges are.
 */
export function addressKind(ip: string, ranges: AddressRanges = NO_RANGES): string | undefined {
  const a = addressBits(ip);
  if (!a) return "not an IP address";
  for (const [c, why] of METADATA) if (within(a, c)) return why;
  const v4 = embeddedV4(a);
  for (const x of v4 ? [a, v4] : [a])
    for (const c of ranges.cluster) if (within(x, c)) return `the cluster's range ${c.text}`;
  if (v4) {
    const inner = addressKind(`${[24n, 16n, 8n, 0n].map((s) => (v4.n >> s) & 255n).join(".")}`, ranges);
    return inner && `${inner}, behind ${within(a, NAT64) ? "NAT64" : "6to4"}`;
  }
  if (ranges.publicTest.some((c) => within(a, c))) return undefined;
  if (!a.v6) return V4_SPECIAL.find(([c]) => within(a, c))?.[1];
  if (!within(a, GLOBAL_UNICAST)) return "not global unicast";
  return V6_SPECIAL.find(([c]) => within(a, c))?.[1];
}

/**
 * Whether `ip` is an address no workspace's rule may reach: anything but public global unicast
 * (addressKind). `ranges` adds the installation's cluster ranges (and a test installation's public
 * documentation ranges); without it the judgement is the installation-independent one.
 */
export function isInternalAddress(ip: string, ranges: AddressRanges = NO_RANGES): boolean {
  return addressKind(ip, ranges) !== undefined;
}

/**
 * The installation's address ranges from its pod config (parsed): `egress.clusterRanges` (its pod,
 * service and node CIDRs, all internal) and `egress.publicTestRanges` (documentation ranges a test
 * installation's stand-in public host sits on; a release sets none). Throws naming each bad entry.
 */
export function addressRangesOf(podConfigDocument: unknown): AddressRanges {
  const egress = (podConfigDocument as { egress?: Record<string, unknown> } | undefined)?.egress ?? {};
  const problems: string[] = [];
  const read = (field: "clusterRanges" | "publicTestRanges", check?: (c: Cidr) => string | undefined): Cidr[] => {
    const v = egress[field];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) {
      problems.push(`egress.${field}: must be a list of address ranges, e.g. [10.96.0.0/12]`);
      return [];
    }
    return v.flatMap((text, i) => {
      const p = parseCidr(String(text));
      const why = p.ok ? check?.(p.cidr) : p.message;
      if (why === undefined && p.ok) return [p.cidr];
      problems.push(`egress.${field}[${i}]: ${why}`);
      return [];
    });
  };
  const cluster = read("clusterRanges");
  const publicTest = read("publicTestRanges", publicTestRangeProblem);
  if (problems.length) throw new Error(problems.join("; "));
  return { cluster, publicTest };
}

/** Why `c` may not be a public test range: only a block inside a documentation range may. */
export function publicTestRangeProblem(c: Cidr): string | undefined {
  const inside = DOCUMENTATION.some((d) => d.v6 === c.v6 && c.bits >= d.bits && within({ v6: c.v6, n: c.base }, d));
  return inside
    ? undefined
    : `${c.text} is not inside a documentation range (${DOCUMENTATION_RANGES.join(", ")}): only a test installation's stand-in public host may be called public, and it sits there`;
}

// ---------------------------------------------------------------------------------------------
// The record

/** `refused` reasons: not on the list, an internal address a workspace rule named, a limit. */
export type EgressRefusal = "not_listed" | "internal" | "limit";
/** `allowed`: connected; `refused`: a rule or a limit said no; `unreachable`: allowed, but no
 * connection was made (the name did not resolve, the connect failed or timed out). */
export type EgressDecision = "allowed" | "refused" | "unreachable";

/** One connection (or one absolute-form request) in a Sandbox's log. Never a path or a header. */
export type EgressLogEntry = {
  /** When it was decided (ISO 8601). */
  time: string;
  host: string;
  port: number;
  decision: EgressDecision;
  /** A refusal's or an unreachable's reason. */
  reason?: string;
  bytesOut: number;
  bytesIn: number;
  durationMs: number;
};

/** The logs of every replica of the egress point (decision 0076) as one: each replica's entries,
 * oldest first, merged by time (a stable merge: equal times keep replica order), the newest `max` kept
 * (each replica's own bound, so the answer is no longer than one replica's). */
export function mergeEgressLogs(
  logs: ReadonlyArray<readonly EgressLogEntry[]>,
  max: number = EGRESS_DEFAULTS.logEntries,
): EgressLogEntry[] {
  const all = logs.flatMap((entries, replica) => entries.map((e, i) => ({ e, replica, i, t: Date.parse(e.time) })));
  all.sort((a, b) => a.t - b.t || a.replica - b.replica || a.i - b.i);
  return all.slice(Math.max(0, all.length - max)).map((x) => x.e);
}
