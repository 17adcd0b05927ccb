// The manifests `npm run build` writes, as applied to the local cluster (docs/decisions/0039-in-cluster-by-default.md):
// the module (admission, watcher, webhooks, CRDs, RBAC), the cache agent's DaemonSet, the
// Orchestrator's Deployment and the egress point's (after it: its Namespace is the Orchestrator's), each image named by the digest `npm run images` pushed (a node
// holding an older image under the same tag still runs this one), and the Deployments placed on
// the real node, where containers run (a kwok node only plays a pod). Nothing else is changed:
// what runs is what a platform team applies. Pure: the caller reads the files and applies.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import type { Placement } from "./in-cluster-model";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;

/** The built manifests in dist/, in the order to apply them: the module (its CRDs first), then the
 * companions. */
export function builtManifests(dist: string): Obj[] {
  const module = readdirSync(dist).find((f) => /^pepr-module-.*\.yaml$/.test(f));
  if (!module) throw new Error(`${dist} holds no pepr-module-<uuid>.yaml: run npm run build`);
  return [module, "jr2-cache-agent.yaml", "jr2-orchestrator.yaml", "jr2-egress.yaml"].flatMap((f) =>
    parseAllDocuments(readFileSync(join(dist, f), "utf8"))
      .map((d) => d.toJSON() as Obj)
      .filter(Boolean),
  );
}

/**
 * Each container's image (and an env value naming one, the Orchestrator's JR2_CUSTODIAN_IMAGE)
 * swapped for the digest it was pushed as (`pushed`: tag ref to digest ref); every Deployment given
 * `placement`. Throws for an image `pushed` does not name, so nothing runs an image this run did
 * not push.
 */
export function onTheRealNode(docs: Obj[], pushed: Record<string, string>, placement: Placement): Obj[] {
  const digestOf = (ref: string, where: string) => {
    const d = pushed[ref];
    if (!d)
      throw new Error(`${where}: image ${ref} is not one npm run images pushed (${Object.keys(pushed).join(", ")})`);
    return d;
  };
  return docs.map((doc) => {
    if (doc.kind !== "Deployment" && doc.kind !== "DaemonSet") return doc;
    const d = structuredClone(doc);
    const spec = d.spec.template.spec;
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      const where = `${d.kind} ${d.metadata.namespace}/${d.metadata.name} container ${c.name}`;
      c.image = digestOf(c.image, where);
      for (const e of c.env ?? []) if (typeof e.value === "string" && pushed[e.value]) e.value = pushed[e.value];
    }
    if (d.kind === "Deployment") {
      spec.nodeSelector = { ...spec.nodeSelector, ...placement.nodeSelector };
      spec.tolerations = [...(spec.tolerations ?? []), ...(placement.tolerations ?? [])];
    }
    return d;
  });
}
