// The real-node bench's second floor (decision 0064): a Sandbox's own pod with our software taken
// out. Its volumes, mounts, env, security contexts, resources and placement stay; each container
// only sleeps, with no probe and no hook; no label or owner ties it to the Sandbox. What the pod's
// shape costs the kubelet (its volumes' 300 ms mount poll among them) is then measured, not
// estimated, beside the plain pod that has none of it. Pure: the caller copies the objects.
type Json = Record<string, unknown>;
type Container = Json & { name: string; image: string };

export type ObjectRef = { kind: "Secret" | "ConfigMap"; name: string };

/** Where a container's command is kept out: both images carry tini (the shared base). */
export const SLEEP = ["/usr/bin/tini", "--", "sleep", "infinity"];

/** Container fields that are our software rather than the pod's shape. */
const SOFTWARE = ["command", "args", "readinessProbe", "livenessProbe", "startupProbe", "lifecycle"] as const;

/** Pod fields that admission or the kubelet fill in from the rest, or that tie it to its Sandbox. */
const DERIVED = ["nodeName", "overhead", "priority", "readinessGates"] as const;

type PodLike = { metadata?: Json; spec?: Json & { containers?: Container[]; initContainers?: Container[] } };

/** Where a pod spec names a Secret or ConfigMap: the object holding the name, and its field. The
 * one walk both podRefs (reads) and shapedPod (renames) take. */
function* refHolders(
  spec: PodLike["spec"] & Json,
): Generator<{ kind: ObjectRef["kind"]; holder: Json; field: string }> {
  const at = function* (kind: ObjectRef["kind"], holder: unknown, field: string) {
    if (holder && typeof (holder as Json)[field] === "string") yield { kind, holder: holder as Json, field };
  };
  for (const v of (spec.volumes as Json[] | undefined) ?? []) {
    yield* at("Secret", v.secret, "secretName");
    yield* at("ConfigMap", v.configMap, "name");
    for (const src of ((v.projected as Json | undefined)?.sources as Json[] | undefined) ?? []) {
      yield* at("Secret", src.secret, "name");
      yield* at("ConfigMap", src.configMap, "name");
    }
  }
  for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    for (const e of (c.env as Json[] | undefined) ?? []) {
      const from = e.valueFrom as Json | undefined;
      yield* at("Secret", from?.secretKeyRef, "name");
      yield* at("ConfigMap", from?.configMapKeyRef, "name");
    }
    for (const e of (c.envFrom as Json[] | undefined) ?? []) {
      yield* at("Secret", e.secretRef, "name");
      yield* at("ConfigMap", e.configMapRef, "name");
    }
  }
}

/** Each Secret and ConfigMap the pod's volumes and its containers' env name, once. */
export function podRefs(pod: PodLike): ObjectRef[] {
  const found = new Map<string, ObjectRef>();
  for (const { kind, holder, field } of refHolders(pod.spec ?? {})) {
    const name = holder[field] as string;
    if (name) found.set(`${kind}/${name}`, { kind, name });
  }
  return [...found.values()];
}

/**
 * The pod named `name` in `namespace`, shaped as `pod`: every Secret and ConfigMap it names read
 * from `renamed(ref)` (copies the caller makes, since the Sandbox's own go with it), each container
 * sleeping (SLEEP) with no probe and no hook, init containers as they were.
 */
export function shapedPod(pod: PodLike, name: string, namespace: string, renamed: (ref: ObjectRef) => string): Json {
  const spec = structuredClone(pod.spec ?? {}) as NonNullable<PodLike["spec"]>;
  for (const key of DERIVED) delete spec[key];
  for (const { kind, holder, field } of refHolders(spec))
    holder[field] = renamed({ kind, name: holder[field] as string });
  spec.containers = (spec.containers ?? []).map((c) => {
    const out: Container = { ...c };
    for (const key of SOFTWARE) delete out[key];
    out.command = SLEEP;
    return out;
  });
  return { apiVersion: "v1", kind: "Pod", metadata: { name, namespace }, spec };
}
