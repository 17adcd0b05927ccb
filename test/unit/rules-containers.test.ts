import {
  BASELINE_CAPABILITIES,
  SELINUX_TYPES,
  baselineViolations,
  hostPortViolations,
  restrictedViolations,
  weakerThanRestricted,
} from "../../capabilities/rules/containers";
import { hardenedSecurityContext } from "../../api/hardening";

const P = "spec.sidecars[1].securityContext";
const OWNED = 'for a jr2-owned container (only the "user" container may run as root)';

/** A context that meets the restricted profile, with the stated fields replaced. */
const restricted = (over: Record<string, unknown> = {}) => ({
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ["ALL"] },
  seccompProfile: { type: "RuntimeDefault" },
  ...over,
});

const paths = (vs: { path: string }[]) => vs.map((v) => v.path);

describe("restrictedViolations", () => {
  it("passes an absent securityContext (the operator hardens it)", () => {
    expect(restrictedViolations(undefined, P)).toEqual([]);
  });

  it("passes a null securityContext", () => {
    expect(restrictedViolations(null, P)).toEqual([]);
  });

  it("passes the operator's hardened context", () => {
    expect(restrictedViolations(hardenedSecurityContext(), P)).toEqual([]);
  });

  it("passes a Localhost seccomp profile", () => {
    expect(restrictedViolations(restricted({ seccompProfile: { type: "Localhost" } }), P)).toEqual([]);
  });

  it("passes a non-zero runAsUser", () => {
    expect(restrictedViolations(restricted({ runAsUser: 1000 }), P)).toEqual([]);
  });

  it("refuses a context that is not an object, at the context's path", () => {
    expect(restrictedViolations("root", P)).toEqual([{ path: P, message: "must be an object" }]);
    expect(paths(restrictedViolations([], P))).toEqual([P]);
  });

  it("refuses allowPrivilegeEscalation true with the exact path and message", () => {
    expect(restrictedViolations(restricted({ allowPrivilegeEscalation: true }), P)).toEqual([
      { path: `${P}.allowPrivilegeEscalation`, message: `must be false ${OWNED}` },
    ]);
  });

  it("refuses an absent allowPrivilegeEscalation", () => {
    expect(paths(restrictedViolations(restricted({ allowPrivilegeEscalation: undefined }), P))).toEqual([
      `${P}.allowPrivilegeEscalation`,
    ]);
  });

  it("refuses privileged true", () => {
    expect(paths(restrictedViolations(restricted({ privileged: true }), P))).toEqual([`${P}.privileged`]);
  });

  it("refuses runAsNonRoot false or absent", () => {
    expect(paths(restrictedViolations(restricted({ runAsNonRoot: false }), P))).toEqual([`${P}.runAsNonRoot`]);
    expect(paths(restrictedViolations(restricted({ runAsNonRoot: undefined }), P))).toEqual([`${P}.runAsNonRoot`]);
  });

  it("refuses runAsUser 0 even with runAsNonRoot true", () => {
    expect(paths(restrictedViolations(restricted({ runAsUser: 0 }), P))).toEqual([`${P}.runAsUser`]);
  });

  it("refuses capabilities that do not drop ALL", () => {
    expect(paths(restrictedViolations(restricted({ capabilities: { drop: ["NET_RAW"] } }), P))).toEqual([
      `${P}.capabilities.drop`,
    ]);
    expect(paths(restrictedViolations(restricted({ capabilities: undefined }), P))).toEqual([`${P}.capabilities.drop`]);
  });

  it("refuses any added capability, even one in the baseline set", () => {
    expect(
      paths(restrictedViolations(restricted({ capabilities: { drop: ["ALL"], add: ["NET_BIND_SERVICE"] } }), P)),
    ).toEqual([`${P}.capabilities.add`]);
  });

  it("refuses seccomp Unconfined or absent", () => {
    expect(paths(restrictedViolations(restricted({ seccompProfile: { type: "Unconfined" } }), P))).toEqual([
      `${P}.seccompProfile.type`,
    ]);
    expect(paths(restrictedViolations(restricted({ seccompProfile: undefined }), P))).toEqual([
      `${P}.seccompProfile.type`,
    ]);
  });

  it("reports every violation of an empty context at once", () => {
    expect(paths(restrictedViolations({}, P)).sort()).toEqual(
      [
        `${P}.allowPrivilegeEscalation`,
        `${P}.capabilities.drop`,
        `${P}.runAsNonRoot`,
        `${P}.seccompProfile.type`,
      ].sort(),
    );
  });

  // The restricted profile of the Pod Security Standards includes every baseline control: a
  // jr2-owned seat must not be allowed what even the user seat is refused.
  it("refuses what the baseline refuses: procMount Unmasked", () => {
    expect(paths(restrictedViolations(restricted({ procMount: "Unmasked" }), P))).toContain(`${P}.procMount`);
  });

  it("refuses what the baseline refuses: windowsOptions.hostProcess true", () => {
    expect(paths(restrictedViolations(restricted({ windowsOptions: { hostProcess: true } }), P))).toContain(
      `${P}.windowsOptions.hostProcess`,
    );
  });
});

describe("baselineViolations", () => {
  const B = "spec.sidecars[0].securityContext";

  it("passes an absent securityContext", () => {
    expect(baselineViolations(undefined, B)).toEqual([]);
  });

  it("lets the user seat run as root", () => {
    expect(baselineViolations({ runAsUser: 0, runAsNonRoot: false, allowPrivilegeEscalation: true }, B)).toEqual([]);
  });

  it("passes every capability of the baseline set, with or without the CAP_ prefix", () => {
    const caps = [...BASELINE_CAPABILITIES];
    expect(baselineViolations({ capabilities: { add: caps } }, B)).toEqual([]);
    expect(baselineViolations({ capabilities: { add: caps.map((c) => `CAP_${c}`) } }, B)).toEqual([]);
  });

  it("refuses privileged true", () => {
    expect(paths(baselineViolations({ privileged: true }, B))).toEqual([`${B}.privileged`]);
  });

  it("refuses each capability beyond the baseline set, at its index", () => {
    const vs = baselineViolations({ capabilities: { add: ["CHOWN", "SYS_ADMIN", "NET_RAW", "CAP_SYS_PTRACE"] } }, B);
    expect(paths(vs)).toEqual([`${B}.capabilities.add[1]`, `${B}.capabilities.add[2]`, `${B}.capabilities.add[3]`]);
    expect(vs[0].message).toContain('"SYS_ADMIN"');
  });

  it("does not list SYS_ADMIN or NET_RAW in the baseline set", () => {
    expect(BASELINE_CAPABILITIES.has("SYS_ADMIN")).toBe(false);
    expect(BASELINE_CAPABILITIES.has("NET_RAW")).toBe(false);
  });

  it("refuses seccomp Unconfined", () => {
    expect(paths(baselineViolations({ seccompProfile: { type: "Unconfined" } }, B))).toEqual([
      `${B}.seccompProfile.type`,
    ]);
  });

  it("refuses procMount other than Default", () => {
    expect(paths(baselineViolations({ procMount: "Unmasked" }, B))).toEqual([`${B}.procMount`]);
    expect(baselineViolations({ procMount: "Default" }, B)).toEqual([]);
  });

  it("refuses windowsOptions.hostProcess true", () => {
    expect(paths(baselineViolations({ windowsOptions: { hostProcess: true } }, B))).toEqual([
      `${B}.windowsOptions.hostProcess`,
    ]);
  });

  it("refuses a context that is not an object", () => {
    expect(baselineViolations(7, B)).toEqual([{ path: B, message: "must be an object" }]);
  });

  it("refuses a non-string capability without throwing", () => {
    expect(paths(baselineViolations({ capabilities: { add: [42, null] } }, B))).toEqual([
      `${B}.capabilities.add[0]`,
      `${B}.capabilities.add[1]`,
    ]);
  });

  // JSON input can hold an object whose "toString" key is not a function: String() of it throws.
  it("refuses, without throwing, a capability that is a JSON object with a toString key", () => {
    const sc = JSON.parse('{"capabilities":{"add":[{"toString":1}]}}');
    expect(() => baselineViolations(sc, B)).not.toThrow();
  });
});

describe("hostPortViolations", () => {
  const C = "spec.sidecars[2]";

  it("passes a container without ports", () => {
    expect(hostPortViolations({ name: "c" }, C)).toEqual([]);
  });

  it("passes container ports without a host port, and hostPort 0", () => {
    expect(hostPortViolations({ ports: [{ containerPort: 80 }, { containerPort: 81, hostPort: 0 }] }, C)).toEqual([]);
  });

  it("refuses each host port, at its index", () => {
    const vs = hostPortViolations({ ports: [{ containerPort: 80 }, { containerPort: 81, hostPort: 8081 }] }, C);
    expect(paths(vs)).toEqual([`${C}.ports[1].hostPort`]);
    expect(vs[0].message).toContain("host ports are not allowed");
  });

  it("reads a non-object container without throwing", () => {
    expect(hostPortViolations("nope", C)).toEqual([]);
    expect(hostPortViolations(null, C)).toEqual([]);
  });
});

// Decision 0016: a stated context is judged field by field; only what states something weaker than
// the hardened context is refused (the defaults complete the rest).
describe("weakerThanRestricted", () => {
  const S = "spec.sidecars[0].securityContext";

  it.each([
    ["an absent context", undefined],
    ["a null context", null],
    ["an empty context", {}],
    ["the hardened context", hardenedSecurityContext()],
    // The seeds' Custodian: non-root, read-only root filesystem, no capabilities, nothing else.
    [
      "the seeds' Custodian context",
      { runAsNonRoot: true, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
    ],
    ["a context stating only a uid", { runAsUser: 1000 }],
    ["an empty capabilities object", { capabilities: {} }],
    ["an empty seccompProfile", { seccompProfile: {} }],
    [
      "a Localhost seccomp profile inside the root",
      { seccompProfile: { type: "Localhost", localhostProfile: "jr2/harness.json" } },
    ],
    ["AppArmor RuntimeDefault", { appArmorProfile: { type: "RuntimeDefault" } }],
    ["AppArmor Localhost", { appArmorProfile: { type: "Localhost", localhostProfile: "jr2-harness" } }],
    ["SELinux container_t with a level", { seLinuxOptions: { type: "container_t", level: "s0:c1,c2" } }],
    ["SELinux container_init_t", { seLinuxOptions: { type: "container_init_t" } }],
    ["SELinux container_kvm_t", { seLinuxOptions: { type: "container_kvm_t" } }],
    ["procMount Default", { procMount: "Default" }],
    ["null fields", { runAsNonRoot: null, allowPrivilegeEscalation: null, capabilities: null, seccompProfile: null }],
  ])("admits %s", (_what, sc) => {
    expect(weakerThanRestricted(sc, S)).toEqual([]);
  });

  it.each([
    ["privileged", { privileged: true }, `${S}.privileged`],
    ["escalation allowed", { allowPrivilegeEscalation: true }, `${S}.allowPrivilegeEscalation`],
    ["runAsNonRoot false", { runAsNonRoot: false }, `${S}.runAsNonRoot`],
    ["runAsUser 0", { runAsUser: 0 }, `${S}.runAsUser`],
    ["an added capability", { capabilities: { add: ["NET_BIND_SERVICE"] } }, `${S}.capabilities.add`],
    ["a drop list without ALL", { capabilities: { drop: ["NET_RAW"] } }, `${S}.capabilities.drop`],
    ["an empty drop list", { capabilities: { drop: [] } }, `${S}.capabilities.drop`],
    ["seccomp Unconfined", { seccompProfile: { type: "Unconfined" } }, `${S}.seccompProfile.type`],
    ["an unknown seccomp type", { seccompProfile: { type: "Whatever" } }, `${S}.seccompProfile.type`],
    [
      "a localhostProfile without a type",
      { seccompProfile: { localhostProfile: "p.json" } },
      `${S}.seccompProfile.type`,
    ],
    [
      "a Localhost seccomp profile climbing with ..",
      { seccompProfile: { type: "Localhost", localhostProfile: "../../etc/unconfined.json" } },
      `${S}.seccompProfile.localhostProfile`,
    ],
    [
      "a Localhost seccomp profile at an absolute path",
      { seccompProfile: { type: "Localhost", localhostProfile: "/etc/unconfined.json" } },
      `${S}.seccompProfile.localhostProfile`,
    ],
    ["AppArmor Unconfined", { appArmorProfile: { type: "Unconfined" } }, `${S}.appArmorProfile.type`],
    ["an unknown AppArmor type", { appArmorProfile: { type: "none" } }, `${S}.appArmorProfile.type`],
    ["SELinux spc_t", { seLinuxOptions: { type: "spc_t" } }, `${S}.seLinuxOptions.type`],
    ["a custom SELinux user", { seLinuxOptions: { user: "system_u" } }, `${S}.seLinuxOptions.user`],
    ["a custom SELinux role", { seLinuxOptions: { role: "system_r" } }, `${S}.seLinuxOptions.role`],
    ["procMount Unmasked", { procMount: "Unmasked" }, `${S}.procMount`],
    ["a Windows host process", { windowsOptions: { hostProcess: true } }, `${S}.windowsOptions.hostProcess`],
    ["capabilities that are not an object", { capabilities: "ALL" }, `${S}.capabilities`],
  ])("refuses %s, at its field", (_what, sc, path) => {
    const vs = weakerThanRestricted(sc, S);
    expect(paths(vs)).toEqual([path]);
    expect(vs[0].message.length).toBeGreaterThan(10);
  });

  it("refuses a context that is not an object", () => {
    expect(weakerThanRestricted("root", S)).toEqual([{ path: S, message: "must be an object" }]);
  });

  it("keeps the messages the restricted check gives for the same field", () => {
    expect(weakerThanRestricted({ allowPrivilegeEscalation: true }, S)).toEqual(
      restrictedViolations(restricted({ allowPrivilegeEscalation: true }), S),
    );
  });

  it("reports every weaker field at once", () => {
    const vs = weakerThanRestricted(
      { privileged: true, runAsUser: 0, allowPrivilegeEscalation: true, seLinuxOptions: { type: "spc_t" } },
      S,
    );
    expect(paths(vs).sort()).toEqual(
      [`${S}.allowPrivilegeEscalation`, `${S}.privileged`, `${S}.runAsUser`, `${S}.seLinuxOptions.type`].sort(),
    );
  });
});

describe("AppArmor, SELinux and seccomp files in both profiles", () => {
  const B = "spec.initContainers[0].securityContext";

  it.each([
    [{ appArmorProfile: { type: "Unconfined" } }, `${B}.appArmorProfile.type`],
    [{ seLinuxOptions: { type: "spc_t" } }, `${B}.seLinuxOptions.type`],
    [{ seLinuxOptions: { type: "unconfined_t" } }, `${B}.seLinuxOptions.type`],
    [{ seLinuxOptions: { user: "root" } }, `${B}.seLinuxOptions.user`],
    [{ seLinuxOptions: { role: "sysadm_r" } }, `${B}.seLinuxOptions.role`],
    [{ seccompProfile: { type: "Localhost", localhostProfile: "a/../../b" } }, `${B}.seccompProfile.localhostProfile`],
  ])("the baseline refuses %j", (sc, path) => {
    expect(paths(baselineViolations(sc, B))).toEqual([path]);
  });

  it.each([
    { appArmorProfile: { type: "RuntimeDefault" } },
    { appArmorProfile: { type: "Localhost", localhostProfile: "k8s-nginx" } },
    { seLinuxOptions: { type: "container_t", level: "s0:c123,c456" } },
    { seLinuxOptions: { type: "", user: "", role: "" } },
    { seccompProfile: { type: "Localhost", localhostProfile: "profiles/audit.json" } },
    { seccompProfile: { type: "RuntimeDefault" } },
  ])("the baseline admits %j", (sc) => {
    expect(baselineViolations(sc, B)).toEqual([]);
  });

  it("the restricted check refuses AppArmor Unconfined and SELinux spc_t on a complete context", () => {
    const sc = restricted({ appArmorProfile: { type: "Unconfined" }, seLinuxOptions: { type: "spc_t" } });
    expect(paths(restrictedViolations(sc, P))).toEqual([`${P}.appArmorProfile.type`, `${P}.seLinuxOptions.type`]);
  });

  it("lists the three confined container types", () => {
    expect([...SELINUX_TYPES].sort()).toEqual(["container_init_t", "container_kvm_t", "container_t"]);
  });
});
