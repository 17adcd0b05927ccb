// The scripted model provider served in the cluster (docs/decisions/0039-in-cluster-by-default.md):
// a Deployment of the companions image running /app/scripted-model.js on the real node, its Service, the
// key it wants in its own namespace's Secret and its script in a ConfigMap. The Sandboxes' pods reach
// it through the egress point, as they reach any provider: its url is a provider of the pod config,
// so an exact host of the base list, the one kind of name that may resolve to an address inside the
// cluster (decision 0051). `npm start`'s in-cluster mode
// and the node tier's turn apply the same objects. Pure: the caller applies them.
import type { ScriptStep, WireName } from "./scripted-model";

export const SCRIPTED_MODEL = "scripted-model";
export const SCRIPTED_MODEL_PORT = 8000;
const LABELS = { "app.kubernetes.io/name": SCRIPTED_MODEL };
const RUN_AS = 65532;

export type Placement = { nodeSelector?: Record<string, string>; tolerations?: object[] };

/** The provider's base URL as a Custodian in the cluster reaches it (without /v1). */
export const scriptedModelUrl = (namespace: string) =>
  `http://${SCRIPTED_MODEL}.${namespace}.svc.cluster.local:${SCRIPTED_MODEL_PORT}`;

export function scriptedModelObjects(o: {
  /** Where the model runs. */
  namespace: string;
  /** The companions image (it carries /app/scripted-model.js). */
  image: string;
  /** The key it wants as a bearer token: the one the Custodians hold. */
  key: string;
  script: ScriptStep[];
  placement: Placement;
  /** The API it speaks (default openai-chat): a native provider's, to prove the Harness speaks it. */
  wire?: WireName;
}): object[] {
  const meta = (name: string, namespace = o.namespace) => ({ name, namespace, labels: { ...LABELS } });
  const port = SCRIPTED_MODEL_PORT;
  return [
    { apiVersion: "v1", kind: "Secret", metadata: meta(`${SCRIPTED_MODEL}-key`), stringData: { key: o.key } },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: meta(`${SCRIPTED_MODEL}-script`),
      data: { "script.json": JSON.stringify(o.script) },
    },
    {
      // A Deployment, not a bare pod: applied again with another image (npm start after a rebuild),
      // it replaces its pod.
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: meta(SCRIPTED_MODEL),
      spec: {
        replicas: 1,
        selector: { matchLabels: LABELS },
        strategy: { type: "Recreate" },
        template: {
          metadata: { labels: { ...LABELS } },
          spec: {
            ...o.placement,
            terminationGracePeriodSeconds: 1,
            automountServiceAccountToken: false,
            securityContext: {
              runAsNonRoot: true,
              runAsUser: RUN_AS,
              runAsGroup: RUN_AS,
              fsGroup: RUN_AS,
              seccompProfile: { type: "RuntimeDefault" },
            },
            containers: [
              {
                name: "model",
                image: o.image,
                command: ["node", "/app/scripted-model.js", "/etc/model/script/script.json"],
                args: ["--host", "0.0.0.0", "--port", String(port), "--key-file", "/etc/model/key/key"].concat(
                  "--per-conversation",
                  "--log",
                  ...(o.wire && o.wire !== "openai-chat" ? ["--wire", o.wire] : []),
                ),
                ports: [{ containerPort: port }],
                readinessProbe: { tcpSocket: { port }, periodSeconds: 1 },
                resources: { requests: { cpu: "10m", memory: "64Mi" }, limits: { memory: "128Mi" } },
                securityContext: {
                  readOnlyRootFilesystem: true,
                  allowPrivilegeEscalation: false,
                  capabilities: { drop: ["ALL"] },
                },
                volumeMounts: [
                  { name: "script", mountPath: "/etc/model/script", readOnly: true },
                  { name: "key", mountPath: "/etc/model/key", readOnly: true },
                ],
              },
            ],
            volumes: [
              { name: "script", configMap: { name: `${SCRIPTED_MODEL}-script` } },
              { name: "key", secret: { secretName: `${SCRIPTED_MODEL}-key`, defaultMode: 0o440 } },
            ],
          },
        },
      },
    },
    {
      apiVersion: "v1",
      kind: "Service",
      metadata: meta(SCRIPTED_MODEL),
      spec: { selector: LABELS, ports: [{ port, targetPort: port }] },
    },
  ];
}
