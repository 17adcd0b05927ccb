// A Sandbox in the shape a jr2 Orchestrator writes it (jr2's `crFor`, decision 0001, with its seat, the
// Custodian, the User Container, the Sandbox Effector, the runtime image volume and the preflight
// init container), through the whole admission path: the name and spec rules admit it, the
// defaults and the pod builder harden it where the seeds say (every jr2 seat completed, the user
// seat untouched, every Repo mount read-only), and the pod guard accepts the pod built from it.
// The spec is test/support/crfor-sandbox.ts's, which the admission tests hold on each supported
// Kubernetes version too.
import type { SandboxSpec } from "../../api/crd";
import type { Container, SecurityContext, VolumeMount } from "../../api/crd/generated/corev1";
import {
  CUSTODIAN_CONTEXT,
  KEYS,
  NAME,
  SEAT,
  USER_DEFAULTED,
  crForSpec,
  custodian,
  effector,
  preflight,
  repoMount,
  user,
} from "../support/crfor-sandbox";
import { DEFAULT_CACHE_ROOT } from "../../api/wire";
import { restrictedViolations } from "../../capabilities/rules/containers";
import { podViolations } from "../../capabilities/rules/pods";
import { sandboxNameViolations, sandboxViolations, withDefaults } from "../../capabilities/rules/sandbox-rules";
import { repoCachesContribution } from "../../capabilities/repo/caches";
import { buildPod } from "../../capabilities/sandbox/pod";

const OPERATOR = "system:serviceaccount:pepr-system:jr2-operator";

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
