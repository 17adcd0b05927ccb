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

/** Each Secret and ConfigMap the pod's volumes and its containers' env name, once. */
export function podRefs(pod: PodLike): ObjectRef[] {
  const found = new Map<string, ObjectRef>();
  const add = (kind: ObjectRef["kind"], name: unknown) => {
    if (typeof name === "string" && name) found.set(`${kind}/${name}`, { kind, name });
  };
  const spec = pod.spec ?? {};
  for (const v of (spec.volumes as Json[] | undefined) ?? []) {
    add("Secret", (v.secret as Json | undefined)?.secretName);
    add("ConfigMap", (v.configMap as Json | undefined)?.name);
    for (const s of ((v.projected as Json | undefined)?.sources as Json[] | undefined) ?? []) {
      add("Secret", (s.secret as Json | undefined)?.name);
      add("ConfigMap", (s.configMap as Json | undefined)?.name);
    }
  }
  for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    for (const e of (c.env as Json[] | undefined) ?? []) {
      const from = e.valueFrom as Json | undefined;
      add("Secret", (from?.secretKeyRef as Json | undefined)?.name);
      add("ConfigMap", (from?.configMapKeyRef as Json | undefined)?.name);
    }
    for (const e of (c.envFrom as Json[] | undefined) ?? []) {
      add("Secret", (e.secretRef as Json | undefined)?.name);
      add("ConfigMap", (e.configMapRef as Json | undefined)?.name);
    }
  }
  return [...found.values()];
}

/**
 * The pod named `name` in `namespace`, shaped as `pod`: every Secret and ConfigMap it names read
 * from `renamed(ref)` (copies the caller makes, since the Sandbox's own go with it), each container
 * sleeping (SLEEP) with no probe and no hook, init containers as they were.
 */
export function shapedPod(pod: PodLike, name: string, namespace: string, renamed: (ref: ObjectRef) => string): Json {
  const spec: Json = structuredClone(pod.spec ?? {});
  for (const key of DERIVED) delete spec[key];
  const rename = (kind: ObjectRef["kind"], holder: Json | undefined, field: string) => {
    if (holder && typeof holder[field] === "string") holder[field] = renamed({ kind, name: holder[field] as string });
  };
  for (const v of (spec.volumes as Json[] | undefined) ?? []) {
    rename("Secret", v.secret as Json | undefined, "secretName");
    rename("ConfigMap", v.configMap as Json | undefined, "name");
    for (const s of ((v.projected as Json | undefined)?.sources as Json[] | undefined) ?? []) {
      rename("Secret", s.secret as Json | undefined, "name");
      rename("ConfigMap", s.configMap as Json | undefined, "name");
    }
  }
  const envRenamed = (c: Container) => {
    for (const e of (c.env as Json[] | undefined) ?? []) {
      const from = e.valueFrom as Json | undefined;
      rename("Secret", from?.secretKeyRef as Json | undefined, "name");
      rename("ConfigMap", from?.configMapKeyRef as Json | undefined, "name");
    }
    for (const e of (c.envFrom as Json[] | undefined) ?? []) {
      rename("Secret", e.secretRef as Json | undefined, "name");
      rename("ConfigMap", e.configMapRef as Json | undefined, "name");
    }
    return c;
  };
  if (spec.initContainers) spec.initContainers = (spec.initContainers as Container[]).map(envRenamed);
  spec.containers = ((spec.containers as Container[] | undefined) ?? []).map((c) => {
    const out: Container = envRenamed({ ...c });
    for (const key of SOFTWARE) delete out[key];
    out.command = SLEEP;
    return out;
  });
  return { apiVersion: "v1", kind: "Pod", metadata: { name, namespace }, spec };
}
