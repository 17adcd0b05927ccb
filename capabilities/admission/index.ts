// The admission capability's wiring: the hardened context enforced on Sandboxes and on their
// pods, a pod's Sandbox label the operator's alone, ephemeral containers kept away from the
// credential holders. What is judged, and by which rule, is the table in reviews.ts; this file
// binds each entry into Pepr, which generates the webhook configurations from them
// (scripts/webhooks.ts scopes those). The module answers reviews itself, in front of Pepr's
// server (server.ts, decision 0028); Pepr's own pipeline judges by the same table. Every failure
// is a denial that says what failed (onError: reject, failurePolicy Fail). The Sandbox defaults
// are not bound here: the API server writes them in-process, a MutatingAdmissionPolicy generated
// from the same functions (policy.ts, decision 0026), so a create costs one webhook round trip.
import { Capability, type PeprValidateRequest } from "pepr";
import type { V1Pod } from "@kubernetes/client-node";
import type { SandboxModel } from "../../api/crd";
import { REVIEWS, type Review, type ReviewRequest } from "./reviews";

export const AdmissionCapability = new Capability({
  name: "admission",
  description: "Enforces the hardened context of Sandboxes and their pods",
});

const { When } = AdmissionCapability;

/** Pepr's event for a review's operations. */
const event = (r: Review) => {
  const w = When(r.model);
  if (r.operations.length === 2) return w.IsCreatedOrUpdated();
  return r.operations[0] === "CREATE" ? w.IsCreated() : w.IsUpdated();
};

for (const r of REVIEWS) {
  const bound = event(r);
  (r.label ? bound.WithLabel(r.label) : bound).Validate(async (req: PeprValidateRequest<SandboxModel | V1Pod>) => {
    const v = await r.judge(req.Request as unknown as ReviewRequest);
    return v.allowed ? req.Approve() : req.Deny(v.message, v.code);
  });
}
