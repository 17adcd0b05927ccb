// What the cache agents may read in a Sandbox namespace (decision 0046), pure: `get` on exactly the
// Secrets that the namespace's Repos name in spec.secretRef, by resourceNames, less jr2's own
// Secrets (the root CA, and each Sandbox's token, Effector key and Custodian intermediate), which no
// Repo may hand to every node. The cache agent still sends a Secret only where it declares itself
// a credential for the url (api/repo-credential.ts).
import { CUSTODIAN_CA_SECRET, custodianCaSecretName, effectorKeySecretName, tokenSecretName } from "../../api/wire";

/** The per-Sandbox Secrets jr2 writes, each from the Sandbox's name. */
const OWN_PER_SANDBOX = [tokenSecretName, effectorKeySecretName, custodianCaSecretName];

/** Whether `secret` is one of jr2's own Secrets in a namespace where `isSandbox` names the Sandboxes. */
export function isJr2Secret(secret: string, isSandbox: (name: string) => boolean): boolean {
  if (secret === CUSTODIAN_CA_SECRET) return true;
  return OWN_PER_SANDBOX.some((nameOf) => {
    // Each name is `<sandbox><suffix>`: the suffix is what the builder adds to an empty name.
    const suffix = nameOf("");
    return secret.endsWith(suffix) && isSandbox(secret.slice(0, -suffix.length));
  });
}

/** The Secret names the namespace's Role grants: each Repo's secretRef, once, sorted, never jr2's own. */
export function repoCredentialNames(
  secretRefs: Iterable<string | undefined>,
  isSandbox: (name: string) => boolean,
): string[] {
  const names = new Set<string>();
  for (const name of secretRefs) if (name && !isJr2Secret(name, isSandbox)) names.add(name);
  return [...names].sort();
}

/** The Role's rules for those names. None for none: an empty resourceNames would grant every Secret. */
export function repoCredentialRules(names: readonly string[]) {
  return names.length ? [{ apiGroups: [""], resources: ["secrets"], verbs: ["get"], resourceNames: [...names] }] : [];
}
