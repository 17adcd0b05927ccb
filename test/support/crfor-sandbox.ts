// A Sandbox in the exact shape a jr2 Orchestrator writes it (jr2's `crFor`, decision
// 0001): the Harness's seat, the Custodian, the User Container, the Sandbox Effector, the runtime
// image volume and the preflight init container. Held by the unit tests of the rules
// (test/unit/admission-crfor.test.ts) and by admission on each Kubernetes version the module
// supports (test/support/admission-suite.ts, decision 0059). The Custodian's own volumes are
// composed in a file the seeds do not carry; they are modelled on the seeds' table of what each
// container mounts (its values, its TLS leaves, its config, and the trust ConfigMap jr2-ca
// mounted into the Harness).
import type { SandboxSpec } from "../../api/crd";
import type { Container } from "../../api/crd/generated/corev1";

export const NAME = "ws-189168eae0";

/** The seeds' HARDENED, which crFor states for every jr2 seat it composes (and the preflight). */
export const HARDENED = {
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ["ALL"] },
  seccompProfile: { type: "RuntimeDefault" as const },
};
/** The fallback seat (an image that declares no USER): the one place jr2 names a uid. */
export const SEAT = { ...HARDENED, runAsUser: 1000 };
/** The Custodian states its own context: non-root, read-only root filesystem, no capabilities. */
export const CUSTODIAN_CONTEXT = { runAsNonRoot: true, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } };

export const RUNTIME_MOUNT = { name: "runtime", mountPath: "/opt/jr2", subPath: "opt/jr2", readOnly: true };
export const repoMount = (key: string) => ({ name: `repo-${key}`, mountPath: `/repos/${key}`, readOnly: true });
export const KEYS = ["app", "lib"];

export const custodian: Container = {
  name: "custodian",
  image: "docker.io/envoyproxy/envoy:v1.33.0",
  args: ["-c", "/etc/jr2/custodian/config/envoy.yaml"],
  readinessProbe: { httpGet: { path: "/ready", port: 9901 }, periodSeconds: 1 },
  resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { cpu: "100m", memory: "128Mi" } },
  volumeMounts: [
    { name: "custodian-values", mountPath: "/etc/jr2/custodian/values", readOnly: true },
    { name: "custodian-tls", mountPath: "/etc/jr2/custodian/tls", readOnly: true },
    { name: "custodian-config", mountPath: "/etc/jr2/custodian/config", readOnly: true },
  ],
  securityContext: CUSTODIAN_CONTEXT,
};

/** The User Container: the image's own entrypoint, the checkouts' three volumes, no context. */
export const user: Container = {
  name: "user",
  image: "ghcr.io/example/devbox:2",
  volumeMounts: [{ name: "work", mountPath: "/work" }, RUNTIME_MOUNT, ...KEYS.map(repoMount)],
  resources: { limits: { memory: "2Gi", cpu: "1" }, requests: { memory: "2Gi", cpu: "1" } },
};

/** The user seat as the defaults write it: the one field added (decision 0048). */
export const USER_DEFAULTED = { ...user, securityContext: { capabilities: { drop: ["NET_RAW"] } } };

export const effector: Container = {
  name: "effector",
  image: "ghcr.io/example/sandbox:1",
  command: ["/opt/jr2/bin/effector"],
  env: [
    { name: "JR2_EFFECTOR_PORT", value: "8082" },
    { name: "JR2_EFFECTOR_WORK", value: "/work" },
    { name: "JR2_EFFECTOR_GIT", value: "/run/jr2/secrets/@git" },
    { name: "HOME", value: "/run/jr2/scratch" },
    { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
    { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
    { name: "NODE_NAME", valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
  ],
  ports: [{ name: "effector", containerPort: 8082 }],
  readinessProbe: { httpGet: { path: "/healthz", port: 8082 }, periodSeconds: 1 },
  terminationMessagePolicy: "FallbackToLogsOnError",
  volumeMounts: [
    { name: "work", mountPath: "/work", readOnly: true },
    RUNTIME_MOUNT,
    ...KEYS.map(repoMount),
    { name: "effector-secrets", mountPath: "/run/jr2/secrets", readOnly: true },
    { name: "effector-own", mountPath: "/run/jr2/effector", readOnly: true },
    { name: "effector-scratch", mountPath: "/run/jr2/scratch" },
    { name: "effector-ca", mountPath: "/etc/jr2/effector-ca", readOnly: true },
  ],
  securityContext: SEAT,
};

export const preflight: Container = {
  name: "preflight",
  image: "ghcr.io/example/sandbox:1",
  command: ["/bin/sh", "-c", "exec /opt/jr2/bin/preflight"],
  env: [{ name: "HOME", value: "/home/jr2" }],
  volumeMounts: [RUNTIME_MOUNT, { name: "home", mountPath: "/home/jr2" }],
  resources: { requests: { cpu: "100m", memory: "64Mi" }, limits: { cpu: "100m", memory: "64Mi" } },
  securityContext: SEAT,
};

/** The spec `crFor` composes, field by field in its order. */
export const crForSpec = (): SandboxSpec => ({
  image: "ghcr.io/example/sandbox:1",
  command: ["/opt/jr2/bin/tini", "--", "/opt/jr2/bin/node", "/opt/jr2/src/main.ts"],
  securityContext: SEAT,
  idleTimeout: "30m",
  nodeSelector: { "jr2.dev/sandbox": "true" },
  tolerations: [{ key: "jr2.dev/sandbox", operator: "Exists", effect: "NoSchedule" }],
  priorityClassName: "jr2-sandbox",
  resources: { requests: { cpu: "1", memory: "2Gi" }, limits: { cpu: "1", memory: "2Gi" } },
  podResources: { requests: { cpu: "3", memory: "5Gi" }, limits: { cpu: "3", memory: "5Gi" } },
  shmSize: "512Mi",
  fsGroup: 2000,
  initContainers: [preflight],
  env: [
    { name: "HOME", value: "/home/jr2" },
    { name: "JR2_CUSTODIAN_URL", value: "http://127.0.0.1:10000" },
    { name: "ANTHROPIC_API_KEY", value: "jr2-stand-in-1" },
    { name: "JR2_CONVERSATIONS_DIR", value: "/conversations" },
    { name: "JR2_HARNESS_TOKEN_SHA256", value: "0".repeat(64) },
  ],
  sidecars: [custodian, user, effector],
  repos: KEYS.map((key) => ({ key, url: `https://github.com/acme/${key}.git` })),
  gitCredentials: [{ name: "jr2-git-push-3f2a1b" }],
  volumes: [
    { name: "work", emptyDir: {} },
    { name: "runtime", image: { reference: "ghcr.io/jr2/harness:0.5.1" } },
    { name: "conversations", emptyDir: {} },
    { name: "home", emptyDir: {} },
    {
      name: "custodian-values",
      projected: {
        defaultMode: 0o400,
        sources: [{ secret: { name: `${NAME}-token` } }, { secret: { name: `jr2-held-secrets-${NAME}` } }],
      },
    },
    { name: "custodian-tls", secret: { secretName: "jr2-held-tls" } },
    {
      name: "custodian-config",
      projected: {
        sources: [
          { configMap: { name: `${NAME}-custodian` } },
          { configMap: { name: "jr2-held", items: [{ key: "program.lua", path: "program.lua" }] } },
        ],
      },
    },
    // The trust bundles: a jr2- name the operator does not define, so the spec's own.
    { name: "jr2-ca", configMap: { name: "jr2-ca" } },
    {
      name: "effector-secrets",
      projected: { defaultMode: 0o400, sources: [{ secret: { name: `jr2-effector-${NAME}` } }] },
    },
    {
      name: "effector-own",
      projected: {
        defaultMode: 0o400,
        sources: [
          { secret: { name: `${NAME}-effector`, items: [{ key: "key", path: "key" }] } },
          { secret: { name: "jr2-effector-manifest", items: [{ key: "effector.json", path: "effector.json" }] } },
        ],
      },
    },
    { name: "effector-scratch", emptyDir: {} },
    { name: "effector-ca", configMap: { name: "jr2-ca" } },
  ],
  volumeMounts: [
    { name: "work", mountPath: "/work" },
    RUNTIME_MOUNT,
    { name: "conversations", mountPath: "/conversations" },
    { name: "home", mountPath: "/home/jr2" },
    { name: "jr2-ca", mountPath: "/etc/jr2/ca", readOnly: true },
  ],
});
