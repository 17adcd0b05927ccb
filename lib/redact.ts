// The one redaction of credentials from text on its way to a message or a log line: the Harness's
// step errors, the cache agent's git errors and the fence's refusals all pass through it. Not a
// word on the wire, so it lives here (api/ keeps its own messages free of urls instead).

/** A url's scheme and userinfo: the userinfo runs to the authority's LAST `@` (`https://u:p@ss@h/`). */
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s/?#'"]*)@/gi;
/** scp-like ssh with a password: `user:pass@host:path` (ssh itself takes none; it must not show). */
const SCP_PASSWORD = /(^|[\s'"(=])[^\s/@:'"]+:[^\s/'"]*@(?=[^\s/:@'"]+:)/g;
const AUTHORIZATION = /(Authorization:\s*)[^\r\n'"]*/gi;

/**
 * `text` with every given secret (longest first) replaced by `***`, the userinfo of a url that
 * carries a password (`scheme://user:pass@` → `scheme://***@`) or of any http(s) url (a lone user
 * there is a token: `https://token@` → `https://***@`), an scp-like address's `user:pass@`, and
 * every Authorization header value. An ssh user alone (`ssh://git@`, `git@host:`) stays.
 */
export function redact(text: string, secrets: readonly string[] = []): string {
  let out = text;
  for (const s of [...new Set(secrets)].filter((x) => x.length > 0).sort((a, b) => b.length - a.length)) {
    out = out.split(s).join("***");
  }
  return out
    .replace(URL_USERINFO, (whole, scheme: string, userinfo: string) =>
      userinfo.includes(":") || /^https?:\/\/$/i.test(scheme) ? `${scheme}***@` : whole,
    )
    .replace(SCP_PASSWORD, "$1***@")
    .replace(AUTHORIZATION, "$1***");
}

/** Splits `scheme://userinfo@rest` at the authority's last `@`; `undefined` for paths, scp-like
 * addresses and urls without userinfo. */
export function userinfoOf(url: string): { scheme: string; userinfo: string; rest: string } | undefined {
  const m = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)(.*)$/is.exec(url);
  if (!m) return undefined;
  const [, scheme, authority, tail] = m;
  const at = authority.lastIndexOf("@");
  if (at < 0) return undefined;
  return { scheme, userinfo: authority.slice(0, at), rest: authority.slice(at + 1) + tail };
}

/**
 * One url without its credentials, to store or to name in a message. An http(s) url loses its
 * whole userinfo (a lone user may be a token); another scheme, and an scp-like address, keeps its
 * user (`ssh://git@`, `git@host:`), never a password.
 */
export function urlWithoutCredentials(url: string): string {
  const u = userinfoOf(url);
  if (!u) {
    // scp-like `user:pass@host:path` (no scheme): the user stays, the password goes.
    const scp = /^([^/@:]*):[^/]*@([^@:/]+:.*)$/s.exec(url);
    return scp ? `${scp[1] ? `${scp[1]}@` : ""}${scp[2]}` : url;
  }
  if (/^https?:\/\//i.test(u.scheme)) return u.scheme + u.rest;
  const user = u.userinfo.split(":")[0];
  return user ? `${u.scheme}${user}@${u.rest}` : u.scheme + u.rest;
}
