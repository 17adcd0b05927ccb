// The cache agent as deployed: a DaemonSet (one agent per node) with the hostPath cache root the
// Sandbox pods mount, and the RBAC it needs. Pure: `npm run build` renders it into
// dist/jr2-cache-agent.yaml (scripts/post-build.ts); a test applies it to the control plane.
//
// The agent runs as root with every capability dropped: the cache root is a root-owned hostPath
// the kubelet may create, and root's own files are the only ones it writes; no capability means
// no reading or writing anyone else's (decision 0010).
import { COMPANION_NAMESPACE, DEFAULT_CACHE_ROOT, PART_OF_JR2 } from "../api/wire";
import { GROUP } from "../api/crd/sources/common";
import { CACHE_AGENT_ENV } from "../api/env";

export const CACHE_AGENT = "jr2-cache-agent";

export type CacheAgentDeployOptions = {
  image: string;
  namespace?: string;
  cacheRoot?: string;
  evictAfter?: string;
};

const labels = { "app.kubernetes.io/name": CACHE_AGENT, ...PART_OF_JR2 };

export function cacheAgentManifests(opts: CacheAgentDeployOptions): Array<Record<string, unknown>> {
  const namespace = opts.namespace ?? COMPANION_NAMESPACE;
  const root = opts.cacheRoot ?? DEFAULT_CACHE_ROOT;
  return [
    {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: namespace, labels: { ...PART_OF_JR2 } },
    },
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: CACHE_AGENT, namespace, labels } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: CACHE_AGENT, labels },
      rules: [
        { apiGroups: [GROUP], resources: ["repos"], verbs: ["get", "list", "watch"] },
        // Its own node's entry of status.nodes, by merge patch.
        { apiGroups: [GROUP], resources: ["repos/status"], verbs: ["get", "patch"] },
        { apiGroups: [GROUP], resources: ["sandboxes"], verbs: ["get", "list", "watch"] },
        // A Repo's spec.secretRef, read per fetch, in the Repo's namespace (any).
        { apiGroups: [""], resources: ["secrets"], verbs: ["get"] },
        // Which pods on its node mount a cache, asked right before an eviction.
        { apiGroups: [""], resources: ["pods"], verbs: ["list"] },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name: CACHE_AGENT, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: CACHE_AGENT },
      subjects: [{ kind: "ServiceAccount", name: CACHE_AGENT, namespace }],
    },
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
