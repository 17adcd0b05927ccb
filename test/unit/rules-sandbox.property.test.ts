// Property tests of the Sandbox admission rules: generated specs, hostile ones included, against
// the guarantees the rules exist for (never throw; say where; an admitted spec yields a pod that
// keeps the hardened context and the credential boundary, and that the pod guard accepts;
// defaulting is idempotent; a stated context is refused exactly when its completion is not
// restricted; an unchanged spec is never judged again).
import fc from "fast-check";
import { restrictedViolations, weakerThanRestricted } from "../../capabilities/rules/containers";
import { podViolations } from "../../capabilities/rules/pods";
import { sandboxNameViolations, sandboxViolations, withDefaults } from "../../capabilities/rules/sandbox-rules";
import type { SandboxSpec } from "../../api/crd";
import type { SecurityContext } from "../../api/crd/generated/corev1";
import { repoCachesContribution } from "../../capabilities/repo/caches";
import { hardenedContext, hardenedSecurityContext, userSeatContext } from "../../api/hardening";
import { buildPod } from "../../capabilities/sandbox/pod";

type Obj = Record<string, unknown>;

const CRED_NAMES = ["gh", "gl", "push.token"] as const;
/** Names the operator gives its own volumes: jr2-git-<n> carries credential n. */
const OPERATOR_VOLUMES = ["jr2-git-0", "jr2-git-1", "jr2-shm"] as const;

/** Drops the keys whose value is undefined, so "absent" is absent. */
const defined = (o: Obj): Obj => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
/** The value with probability p, else undefined (absent). */
const maybe = <T>(a: fc.Arbitrary<T>, p = 0.5): fc.Arbitrary<T | undefined> =>
  fc.oneof(
    { arbitrary: fc.constant(undefined), weight: Math.round((1 - p) * 100) },
    { arbitrary: a, weight: Math.round(p * 100) },
  );

/** Any value, with object keys drawn partly from Object.prototype's names (JSON can carry them). */
const junk = fc.anything({
  maxDepth: 2,
  key: fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom("toString", "valueOf", "constructor", "__proto__")),
});

type Options = {
  /** Hostile leaves (any value) where names and capabilities go. */
  junk: boolean;
  /** Volume mounts may name the operator's own volumes (jr2-git-<n>, jr2-shm). */
  operatorMounts: boolean;
};

/** Each field of a container context, stated or not, hardened or weaker (no hostile leaves). */
function contextFields(): fc.Arbitrary<Obj> {
  const capabilities = fc
    .record({
      drop: maybe(fc.array(fc.constantFrom("ALL", "NET_RAW", "all"), { maxLength: 2 })),
      add: maybe(fc.array(fc.constantFrom("SYS_ADMIN", "CHOWN", "NET_BIND_SERVICE"), { maxLength: 2 }), 0.3),
    })
    .map(defined);
  const seccompProfile = fc
    .record({
      type: maybe(fc.constantFrom("RuntimeDefault", "Localhost", "Unconfined", "")),
      localhostProfile: maybe(fc.constantFrom("jr2/p.json", "../p.json", "/etc/p.json"), 0.2),
    })
    .map(defined);
  return fc
    .record({
      privileged: maybe(fc.boolean()),
      runAsNonRoot: maybe(fc.boolean()),
      runAsUser: maybe(fc.constantFrom(0, 1000, 65534)),
      allowPrivilegeEscalation: maybe(fc.boolean()),
      capabilities: maybe(capabilities),
      seccompProfile: maybe(seccompProfile),
      procMount: maybe(fc.constantFrom("Default", "Unmasked"), 0.2),
      windowsOptions: maybe(fc.record({ hostProcess: fc.boolean() }), 0.15),
      readOnlyRootFilesystem: maybe(fc.boolean(), 0.2),
      appArmorProfile: maybe(fc.record({ type: fc.constantFrom("RuntimeDefault", "Localhost", "Unconfined") }), 0.15),
      seLinuxOptions: maybe(
        fc
          .record({
            type: maybe(fc.constantFrom("container_t", "container_init_t", "spc_t", "")),
            user: maybe(fc.constantFrom("system_u", ""), 0.2),
            level: maybe(fc.constant("s0:c1,c2"), 0.2),
          })
          .map(defined),
        0.15,
      ),
    })
    .map(defined);
}

function specArbitrary(opts: Options): fc.Arbitrary<Obj> {
  const withJunk = <T>(a: fc.Arbitrary<T>): fc.Arbitrary<unknown> =>
    opts.junk ? fc.oneof({ arbitrary: a, weight: 8 }, { arbitrary: junk, weight: 1 }) : a;

  const secretRef = fc.constantFrom<string>(...CRED_NAMES, "other-secret");
  const capName = withJunk(
    fc.oneof(
      fc.constantFrom("SYS_ADMIN", "NET_RAW", "CAP_SYS_ADMIN", "SYS_PTRACE", "CHOWN", "NET_BIND_SERVICE", "CAP_KILL"),
      fc.string({ maxLength: 8 }),
    ),
  );
  const capabilities = fc
    .record({
      drop: maybe(fc.array(fc.constantFrom("ALL", "NET_RAW", "all"), { maxLength: 2 })),
      add: maybe(fc.array(capName, { maxLength: 2 }), 0.3),
    })
    .map(defined);
  const scFields = contextFields();
  // A few hostile fields over the hardened context: often still restricted, sometimes not.
  const tweak = fc
    .record({
      privileged: maybe(fc.boolean(), 0.3),
      runAsUser: maybe(fc.constantFrom(0, 1000, 65534), 0.3),
      allowPrivilegeEscalation: maybe(fc.boolean(), 0.2),
      capabilities: maybe(capabilities, 0.2),
      seccompProfile: maybe(fc.constantFrom({ type: "Localhost" }, { type: "Unconfined" }), 0.25),
      appArmorProfile: maybe(fc.constantFrom({ type: "RuntimeDefault" }, { type: "Unconfined" }), 0.1),
      seLinuxOptions: maybe(fc.constantFrom({ type: "container_t" }, { type: "spc_t" }), 0.1),
    })
    .map((o) => ({ ...hardenedSecurityContext(), ...defined(o) }));
  // Hardened in substance but not in every field (the seeds' Custodian states three fields).
  const partial = fc
    .subarray(["runAsNonRoot", "allowPrivilegeEscalation", "capabilities", "seccompProfile"] as const)
    .chain((keep) =>
      fc
        .record({ readOnlyRootFilesystem: maybe(fc.boolean()), runAsUser: maybe(fc.constantFrom(1000, 65534)) })
        .map((extra) => ({
          ...Object.fromEntries(keep.map((k) => [k, hardenedSecurityContext()[k]])),
          ...defined(extra),
        })),
    );
  const securityContext = fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 10 },
    { arbitrary: fc.constant(hardenedSecurityContext()), weight: 4 },
    { arbitrary: partial, weight: 3 },
    { arbitrary: tweak, weight: 3 },
    { arbitrary: scFields, weight: 1 },
    { arbitrary: fc.constantFrom<unknown>(null, "root", 0, [], {}), weight: 1 },
  );

  const mountName = fc.constantFrom<string>(
    "work",
    "cred-vol",
    "proj-vol",
    "other-vol",
    "jr2-ca",
    ...(opts.operatorMounts ? OPERATOR_VOLUMES : []),
  );
  // A Repo cache, mounted by name as the seeds' user seat and effector do.
  const repoMountName = fc.constantFrom("repo-app", "repo-lib");
  const volumeMounts = maybe(
    fc.array(
      fc
        .record({
          name: fc.oneof({ arbitrary: mountName, weight: 4 }, { arbitrary: repoMountName, weight: 1 }),
          mountPath: fc.constantFrom("/a", "/b"),
          readOnly: maybe(fc.boolean()),
        })
        .map(defined),
      { maxLength: 2 },
    ),
    0.4,
  );
  const env = maybe(
    fc.array(
      fc.oneof(
        fc.record({ name: fc.constant("A"), value: fc.string({ maxLength: 4 }) }),
        fc.record({
          name: fc.constant("T"),
          valueFrom: fc.record({ secretKeyRef: fc.record({ name: secretRef, key: fc.constant("k") }) }),
        }),
        fc.record({
          name: fc.constant("C"),
          valueFrom: fc.record({ configMapKeyRef: fc.record({ name: secretRef, key: fc.constant("k") }) }),
        }),
      ),
      { maxLength: 2 },
    ),
    0.3,
  );
  const envFrom = maybe(
    fc.array(
      fc.oneof(
        fc.record({ secretRef: fc.record({ name: secretRef }) }),
        fc.record({ configMapRef: fc.record({ name: secretRef }) }),
      ),
      { maxLength: 2 },
    ),
    0.25,
  );
  const ports = maybe(
    fc.array(
      fc
        .record({ containerPort: fc.constantFrom(80, 9000), hostPort: maybe(fc.constantFrom(0, 80, 8080), 0.3) })
        .map(defined),
      { maxLength: 2 },
    ),
    0.25,
  );
  const container = (name: fc.Arbitrary<unknown>) =>
    fc
      .record({
        name,
        image: fc.constant("side:1"),
        securityContext,
        volumeMounts,
        env,
        envFrom,
        ports,
      })
      .map(defined);

  const sidecarName = withJunk(
    fc.oneof(
      { arbitrary: fc.constantFrom("user", "effector", "custodian", "side-a"), weight: 10 },
      { arbitrary: fc.constantFrom("harness", ""), weight: 1 },
      { arbitrary: fc.string({ maxLength: 6 }), weight: 1 },
    ),
  );
  const initName = withJunk(
    fc.oneof(
      { arbitrary: fc.constantFrom("init-a", "init-b"), weight: 10 },
      { arbitrary: fc.constantFrom("harness", "effector", "user", "custodian"), weight: 1 },
    ),
  );
  const byName = (c: Obj) => JSON.stringify(c.name) ?? "";
  // The usual seats, each present or not, in order: custodian, user, effector.
  const seats = fc
    .tuple(
      maybe(container(fc.constant("custodian"))),
      maybe(container(fc.constant("user"))),
      maybe(container(fc.constant("effector")), 0.75),
    )
    .map((cs) => cs.filter((c) => c !== undefined));
  const sidecars = maybe(
    fc.oneof(
      { arbitrary: seats, weight: 8 },
      { arbitrary: fc.uniqueArray(container(sidecarName), { maxLength: 4, selector: byName }), weight: 6 },
      { arbitrary: fc.array(container(sidecarName), { maxLength: 4 }), weight: 1 },
    ),
    0.85,
  );
  const initContainers = maybe(fc.uniqueArray(container(initName), { maxLength: 2, selector: byName }), 0.4);

  const volume = fc.oneof(
    { arbitrary: fc.constant({ name: "work", emptyDir: {} }), weight: 4 },
    { arbitrary: secretRef.map((s) => ({ name: "cred-vol", secret: { secretName: s } })), weight: 3 },
    {
      arbitrary: secretRef.map((s) => ({
        name: "proj-vol",
        projected: { defaultMode: 0o400, sources: [{ configMap: { name: "cm" } }, { secret: { name: s } }] },
      })),
      weight: 3,
    },
    { arbitrary: fc.constantFrom("other-vol", "repo-x").map((name) => ({ name, hostPath: { path: "/" } })), weight: 1 },
    { arbitrary: fc.constantFrom("repo-y", "jr2-git-0", "jr2-shm").map((name) => ({ name, emptyDir: {} })), weight: 1 },
    // jr2-ca: a jr2- name the operator does not define (the seeds' trust ConfigMap).
    { arbitrary: fc.constant({ name: "jr2-ca", configMap: { name: "jr2-ca" } }), weight: 2 },
    {
      arbitrary: fc.constantFrom<Obj>(
        { name: "other-vol", nfs: { server: "n", path: "/" } },
        { name: "other-vol", gitRepo: { repository: "r" } },
        { name: "other-vol", image: { reference: "ghcr.io/x/y:1" } },
        { name: "other-vol", csi: { driver: "d" } },
        { name: "proj-vol", projected: { sources: [{ serviceAccountToken: { path: "token" } }] } },
      ),
      weight: 1,
    },
  );
  const volumes = maybe(fc.uniqueArray(volume, { maxLength: 3, selector: (v) => v.name }));

  const credName = withJunk(
    fc.oneof(
      { arbitrary: fc.constantFrom<string>(...CRED_NAMES), weight: 10 },
      { arbitrary: fc.constantFrom("Bad_Name", "", "-x", "a".repeat(254)), weight: 1 },
      { arbitrary: fc.string({ maxLength: 8 }), weight: 1 },
    ),
  );
  const gitCredentials = maybe(
    fc
      .oneof(
        { arbitrary: fc.uniqueArray(credName, { maxLength: 2 }), weight: 5 },
        { arbitrary: fc.array(credName, { maxLength: 3 }), weight: 1 },
      )
      .map((names) => names.map((name) => ({ name }))),
    0.5,
  );

  const repoKey = withJunk(
    fc.oneof(
      { arbitrary: fc.constantFrom("app", "lib", "a".repeat(58)), weight: 8 },
      { arbitrary: fc.constantFrom("Bad", "-x", "a".repeat(59), "a.b", ""), weight: 1 },
      { arbitrary: fc.string({ maxLength: 8 }), weight: 1 },
    ),
  );
  const repos = maybe(
    fc.array(
      fc
        .record({
          key: repoKey,
          url: fc.oneof({ arbitrary: fc.constant("https://x/r.git"), weight: 8 }, fc.constantFrom("", undefined)),
        })
        .map(defined),
      { maxLength: 2 },
    ),
    0.4,
  );

  const idleTimeout = maybe(
    fc.oneof(
      { arbitrary: fc.constantFrom("30m", "1h", "2h30m", "168h", "1m", "60s", "1.5h"), weight: 8 },
      { arbitrary: fc.constantFrom("59s", "169h", "0s", "1d", "", "abc", "-1m", "10"), weight: 1 },
      {
        arbitrary: fc
          .tuple(fc.nat({ max: 20_000 }), fc.constantFrom("ns", "us", "µs", "ms", "s", "m", "h"))
          .map(([n, u]) => `${n}${u}`),
        weight: 1,
      },
      { arbitrary: withJunk(fc.string({ maxLength: 6 })), weight: 1 },
    ),
  );
  const image = fc.oneof(
    { arbitrary: fc.constant("harness:1"), weight: 12 },
    fc.constantFrom<unknown>("", " ", 5, undefined),
  );

  return fc
    .record({
      image,
      securityContext,
      env,
      envFrom,
      volumeMounts,
      fsGroup: maybe(fc.constantFrom(0, 1000, 2000)),
      sidecars,
      initContainers,
      volumes,
      repos,
      gitCredentials,
      idleTimeout,
    })
    .map(defined);
}

const hostile = specArbitrary({ junk: false, operatorMounts: true });
const admitted = (s: unknown) => sandboxViolations(s).length === 0;

type PodContainer = {
  name: string;
  securityContext?: unknown;
  ports?: { hostPort?: number }[];
  volumeMounts?: { name: string }[];
  env?: { valueFrom?: { secretKeyRef?: { name?: string } } }[];
  envFrom?: { secretRef?: { name?: string } }[];
};
type PodVolume = {
  name: string;
  hostPath?: unknown;
  secret?: { secretName?: string };
  projected?: { sources?: { secret?: { name?: string } }[] };
};

/** What the built pod breaks of the hardened context and the credential boundary, in words. */
function podBreaches(spec: Obj): string[] {
  const defaulted = withDefaults(spec as Partial<SandboxSpec>) as SandboxSpec;
  const caches = repoCachesContribution(defaulted, () => undefined, "team-a");
  const pod = buildPod(
    { metadata: { name: "sb", namespace: "team-a", uid: "u-1" }, spec: defaulted },
    caches ? [caches] : [],
  );
  const podSpec = pod.spec as unknown as {
    containers: PodContainer[];
    initContainers?: PodContainer[];
    volumes?: PodVolume[];
  };
  const creds = new Set(((spec.gitCredentials ?? []) as { name: string }[]).map((c) => c.name));
  const out: string[] = podViolations(pod, "op", "op").map((v) => `pod guard: ${v.path}: ${v.message}`);
  // The user seat keeps the context it states, with its one default (decision 0048): NET_RAW
  // dropped unless it states a drop list or adds NET_RAW.
  const statedUser = ((spec.sidecars ?? []) as Obj[]).find((c) => c.name === "user");
  const builtUser = podSpec.containers.find((c) => c.name === "user");
  if (
    statedUser &&
    JSON.stringify(userSeatContext(statedUser.securityContext as never)) !== JSON.stringify(builtUser?.securityContext)
  ) {
    out.push("user: context changed");
  }
  for (const c of podSpec.containers) {
    if (c.name === "user") continue;
    if (c.securityContext === undefined) out.push(`${c.name}: no securityContext`);
    else if (restrictedViolations(c.securityContext, "x").length) out.push(`${c.name}: not restricted`);
  }
  const everyContainer = [
    ...(podSpec.initContainers ?? []).map((c) => ({ c, effector: false })),
    ...podSpec.containers.map((c) => ({ c, effector: c.name === "effector" })),
  ];
  for (const { c } of everyContainer) {
    if ((c.ports ?? []).some((p) => p.hostPort !== undefined && p.hostPort !== 0)) out.push(`${c.name}: hostPort`);
  }
  const carrying = new Set<string>();
  for (const v of podSpec.volumes ?? []) {
    // The one hostPath is the operator's Repo cache; the pod guard above checks it is exactly that.
    if (v.hostPath !== undefined && !v.name.startsWith("repo-")) out.push(`volume ${v.name}: hostPath`);
    const secrets = [v.secret?.secretName, ...(v.projected?.sources ?? []).map((s) => s.secret?.name)];
    if (secrets.some((s) => s !== undefined && creds.has(s))) carrying.add(v.name);
  }
  for (const { c, effector } of everyContainer) {
    if (effector) continue;
    for (const m of c.volumeMounts ?? []) {
      if (carrying.has(m.name)) out.push(`${c.name}: mounts credential volume ${m.name}`);
    }
    for (const e of c.env ?? []) {
      const s = e.valueFrom?.secretKeyRef?.name;
      if (s !== undefined && creds.has(s)) out.push(`${c.name}: env reaches ${s}`);
    }
    for (const e of c.envFrom ?? []) {
      const s = e.secretRef?.name;
      if (s !== undefined && creds.has(s)) out.push(`${c.name}: envFrom reaches ${s}`);
    }
  }
  return out;
}

describe("the spec generator", () => {
  it("produces a meaningful share (at least 10%) of admitted specs", () => {
    const specs = fc.sample(hostile, 10_000);
    const count = specs.filter(admitted).length;
    expect(count).toBeGreaterThan(0);
    expect(count / specs.length).toBeGreaterThanOrEqual(0.1);
  });

  it("produces refused specs for each rule family", () => {
    const found = new Set(
      fc
        .sample(hostile, 5_000)
        .flatMap((s) => sandboxViolations(s))
        .map((v) =>
          v.path
            .replace(/\[\d+\]/g, "[]")
            .split(".")
            .slice(0, 2)
            .join("."),
        ),
    );
    for (const family of [
      "spec.image",
      "spec.securityContext",
      "spec.sidecars[]",
      "spec.initContainers[]",
      "spec.volumes[]",
      "spec.repos[]",
      "spec.gitCredentials[]",
      "spec.gitCredentials",
      "spec.idleTimeout",
    ]) {
      expect(found).toContain(family);
    }
  });
});

describe("property 1: sandboxViolations never throws", () => {
  it("for generated hostile specs, with any value in names and capabilities, on create and update", () => {
    const withJunk = specArbitrary({ junk: true, operatorMounts: true });
    fc.assert(
      fc.property(withJunk, fc.option(withJunk, { nil: undefined }), (spec, old) => {
        expect(Array.isArray(sandboxViolations(spec, old))).toBe(true);
      }),
      { numRuns: 5_000 },
    );
  });

  it("for any value at all as the spec and as the old spec", () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.anything(), fc.jsonValue()),
        fc.oneof(fc.constant(undefined), fc.anything()),
        (spec, old) => {
          expect(Array.isArray(sandboxViolations(spec, old))).toBe(true);
        },
      ),
      { numRuns: 5_000 },
    );
  });
});

describe("property 2: every violation says where (a spec path) and what", () => {
  it("for generated hostile specs and arbitrary JSON, on create and update", () => {
    const input = fc.oneof({ arbitrary: hostile, weight: 3 }, { arbitrary: fc.jsonValue(), weight: 1 });
    fc.assert(
      fc.property(input, fc.option(input, { nil: undefined }), (spec, old) => {
        for (const v of sandboxViolations(spec, old)) {
          expect(typeof v.path).toBe("string");
          expect(v.path.length).toBeGreaterThan(0);
          expect(v.path.startsWith("spec")).toBe(true);
          expect(typeof v.message).toBe("string");
          expect(v.message.length).toBeGreaterThan(0);
        }
      }),
      { numRuns: 5_000 },
    );
  });
});

describe("property 3: an admitted spec yields a hardened pod that keeps the credential boundary", () => {
  const holds = (arb: fc.Arbitrary<Obj>) => {
    let count = 0;
    fc.assert(
      fc.property(arb, (spec) => {
        if (!admitted(spec)) return;
        count++;
        expect(podBreaches(spec)).toEqual([]);
      }),
      { numRuns: 10_000 },
    );
    return count;
  };

  it("for generated hostile specs, mounts of the operator's own volume names included", () => {
    expect(holds(hostile)).toBeGreaterThan(0);
  });

  it("for generated hostile specs whose mounts name only the spec's own volumes", () => {
    expect(holds(specArbitrary({ junk: false, operatorMounts: false }))).toBeGreaterThan(0);
  });
});

describe("property 4: withDefaults is idempotent on admitted specs", () => {
  it("withDefaults(withDefaults(s)) deep-equals withDefaults(s)", () => {
    let count = 0;
    fc.assert(
      fc.property(hostile, (spec) => {
        if (!admitted(spec)) return;
        count++;
        const once = withDefaults(spec as Partial<SandboxSpec>);
        expect(withDefaults(once)).toStrictEqual(once);
      }),
      { numRuns: 5_000 },
    );
    expect(count).toBeGreaterThan(0);
  });

  it("keeps an admitted spec admitted (the mutation runs before the validation)", () => {
    fc.assert(
      fc.property(hostile, (spec) => {
        if (!admitted(spec)) return;
        expect(sandboxViolations(withDefaults(spec as Partial<SandboxSpec>))).toEqual([]);
      }),
      { numRuns: 5_000 },
    );
  });
});

// Decision 0016: a stated context is refused exactly when what it states is weaker, that is, exactly
// when its completion is not restricted.
describe("property 5: field-level hardening refuses only what states something weaker", () => {
  it("weakerThanRestricted(sc) is empty exactly when the completed context meets the restricted profile", () => {
    fc.assert(
      fc.property(contextFields(), (sc) => {
        const stated = weakerThanRestricted(sc, "c").length === 0;
        const completed = restrictedViolations(hardenedContext(sc as SecurityContext), "c").length === 0;
        expect(stated).toBe(completed);
      }),
      { numRuns: 10_000 },
    );
  });

  it("completion keeps every field the context states", () => {
    fc.assert(
      fc.property(contextFields(), (sc) => {
        const out = hardenedContext(sc as SecurityContext) as Obj;
        for (const [k, v] of Object.entries(sc)) {
          if (k === "capabilities" || k === "seccompProfile") expect(out[k]).toMatchObject(v as Obj);
          else expect(out[k]).toEqual(v);
        }
      }),
      { numRuns: 5_000 },
    );
  });
});

describe("property 6: an unchanged spec is a re-apply, never judged again", () => {
  it("for any spec, refused ones included, and for its re-apply through the defaults", () => {
    fc.assert(
      fc.property(specArbitrary({ junk: true, operatorMounts: true }), (spec) => {
        expect(sandboxViolations(spec, spec)).toEqual([]);
        expect(sandboxViolations(withDefaults(spec as Partial<SandboxSpec>), spec)).toEqual([]);
      }),
      { numRuns: 3_000 },
    );
  });
});

describe("property 7: the defaults read hostile input without throwing", () => {
  it("for generated hostile specs and any value at all", () => {
    const input = fc.oneof(
      specArbitrary({ junk: true, operatorMounts: true }),
      fc.dictionary(fc.string(), fc.anything()),
    );
    fc.assert(
      fc.property(input, (spec) => {
        expect(() => withDefaults(spec as Partial<SandboxSpec>)).not.toThrow();
      }),
      { numRuns: 5_000 },
    );
  });
});

describe("property 8: a Sandbox name is admitted exactly when it can name a Service", () => {
  const label = (name: string) =>
    name.length >= 1 &&
    name.length <= 63 &&
    name[0] >= "a" &&
    name[0] <= "z" &&
    !name.endsWith("-") &&
    [...name].every((ch) => (ch >= "a" && ch <= "z") || (ch >= "0" && ch <= "9") || ch === "-");

  it("for names drawn from DNS characters and beyond", () => {
    const name = fc.oneof(
      fc.string({ unit: fc.constantFrom(..."abz09-.A_"), maxLength: 70 }),
      fc.string({ maxLength: 10 }),
    );
    fc.assert(
      fc.property(name, (n) => {
        expect(sandboxNameViolations(n).length === 0).toBe(label(n));
      }),
      { numRuns: 10_000 },
    );
  });
});
