// The reconcile's own admission check (pure; decision 0017): a Sandbox stored while no webhook
// was registered (the module down after its configurations were removed, or before they were
// written), or in a namespace admission ignores, never becomes a pod. The same rules as the
// webhooks (capabilities/rules/, which admission/reviews.ts judges by), so nothing admission would
// refuse is ever built; and the pod guard's rules on each pod as built, since the operator's own
// pod creates skip the webhook (decision 0029).
import type { kind } from "kubernetes-fluent-client";
import { SCHEDULED_REASON } from "../../api/conditions";
import { builtPodViolations, type PodRules } from "../rules/pods";
import { sandboxNameViolations, sandboxViolations, type SandboxRules } from "../rules/sandbox-rules";
import { describe } from "../rules/violations";
import type { PodRefusal } from "./status";

export type GateOptions = {
  rules: SandboxRules;
  /** The namespaces admission ignores (Pepr's alwaysIgnore): the operator ignores them too. */
  ignoredNamespaces: readonly string[];
};

/** Why no pod may be built from this Sandbox, or undefined when one may. */
export function gateRefusal(
  sandbox: { metadata: { name: string; namespace: string }; spec: unknown },
  opts: GateOptions,
): PodRefusal | undefined {
  const { name, namespace } = sandbox.metadata;
  if (opts.ignoredNamespaces.includes(namespace)) {
    return {
      reason: SCHEDULED_REASON.NamespaceIgnored,
      message:
        `namespace ${namespace} is one admission ignores (${opts.ignoredNamespaces.join(", ")}), so the operator ` +
        "builds nothing for a Sandbox in it: create the Sandbox in another namespace",
    };
  }
  const violations = [...sandboxNameViolations(name), ...sandboxViolations(sandbox.spec, undefined, opts.rules)];
  if (!violations.length) return undefined;
  return {
    reason: SCHEDULED_REASON.SpecRefused,
    message: `${describe(`Sandbox ${namespace}/${name}`, violations)} (admission would have refused it: fix the spec)`,
  };
}

/**
 * Why the pod built for this Sandbox may not be written, or undefined when it may: the rules the
 * pod guard holds every other Sandbox pod to. A refusal here is a builder's bug, never the user's
 * spec alone; it is reported, not written.
 */
export function builtPodRefusal(
  sandbox: { metadata: { name: string; namespace: string } },
  pod: kind.Pod,
  rules: PodRules,
): PodRefusal | undefined {
  const violations = builtPodViolations(pod, rules);
  if (!violations.length) return undefined;
  const { name, namespace } = sandbox.metadata;
  return {
    reason: SCHEDULED_REASON.SpecRefused,
    message:
      `${describe(`the pod built for Sandbox ${namespace}/${name}`, violations)} ` +
      "(the operator does not write a pod its own pod guard would refuse: report this with the Sandbox's spec)",
  };
}
