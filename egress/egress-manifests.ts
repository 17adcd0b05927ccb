// The egress point as deployed (docs/decisions/0051, 0076): two replicas by default in the companions'
// namespace, each with its own index from the watch and its own record (the Orchestrator merges the
// logs from every ready replica), rolled one new pod first and none unavailable, a
// PodDisruptionBudget and a spread across nodes; its Service (the proxy and the admin port), an
// ingress policy (the proxy from Sandbox pods only, the admin port from the Orchestrator's pods
// and the monitoring namespaces only), and RBAC read-only on pods and Sandboxes plus Events,
// as a ClusterRole bound in each opted-in namespace alone (decision 0047). It reads the
// Orchestrator's pod config ConfigMap for the base list, mounted where the Orchestrator mounts it.
// Pure: `npm run build` renders it into dist/jr2-egress.yaml (scripts/post-build.ts); the
// companions' Namespace is the Orchestrator's manifest's, applied before this one.
import { disruptionBudget, spreadAcrossNodes } from "../api/spread";
import { GROUP } from "../api/crd/sources/common";
import { EGRESS, EGRESS_ADMIN_PORT, EGRESS_DEFAULTS, EGRESS_ENV, EGRESS_PROXY_PORT } from "../api/egress-point";
import { sandboxNamespace, sandboxRoleBinding } from "../api/sandbox-namespaces";
import { namespacesPeer, orchestratorPeer, sandboxPodsPeer } from "../api/sandbox-policies";
import { APP_NAME_LABEL, COMPANION_NAMESPACE, ORCHESTRATOR_NAME, PART_OF_JR2 } from "../api/wire";

export type EgressDeployOptions = {
  image: string;
  namespace?: string;
  /** The namespaces that hold Sandboxes (api/sandbox-namespaces.ts sandboxNamespacesFrom): its role is bound there alone. */
  sandboxNamespaces: readonly string[];
  /** Replicas (default 2; decision 0076): each one's own index and record. */
  replicas?: number;
  /** The PodDisruptionBudget's minAvailable (default 1); `false`: none (a single replica's drain). */
  podDisruptionBudget?: { minAvailable: number } | false;
  /** Namespaces whose pods may scrape :9091 (/metrics; the logs are there too), e.g. a Prometheus's. Default none. */
  monitoringNamespaces?: readonly string[];
};

/** After SIGTERM the proxy accepts for the drain delay and lets tunnels finish up to the bound
 * (egress/main.ts, EGRESS_DEFAULTS); the kubelet's grace covers both and a margin. */
export const EGRESS_TERMINATION_GRACE_SECONDS =
  (EGRESS_DEFAULTS.drainDelayMs + EGRESS_DEFAULTS.drainBoundMs) / 1000 + 10;
/** The default replica count (the chart's egress.replicas). */
export const EGRESS_DEFAULT_REPLICAS = 2;

/** The Orchestrator's pod config (orchestrator/orchestrator-manifests.ts writes it, key pod.yaml),
 * mounted at the path the Orchestrator reads it from. */
export const POD_CONFIGMAP = `${ORCHESTRATOR_NAME}-pod`;
export const POD_CONFIG_DIR = "/etc/jr2/pod";
export const POD_CONFIG_FILE = `${POD_CONFIG_DIR}/pod.yaml`;
/** The policy over the egress point's pods. */
export const EGRESS_POLICY = `${EGRESS}-ingress`;

const labels = { [APP_NAME_LABEL]: EGRESS, ...PART_OF_JR2 };

export function egressManifests(opts: EgressDeployOptions): Array<Record<string, unknown>> {
  const namespace = opts.namespace ?? COMPANION_NAMESPACE;
  if (!opts.sandboxNamespaces.length)
    throw new Error("egressManifests: no Sandbox namespace: name at least one (JR2_SANDBOX_NAMESPACES)");
  if (opts.sandboxNamespaces.includes(namespace))
    throw new Error(
      `the Sandbox namespaces include the companions' namespace "${namespace}": the egress point's role would be ` +
        "bound beside the Orchestrator's secrets; hold Sandboxes elsewhere",
    );
  const replicas = opts.replicas ?? EGRESS_DEFAULT_REPLICAS;
  if (!Number.isInteger(replicas) || replicas < 1)
    throw new Error(`egressManifests: replicas ${replicas} is no count of pods: write 1 or more (default 2)`);
  const pdb = opts.podDisruptionBudget ?? { minAvailable: 1 };
  if (pdb && (!Number.isInteger(pdb.minAvailable) || pdb.minAvailable < 0 || pdb.minAvailable >= replicas))
    throw new Error(
      `egressManifests: podDisruptionBudget.minAvailable ${pdb.minAvailable} must be below replicas (${replicas}) ` +
        "or a node drain waits forever: lower it, raise replicas, or write podDisruptionBudget false",
    );
  const monitoring = opts.monitoringNamespaces ?? [];
  const selector = { matchLabels: { [APP_NAME_LABEL]: EGRESS } };
  const http = (path: string) => ({ httpGet: { path, port: "admin" } });
  return [
    // Each Sandbox namespace, opted in: applying adds the label to a namespace that exists.
    ...opts.sandboxNamespaces.map(sandboxNamespace),
    { apiVersion: "v1", kind: "ServiceAccount", metadata: { name: EGRESS, namespace, labels } },
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name: EGRESS, labels },
      rules: [
        // Which Sandbox a source address is (its pods), and each Sandbox's list (its spec).
        { apiGroups: [""], resources: ["pods"], verbs: ["get", "list", "watch"] },
        { apiGroups: [GROUP], resources: ["sandboxes"], verbs: ["get", "list", "watch"] },
        // The EgressRefused Event on a Sandbox.
        { apiGroups: [""], resources: ["events"], verbs: ["create", "patch"] },
      ],
    },
    ...opts.sandboxNamespaces.map((ns) => sandboxRoleBinding(ns, EGRESS, { name: EGRESS, namespace })),
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: EGRESS_POLICY, namespace, labels },
      spec: {
        podSelector: { matchLabels: { [APP_NAME_LABEL]: EGRESS } },
        policyTypes: ["Ingress"],
        ingress: [
          { from: [sandboxPodsPeer()], ports: [{ protocol: "TCP", port: EGRESS_PROXY_PORT }] },
          { from: [orchestratorPeer()], ports: [{ protocol: "TCP", port: EGRESS_ADMIN_PORT }] },
          // A scraper in a monitoring namespace (decision 0076); none named, no rule (an empty
          // `from` would admit everyone).
          ...(monitoring.length
            ? [{ from: [namespacesPeer(monitoring)], ports: [{ protocol: "TCP", port: EGRESS_ADMIN_PORT }] }]
            : []),
        ],
      },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: EGRESS, namespace, labels },
      spec: {
        selector: { [APP_NAME_LABEL]: EGRESS },
        ports: [
          { name: "proxy", port: EGRESS_PROXY_PORT, targetPort: "proxy" },
          { name: "admin", port: EGRESS_ADMIN_PORT, targetPort: "admin" },
        ],
      },
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: EGRESS, namespace, labels },
      spec: {
        replicas,
        // One new pod ready before an old one drains: never fewer serving than asked (decision 0076).
        strategy: { type: "RollingUpdate", rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
        selector,
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: EGRESS,
            terminationGracePeriodSeconds: EGRESS_TERMINATION_GRACE_SECONDS,
            topologySpreadConstraints: spreadAcrossNodes(selector),
            // Its lookups are of absolute names (`host.`, egress/proxy.ts), which no search domain
            // touches; ndots 1 keeps any other lookup of a dotted name from trying the cluster's
            // search domains first (decision 0068).
            dnsConfig: { options: [{ name: "ndots", value: "1" }] },
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 65532,
              runAsGroup: 65532,
              seccompProfile: { type: "RuntimeDefault" },
            },
            containers: [
              {
                name: "egress",
                image: opts.image,
                command: ["node", "/app/egress.js"],
                env: [
                  { name: EGRESS_ENV.sandboxNamespaces, value: opts.sandboxNamespaces.join(",") },
                  { name: EGRESS_ENV.podConfigFile, value: POD_CONFIG_FILE },
                ],
                ports: [
                  { name: "proxy", containerPort: EGRESS_PROXY_PORT },
                  { name: "admin", containerPort: EGRESS_ADMIN_PORT },
                ],
                // Fails at SIGTERM while the proxy still accepts for the drain delay (egress/main.ts).
                readinessProbe: { ...http("/readyz"), periodSeconds: 2, failureThreshold: 1 },
                livenessProbe: { ...http("/healthz"), periodSeconds: 10, failureThreshold: 3 },
                resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "512Mi" } },
                securityContext: {
                  allowPrivilegeEscalation: false,
                  readOnlyRootFilesystem: true,
                  capabilities: { drop: ["ALL"] },
                },
                volumeMounts: [{ name: "pod", mountPath: POD_CONFIG_DIR, readOnly: true }],
              },
            ],
            // Optional: with no pod config the base list is empty, as the Orchestrator's defaults are.
            volumes: [{ name: "pod", configMap: { name: POD_CONFIGMAP, optional: true } }],
          },
        },
      },
    },
    ...(pdb ? [disruptionBudget({ name: EGRESS, namespace, labels }, selector, pdb.minAvailable)] : []),
  ];
}
