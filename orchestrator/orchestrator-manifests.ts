// The Orchestrator as deployed: one replica (one watch, one registry of actors: two would renew and
// attach twice), its Service, an ingress policy over its API, and RBAC scoped to the one namespace
// its Sandboxes live in (a ClusterRole of namespaced writes, bound there alone; decision 0047). Pure:
// `npm run build` renders it into dist/jr2-orchestrator.yaml; a test applies it to the control plane.
// The signing key and the API tokens come from a Secret the operator of the cluster creates
// (`jr2-orchestrator`, keys `signing-key` and `api-tokens`); the fence from a ConfigMap.
import { GROUP } from "../api/crd/sources/common";
import { ORCHESTRATOR_ENV } from "../api/env";
import { sandboxNamespace, sandboxRoleBinding } from "../api/sandbox-namespaces";
import { namespacesPeer, sandboxPodsPeer } from "../api/sandbox-policies";
import { ORCHESTRATOR_METRICS_PORT } from "./orchestrator-metrics";
import {
  APP_NAME_LABEL,
  COMPANION_NAMESPACE,
  DEFAULT_SANDBOX_NAMESPACE,
  ORCHESTRATOR_NAME,
  ORCHESTRATOR_PORT,
  PART_OF_JR2,
} from "../api/wire";

export const ORCHESTRATOR = ORCHESTRATOR_NAME;
export { ORCHESTRATOR_PORT };

export type OrchestratorDeployOptions = {
  image: string;
  /** Where the Orchestrator runs. */
  namespace?: string;
  /** Where its Sandboxes live (its role is bound there alone; the namespace is opted in). Default
   * DEFAULT_SANDBOX_NAMESPACE: never its own, where its signing key and API tokens are. */
  workspaceNamespace?: string;
  /** Who may connect to its API, as NetworkPolicy peers, besides the Sandbox pods of opted-in
   * namespaces (their Custodians' /orchestrator route), which are always admitted. Default: the
   * pods of its own namespace. `[{ namespaceSelector: {} }]` admits every pod of the cluster. */
  apiClients?: Array<Record<string, unknown>>;
  /** A `kubernetes.io/tls` Secret in its namespace: mounted, and the API served over TLS with it
   * (its probes too). The Custodians then reach it at https://, so its certificate must name the
   * Service (`jr2-orchestrator.<namespace>.svc`) and chain to a root they trust. */
  tlsSecret?: string;
  /** Namespaces whose pods may scrape GET /metrics on the metrics port (9090, no token; decision
   * 0076), e.g. a Prometheus's. Default none: the port is served and no one is admitted. */
  monitoringNamespaces?: readonly string[];
};

/** The Role in its own namespace: the egress point's EndpointSlices, to read every replica's log (decision 0076). */
export const ORCHESTRATOR_PEERS_ROLE = `${ORCHESTRATOR}-egress-peers`;

/** The ClusterRole of the Orchestrator's writes where its Sandboxes live, bound there alone. */
export const ORCHESTRATOR_SANDBOXES_ROLE = `${ORCHESTRATOR}-sandboxes`;
/** The policy over the Orchestrator's API, in its own namespace. */
export const ORCHESTRATOR_API_POLICY = `${ORCHESTRATOR}-api`;

const labels = { [APP_NAME_LABEL]: ORCHESTRATOR, ...PART_OF_JR2 };
/** Where a `tlsSecret` is mounted. */
const TLS_DIR = "/etc/jr2/tls";

export function orchestratorManifests(opts: OrchestratorDeployOptions): Array<Record<string, unknown>> {
  const namespace = opts.namespace ?? COMPANION_NAMESPACE;
  const workspaces = opts.workspaceNamespace ?? DEFAULT_SANDBOX_NAMESPACE;
  const scheme = opts.tlsSecret ? "HTTPS" : "HTTP";
  if (workspaces === namespace)
    throw new Error(
      `orchestratorManifests: workspaceNamespace ${workspaces} is the Orchestrator's own namespace, where its ` +
        "signing key and API tokens live: name another (default " +
        DEFAULT_SANDBOX_NAMESPACE +
        ")",
    );
  return [
    {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: namespace, labels: { ...PART_OF_JR2 } },
    },
    sandboxNamespace(workspaces),
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: ORCHESTRATOR, namespace, labels } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: ORCHESTRATOR_SANDBOXES_ROLE, labels },
      rules: [
        // Its Sandboxes: written, watched (the one watch), renewed (a patch), deleted.
        { apiGroups: [GROUP], resources: ["sandboxes"], verbs: ["get", "list", "watch", "create", "patch", "delete"] },
        // A per-run Repo is created at its first use; an existing one is read, never rewritten.
        { apiGroups: [GROUP], resources: ["repos"], verbs: ["get", "create"] },
        // What each Sandbox owns (its token and Effector key Secrets, its Custodian ConfigMap, its
        // Effector Service), applied after the CR; and the installation's CA Secret and trust
        // ConfigMap, made sure of at boot (installation.ts). The NetworkPolicies are the operator's.
        { apiGroups: [""], resources: ["secrets", "configmaps", "services"], verbs: ["get", "create", "patch"] },
      ],
    },
    sandboxRoleBinding(workspaces, ORCHESTRATOR_SANDBOXES_ROLE, { name: ORCHESTRATOR, namespace }),
    // Where the egress point's replicas are: a workspace's log is merged from each (decision 0076).
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: ORCHESTRATOR_PEERS_ROLE, namespace, labels },
      rules: [{ apiGroups: ["discovery.k8s.io"], resources: ["endpointslices"], verbs: ["list"] }],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: ORCHESTRATOR_PEERS_ROLE, namespace, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: ORCHESTRATOR_PEERS_ROLE },
      subjects: [{ kind: "ServiceAccount", name: ORCHESTRATOR, namespace }],
    },
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: ORCHESTRATOR_API_POLICY, namespace, labels },
      spec: {
        podSelector: { matchLabels: { [APP_NAME_LABEL]: ORCHESTRATOR } },
        policyTypes: ["Ingress"],
        ingress: [
          {
            from: [sandboxPodsPeer(), ...(opts.apiClients ?? [{ podSelector: {} }])],
            ports: [{ protocol: "TCP", port: ORCHESTRATOR_PORT }],
          },
          // The metrics port, no token: the monitoring namespaces alone; none named, no rule.
          ...(opts.monitoringNamespaces?.length
            ? [
                {
                  from: [namespacesPeer(opts.monitoringNamespaces)],
                  ports: [{ protocol: "TCP", port: ORCHESTRATOR_METRICS_PORT }],
                },
              ]
            : []),
        ],
      },
    },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: `${ORCHESTRATOR}-fence`, namespace, labels },
      // The fence's entries: identity prefixes a per-run url must fall under. Empty refuses every url.
      data: { "git-credentials.yaml": "[]\n" },
    },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: `${ORCHESTRATOR}-pod`, namespace, labels },
      // What every Sandbox pod holds (orchestrator/workspaces/pod-config.ts): the Custodian's providers, held
      // secrets and tunnels. Empty: a Custodian that routes only to the Orchestrator.
      data: { "pod.yaml": "{}\n" },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: ORCHESTRATOR, namespace, labels },
      spec: {
        selector: { [APP_NAME_LABEL]: ORCHESTRATOR },
        ports: [
          { name: "http", port: ORCHESTRATOR_PORT, targetPort: "http" },
          { name: "metrics", port: ORCHESTRATOR_METRICS_PORT, targetPort: "metrics" },
        ],
      },
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: ORCHESTRATOR, namespace, labels },
      spec: {
        replicas: 1,
        // Never two at once: the old one stops before the new one lists and renews.
        strategy: { type: "Recreate" },
        selector: { matchLabels: { [APP_NAME_LABEL]: ORCHESTRATOR } },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: ORCHESTRATOR,
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 65532,
              runAsGroup: 65532,
              // The Secret's files are root's: group-readable to this gid, which a kubelet gives
              // them only through fsGroup (found when the Deployment first ran on a real node).
              fsGroup: 65532,
              seccompProfile: { type: "RuntimeDefault" },
            },
            containers: [
              {
                name: "orchestrator",
                image: opts.image,
                command: ["node", "/app/orchestrator.js"],
                ports: [
                  { name: "http", containerPort: ORCHESTRATOR_PORT },
                  { name: "metrics", containerPort: ORCHESTRATOR_METRICS_PORT },
                ],
                env: [
                  { name: "PORT", value: String(ORCHESTRATOR_PORT) },
                  { name: ORCHESTRATOR_ENV.metricsPort, value: String(ORCHESTRATOR_METRICS_PORT) },
                  { name: ORCHESTRATOR_ENV.namespace, value: workspaces },
                  { name: ORCHESTRATOR_ENV.signingKeyFile, value: "/etc/jr2/secret/signing-key" },
                  { name: ORCHESTRATOR_ENV.apiTokensFile, value: "/etc/jr2/secret/api-tokens" },
                  { name: ORCHESTRATOR_ENV.gitCredentialsFile, value: "/etc/jr2/fence/git-credentials.yaml" },
                  { name: ORCHESTRATOR_ENV.podConfigFile, value: "/etc/jr2/pod/pod.yaml" },
                  // The Custodian runs from the same companions image as this process, and so does the
                  // Effector unless the pod config names another image (decision 0070).
                  { name: ORCHESTRATOR_ENV.custodianImage, value: opts.image },
                  { name: ORCHESTRATOR_ENV.podNamespace, valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
                  ...(opts.tlsSecret
                    ? [
                        { name: ORCHESTRATOR_ENV.tlsCertFile, value: `${TLS_DIR}/tls.crt` },
                        { name: ORCHESTRATOR_ENV.tlsKeyFile, value: `${TLS_DIR}/tls.key` },
                      ]
                    : []),
                ],
                readinessProbe: { httpGet: { path: "/healthz", port: "http", scheme }, periodSeconds: 5 },
                livenessProbe: { httpGet: { path: "/healthz", port: "http", scheme }, periodSeconds: 20 },
                resources: { requests: { cpu: "100m", memory: "256Mi" }, limits: { memory: "1Gi" } },
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ["ALL"] },
                },
                volumeMounts: [
                  { name: "secret", mountPath: "/etc/jr2/secret", readOnly: true },
                  { name: "fence", mountPath: "/etc/jr2/fence", readOnly: true },
                  { name: "pod", mountPath: "/etc/jr2/pod", readOnly: true },
                  ...(opts.tlsSecret ? [{ name: "tls", mountPath: TLS_DIR, readOnly: true }] : []),
                ],
              },
            ],
            volumes: [
              { name: "secret", secret: { secretName: ORCHESTRATOR, defaultMode: 0o440 } },
              { name: "fence", configMap: { name: `${ORCHESTRATOR}-fence` } },
              { name: "pod", configMap: { name: `${ORCHESTRATOR}-pod` } },
              ...(opts.tlsSecret ? [{ name: "tls", secret: { secretName: opts.tlsSecret, defaultMode: 0o440 } }] : []),
            ],
          },
        },
      },
    },
  ];
}
