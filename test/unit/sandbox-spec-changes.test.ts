// What a spec change does to a live Sandbox (capabilities/sandbox/spec-changes.ts, decision 0017):
// the pod keeps what it was built from and SpecApplied names every field that changed since;
// spec.idleTimeout takes effect without the pod and is never reported.
import type { kind } from "kubernetes-fluent-client";
import { SPEC_DIGEST_ANNOTATION } from "../../api/wire";
import {
  changedFields,
  specAppliedCondition,
  specDigest,
  withSpecDigest,
} from "../../capabilities/sandbox/spec-changes";

const spec = {
  image: "ghcr.io/example/harness:1",
  env: [{ name: "A", value: "1" }],
  securityContext: { runAsNonRoot: true, capabilities: { drop: ["ALL"] } },
  idleTimeout: "30m",
};
const podFor = (s: Record<string, unknown>): kind.Pod => withSpecDigest({ metadata: { name: "sb" } }, s);

describe("specDigest", () => {
  it("is the same whatever the order of an object's keys", () => {
    const reordered = {
      idleTimeout: "30m",
      securityContext: { capabilities: { drop: ["ALL"] }, runAsNonRoot: true },
      env: spec.env,
      image: spec.image,
    };
    expect(specDigest(reordered)).toEqual(specDigest(spec));
  });

  it("leaves out what takes effect without the pod (idleTimeout)", () => {
    expect(Object.keys(specDigest(spec))).toEqual(["env", "image", "securityContext"]);
  });

  it("differs when a value does, even deep inside", () => {
    const other = { ...spec, securityContext: { runAsNonRoot: true, capabilities: { drop: ["NET_RAW"] } } };
    expect(specDigest(other).securityContext).not.toBe(specDigest(spec).securityContext);
  });
});

describe("changedFields and SpecApplied", () => {
  it("puts the digest on the pod as an annotation, keeping the pod's others", () => {
    const pod = withSpecDigest({ metadata: { name: "sb", annotations: { keep: "me" } } }, spec);
    expect(pod.metadata?.annotations?.keep).toBe("me");
    expect(JSON.parse(pod.metadata!.annotations![SPEC_DIGEST_ANNOTATION])).toEqual(specDigest(spec));
  });

  it("says the pod runs the current spec when nothing changed but idleTimeout", () => {
    const pod = podFor(spec);
    expect(changedFields({ ...spec, idleTimeout: "2h" }, pod)).toEqual([]);
    expect(specAppliedCondition({ ...spec, idleTimeout: "2h" }, pod)).toMatchObject({
      type: "SpecApplied",
      status: "True",
      reason: "Applied",
    });
  });

  it("names every field that changed, was added or was removed since the pod was built", () => {
    const pod = podFor(spec);
    const { env: _gone, ...withoutEnv } = spec;
    const next = { ...withoutEnv, image: "ghcr.io/example/harness:2", shmSize: "1Gi" };
    expect(changedFields(next, pod)).toEqual(["spec.env", "spec.image", "spec.shmSize"]);
    const c = specAppliedCondition(next, pod)!;
    expect(c).toMatchObject({ type: "SpecApplied", status: "False", reason: "PodSpecChanged" });
    expect(c.message).toContain("spec.env, spec.image, spec.shmSize changed after the pod was built");
    expect(c.message).toContain("create a new Sandbox");
  });

  it("says nothing for a pod without a digest, or with a broken one, or with no pod", () => {
    expect(specAppliedCondition(spec, { metadata: { name: "sb" } })).toBeUndefined();
    expect(
      specAppliedCondition(spec, { metadata: { annotations: { [SPEC_DIGEST_ANNOTATION]: "{not json" } } }),
    ).toBeUndefined();
    expect(specAppliedCondition(spec, undefined)).toBeUndefined();
  });
});
