// The Custodian's words on the wire (docs/decisions/0018-custodian.md): where it listens and what
// it mounts, the config the Orchestrator writes into `<sandbox>-custodian` (a zod schema whose
// every refusal names the field and the fix), the Stand-in format, the failure header the Harness
// reads, and the env the Harness container gets to reach it. Pure: no I/O. The schema is written
// with zod/mini, which a bundle takes only the parts of that it uses: the Custodian parses this
// config at start and loads nothing else of zod (docs/decisions/0044-the-custodian-starts-small.md).
import { en } from "zod/locales";
import * as z from "zod/mini";
import { fieldPath } from "./field-path";
import { goDurationMs } from "./go-duration";
import { MODEL_KINDS } from "./model-kinds";
import { HOP_BY_HOP_HEADERS, SANDBOX_TOKEN_KEY } from "./wire";

// ---------------------------------------------------------------------------------------------
// Ports and mounts

/** The loopback listener: the routes and the proxy (127.0.0.1 only, never another address). */
export const CUSTODIAN_PORT = 8081;
/** The probes' listener: /healthz, /readyz and /metrics only (the kubelet probes the pod's address). */
export const CUSTODIAN_HEALTH_PORT = 15021;

/** `<sandbox>-custodian`: the ConfigMap the Orchestrator writes, owned by the Sandbox. */
export const custodianConfigMapName = (sandbox: string) => `${sandbox}-custodian`;
/** Its one key, and where the Custodian reads it by default. */
export const CUSTODIAN_CONFIG_KEY = "config.json";
export const CUSTODIAN_CONFIG_DIR = "/etc/jr2/custodian/config";
export const CUSTODIAN_CONFIG_FILE = `${CUSTODIAN_CONFIG_DIR}/${CUSTODIAN_CONFIG_KEY}`;
/** One file per held value (the Sandbox token, the pod's held secrets), named by the config. */
export const CUSTODIAN_VALUES_DIR = "/etc/jr2/custodian/values";
/** The Sandbox's CA (decision 0037): its certificate and key (a `kubernetes.io/tls` Secret's two
 * keys; the Secret's `ca.crt`, the installation root above it, is not mounted). */
export const CUSTODIAN_CA_DIR = "/etc/jr2/custodian/ca";
export const CA_CERT_KEY = "tls.crt";
export const CA_KEY_KEY = "tls.key";
export const CA_ROOT_KEY = "ca.crt";
/** What the Harness container mounts: the installation root's certificate alone (no key). */
export const HARNESS_CA_DIR = "/etc/jr2/ca";
export const HARNESS_CA_KEY = "ca.crt";

/**
 * The hosts a Custodian intercepts, and so the only ones its CA may sign for (decision 0037): the
 * host of each https origin a held value is bound to (a CONNECT is always https), sorted, once
 * each. An http origin is reached by absolute-form requests, with no certificate.
 */
export function boundHosts(held: ReadonlyArray<{ origins: readonly string[] }>): string[] {
  const hosts = new Set<string>();
  for (const h of held)
    for (const o of h.origins) {
      const url = new URL(o);
      if (url.protocol === "https:") hosts.add(url.hostname.replace(/^\[|\]$/g, ""));
    }
  return [...hosts].sort();
}

// ---------------------------------------------------------------------------------------------
// The routes and the failure header

/** `/orchestrator/<path>` goes to the configured Orchestrator url + `/<path>`, with the Sandbox token. */
export const ORCHESTRATOR_ROUTE = "/orchestrator";
/** `/providers/<name>/<path>` goes to that provider's url + `/<path>`. */
export const PROVIDERS_ROUTE = "/providers";

/**
 * On the Custodian's own answers only (an upstream's copy is removed): `unreachable` on a 502 when
 * the request was not forwarded (no connection, a connect timeout, a refusal, an unreachable host,
 * retries spent before sending), so the Harness may send it again; `refused` on a 4xx a rule of
 * the Custodian gave. A 502 without the header may have reached the upstream.
 */
export const CUSTODIAN_HEADER = "x-jr2-custodian";
export const UNREACHABLE = "unreachable";
export const REFUSED = "refused";
/** Transport codes that prove no byte of a request was written (the connect never completed): the
 * Custodian retries only these, and the Harness reads them as "never reached" (decision 0025). */
export const NEVER_SENT_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT",
  "ENETUNREACH",
  "EHOSTUNREACH",
]);

/** The message of an `unreachable` answer (the Harness quotes it). */
export const unreachableMessage = (detail: string) => `the Custodian could not reach it (${detail})`;

// ---------------------------------------------------------------------------------------------
// Stand-ins

/**
 * A Stand-in: what the Harness holds in the place of a credential, `jr2-stand-in-` and 32 to 64
 * lower-case hex digits (16 to 32 random or derived bytes). Recognisable inside any header value,
 * so the Custodian refuses one it does not hold instead of sending it on.
 */
export const STAND_IN_PREFIX = "jr2-stand-in-";
export const STAND_IN = /^jr2-stand-in-[0-9a-f]{32,64}$/;
const STAND_IN_ANYWHERE = /jr2-stand-in-[0-9a-f]{32,64}/g;

/** Every Stand-in-shaped run in `text`, in order (a longer hex run reads as one, unknown, Stand-in). */
export const standInsIn = (text: string): string[] => text.match(STAND_IN_ANYWHERE) ?? [];

/** `text` with each Stand-in-shaped run replaced by what `swap` gives for it. */
export const replaceStandIns = (text: string, swap: (standIn: string) => string): string =>
  text.replace(STAND_IN_ANYWHERE, swap);

/** A Stand-in from 16 to 32 bytes (random, or derived from a key as the Sandbox token is). */
export function standInFrom(bytes: Uint8Array): string {
  if (bytes.length < 16 || bytes.length > 32) throw new Error("a Stand-in takes 16 to 32 bytes");
  return STAND_IN_PREFIX + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

// ---------------------------------------------------------------------------------------------
// The config (`config.json` in `<sandbox>-custodian`)

/** Headers that belong to one hop: never bound to a held value, never passed on by the Custodian. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([...HOP_BY_HOP_HEADERS, "host"]);

const ORIGIN_FIX =
  "write the origin alone, e.g. https://api.anthropic.com (scheme, host, a port only when not the default)";

/** Why `text` is not an http(s) origin in its canonical form, or undefined. */
export function originProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return `is not a url: ${ORIGIN_FIX}`;
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return `must be http or https: ${ORIGIN_FIX}`;
  if (url.username || url.password)
    return `must not carry a credential (the held value is the credential): ${ORIGIN_FIX}`;
  if (url.origin !== text) return `must be exactly ${url.origin}: ${ORIGIN_FIX}`;
  return undefined;
}

/** Why `text` cannot be a base url to forward to, or undefined. */
export function baseUrlProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "is not a url: write e.g. https://api.anthropic.com or http://jr2-orchestrator.jr2.svc:8090";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be http or https";
  if (url.username || url.password) return "must not carry a credential: the Custodian adds it from its values";
  if (url.search || url.hash || text.includes("?") || text.includes("#"))
    return "must not carry a query or a fragment: the request's own are sent on";
  return undefined;
}

const VIA_FIX =
  "write the egress point's proxy address as http://host:port alone, e.g. http://jr2-egress.jr2-system.svc:3128";

/** Why `text` is not the egress point's proxy address (`http://host:port`: plain http, a port
 * stated, nothing else), or undefined (docs/decisions/0051). */
export function viaProblem(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return `is not a url: ${VIA_FIX}`;
  }
  if (url.protocol !== "http:") return `must be http (the egress point's proxy speaks plain HTTP): ${VIA_FIX}`;
  if (url.username || url.password) return `must not carry a credential: ${VIA_FIX}`;
  // The text itself, since URL drops a default port (80) and adds a "/" path.
  const m = /^http:\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([0-9]{1,5})$/.exec(text);
  if (!m) return `must be a host and a port and nothing more (no path, query or fragment): ${VIA_FIX}`;
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return `names a port outside 1 to 65535: ${VIA_FIX}`;
  return undefined;
}

/** The egress point's host (an IPv6 literal without brackets) and port, from a checked `egress.via`. */
export function viaAddress(via: string): { host: string; port: number } {
  const url = new URL(via);
  return { host: url.hostname.replace(/^\[|\]$/g, ""), port: Number(/:([0-9]+)$/.exec(via)![1]) };
}

/** A string whose `problem` (undefined when fine) is its refusal. */
const checked = (problem: (s: string) => string | undefined) =>
  z.string().check(
    z.superRefine((s, ctx) => {
      const p = problem(s);
      if (p) ctx.addIssue({ code: "custom", message: p });
    }),
  );

export const Origin = checked(originProblem);

const BaseUrl = checked(baseUrlProblem);

const Via = checked(viaProblem);

/** A file under the values directory: a Secret's key, never a path or a hidden name. */
const ValueFile = z.string().check(
  z.regex(/^[A-Za-z0-9_-][A-Za-z0-9._-]*$/, {
    message: "must be a file name in the values directory (a Secret key: letters, digits, '-', '_', '.'; not hidden)",
  }),
  z.maxLength(253, "must be at most 253 characters (a Secret key's limit)"),
);

const StandIn = z.string().check(
  z.regex(STAND_IN, {
    message: `must be ${STAND_IN_PREFIX} and 32 to 64 lower-case hex digits (standInFrom in api/custodian-config.ts makes one)`,
  }),
);

export const HeaderName = z.string().check(
  z.regex(/^[a-z0-9!#$%&'*+.^_`|~-]+$/, { message: "must be a header name in lower case, e.g. x-api-key" }),
  z.refine((h) => !HOP_BY_HOP.has(h), { message: "names a hop-by-hop header, which never leaves the Custodian" }),
);

export const EnvName = z
  .string()
  .check(
    z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: "must be an environment variable name, e.g. ANTHROPIC_API_KEY" }),
  );

const RouteName = z.string().check(
  z.regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, {
    message: "must be a DNS label (lower-case letters, digits, '-'), e.g. anthropic: it is the route's path segment",
  }),
);

/** `*`, `host`, `*.domain` or an IP literal, each with an optional `:port`. */
const HOST_PATTERN =
  /^(\*|(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:.]+\])(:[0-9]{1,5})?$/;
export const HostPattern = z.string().check(
  z.regex(HOST_PATTERN, {
    message: "must be a host in lower case (github.com), a domain's hosts (*.github.com) or *, with an optional :port",
  }),
  z.refine((p) => !/:([0-9]+)$/.test(p) || Number(/:([0-9]+)$/.exec(p)![1]) <= 65535, {
    message: "names a port above 65535",
  }),
);

/** A Go duration between 1ms and 1h. */
export const Timeout = checked((s) => {
  const ms = goDurationMs(s);
  if (ms === undefined) return 'must be a Go duration such as "5s" or "300ms"';
  if (ms < 1 || ms > 3_600_000) return "must be between 1ms and 1h";
  return undefined;
});

/** `schema` with a description for the config's JSON Schema. */
const described = <T extends z.core.$ZodType>(schema: T, description: string): T => {
  z.globalRegistry.add(schema, { description });
  return schema;
};

export const DEFAULT_TIMEOUTS = { connect: "5s", headers: "300s", body: "300s" } as const;

const HeldValue = z.strictObject({
  value: described(z.clone(ValueFile), "The file under the values directory holding the secret."),
  standIn: described(z.clone(StandIn), "What the Harness holds in its place."),
  origins: described(
    z.array(Origin).check(z.minLength(1, "must name at least one origin: a held value goes only where it is bound")),
    "Where the secret may go: https://host[:port] (http:// for a cluster-local host).",
  ),
  headers: described(
    z.optional(z.array(HeaderName).check(z.minLength(1, "must name at least one header, or be left out (any header)"))),
    "The request headers the Stand-in may ride in; absent: any.",
  ),
  env: described(z.optional(EnvName), "The Harness's env var that holds the Stand-in."),
});

export const Provider = z.strictObject({
  name: RouteName,
  url: described(z.clone(BaseUrl), "Where /providers/<name>/<path> goes: <url>/<path>."),
  kind: described(
    z.optional(
      z.enum(MODEL_KINDS, {
        message: `must be one of ${MODEL_KINDS.join(", ")} (the API the provider speaks)`,
      }),
    ),
    "The API it speaks, and so the one header its key rides in (x-api-key, authorization, x-goog-api-key); " +
      "absent: the kind of the public API at its url's host, else openai-compatible (docs/decisions/0054).",
  ),
});

const Orchestrator = z.strictObject({
  url: described(z.clone(BaseUrl), "Where /orchestrator/<path> goes: <url>/<path>."),
  token: described(z._default(ValueFile, SANDBOX_TOKEN_KEY), "The Sandbox token's file."),
  retries: described(
    z._default(
      z.number().check(
        z.refine((n) => Number.isInteger(n), "must be a whole number"),
        z.minimum(0, "must be 0 to 5"),
        z.maximum(5, "must be 0 to 5"),
      ),
      2,
    ),
    "Attempts after the first, only when the request was never sent.",
  ),
});

export const CustodianConfig = z
  .strictObject({
    version: z.literal(1, { message: "must be 1" }),
    orchestrator: z.optional(Orchestrator),
    providers: z._default(z.array(Provider), []),
    held: z._default(z.array(HeldValue), []),
    egress: z._default(
      z.strictObject({
        tunnel: described(
          z._default(z.array(HostPattern), []),
          "Hosts the proxy tunnels untouched; default port 443 (80 for http://). Read only without via.",
        ),
        via: described(
          z.optional(Via),
          "The egress point's proxy (http://host:port): every outbound connection but the Orchestrator's goes through it, and it alone decides where (docs/decisions/0051).",
        ),
      }),
      { tunnel: [] },
    ),
    timeouts: z._default(
      z.strictObject({
        connect: z._default(Timeout, DEFAULT_TIMEOUTS.connect),
        headers: z._default(Timeout, DEFAULT_TIMEOUTS.headers),
        body: z._default(Timeout, DEFAULT_TIMEOUTS.body),
      }),
      { ...DEFAULT_TIMEOUTS },
    ),
  })
  .check(
    z.superRefine((c, ctx) => {
      /** Each defined value once: a second one is named at its own path. */
      const once = (values: Array<string | undefined>, list: "providers" | "held", field: string, what: string) => {
        const seen = new Set<string>();
        values.forEach((v, i) => {
          if (v === undefined) return;
          if (seen.has(v))
            ctx.addIssue({ code: "custom", path: [list, i, field], message: `repeats ${what}: make each unique` });
          seen.add(v);
        });
      };
      once(
        c.providers.map((p) => p.name),
        "providers",
        "name",
        "a provider's name",
      );
      once(
        c.held.map((h) => h.standIn),
        "held",
        "standIn",
        "a Stand-in",
      );
      once(
        c.held.map((h) => h.env),
        "held",
        "env",
        "an env name",
      );
      const token = c.orchestrator?.token;
      c.held.forEach((h, i) => {
        if (token !== undefined && h.value === token)
          ctx.addIssue({
            code: "custom",
            path: ["held", i, "value"],
            message:
              "names the Sandbox token's file: the token goes to the Orchestrator alone, never behind a Stand-in",
          });
      });
    }),
  );

export type CustodianConfig = z.infer<typeof CustodianConfig>;
export type CustodianConfigInput = z.input<typeof CustodianConfig>;
export type HeldValue = CustodianConfig["held"][number];

// zod/mini carries no messages of its own: English is taken as classic zod says it, with "Required"
// for a missing field, as the other schemas say it.
const english = en().localeError;
const requiredMessage: z.core.$ZodErrorMap = (iss) =>
  iss.code === "invalid_type" && iss.input === undefined ? "Required" : english(iss);

export type ParsedConfig = { ok: true; config: CustodianConfig } | { ok: false; message: string };

/** Validates a decoded config; on failure one message naming every bad field's path and its fix. */
export function parseCustodianConfig(input: unknown): ParsedConfig {
  const r = z.safeParse(CustodianConfig, input, { error: requiredMessage });
  if (r.success) return { ok: true, config: r.data };
  const message = r.error.issues.map((iss) => `${iss.path.length ? fieldPath(iss.path) : "config"}: ${iss.message}`);
  return { ok: false, message: message.join("; ") };
}

/** The same, from the file's text (JSON). */
export function parseCustodianConfigText(text: string): ParsedConfig {
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch (err) {
    return { ok: false, message: `not valid JSON (${(err as Error).message}): write the config as one JSON object` };
  }
  return parseCustodianConfig(input);
}

/** A config's timeouts in milliseconds. */
export function timeoutsMs(config: CustodianConfig): { connect: number; headers: number; body: number } {
  const ms = (s: string) => goDurationMs(s) ?? NaN;
  return { connect: ms(config.timeouts.connect), headers: ms(config.timeouts.headers), body: ms(config.timeouts.body) };
}

// ---------------------------------------------------------------------------------------------
// What the Custodian reads (api/env.ts CUSTODIAN_ENV names them) and what the Harness gets

/** The Harness container's env for reaching its Custodian: its address, the proxy for tools, the
 * trust bundle, and each held value's Stand-in under its `env` name. */
export const HARNESS_CUSTODIAN_URL_ENV = "JR2_CUSTODIAN_URL";

/** A proxy told the way tools read it, in both spellings, loopback excepted; `all`: ALL_PROXY too
 * (curl's for any scheme), for a seat whose only way out is that proxy (decision 0051). */
export function proxyEnv(url: string, all = false): Array<{ name: string; value: string }> {
  const loopback = "127.0.0.1,localhost,::1";
  return [
    ...["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", ...(all ? ["ALL_PROXY", "all_proxy"] : [])].map(
      (name) => ({ name, value: url }),
    ),
    { name: "NO_PROXY", value: loopback },
    { name: "no_proxy", value: loopback },
  ];
}

export function harnessCustodianEnv(
  config: CustodianConfig,
  port: number = CUSTODIAN_PORT,
): Array<{ name: string; value: string }> {
  const url = `http://127.0.0.1:${port}`;
  return [
    { name: HARNESS_CUSTODIAN_URL_ENV, value: url },
    ...proxyEnv(url),
    { name: "NODE_EXTRA_CA_CERTS", value: `${HARNESS_CA_DIR}/${HARNESS_CA_KEY}` },
    ...config.held.flatMap((h) => (h.env ? [{ name: h.env, value: h.standIn }] : [])),
  ];
}
