// The namespaces an installation opts in to hold Sandboxes (decision 0047): read once from the
// build's JR2_SANDBOX_NAMESPACES, and, for each, what every component's rendered manifests carry:
// the Namespace with the opt-in label and a RoleBinding of the component's namespaced ClusterRole.
// Pure; scripts/post-build.ts and each component's manifests builder call it.
import { BUILD_ENV } from "./env";
import { DEFAULT_SANDBOX_NAMESPACE, PART_OF_JR2, SANDBOX_NAMESPACE_ENABLED, SANDBOX_NAMESPACE_LABEL } from "./wire";

/** A namespace's name is a DNS label (RFC 1123). */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * The opted-in namespaces from `JR2_SANDBOX_NAMESPACES` (comma-separated; spaces around a name and
 * empty entries ignored; each once, in order). Unset or blank: DEFAULT_SANDBOX_NAMESPACE. Throws
 * naming the variable, the entry and the fix when an entry is no namespace name.
 */
export function sandboxNamespacesFrom(env: NodeJS.ProcessEnv): string[] {
  const raw = env[BUILD_ENV.sandboxNamespaces] ?? "";
  const names = raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  if (!names.length) return [DEFAULT_SANDBOX_NAMESPACE];
  for (const [i, name] of names.entries()) {
    if (name.length > 63 || !DNS_LABEL.test(name))
      throw new Error(
        `${BUILD_ENV.sandboxNamespaces}[${i}]: ${JSON.stringify(name.slice(0, 80))} is not a namespace name: ` +
          "write lower-case letters, digits and '-', at most 63, comma-separated (e.g. jr2-sandboxes,team-a)",
      );
  }
  return [...new Set(names)];
}

/** The Namespace of one opted-in namespace, carrying the opt-in label. Applying it to an existing
 * namespace adds the label and changes nothing else of it. */
export const sandboxNamespace = (name: string) => ({
  apiVersion: "v1",
  kind: "Namespace",
  metadata: { name, labels: { [SANDBOX_NAMESPACE_LABEL]: SANDBOX_NAMESPACE_ENABLED } },
});

/** A RoleBinding, in one opted-in namespace, of a component's ClusterRole of namespaced writes to
 * its service account: the ClusterRole grants nothing until bound, and is bound only here. */
export const sandboxRoleBinding = (
  namespace: string,
  clusterRole: string,
  serviceAccount: { name: string; namespace: string },
) => ({
  apiVersion: "rbac.authorization.k8s.io/v1",
  kind: "RoleBinding",
  metadata: { name: clusterRole, namespace, labels: { ...PART_OF_JR2 } },
  roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: clusterRole },
  subjects: [{ kind: "ServiceAccount", ...serviceAccount }],
});
