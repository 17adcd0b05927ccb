import type { SandboxSpec } from "../../api/crd";
import type { Container, SecurityContext } from "../../api/crd/generated/corev1";
import {
  hardenInitContainer,
  hardenSidecar,
  userSeatContext,
  hardenSpec,
  hardenedContext,
  hardenedSecurityContext,
  readOnlyRepoMounts,
} from "../../api/hardening";

const spec = (over: Partial<SandboxSpec> = {}): SandboxSpec => ({ image: "harness:1", idleTimeout: "30m", ...over });
const init: Container = { name: "init", image: "init:1" };

describe("hardenedSecurityContext", () => {
  const sc = hardenedSecurityContext();

  it("requires a non-root user", () => expect(sc.runAsNonRoot).toBe(true));
  it("forbids privilege escalation", () => expect(sc.allowPrivilegeEscalation).toBe(false));
  it("drops ALL capabilities", () => expect(sc.capabilities?.drop).toEqual(["ALL"]));
  it("uses the RuntimeDefault seccomp profile", () => expect(sc.seccompProfile?.type).toBe("RuntimeDefault"));

  // One profile for the operator's pods, the generated policy's CEL and the Orchestrator's composed
  // containers: pinned byte for byte, key order included, as each of them has always stated it.
  it("states the profile in one order", () => {
    expect(JSON.stringify(sc)).toBe(
      '{"runAsNonRoot":true,"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},' +
        '"seccompProfile":{"type":"RuntimeDefault"}}',
    );
  });

  it("places what a composer fixes where the composed pods have always had it", () => {
    const fixed = hardenedSecurityContext({ runAsUser: 65532, runAsGroup: 65532, readOnlyRootFilesystem: true });
    expect(JSON.stringify(fixed)).toBe(
      '{"runAsNonRoot":true,"runAsUser":65532,"runAsGroup":65532,"allowPrivilegeEscalation":false,' +
        '"readOnlyRootFilesystem":true,"capabilities":{"drop":["ALL"]},"seccompProfile":{"type":"RuntimeDefault"}}',
    );
    const noUser = hardenedSecurityContext({
      runAsUser: undefined,
      runAsGroup: undefined,
      readOnlyRootFilesystem: true,
    });
    expect(JSON.stringify(noUser)).toBe(
      '{"runAsNonRoot":true,"allowPrivilegeEscalation":false,"readOnlyRootFilesystem":true,' +
        '"capabilities":{"drop":["ALL"]},"seccompProfile":{"type":"RuntimeDefault"}}',
    );
  });

  it("is a fresh object on every call", () => {
    const a = hardenedSecurityContext();
    a.capabilities!.drop!.push("NET_RAW");
    expect(hardenedSecurityContext().capabilities?.drop).toEqual(["ALL"]);
  });
});

describe("hardenSidecar", () => {
  it("writes the hardened context into a sidecar that states none", () => {
    expect(hardenSidecar({ name: "custodian", image: "c:1" }).securityContext).toEqual(hardenedSecurityContext());
  });

  // Decision 0016: a stated context is completed field by field, keeping what it states.
  it("keeps a sidecar's own securityContext, completing what it leaves out", () => {
    expect(
      hardenSidecar({ name: "effector", image: "e:1", securityContext: { runAsUser: 7 } }).securityContext,
    ).toEqual({
      ...hardenedSecurityContext(),
      runAsUser: 7,
    });
  });

  // Decision 0048: the user seat's one default, NET_RAW dropped; nothing else written.
  it("gives the sidecar named user only a NET_RAW drop", () => {
    expect(hardenSidecar({ name: "user", image: "u:1" })).toEqual({
      name: "user",
      image: "u:1",
      securityContext: { capabilities: { drop: ["NET_RAW"] } },
    });
  });
});

describe("hardenSpec", () => {
  it("writes the hardened context for the harness when the spec states none", () => {
    expect(hardenSpec(spec()).securityContext).toEqual(hardenedSecurityContext());
  });

  // Decision 0016: completed field by field.
  it("keeps the harness context the spec states, completing what it leaves out", () => {
    expect(hardenSpec(spec({ securityContext: { runAsUser: 1000 } })).securityContext).toEqual({
      ...hardenedSecurityContext(),
      runAsUser: 1000,
    });
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
    expect(out.sidecars?.[1].securityContext).toEqual({ capabilities: { drop: ["NET_RAW"] } });
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

// Decision 0016: a stated context is completed field by field; what it states is kept, weaker values
// included (admission refuses those).
describe("hardenedContext: field by field", () => {
  const H = hardenedSecurityContext();

  it("gives a context that states none the hardened one", () => {
    expect(hardenedContext(undefined)).toEqual(H);
    expect(hardenedContext(null as unknown as undefined)).toEqual(H);
  });

  it("completes the seeds' Custodian context (non-root, read-only root, no capabilities)", () => {
    const custodian = { runAsNonRoot: true, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } };
    expect(hardenedContext(custodian)).toEqual({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
      allowPrivilegeEscalation: false,
      seccompProfile: { type: "RuntimeDefault" },
    });
  });

  it.each([
    ["runAsNonRoot", { runAsNonRoot: false }],
    ["allowPrivilegeEscalation", { allowPrivilegeEscalation: true }],
    ["capabilities.drop", { capabilities: { drop: ["NET_RAW"] } }],
    ["seccompProfile", { seccompProfile: { type: "Localhost", localhostProfile: "p.json" } }],
  ])("keeps a stated %s as stated", (_field, stated) => {
    expect(hardenedContext(stated as SecurityContext)).toMatchObject(stated);
  });

  it("writes drop ALL beside stated added capabilities, and keeps the adds", () => {
    expect(hardenedContext({ capabilities: { add: ["NET_RAW"] } }).capabilities).toEqual({
      add: ["NET_RAW"],
      drop: ["ALL"],
    });
  });

  it("writes RuntimeDefault into an empty seccompProfile, not into one naming a file", () => {
    expect(hardenedContext({ seccompProfile: {} as never }).seccompProfile).toEqual({ type: "RuntimeDefault" });
    const named = { localhostProfile: "p.json" } as never;
    expect(hardenedContext({ seccompProfile: named }).seccompProfile).toEqual({ localhostProfile: "p.json" });
  });

  it("keeps the fields it does not harden (uid, read-only root, SELinux, AppArmor)", () => {
    const stated: SecurityContext = {
      runAsUser: 1000,
      runAsGroup: 1000,
      readOnlyRootFilesystem: true,
      seLinuxOptions: { type: "container_t" },
      appArmorProfile: { type: "RuntimeDefault" },
    };
    expect(hardenedContext(stated)).toEqual({ ...H, ...stated });
  });

  it("leaves a context that is not an object as it is, for the validation to refuse", () => {
    expect(hardenedContext("root" as never)).toBe("root");
    expect(hardenedContext([] as never)).toEqual([]);
  });

  it("is idempotent and does not modify its input", () => {
    const stated = { runAsUser: 7, capabilities: {} };
    const once = hardenedContext(stated);
    expect(hardenedContext(once)).toEqual(once);
    expect(stated).toEqual({ runAsUser: 7, capabilities: {} });
  });
});

describe("Repo mounts are read-only in every container", () => {
  const repo = { name: "repo-app", mountPath: "/repos/app" };

  it("makes a repo-<key> mount that says nothing about readOnly read-only, and no other mount", () => {
    expect(readOnlyRepoMounts([repo, { name: "work", mountPath: "/work" }])).toEqual([
      { ...repo, readOnly: true },
      { name: "work", mountPath: "/work" },
    ]);
  });

  it("keeps a stated readOnly (false is refused by admission and by the pod guard)", () => {
    expect(readOnlyRepoMounts([{ ...repo, readOnly: false }])).toEqual([{ ...repo, readOnly: false }]);
  });

  it("does so in the harness, every sidecar (user included) and every init container", () => {
    const out = hardenSpec(
      spec({
        volumeMounts: [repo],
        sidecars: [
          { name: "custodian", image: "c:1", volumeMounts: [repo] },
          { name: "user", image: "u:1", volumeMounts: [repo] },
        ],
        initContainers: [{ name: "setup", image: "i:1", volumeMounts: [repo] }],
      }),
    );
    const ro = [{ ...repo, readOnly: true }];
    expect(out.volumeMounts).toEqual(ro);
    expect(out.sidecars?.[0].volumeMounts).toEqual(ro);
    expect(out.sidecars?.[1]).toEqual({
      name: "user",
      image: "u:1",
      volumeMounts: ro,
      securityContext: { capabilities: { drop: ["NET_RAW"] } },
    });
    expect(out.initContainers?.[0]).toEqual({ name: "setup", image: "i:1", volumeMounts: ro });
  });

  it("writes no hardened context into the user seat or an init container, even a partial one", () => {
    const userCtx = { runAsUser: 0 };
    expect(hardenSidecar({ name: "user", image: "u:1", securityContext: userCtx }).securityContext).toEqual({
      ...userCtx,
      capabilities: { drop: ["NET_RAW"] },
    });
    expect(hardenInitContainer({ name: "i", image: "i:1", securityContext: userCtx }).securityContext).toEqual(userCtx);
  });
});

// Decision 0048: the user seat drops NET_RAW unless its context says otherwise.
describe("userSeatContext", () => {
  it.each([
    ["states nothing", undefined, { capabilities: { drop: ["NET_RAW"] } }],
    ["states other fields", { runAsUser: 0 }, { runAsUser: 0, capabilities: { drop: ["NET_RAW"] } }],
    [
      "adds without dropping",
      { capabilities: { add: ["CHOWN"] } },
      { capabilities: { add: ["CHOWN"], drop: ["NET_RAW"] } },
    ],
  ])("drops NET_RAW where the seat %s", (_what, stated, expected) => {
    expect(userSeatContext(stated as never)).toEqual(expected);
  });

  it.each([
    ["states its own drop list", { capabilities: { drop: [] } }],
    ["drops something else", { capabilities: { drop: ["CHOWN"] } }],
  ])("keeps the context as stated where the seat %s", (_what, stated) => {
    expect(userSeatContext(stated as never)).toEqual(stated);
  });

  it("is idempotent", () => {
    const once = userSeatContext({ runAsUser: 0 });
    expect(userSeatContext(once)).toEqual(once);
  });
});

describe("hardenSpec reads what the mutating webhook is handed without throwing", () => {
  it.each([
    { sidecars: [null, 3, "x", { name: 5 }] },
    { initContainers: [null, [], { volumeMounts: "x" }] },
    { volumeMounts: [null, { name: 1 }, "repo-x"] },
    { sidecars: "x", initContainers: {}, volumeMounts: 7, securityContext: "root" },
  ])("%j", (junk) => {
    expect(() => hardenSpec(junk as never)).not.toThrow();
  });
});
