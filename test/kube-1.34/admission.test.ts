// Admission on a Kubernetes 1.34 API server (decision 0059), which serves no MutatingAdmissionPolicy
// v1: the module's mutating webhook writes the Sandbox defaults, and the same held Sandboxes the
// integration tier admits on 1.36 through the policy must be stored the same (test/support/
// admission-suite.ts). The tier's global setup runs the API server (dev/cluster/apiserver.sh) and
// the module against it.
import { describeHeldAdmission } from "../support/admission-suite";

describeHeldAdmission({ kubernetes: "1.34", defaults: "webhook" });
