// A workspace's Sandbox pod on the real node under gVisor (decision 0055): everything
// sandbox-pod.test.ts proves under runc, with every Sandbox pod of the suite given the RuntimeClass
// by the pod config (the workspace's) or its spec (the direct CR's), and the guard that the pod
// really runs in gVisor's sentry, so a silent fallback to runc fails.
import { fromSetup } from "./support";
import { sandboxPodSuite } from "./sandbox-pod-suite";

sandboxPodSuite({ runtimeClass: fromSetup("JR2_GVISOR_RUNTIME_CLASS") });
