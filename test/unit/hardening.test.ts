import type { SandboxSpec } from "../../api/crd";
import type { Container } from "../../api/crd/generated/corev1";
import { hardenSidecar, hardenSpec, hardenedSecurityContext } from "../../capabilities/sandbox/hardening";

const spec = (over: Partial<SandboxSpec> = {}): SandboxSpec => ({ image: "harness:1", idleTimeout: "30m", ...over });
const init: Container = { name: "init", image: "init:1" };

describe("hardenedSecurityContext", () => {
  const sc = hardenedSecurityContext();

  it("requires a non-root user", () => expect(sc.runAsNonRoot).toBe(true));
  it("forbids privilege escalation", () => expect(sc.allowPrivilegeEscalation).toBe(false));
  it("drops ALL capabilities", () => expect(sc.capabilities?.drop).toEqual(["ALL"]));
  it("uses the RuntimeDefault seccomp profile", () => expect(sc.seccompProfile?.type).toBe("RuntimeDefault"));
});

describe("hardenSidecar", () => {
  it("writes the hardened context into a sidecar that states none", () => {
    expect(hardenSidecar({ name: "custodian", image: "c:1" }).securityContext).toEqual(hardenedSecurityContext());
  });

  it("keeps a sidecar's own securityContext", () => {
    expect(
      hardenSidecar({ name: "effector", image: "e:1", securityContext: { runAsUser: 7 } }).securityContext,
    ).toEqual({
      runAsUser: 7,
    });
  });

  it("leaves the sidecar named user without a securityContext", () => {
    expect(hardenSidecar({ name: "user", image: "u:1" })).not.toHaveProperty("securityContext");
  });
});

describe("hardenSpec", () => {
  it("writes the hardened context for the harness when the spec states none", () => {
    expect(hardenSpec(spec()).securityContext).toEqual(hardenedSecurityContext());
  });

  it("keeps the harness context the spec states", () => {
    expect(hardenSpec(spec({ securityContext: { runAsUser: 1000 } })).securityContext).toEqual({ runAsUser: 1000 });
  });

  it("hardens every sidecar but user, in order", () => {
    const out = hardenSpec(
      spec({
        sidecars: [
          { name: "custodian", image: "c:1" },
          { name: "user", image: "u:1" },
        ],
      }),
    );
    expect(out.sidecars?.map((c) => c.name)).toEqual(["custodian", "user"]);
    expect(out.sidecars?.[0].securityContext).toEqual(hardenedSecurityContext());
    expect(out.sidecars?.[1]).not.toHaveProperty("securityContext");
  });

  it("does not touch initContainers", () => {
    const out = hardenSpec(spec({ initContainers: [init] }));
    expect(out.initContainers).toEqual([{ name: "init", image: "init:1" }]);
    expect(out.initContainers?.[0]).not.toHaveProperty("securityContext");
  });

  it("is idempotent: hardening twice equals hardening once", () => {
    const s = spec({
      sidecars: [
        { name: "custodian", image: "c:1" },
        { name: "user", image: "u:1" },
        { name: "effector", image: "e:1", securityContext: { runAsUser: 7 } },
      ],
      initContainers: [init],
    });
    const once = hardenSpec(s);
    expect(hardenSpec(once)).toEqual(once);
  });
});
