// Whether a Repo's Secret may be sent to its url (decision 0046). Whoever may create a Repo names
// its spec.url and any Secret of the namespace in spec.secretRef; the cache agent then sends that
// Secret's token or key to that url. So a Secret is sent only when it says it is a repo credential
// (REPO_CREDENTIAL_LABEL) and only to the url prefixes it lists (REPO_CREDENTIAL_HOSTS_ANNOTATION):
// scheme, ssh user (when the prefix names one), host and port exactly, the host case-insensitive,
// and the path by whole segments (`https://github.com/org` covers `https://github.com/org/app`,
// never `https://github.com/organ/app`, and `https://github.com` never `https://github.com.evil/`).
// Pure; no message quotes a url beyond its identity (a url carries no credential by here:
// checkRepoUrl refused those).
import { RepoUrlError, readRepoUrl, repoUrlLocation, type RepoUrlLocation } from "./repo-identity";
import { REPO_CREDENTIAL_HOSTS_ANNOTATION, REPO_CREDENTIAL_LABEL, REPO_CREDENTIAL_LABEL_VALUE } from "./wire";

/** What is read of the Secret: its name and metadata, never its data. */
export type CredentialSecret = {
  name: string;
  labels?: Record<string, string> | null;
  annotations?: Record<string, string> | null;
};

const LABEL_FIELD = `metadata.labels[${REPO_CREDENTIAL_LABEL}]`;
const HOSTS_FIELD = `metadata.annotations[${REPO_CREDENTIAL_HOSTS_ANNOTATION}]`;
const EXAMPLE = "https://github.com/org/,ssh://git@github.com/org/";

/** The prefixes an annotation lists, each read as a url is read; `errors` names each bad entry. */
export function credentialPrefixes(value: string | undefined): { prefixes: RepoUrlLocation[]; errors: string[] } {
  const prefixes: RepoUrlLocation[] = [];
  const errors: string[] = [];
  const entries = (value ?? "")
    .split(",")
    .map((e) => e.trim())
    .filter(Boolean);
  entries.forEach((entry, i) => {
    try {
      const { credentials } = readRepoUrl(entry);
      if (credentials === "password" || credentials === "token")
        throw new RepoUrlError("carries a user or password: a prefix is a scheme, a host and a path");
      prefixes.push(repoUrlLocation(entry));
    } catch (err) {
      errors.push(`entry ${i + 1} ${err instanceof Error ? err.message : String(err)}`);
    }
  });
  return { prefixes, errors };
}

/** Whether `prefix` covers `url`: same scheme, same host and port, the prefix's ssh user if it
 * names one, and the prefix's path segments leading the url's. */
export function prefixCovers(prefix: RepoUrlLocation, url: RepoUrlLocation): boolean {
  if (prefix.scheme !== url.scheme || prefix.host !== url.host) return false;
  if (prefix.user !== undefined && prefix.user !== url.user) return false;
  if (prefix.segments.length > url.segments.length) return false;
  return prefix.segments.every((s, i) => s === url.segments[i]);
}

/**
 * Why `secret` may not be sent to `url` (the Repo's spec.url), naming the Secret, the field and the
 * fix; undefined when it may. A url that cannot be read is the operator's refusal already
 * (status.error): here it is refused too, never sent.
 */
export function repoCredentialRefusal(secret: CredentialSecret, url: string): string | undefined {
  const named = `Secret "${secret.name}" (spec.secretRef.name)`;
  if (secret.labels?.[REPO_CREDENTIAL_LABEL] !== REPO_CREDENTIAL_LABEL_VALUE) {
    return (
      `${named} is not declared a repo credential, so it is not sent: label it ` +
      `${REPO_CREDENTIAL_LABEL}=${REPO_CREDENTIAL_LABEL_VALUE} (${LABEL_FIELD}) and list the url prefixes it may ` +
      `be sent to in ${HOSTS_FIELD} (e.g. "${EXAMPLE}"), or name another Secret`
    );
  }
  const { prefixes, errors } = credentialPrefixes(secret.annotations?.[REPO_CREDENTIAL_HOSTS_ANNOTATION]);
  if (errors.length) {
    return `${named}: ${HOSTS_FIELD} ${errors.join("; ")}: write each entry as a url prefix (e.g. "${EXAMPLE}")`;
  }
  if (!prefixes.length) {
    return (
      `${named} lists no url prefix in ${HOSTS_FIELD}, so it is sent nowhere: list the prefixes it may be ` +
      `sent to (e.g. "${EXAMPLE}")`
    );
  }
  let at: RepoUrlLocation;
  try {
    at = repoUrlLocation(url);
  } catch (err) {
    return `spec.url ${err instanceof Error ? err.message : String(err)}: ${named} is not sent`;
  }
  if (prefixes.some((p) => prefixCovers(p, at))) return undefined;
  const where = `${at.scheme}://${at.user ? `${at.user}@` : ""}${at.host}/${at.segments.join("/")}`;
  const listed = (secret.annotations?.[REPO_CREDENTIAL_HOSTS_ANNOTATION] ?? "").trim();
  return (
    `spec.url (${where}) is outside the url prefixes ${named} may be sent to (${HOSTS_FIELD}: "${listed}"), ` +
    "so it is not sent: add a prefix covering the url to that annotation, or name a Secret declared for it"
  );
}
