// A Sandbox in the shape a jr2 Orchestrator writes it (jr2's `crFor`, decision 0001, with its seat, the
// Custodian, the User Container, the Sandbox Effector, the runtime image volume and the preflight
// init container), through the whole admission path: the name and spec rules admit it, the
// defaults and the pod builder harden it where the seeds say (every jr2 seat completed, the user
// seat untouched, every Repo mount read-only), and the pod guard accepts the pod built from it.
// The Custodian's own volumes are composed in a file the seeds do not carry; they are modelled
// here on the seeds' table of what each container mounts (its values, its TLS leaves, its config,
// and the trust ConfigMap jr2-ca mounted into the Harness).
import type { SandboxSpec } from "../../api/crd";
import type { Container, SecurityContext, VolumeMount } from "../../api/crd/generated/corev1";
import { DEFAULT_CACHE_ROOT } from "../../api/wire";
import { restrictedViolations } from "../../capabilities/rules/containers";
import { podViolations } from "../../capabilities/rules/pods";
import { sandboxNameViolations, sandboxViolations, withDefaults } from "../../capabilities/rules/sandbox-rules";
import { repoCachesContribution } from "../../capabilities/repo/caches";
import { buildPod } from "../../capabilities/sandbox/pod";

const OPERATOR = "system:serviceaccount:pepr-system:jr2-operator";
const NAME = "ws-189168eae0";

/** The seeds' HARDENED, which crFor states for every jr2 seat it composes (and the preflight). */
const HARDENED = {
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ["ALL"] },
  seccompProfile: { type: "RuntimeDefault" as const },
};
/** The fallback seat (an image that declares no USER): the one place jr2 names a uid. */
const SEAT = { ...HARDENED, runAsUser: 1000 };
/** The Custodian states its own context: non-root, read-only root filesystem, no capabilities. */
const CUSTODIAN_CONTEXT = { runAsNonRoot: true, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } };

const RUNTIME_MOUNT = { name: "runtime", mountPath: "/opt/jr2", subPath: "opt/jr2", readOnly: true };
const repoMount = (key: string) => ({ name: `repo-${key}`, mountPath: `/repos/${key}`, readOnly: true });
const KEYS = ["app", "lib"];

const custodian: Container = {
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
const user: Container = {
  name: "user",
  image: "ghcr.io/example/devbox:2",
  volumeMounts: [{ name: "work", mountPath: "/work" }, RUNTIME_MOUNT, ...KEYS.map(repoMount)],
  resources: { limits: { memory: "2Gi", cpu: "1" }, requests: { memory: "2Gi", cpu: "1" } },
};

/** The user seat as the defaults write it: the one field added (decision 0048). */
const USER_DEFAULTED = { ...user, securityContext: { capabilities: { drop: ["NET_RAW"] } } };

const effector: Container = {
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

const preflight: Container = {
  name: "preflight",
  image: "ghcr.io/example/sandbox:1",
  command: ["/bin/sh", "-c", "exec /opt/jr2/bin/preflight"],
  env: [{ name: "HOME", value: "/home/jr2" }],
  volumeMounts: [RUNTIME_MOUNT, { name: "home", mountPath: "/home/jr2" }],
  resources: { requests: { cpu: "100m", memory: "64Mi" }, limits: { cpu: "100m", memory: "64Mi" } },
  securityContext: SEAT,
};

/** The spec `crFor` composes, field by field in its order. */
const crForSpec = (): SandboxSpec => ({
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

type PodSpec = {
  containers: Container[];
  initContainers?: Container[];
  volumes: { name: string; hostPath?: { path: string; type?: string } }[];
};
const repoView = (key: string) => ({ name: key, key, nodes: { "node-a": { phase: "Present" as const } } });

function built(spec: SandboxSpec, cacheRoot = DEFAULT_CACHE_ROOT) {
  const pod = buildPod({ metadata: { name: NAME, namespace: "jr2", uid: "u-1" }, spec }, [
    repoCachesContribution(spec, repoView, "jr2", cacheRoot)!,
  ]);
  return { pod, spec: pod.spec as unknown as PodSpec };
}

const byName = (cs: Container[] | undefined, name: string) => (cs ?? []).find((c) => c.name === name)!;
const everyMount = (p: PodSpec): VolumeMount[] =>
  [...(p.initContainers ?? []), ...p.containers].flatMap((c) => c.volumeMounts ?? []);

describe("a Sandbox as jr2's crFor composes it", () => {
  it("is admitted: its name names a Service, its spec keeps every rule", () => {
    expect(sandboxNameViolations(NAME)).toEqual([]);
    expect(sandboxViolations(crForSpec())).toEqual([]);
  });

  describe("the defaults", () => {
    const d = withDefaults(crForSpec());

    it("complete the Custodian's stated context, keeping what it states", () => {
      expect(byName(d.sidecars, "custodian").securityContext).toEqual({
        ...CUSTODIAN_CONTEXT,
        allowPrivilegeEscalation: false,
        seccompProfile: { type: "RuntimeDefault" },
      });
    });

    it("leave the seats crFor states whole as they are (Harness, effector)", () => {
      expect(d.securityContext).toEqual(SEAT);
      expect(byName(d.sidecars, "effector")).toEqual(effector);
    });

    // Decision 0048: its entrypoint, mounts and resources untouched; it loses NET_RAW.
    it("leave the user seat (but for its NET_RAW drop) and the preflight untouched", () => {
      expect(byName(d.sidecars, "user")).toEqual(USER_DEFAULTED);
      expect(d.initContainers).toEqual([preflight]);
    });

    it("change nothing else, are admitted, and are idempotent", () => {
      const { securityContext: _a, sidecars: _b, ...rest } = d;
      const { securityContext: _c, sidecars: _d, ...given } = crForSpec();
      expect(rest).toEqual(given);
      expect(sandboxViolations(d)).toEqual([]);
      expect(withDefaults(d)).toStrictEqual(d);
    });

    it("make a user-seat Repo mount that says nothing read-only", () => {
      const s = crForSpec();
      const loose = { ...user, volumeMounts: [{ name: "repo-app", mountPath: "/repos/app" }] };
      s.sidecars = [custodian, loose, effector];
      expect(sandboxViolations(s)).toEqual([]);
      expect(byName(withDefaults(s).sidecars, "user").volumeMounts).toEqual([repoMount("app")]);
    });
  });

  describe.each([
    ["from the defaulted spec", () => withDefaults(crForSpec())],
    ["from the spec as written (a Sandbox that bypassed the mutation)", crForSpec],
  ])("the pod built %s", (_how, make) => {
    const { pod, spec } = built(make());

    it("gives every jr2 seat a complete restricted context", () => {
      for (const name of ["harness", "custodian", "effector"]) {
        const sc = byName(spec.containers, name).securityContext as SecurityContext;
        expect(sc).toBeDefined();
        expect(restrictedViolations(sc, name)).toEqual([]);
      }
      expect(byName(spec.containers, "custodian").securityContext?.readOnlyRootFilesystem).toBe(true);
      expect(byName(spec.containers, "harness").securityContext?.runAsUser).toBe(1000);
    });

    it("leaves the user seat as crFor wrote it but for its NET_RAW drop, under the pod's RuntimeDefault seccomp", () => {
      expect(byName(spec.containers, "user")).toEqual(USER_DEFAULTED);
      expect(pod.spec?.securityContext?.seccompProfile).toEqual({ type: "RuntimeDefault" });
    });

    it("mounts every Repo cache read-only, wherever it is mounted", () => {
      const repos = everyMount(spec).filter((m) => m.name.startsWith("repo-"));
      expect(repos.length).toBe(2 * KEYS.length + KEYS.length); // harness (operator), user, effector
      for (const m of repos) expect(m.readOnly).toBe(true);
    });

    it("holds exactly the operator's hostPaths, one Repo cache per key, in the Sandbox's namespace", () => {
      const hostPaths = spec.volumes.filter((v) => v.hostPath);
      expect(hostPaths.map((v) => [v.name, v.hostPath?.path])).toEqual(
        KEYS.map((k) => [`repo-${k}`, `${DEFAULT_CACHE_ROOT}/jr2/${k}`]),
      );
    });

    it("projects the push credential into the effector alone", () => {
      const mounts = (name: string) => (byName(spec.containers, name).volumeMounts ?? []).map((m) => m.name);
      expect(mounts("effector")).toContain("jr2-git-0");
      for (const name of ["harness", "custodian", "user"]) expect(mounts(name)).not.toContain("jr2-git-0");
      expect(byName(spec.initContainers, "preflight").volumeMounts?.map((m) => m.name)).not.toContain("jr2-git-0");
    });

    it("is accepted by the pod guard", () => {
      expect(podViolations(pod, OPERATOR, OPERATOR)).toEqual([]);
    });
  });

  it("is accepted by the pod guard at another cache root, and refused where the roots disagree", () => {
    const { pod } = built(withDefaults(crForSpec()), "/srv/jr2/repos");
    expect(podViolations(pod, OPERATOR, OPERATOR, { cacheRoot: "/srv/jr2/repos" })).toEqual([]);
    // After the spec's twelve volumes come jr2-shm and jr2-git-0, then one cache per Repo.
    expect(podViolations(pod, OPERATOR, OPERATOR).map((v) => v.path)).toEqual([
      "spec.volumes[14].hostPath",
      "spec.volumes[15].hostPath",
    ]);
  });
});
