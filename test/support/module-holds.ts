// What the module's own identity may write, asked of a real API server (decision 0069): the
// built manifest's two ValidatingAdmissionPolicies applied under names of their own (the local
// module may have registered the same ones), and server-side dry runs impersonating the module's
// service account. Shared by the integration tier and the kube-1.34 tier.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { SandboxSpec } from "../../api/crd";
import { DEFAULT_CACHE_ROOT } from "../../api/wire";
import { repoCachesContribution } from "../../capabilities/repo/caches";
import { buildPod } from "../../capabilities/sandbox/pod";
import {
  MODULE_PODS_POLICY,
  MODULE_ROLES_POLICY,
  SANDBOX_NAMESPACE_PODS_POLICY,
} from "../../capabilities/admission/module-policy";
import { moduleServiceAccount, moduleUsername } from "../../scripts/module-rbac";
import * as kubectl from "../../dev/kubectl";
import { ROOT } from "../../dev/local-operator";
import cfg from "../../package.json";
import { crForSpec } from "./crfor-sandbox";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;

const MANIFEST = join(ROOT, "dist", `pepr-module-${cfg.pepr.uuid}.yaml`);
const built = (): Obj[] =>
  parseAllDocuments(readFileSync(MANIFEST, "utf8"))
    .map((d) => d.toJS() as Obj)
    .filter(Boolean);

/** The module's user name, as the built manifest binds its service account. */
export const moduleUser = () => moduleUsername(moduleServiceAccount(built()));

const SUFFIX = "-test";
/** The built manifest's two module policies and their bindings, as built. */
export const builtModulePolicies = (): Obj[] =>
  built().filter(
    (d) =>
      /^ValidatingAdmissionPolicy(Binding)?$/.test(d.kind) &&
      [MODULE_PODS_POLICY, MODULE_ROLES_POLICY].includes(d.metadata.name),
  );

/** The built manifest's policies and bindings, each under `<name>-test`. */
export function builtHolds(): Obj[] {
  const names = [MODULE_PODS_POLICY, MODULE_ROLES_POLICY];
  const holds = built().filter(
    (d) => /^ValidatingAdmissionPolicy(Binding)?$/.test(d.kind) && names.includes(d.metadata.name),
  );
  return holds.map((d) => ({
    ...d,
    metadata: { name: `${d.metadata.name}${SUFFIX}` },
    spec: d.kind.endsWith("Binding") ? { ...d.spec, policyName: `${d.spec.policyName}${SUFFIX}` } : d.spec,
  }));
}

/** The built manifest's Sandbox namespaces' pod policy and its binding, each under `<name>-test`,
 * bound in `namespace` alone instead of the build's list. */
export function builtNamespaceHold(namespace: string): Obj[] {
  const objs = built().filter(
    (d) => /^ValidatingAdmissionPolicy(Binding)?$/.test(d.kind) && d.metadata.name === SANDBOX_NAMESPACE_PODS_POLICY,
  );
  if (objs.length !== 2)
    throw new Error(`the built manifest carries ${objs.length} of the namespace policy's 2 objects`);
  return objs.map((d) =>
    d.kind.endsWith("Binding")
      ? {
          ...d,
          metadata: { name: `${d.metadata.name}${SUFFIX}` },
          spec: {
            ...d.spec,
            policyName: `${d.spec.policyName}${SUFFIX}`,
            matchResources: {
              namespaceSelector: {
                matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values: [namespace] }],
              },
            },
          },
        }
      : { ...d, metadata: { name: `${d.metadata.name}${SUFFIX}` } },
  );
}

/** The pod the operator builds for an Orchestrator's Sandbox (jr2's crFor shape: the Custodian, the
 * user seat, the Effector with its push credentials, two Repo caches), in `namespace`. */
export function operatorPod(namespace: string, name = "ws-holds"): Obj {
  // No priority class: the API server refuses a pod naming one it does not have.
  const { priorityClassName: _p, ...spec } = crForSpec() as SandboxSpec & { priorityClassName?: string };
  const caches = repoCachesContribution(spec, () => undefined, namespace, DEFAULT_CACHE_ROOT);
  return buildPod(
    { metadata: { name, namespace, uid: "00000000-0000-4000-8000-000000000069" }, spec },
    caches ? [caches] : [],
  );
}

/** A server-side dry run as the module's service account (in system:masters too: the policies hold
 * its name whatever it is granted): "admitted", or the API server's refusal. */
export async function asModule(kubeconfig: string, args: string[], input?: unknown): Promise<string> {
  return kubectl
    .run(
      kubeconfig,
      [...args, "--dry-run=server", `--as=${moduleUser()}`, "--as-group=system:masters"],
      input === undefined ? undefined : JSON.stringify(input),
    )
    .then(
      () => "admitted",
      (err: Error) => err.message,
    );
}

export const createAsModule = (kubeconfig: string, object: unknown) =>
  asModule(kubeconfig, ["create", "-f", "-"], object);

/** Applies the built policies (renamed) and waits until a privileged pod of the module's is refused:
 * the API server learns of policies through an informer. Returns what to delete after. */
export async function applyBuiltHolds(kubeconfig: string, namespace: string, timeoutMs = 30_000): Promise<Obj[]> {
  const holds = builtHolds();
  if (holds.length !== 4)
    throw new Error(`the built manifest carries ${holds.length} of the module's 4 policy objects`);
  await kubectl.apply(kubeconfig, holds);
  const probe = privileged(operatorPod(namespace, "ws-probe"));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await createAsModule(kubeconfig, probe);
    // The local module registers the same policies under the built names when it runs as the
    // module's identity (dev/local-operator.ts): the API server answers with the first that denies.
    if (new RegExp(`ValidatingAdmissionPolicy '${MODULE_PODS_POLICY}(${SUFFIX})?'.*privileged`).test(answer))
      return holds;
    if (Date.now() > deadline)
      throw new Error(`the module's policies did not judge a probe in ${timeoutMs} ms: ${answer}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

export const deleteHolds = (kubeconfig: string, holds: Obj[]) =>
  kubectl.run(
    kubeconfig,
    ["delete", "--ignore-not-found", "-f", "-"],
    JSON.stringify({ apiVersion: "v1", kind: "List", items: [...holds].reverse() }),
  );

/** The pod with its user seat privileged: the seat held to the baseline alone, so this is the one
 * check it fails (a jr2-owned seat says allowPrivilegeEscalation false, which the API server's
 * validation refuses beside privileged before any policy is asked). */
export function privileged(pod: Obj): Obj {
  const p = structuredClone(pod);
  const user = p.spec.containers.find((c: Obj) => c.name === "user");
  user.securityContext = { ...user.securityContext, privileged: true };
  return p;
}
