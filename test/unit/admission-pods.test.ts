import { ephemeralViolations, podViolations } from "../../capabilities/admission/pods";
import { withDefaults } from "../../capabilities/admission/sandbox";
import type { Violation } from "../../capabilities/admission/violations";
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

  it("admits the operator's repo-<key> hostPath volume", () => {
    expect(
      podViolations(
        pod({ containers: [], volumes: [{ name: "repo-app", hostPath: { path: "/var/cache/app" } }] }),
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

  it("admits a debug container targeting the harness", () => {
    expect(
      ephemeralViolations(withEphemeral([{ name: "dbg", image: "busybox", targetContainerName: "harness" }]), {
        spec: base(),
      }),
    ).toEqual([]);
  });

  it("refuses a debug container that reads a Secret into its environment", () => {
    const vs = ephemeralViolations(
      withEphemeral([
        {
          name: "dbg",
          image: "busybox",
          env: [{ name: "T", valueFrom: { secretKeyRef: { name: "push-token", key: "token" } } }],
          envFrom: [{ secretRef: { name: "push-token" } }],
        },
      ]),
      { spec: base() },
    );
    expect(vs.map((v) => v.path)).toEqual([
      "spec.ephemeralContainers[0].env[0].valueFrom.secretKeyRef",
      "spec.ephemeralContainers[0].envFrom[0].secretRef",
    ]);
  });

  it.each(["custodian", "effector"])("refuses a new ephemeral container targeting %s", (target) => {
    const vs = ephemeralViolations(withEphemeral([{ name: "dbg", image: "busybox", targetContainerName: target }]), {
      spec: base(),
    });
    expect(paths(vs)).toEqual(["spec.ephemeralContainers[0].targetContainerName"]);
  });

  it("refuses mounting the projected git credential volume", () => {
    const vs = ephemeralViolations(
      withEphemeral([{ name: "dbg", image: "busybox", volumeMounts: [{ name: "jr2-git-1", mountPath: "/x" }] }]),
      { spec: base() },
    );
    expect(paths(vs)).toEqual(["spec.ephemeralContainers[0].volumeMounts[0]"]);
  });

  it("refuses mounting a plain secret volume", () => {
    const p = {
      spec: {
        containers: [],
        volumes: [{ name: "s", secret: { secretName: "x" } }],
        ephemeralContainers: [{ name: "dbg", volumeMounts: [{ name: "s", mountPath: "/s" }] }],
      },
    };
    expect(paths(ephemeralViolations(p, { spec: { containers: [] } }))).toEqual([
      "spec.ephemeralContainers[0].volumeMounts[0]",
    ]);
  });

  it("admits mounting a volume without a Secret", () => {
    const vs = ephemeralViolations(
      withEphemeral([{ name: "dbg", image: "busybox", volumeMounts: [{ name: "work", mountPath: "/w" }] }]),
      { spec: base() },
    );
    expect(vs).toEqual([]);
  });

  it("refuses a privileged ephemeral container", () => {
    const vs = ephemeralViolations(
      withEphemeral([{ name: "dbg", image: "busybox", securityContext: { privileged: true } }]),
      { spec: base() },
    );
    expect(paths(vs)).toEqual(["spec.ephemeralContainers[0].securityContext.privileged"]);
  });

  it("does not re-judge an ephemeral container already in the old pod", () => {
    const old = {
      name: "old",
      image: "busybox",
      targetContainerName: "effector",
      securityContext: { privileged: true },
    };
    const added = { name: "new", image: "busybox", targetContainerName: "custodian" };
    const vs = ephemeralViolations(withEphemeral([old, added]), withEphemeral([old]));
    expect(paths(vs)).toEqual(["spec.ephemeralContainers[1].targetContainerName"]);
  });

  it("reads hostile input without throwing", () => {
    expect(ephemeralViolations(undefined, undefined)).toEqual([]);
    expect(ephemeralViolations({ spec: { ephemeralContainers: [null, 3] } }, "x")).toEqual([]);
  });
});
