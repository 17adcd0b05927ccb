// The held Sandboxes admission is tested with on every Kubernetes version the module supports
// (decision 0059): generated specs whose contexts are stated in part, null or not at all, Repo
// mounts with and without readOnly, the four seats, init containers. Whoever writes the defaults
// (the API server's policy, decision 0026, or the module's webhook) must store `withDefaults` of
// each admitted one.
import fc from "fast-check";
import { hardenedSecurityContext } from "../../api/hardening";

export type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

/** What the API server keeps of a value: a null in a field the CRD does not mark nullable is pruned. */
export function pruneNulls(v: unknown): unknown {
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

/** A Sandbox spec naming the Repo keys "app" and "lib" (held Repos of its namespace must exist). */
export const sandboxSpec: fc.Arbitrary<Obj> = fc
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
