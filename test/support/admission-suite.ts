// Admission of the held Sandboxes, the same on every Kubernetes version the module supports
// (decision 0059): on 1.36 the API server's MutatingAdmissionPolicy writes the defaults (decision
// 0026), on 1.34 and 1.35 the module's mutating webhook does; both must store exactly what
// `withDefaults` (the pure function the pod builder, the reconcile's gate and the unit tests use)
// computes. The integration tier runs it on the local cluster (1.36), the kube-1.34 tier on a lone
// 1.34 API server (dev/cluster/apiserver.sh). Generated specs and the Sandbox in the exact shape
// jr2's `crFor` composes, each a server-side dry run (nothing stored): every one the
// validation admits comes back as `withDefaults` of what was sent, and none is refused by whatever
// writes the defaults. A re-apply that leaves the defaults out stores the same spec and
// generation; hostile Sandboxes and hand-made Sandbox pods are refused, naming what is wrong;
// namespaces admission ignores get no defaults.
import fc from "fast-check";
import { K8s, kind } from "kubernetes-fluent-client";
import cfg from "../../package.json";
import { RepoModel, SandboxModel } from "../../api/crd";
import { ApiError } from "../../lib/api-error";
import { kubeRequest } from "../../lib/kube";
import { withDefaults } from "../../capabilities/rules/sandbox-rules";
import { SANDBOX_DEFAULTS } from "../../capabilities/admission/policy";
import { hardenedSecurityContext } from "../../api/hardening";
import type { SandboxDefaultsMode } from "../../scripts/webhooks";
import { getSandbox, useNamespace, type Sbx } from "../integration/support/cluster";
import { pruneNulls, sandboxSpec, type Obj } from "./held-sandboxes";
import { NAME as CRFOR_NAME, crForSpec } from "./crfor-sandbox";

export type AdmissionTarget = {
  /** The API server's minor version, as /version's gitVersion starts: "1.34", "1.36". */
  kubernetes: string;
  /** Who writes the Sandbox defaults there. */
  defaults: SandboxDefaultsMode;
};

const sandboxes = (namespace: string) => `/apis/core.jr2.dev/v1alpha1/namespaces/${namespace}/sandboxes`;
const body = (name: string, namespace: string, s: unknown) => ({
  apiVersion: "core.jr2.dev/v1alpha1",
  kind: "Sandbox",
  metadata: { name, namespace },
  spec: s,
});
const MODULE = `pepr-${cfg.pepr.uuid}`;

/** A server-side dry run of a create: the spec it would store, or the refusal's message. */
async function dryRunCreate(
  namespace: string,
  name: string,
  s: unknown,
): Promise<{ spec: unknown; generation?: number } | { refused: string }> {
  try {
    const out = await kubeRequest<Sbx>("POST", `${sandboxes(namespace)}?dryRun=All`, body(name, namespace, s));
    return { spec: out.spec, generation: out.metadata?.generation };
  } catch (err) {
    if (err instanceof ApiError && (err.status === 422 || err.status === 400 || err.status === 403))
      return { refused: err.message };
    throw err;
  }
}

export function describeHeldAdmission(target: AdmissionTarget) {
  const ns = useNamespace(`held-${target.kubernetes.replace(".", "")}`);
  const dryRun = (s: unknown, namespace = ns.name) => dryRunCreate(namespace, "probe", s);

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

  describe(`admission of the held Sandboxes on Kubernetes ${target.kubernetes} (defaults by ${target.defaults})`, () => {
    it(`runs on a ${target.kubernetes} API server, the defaults written by the ${target.defaults} alone`, async () => {
      const version = await kubeRequest<{ gitVersion: string }>("GET", "/version");
      expect(version.gitVersion).toMatch(new RegExp(`^v${target.kubernetes.replace(".", "\\.")}\\.`));
      const served = (
        await kubeRequest<{ resources: { name: string }[] }>("GET", "/apis/admissionregistration.k8s.io/v1")
      ).resources.map((r) => r.name);
      const mutating = (await K8s(kind.MutatingWebhookConfiguration).Get()).items.filter(
        (c) => c.metadata?.name === MODULE,
      );
      if (target.defaults === "policy") {
        const policy = await kubeRequest<{ spec?: { mutations?: unknown[] } }>(
          "GET",
          `/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/${SANDBOX_DEFAULTS}`,
        );
        expect(policy.spec?.mutations?.length).toBeGreaterThan(0);
        expect(mutating).toEqual([]);
      } else {
        // Decision 0059: where the policy's API is not served, the module's webhook writes the defaults.
        expect(served).not.toContain("mutatingadmissionpolicies");
        expect(mutating).toHaveLength(1);
        const hooks = mutating[0].webhooks ?? [];
        expect(hooks.map((w) => w.clientConfig.url ?? "")).toEqual([expect.stringMatching(/\/mutate\/[0-9a-f]+$/)]);
        expect(hooks[0].rules?.[0]?.resources).toEqual(["sandboxes"]);
        expect(hooks[0].reinvocationPolicy).toBe("IfNeeded");
      }
    });

    it("stores exactly withDefaults of each admitted spec (generated, server-side dry runs)", async () => {
      let admitted = 0;
      const refusals = new Set<string>();
      await fc.assert(
        fc.asyncProperty(sandboxSpec, async (s) => {
          const answer = await dryRun(s);
          if ("refused" in answer) {
            // Refused by validation (the webhook or the schema), never by what writes the defaults.
            expect(answer.refused).not.toContain(SANDBOX_DEFAULTS);
            expect(answer.refused).not.toContain("defaults could not be written");
            refusals.add(answer.refused.replace(/^.*refused: /, ""));
            return;
          }
          admitted++;
          expect(answer.spec).toEqual(pruneNulls(withDefaults(s)));
        }),
        { numRuns: 300 },
      );
      // Not vacuous: most generated specs reach the comparison.
      if (admitted <= 150)
        throw new Error(`only ${admitted} of 300 admitted; refused for: ${[...refusals].join(" | ")}`);
      process.stdout.write(`[held admission ${target.kubernetes}] ${admitted} of 300 admitted and compared\n`);
    }, 240_000);

    it("admits the Sandbox crFor composes, stores withDefaults of it, and keeps it on the Orchestrator's re-apply", async () => {
      const s = crForSpec();
      expect(await dryRun(s)).toEqual({ spec: withDefaults(s), generation: 1 });
      // Server-side apply, as a jr2 Orchestrator writes its CR, and again on its next provision
      // (decision 0017), without the defaults each time.
      for (let i = 0; i < 2; i++) {
        const stored = (await K8s(SandboxModel).Apply(body(CRFOR_NAME, ns.name, s) as SandboxModel)) as Sbx;
        expect(stored.spec).toEqual(withDefaults(s));
        expect(stored.metadata.generation).toBe(1);
      }
    });

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
      expect(answer).toEqual({ spec: withDefaults(s), generation: 1 });
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

    it("refuses a hostile Sandbox, naming every field path", async () => {
      const answer = await dryRun({
        image: "ghcr.io/example/harness:1",
        sidecars: [
          { name: "custodian", image: "c", securityContext: { privileged: true, runAsNonRoot: true } },
          { name: "helper", image: "h", securityContext: { allowPrivilegeEscalation: true } },
        ],
        volumes: [{ name: "root", hostPath: { path: "/" } }],
      });
      expect(answer).toEqual({ refused: expect.stringContaining(`Sandbox ${ns.name}/probe refused`) });
      const refused = (answer as { refused: string }).refused;
      expect(refused).toContain("spec.sidecars[0].securityContext.privileged: must not be true");
      expect(refused).toContain("spec.sidecars[1].securityContext.allowPrivilegeEscalation: must be false");
      expect(refused).toContain("spec.volumes[0].hostPath: is not allowed");
    });

    it("refuses a hand-made pod carrying the Sandbox label", async () => {
      const pod = {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "impostor", namespace: ns.name, labels: { "sandbox.jr2.dev/name": "reapply" } },
        spec: { containers: [{ name: "harness", image: "x" }] },
      };
      await expect(kubeRequest("POST", `/api/v1/namespaces/${ns.name}/pods?dryRun=All`, pod)).rejects.toThrow(
        /only the jr2 operator creates Sandbox pods/,
      );
    });

    it("writes nothing in a namespace admission ignores", async () => {
      const answer = await dryRun({ image: "ghcr.io/example/harness:1" }, "kube-public");
      // idleTimeout is the CRD schema's default, written whoever admits.
      expect(answer).toEqual({ spec: { image: "ghcr.io/example/harness:1", idleTimeout: "30m" }, generation: 1 });
    });
  });
}
