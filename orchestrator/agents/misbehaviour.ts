// When a workspace's Harness breaks a bound the Orchestrator reads it within (decision 0042), the
// workspace is named where a person looks: a Warning Event on its Sandbox (`kubectl describe`), a
// metric by reason, and a log line. At most one Event per workspace and reason a minute, so a
// Harness that misbehaves on every read costs the API server one write a minute, not one a read.
import { kubeRequest, paths } from "../../lib/kube";
import { API_VERSION, SANDBOX_KIND } from "../../api/crd";
import type { Log } from "../../lib/log";
import type { Misbehaviour } from "../workspaces/sandbox-gateway";
import type { SandboxWatch } from "../workspaces/sandbox-watch";

export const MISBEHAVIOUR_EVENT = "HarnessMisbehaved";
const EVENT_EVERY_MS = 60_000;

/** Writes an Event (the API server, by default). */
export type EventWriter = (namespace: string, event: Record<string, unknown>) => Promise<unknown>;

const toApiServer: EventWriter = (namespace, event) => kubeRequest("POST", paths.events(namespace), event);

export function misbehaviourReporter(o: {
  namespace: string;
  watch: Pick<SandboxWatch, "get">;
  count: (reason: Misbehaviour) => void;
  log: Log;
  now?: () => number;
  writeEvent?: EventWriter;
}): (workspace: string, reason: Misbehaviour, message: string) => void {
  const last = new Map<string, number>();
  const now = o.now ?? Date.now;
  return (workspace, reason, message) => {
    o.count(reason);
    o.log({ level: "warn", message: "a Harness answer was refused", workspace, reason, detail: message });
    const key = `${workspace}/${reason}`;
    const at = now();
    if ((last.get(key) ?? -Infinity) > at - EVENT_EVERY_MS) return;
    last.set(key, at);
    for (const [k, t] of last) if (t <= at - EVENT_EVERY_MS) last.delete(k);
    const uid = o.watch.get(workspace)?.metadata?.uid;
    const stamp = new Date(at).toISOString();
    (o.writeEvent ?? toApiServer)(o.namespace, {
      apiVersion: "v1",
      kind: "Event",
      metadata: { generateName: `${workspace}.`, namespace: o.namespace },
      involvedObject: {
        apiVersion: API_VERSION,
        kind: SANDBOX_KIND.kind,
        name: workspace,
        namespace: o.namespace,
        ...(uid ? { uid } : {}),
      },
      type: "Warning",
      reason: MISBEHAVIOUR_EVENT,
      message: message.slice(0, 1024),
      source: { component: "jr2-orchestrator" },
      reportingComponent: "jr2.dev/orchestrator",
      reportingInstance: "jr2-orchestrator",
      firstTimestamp: stamp,
      lastTimestamp: stamp,
      count: 1,
    }).catch((err: unknown) =>
      o.log({ level: "warn", message: "the HarnessMisbehaved Event was not written", workspace, detail: String(err) }),
    );
  };
}
