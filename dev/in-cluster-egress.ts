// The egress point as in-cluster mode runs it (docs/decisions/0051, 0039): the built manifest
// (dist/jr2-egress.yaml) with the companions image by the digest `npm run images` pushed, placed on
// the real node, beside the two things the Orchestrator's manifest would otherwise bring: the
// companions' Namespace, labelled as jr2's (the Sandbox pods' policy names it), and the pod config
// the egress point reads its base list from (here the file this run's Orchestrator reads). Pure:
// the caller applies them, and deletes them on stop.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { COMPANION_NAMESPACE, PART_OF_JR2 } from "../api/wire";
import { POD_CONFIGMAP, POD_CONFIG_FILE } from "../egress/egress-manifests";
import { onTheRealNode } from "./deployed";
import type { Placement } from "./in-cluster-model";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;

export function egressPointObjects(o: {
  dist: string;
  pushed: Record<string, string>;
  placement: Placement;
  /** The pod config's text (YAML or JSON), as the Orchestrator reads it. */
  podConfig: string;
}): Obj[] {
  const built = parseAllDocuments(readFileSync(join(o.dist, "jr2-egress.yaml"), "utf8"))
    .map((d) => d.toJSON() as Obj)
    .filter(Boolean);
  const key = POD_CONFIG_FILE.split("/").pop()!;
  return [
    { apiVersion: "v1", kind: "Namespace", metadata: { name: COMPANION_NAMESPACE, labels: { ...PART_OF_JR2 } } },
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: POD_CONFIGMAP, namespace: COMPANION_NAMESPACE, labels: { ...PART_OF_JR2 } },
      data: { [key]: o.podConfig },
    },
    ...onTheRealNode(built, o.pushed, o.placement),
  ];
}
