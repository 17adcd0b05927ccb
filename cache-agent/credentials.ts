// What a Repo's Secret means for a fetch (pure; decision 0046): whether it may be sent to the
// Repo's url at all (api/repo-credential.ts), what git credentials its data holds, and what a
// refused read of it means, said on the Repo's status for this node with the fix. Never a value.
import { repoCredentialRefusal } from "../api/repo-credential";
import { BUILD_ENV } from "../api/env";
import { SANDBOX_NAMESPACE_ENABLED, SANDBOX_NAMESPACE_LABEL } from "../api/wire";
import type { GitCreds } from "./bare-checkouts";

/** The Secret as the API answers it: metadata and base64 data. */
export type SecretObject = {
  metadata?: { name?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  data?: Record<string, string>;
};

/** A credential the agent will not use, or could not read: the fetch is not made, and this says why. */
export class CredentialRefused extends Error {}
/** The API refused the read (403): asked again on a backoff, since the grant may still come. */
export class SecretReadRefused extends CredentialRefused {}

/** Why the API refused the agent's read of `secret` in `namespace`, with the fix. */
export function secretReadFailure(status: number, secret: string, namespace: string): string | undefined {
  if (status === 403)
    return (
      `the cache agent may not read Secret "${secret}" (spec.secretRef.name) in namespace "${namespace}" ` +
      "(asked again shortly). Either the namespace has not opted in to holding Sandboxes: add it to the " +
      `installation's ${BUILD_ENV.sandboxNamespaces} and apply the rebuilt manifests (the namespace's ` +
      `${SANDBOX_NAMESPACE_LABEL}=${SANDBOX_NAMESPACE_ENABLED} label and the cache agent's RoleBinding in it), ` +
      "or keep the Repo in a namespace that has. Or the Secret is one of jr2's own (a Sandbox's token, " +
      "Effector key or Custodian CA, or the root CA), which the operator never grants: name a Secret of your own"
    );
  if (status === 404)
    return `Secret "${secret}" (spec.secretRef.name) does not exist in namespace "${namespace}": create it, or name another`;
  return undefined;
}

/**
 * The git credentials of a Secret that may be sent to `url`: `token` (or `password`) with an
 * optional `username`, or `ssh-privatekey` with an optional `known_hosts`. Throws
 * CredentialRefused when the Secret is not declared for the url, or holds neither.
 */
export function gitCredsOf(secret: SecretObject, name: string, url: string): GitCreds {
  const refused = repoCredentialRefusal(
    { name, labels: secret.metadata?.labels, annotations: secret.metadata?.annotations },
    url,
  );
  if (refused) throw new CredentialRefused(refused);
  const data = (k: string) => (secret.data?.[k] ? Buffer.from(secret.data[k], "base64").toString() : undefined);
  const token = data("token") ?? data("password");
  if (token) return { kind: "https-token", token, username: data("username") };
  const privateKey = data("ssh-privatekey");
  if (privateKey) return { kind: "ssh-key", privateKey, knownHosts: data("known_hosts") };
  throw new CredentialRefused(
    `Secret "${name}" (spec.secretRef.name) has neither "token" nor "ssh-privatekey": add one of them`,
  );
}
