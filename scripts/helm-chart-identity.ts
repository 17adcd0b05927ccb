// What of the installation's identity the chart says, and what it leaves to the cluster
// (decision 0075): no render holds a private key, a certificate, a signing key or Pepr's API path.
// The keeper (keeper/) makes them in the cluster, at install and upgrade as a Job and daily as
// a CronJob; or, with admission.certificate.source certManager, cert-manager makes the serving pair
// and its cainjector the webhooks' caBundle. The webhook configurations leave caBundle and
// service.path out: a field no template sets is kept by `helm upgrade` (three-way merge or
// server-side apply alike) and by Argo CD, where a field a template sets is reset by each one.
// Pure: scripts/helm-chart.ts places these in the chart.
import { PART_OF_JR2 } from "../api/wire";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;

/** How helm-chart.ts turns a field into template text (its Marks). */
export type FieldMarks = { scalar(expr: string): string; block(expr: string): string };

/** The keeper's name: its ServiceAccount, Roles, Job and CronJob. */
export const KEEPER = "jr2-keeper";
/** The Orchestrator's Secret the chart makes: the API tokens the values list, nothing else. */
export const ORCHESTRATOR_SECRET = "jr2-orchestrator";
/** The Secret the keeper makes once with the Orchestrator's signing key (unless existingSecret). */
export const SIGNING_KEY_SECRET = "jr2-orchestrator-signing-key";
/** The Orchestrator's namespace, and the module's. */
export const SYSTEM_NS = "jr2-system";
export const MODULE_NS = "pepr-system";
/** The pod-template annotation the keeper sets to the serving pair's hash (keeper/keeper.ts). */
export const SERVING_ANNOTATION = "jr2.dev/serving-certificate";

/** The Secrets to back up: losing the signing key ends every live workspace's bearer; losing the CA
 * is recovered by the keeper (a new CA, widened in), so it is listed for a quicker restore. */
export const backupSecrets = (uuid: string) => [
  { namespace: SYSTEM_NS, name: SIGNING_KEY_SECRET, what: "the Orchestrator's signing key (unless existingSecret)" },
  { namespace: MODULE_NS, name: `pepr-${uuid}-ca`, what: "the admission CA (certificate and key)" },
];

export const identityValues = () => ({
  certificate: { source: "cluster", certManager: { issuerRef: {} } },
});

export const identityValuesYaml = `  # The webhook's serving certificate: never in the chart (decision 0075).
  #   cluster: the jr2-keeper Job makes a CA (10 years) and a serving pair (1 year) at install, and
  #            its daily CronJob renews the pair 30 days before its end, the CA a year before its.
  #   certManager: a cert-manager Certificate writes the pair, cainjector the webhooks' caBundle.
  certificate:
    source: cluster
    certManager:
      # An Issuer or ClusterIssuer of yours ({name, kind, group}); empty: a self-signed CA chain.
      issuerRef: {}`;

export const identitySchema = () => ({
  type: "object",
  additionalProperties: false,
  properties: {
    source: { type: "string", enum: ["cluster", "certManager"] },
    certManager: {
      type: "object",
      additionalProperties: false,
      properties: {
        issuerRef: {
          type: "object",
          additionalProperties: false,
          properties: { name: { type: "string" }, kind: { type: "string" }, group: { type: "string" } },
        },
      },
    },
  },
});

/**
 * A webhook configuration of the module as the chart writes it: no caBundle and no service.path
 * (the keeper, or cert-manager's cainjector, writes them in the cluster), and cert-manager's
 * annotation when the values ask for it. Throws when the build's differs from what is expected.
 */
export function identityWebhook(o: Obj, apiPath: string, marks: FieldMarks): Obj {
  const d = structuredClone(o);
  if (d.metadata.annotations) throw new Error(`helm chart: ${o.kind} ${o.metadata.name} has annotations of its own`);
  d.metadata.annotations = marks.block(`(include "jr2.admission.webhookAnnotations" . | fromYaml)`);
  for (const w of d.webhooks) {
    const path: string = w.clientConfig.service?.path ?? "";
    const want = `/${o.kind === "MutatingWebhookConfiguration" ? "mutate" : "validate"}/${apiPath}`;
    if (path !== want)
      throw new Error(`helm chart: ${o.kind} ${o.metadata.name} webhook ${w.name} is on ${path}, not Pepr's ${want}`);
    delete w.clientConfig.caBundle;
    delete w.clientConfig.service.path;
  }
  return d;
}

/** The Orchestrator's Secret volume: the tokens from the chart's Secret, the key from the keeper's;
 * or both from the team's own Secret (orchestrator.existingSecret). */
export function identityVolume(vol: Obj, marks: FieldMarks): Obj {
  const from = (fallback: string, key: string) => ({
    secret: {
      name: marks.scalar(`.Values.orchestrator.existingSecret | default "${fallback}" | quote`),
      items: [{ key, path: key }],
    },
  });
  return {
    name: vol.name,
    projected: {
      defaultMode: vol.secret.defaultMode,
      sources: [from(ORCHESTRATOR_SECRET, "api-tokens"), from(SIGNING_KEY_SECRET, "signing-key")],
    },
  };
}

const labelsText = (indent: number, named = false) =>
  Object.entries({ ...PART_OF_JR2, ...(named ? { "app.kubernetes.io/name": KEEPER } : {}) })
    .map(([k, v]) => `${" ".repeat(indent)}${k}: ${v}`)
    .concat(`${" ".repeat(indent)}app.kubernetes.io/instance: {{ .Release.Name | quote }}`)
    .join("\n");

/** The chart's files for the identity, by path under the chart's directory. */
export function identityFiles(uuid: string): Map<string, string> {
  const module = `pepr-${uuid}`;
  const dnsNames = [`${module}.${MODULE_NS}.svc`, `${module}-watcher.${MODULE_NS}.svc`];
  const files = new Map<string, string>();
  files.set(
    "templates/_identity.tpl",
    `{{/*
The keeper's pod (decision 0075): one run of keeper/main.ts from the companions image, as the
install/upgrade Job and as the daily CronJob's.
*/}}
{{- define "jr2.keeper.run" -}}
{{- toJson (list .Chart.Version .Values.images .Values.placement .Values.admission .Values.orchestrator.existingSecret) | sha256sum | trunc 10 -}}
{{- end -}}
{{- define "jr2.keeper.pod" -}}
metadata:
  labels:
${labelsText(4, true)}
spec:
  serviceAccountName: ${KEEPER}
  restartPolicy: Never
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  {{- with .Values.placement.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.placement.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: keeper
      image: {{ .Values.images.companions | quote }}
      command: ["node", "/app/keeper.js"]
      env:
        - name: JR2_KEEPER_MODULE
          value: ${module}
        - name: JR2_KEEPER_NAMESPACE
          value: ${MODULE_NS}
        - name: JR2_KEEPER_CERTIFICATE
          value: {{ .Values.admission.certificate.source | quote }}
        - name: JR2_KEEPER_ORCHESTRATOR_NAMESPACE
          value: ${SYSTEM_NS}
        - name: JR2_KEEPER_SIGNING_SECRET
          value: {{ .Values.orchestrator.existingSecret | default "${SIGNING_KEY_SECRET}" | quote }}
        - name: JR2_KEEPER_EXISTING_SECRET
          value: {{ not (empty .Values.orchestrator.existingSecret) | quote }}
      resources:
        requests: {cpu: 50m, memory: 64Mi}
        limits: {memory: 256Mi}
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: ["ALL"]
{{- end -}}

{{/*
The webhook configurations' annotations: cert-manager's cainjector writes their caBundle from the
serving Certificate when admission.certificate.source is certManager; none otherwise.
*/}}
{{- define "jr2.admission.webhookAnnotations" -}}
{{- if not (has .Values.admission.certificate.source (list "cluster" "certManager")) -}}
{{- fail (printf "admission.certificate.source is %q: it must be cluster (the jr2-keeper Job makes the certificate) or certManager" .Values.admission.certificate.source) -}}
{{- end -}}
{{- if eq .Values.admission.certificate.source "certManager" -}}
cert-manager.io/inject-ca-from: ${MODULE_NS}/${module}
{{- end -}}
{{- end -}}
`,
  );

  const meta = (kind: string, name: string, ns?: string, annotations = "") =>
    `kind: ${kind}
metadata:
  name: ${name}
${ns ? `  namespace: ${ns}\n` : ""}  labels:
${labelsText(4)}${annotations}`;
  const secretNames = [`${module}-tls`, `${module}-ca`, `${module}-api-path`];
  files.set(
    "templates/keeper.yaml",
    `# The keeper (decision 0075) and what it may touch, each by name: the module's three identity
# Secrets and its two Deployments, the Orchestrator's signing-key Secret, the module's webhook
# configurations. Creating a Secret cannot be limited by name (RBAC knows no name at create).
apiVersion: v1
${meta("ServiceAccount", KEEPER, MODULE_NS)}
---
apiVersion: rbac.authorization.k8s.io/v1
${meta("Role", KEEPER, MODULE_NS)}
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    resourceNames: ${JSON.stringify(secretNames)}
    verbs: ["get", "patch"]
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["create"]
  - apiGroups: ["apps"]
    resources: ["deployments"]
    resourceNames: ${JSON.stringify([module, `${module}-watcher`])}
    verbs: ["get", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
${meta("RoleBinding", KEEPER, MODULE_NS)}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ${KEEPER}}
subjects: [{kind: ServiceAccount, name: ${KEEPER}, namespace: ${MODULE_NS}}]
---
apiVersion: rbac.authorization.k8s.io/v1
${meta("Role", KEEPER, SYSTEM_NS)}
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    resourceNames: [{{ .Values.orchestrator.existingSecret | default "${SIGNING_KEY_SECRET}" | quote }}]
    verbs: ["get"]
  {{- if not .Values.orchestrator.existingSecret }}
  - apiGroups: [""]
    resources: ["secrets"]
    verbs: ["create"]
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
${meta("RoleBinding", KEEPER, SYSTEM_NS)}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ${KEEPER}}
subjects: [{kind: ServiceAccount, name: ${KEEPER}, namespace: ${MODULE_NS}}]
---
apiVersion: rbac.authorization.k8s.io/v1
${meta("ClusterRole", KEEPER)}
rules:
  - apiGroups: ["admissionregistration.k8s.io"]
    resources: ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"]
    resourceNames: ["${module}"]
    verbs: ["get", "patch"]
---
apiVersion: rbac.authorization.k8s.io/v1
${meta("ClusterRoleBinding", KEEPER)}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ${KEEPER}}
subjects: [{kind: ServiceAccount, name: ${KEEPER}, namespace: ${MODULE_NS}}]
---
# At install and at each upgrade that changes what it keeps: a plain Job, not a hook, so it runs
# beside the objects it makes Secrets for and \`helm install --wait\` (or Argo CD's health) waits for
# the pods it lets start. A Job's pod is immutable: its name changes with the chart's version and the
# values it reads, so an upgrade that changes them makes a new one (decision 0075).
apiVersion: batch/v1
kind: Job
metadata:
  name: ${KEEPER}-{{ include "jr2.keeper.run" . }}
  namespace: ${MODULE_NS}
  labels:
${labelsText(4)}
spec:
  backoffLimit: 6
  activeDeadlineSeconds: 900
  template:
    {{- include "jr2.keeper.pod" . | nindent 4 }}
---
# Daily: renews the serving pair 30 days before its end and the CA a year before its.
apiVersion: batch/v1
${meta("CronJob", KEEPER, MODULE_NS)}
spec:
  schedule: "17 3 * * *"
  concurrencyPolicy: Forbid
  successfulJobsHistoryLimit: 1
  failedJobsHistoryLimit: 3
  jobTemplate:
    spec:
      backoffLimit: 3
      activeDeadlineSeconds: 1800
      template:
        {{- include "jr2.keeper.pod" . | nindent 8 }}
`,
  );

  files.set(
    "templates/admission-certificate.yaml",
    `{{- if eq .Values.admission.certificate.source "certManager" }}
# The serving pair from cert-manager (decision 0075): a Certificate writing ${module}-tls, issued by
# the values' issuerRef or, when empty, by a self-signed CA chain made here (its CA in ${module}-ca).
{{- $issuer := .Values.admission.certificate.certManager.issuerRef }}
{{- if not $issuer.name }}
apiVersion: cert-manager.io/v1
${meta("Issuer", "jr2-admission-selfsigned", MODULE_NS)}
spec:
  selfSigned: {}
---
apiVersion: cert-manager.io/v1
${meta("Certificate", `${module}-ca`, MODULE_NS)}
spec:
  isCA: true
  commonName: ${module} admission CA
  secretName: ${module}-ca
  duration: 87600h
  renewBefore: 8760h
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: jr2-admission-selfsigned, kind: Issuer, group: cert-manager.io}
---
apiVersion: cert-manager.io/v1
${meta("Issuer", "jr2-admission-ca", MODULE_NS)}
spec:
  ca:
    secretName: ${module}-ca
---
{{- end }}
apiVersion: cert-manager.io/v1
${meta("Certificate", module, MODULE_NS)}
spec:
  secretName: ${module}-tls
  commonName: ${dnsNames[0]}
  dnsNames: ${JSON.stringify(dnsNames)}
  duration: 8760h
  renewBefore: 720h
  privateKey: {algorithm: ECDSA, size: 256, rotationPolicy: Always}
  usages: ["server auth", "digital signature"]
  issuerRef:
    {{- if $issuer.name }}
    {{- toYaml $issuer | nindent 4 }}
    {{- else }}
    {name: jr2-admission-ca, kind: Issuer, group: cert-manager.io}
    {{- end }}
{{- end }}
`,
  );

  files.set(
    "templates/orchestrator-secret.yaml",
    `{{- if not .Values.orchestrator.existingSecret }}
# The API tokens the values list; the signing key is the keeper's (${SIGNING_KEY_SECRET}), made
# once in the cluster, never by a render (decision 0075).
apiVersion: v1
${meta("Secret", ORCHESTRATOR_SECRET, SYSTEM_NS)}
type: Opaque
data:
  api-tokens: {{ printf "%s\\n" (join "\\n" .Values.orchestrator.apiTokens) | b64enc | quote }}
{{- end }}
`,
  );
  return files;
}
