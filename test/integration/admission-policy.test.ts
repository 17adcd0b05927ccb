// The Sandbox defaults written by the API server (decision 0026): on the local cluster (1.36) the
// MutatingAdmissionPolicy the build generates (capabilities/admission/policy.ts) must store exactly
// what `withDefaults` computes, for generated specs and the Sandbox jr2's `crFor` composes; a
// re-apply that leaves the defaults out stores the same spec and generation; namespaces admission
// ignores get no defaults; the module has no mutating webhook. The same held Sandboxes are admitted
// on a 1.34 API server by the module's mutating webhook in the kube-1.34 tier (decision 0059):
// test/support/admission-suite.ts holds both.
import { describeHeldAdmission } from "../support/admission-suite";

describeHeldAdmission({ kubernetes: "1.36", defaults: "policy" });
