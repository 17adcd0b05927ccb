// The reconcile's own admission check (capabilities/sandbox/gate.ts, decision 0017): a spec
// admission would refuse, or a Sandbox in a namespace admission ignores, is refused with every
// field path named, and the refusal is final for the status and for a client.
import { DEFAULT_RULES } from "../../capabilities/rules/sandbox-rules";
import { DEFAULT_POD_RULES, podRulesFromEnv } from "../../capabilities/rules/pods";
import { builtPodRefusal, gateRefusal } from "../../capabilities/sandbox/gate";
import { buildPod } from "../../capabilities/sandbox/pod";
import { computeStatus } from "../../capabilities/sandbox/status";
import { placingVerdict } from "../../orchestrator/workspaces/provision-rules";

const opts = { rules: DEFAULT_RULES, ignoredNamespaces: ["kube-system", "kube-public"] };
const sandbox = (spec: unknown, namespace = "team-a") => ({ metadata: { name: "sb", namespace }, spec });
const good = { image: "ghcr.io/example/harness:1", idleTimeout: "30m" };

describe("gateRefusal", () => {
  it("lets a spec admission admits through", () => {
    expect(gateRefusal(sandbox(good), opts)).toBeUndefined();
  });

  it("refuses a privileged Harness with the host's / mounted, naming each field path", () => {
    const bad = {
      ...good,
      securityContext: { privileged: true },
      volumes: [{ name: "repo-root", hostPath: { path: "/" } }],
      volumeMounts: [{ name: "repo-root", mountPath: "/host" }],
    };
    const r = gateRefusal(sandbox(bad), opts)!;
    expect(r.reason).toBe("SpecRefused");
    expect(r.message).toContain("Sandbox team-a/sb refused");
    expect(r.message).toContain("spec.securityContext.privileged");
    expect(r.message).toMatch(/spec\.volumes\[0\]/);
    expect(r.message).toContain("fix the spec");
  });

  it("refuses any Sandbox in a namespace admission ignores, naming the fix", () => {
    const r = gateRefusal(sandbox(good, "kube-public"), opts)!;
    expect(r.reason).toBe("NamespaceIgnored");
    expect(r.message).toContain("namespace kube-public is one admission ignores");
    expect(r.message).toContain("create the Sandbox in another namespace");
  });

  it("makes the status say why, on Scheduled and on Ready, and a client give up at once", () => {
    const refusal = gateRefusal(sandbox({ ...good, securityContext: { privileged: true } }), opts)!;
    const status = computeStatus({
      sandbox: { metadata: { name: "sb", namespace: "team-a" } },
      refusal,
      now: new Date("2026-03-01T12:00:00Z"),
    });
    expect(status.phase).toBe("Pending");
    const byType = Object.fromEntries((status.conditions ?? []).map((c) => [c.type, c]));
    expect(byType.Scheduled).toMatchObject({ status: "False", reason: "SpecRefused" });
    expect(byType.Ready).toMatchObject({ status: "False", reason: "SpecRefused" });
    const verdict = placingVerdict({ metadata: { name: "sb" }, status }, "sb");
    expect(verdict.kind).toBe("failed");
    if (verdict.kind === "failed") {
      expect(verdict.failure.reason).toBe("Refused");
      expect(verdict.failure.message).toContain("spec.securityContext.privileged");
    }
  });
});

// The operator's own pod creates skip the webhook (decision 0029): the pod guard's rules run on the
// pod as built, before it is written.
describe("builtPodRefusal", () => {
  const sbx = { metadata: { name: "sb", namespace: "team-a", uid: "u-1" }, spec: good };

  it("lets the pod the builder makes through", () => {
    expect(builtPodRefusal(sbx, buildPod(sbx), DEFAULT_POD_RULES)).toBeUndefined();
  });

  it("reads the cache root the pods mount as the Repo capability does (JR2_CACHE_ROOT)", () => {
    expect(podRulesFromEnv({ JR2_CACHE_ROOT: "/srv/repos" })).toEqual({ cacheRoot: "/srv/repos" });
    expect(podRulesFromEnv({})).toEqual(DEFAULT_POD_RULES);
  });

  it("refuses a built pod the pod guard would refuse, naming each field path, and writes nothing", () => {
    const pod = buildPod(sbx);
    pod.spec!.containers[0].securityContext = { ...pod.spec!.containers[0].securityContext, privileged: true };
    pod.spec!.volumes = [...(pod.spec!.volumes ?? []), { name: "repo-root", hostPath: { path: "/" } }];
    const r = builtPodRefusal(sbx, pod, DEFAULT_POD_RULES)!;
    expect(r.reason).toBe("SpecRefused");
    expect(r.message).toContain("the pod built for Sandbox team-a/sb");
    expect(r.message).toContain("spec.containers[0].securityContext.privileged");
    expect(r.message).toMatch(/spec\.volumes\[\d+\]/);
  });
});
