import {
  SAFE_SYSCTLS,
  connectRefusal,
  ephemeralViolations,
  isJr2Key,
  jr2MetadataChanged,
  jr2MetadataViolations,
  podUpdateViolations,
  podViolations,
  sandboxLabelChanged,
  sandboxLabelViolations,
} from "../../capabilities/rules/pods";
import { DEFAULT_CACHE_ROOT } from "../../api/wire";
import { repoCachesContribution } from "../../capabilities/repo/caches";
import { withDefaults } from "../../capabilities/rules/sandbox-rules";
import type { Violation } from "../../capabilities/rules/violations";
import type { SandboxSpec } from "../../api/crd";
import { buildPod } from "../../capabilities/sandbox/pod";

const OPERATOR = "system:serviceaccount:pepr-system:jr2-operator";
const paths = (vs: Violation[]) => vs.map((v) => v.path);

type Obj = Record<string, unknown>;

const fullSpec = (): SandboxSpec =>
  withDefaults({
    image: "harness:1",
    idleTimeout: "30m",
    env: [{ name: "MODE", value: "agent" }],
    volumes: [{ name: "work", emptyDir: {} }],
    volumeMounts: [{ name: "work", mountPath: "/work" }],
    initContainers: [{ name: "setup", image: "i:1", securityContext: { runAsUser: 0 } }],
    sidecars: [
      { name: "custodian", image: "c:1" },
      { name: "user", image: "u:1" },
      { name: "effector", image: "e:1" },
    ],
    gitCredentials: [{ name: "gh" }, { name: "gl" }],
  });

const built = (spec: SandboxSpec = fullSpec()) =>
  buildPod({ metadata: { name: "sb", namespace: "team-a", uid: "u-1" }, spec }) as unknown as {
    spec: Obj & { containers: Obj[]; initContainers?: Obj[]; volumes: Obj[] };
  };

/** A pod with the stated spec fields, as the API server would pass it. */
const pod = (spec: Obj) => ({ apiVersion: "v1", kind: "Pod", metadata: { name: "sb" }, spec });

describe("podViolations: who creates the pod", () => {
  it("refuses a pod whose creator is not the operator, at the Sandbox label", () => {
    const vs = podViolations(built(), "alice", OPERATOR);
    expect(paths(vs)).toEqual(["metadata.labels[sandbox.jr2.dev/name]"]);
    expect(vs[0].message).toContain("only the jr2 operator creates Sandbox pods");
    expect(vs[0].message).toContain('"alice"');
  });

  it("refuses a pod whose creator is unknown", () => {
    expect(paths(podViolations(built(), undefined, OPERATOR))).toEqual(["metadata.labels[sandbox.jr2.dev/name]"]);
  });

  it("refuses every pod when the operator's identity is unknown", () => {
    expect(paths(podViolations(built(), undefined, undefined))).toEqual(["metadata.labels[sandbox.jr2.dev/name]"]);
    expect(paths(podViolations(built(), "", ""))).toEqual(["metadata.labels[sandbox.jr2.dev/name]"]);
  });
});

describe("podViolations: the pod buildPod makes", () => {
  it("has no violations when built from a defaulted spec and created by the operator", () => {
    expect(podViolations(built(), OPERATOR, OPERATOR)).toEqual([]);
  });

  it("has no violations when built from a minimal defaulted spec", () => {
    expect(podViolations(built(withDefaults({ image: "h:1", idleTimeout: "30m" })), OPERATOR, OPERATOR)).toEqual([]);
  });

  it("has no violations even from a spec that was never defaulted (buildPod hardens it)", () => {
    const raw: SandboxSpec = { image: "h:1", idleTimeout: "30m", sidecars: [{ name: "custodian", image: "c:1" }] };
    expect(podViolations(built(raw), OPERATOR, OPERATOR)).toEqual([]);
  });
});

describe("podViolations: the rules a Sandbox pod keeps", () => {
  const ok = {
    runAsNonRoot: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    seccompProfile: { type: "RuntimeDefault" },
  };

  it("refuses a privileged container", () => {
    const vs = podViolations(
      pod({ containers: [{ name: "harness", securityContext: { ...ok, privileged: true } }] }),
      OPERATOR,
      OPERATOR,
    );
    expect(paths(vs)).toEqual(["spec.containers[0].securityContext.privileged"]);
  });

  it("refuses a privileged user container", () => {
    const vs = podViolations(
      pod({ containers: [{ name: "user", securityContext: { privileged: true } }] }),
      OPERATOR,
      OPERATOR,
    );
    expect(paths(vs)).toEqual(["spec.containers[0].securityContext.privileged"]);
  });

  it("lets the user container run as root and state no context", () => {
    expect(
      podViolations(
        pod({ containers: [{ name: "user", securityContext: { runAsUser: 0 } }, { name: "user" }] }),
        OPERATOR,
        OPERATOR,
      ),
    ).toEqual([]);
  });

  it("refuses a jr2-owned container without a securityContext", () => {
    expect(paths(podViolations(pod({ containers: [{ name: "custodian" }] }), OPERATOR, OPERATOR))).toEqual([
      "spec.containers[0].securityContext",
    ]);
  });

  it("refuses a privileged init container", () => {
    const vs = podViolations(
      pod({ containers: [], initContainers: [{ name: "i", securityContext: { privileged: true } }] }),
      OPERATOR,
      OPERATOR,
    );
    expect(paths(vs)).toEqual(["spec.initContainers[0].securityContext.privileged"]);
  });

  it("refuses a host port", () => {
    const vs = podViolations(
      pod({ containers: [{ name: "custodian", securityContext: ok, ports: [{ containerPort: 1, hostPort: 1 }] }] }),
      OPERATOR,
      OPERATOR,
    );
    expect(paths(vs)).toEqual(["spec.containers[0].ports[0].hostPort"]);
  });

  it("refuses a hostPath volume not named repo-*", () => {
    const vs = podViolations(
      pod({ containers: [], volumes: [{ name: "node", hostPath: { path: "/" } }] }),
      OPERATOR,
      OPERATOR,
    );
    expect(paths(vs)).toEqual(["spec.volumes[0].hostPath"]);
  });

  // Decision 0016: the repo- prefix alone no longer admits a hostPath; only the volume exactly as
  // capabilities/repo/caches.ts builds it does (<cache root>/<key>, DirectoryOrCreate).
  it("admits the operator's repo-<key> hostPath volume", () => {
    expect(
      podViolations(
        {
          ...pod({
            containers: [],
            volumes: [
              { name: "repo-app", hostPath: { path: "/var/lib/jr2/repos/team-a/app", type: "DirectoryOrCreate" } },
            ],
          }),
          metadata: { name: "sb", namespace: "team-a" },
        },
        OPERATOR,
        OPERATOR,
      ),
    ).toEqual([]);
  });

  it("refuses a non-effector container mounting a jr2-git-* volume", () => {
    const vs = podViolations(
      pod({
        containers: [
          { name: "effector", securityContext: ok, volumeMounts: [{ name: "jr2-git-0", mountPath: "/e" }] },
          { name: "custodian", securityContext: ok, volumeMounts: [{ name: "jr2-git-0", mountPath: "/c" }] },
        ],
      }),
      OPERATOR,
      OPERATOR,
    );
    expect(paths(vs)).toEqual(["spec.containers[1].volumeMounts[0]"]);
    expect(vs[0].message).toContain('"effector"');
  });

  it("refuses a non-effector init container mounting a jr2-git-* volume", () => {
    const vs = podViolations(
      pod({
        containers: [],
        initContainers: [{ name: "setup", volumeMounts: [{ name: "jr2-git-0", mountPath: "/i" }] }],
      }),
      OPERATOR,
      OPERATOR,
    );
    expect(paths(vs)).toContain("spec.initContainers[0].volumeMounts[0]");
  });

  it("reads a pod that is not an object without throwing", () => {
    expect(paths(podViolations(null, OPERATOR, OPERATOR))).toEqual([]);
    expect(paths(podViolations({ spec: { containers: "x", volumes: 3 } }, OPERATOR, OPERATOR))).toEqual([]);
  });
});

describe("ephemeralViolations", () => {
  const base = () => built().spec;
  const withEphemeral = (ephemeralContainers: Obj[]) => ({ spec: { ...base(), ephemeralContainers } });
  /** kubectl debug --profile=restricted's context; the pod's seccomp profile (RuntimeDefault) applies. */
  const RESTRICTED = { runAsNonRoot: true, allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } };
  const dbg = (extra: Obj = {}) => ({ name: "dbg", image: "busybox", securityContext: RESTRICTED, ...extra });

  it("admits a debug container in the Harness's context targeting the harness", () => {
    expect(ephemeralViolations(withEphemeral([dbg({ targetContainerName: "harness" })]), { spec: base() })).toEqual([]);
  });

  // Decision 0067: baseline let an ephemeral container keep NET_RAW beside the credential holders.
  it("refuses one held to the baseline only: no context, or NET_RAW kept or added", () => {
    const none = ephemeralViolations(withEphemeral([{ name: "dbg", image: "busybox" }]), { spec: base() });
    expect(paths(none)).toEqual([
      "spec.ephemeralContainers[0].securityContext.runAsNonRoot",
      "spec.ephemeralContainers[0].securityContext.allowPrivilegeEscalation",
      "spec.ephemeralContainers[0].securityContext.capabilities.drop",
    ]);
    expect(none[0].message).toContain("held to the Harness's context (kubectl debug --profile=restricted)");
    const netRaw = ephemeralViolations(
      withEphemeral([dbg({ securityContext: { ...RESTRICTED, capabilities: { drop: ["ALL"], add: ["NET_RAW"] } } })]),
      { spec: base() },
    );
    expect(paths(netRaw)).toEqual(["spec.ephemeralContainers[0].securityContext.capabilities.add"]);
    const kept = ephemeralViolations(
      withEphemeral([dbg({ securityContext: { ...RESTRICTED, capabilities: { drop: ["NET_ADMIN"] } } })]),
      { spec: base() },
    );
    expect(paths(kept)).toEqual(["spec.ephemeralContainers[0].securityContext.capabilities.drop"]);
  });

  it("refuses root, privilege escalation and an unconfined seccomp profile", () => {
    const vs = ephemeralViolations(
      withEphemeral([
        dbg({
          securityContext: {
            ...RESTRICTED,
            runAsUser: 0,
            allowPrivilegeEscalation: true,
            seccompProfile: { type: "Unconfined" },
          },
        }),
      ]),
      { spec: base() },
    );
    expect(paths(vs)).toEqual([
      "spec.ephemeralContainers[0].securityContext.runAsUser",
      "spec.ephemeralContainers[0].securityContext.allowPrivilegeEscalation",
      "spec.ephemeralContainers[0].securityContext.seccompProfile.type",
    ]);
  });

  it("takes the pod's seccomp profile, as the kubelet does, and wants one where the pod has none", () => {
    const bare = { containers: [{ name: "harness" }], ephemeralContainers: [dbg()] };
    expect(paths(ephemeralViolations({ spec: bare }, { spec: { containers: [] } }))).toEqual([
      "spec.ephemeralContainers[0].securityContext.seccompProfile.type",
    ]);
    const podLevel = { ...bare, securityContext: { seccompProfile: { type: "RuntimeDefault" } } };
    expect(ephemeralViolations({ spec: podLevel }, { spec: { containers: [] } })).toEqual([]);
  });

  it("wants a read-only root where the Harness's is read-only", () => {
    const spec = base();
    const harness = spec.containers.find((c) => c.name === "harness")!;
    harness.securityContext = { ...(harness.securityContext as Obj), readOnlyRootFilesystem: true };
    const p = (sc: Obj) => ({ spec: { ...spec, ephemeralContainers: [dbg({ securityContext: sc })] } });
    expect(paths(ephemeralViolations(p(RESTRICTED), { spec }))).toEqual([
      "spec.ephemeralContainers[0].securityContext.readOnlyRootFilesystem",
    ]);
    expect(ephemeralViolations(p({ ...RESTRICTED, readOnlyRootFilesystem: true }), { spec })).toEqual([]);
    // Where the Harness's root is writable, so may the debug container's be.
    expect(ephemeralViolations(withEphemeral([dbg()]), { spec: base() })).toEqual([]);
  });

  it("refuses a debug container that reads a Secret into its environment", () => {
    const vs = ephemeralViolations(
      withEphemeral([
        dbg({
          env: [{ name: "T", valueFrom: { secretKeyRef: { name: "push-token", key: "token" } } }],
          envFrom: [{ secretRef: { name: "push-token" } }],
        }),
      ]),
      { spec: base() },
    );
    expect(vs.map((v) => v.path)).toEqual([
      "spec.ephemeralContainers[0].env[0].valueFrom.secretKeyRef",
      "spec.ephemeralContainers[0].envFrom[0].secretRef",
    ]);
  });

  it.each(["custodian", "effector"])("refuses a new ephemeral container targeting %s", (target) => {
    const vs = ephemeralViolations(withEphemeral([dbg({ targetContainerName: target })]), {
      spec: base(),
    });
    expect(paths(vs)).toEqual(["spec.ephemeralContainers[0].targetContainerName"]);
  });

  it("refuses mounting the projected git credential volume", () => {
    const vs = ephemeralViolations(withEphemeral([dbg({ volumeMounts: [{ name: "jr2-git-1", mountPath: "/x" }] })]), {
      spec: base(),
    });
    expect(paths(vs)).toEqual(["spec.ephemeralContainers[0].volumeMounts[0]"]);
    expect(vs[0].message).toContain("a Secret volume");
  });

  it("refuses mounting a plain secret volume", () => {
    const p = {
      spec: {
        containers: [],
        securityContext: { seccompProfile: { type: "RuntimeDefault" } },
        volumes: [{ name: "s", secret: { secretName: "x" } }],
        ephemeralContainers: [dbg({ volumeMounts: [{ name: "s", mountPath: "/s" }] })],
      },
    };
    expect(paths(ephemeralViolations(p, { spec: { containers: [] } }))).toEqual([
      "spec.ephemeralContainers[0].volumeMounts[0]",
    ]);
  });

  // Decision 0067: the Effector's scratch is an emptyDir, no Secret, and was open to kubectl debug.
  it.each(["effector", "custodian"])(
    "refuses mounting an emptyDir only the %s mounts, and admits one the Harness shares",
    (holder) => {
      const spec = base();
      spec.volumes = [...spec.volumes, { name: "scratch", emptyDir: {} }];
      spec.containers = spec.containers.map((c) =>
        c.name === holder
          ? {
              ...c,
              volumeMounts: [
                ...((c.volumeMounts as Obj[]) ?? []),
                { name: "scratch", mountPath: "/run/jr2/scratch" },
                { name: "work", mountPath: "/work", readOnly: true },
              ],
            }
          : c,
      );
      const p = (name: string) => ({
        spec: { ...spec, ephemeralContainers: [dbg({ volumeMounts: [{ name, mountPath: "/x" }] })] },
      });
      const vs = ephemeralViolations(p("scratch"), { spec });
      expect(paths(vs)).toEqual(["spec.ephemeralContainers[0].volumeMounts[0]"]);
      expect(vs[0].message).toContain(`the "${holder}" container's volume`);
      // /work: the Harness mounts it too.
      expect(ephemeralViolations(p("work"), { spec })).toEqual([]);
    },
  );

  it("admits mounting a volume without a Secret that the Harness mounts", () => {
    const vs = ephemeralViolations(withEphemeral([dbg({ volumeMounts: [{ name: "work", mountPath: "/w" }] })]), {
      spec: base(),
    });
    expect(vs).toEqual([]);
  });

  it("refuses a privileged ephemeral container", () => {
    const vs = ephemeralViolations(withEphemeral([dbg({ securityContext: { ...RESTRICTED, privileged: true } })]), {
      spec: base(),
    });
    expect(paths(vs)).toEqual(["spec.ephemeralContainers[0].securityContext.privileged"]);
  });

  it("does not re-judge an ephemeral container already in the old pod", () => {
    const old = {
      name: "old",
      image: "busybox",
      targetContainerName: "effector",
      securityContext: { privileged: true },
    };
    const added = dbg({ name: "new", targetContainerName: "custodian" });
    const vs = ephemeralViolations(withEphemeral([old, added]), withEphemeral([old]));
    expect(paths(vs)).toEqual(["spec.ephemeralContainers[1].targetContainerName"]);
  });

  it("reads hostile input without throwing", () => {
    expect(ephemeralViolations(undefined, undefined)).toEqual([]);
    expect(paths(ephemeralViolations({ spec: { ephemeralContainers: [null, 3] } }, "x")).length).toBeGreaterThan(0);
    expect(paths(ephemeralViolations({ spec: { ephemeralContainers: [{ securityContext: 3 }] } }, "x"))).toEqual([
      "spec.ephemeralContainers[0].securityContext",
    ]);
  });
});

// Decision 0016: the pod guard judges the whole pod by the rules a Sandbox pod is built to; decision
// 0046: the one cache path is the pod's own namespace's.
describe("podViolations: the one hostPath is the Repo cache exactly as the operator builds it", () => {
  const ok = { path: "/var/lib/jr2/repos/team-a/app", type: "DirectoryOrCreate" };
  const withVolume = (volume: Obj, namespace: string | null = "team-a") => ({
    ...pod({ containers: [], volumes: [volume] }),
    metadata: { name: "sb", ...(namespace ? { namespace } : {}) },
  });

  it("accepts the cache of the pod's own namespace", () => {
    expect(podViolations(withVolume({ name: "repo-app", hostPath: ok }), OPERATOR, OPERATOR)).toEqual([]);
  });

  it.each([
    ["repo-root at /", { name: "repo-root", hostPath: { path: "/" } }],
    [
      "repo-root at / as the operator types it",
      { name: "repo-root", hostPath: { path: "/", type: "DirectoryOrCreate" } },
    ],
    [
      "repo-app at another key's path",
      { name: "repo-app", hostPath: { ...ok, path: "/var/lib/jr2/repos/team-a/lib" } },
    ],
    [
      "repo-app at another namespace's cache",
      { name: "repo-app", hostPath: { ...ok, path: "/var/lib/jr2/repos/team-b/app" } },
    ],
    [
      "repo-app at the old, shared path (no namespace)",
      { name: "repo-app", hostPath: { ...ok, path: "/var/lib/jr2/repos/app" } },
    ],
    [
      "repo-app at the namespace's directory",
      { name: "repo-app", hostPath: { ...ok, path: "/var/lib/jr2/repos/team-a" } },
    ],
    ["repo-app at the cache root itself", { name: "repo-app", hostPath: { ...ok, path: "/var/lib/jr2/repos" } }],
    ["repo-app of another type", { name: "repo-app", hostPath: { ...ok, type: "Socket" } }],
    ["repo-app of no type", { name: "repo-app", hostPath: { path: ok.path } }],
    [
      "repo-.. climbing out",
      { name: "repo-..", hostPath: { path: "/var/lib/jr2/repos/team-a/..", type: "DirectoryOrCreate" } },
    ],
    ["a volume not named repo-*", { name: "node", hostPath: ok }],
  ])("refuses %s", (_what, volume) => {
    const vs = podViolations(withVolume(volume), OPERATOR, OPERATOR);
    expect(paths(vs)).toEqual(["spec.volumes[0].hostPath"]);
  });

  it("refuses any cache path for a pod that names no namespace, and says where its caches are", () => {
    const vs = podViolations(withVolume({ name: "repo-app", hostPath: ok }, null), OPERATOR, OPERATOR);
    expect(paths(vs)).toEqual(["spec.volumes[0].hostPath"]);
    expect(podViolations(withVolume({ name: "node", hostPath: ok }), OPERATOR, OPERATOR)[0].message).toContain(
      "/var/lib/jr2/repos/team-a/<key>",
    );
  });

  it("reads the cache root from the rules (JR2_CACHE_ROOT)", () => {
    const volume = { name: "repo-app", hostPath: { path: "/srv/caches/team-a/app", type: "DirectoryOrCreate" } };
    expect(podViolations(withVolume(volume), OPERATOR, OPERATOR, { cacheRoot: "/srv/caches" })).toEqual([]);
    expect(paths(podViolations(withVolume(volume), OPERATOR, OPERATOR))).toEqual(["spec.volumes[0].hostPath"]);
  });

  it("accepts the pod buildPod makes with the Repo caches contribution, at any cache root", () => {
    const spec = withDefaults({ image: "h:1", idleTimeout: "30m", repos: [{ key: "app", url: "https://x/app.git" }] });
    const sbx = { metadata: { name: "sb", namespace: "team-a", uid: "u-1" }, spec };
    for (const cacheRoot of [DEFAULT_CACHE_ROOT, "/srv/caches"]) {
      const p = buildPod(sbx, [repoCachesContribution(spec, () => undefined, "team-a", cacheRoot)!]);
      expect(podViolations(p, OPERATOR, OPERATOR, { cacheRoot })).toEqual([]);
      // The same pod moved to another namespace reaches no cache: its paths name team-a's.
      const moved = { ...p, metadata: { ...p.metadata, namespace: "team-b" } };
      expect(paths(podViolations(moved, OPERATOR, OPERATOR, { cacheRoot }))).toEqual(["spec.volumes[1].hostPath"]);
    }
  });
});

describe("podViolations: the pod's own fields", () => {
  it.each([["hostNetwork"], ["hostPID"], ["hostIPC"]])("refuses %s", (ns) => {
    expect(paths(podViolations(pod({ containers: [], [ns]: true }), OPERATOR, OPERATOR))).toEqual([`spec.${ns}`]);
  });

  it("refuses a shared process namespace", () => {
    expect(paths(podViolations(pod({ containers: [], shareProcessNamespace: true }), OPERATOR, OPERATOR))).toEqual([
      "spec.shareProcessNamespace",
    ]);
  });

  it.each([
    [{ seccompProfile: { type: "Unconfined" } }, "spec.securityContext.seccompProfile.type"],
    [{ appArmorProfile: { type: "Unconfined" } }, "spec.securityContext.appArmorProfile.type"],
    [{ seLinuxOptions: { type: "spc_t" } }, "spec.securityContext.seLinuxOptions.type"],
    [{ windowsOptions: { hostProcess: true } }, "spec.securityContext.windowsOptions.hostProcess"],
    [{ runAsUser: 0 }, "spec.securityContext.runAsUser"],
    [{ sysctls: [{ name: "kernel.msgmax", value: "1" }] }, "spec.securityContext.sysctls[0].name"],
    [{ sysctls: [{ name: "net.core.somaxconn", value: "1" }] }, "spec.securityContext.sysctls[0].name"],
  ])("refuses a pod context stating %j", (securityContext, path) => {
    expect(paths(podViolations(pod({ containers: [], securityContext }), OPERATOR, OPERATOR))).toEqual([path]);
  });

  it("admits the safe sysctls and the builder's fsGroup", () => {
    const sysctls = [...SAFE_SYSCTLS].map((name) => ({ name, value: "1" }));
    expect(
      podViolations(pod({ containers: [], securityContext: { fsGroup: 2000, sysctls } }), OPERATOR, OPERATOR),
    ).toEqual([]);
  });

  it("refuses the legacy AppArmor annotation unconfined, admits runtime/default and localhost/*", () => {
    const annotated = (value: string) => ({
      ...pod({ containers: [] }),
      metadata: { name: "sb", annotations: { "container.apparmor.security.beta.kubernetes.io/harness": value } },
    });
    expect(paths(podViolations(annotated("unconfined"), OPERATOR, OPERATOR))).toEqual([
      "metadata.annotations[container.apparmor.security.beta.kubernetes.io/harness]",
    ]);
    expect(podViolations(annotated("runtime/default"), OPERATOR, OPERATOR)).toEqual([]);
    expect(podViolations(annotated("localhost/k8s-harness"), OPERATOR, OPERATOR)).toEqual([]);
  });
});

describe("podViolations: volume types and mounts", () => {
  it("refuses the service account token volume the API server adds when the token is mounted", () => {
    const kubeApiAccess = {
      name: "kube-api-access-x1y2z",
      projected: {
        sources: [
          { serviceAccountToken: { expirationSeconds: 3607, path: "token" } },
          { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
          { downwardAPI: { items: [{ path: "namespace", fieldRef: { fieldPath: "metadata.namespace" } }] } },
        ],
      },
    };
    expect(paths(podViolations(pod({ containers: [], volumes: [kubeApiAccess] }), OPERATOR, OPERATOR))).toEqual([
      "spec.volumes[0].projected.sources[0].serviceAccountToken",
    ]);
  });

  it.each([
    ["nfs", { server: "x", path: "/" }],
    ["gitRepo", { repository: "r" }],
    ["iscsi", { iqn: "i" }],
  ])("refuses a %s volume", (type, source) => {
    expect(
      paths(podViolations(pod({ containers: [], volumes: [{ name: "v", [type]: source }] }), OPERATOR, OPERATOR)),
    ).toEqual([`spec.volumes[0].${type}`]);
  });

  const ok = {
    runAsNonRoot: true,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ["ALL"] },
    seccompProfile: { type: "RuntimeDefault" },
  };
  const repo = (over: Obj = {}) => ({ name: "repo-app", mountPath: "/repos/app", ...over });

  it.each([
    [
      "the harness",
      { containers: [{ name: "harness", securityContext: ok, volumeMounts: [repo()] }] },
      "spec.containers[0]",
    ],
    [
      "the user seat",
      { containers: [{ name: "user", volumeMounts: [repo({ readOnly: false })] }] },
      "spec.containers[0]",
    ],
    [
      "an init container",
      { containers: [], initContainers: [{ name: "i", volumeMounts: [repo()] }] },
      "spec.initContainers[0]",
    ],
  ])("refuses a read-write Repo mount in %s", (_who, spec, at) => {
    expect(paths(podViolations(pod(spec), OPERATOR, OPERATOR))).toEqual([`${at}.volumeMounts[0].readOnly`]);
  });

  it("admits read-only Repo mounts in any container", () => {
    const spec = {
      containers: [
        { name: "harness", securityContext: ok, volumeMounts: [repo({ readOnly: true })] },
        { name: "user", volumeMounts: [repo({ readOnly: true })] },
      ],
      initContainers: [{ name: "i", volumeMounts: [repo({ readOnly: true })] }],
    };
    expect(podViolations(pod(spec), OPERATOR, OPERATOR)).toEqual([]);
  });

  it("refuses an ephemeral container's read-write Repo mount", () => {
    const restricted = {
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    };
    const p = {
      spec: {
        containers: [],
        ephemeralContainers: [{ name: "dbg", securityContext: restricted, volumeMounts: [repo()] }],
      },
    };
    expect(paths(ephemeralViolations(p, { spec: { containers: [] } }))).toEqual([
      "spec.ephemeralContainers[0].volumeMounts[0].readOnly",
    ]);
  });

  it("lets a non-effector container mount a jr2-git-* volume the operator did not define", () => {
    const spec = {
      containers: [{ name: "custodian", securityContext: ok, volumeMounts: [{ name: "jr2-git-ca", mountPath: "/c" }] }],
    };
    expect(podViolations(pod(spec), OPERATOR, OPERATOR)).toEqual([]);
  });
});

// Decision 0016: relabelled, an ordinary pod would take a Sandbox's traffic from its Service.
describe("sandboxLabelViolations and podUpdateViolations", () => {
  const labelled = (name?: string, extra: Obj = {}) => ({
    metadata: { name: "p", labels: { app: "x", ...(name === undefined ? {} : { "sandbox.jr2.dev/name": name }) } },
    spec: { containers: [{ name: "c", image: "c:1" }], ...extra },
  });
  const LABEL = "metadata.labels[sandbox.jr2.dev/name]";

  it.each([
    ["adds it to an ordinary pod", labelled(), labelled("victim"), "adds it"],
    ["changes it", labelled("a"), labelled("b"), 'changes it from "a" to "b"'],
    ["removes it", labelled("a"), labelled(), "removes it"],
  ])("refuses a non-operator update that %s", (_what, before, after, words) => {
    const vs = podUpdateViolations(after, before, "alice", OPERATOR);
    expect(paths(vs)).toEqual([LABEL]);
    expect(vs[0].message).toContain(words);
    expect(vs[0].message).toContain('"alice"');
  });

  it("lets the operator set, change or remove it", () => {
    expect(sandboxLabelViolations(labelled("victim"), labelled(), OPERATOR, OPERATOR)).toEqual([]);
    expect(sandboxLabelViolations(labelled("b"), labelled("a"), OPERATOR, OPERATOR)).toEqual([]);
    expect(sandboxLabelViolations(labelled(), labelled("a"), OPERATOR, OPERATOR)).toEqual([]);
  });

  it("refuses a change when the operator's identity is unknown", () => {
    expect(paths(sandboxLabelViolations(labelled("b"), labelled("a"), undefined, undefined))).toEqual([LABEL]);
    expect(paths(sandboxLabelViolations(labelled("b"), labelled("a"), "", ""))).toEqual([LABEL]);
  });

  it("lets anyone make an update that leaves the label as it is", () => {
    expect(podUpdateViolations(labelled("a", { activeDeadlineSeconds: 5 }), labelled("a"), "alice", undefined)).toEqual(
      [],
    );
    expect(
      podUpdateViolations(labelled(undefined, { activeDeadlineSeconds: 5 }), labelled(), "alice", undefined),
    ).toEqual([]);
  });

  it("says whether the label changed", () => {
    expect(sandboxLabelChanged(labelled("a"), labelled("a"))).toBe(false);
    expect(sandboxLabelChanged(labelled("a"), labelled())).toBe(true);
    expect(sandboxLabelChanged(labelled(), labelled("a"))).toBe(true);
    expect(sandboxLabelChanged(null, undefined)).toBe(false);
  });

  it("checks the ephemeral containers a Sandbox pod gains, and no other pod's", () => {
    const restricted = {
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ["ALL"] },
      seccompProfile: { type: "RuntimeDefault" },
    };
    const dbg = {
      ephemeralContainers: [{ name: "dbg", targetContainerName: "custodian", securityContext: restricted }],
    };
    expect(
      paths(podUpdateViolations(labelled("a", dbg), labelled("a"), "alice", undefined, "ephemeralcontainers")),
    ).toEqual(["spec.ephemeralContainers[0].targetContainerName"]);
    expect(
      podUpdateViolations(labelled(undefined, dbg), labelled(), "alice", undefined, "ephemeralcontainers"),
    ).toEqual([]);
    expect(podUpdateViolations(labelled("a", dbg), labelled("a"), "alice", undefined)).toEqual([]);
  });

  it("refuses anyone's change of a Sandbox pod's image, and leaves other pods' alone", () => {
    const swapped = { ...labelled("a"), spec: { containers: [{ name: "c", image: "evil:1" }] } };
    const vs = podUpdateViolations(swapped, labelled("a"), "alice", undefined);
    expect(paths(vs)).toEqual(["spec.containers[0].image"]);
    expect(vs[0].message).toContain("create a new Sandbox");
    expect(paths(podUpdateViolations(swapped, labelled("a"), OPERATOR, OPERATOR))).toEqual([
      "spec.containers[0].image",
    ]);
    const ordinary = { ...labelled(), spec: { containers: [{ name: "c", image: "c:2" }] } };
    expect(podUpdateViolations(ordinary, labelled(), "alice", undefined)).toEqual([]);
  });

  it("reads hostile input without throwing", () => {
    expect(podUpdateViolations(null, 3, undefined, undefined, "x")).toEqual([]);
    expect(() => podUpdateViolations({ metadata: { labels: "x" } }, { metadata: null }, "a", "b")).not.toThrow();
  });
});

// Decision 0048: nobody execs or attaches into a Sandbox pod's credential holders.
describe("connectRefusal", () => {
  const sandboxPod = (containers = ["harness", "custodian", "user", "effector"]) => ({
    metadata: { name: "sbx", namespace: "team-a", labels: { "sandbox.jr2.dev/name": "sbx" } },
    spec: { containers: containers.map((name) => ({ name, image: "i:1" })) },
  });

  it.each(["custodian", "effector"])(
    "refuses exec and attach into %s, naming it, why, and the harness instead",
    (c) => {
      for (const sub of ["exec", "attach"]) {
        const why = connectRefusal(sandboxPod(), sub, c);
        expect(why).toContain(`${sub} into container "${c}" of Sandbox pod team-a/sbx is refused`);
        expect(why).toContain("credential holder");
        expect(why).toContain("decision 0048");
        expect(why).toContain("kubectl exec -n team-a sbx -c harness");
      }
    },
  );

  it("admits exec and attach into the harness and the user seat", () => {
    for (const c of ["harness", "user"]) {
      expect(connectRefusal(sandboxPod(), "exec", c)).toBeUndefined();
      expect(connectRefusal(sandboxPod(), "attach", c)).toBeUndefined();
    }
  });

  it("reads no container named as the API server does: the pod's only one", () => {
    expect(connectRefusal(sandboxPod(["custodian"]), "exec", undefined)).toContain('"custodian"');
    expect(connectRefusal(sandboxPod(["harness"]), "exec", undefined)).toBeUndefined();
    // Several containers and none named: the API server refuses the request itself.
    expect(connectRefusal(sandboxPod(), "exec", undefined)).toBeUndefined();
  });

  it("leaves pods without the Sandbox label, and other subresources, alone", () => {
    const plain = { ...sandboxPod(), metadata: { name: "p", namespace: "team-a" } };
    expect(connectRefusal(plain, "exec", "custodian")).toBeUndefined();
    expect(connectRefusal(sandboxPod(), "portforward", undefined)).toBeUndefined();
    expect(connectRefusal(null, "exec", "custodian")).toBeUndefined();
  });
});

// Decision 0067: a Sandbox pod left its NetworkPolicies by losing `app.kubernetes.io/managed-by`.
describe("jr2MetadataViolations: a Sandbox pod's jr2 labels and annotations are the operator's", () => {
  const sandboxPod = (labels: Record<string, string> = {}, annotations: Record<string, string> = {}) => ({
    metadata: {
      name: "sb",
      labels: { "sandbox.jr2.dev/name": "sb", "app.kubernetes.io/managed-by": "jr2-operator", ...labels },
      annotations: { "sandbox.jr2.dev/name": "sb", "jr2.dev/spec-digest": "{}", ...annotations },
    },
    spec: { containers: [{ name: "harness", image: "h:1" }] },
  });
  const without = (pod: ReturnType<typeof sandboxPod>, m: "labels" | "annotations", key: string) => {
    const copy = structuredClone(pod);
    delete (copy.metadata[m] as Record<string, string>)[key];
    return copy;
  };

  it("knows jr2's keys: managed-by and jr2.dev's domain, no other", () => {
    for (const k of ["app.kubernetes.io/managed-by", "jr2.dev/keepalive", "sandbox.jr2.dev/name", "a.b.jr2.dev/x"])
      expect([k, isJr2Key(k)]).toEqual([k, true]);
    for (const k of ["app", "app.kubernetes.io/name", "notjr2.dev/x", "jr2.dev.evil/x", "jr2.dev"])
      expect([k, isJr2Key(k)]).toEqual([k, false]);
  });

  it.each([
    [
      "removes managed-by",
      without(sandboxPod(), "labels", "app.kubernetes.io/managed-by"),
      "metadata.labels[app.kubernetes.io/managed-by]",
      "removes it",
    ],
    [
      "changes managed-by",
      sandboxPod({ "app.kubernetes.io/managed-by": "me" }),
      "metadata.labels[app.kubernetes.io/managed-by]",
      'changes it from "jr2-operator" to "me"',
    ],
    ["adds a jr2.dev label", sandboxPod({ "jr2.dev/tenant": "t" }), "metadata.labels[jr2.dev/tenant]", "adds it"],
    [
      "removes the Sandbox annotation",
      without(sandboxPod(), "annotations", "sandbox.jr2.dev/name"),
      "metadata.annotations[sandbox.jr2.dev/name]",
      "removes it",
    ],
    [
      "changes the spec digest",
      sandboxPod({}, { "jr2.dev/spec-digest": '{"image":"x"}' }),
      "metadata.annotations[jr2.dev/spec-digest]",
      "changes it",
    ],
  ])("refuses a non-operator update that %s, on the pod and on its status", (_w, after, path, words) => {
    for (const sub of [undefined, "status"]) {
      const vs = podUpdateViolations(after, sandboxPod(), "alice", OPERATOR, sub);
      expect([sub, paths(vs)]).toEqual([sub, [path]]);
      expect(vs[0].message).toContain(words);
      expect(vs[0].message).toContain('"alice"');
      expect(vs[0].message).toContain("leave it as it is");
    }
  });

  it("lets the operator change them, anyone change other labels, and leaves ordinary pods alone", () => {
    const stripped = without(sandboxPod(), "labels", "app.kubernetes.io/managed-by");
    expect(jr2MetadataViolations(stripped, sandboxPod(), OPERATOR, OPERATOR)).toEqual([]);
    expect(podUpdateViolations(sandboxPod({ team: "a" }, { note: "x" }), sandboxPod(), "alice", OPERATOR)).toEqual([]);
    expect(jr2MetadataChanged(sandboxPod({ team: "a" }), sandboxPod())).toBe(false);
    expect(jr2MetadataChanged(stripped, sandboxPod())).toBe(true);
    const ordinary = { metadata: { labels: { "app.kubernetes.io/managed-by": "helm" } } };
    expect(podUpdateViolations({ metadata: { labels: {} } }, ordinary, "alice", OPERATOR)).toEqual([]);
    // The Sandbox label itself is its own rule's, said once.
    const unlabelled = without(sandboxPod(), "labels", "sandbox.jr2.dev/name");
    expect(paths(podUpdateViolations(unlabelled, sandboxPod(), "alice", OPERATOR))).toEqual([
      "metadata.labels[sandbox.jr2.dev/name]",
    ]);
  });

  it("judges no metadata on an ephemeral-containers update (the API server keeps the pod's there)", () => {
    const stripped = without(sandboxPod(), "labels", "app.kubernetes.io/managed-by");
    expect(paths(podUpdateViolations(stripped, sandboxPod(), "alice", OPERATOR, "ephemeralcontainers"))).toEqual([]);
  });
});
