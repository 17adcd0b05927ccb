// What the whole installation's chart adds to the built objects so a team can run it (decision
// 0074): who writes the Sandbox defaults on the cluster at hand (.Capabilities), who may call the
// Orchestrator's API, the admission pods' PodDisruptionBudget and spread, the opt-in
// ServiceMonitors and PrometheusRule (the alerts docs/operations.md lists, as data), and the
// preflight `helm test` that proves the cluster enforces NetworkPolicy. Pure: scripts/helm-chart.ts
// places these objects through its value tokens.
import { APP_NAME_LABEL, COMPANION_NAMESPACE, PART_OF_JR2 } from "../api/wire";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;
/** scripts/helm-chart.ts's tokens: a scalar value, or a whole `key: value` line. */
export type Tokens = { scalar(expr: string): string; block(expr: string): string };

/** The API whose service decides the defaults' writer under `admission.defaults: auto`. */
export const MUTATING_ADMISSION_POLICY_API = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy";

/** `auto` as the cluster serves: the policy where MutatingAdmissionPolicy v1 is served (1.36 and
 * newer), else the module's webhook (1.34, 1.35; decision 0059); `policy`/`webhook` as written. */
export const defaultsHelper = () => `
{{/* Who writes the Sandbox defaults (decisions 0059, 0074). */}}
{{- define "jr2.admission.defaults" -}}
{{- $d := .Values.admission.defaults | default "auto" -}}
{{- if eq $d "auto" -}}
{{- if and (.Capabilities.APIVersions.Has "${MUTATING_ADMISSION_POLICY_API}") (semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version) }}policy{{ else }}webhook{{ end -}}
{{- else -}}
{{- $d -}}
{{- end -}}
{{- end -}}
`;

/** The orchestrator.callers value as NetworkPolicy peers of the API's rule (decision 0074): a
 * namespace's every pod, labelled pods of one namespace, an ingress controller's pods. */
export const callersHelper = () => `
{{/* Who may call the Orchestrator's API besides the built peers (decision 0074). */}}
{{- define "jr2.orchestrator.callers" -}}
{{- $c := .Values.orchestrator.callers | default dict -}}
{{- $peers := list -}}
{{- range ($c.namespaces | default list) -}}
{{- $peers = append $peers (dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .))) -}}
{{- end -}}
{{- range ($c.podSelectors | default list) -}}
{{- $peers = append $peers (dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .namespace)) "podSelector" (dict "matchLabels" .matchLabels)) -}}
{{- end -}}
{{- $in := $c.ingress | default dict -}}
{{- if or $in.namespaceSelector $in.podSelector -}}
{{- $peers = append $peers (dict "namespaceSelector" ($in.namespaceSelector | default dict) "podSelector" ($in.podSelector | default dict)) -}}
{{- end -}}
{{- toYaml $peers -}}
{{- end -}}

{{/* A metrics port (the Orchestrator's metrics, the egress point's admin), for the monitoring namespaces alone: none named, no rule (an empty from admits everyone). */}}
{{- define "jr2.monitoring.peers" -}}
{{- $ns := (.Values.monitoring | default dict).namespaces | default list -}}
{{- if $ns -}}
{{- $peers := list -}}
{{- range $ns -}}
{{- $peers = append $peers (dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .))) -}}
{{- end -}}
{{- toYaml (list (dict "from" $peers "ports" (list (dict "protocol" "TCP" "port" $.port)))) -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}
`;

/** The admission pods spread over nodes where there are several, placed anyway where there are not. */
export const ADMISSION_SPREAD = (matchLabels: Record<string, string>) => [
  {
    maxSkew: 1,
    topologyKey: "kubernetes.io/hostname",
    whenUnsatisfiable: "ScheduleAnyway",
    labelSelector: { matchLabels },
  },
];

/** The admission Deployment's budget: a drain keeps `minAvailable` answering the webhooks. */
export const admissionPdb = (deployment: Obj, t: Tokens) => ({
  apiVersion: "policy/v1",
  kind: "PodDisruptionBudget",
  metadata: { name: deployment.metadata.name, namespace: deployment.metadata.namespace },
  spec: {
    minAvailable: t.scalar(".Values.admission.podDisruptionBudget.minAvailable"),
    selector: { matchLabels: deployment.spec.selector.matchLabels },
  },
});

/** One alert: docs/operations.md's table row as a Prometheus rule. */
export type AlertRule = {
  alert: string;
  expr: string;
  for?: string;
  severity: "warning" | "critical";
  summary: string;
};

/** Metrics the alerts read that jr2 does not export: kube-state-metrics' Deployment status. */
export const EXTERNAL_METRICS = ["kube_deployment_status_replicas_ready"];

/** The alerts of docs/operations.md ("Metrics, and the alert to set"), its thresholds as written. */
export function alertRules(admission: string, watcher: string): AlertRule[] {
  const ready = (name: string) => `kube_deployment_status_replicas_ready{namespace="pepr-system",deployment="${name}"}`;
  return [
    // The module (Pepr's /metrics, its names prefixed pepr_).
    {
      alert: "Jr2ReconcileErrors",
      expr: 'rate(pepr_jr2_reconciles{result="error"}[10m]) > 0',
      for: "15m",
      severity: "warning",
      summary: "the watcher fails a reconcile again and again; its log names the Sandbox",
    },
    {
      alert: "Jr2ReconcileSlow",
      expr: 'pepr_jr2_reconcile_duration{quantile="0.99"} > 5000',
      for: "15m",
      severity: "warning",
      summary: "reconciles take over 5 s (p99): the API server is slow for the watcher",
    },
    {
      alert: "Jr2SandboxesPending",
      expr: 'sum(delta(pepr_jr2_sandboxes{phase="Pending"}[15m])) > 0 and on() sum(delta(pepr_jr2_sandboxes{phase="Ready"}[15m])) <= 0',
      for: "15m",
      severity: "warning",
      summary: "Pending Sandboxes grow while Ready ones do not: pods wait on nodes, a quota or caches",
    },
    {
      alert: "Jr2QueueBehind",
      expr: "pepr_jr2_queue_depth > 100",
      for: "10m",
      severity: "warning",
      summary: "the watcher is behind (CPU, or the write limit)",
    },
    {
      alert: "Jr2FinishLaneWaits",
      expr: 'rate(pepr_jr2_write_wait_ms_total{lane="finish"}[10m]) > 0',
      for: "10m",
      severity: "warning",
      summary: "finishing writes wait on the write limiter: raise JR2_WRITE_QPS/JR2_WRITE_BURST",
    },
    {
      alert: "Jr2FinishSlow",
      expr: 'pepr_jr2_finish_latency{quantile="0.99"} > 5000',
      for: "15m",
      severity: "warning",
      summary: "a finished Sandbox's status is written over 5 s after its pod event (p99)",
    },
    {
      alert: "Jr2AdmissionSlow",
      expr: 'pepr_jr2_admission_duration{quantile="0.99"} > 1000',
      for: "10m",
      severity: "warning",
      summary: "admission reviews take over 1 s (p99; the webhook's timeout is 10 s)",
    },
    {
      alert: "Jr2WebhookWrongPath",
      expr: "increase(pepr_alerts[10m]) > 0",
      severity: "warning",
      summary: "something calls the webhook on a wrong path",
    },
    {
      alert: "Jr2AdmissionDown",
      expr: `${ready(admission)} < 1`,
      for: "2m",
      severity: "critical",
      summary: "no admission pod is ready: every Sandbox create and update is refused",
    },
    {
      alert: "Jr2WatcherDown",
      expr: `${ready(watcher)} == 0`,
      for: "5m",
      severity: "critical",
      summary: "the watcher is not ready: no Sandbox is reconciled",
    },
    // The Orchestrator.
    {
      alert: "Jr2WorkspacesWaiting",
      expr: 'sum(jr2_orchestrator_workspaces{state=~"placing|provisioning"}) > 10',
      for: "30m",
      severity: "warning",
      summary: "creates wait to be placed or provisioned; their events name the wait",
    },
    {
      alert: "Jr2WorkspacesLostOrFailed",
      expr: 'increase(jr2_orchestrator_transitions_total{to=~"lost|failed"}[15m]) > 0',
      severity: "warning",
      summary: "workspaces were lost or failed: compare with your usual",
    },
    {
      alert: "Jr2RenewalsStopped",
      expr: 'rate(jr2_orchestrator_renewals_total[15m]) == 0 and on() sum(jr2_orchestrator_workspaces{state!="destroyed"}) > 0',
      severity: "critical",
      summary: "leases are not renewed while workspaces are live: the operator will reap them",
    },
    {
      alert: "Jr2RenewFailures",
      expr: "increase(jr2_orchestrator_renew_failures_total[15m]) > 0",
      for: "15m",
      severity: "warning",
      summary: "keepalive renewals fail (retried in 30 s)",
    },
    {
      alert: "Jr2HarnessMisbehaved",
      expr: "increase(jr2_orchestrator_harness_misbehaviour_total[1h]) > 0",
      severity: "warning",
      summary: "a Harness answer was refused: read the HarnessMisbehaved Events",
    },
    {
      alert: "Jr2ApiTokensRefused",
      expr: "jr2_orchestrator_api_tokens_file_refused == 1",
      for: "5m",
      severity: "critical",
      summary: "the API tokens file is refused and the last good tokens serve: fix the Secret",
    },
    {
      alert: "Jr2TlsFilesRefused",
      expr: "jr2_orchestrator_tls_files_refused == 1",
      for: "5m",
      severity: "critical",
      summary: "the API's TLS files are refused and the pair before is served: fix the Secret",
    },
    {
      alert: "Jr2EffectAnswerLost",
      expr: 'increase(jr2_orchestrator_effects_total{state="unknown"}[1h]) > 0',
      severity: "warning",
      summary: "an Effect's answer was lost: the Machine checks the remote",
    },
    {
      alert: "Jr2EventLoopLate",
      expr: 'jr2_orchestrator_event_loop_delay_seconds{quantile="0.99"} > 0.1',
      for: "10m",
      severity: "warning",
      summary: "the Orchestrator is short of CPU: every workspace waits",
    },
    // The egress point.
    {
      alert: "Jr2EgressInternal",
      expr: 'increase(jr2_egress_connections_total{reason="internal"}[10m]) > 0',
      severity: "critical",
      summary: "a Sandbox tried an internal address through the egress point",
    },
    {
      alert: "Jr2EgressNotASandbox",
      expr: 'increase(jr2_egress_connections_total{reason="not_a_sandbox"}[10m]) > 0',
      severity: "warning",
      summary: "something that is not a Sandbox pod uses the egress point",
    },
    {
      alert: "Jr2EgressUnreachable",
      expr: 'sum(rate(jr2_egress_connections_total{decision="unreachable"}[15m])) / sum(rate(jr2_egress_connections_total[15m])) > 0.5',
      for: "15m",
      severity: "warning",
      summary: "most allowed hosts are unreachable from the egress point (DNS, timeouts, connects)",
    },
    {
      alert: "Jr2EgressEventsLost",
      expr: "rate(jr2_egress_events_failed_total[15m]) > 0 or rate(jr2_egress_events_dropped_total[15m]) > 0",
      for: "15m",
      severity: "warning",
      summary: "EgressRefused Events are refused by the API server or dropped",
    },
    {
      alert: "Jr2EgressIndexBehind",
      expr: 'max(jr2_egress_sandboxes) < 0.5 * sum(pepr_jr2_sandboxes{phase!="Terminating"})',
      for: "10m",
      severity: "warning",
      summary: "the egress point's index holds far fewer Sandboxes than exist: its watches are behind",
    },
    {
      alert: "Jr2EgressWatchCorrections",
      expr: "rate(jr2_egress_watch_corrections_total[15m]) > 0",
      for: "15m",
      severity: "warning",
      summary: "the egress point's watches stall and changes wait for its relist",
    },
  ];
}

const SM_LABELS = ".Values.monitoring.serviceMonitor.labels";

/** The opt-in ServiceMonitors (jr2-system: the Orchestrator's metrics port, the egress point's admin
 * port; pepr-system: the admission and watcher pods' Pepr https :3000, verified against the admission
 * CA in its TLS Secret) and PrometheusRule, each with its guard. */
export function monitoringObjects(
  module: { admission: Obj; watcher: Obj; tlsSecret: string },
  t: Tokens,
): Array<{ o: Obj; guard: string }> {
  const labels = (extra: string) =>
    t.block(
      `(merge (dict) ${extra} (dict "app.kubernetes.io/part-of" "jr2" "app.kubernetes.io/instance" $.Release.Name))`,
    );
  const interval = t.scalar(".Values.monitoring.serviceMonitor.interval | quote");
  const sm = ".Values.monitoring.serviceMonitor.enabled";
  const peprService = (d: Obj) => `${d.metadata.name}.${d.metadata.namespace}.svc`;
  const pepr = (d: Obj) => ({
    apiVersion: "monitoring.coreos.com/v1",
    kind: "ServiceMonitor",
    metadata: { name: d.metadata.name, namespace: d.metadata.namespace, labels: labels(SM_LABELS) },
    spec: {
      selector: { matchLabels: { "pepr.dev/controller": d.spec.selector.matchLabels["pepr.dev/controller"] } },
      namespaceSelector: { matchNames: [d.metadata.namespace] },
      endpoints: [
        {
          targetPort: 3000,
          scheme: "https",
          path: "/metrics",
          interval,
          tlsConfig: {
            serverName: peprService(module.admission),
            ca: { secret: { name: module.tlsSecret, key: "ca.crt" } },
          },
        },
      ],
    },
  });
  return [
    {
      guard: sm,
      o: {
        apiVersion: "monitoring.coreos.com/v1",
        kind: "ServiceMonitor",
        metadata: { name: "jr2", namespace: COMPANION_NAMESPACE, labels: labels(SM_LABELS) },
        spec: {
          selector: {
            matchExpressions: [{ key: APP_NAME_LABEL, operator: "In", values: ["jr2-orchestrator", "jr2-egress"] }],
          },
          namespaceSelector: { matchNames: [COMPANION_NAMESPACE] },
          // A Service without the port is skipped for that endpoint: each one's own.
          endpoints: [
            { port: "metrics", path: "/metrics", interval },
            { port: "admin", path: "/metrics", interval },
          ],
        },
      },
    },
    { guard: sm, o: pepr(module.admission) },
    { guard: sm, o: pepr(module.watcher) },
    {
      guard: ".Values.monitoring.prometheusRule.enabled",
      o: {
        apiVersion: "monitoring.coreos.com/v1",
        kind: "PrometheusRule",
        metadata: {
          name: "jr2",
          namespace: COMPANION_NAMESPACE,
          labels: labels(".Values.monitoring.prometheusRule.labels"),
        },
        spec: {
          groups: [
            {
              name: "jr2",
              rules: alertRules(module.admission.metadata.name, module.watcher.metadata.name).map((r) => ({
                alert: r.alert,
                expr: r.expr,
                ...(r.for ? { for: r.for } : {}),
                labels: { severity: r.severity },
                annotations: { summary: r.summary },
              })),
            },
          ],
        },
      },
    },
  ];
}

/** The preflight's names and ports: a target with two ports, one its policy admits from the probe. */
export const PREFLIGHT = {
  probe: "jr2-preflight",
  target: "jr2-preflight-target",
  permittedPort: 8080,
  deniedPort: 8081,
};

/**
 * The probe's program (node, from the companions image): the permitted port must answer (else the
 * check proves nothing), and the denied one must not, tried for 15 s so a plugin that programs the
 * policy late is not taken for one that never does; then the permitted one again, so a target that
 * ended meanwhile is not taken for a policy. Its `verdict` is the decision, pure.
 */
export const PREFLIGHT_PROBE = `"use strict";
function verdict(permitted, denied, after) {
  if (permitted !== "connected" || (after !== undefined && after !== "connected"))
    return { ok: false, message: "jr2 preflight: its target did not answer on the port its NetworkPolicy permits (" + (permitted !== "connected" ? permitted : after + ", after the denied port was tried") + "): the check proves nothing; see kubectl describe pod -l ${APP_NAME_LABEL}=${PREFLIGHT.target} in the release's namespace" };
  if (denied.length > 0 && denied.every(function (d) { return d === "connected"; }))
    return { ok: false, message: "jr2 preflight: the network plugin does not enforce NetworkPolicy: the connection NetworkPolicy ${PREFLIGHT.target} denies was accepted " + denied.length + " times in a row. Every jr2 boundary rests on NetworkPolicy (who may call the Orchestrator, Sandbox pods reaching only the egress point and the Orchestrator, the egress point's admin port) and every one is gone on this cluster: install a network plugin that enforces NetworkPolicy (e.g. Calico or Cilium) before using jr2" };
  return { ok: true, message: "jr2 preflight: NetworkPolicy is enforced: the permitted port answered, the denied one did not (" + denied[denied.length - 1] + ")" };
}
function connect(host, port, ms) {
  return new Promise(function (resolve) {
    var s = require("node:net").connect({ host: host, port: port });
    var done = function (r) { s.destroy(); resolve(r); };
    s.setTimeout(ms, function () { done("timeout"); });
    s.on("connect", function () { done("connected"); });
    s.on("error", function (e) { done(e.code === "ECONNREFUSED" ? "refused" : "error " + e.code); });
  });
}
async function main(host) {
  var permitted = "timeout";
  for (var i = 0; i < 30 && permitted !== "connected"; i++) {
    permitted = await connect(host, ${PREFLIGHT.permittedPort}, 3000);
    if (permitted !== "connected") await new Promise(function (r) { setTimeout(r, 2000); });
  }
  var denied = [];
  if (permitted === "connected")
    for (var j = 0; j < 5; j++) {
      var d = await connect(host, ${PREFLIGHT.deniedPort}, 3000);
      denied.push(d);
      if (d !== "connected") break;
      await new Promise(function (r) { setTimeout(r, 3000); });
    }
  // The permitted port again: a target that ended meanwhile refuses the denied port too.
  var after = permitted === "connected" ? await connect(host, ${PREFLIGHT.permittedPort}, 3000) : undefined;
  var v = verdict(permitted, denied, after);
  (v.ok ? console.log : console.error)(v.message);
  process.exit(v.ok ? 0 : 1);
}
if (process.env.JR2_PREFLIGHT_TARGET) main(process.env.JR2_PREFLIGHT_TARGET);
`;

/** The target's program: both ports accept and answer. */
const PREFLIGHT_TARGET = `for (const p of [${PREFLIGHT.permittedPort}, ${PREFLIGHT.deniedPort}]) require("node:net").createServer((s) => { s.on("error", () => {}); s.end("jr2-preflight\\n"); }).listen(p);`;

/**
 * The preflight `helm test` (decision 0074): a target Deployment and Service, a NetworkPolicy that
 * admits only the probe and only on one port, and the probe Pod. Test hooks: made by `helm test`
 * alone, never by an install or a render of the plain manifest.
 */
export function preflightObjects(companionsImage: (expr?: string) => string, t: Tokens): Obj[] {
  // The target's objects go once the test passed; the probe stays for its log (`helm test --logs`)
  // until the next run replaces it.
  const hook = (weight: number) => ({
    "helm.sh/hook": "test",
    "helm.sh/hook-weight": String(weight),
    "helm.sh/hook-delete-policy": weight < 0 ? "before-hook-creation,hook-succeeded" : "before-hook-creation",
  });
  const podSecurity = {
    securityContext: {
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      seccompProfile: { type: "RuntimeDefault" },
    },
    nodeSelector: t.block(".Values.placement.nodeSelector"),
    tolerations: t.block(".Values.placement.tolerations"),
  };
  const container = (name: string, program: string, env: Obj[] = []) => ({
    name,
    image: companionsImage(),
    command: ["node", "-e", program],
    ...(env.length ? { env } : {}),
    resources: { requests: { cpu: "10m", memory: "32Mi" }, limits: { memory: "128Mi" } },
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
  });
  // In the release's namespace: `helm test --logs` reads the probe's log there.
  const ns = t.scalar(".Release.Namespace | quote");
  const targetLabels = { [APP_NAME_LABEL]: PREFLIGHT.target, ...PART_OF_JR2 };
  return [
    {
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: PREFLIGHT.target, namespace: ns, annotations: hook(-10) },
      spec: {
        podSelector: { matchLabels: { [APP_NAME_LABEL]: PREFLIGHT.target } },
        policyTypes: ["Ingress"],
        ingress: [
          {
            from: [{ podSelector: { matchLabels: { [APP_NAME_LABEL]: PREFLIGHT.probe } } }],
            ports: [{ protocol: "TCP", port: PREFLIGHT.permittedPort }],
          },
        ],
      },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: PREFLIGHT.target, namespace: ns, annotations: hook(-5) },
      spec: {
        selector: { [APP_NAME_LABEL]: PREFLIGHT.target },
        ports: [
          { name: "permitted", port: PREFLIGHT.permittedPort, targetPort: PREFLIGHT.permittedPort },
          { name: "denied", port: PREFLIGHT.deniedPort, targetPort: PREFLIGHT.deniedPort },
        ],
      },
    },
    {
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: PREFLIGHT.target, namespace: ns, labels: targetLabels, annotations: hook(-5) },
      spec: {
        replicas: 1,
        selector: { matchLabels: { [APP_NAME_LABEL]: PREFLIGHT.target } },
        template: {
          metadata: { labels: targetLabels },
          spec: {
            automountServiceAccountToken: false,
            ...podSecurity,
            containers: [
              {
                ...container("target", PREFLIGHT_TARGET),
                readinessProbe: { tcpSocket: { port: PREFLIGHT.permittedPort }, periodSeconds: 2 },
              },
            ],
          },
        },
      },
    },
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: PREFLIGHT.probe,
        namespace: ns,
        labels: { [APP_NAME_LABEL]: PREFLIGHT.probe, ...PART_OF_JR2 },
        annotations: hook(0),
      },
      spec: {
        restartPolicy: "Never",
        automountServiceAccountToken: false,
        ...podSecurity,
        containers: [
          container("probe", PREFLIGHT_PROBE, [
            {
              name: "JR2_PREFLIGHT_TARGET",
              value: t.scalar(`printf "${PREFLIGHT.target}.%s.svc" .Release.Namespace | quote`),
            },
          ]),
        ],
      },
    },
  ];
}
