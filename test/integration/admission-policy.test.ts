// The Sandbox defaults written by the API server (decision 0026): the MutatingAdmissionPolicy the
// build generates (capabilities/admission/policy.ts) must store exactly what `withDefaults` (the
// pure function the pod builder, the reconcile's gate and the unit tests use) computes. Generated
// specs, each a server-side dry run (nothing stored): every one the validation admits comes back as
// `withDefaults` of what was sent, and none is refused by the policy itself. A re-apply that
// leaves the defaults out stores the same spec and generation; namespaces admission ignores get
// no defaults; the module has no mutating webhook.
import fc from "fast-check";
import { K8s, kind } from "kubernetes-fluent-client";
import cfg from "../../package.json";
import { RepoModel, SandboxModel } from "../../api/crd";
import { ApiError } from "../../lib/api-error";
import { kubeRequest } from "../../lib/kube";
import { withDefaults } from "../../capabilities/rules/sandbox-rules";
import { SANDBOX_DEFAULTS } from "../../capabilities/admission/policy";
import { hardenedSecurityContext } from "../../api/hardening";
import { getSandbox, useNamespace, type Sbx } from "./support/cluster";

const ns = useNamespace("policy");

// The Sandboxes here name the Repo keys "app" and "lib": admission wants a Repo of the namespace
// for each (decision 0046), here by name.
beforeAll(async () => {
  for (const key of ["app", "lib"])
    await K8s(RepoModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Repo",
      metadata: { name: key, namespace: ns.name },
      spec: { url: `https://example.com/org/${key}.git` },
    });
});

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** What the API server keeps of a value: a null in a field the CRD does not mark nullable is pruned. */
function pruneNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(pruneNulls);
  if (!isObject(v)) return v;
  return Object.fromEntries(
    Object.entries(v)
      .filter(([, x]) => x !== null && x !== undefined)
      .map(([k, x]) => [k, pruneNulls(x)]),
  );
}

const defined = (o: Obj): Obj => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
/** The value, JSON null (says nothing, as absent does), or absent. */
const stated = <T>(a: fc.Arbitrary<T>) =>
  fc.oneof(
    { arbitrary: a, weight: 3 },
    { arbitrary: fc.constant(null), weight: 1 },
    { arbitrary: fc.constant(undefined), weight: 3 },
  );

// A container context: each hardened field stated as hardened, left out, or null; the objects
// stated partly (capabilities without drop, a seccompProfile without type); a few fields the
// defaults never touch. Mostly admissible, so most cases reach the comparison.
const context: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.constantFrom(undefined, null, {}), weight: 2 },
  { arbitrary: fc.constant(hardenedSecurityContext()), weight: 1 },
  {
    arbitrary: fc
      .record({
        runAsNonRoot: stated(fc.constant(true)),
        allowPrivilegeEscalation: stated(fc.constant(false)),
        capabilities: stated(
          fc.constantFrom<unknown>({}, { drop: ["ALL"] }, { drop: null }, { drop: ["ALL"], add: [] }),
        ),
        seccompProfile: stated(
          fc.constantFrom<unknown>(
            {},
            { type: "RuntimeDefault" },
            { type: null },
            { type: "Localhost", localhostProfile: "jr2/p.json" },
          ),
        ),
        readOnlyRootFilesystem: stated(fc.boolean()),
        runAsUser: stated(fc.constantFrom(1000, 65534)),
      })
      .map(defined),
    weight: 6,
  },
);

// Mounts of the spec's volume and its Repo caches; readOnly stated or not (a Repo mount stating
// false is refused by validation, so seldom).
const mounts = fc
  .array(
    fc.record({
      name: fc.constantFrom("work", "repo-app", "repo-lib"),
      readOnly: stated(
        fc.oneof({ arbitrary: fc.constant(true), weight: 4 }, { arbitrary: fc.constant(false), weight: 1 }),
      ),
    }),
    { maxLength: 3 },
  )
  .map((ms) => ms.map((m, i) => defined({ ...m, mountPath: `/m${i}` })));

const container = (name: string) =>
  fc
    .record({ securityContext: context, volumeMounts: fc.option(mounts, { nil: undefined }) })
    .map((c) => defined({ name, image: `${name}:1`, ...c }));

const spec: fc.Arbitrary<Obj> = fc
  .record({
    securityContext: context,
    volumeMounts: fc.option(mounts, { nil: undefined }),
    sidecars: fc.option(
      fc
        .subarray(["custodian", "user", "side-a", "effector"])
        .chain((names) => (names.length ? fc.tuple(...names.map(container)) : fc.constant<Obj[]>([]))),
      { nil: undefined },
    ),
    initContainers: fc.option(fc.tuple(container("init-a")), { nil: undefined }),
    fsGroup: stated(fc.constantFrom(0, 1000, 2000)),
    idleTimeout: stated(fc.constantFrom("1h", "30m")),
  })
  .map((s) =>
    defined({
      image: "ghcr.io/example/harness:1",
      ...s,
      volumes: [{ name: "work", emptyDir: {} }],
      repos: [
        { key: "app", url: "https://example.com/org/app.git" },
        { key: "lib", url: "https://example.com/org/lib.git" },
      ],
      // Push credentials need the effector seat.
      gitCredentials: (s.sidecars as Obj[] | undefined)?.some((c) => c.name === "effector")
        ? [{ name: "push-token" }]
        : undefined,
    }),
  );

const sandboxes = (namespace: string) => `/apis/core.jr2.dev/v1alpha1/namespaces/${namespace}/sandboxes`;
const body = (name: string, namespace: string, s: unknown) => ({
  apiVersion: "core.jr2.dev/v1alpha1",
  kind: "Sandbox",
  metadata: { name, namespace },
  spec: s,
});

/** A server-side dry run: the stored spec, or the refusal's message. */
async function dryRun(s: unknown, namespace = ns.name): Promise<{ spec: unknown } | { refused: string }> {
  try {
    const out = await kubeRequest<Sbx>("POST", `${sandboxes(namespace)}?dryRun=All`, body("probe", namespace, s));
    return { spec: out.spec };
  } catch (err) {
    if (err instanceof ApiError && (err.status === 422 || err.status === 400)) return { refused: err.message };
    throw err;
  }
}

describe("the Sandbox defaults policy", () => {
  it("is registered as built, and the module has no mutating webhook", async () => {
    const policy = await kubeRequest<{ spec?: { mutations?: unknown[] } }>(
      "GET",
      `/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/${SANDBOX_DEFAULTS}`,
    );
    expect(policy.spec?.mutations?.length).toBeGreaterThan(0);
    const mutating = (await K8s(kind.MutatingWebhookConfiguration).Get()).items;
    expect(mutating.map((c) => c.metadata?.name)).not.toContain(`pepr-${cfg.pepr.uuid}`);
  });

  it("stores exactly withDefaults of each admitted spec (generated, server-side dry runs)", async () => {
    let admitted = 0;
    const refusals = new Set<string>();
    await fc.assert(
      fc.asyncProperty(spec, async (s) => {
        const answer = await dryRun(s);
        if ("refused" in answer) {
          // Refused by validation (the webhook or the schema), never by the policy failing.
          expect(answer.refused).not.toContain(SANDBOX_DEFAULTS);
          refusals.add(answer.refused.replace(/^.*refused: /, ""));
          return;
        }
        admitted++;
        expect(answer.spec).toEqual(pruneNulls(withDefaults(s)));
      }),
      { numRuns: 300 },
    );
    // Not vacuous: most generated specs reach the comparison.
    if (admitted <= 150) throw new Error(`only ${admitted} of 300 admitted; refused for: ${[...refusals].join(" | ")}`);
    process.stdout.write(`[admission-policy] ${admitted} of 300 admitted and compared\n`);
  }, 240_000);

  it("completes the seeds' Custodian context and an empty capabilities or seccompProfile field by field", async () => {
    const s: Obj = {
      image: "ghcr.io/example/harness:1",
      securityContext: { capabilities: {}, seccompProfile: {} },
      sidecars: [
        {
          name: "custodian",
          image: "c:1",
          securityContext: { runAsNonRoot: true, readOnlyRootFilesystem: true, capabilities: { drop: ["ALL"] } },
        },
        { name: "user", image: "u:1", volumeMounts: [{ name: "repo-app", mountPath: "/repos/app" }] },
      ],
      initContainers: [{ name: "init-a", image: "i:1", volumeMounts: [{ name: "repo-app", mountPath: "/r" }] }],
      repos: [{ key: "app", url: "https://example.com/org/app.git" }],
    };
    const answer = await dryRun(s);
    expect(answer).toEqual({ spec: withDefaults(s) });
    const stored = (answer as { spec: Obj }).spec;
    // Decision 0048: the user seat's one default.
    expect((stored.sidecars as Obj[])[1].securityContext).toEqual({ capabilities: { drop: ["NET_RAW"] } });
    expect((stored.initContainers as Obj[])[0].securityContext).toBeUndefined();
    expect(stored.securityContext).toEqual(hardenedSecurityContext());
  });

  it("re-applied without its defaults, a Sandbox stores the same spec and generation", async () => {
    const name = "reapply";
    const s = {
      image: "ghcr.io/example/harness:1",
      sidecars: [
        { name: "custodian", image: "c:1", securityContext: { runAsNonRoot: true, readOnlyRootFilesystem: true } },
        { name: "user", image: "u:1" },
      ],
      volumeMounts: [{ name: "repo-app", mountPath: "/repos/app" }],
      repos: [{ key: "app", url: "https://example.com/org/app.git" }],
    };
    const first = (await K8s(SandboxModel).Apply(body(name, ns.name, s) as SandboxModel)) as Sbx;
    expect(first.spec).toEqual(withDefaults(s));
    // Server-side apply, as the Orchestrator re-applies, and an update replacing the whole spec.
    const applied = (await K8s(SandboxModel).Apply(body(name, ns.name, s) as SandboxModel)) as Sbx;
    const replaced = await kubeRequest<Sbx>(
      "PATCH",
      `${sandboxes(ns.name)}/${name}`,
      [{ op: "replace", path: "/spec", value: s }],
      "application/json-patch+json",
    );
    for (const again of [applied, replaced, await getSandbox(ns.name, name)]) {
      expect(again.spec).toEqual(first.spec);
      expect(again.metadata?.generation).toBe(first.metadata?.generation);
    }
  });

  it("writes nothing in a namespace admission ignores", async () => {
    const answer = await dryRun({ image: "ghcr.io/example/harness:1" }, "kube-public");
    expect(answer).toEqual({ spec: { image: "ghcr.io/example/harness:1", idleTimeout: "30m" } });
  });
});
