// A Repo's identity: host plus path, whatever spelling of the url named it, so every spelling of
// one repository lands on one cache per node (decision 0010); and the stable key
// derived from it, which names the cache directory and the `repo-<key>` volume. Pure.
import { createHash } from "node:crypto";

const DEFAULT_PORTS: Record<string, string> = { https: "443", http: "80", ssh: "22", git: "9418" };

/** scp-like ssh: `user@host:path` (no scheme, a colon before the first slash). */
const SCP_LIKE = /^(?:[^@/]+@)?([^:/]+):(?!\/\/)(.*)$/;

export class RepoUrlError extends Error {}

/** Host plus path: scheme, user, password, default port, trailing `/` and `.git` dropped. */
export function repoIdentity(url: string): string {
  const text = url.trim();
  if (!text) throw new RepoUrlError("a Repo url is empty: give an https, ssh or file url, or a path");
  // A local path (or file://) has no host: its identity is the path itself.
  if (text.startsWith("/") || text.startsWith("file://")) {
    return cleanPath(text.replace(/^file:\/\//, "")) || "/";
  }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(text);
  if (scheme) {
    let parsed: URL;
    try {
      parsed = new URL(text);
    } catch {
      throw new RepoUrlError(`${JSON.stringify(redact(text))} is not a url`);
    }
    const proto = parsed.protocol
      .replace(/:$/, "")
      .toLowerCase()
      .replace(/^git\+/, "")
      .replace(/\+git$/, "");
    const port = parsed.port && parsed.port !== DEFAULT_PORTS[proto] ? `:${parsed.port}` : "";
    if (!parsed.hostname) throw new RepoUrlError(`${JSON.stringify(redact(text))} names no host`);
    return `${parsed.hostname.toLowerCase()}${port}/${cleanPath(decodeURIComponent(parsed.pathname))}`;
  }
  const scp = SCP_LIKE.exec(text);
  if (scp) return `${scp[1].toLowerCase()}/${cleanPath(scp[2])}`;
  throw new RepoUrlError(`${JSON.stringify(redact(text))} is neither a url, an ssh address (git@host:path) nor a path`);
}

function cleanPath(path: string): string {
  return path
    .replace(/\/+/g, "/")
    .replace(/^\/+|\/+$/g, "")
    .replace(/\.git$/i, "")
    .replace(/\/+$/, "");
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

/** A url with any user and password taken out, for messages. */
export function redact(url: string): string {
  return url.replace(/\/\/[^/@]*@/, "//");
}
