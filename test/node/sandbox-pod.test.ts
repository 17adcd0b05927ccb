// A workspace's Sandbox pod on the real node under its default runtime, runc: the suite is
// sandbox-pod-suite.ts's, which sandbox-pod-gvisor.test.ts runs under gVisor.
import { sandboxPodSuite } from "./sandbox-pod-suite";

sandboxPodSuite({});
