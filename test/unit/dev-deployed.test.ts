// The built manifests as the node tier applies them (dev/deployed.ts, decision 0039): images by
// the digest pushed, Deployments on the real node, nothing else changed, and an image this run did
// not push refused by name.
import { onTheRealNode } from "../../dev/deployed";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;
const pushed = {
  "127.0.0.1:5000/jr2/companions:0.1.0": "127.0.0.1:5000/jr2/companions@sha256:aa",
  "127.0.0.1:5000/jr2/controller:0.1.0": "127.0.0.1:5000/jr2/controller@sha256:bb",
};
const placement = {
  nodeSelector: { "jr2.dev/node": "real" },
  tolerations: [{ key: "jr2.dev/node", operator: "Equal", value: "real", effect: "NoSchedule" }],
};
const workload = (kind: string, image: string, extra: Obj = {}) => ({
  kind,
  metadata: { name: kind.toLowerCase(), namespace: "jr2-system" },
  spec: {
    template: {
      spec: {
        ...extra,
        containers: [
          { name: "main", image, env: [{ name: "JR2_CUSTODIAN_IMAGE", value: "127.0.0.1:5000/jr2/companions:0.1.0" }] },
        ],
      },
    },
  },
});

describe("the built manifests on the real node", () => {
  const docs: Obj[] = [
    { kind: "ConfigMap", metadata: { name: "x" }, data: { a: "127.0.0.1:5000/jr2/companions:0.1.0" } },
    workload("Deployment", "127.0.0.1:5000/jr2/controller:0.1.0", { tolerations: [{ key: "a", operator: "Exists" }] }),
    workload("DaemonSet", "127.0.0.1:5000/jr2/companions:0.1.0", { tolerations: [{ operator: "Exists" }] }),
  ];
  const out = onTheRealNode(docs, pushed, placement) as Obj[];

  it("names each image, and an env value naming one, by the digest pushed", () => {
    expect(out[1].spec.template.spec.containers[0].image).toBe("127.0.0.1:5000/jr2/controller@sha256:bb");
    expect(out[2].spec.template.spec.containers[0].image).toBe("127.0.0.1:5000/jr2/companions@sha256:aa");
    expect(out[1].spec.template.spec.containers[0].env[0].value).toBe("127.0.0.1:5000/jr2/companions@sha256:aa");
  });

  it("places Deployments on the real node beside their own tolerations; a DaemonSet and the rest are as built", () => {
    expect(out[1].spec.template.spec.nodeSelector).toEqual(placement.nodeSelector);
    expect(out[1].spec.template.spec.tolerations).toEqual([{ key: "a", operator: "Exists" }, ...placement.tolerations]);
    expect(out[2].spec.template.spec.nodeSelector).toBeUndefined();
    expect(out[2].spec.template.spec.tolerations).toEqual([{ operator: "Exists" }]);
    expect(out[0]).toBe(docs[0]);
    // The input is not changed in place.
    expect(docs[1].spec.template.spec.containers[0].image).toBe("127.0.0.1:5000/jr2/controller:0.1.0");
  });

  it("refuses an image this run did not push, naming the workload and the container", () => {
    expect(() => onTheRealNode([workload("Deployment", "ghcr.io/other:1")], pushed, placement)).toThrow(
      /Deployment jr2-system\/deployment container main: image ghcr.io\/other:1 is not one npm run images pushed/,
    );
  });
});
