// The fence (decision 0015): a per-run repo url is run input, and otherwise a way to spend the
// cluster's git credential against any host, so it must fall under a configured `git.credentials`
// entry or the request is refused before anything is written, naming the entries. A url the
// Machine's own code binds passes without a match: it is code the instance deployed.
//
// The entries file (JR2_GIT_CREDENTIALS_FILE) is YAML (so JSON too): a list whose items are an
// identity prefix, or an object with `match` (jr2's `git.credentials` shape, decision 0015; other fields,
// such as the entry's push `secret`, are kept for others and ignored here):
//
//   - match: github.com/acme                  # host, then whole path segments
//     secret: jr2-git-push-acme
//   - https://gitlab.example.com/team/        # a url prefix, normalised like any Repo url
//   - git@git.example.com:platform            # scp-like needs its user@
//   - match: github.com/acme/private          # only tenants team-a and team-b (decision 0048)
//     secret: jr2-git-push-private
//     tenants: [team-a, team-b]
//
// An entry with `tenants` is for those API-token tenants alone (decision 0042's tenants; an admin
// token may use every entry): another tenant's url that falls under it (its longest match) is
// refused as a url no entry admits, and a refusal names only the entries the tenant may use.
//
// A prefix matches a Repo identity (api/repo-identity.ts: host plus path, whatever the
// url's spelling) that equals it or continues it at a `/`: `github.com/acme` admits
// `github.com/acme/app` and not `github.com/acme-evil/app`.
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { RepoUrlError, repoIdentity, repoKey } from "../../api/repo-identity";
import { urlWithoutCredentials } from "../../lib/redact";
import { zodIssuesToMessage } from "../../api/orchestrator-schemas";
import { TENANT_NAME } from "../tokens";
import { PlaceFailure, type PlaceRepo, type PlacedRepo } from "./sandbox-gateway";

export type CredentialEntry = {
  /** As written in the file. */
  match: string;
  /** The identity prefix it stands for. */
  prefix: string;
  /** The tenants it is for (decision 0048); absent: every tenant's. */
  tenants?: string[];
  /** Anything else the entry carries (e.g. `secret`), untouched. */
  extra?: Record<string, unknown>;
};

export class CredentialsFileError extends Error {}

const EntryText = z.string().trim().min(1, "must not be empty");
const Tenants = z
  .array(z.string().regex(TENANT_NAME, { message: "must be a tenant's name (a DNS label), e.g. team-a" }))
  .min(1, "must name at least one tenant, or be left out (every tenant)");
// `tenants` is read apart (parseCredentials): inside the union its errors would be "Invalid input".
const EntrySchema = z.union([EntryText, z.looseObject({ match: EntryText })]);
const FileSchema = z.array(EntrySchema);

/** `https://`, `ssh://`, `file://`...: a url with a scheme. */
const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;
/** `user@host:path`: scp-like ssh, which needs its user here (a bare `host:8443/x` is an identity). */
const SCP_WITH_USER = /^[^@/:]+@[^:/]+:/;

/** The identity prefix an entry's `match` stands for. Throws RepoUrlError for one that names none. */
export function prefixOf(match: string): string {
  const text = match.trim();
  // A url or scp-like address is normalised exactly as a Repo url is, so spellings agree; a bare
  // identity (`host[:port][/path]`) is read as if https, which lowercases the host and drops a
  // trailing `/` and `.git` the same way. A host alone has an identity of `host/`: the prefix is `host`.
  const url = SCHEME.test(text) || SCP_WITH_USER.test(text) || text.startsWith("/") ? text : `https://${text}`;
  const prefix = repoIdentity(url).replace(/\/+$/, "");
  if (!prefix) throw new RepoUrlError(`${JSON.stringify(text)} names no host or path`);
  return prefix;
}

/** The entries of a credentials file's text (YAML or JSON); empty text is no entries. */
export function parseCredentials(text: string): CredentialEntry[] {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    throw new CredentialsFileError(`the git credentials file is not YAML: ${(err as Error).message}`);
  }
  if (doc === null || doc === undefined) return [];
  const r = FileSchema.safeParse(doc);
  if (!r.success) throw new CredentialsFileError(`the git credentials file: ${zodIssuesToMessage(r.error.issues)}`);
  return r.data.map((item, i) => {
    const { match, tenants: stated, ...extra } = typeof item === "string" ? { match: item, tenants: undefined } : item;
    const read = stated === undefined ? undefined : Tenants.safeParse(stated);
    if (read && !read.success) {
      const issues = read.error.issues.map((issue) => ({ ...issue, path: [i, "tenants", ...issue.path] }));
      throw new CredentialsFileError(`the git credentials file: ${zodIssuesToMessage(issues)}`);
    }
    const tenants = read?.data;
    let prefix: string;
    try {
      prefix = prefixOf(match);
    } catch (err) {
      if (!(err instanceof RepoUrlError)) throw err;
      throw new CredentialsFileError(`the git credentials file: [${i}]: ${err.message}`);
    }
    return { match, prefix, ...(tenants ? { tenants } : {}), ...(Object.keys(extra).length ? { extra } : {}) };
  });
}

/** Whether `tenant` (undefined: an admin) may use `entry` (decision 0048). */
export const usableBy = (entry: CredentialEntry, tenant: string | undefined) =>
  tenant === undefined || !entry.tenants || entry.tenants.includes(tenant);

/** The entries `tenant` may use: what a refusal names to it, so it learns nothing of the others. */
export const entriesFor = (entries: readonly CredentialEntry[], tenant: string | undefined): CredentialEntry[] =>
  entries.filter((e) => usableBy(e, tenant));

/** Whether `identity` equals `prefix` or continues it at a path-segment boundary. */
export const underPrefix = (identity: string, prefix: string) =>
  identity === prefix || identity.startsWith(`${prefix}/`);

/** The entry a Repo identity falls under: the longest prefix (decision 0015). */
export function matchCredential(identity: string, entries: readonly CredentialEntry[]): CredentialEntry | undefined {
  let best: CredentialEntry | undefined;
  for (const e of entries) {
    if (underPrefix(identity, e.prefix) && (!best || e.prefix.length > best.prefix.length)) best = e;
  }
  return best;
}

/** A url to fence: a bare url is per-run; `bound` marks one the Machine's code binds. */
export type FenceInput = string | { url: string; slot?: string; bound?: boolean };

export type Fenced = { url: string; slot?: string; identity: string; bound: boolean; entry?: CredentialEntry };
export type FenceResult = { ok: true; repos: Fenced[] } | { ok: false; error: PlaceFailure };

/** Admits every url or refuses the lot, naming each refused url and every entry `tenant` may use
 * (undefined: an admin, every entry). Never echoes a url's user or password. */
export function fence(urls: readonly FenceInput[], entries: readonly CredentialEntry[], tenant?: string): FenceResult {
  const repos: Fenced[] = [];
  const refused: string[] = [];
  for (const input of urls) {
    const { url, slot, bound = false } = typeof input === "string" ? { url: input } : input;
    const where = `${slot !== undefined ? `slot "${slot}" ` : ""}url ${urlWithoutCredentials(url)}`;
    let identity: string;
    try {
      identity = repoIdentity(url);
    } catch (err) {
      if (!(err instanceof RepoUrlError)) throw err;
      refused.push(`${where}: ${err.message}`);
      continue;
    }
    // The longest match decides, then whether this tenant may use it: a broader entry never lends
    // its credential to a url an installation set apart for other tenants (decision 0048).
    const best = matchCredential(identity, entries);
    const entry = best && usableBy(best, tenant) ? best : undefined;
    if (!entry && !bound) {
      refused.push(`${where} (identity ${identity})`);
      continue;
    }
    repos.push({ url, ...(slot !== undefined ? { slot } : {}), identity, bound, ...(entry ? { entry } : {}) });
  }
  if (!refused.length) return { ok: true, repos };
  const names = entriesFor(entries, tenant).map((e) => e.match);
  const message =
    `the fence refuses ${refused.join("; ")}: no git.credentials entry admits ${refused.length === 1 ? "it" : "them"} ` +
    `(entries: ${names.join(", ") || "none"}). ` +
    "A per-run url can spend the cluster's git credential against any host, so an entry must admit it by " +
    "identity prefix (host, then whole path segments).";
  return { ok: false, error: new PlaceFailure("FenceRefused", message, { refused, entries: names }) };
}

/**
 * A create's one fence: every slot admitted with its identity, its cache key and the entry that
 * admitted it, in order, or the FenceRefused failure; `tenant` (undefined: an admin) may use only
 * the entries that are its (usableBy). What it answers is handed to the port as it
 * is (PlaceRequest.repos) and the attach body is built from it (attach-body.ts): nothing downstream
 * reads a url again.
 */
export function fenceSlots(
  slots: readonly PlaceRepo[],
  entries: readonly CredentialEntry[],
  tenant?: string,
): { ok: true; repos: PlacedRepo[] } | { ok: false; error: PlaceFailure } {
  const r = fence(
    slots.map((s) => ({ url: s.url, slot: s.slot, bound: s.bound })),
    entries,
    tenant,
  );
  if (!r.ok) return r;
  // fence() admits every url or refuses the lot, in order: r.repos[i] is slots[i].
  const repos = slots.map((s, i) => {
    const { identity, bound, entry } = r.repos[i];
    return { ...s, identity, key: repoKey(identity), bound, ...(entry ? { entry } : {}) };
  });
  return { ok: true, repos };
}

/**
 * The push Secrets an Effector's pushes spend (decision 0021): each pushed slot's
 * fence entry, and the `secret` it names, once each in order of first use. A slot whose url no
 * entry admits (a bound url) or whose entry names no `secret` is refused by name before anything
 * is written: the Effector could not push it.
 */
export function pushCredentials(
  repos: readonly PlacedRepo[],
  pushes: readonly string[],
): { ok: true; secrets: string[] } | { ok: false; message: string } {
  const secrets: string[] = [];
  for (const slot of pushes) {
    const repo = repos.find((r) => r.slot === slot);
    if (!repo) return { ok: false, message: `effector.pushes names Repo Slot "${slot}", which repos does not attach` };
    const secret = repo.entry?.extra?.secret;
    if (typeof secret !== "string" || !secret) {
      const entry = repo.entry
        ? `its git.credentials entry "${repo.entry.match}" names no \`secret\``
        : "no git.credentials entry admits its url";
      return {
        ok: false,
        message:
          `effector.pushes: Repo Slot "${slot}" (${repo.identity}) cannot be pushed: ${entry}. Add an entry ` +
          "with `match` and the push `secret` (a Secret in the Sandboxes' namespace) to the credentials file.",
      };
    }
    if (!secrets.includes(secret)) secrets.push(secret);
  }
  return { ok: true, secrets };
}
