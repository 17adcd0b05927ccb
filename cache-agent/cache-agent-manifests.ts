// The cache agent as deployed: a DaemonSet (one agent per node) with the hostPath cache root the
// Sandbox pods mount, and the RBAC it needs. Pure: `npm run build` renders it into
// dist/jr2-cache-agent.yaml (scripts/post-build.ts); a test applies it to the control plane.
//
// The agent runs as root with every capability dropped: the cache root, and each cache directory a
// pod's hostPath made before the agent cloned into it, are root-owned directories the kubelet
// creates (0755), and root's own files are the only ones it writes; no capability means no
// reading or writing anyone else's (decisions 0010, 0046).
//
// Its RBAC (decision 0046): cluster-wide, only what names no credential (Repos, their status,
// Sandboxes); Secrets `get` only in the Sandbox namespaces the installation lists, each labelled
// and bound here, and there only the Secrets that namespace's Repos name; no pod reads at all.
// Which namespaces' Repos it fetches is the same list, in its environment: no Namespace read
// (decision 0066). Never the local mode's switch (api/env.ts LOCAL_REPO_ROOTS_ENV).
import {
  COMPANION_NAMESPACE,
  DEFAULT_CACHE_ROOT,
  PART_OF_JR2,
  REPO_CREDENTIALS_ROLE,
  SANDBOX_NAMESPACE_ENABLED,
  SANDBOX_NAMESPACE_LABEL,
} from "../api/wire";
import { GROUP } from "../api/crd/sources/common";
import { CACHE_AGENT_ENV } from "../api/env";

export const CACHE_AGENT = "jr2-cache-agent";

export type CacheAgentDeployOptions = {
  image: string;
  namespace?: string;
  cacheRoot?: string;
  evictAfter?: string;
  /** The namespaces that hold Sandboxes (api/sandbox-namespaces.ts sandboxNamespacesFrom): each is labelled, and
   * the agent may read Secrets there and nowhere else, and fetches only their Repos (decision 0066). */
  sandboxNamespaces: readonly string[];
  /** Internal git hosts the installation vouches for (`host`, `host:port`, an IP literal): the
   * build's JR2_CACHE_VOUCHED_HOSTS, the chart's `cacheAgent.vouchedHosts` (decision 0066). */
  vouchedHosts?: readonly string[];
  /** What one namespace may cache on a node: a count of Repos and a byte quantity (e.g. 10Gi). */
  maxRepos?: number;
  maxBytes?: string;
};

const labels = { "app.kubernetes.io/name": CACHE_AGENT, ...PART_OF_JR2 };

export function cacheAgentManifests(opts: CacheAgentDeployOptions): Array<Record<string, unknown>> {
  const namespace = opts.namespace ?? COMPANION_NAMESPACE;
  const root = opts.cacheRoot ?? DEFAULT_CACHE_ROOT;
  if (opts.sandboxNamespaces.includes(namespace))
    throw new Error(
      `the Sandbox namespaces include the companions' namespace "${namespace}", whose Secrets (the Orchestrator's ` +
        "signing key and API tokens, the root CA) no Sandbox namespace role may reach: hold Sandboxes elsewhere",
    );
  return [
    {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: namespace, labels: { ...PART_OF_JR2 } },
    },
    // Each Sandbox namespace, opted in: applying adds the label to a namespace that exists.
    ...opts.sandboxNamespaces.map((ns) => ({
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: ns, labels: { [SANDBOX_NAMESPACE_LABEL]: SANDBOX_NAMESPACE_ENABLED } },
    })),
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: CACHE_AGENT, namespace, labels } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: CACHE_AGENT, labels },
      rules: [
        { apiGroups: [GROUP], resources: ["repos"], verbs: ["get", "list", "watch"] },
        // Its own node's entry of status.nodes, by merge patch.
        { apiGroups: [GROUP], resources: ["repos/status"], verbs: ["get", "patch"] },
        // Which caches pods on its node may mount: the Sandboxes placed (or not yet placed) there.
        { apiGroups: [GROUP], resources: ["sandboxes"], verbs: ["get", "list", "watch"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: CACHE_AGENT, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: CACHE_AGENT },
      subjects: [{ kind: "ServiceAccount", name: CACHE_AGENT, namespace }],
    },
    // In each Sandbox namespace, bound to the Role the operator keeps there: `get` on exactly the
    // Secrets that namespace's Repos name as their credential, by resourceNames, never jr2's own
    // (capabilities/repo/credentials-role.ts). The agent still sends one only where it declares
    // itself a credential for the url (api/repo-credential.ts).
    ...opts.sandboxNamespaces.map((ns) => ({
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: REPO_CREDENTIALS_ROLE, namespace: ns, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: REPO_CREDENTIALS_ROLE },
      subjects: [{ kind: "ServiceAccount", name: CACHE_AGENT, namespace }],
    })),
    {
      apiVersion: "apps/v1",
      kind: "DaemonSet",
      metadata: { name: CACHE_AGENT, namespace, labels },
      spec: {
        selector: { matchLabels: { "app.kubernetes.io/name": CACHE_AGENT } },
        updateStrategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: "10%" } },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: CACHE_AGENT,
            automountServiceAccountToken: true,
            priorityClassName: "system-node-critical",
            // Wherever a Sandbox may land, tainted nodes included.
            tolerations: [{ operator: "Exists" }],
            securityContext: { seccompProfile: { type: "RuntimeDefault" } },
            containers: [
              {
                name: "cache-agent",
                image: opts.image,
                command: ["node", "/app/cache-agent.js"],
                env: [
                  { name: CACHE_AGENT_ENV.nodeName, valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
                  { name: CACHE_AGENT_ENV.cacheRoot, value: root },
                  ...(opts.evictAfter ? [{ name: CACHE_AGENT_ENV.evictAfter, value: opts.evictAfter }] : []),
                  // Only these namespaces' Repos are fetched: the list the RoleBindings above are
                  // rendered from, so the agent needs no read of Namespaces (decision 0066).
                  { name: CACHE_AGENT_ENV.sandboxNamespaces, value: opts.sandboxNamespaces.join(",") },
                  { name: CACHE_AGENT_ENV.vouchedHosts, value: (opts.vouchedHosts ?? []).join(",") },
                  ...(opts.maxRepos ? [{ name: CACHE_AGENT_ENV.maxRepos, value: String(opts.maxRepos) }] : []),
                  ...(opts.maxBytes ? [{ name: CACHE_AGENT_ENV.maxBytes, value: opts.maxBytes }] : []),
                  { name: "HOME", value: "/tmp" },
                ],
                resources: { requests: { cpu: "50m", memory: "128Mi" }, limits: { memory: "1Gi" } },
                securityContext: {
                  runAsUser: 0,
                  runAsNonRoot: false,
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ["ALL"] },
                },
                volumeMounts: [
                  { name: "caches", mountPath: root },
                  // ssh keys live here for one fetch: memory, never the node's disk.
                  { name: "tmp", mountPath: "/tmp" },
                ],
              },
            ],
            volumes: [
              { name: "caches", hostPath: { path: root, type: "DirectoryOrCreate" } },
              { name: "tmp", emptyDir: { medium: "Memory", sizeLimit: "64Mi" } },
            ],
          },
        },
      },
    },
  ];
}
