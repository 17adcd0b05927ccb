import { sandboxNameViolations, sandboxViolations, withDefaults } from "../../capabilities/rules/sandbox-rules";
import type { Violation } from "../../capabilities/rules/violations";
import { hardenedSecurityContext } from "../../api/hardening";

type Spec = Record<string, unknown>;

const RESTRICTED = () => hardenedSecurityContext();
const spec = (over: Spec = {}): Spec => ({ image: "harness:1", ...over });
const paths = (vs: Violation[]) => vs.map((v) => v.path);
const at = (vs: Violation[], path: string) => vs.filter((v) => v.path === path);
const OWNED = 'for a jr2-owned container (only the "user" container may run as root)';

describe("sandboxViolations: a minimal spec", () => {
  it("admits a spec that states only the image", () => {
    expect(sandboxViolations(spec())).toEqual([]);
  });

  it("admits a spec that names a custodian, a user and an effector sidecar with gitCredentials", () => {
    const s = spec({
      sidecars: [
        { name: "custodian", image: "c:1" },
        { name: "user", image: "u:1", securityContext: { runAsUser: 0 } },
        { name: "effector", image: "e:1" },
      ],
      gitCredentials: [{ name: "gh-push" }],
      initContainers: [{ name: "setup", image: "i:1" }],
      volumes: [{ name: "work", emptyDir: {} }],
      repos: [{ key: "app", url: "https://example.com/app.git" }],
      idleTimeout: "2h",
    });
    expect(sandboxViolations(s)).toEqual([]);
  });

  it.each([undefined, null, "spec", 7, [], true])("refuses a spec that is not an object (%p) at path spec", (input) => {
    expect(paths(sandboxViolations(input))).toEqual(["spec"]);
  });
});

describe("sandboxViolations: image", () => {
  it("refuses a missing image at spec.image", () => {
    expect(paths(sandboxViolations({}))).toEqual(["spec.image"]);
  });

  it("refuses a blank image", () => {
    expect(paths(sandboxViolations(spec({ image: "  " })))).toEqual(["spec.image"]);
  });

  it("refuses a non-string image", () => {
    expect(paths(sandboxViolations(spec({ image: 42 })))).toEqual(["spec.image"]);
  });
});

describe("sandboxViolations: jr2-owned seats meet the restricted profile", () => {
  it("refuses a sidecar allowing privilege escalation, with the exact path and message", () => {
    const s = spec({
      sidecars: [
        { name: "custodian", image: "c:1" },
        { name: "effector", image: "e:1", securityContext: { ...RESTRICTED(), allowPrivilegeEscalation: true } },
      ],
    });
    expect(sandboxViolations(s)).toEqual([
      {
        path: "spec.sidecars[1].securityContext.allowPrivilegeEscalation",
        message: `must be false ${OWNED}`,
      },
    ]);
  });

  it("admits an absent primary securityContext", () => {
    expect(sandboxViolations(spec({ securityContext: undefined }))).toEqual([]);
  });

  it("admits an absent sidecar securityContext", () => {
    expect(sandboxViolations(spec({ sidecars: [{ name: "custodian", image: "c:1" }] }))).toEqual([]);
  });

  it("refuses a primary securityContext running as root at spec.securityContext.*", () => {
    const vs = sandboxViolations(spec({ securityContext: { ...RESTRICTED(), runAsNonRoot: false, runAsUser: 0 } }));
    expect(paths(vs).sort()).toEqual(["spec.securityContext.runAsNonRoot", "spec.securityContext.runAsUser"]);
  });

  it("refuses a privileged primary", () => {
    expect(paths(sandboxViolations(spec({ securityContext: { ...RESTRICTED(), privileged: true } })))).toEqual([
      "spec.securityContext.privileged",
    ]);
  });

  it.each(["custodian", "effector", "anything"])("refuses a %s sidecar that adds a capability", (name) => {
    const s = spec({
      sidecars: [
        { name, image: "x:1", securityContext: { ...RESTRICTED(), capabilities: { drop: ["ALL"], add: ["NET_RAW"] } } },
      ],
    });
    expect(paths(sandboxViolations(s))).toEqual(["spec.sidecars[0].securityContext.capabilities.add"]);
  });

  it("refuses a sidecar with seccomp Unconfined", () => {
    const s = spec({
      sidecars: [
        {
          name: "custodian",
          image: "c:1",
          securityContext: { ...RESTRICTED(), seccompProfile: { type: "Unconfined" } },
        },
      ],
    });
    expect(paths(sandboxViolations(s))).toEqual(["spec.sidecars[0].securityContext.seccompProfile.type"]);
  });

  // Decision 0016: a context that leaves capabilities.drop out is completed, not refused; one that
  // states a drop list without "ALL" states something weaker and is refused.
  it("admits a sidecar context that leaves capabilities.drop out (the defaults write ALL)", () => {
    const s = spec({
      sidecars: [{ name: "effector", image: "e:1", securityContext: { ...RESTRICTED(), capabilities: {} } }],
    });
    expect(sandboxViolations(s)).toEqual([]);
  });

  it("refuses a sidecar context that states a drop list without ALL", () => {
    const s = spec({
      sidecars: [
        { name: "effector", image: "e:1", securityContext: { ...RESTRICTED(), capabilities: { drop: ["NET_RAW"] } } },
      ],
    });
    expect(paths(sandboxViolations(s))).toEqual(["spec.sidecars[0].securityContext.capabilities.drop"]);
  });

  it("refuses a jr2-owned sidecar with procMount Unmasked (restricted includes baseline)", () => {
    const s = spec({
      sidecars: [{ name: "custodian", image: "c:1", securityContext: { ...RESTRICTED(), procMount: "Unmasked" } }],
    });
    expect(paths(sandboxViolations(s))).toContain("spec.sidecars[0].securityContext.procMount");
  });

  it("refuses a host port on a jr2-owned sidecar", () => {
    const s = spec({ sidecars: [{ name: "custodian", image: "c:1", ports: [{ containerPort: 9, hostPort: 9 }] }] });
    expect(paths(sandboxViolations(s))).toEqual(["spec.sidecars[0].ports[0].hostPort"]);
  });
});

describe("sandboxViolations: the user seat meets the baseline", () => {
  const user = (over: Spec) => spec({ sidecars: [{ name: "user", image: "u:1", ...over }] });

  it("admits a user sidecar running as root with privilege escalation", () => {
    expect(
      sandboxViolations(
        user({ securityContext: { runAsUser: 0, runAsNonRoot: false, allowPrivilegeEscalation: true } }),
      ),
    ).toEqual([]);
  });

  it("admits a user sidecar adding a baseline capability", () => {
    expect(sandboxViolations(user({ securityContext: { capabilities: { add: ["CHOWN", "CAP_SETUID"] } } }))).toEqual(
      [],
    );
  });

  it("refuses a privileged user sidecar", () => {
    expect(paths(sandboxViolations(user({ securityContext: { privileged: true } })))).toEqual([
      "spec.sidecars[0].securityContext.privileged",
    ]);
  });

  it("refuses a user sidecar adding SYS_ADMIN", () => {
    expect(paths(sandboxViolations(user({ securityContext: { capabilities: { add: ["SYS_ADMIN"] } } })))).toEqual([
      "spec.sidecars[0].securityContext.capabilities.add[0]",
    ]);
  });

  it("refuses a user sidecar with a host port", () => {
    expect(paths(sandboxViolations(user({ ports: [{ containerPort: 22, hostPort: 2222 }] })))).toEqual([
      "spec.sidecars[0].ports[0].hostPort",
    ]);
  });
});

describe("sandboxViolations: init containers meet the baseline", () => {
  const init = (over: Spec) => spec({ initContainers: [{ name: "setup", image: "i:1", ...over }] });

  it("admits an init container running as root", () => {
    expect(sandboxViolations(init({ securityContext: { runAsUser: 0 } }))).toEqual([]);
  });

  it("refuses a privileged init container", () => {
    expect(paths(sandboxViolations(init({ securityContext: { privileged: true } })))).toEqual([
      "spec.initContainers[0].securityContext.privileged",
    ]);
  });

  it("refuses an init container adding NET_RAW", () => {
    expect(paths(sandboxViolations(init({ securityContext: { capabilities: { add: ["NET_RAW"] } } })))).toEqual([
      "spec.initContainers[0].securityContext.capabilities.add[0]",
    ]);
  });

  it("refuses an init container with a host port", () => {
    expect(paths(sandboxViolations(init({ ports: [{ containerPort: 1, hostPort: 1 }] })))).toEqual([
      "spec.initContainers[0].ports[0].hostPort",
    ]);
  });
});

describe("sandboxViolations: volumes", () => {
  it("refuses a hostPath volume", () => {
    const vs = sandboxViolations(
      spec({
        volumes: [
          { name: "work", emptyDir: {} },
          { name: "node", hostPath: { path: "/" } },
        ],
      }),
    );
    expect(paths(vs)).toEqual(["spec.volumes[1].hostPath"]);
  });

  // Decision 0016: only the names the operator defines are reserved (jr2-anything no longer is).
  it.each(["repo-app", "repo-x", "jr2-shm", "jr2-git-0", "jr2-git-12"])(
    "refuses the reserved volume name %s",
    (name) => {
      expect(paths(sandboxViolations(spec({ volumes: [{ name, emptyDir: {} }] })))).toEqual(["spec.volumes[0].name"]);
    },
  );

  it.each(["jr2-anything", "jr2-ca", "jr2-git-x", "jr2-shm-2", "jr2-gits-0"])(
    "admits the jr2- name %s, which the operator does not define",
    (name) => {
      expect(sandboxViolations(spec({ volumes: [{ name, emptyDir: {} }] }))).toEqual([]);
    },
  );

  it("admits names that only contain a reserved prefix later on", () => {
    expect(
      sandboxViolations(
        spec({
          volumes: [
            { name: "my-repo-x", emptyDir: {} },
            { name: "x-jr2-y", emptyDir: {} },
          ],
        }),
      ),
    ).toEqual([]);
  });
});

describe("sandboxViolations: container names", () => {
  it("refuses a sidecar named harness", () => {
    const vs = sandboxViolations(spec({ sidecars: [{ name: "harness", image: "x:1" }] }));
    expect(paths(vs)).toEqual(["spec.sidecars[0].name"]);
  });

  it("refuses an init container named harness", () => {
    expect(paths(sandboxViolations(spec({ initContainers: [{ name: "harness", image: "x:1" }] })))).toEqual([
      "spec.initContainers[0].name",
    ]);
  });

  it("refuses two sidecars with the same name, at the second", () => {
    const vs = sandboxViolations(
      spec({
        sidecars: [
          { name: "a", image: "x:1" },
          { name: "a", image: "y:1" },
        ],
      }),
    );
    expect(paths(vs)).toEqual(["spec.sidecars[1].name"]);
    expect(vs[0].message).toContain("must be unique");
  });

  it("refuses an init container sharing a sidecar's name", () => {
    const vs = sandboxViolations(
      spec({ sidecars: [{ name: "a", image: "x:1" }], initContainers: [{ name: "a", image: "y:1" }] }),
    );
    expect(paths(vs)).toEqual(["spec.initContainers[0].name"]);
  });

  it("refuses a sidecar without a name", () => {
    expect(paths(sandboxViolations(spec({ sidecars: [{ image: "x:1" }] })))).toEqual(["spec.sidecars[0].name"]);
  });
});

describe("sandboxViolations: repos", () => {
  const repo = (key: unknown, url: unknown = "https://example.com/r.git") => ({ key, url });

  it("admits a DNS-label key of 58 characters", () => {
    expect(sandboxViolations(spec({ repos: [repo("a".repeat(58))] }))).toEqual([]);
  });

  it.each(["a".repeat(59), "Upper", "-lead", "trail-", "has.dot", "", 7])("refuses the key %p", (key) => {
    expect(paths(sandboxViolations(spec({ repos: [repo(key)] })))).toEqual(["spec.repos[0].key"]);
  });

  it("refuses a key listed twice, at the second", () => {
    const vs = sandboxViolations(spec({ repos: [repo("app"), repo("app")] }));
    expect(paths(vs)).toEqual(["spec.repos[1].key"]);
    expect(vs[0].message).toContain("listed twice");
  });

  it("refuses a missing or blank url", () => {
    expect(paths(sandboxViolations(spec({ repos: [{ key: "a" }, repo("b", " ")] })))).toEqual([
      "spec.repos[0].url",
      "spec.repos[1].url",
    ]);
  });
});

describe("sandboxViolations: gitCredentials", () => {
  const effector = { name: "effector", image: "e:1" };
  const creds = (over: Spec = {}) => spec({ gitCredentials: [{ name: "gh" }], sidecars: [effector], ...over });

  it("admits credentials with an effector sidecar", () => {
    expect(sandboxViolations(creds())).toEqual([]);
  });

  it("admits an empty gitCredentials list without an effector", () => {
    expect(sandboxViolations(spec({ gitCredentials: [] }))).toEqual([]);
  });

  it("refuses credentials without an effector sidecar, at spec.gitCredentials", () => {
    expect(paths(sandboxViolations(creds({ sidecars: [{ name: "custodian", image: "c:1" }] })))).toEqual([
      "spec.gitCredentials",
    ]);
  });

  it("does not count an init container named effector as the effector sidecar", () => {
    expect(paths(sandboxViolations(creds({ sidecars: [], initContainers: [effector] })))).toEqual([
      "spec.gitCredentials",
    ]);
  });

  it.each(["UPPER", "has_underscore", "", "-x", "a".repeat(254), 5])("refuses the Secret name %p", (name) => {
    expect(paths(sandboxViolations(creds({ gitCredentials: [{ name }] })))).toEqual(["spec.gitCredentials[0].name"]);
  });

  it("admits a dotted Secret name", () => {
    expect(sandboxViolations(creds({ gitCredentials: [{ name: "gh.push-token" }] }))).toEqual([]);
  });

  it("refuses a Secret listed twice, at the second", () => {
    expect(paths(sandboxViolations(creds({ gitCredentials: [{ name: "gh" }, { name: "gh" }] })))).toEqual([
      "spec.gitCredentials[1].name",
    ]);
  });

  it("refuses the primary reaching a credential Secret by env.valueFrom.secretKeyRef", () => {
    const vs = sandboxViolations(
      creds({ env: [{ name: "T", valueFrom: { secretKeyRef: { name: "gh", key: "t" } } }] }),
    );
    expect(paths(vs)).toEqual(["spec.env[0].valueFrom.secretKeyRef"]);
    expect(vs[0].message).toContain('"gh"');
  });

  it("refuses the primary reaching a credential Secret by envFrom.secretRef", () => {
    expect(paths(sandboxViolations(creds({ envFrom: [{ secretRef: { name: "gh" } }] })))).toEqual([
      "spec.envFrom[0].secretRef",
    ]);
  });

  it("refuses a sidecar mounting a secret volume of a credential Secret", () => {
    const s = creds({
      volumes: [{ name: "stolen", secret: { secretName: "gh" } }],
      sidecars: [effector, { name: "custodian", image: "c:1", volumeMounts: [{ name: "stolen", mountPath: "/s" }] }],
    });
    expect(paths(sandboxViolations(s))).toEqual(["spec.sidecars[1].volumeMounts[0]"]);
  });

  it("refuses an init container mounting a projected volume of a credential Secret", () => {
    const s = creds({
      volumes: [{ name: "stolen", projected: { sources: [{ configMap: { name: "c" } }, { secret: { name: "gh" } }] } }],
      initContainers: [{ name: "setup", image: "i:1", volumeMounts: [{ name: "stolen", mountPath: "/s" }] }],
    });
    expect(paths(sandboxViolations(s))).toEqual(["spec.initContainers[0].volumeMounts[0]"]);
  });

  it("refuses the user sidecar reaching a credential Secret by envFrom", () => {
    const s = creds({ sidecars: [effector, { name: "user", image: "u:1", envFrom: [{ secretRef: { name: "gh" } }] }] });
    expect(paths(sandboxViolations(s))).toEqual(["spec.sidecars[1].envFrom[0].secretRef"]);
  });

  it("lets the effector itself reach a credential Secret", () => {
    const s = creds({
      volumes: [{ name: "mine", secret: { secretName: "gh" } }],
      sidecars: [
        {
          ...effector,
          volumeMounts: [{ name: "mine", mountPath: "/m" }],
          env: [{ name: "T", valueFrom: { secretKeyRef: { name: "gh", key: "t" } } }],
          envFrom: [{ secretRef: { name: "gh" } }],
        },
      ],
    });
    expect(sandboxViolations(s)).toEqual([]);
  });

  it("lets other containers reach Secrets that are not credentials", () => {
    const s = creds({
      volumes: [{ name: "other", secret: { secretName: "unrelated" } }],
      volumeMounts: [{ name: "other", mountPath: "/o" }],
      envFrom: [{ secretRef: { name: "unrelated" } }],
    });
    expect(sandboxViolations(s)).toEqual([]);
  });

  // The operator's own projected volume jr2-git-<n> carries credential n: a volumeMount naming it
  // reaches the Secret just as a spec volume would (buildPod adds that volume to the pod).
  it("refuses a sidecar mounting the operator's jr2-git-0 credential volume by name", () => {
    const s = creds({
      sidecars: [effector, { name: "custodian", image: "c:1", volumeMounts: [{ name: "jr2-git-0", mountPath: "/s" }] }],
    });
    expect(paths(sandboxViolations(s))).toContain("spec.sidecars[1].volumeMounts[0]");
  });

  it("refuses an init container mounting the operator's jr2-git-0 credential volume by name", () => {
    const s = creds({
      initContainers: [{ name: "setup", image: "i:1", volumeMounts: [{ name: "jr2-git-0", mountPath: "/s" }] }],
    });
    expect(paths(sandboxViolations(s))).toContain("spec.initContainers[0].volumeMounts[0]");
  });

  it("refuses the primary mounting the operator's jr2-git-0 credential volume by name", () => {
    const s = creds({ volumeMounts: [{ name: "jr2-git-0", mountPath: "/s" }] });
    expect(paths(sandboxViolations(s))).toContain("spec.volumeMounts[0]");
  });
});

describe("sandboxViolations: idleTimeout", () => {
  it.each(["1m", "60s", "30m", "1h30m", "168h", "167h60m", "1.5h"])("admits %s", (idleTimeout) => {
    expect(sandboxViolations(spec({ idleTimeout }))).toEqual([]);
  });

  it("admits an absent idleTimeout", () => {
    expect(sandboxViolations(spec())).toEqual([]);
  });

  it.each(["59s", "168h1s", "169h", "0s"])("refuses %s as out of range", (idleTimeout) => {
    const vs = sandboxViolations(spec({ idleTimeout }));
    expect(paths(vs)).toEqual(["spec.idleTimeout"]);
    expect(vs[0].message).toContain("between 1m and 168h");
  });

  it.each(["30", "1d", "", "-5m", "soon", "m30"])("refuses %p as not a Go duration", (idleTimeout) => {
    const vs = sandboxViolations(spec({ idleTimeout }));
    expect(paths(vs)).toEqual(["spec.idleTimeout"]);
    expect(vs[0].message).toContain("Go duration");
  });

  it("refuses a non-string idleTimeout", () => {
    expect(paths(sandboxViolations(spec({ idleTimeout: 3600 })))).toEqual(["spec.idleTimeout"]);
    expect(paths(sandboxViolations(spec({ idleTimeout: null })))).toEqual(["spec.idleTimeout"]);
  });

  it("lowers the floor to rules.minIdleTimeoutMs", () => {
    expect(sandboxViolations(spec({ idleTimeout: "5s" }), undefined, { minIdleTimeoutMs: 1000 })).toEqual([]);
    const vs = sandboxViolations(spec({ idleTimeout: "500ms" }), undefined, { minIdleTimeoutMs: 1000 });
    expect(paths(vs)).toEqual(["spec.idleTimeout"]);
    expect(vs[0].message).toContain("between 1s and 168h");
  });
});

// Decision 0051: each entry of spec.egress.allow is a rule the egress point can match.
describe("sandboxViolations: egress", () => {
  it("admits host, port, wildcard and IP rules, an empty list, and no egress at all", () => {
    const allow = [
      "api.example.com",
      "api.example.com:443",
      "*.pypi.org",
      "*.pypi.org:443",
      "203.0.113.7",
      "[2001:db8::1]:8443",
    ];
    expect(sandboxViolations(spec({ egress: { allow } }))).toEqual([]);
    expect(sandboxViolations(spec({ egress: { allow: [] } }))).toEqual([]);
    expect(sandboxViolations(spec({ egress: {} }))).toEqual([]);
  });

  it("refuses each bad entry by its index, with the fix", () => {
    const vs = sandboxViolations(spec({ egress: { allow: ["ok.example", "https://x.example/path", "*", 7] } }));
    expect(paths(vs)).toEqual(["spec.egress.allow[1]", "spec.egress.allow[2]", "spec.egress.allow[3]"]);
    for (const v of vs) expect(v.message).toMatch(/e\.g\./);
  });

  it("refuses a list past 256 entries, and shapes that are no list", () => {
    const long = Array.from({ length: 257 }, (_, i) => `h${i}.example`);
    expect(paths(sandboxViolations(spec({ egress: { allow: long } })))).toEqual(["spec.egress.allow"]);
    expect(paths(sandboxViolations(spec({ egress: { allow: "api.example.com" } })))).toEqual(["spec.egress.allow"]);
    expect(paths(sandboxViolations(spec({ egress: ["api.example.com"] })))).toEqual(["spec.egress"]);
  });
});

// Decision 0016: the spec is no longer immutable. An unchanged spec is a re-apply (not judged again); a
// changed one is judged as a create is, and accepted when it keeps the rules.
describe("sandboxViolations: update", () => {
  const stored = () => withDefaults(spec({ env: [{ name: "A", value: "1" }] }));

  it("admits an identical spec", () => {
    expect(sandboxViolations(stored(), stored())).toEqual([]);
  });

  it("admits a spec equal but for keys set to undefined", () => {
    expect(sandboxViolations({ ...stored(), shmSize: undefined }, stored())).toEqual([]);
  });

  it("accepts a change of image and env", () => {
    expect(sandboxViolations({ ...stored(), image: "harness:2", env: [] }, stored())).toEqual([]);
  });

  it("accepts a removed field", () => {
    const { env: _env, ...without } = stored();
    expect(sandboxViolations(without, stored())).toEqual([]);
  });

  it("accepts an added field", () => {
    expect(sandboxViolations({ ...stored(), shmSize: "1Gi" }, stored())).toEqual([]);
  });

  it("accepts a nested change", () => {
    const old = withDefaults(spec({ sidecars: [{ name: "c", image: "c:1" }] }));
    const next = withDefaults(spec({ sidecars: [{ name: "c", image: "c:2" }] }));
    expect(sandboxViolations(next, old)).toEqual([]);
  });

  it("judges a changed spec as a create, with no word of immutability", () => {
    const vs = sandboxViolations({ ...stored(), image: "" }, stored());
    expect(paths(vs)).toEqual(["spec.image"]);
    expect(at(vs, "spec.image").some((v) => v.message.includes("immutable"))).toBe(false);
  });

  it("refuses a change that weakens a context, as a create would", () => {
    const next = { ...stored(), securityContext: { ...RESTRICTED(), allowPrivilegeEscalation: true } };
    expect(paths(sandboxViolations(next, stored()))).toEqual(["spec.securityContext.allowPrivilegeEscalation"]);
  });

  it("does not judge again a stored spec left unchanged (a keepalive), even one today's rules refuse", () => {
    const legacy = { ...stored(), volumes: [{ name: "n", nfs: { server: "x", path: "/" } }] };
    expect(paths(sandboxViolations(legacy))).toEqual(["spec.volumes[0].nfs"]);
    expect(sandboxViolations(legacy, legacy)).toEqual([]);
  });

  it("treats a re-apply that left the defaulted fields out as no change", () => {
    const applied = spec({ env: [{ name: "A", value: "1" }], sidecars: [{ name: "custodian", image: "c:1" }] });
    const storedSpec = withDefaults(applied);
    // The mutation runs first on the update too, so the validation sees the defaults again.
    expect(withDefaults(applied)).toEqual(storedSpec);
    expect(sandboxViolations(withDefaults(applied), storedSpec)).toEqual([]);
  });
});

describe("withDefaults", () => {
  it("writes the hardened context into the primary when absent", () => {
    expect(withDefaults(spec()).securityContext).toEqual(hardenedSecurityContext());
  });

  it("writes fsGroup 2000 and idleTimeout 30m when absent", () => {
    const d = withDefaults(spec());
    expect(d.fsGroup).toBe(2000);
    expect(d.idleTimeout).toBe("30m");
  });

  it("keeps a stated fsGroup and idleTimeout", () => {
    const d = withDefaults(spec({ fsGroup: 0, idleTimeout: "2h" }));
    expect(d.fsGroup).toBe(0);
    expect(d.idleTimeout).toBe("2h");
  });

  it("writes the hardened context into every sidecar that states none but user (its NET_RAW drop only)", () => {
    const d = withDefaults(
      spec({
        sidecars: [
          { name: "custodian", image: "c:1" },
          { name: "user", image: "u:1" },
          { name: "effector", image: "e:1" },
        ],
      }),
    ) as { sidecars: Spec[] };
    expect(d.sidecars[0].securityContext).toEqual(hardenedSecurityContext());
    expect(d.sidecars[1]).toEqual({
      name: "user",
      image: "u:1",
      securityContext: { capabilities: { drop: ["NET_RAW"] } },
    });
    expect(d.sidecars[2].securityContext).toEqual(hardenedSecurityContext());
  });

  // Decision 0016: a stated context is completed field by field, keeping every field it states.
  it("completes stated contexts field by field, keeping what they state", () => {
    const primary = { runAsUser: 1234, runAsNonRoot: true };
    const side = { runAsUser: 7 };
    const d = withDefaults(
      spec({ securityContext: primary, sidecars: [{ name: "effector", image: "e:1", securityContext: side }] }),
    ) as {
      securityContext: unknown;
      sidecars: Spec[];
    };
    expect(d.securityContext).toEqual({ ...hardenedSecurityContext(), runAsUser: 1234, runAsNonRoot: true });
    expect(d.sidecars[0].securityContext).toEqual({ ...hardenedSecurityContext(), runAsUser: 7 });
  });

  it("writes nothing into init containers", () => {
    const inits = [
      { name: "setup", image: "i:1" },
      { name: "root", image: "r:1", securityContext: { runAsUser: 0 } },
    ];
    const d = withDefaults(spec({ initContainers: inits })) as { initContainers: Spec[] };
    expect(d.initContainers).toEqual([
      { name: "setup", image: "i:1" },
      { name: "root", image: "r:1", securityContext: { runAsUser: 0 } },
    ]);
  });

  it("is idempotent", () => {
    const s = spec({
      sidecars: [
        { name: "custodian", image: "c:1" },
        { name: "user", image: "u:1" },
      ],
      initContainers: [{ name: "setup", image: "i:1" }],
    });
    expect(withDefaults(withDefaults(s))).toEqual(withDefaults(s));
  });

  it("does not modify its input", () => {
    const s = spec({ sidecars: [{ name: "custodian", image: "c:1" }] });
    withDefaults(s);
    expect(s).toEqual({ image: "harness:1", sidecars: [{ name: "custodian", image: "c:1" }] });
  });

  it("yields a spec the validator admits from a minimal one", () => {
    expect(sandboxViolations(withDefaults(spec({ sidecars: [{ name: "custodian", image: "c:1" }] })))).toEqual([]);
  });
});

// Decision 0016: field-level hardening. A stated context that is hardened in substance but not in every
// field is completed, not refused.
describe("sandboxViolations: stated contexts, field by field", () => {
  const custodianCtx = { runAsNonRoot: true, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } };

  it("admits the seeds' Custodian context and completes it", () => {
    const s = spec({ sidecars: [{ name: "custodian", image: "c:1", securityContext: custodianCtx }] });
    expect(sandboxViolations(s)).toEqual([]);
    const d = withDefaults(s) as { sidecars: Spec[] };
    expect(d.sidecars[0].securityContext).toEqual({
      ...custodianCtx,
      allowPrivilegeEscalation: false,
      seccompProfile: { type: "RuntimeDefault" },
    });
  });

  it.each([
    ["the primary", (sc: Spec) => spec({ securityContext: sc }), "spec.securityContext"],
    [
      "a sidecar",
      (sc: Spec) => spec({ sidecars: [{ name: "x", image: "x:1", securityContext: sc }] }),
      "spec.sidecars[0].securityContext",
    ],
  ])("admits %s stating only a uid, and completes it", (_seat, make, _path) => {
    const s = make({ runAsUser: 1000 });
    expect(sandboxViolations(s)).toEqual([]);
    expect(sandboxViolations(withDefaults(s))).toEqual([]);
  });

  it.each([
    [{ seLinuxOptions: { type: "spc_t" } }, "spec.securityContext.seLinuxOptions.type"],
    [{ appArmorProfile: { type: "Unconfined" } }, "spec.securityContext.appArmorProfile.type"],
    [
      { seccompProfile: { type: "Localhost", localhostProfile: "../x.json" } },
      "spec.securityContext.seccompProfile.localhostProfile",
    ],
    [{ runAsNonRoot: false }, "spec.securityContext.runAsNonRoot"],
    [{ capabilities: { add: ["CHOWN"] } }, "spec.securityContext.capabilities.add"],
  ])("refuses the primary stating %j", (sc, path) => {
    expect(paths(sandboxViolations(spec({ securityContext: sc })))).toEqual([path]);
  });

  it("leaves the user seat's context as stated and judges it by the baseline", () => {
    const user = { name: "user", image: "u:1", securityContext: { runAsUser: 0, allowPrivilegeEscalation: true } };
    const s = spec({ sidecars: [user] });
    expect(sandboxViolations(s)).toEqual([]);
    // Decision 0048: the NET_RAW drop, the one default the seat gets.
    expect((withDefaults(s) as { sidecars: Spec[] }).sidecars[0]).toEqual({
      ...user,
      securityContext: { ...user.securityContext, capabilities: { drop: ["NET_RAW"] } },
    });
  });

  it.each([
    [{ appArmorProfile: { type: "Unconfined" } }, "spec.sidecars[0].securityContext.appArmorProfile.type"],
    [{ seLinuxOptions: { type: "spc_t" } }, "spec.sidecars[0].securityContext.seLinuxOptions.type"],
    [
      { seccompProfile: { type: "Localhost", localhostProfile: "/etc/x" } },
      "spec.sidecars[0].securityContext.seccompProfile.localhostProfile",
    ],
    [{ procMount: "Unmasked" }, "spec.sidecars[0].securityContext.procMount"],
  ])("refuses the user seat stating %j (baseline)", (sc, path) => {
    expect(paths(sandboxViolations(spec({ sidecars: [{ name: "user", image: "u:1", securityContext: sc }] })))).toEqual(
      [path],
    );
  });

  it("refuses an init container with SELinux spc_t (baseline)", () => {
    const s = spec({
      initContainers: [{ name: "i", image: "i:1", securityContext: { seLinuxOptions: { type: "spc_t" } } }],
    });
    expect(paths(sandboxViolations(s))).toEqual(["spec.initContainers[0].securityContext.seLinuxOptions.type"]);
  });
});

describe("sandboxViolations: the restricted profile's volume types, for the whole pod", () => {
  it.each([
    ["configMap", { configMap: { name: "c" } }],
    ["csi", { csi: { driver: "secrets-store.csi.k8s.io" } }],
    ["downwardAPI", { downwardAPI: { items: [] } }],
    ["emptyDir", { emptyDir: {} }],
    ["ephemeral", { ephemeral: { volumeClaimTemplate: { spec: {} } } }],
    ["persistentVolumeClaim", { persistentVolumeClaim: { claimName: "c" } }],
    [
      "projected",
      { projected: { sources: [{ configMap: { name: "c" } }, { downwardAPI: {} }, { secret: { name: "s" } }] } },
    ],
    [
      "projected clusterTrustBundle",
      { projected: { sources: [{ clusterTrustBundle: { name: "b", path: "ca.pem" } }] } },
    ],
    ["secret", { secret: { secretName: "s" } }],
    ["image", { image: { reference: "ghcr.io/example/harness:1" } }],
  ])("admits %s", (_type, source) => {
    expect(sandboxViolations(spec({ volumes: [{ name: "v", ...source }] }))).toEqual([]);
  });

  it.each([
    ["hostPath", { hostPath: { path: "/" } }],
    ["nfs", { nfs: { server: "nfs.example", path: "/" } }],
    ["iscsi", { iscsi: { targetPortal: "x", iqn: "y", lun: 0 } }],
    ["gitRepo", { gitRepo: { repository: "https://example.com/r.git" } }],
    ["awsElasticBlockStore", { awsElasticBlockStore: { volumeID: "v" } }],
    ["cephfs", { cephfs: { monitors: ["m"] } }],
    ["flexVolume", { flexVolume: { driver: "d" } }],
    ["rbd", { rbd: { monitors: ["m"], image: "i" } }],
    ["glusterfs", { glusterfs: { endpoints: "e", path: "p" } }],
  ])("refuses %s, at its field", (type, source) => {
    const vs = sandboxViolations(spec({ volumes: [{ name: "v", ...source }] }));
    expect(paths(vs)).toEqual([`spec.volumes[0].${type}`]);
    expect(vs[0].message).toContain("not");
  });

  it("refuses a serviceAccountToken projection: a Sandbox gets no API credential", () => {
    const vs = sandboxViolations(
      spec({
        volumes: [
          {
            name: "tok",
            projected: { sources: [{ configMap: { name: "c" } }, { serviceAccountToken: { path: "t" } }] },
          },
        ],
      }),
    );
    expect(paths(vs)).toEqual(["spec.volumes[0].projected.sources[1].serviceAccountToken"]);
    expect(vs[0].message).toContain("no Kubernetes API credential");
  });

  it("refuses a podCertificate projection", () => {
    const s = spec({ volumes: [{ name: "c", projected: { sources: [{ podCertificate: { signerName: "x" } }] } }] });
    expect(paths(sandboxViolations(s))).toEqual(["spec.volumes[0].projected.sources[0].podCertificate"]);
  });
});

describe("sandboxViolations: Repo cache mounts", () => {
  const repos = [{ key: "app", url: "https://example.com/app.git" }];
  const mount = (over: Spec = {}) => ({ name: "repo-app", mountPath: "/repos/app", ...over });

  it.each([
    ["the primary", (m: Spec) => spec({ repos, volumeMounts: [m] }), "spec"],
    [
      "a sidecar",
      (m: Spec) => spec({ repos, sidecars: [{ name: "custodian", image: "c:1", volumeMounts: [m] }] }),
      "spec.sidecars[0]",
    ],
    [
      "the user seat",
      (m: Spec) => spec({ repos, sidecars: [{ name: "user", image: "u:1", volumeMounts: [m] }] }),
      "spec.sidecars[0]",
    ],
    [
      "an init container",
      (m: Spec) => spec({ repos, initContainers: [{ name: "i", image: "i:1", volumeMounts: [m] }] }),
      "spec.initContainers[0]",
    ],
  ])("in %s: admits one that says nothing (made read-only), refuses a read-write one", (_seat, make, at) => {
    expect(sandboxViolations(make(mount()))).toEqual([]);
    expect(JSON.stringify(withDefaults(make(mount())))).toContain(
      '"name":"repo-app","mountPath":"/repos/app","readOnly":true',
    );
    expect(sandboxViolations(make(mount({ readOnly: true })))).toEqual([]);
    const vs = sandboxViolations(make(mount({ readOnly: false })));
    expect(paths(vs)).toEqual([`${at}.volumeMounts[0].readOnly`]);
    expect(vs[0].message).toContain("read-only");
  });

  it("refuses a mount of the cache of a Repo spec.repos does not name", () => {
    const vs = sandboxViolations(
      spec({ repos, volumeMounts: [{ name: "repo-other", mountPath: "/r", readOnly: true }] }),
    );
    expect(paths(vs)).toEqual(["spec.volumeMounts[0].name"]);
    expect(vs[0].message).toContain("spec.repos");
  });
});

describe("sandboxNameViolations", () => {
  it.each(["a", "ws-189168eae0", "sandbox-1", "a".repeat(63)])("admits %s", (name) => {
    expect(sandboxNameViolations(name)).toEqual([]);
  });

  it.each(["dotted.name", "Upper", "1abc", "-lead", "trail-", "under_score", "a".repeat(64), ""])(
    "refuses %p, at metadata.name, naming the rule",
    (name) => {
      const vs = sandboxNameViolations(name);
      expect(paths(vs)).toEqual(["metadata.name"]);
      expect(vs[0].message).toContain("DNS-1035");
    },
  );

  it.each([undefined, null, 7, {}])("refuses a name that is not a string (%p) without throwing", (name) => {
    expect(paths(sandboxNameViolations(name))).toEqual(["metadata.name"]);
  });
});

describe("refusals name fields and Secret names, never values", () => {
  it("does not echo an env value or a command", () => {
    const secret = "hunter2-s3cr3t";
    const vs = sandboxViolations(
      spec({
        env: [{ name: "TOKEN", value: secret }],
        command: [secret],
        securityContext: { privileged: true },
        volumes: [{ name: "n", nfs: { server: secret, path: "/" } }],
      }),
    );
    expect(vs.length).toBeGreaterThan(0);
    for (const v of vs) expect(`${v.path} ${v.message}`).not.toContain(secret);
  });
});
