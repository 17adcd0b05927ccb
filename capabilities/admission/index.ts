// The admission capability's wiring: the hardened context enforced on Sandboxes and on their
// pods, a pod's Sandbox label the operator's alone, ephemeral containers kept away from the
// credential holders. The rules are pure (sandbox.ts, pods.ts, containers.ts); this file only binds
// them. Every failure is a denial that says what failed (onError: reject, failurePolicy Fail): a
// thrown error never lets a request through. The Sandbox defaults are not bound here: the API
// server writes them in-process, a MutatingAdmissionPolicy generated from the same functions
// (policy.ts, decision 0026), so a create costs one webhook round trip, not two.
import { Capability, Log, a, type PeprValidateRequest } from "pepr";
import { SandboxModel } from "../../api/crd";
import { SANDBOX_NAME_LABEL } from "../../api/wire";
import { operatorIdentity } from "./identity";
import { podUpdateViolations, podViolations, sandboxLabelChanged, type PodRules } from "./pods";
import { rulesFromEnv, sandboxNameViolations, sandboxViolations, type SandboxRules } from "./sandbox";
import { describe, type Violation } from "./violations";
import { cacheRootFrom } from "../../api/env";

export const AdmissionCapability = new Capability({
  name: "admission",
  description: "Enforces the hardened context of Sandboxes and their pods",
});

const { When } = AdmissionCapability;

const rules: SandboxRules = rulesFromEnv();

/** The cache root the pods mount, read as the Repo capability reads it (capabilities/repo). */
const podRules: PodRules = { cacheRoot: cacheRootFrom(process.env) };

const nameOf = (req: PeprValidateRequest<{ metadata?: { name?: string; namespace?: string } }>, kind: string) =>
  `${kind} ${req.Request.namespace ?? req.Raw?.metadata?.namespace ?? ""}/${req.Request.name || req.Raw?.metadata?.name || "(generated)"}`;

/** Runs a check; a thrown error becomes a denial naming what failed, never an approval. */
async function judge<T extends { metadata?: { name?: string; namespace?: string } }>(
  req: PeprValidateRequest<T>,
  kind: string,
  check: () => Violation[] | Promise<Violation[]>,
) {
  const what = nameOf(req, kind);
  try {
    const found = await check();
    return found.length ? req.Deny(describe(what, found), 422) : req.Approve();
  } catch (err) {
    Log.error({ err: err instanceof Error ? err.message : String(err) }, `admission check of ${what} failed`);
    return req.Deny(
      `${what} refused: the jr2 admission check failed (${err instanceof Error ? err.message : "error"}); retry`,
      503,
    );
  }
}

// A spec change is judged as a create is; an unchanged spec (a keepalive, a re-apply) is not judged
// again. The name, which names the Service, only at create: it never changes.
When(SandboxModel)
  .IsCreatedOrUpdated()
  .Validate((req) =>
    judge(req, "Sandbox", () => {
      const update = req.Request.operation === "UPDATE";
      return [
        ...(update ? [] : sandboxNameViolations(req.Raw.metadata?.name || req.Request.name)),
        ...sandboxViolations(
          req.Raw.spec,
          update ? ((req.OldResource as SandboxModel | undefined)?.spec ?? {}) : undefined,
          rules,
        ),
      ];
    }),
  );

When(a.Pod)
  .IsCreated()
  .WithLabel(SANDBOX_NAME_LABEL)
  .Validate((req) =>
    judge(req, "Pod", async () =>
      podViolations(req.Raw, req.Request.userInfo?.username, await operatorIdentity(), podRules),
    ),
  );

// No label filter: a filter reads the new object only, so it would miss a label added to an
// ordinary pod (and see no removal). The rule decides: a label added, changed or removed is the
// operator's alone; a Sandbox pod's added ephemeral containers are checked. The webhook
// configuration's objectSelector keeps unlabelled pods away (an update matches if either the old
// or the new object carries the label).
When(a.Pod)
  .IsUpdated()
  .Validate((req) =>
    judge(req, "Pod", async () => {
      const operator = sandboxLabelChanged(req.Raw, req.OldResource) ? await operatorIdentity() : undefined;
      return podUpdateViolations(
        req.Raw,
        req.OldResource,
        req.Request.userInfo?.username,
        operator,
        req.Request.subResource,
      );
    }),
  );
