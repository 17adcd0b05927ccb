import {
  gitCredentialViolations,
  gitCredentialVolumeName,
  isGitCredentialVolume,
} from "../../capabilities/rules/git-credentials";
import type { Violation } from "../../capabilities/rules/violations";
import type { SandboxSpec } from "../../api/crd";
import type { Container, Volume } from "../../api/crd/generated/corev1";
import {
  GIT_CREDENTIALS_ROOT,
  buildPod,
  gitCredentialMountPath,
  gitCredentialsProjection,
} from "../../capabilities/sandbox/pod";

const paths = (vs: Violation[]) => vs.map((v) => v.path);

describe("gitCredentialsProjection", () => {
  it("contributes nothing without credentials", () => {
    expect(gitCredentialsProjection({})).toBeUndefined();
    expect(gitCredentialsProjection({ gitCredentials: [] })).toBeUndefined();
  });

  const part = gitCredentialsProjection({ gitCredentials: [{ name: "gh" }, { name: "gl.push" }] })!;

  it("contributes one volume per Secret, named jr2-git-<index>", () => {
    expect(part.volumes?.map((v) => v.name)).toEqual(["jr2-git-0", "jr2-git-1"]);
    expect(gitCredentialVolumeName(3)).toBe("jr2-git-3");
  });

  it("makes each volume a projected volume of mode 0400 with one secret source by name, no items", () => {
    expect(part.volumes?.[0]).toEqual({
      name: "jr2-git-0",
      projected: { defaultMode: 256, sources: [{ secret: { name: "gh" } }] },
    });
    expect(part.volumes?.[1].projected).toEqual({ defaultMode: 0o400, sources: [{ secret: { name: "gl.push" } }] });
  });

  it("mounts each volume read-only at /run/jr2/secrets/@git/<name>/", () => {
    expect(part.sidecarMounts?.effector).toEqual([
      { name: "jr2-git-0", mountPath: "/run/jr2/secrets/@git/gh/", readOnly: true },
      { name: "jr2-git-1", mountPath: "/run/jr2/secrets/@git/gl.push/", readOnly: true },
    ]);
    expect(gitCredentialMountPath("x")).toBe(`${GIT_CREDENTIALS_ROOT}/x/`);
  });

  it("mounts into the effector sidecar only", () => {
    expect(Object.keys(part.sidecarMounts ?? {})).toEqual(["effector"]);
    expect(part.harnessMounts ?? []).toEqual([]);
  });
});

describe("buildPod with gitCredentials", () => {
  const spec: SandboxSpec = {
    image: "harness:1",
    idleTimeout: "30m",
    gitCredentials: [{ name: "gh" }, { name: "gl" }],
    initContainers: [{ name: "setup", image: "i:1" }],
    sidecars: [
      { name: "custodian", image: "c:1" },
      { name: "user", image: "u:1" },
      { name: "effector", image: "e:1", volumeMounts: [{ name: "scratch", mountPath: "/scratch" }] },
    ],
    volumes: [{ name: "scratch", emptyDir: {} }],
  };
  const pod = buildPod({ metadata: { name: "sb", namespace: "team-a", uid: "u" }, spec });
  const all = (): Container[] => [...(pod.spec!.initContainers ?? []), ...pod.spec!.containers] as Container[];
  const gitMounts = (c: Container) => (c.volumeMounts ?? []).filter((m) => m.name.startsWith("jr2-git-"));
  const volume = (name: string) => (pod.spec!.volumes as Volume[]).find((v) => v.name === name);

  it("adds each projected credential volume to the pod", () => {
    expect(volume("jr2-git-0")?.projected).toEqual({ defaultMode: 0o400, sources: [{ secret: { name: "gh" } }] });
    expect(volume("jr2-git-1")?.projected).toEqual({ defaultMode: 0o400, sources: [{ secret: { name: "gl" } }] });
  });

  it("mounts the credentials read-only in the effector, after its own mounts", () => {
    const effector = all().find((c) => c.name === "effector")!;
    expect(effector.volumeMounts).toEqual([
      { name: "scratch", mountPath: "/scratch" },
      { name: "jr2-git-0", mountPath: "/run/jr2/secrets/@git/gh/", readOnly: true },
      { name: "jr2-git-1", mountPath: "/run/jr2/secrets/@git/gl/", readOnly: true },
    ]);
  });

  it("gives no other container, init containers included, a credential mount", () => {
    const others = all().filter((c) => c.name !== "effector");
    expect(others.map((c) => c.name)).toEqual(["setup", "harness", "custodian", "user"]);
    for (const c of others) expect(gitMounts(c)).toEqual([]);
  });

  // Decision 0048: its one default, NET_RAW dropped, and no push credential.
  it("leaves the user sidecar without the mounts, its context only its NET_RAW drop", () => {
    expect(all().find((c) => c.name === "user")).toEqual({
      name: "user",
      image: "u:1",
      securityContext: { capabilities: { drop: ["NET_RAW"] } },
    });
  });
});

describe("gitCredentialViolations", () => {
  const effector = { path: "spec.sidecars[0]", container: { name: "effector" }, effector: true };
  const harness = (container: Record<string, unknown>) => ({ path: "spec", container, effector: false });

  it("reports nothing without credentials, even without an effector", () => {
    expect(gitCredentialViolations({}, [harness({})])).toEqual([]);
  });

  it("requires an effector seat once a valid credential is named", () => {
    expect(paths(gitCredentialViolations({ gitCredentials: [{ name: "gh" }] }, [harness({})]))).toEqual([
      "spec.gitCredentials",
    ]);
  });

  it("reports the Secret it reached by name, never a value", () => {
    const vs = gitCredentialViolations({ gitCredentials: [{ name: "gh" }] }, [
      effector,
      harness({ envFrom: [{ secretRef: { name: "gh" } }] }),
    ]);
    expect(vs).toEqual([
      {
        path: "spec.envFrom[0].secretRef",
        message: 'reaches gitCredentials Secret "gh": only the "effector" container may',
      },
    ]);
  });

  it("ignores a credential volume that has no name", () => {
    const vs = gitCredentialViolations(
      { gitCredentials: [{ name: "gh" }], volumes: [{ secret: { secretName: "gh" } }] },
      [effector, harness({ volumeMounts: [{ name: "", mountPath: "/x" }] })],
    );
    expect(vs).toEqual([]);
  });

  it("reports every reach in one call", () => {
    const vs = gitCredentialViolations(
      { gitCredentials: [{ name: "a" }, { name: "b" }], volumes: [{ name: "va", secret: { secretName: "a" } }] },
      [
        effector,
        harness({
          volumeMounts: [{ name: "va", mountPath: "/a" }],
          env: [{ name: "B", valueFrom: { secretKeyRef: { name: "b", key: "k" } } }],
          envFrom: [{ secretRef: { name: "a" } }],
        }),
      ],
    );
    expect(paths(vs)).toEqual([
      "spec.volumeMounts[0]",
      "spec.env[0].valueFrom.secretKeyRef",
      "spec.envFrom[0].secretRef",
    ]);
  });
});

// Decision 0016: only the names the projection gives a credential (jr2-git-<n>) are the effector's;
// other jr2-git-* names are the spec's own volumes.
describe("isGitCredentialVolume", () => {
  it.each(["jr2-git-0", "jr2-git-1", "jr2-git-12"])("is true for %s", (name) => {
    expect(isGitCredentialVolume(name)).toBe(true);
    expect(name).toBe(gitCredentialVolumeName(Number(name.slice("jr2-git-".length))));
  });

  it.each(["jr2-git-", "jr2-git-ca", "jr2-git-0a", "jr2-git--1", "jr2-gits-0", "x-jr2-git-0", "jr2-shm"])(
    "is false for %s",
    (name) => {
      expect(isGitCredentialVolume(name)).toBe(false);
    },
  );

  it("lets a non-effector container mount a spec volume named jr2-git-ca", () => {
    const vs = gitCredentialViolations({ gitCredentials: [{ name: "gh" }] }, [
      { path: "spec.sidecars[0]", container: { name: "effector" }, effector: true },
      { path: "spec", container: { volumeMounts: [{ name: "jr2-git-ca", mountPath: "/c" }] }, effector: false },
    ]);
    expect(vs).toEqual([]);
  });
});
