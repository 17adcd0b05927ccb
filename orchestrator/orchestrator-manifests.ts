// The Orchestrator as deployed: several replicas, each owning shards of the workspaces by Leases in
// its own namespace and forwarding a call for another's to it (decision 0079), rolled one at a time
// and spread over nodes; its Service, an ingress policy over its API, and RBAC scoped to the one
// namespace its Sandboxes live in (a ClusterRole of namespaced writes, bound there alone; decision
// 0047). Pure: `npm run build` renders it into dist/jr2-orchestrator.yaml; a test applies it to the
// control plane.
// The signing key and the API tokens come from a Secret the operator of the cluster creates
// (`jr2-orchestrator`, keys `signing-key` and `api-tokens`); the fence from a ConfigMap.
import { disruptionBudget, spreadAcrossNodes } from "../api/spread";
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
  /** How many replicas (default 2: no single point, decision 0079); 1 is the only one, owning every shard. */
  replicas?: number;
  /** The PodDisruptionBudget's minAvailable (default 1), made only with more than one replica;
   * `false`: none. */
  podDisruptionBudget?: { minAvailable: number } | false;
};

/** Several by default, so a rollout or a node's loss leaves one answering (decision 0079). */
export const ORCHESTRATOR_DEFAULT_REPLICAS = 2;
/** What a replica has to hand its shards over in on SIGTERM (stop them, give up their Leases). */
export const ORCHESTRATOR_TERMINATION_GRACE_SECONDS = 30;

/** The Role in its own namespace: the egress point's EndpointSlices, to read every replica's log (decision 0076). */
export const ORCHESTRATOR_PEERS_ROLE = `${ORCHESTRATOR}-egress-peers`;

/** The Role in its own namespace: the shard and member Leases the replicas coordinate by (decision 0079). */
export const ORCHESTRATOR_LEASES_ROLE = `${ORCHESTRATOR}-leases`;

/** The ClusterRole of the Orchestrator's writes where its Sandboxes live, bound there alone. */
export const ORCHESTRATOR_SANDBOXES_ROLE = `${ORCHESTRATOR}-sandboxes`;
/** The policy over the Orchestrator's API, in its own namespace. */
export const ORCHESTRATOR_API_POLICY = `${ORCHESTRATOR}-api`;

const labels = { [APP_NAME_LABEL]: ORCHESTRATOR, ...PART_OF_JR2 };
const selector = { matchLabels: { [APP_NAME_LABEL]: ORCHESTRATOR } };
/** The pod's address (downward API), read by no process: the kubelet expands it into the peer url. */
const POD_IP_ENV = "POD_IP";
/** Where a `tlsSecret` is mounted. */
const TLS_DIR = "/etc/jr2/tls";

export function orchestratorManifests(opts: OrchestratorDeployOptions): Array<Record<string, unknown>> {
  const namespace = opts.namespace ?? COMPANION_NAMESPACE;
  const workspaces = opts.workspaceNamespace ?? DEFAULT_SANDBOX_NAMESPACE;
  const scheme = opts.tlsSecret ? "HTTPS" : "HTTP";
  const replicas = opts.replicas ?? ORCHESTRATOR_DEFAULT_REPLICAS;
  if (!Number.isInteger(replicas) || replicas < 1)
    throw new Error(`orchestratorManifests: replicas ${replicas} is no count of pods: write 1 or more (default 2)`);
  // One replica: no budget (minAvailable 1 of 1 would block every drain).
  const pdb = replicas > 1 ? (opts.podDisruptionBudget ?? { minAvailable: 1 }) : false;
  if (pdb && (!Number.isInteger(pdb.minAvailable) || pdb.minAvailable < 0 || pdb.minAvailable >= replicas))
    throw new Error(
      `orchestratorManifests: podDisruptionBudget.minAvailable ${pdb.minAvailable} must be below replicas ` +
        `(${replicas}) or a node drain waits forever: lower it, raise replicas, or write podDisruptionBudget false`,
    );
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
    // The replicas' Leases, in its own namespace alone (decision 0079): a shard's holder renews it, a
    // member Lease names each replica's peer url, a replica going away deletes its own.
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "Role",
      metadata: { name: ORCHESTRATOR_LEASES_ROLE, namespace, labels },
      rules: [
        // Not narrowed by resourceNames: the API server cannot check a create's name against them, and
        // the member Leases are named by pod; so every Lease of this namespace, which holds jr2's alone.
        {
          apiGroups: ["coordination.k8s.io"],
          resources: ["leases"],
          verbs: ["get", "list", "watch", "create", "update", "patch", "delete"],
        },
      ],
    },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "RoleBinding",
      metadata: { name: ORCHESTRATOR_LEASES_ROLE, namespace, labels },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: ORCHESTRATOR_LEASES_ROLE },
      subjects: [{ kind: "ServiceAccount", name: ORCHESTRATOR, namespace }],
    },
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: ORCHESTRATOR_API_POLICY, namespace, labels },
      spec: {
        podSelector: selector,
        policyTypes: ["Ingress"],
        ingress: [
          {
            // Its own replicas too, whoever else is admitted: a call for a workspace another owns is
            // forwarded there (decision 0079).
            from: [sandboxPodsPeer(), { podSelector: selector }, ...(opts.apiClients ?? [{ podSelector: {} }])],
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
        replicas,
        // One new replica ready before an old one goes: never fewer answering than asked; the one going
        // hands its shards over as it ends (decision 0079).
        strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
        selector,
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: ORCHESTRATOR,
            terminationGracePeriodSeconds: ORCHESTRATOR_TERMINATION_GRACE_SECONDS,
            topologySpreadConstraints: spreadAcrossNodes(selector),
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
                  // One of several (decision 0079): its identity, its Leases in its own namespace, and
                  // where the others forward to; a $(VAR) expands only a variable defined above it.
                  { name: ORCHESTRATOR_ENV.podName, valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
                  { name: POD_IP_ENV, valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
                  { name: ORCHESTRATOR_ENV.shardLeasesNamespace, value: `$(${ORCHESTRATOR_ENV.podNamespace})` },
                  {
                    name: ORCHESTRATOR_ENV.peerUrl,
                    value: `${scheme.toLowerCase()}://$(${POD_IP_ENV}):${ORCHESTRATOR_PORT}`,
                  },
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
    // Keeps a replica answering through a drain (decision 0079).
    ...(pdb ? [disruptionBudget({ name: ORCHESTRATOR, namespace, labels }, selector, pdb.minAvailable)] : []),
  ];
}
