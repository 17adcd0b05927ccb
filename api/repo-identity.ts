// A Repo's identity: host plus path, whatever spelling of the url named it, so every spelling of
// one repository lands on one cache per node (decision 0010); and the stable key
// derived from it, which names the cache directory and the `repo-<key>` volume. Pure.
//
// A url is read ONCE, here: the fence, the Repo key, the operator and the cache agents all use
// this one reading, so no spelling can name one repository to the fence and another to git.
// - Percent-escapes are decoded once, where git decodes them: in a scheme url (https, http, ssh,
//   git, file). git takes an scp-like address or a plain path literally, so a '%' there is refused
//   (the identity would otherwise name another directory than the one git reads).
// - A '.' segment is dropped; a '..' segment, encoded or not, is REFUSED: a path never climbs,
//   whatever a server, curl or a shell would resolve it to.
// - An encoded separator inside a segment (%2F, %5C) is REFUSED: servers disagree on whether it
//   splits a segment (some decode it, some do not), so one spelling could name two repositories.
// - A control character, '\', a query or a fragment is refused anywhere; whitespace too, except
//   in a plain path (which git reads as written).
// - The host is lowercased (and read as a browser reads it: IDNA, IPv4 spellings), a default
//   port dropped, the userinfo stripped. A file url's host is refused: git ignores it
//   (file://evil/x reads /x).
// No message here quotes the url (it may carry a password): callers name the field or the slot.
// Whether a url carries a credential is a separate question, asked at the edges (checkRepoUrl).
import { createHash } from "node:crypto";

const DEFAULT_PORTS: Record<string, string> = { https: "443", http: "80", ssh: "22", git: "9418" };
const SCHEMES = new Set(["https", "http", "ssh", "git", "file"]);

/** `scheme://authority/path?query#fragment`. */
const SCHEME_URL = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/i;
/** scp-like ssh: `[user[:password]@]host:path` (no scheme, a colon before the first slash). */
const SCP_LIKE = /^(?:([^/]*)@)?([^@:/]+):(.*)$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\x00-\x1f\x7f]/;

export class RepoUrlError extends Error {}

/** What a url carries besides host and path: nothing, an ssh user, a password, or (http) a token. */
export type UrlCredentials = "none" | "user" | "password" | "token";

export type RepoUrlReading = { identity: string; credentials: UrlCredentials };

/** Reads a url once: its identity (host plus path: scheme, user, password, default port, trailing
 * `/` and `.git` dropped) and what credential it carries. Throws RepoUrlError, never quoting it. */
export function readRepoUrl(url: string): RepoUrlReading {
  const text = url.trim();
  if (!text) throw new RepoUrlError("is empty: give an https or ssh url, an ssh address (git@host:path) or a path");
  if (CONTROL.test(text)) throw new RepoUrlError("must not contain a control character: remove it");
  if (text.includes("\\")) throw new RepoUrlError("must not contain '\\': separate path segments with '/'");
  // A local path has no host: its identity is the path itself (git reads it as written, spaces too).
  if (text.startsWith("/")) return { identity: identityOf("", segmentsOf(text, false)), credentials: "none" };
  if (/\s/.test(text)) throw new RepoUrlError("must not contain whitespace: write a space as %20 in a url");
  const parts = SCHEME_URL.exec(text);
  if (parts) return readSchemeUrl(parts[1], parts[2], parts[3], parts[4] !== undefined || parts[5] !== undefined);
  const scp = SCP_LIKE.exec(text);
  if (scp) {
    const [, userinfo, host, path] = scp;
    if (path.startsWith(":")) {
      throw new RepoUrlError(
        "names a remote helper (`<transport>::<address>`), not a repository: give an https or ssh url",
      );
    }
    return {
      identity: identityOf(hostOf(host, "ssh"), segmentsOf(path, false)),
      credentials: credentialsOf(userinfo, false),
    };
  }
  throw new RepoUrlError(
    "is neither a url (https://, ssh://, file://), an ssh address (git@host:path) nor an absolute path",
  );
}

/** The Repo identity of a url (see readRepoUrl). Throws RepoUrlError. */
export function repoIdentity(url: string): string {
  return readRepoUrl(url).identity;
}

const CREDENTIALS_FIX =
  "remove them from the url: credentials come from the fence entry's Secret (for a Repo, its spec.secretRef)";

/** The identity of a url the edges accept: one that carries no password, nor (http, https) any
 * user, since git sends a lone user there as a credential (a token). An ssh user (`git@`) is fine.
 * Throws RepoUrlError naming the problem and the fix, never quoting the url. */
export function checkRepoUrl(url: string): string {
  const { identity, credentials } = readRepoUrl(url);
  if (credentials === "password") throw new RepoUrlError(`carries a password (user:password@): ${CREDENTIALS_FIX}`);
  if (credentials === "token") {
    throw new RepoUrlError(
      `carries a user (user@), which git sends over http(s) as a credential, a token: ${CREDENTIALS_FIX}`,
    );
  }
  return identity;
}

/** Where a url points, as git will reach it: scheme (`ssh` for an ssh address, `file` for a
 * path), the ssh user if any, the host as an identity spells it (lowercased, default port
 * dropped) and the path's segments (decoded once, a trailing `.git` dropped). What a repo
 * credential's url prefixes are matched on (api/repo-credential.ts). Throws RepoUrlError. */
export type RepoUrlLocation = { scheme: string; user?: string; host: string; segments: string[] };

export function repoUrlLocation(url: string): RepoUrlLocation {
  readRepoUrl(url); // every refusal of the one reading, first
  const text = url.trim();
  const withoutGit = (segments: string[]) => {
    const out = [...segments];
    if (out.length) out[out.length - 1] = out[out.length - 1].replace(/\.git$/i, "");
    return out.filter(Boolean);
  };
  if (text.startsWith("/")) return { scheme: "file", host: "", segments: withoutGit(segmentsOf(text, false)) };
  const parts = SCHEME_URL.exec(text);
  if (parts) {
    const scheme = parts[1]
      .toLowerCase()
      .replace(/^git\+/, "")
      .replace(/\+git$/, "");
    const at = parts[2].lastIndexOf("@");
    const user = at < 0 ? undefined : parts[2].slice(0, at).split(":")[0];
    if (scheme === "file") return { scheme, host: "", segments: withoutGit(segmentsOf(parts[3], true)) };
    return {
      scheme,
      ...(user ? { user } : {}),
      host: hostOf(parts[2].slice(at + 1), scheme),
      segments: withoutGit(segmentsOf(parts[3], true)),
    };
  }
  const [, userinfo, host, path] = SCP_LIKE.exec(text)!;
  const user = userinfo?.split(":")[0];
  return {
    scheme: "ssh",
    ...(user ? { user } : {}),
    host: hostOf(host, "ssh"),
    segments: withoutGit(segmentsOf(path, false)),
  };
}

function readSchemeUrl(rawScheme: string, authority: string, path: string, queryOrFragment: boolean): RepoUrlReading {
  const scheme = rawScheme
    .toLowerCase()
    .replace(/^git\+/, "")
    .replace(/\+git$/, "");
  if (!SCHEMES.has(scheme)) {
    throw new RepoUrlError(`names the scheme '${scheme}': give an https, http, ssh, git or file url`);
  }
  if (queryOrFragment) {
    throw new RepoUrlError("must not carry a query or a fragment ('?', '#'): a repository url is a host and a path");
  }
  const at = authority.lastIndexOf("@");
  const userinfo = at < 0 ? undefined : authority.slice(0, at);
  const hostport = authority.slice(at + 1);
  if (scheme === "file") {
    if (authority) {
      throw new RepoUrlError(
        "names a host in a file url, which git ignores (file://host/x reads /x): write file:///path",
      );
    }
    return { identity: identityOf("", segmentsOf(path, true)), credentials: "none" };
  }
  const credentials = credentialsOf(userinfo, scheme === "https" || scheme === "http");
  return { identity: identityOf(hostOf(hostport, scheme), segmentsOf(path, true)), credentials };
}

function credentialsOf(userinfo: string | undefined, http: boolean): UrlCredentials {
  if (!userinfo) return "none";
  if (userinfo.includes(":")) return "password";
  return http ? "token" : "user";
}

/** `host[:port]` as an identity spells it: lowercased, read as a browser reads it, default port dropped. */
function hostOf(hostport: string, scheme: string): string {
  const m = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(hostport);
  if (!m?.[1]) throw new RepoUrlError("names no host: give host[:port] after the scheme's '//'");
  if (m[1].startsWith("-")) throw new RepoUrlError("names a host starting with '-', which ssh could read as an option");
  let hostname: string;
  try {
    hostname = new URL(`http://${m[1]}/`).hostname;
  } catch {
    throw new RepoUrlError("names no valid host: give a DNS name or an IP address");
  }
  const port = m[2] ? Number(m[2]) : undefined;
  if (port !== undefined && port > 65535) throw new RepoUrlError("names a port above 65535");
  return port !== undefined && String(port) !== DEFAULT_PORTS[scheme] ? `${hostname}:${port}` : hostname;
}

/** The path's segments, decoded once when git decodes them; '.' and empty ones dropped, '..' refused. */
function segmentsOf(path: string, decode: boolean): string[] {
  const out: string[] = [];
  for (const raw of path.split("/")) {
    let s = raw;
    if (decode) {
      if (/%(2f|5c)/i.test(s)) {
        throw new RepoUrlError(
          "must not carry an encoded '/' or '\\' (%2F, %5C) inside a segment: servers disagree on whether it separates segments, so write '/' or the name itself",
        );
      }
      try {
        s = decodeURIComponent(s);
      } catch {
        throw new RepoUrlError("carries a malformed percent-escape: write '%' as %25");
      }
      if (CONTROL.test(s)) throw new RepoUrlError("carries an encoded control character: remove it");
    } else if (s.includes("%")) {
      throw new RepoUrlError(
        "must not contain '%' in an ssh address (git@host:path) or a path, which git reads literally: write the name as it is, or use an ssh:// or file:/// url",
      );
    }
    if (s === "" || s === ".") continue;
    if (s === "..") {
      throw new RepoUrlError(
        "climbs with a '..' segment (encoded or not): name the repository by its own path, without '..'",
      );
    }
    out.push(s);
  }
  return out;
}

function identityOf(host: string, segments: readonly string[]): string {
  const path = segments
    .join("/")
    .replace(/\.git$/i, "")
    .replace(/\/+$/, "");
  return host ? `${host}/${path}` : path || "/";
}

/** The stable key: a readable name from the last path segment and a hash of the whole identity,
 * a DNS label of at most 51 characters (so `repo-<key>` fits a volume name). */
export function repoKey(identity: string): string {
  const last = identity.split("/").filter(Boolean).pop() ?? "";
  const slug =
    last
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-+|-+$/g, "")
      .slice(0, 40)
      .replace(/-+$/, "") || "repo";
  const hash = createHash("sha256").update(identity).digest("hex").slice(0, 10);
  return `${slug}-${hash}`;
}
