// The scripted model as a cluster serves it (dev/in-cluster-model.ts, decision 0039): a hardened pod
// of the companions image, the key from its own Secret, and a Service, with no policy of its own: the
// Sandboxes reach it through the egress point, as any provider (decision 0051). And its request log (dev/scripted-model.ts requestLine), which a
// test reads in place of the recorded requests: never the key, nor the authorization it came with.
import type { IncomingHttpHeaders } from "node:http";
import { SCRIPTED_MODEL_PORT, scriptedModelObjects, scriptedModelUrl } from "../../dev/in-cluster-model";
import { requestLine } from "../../dev/scripted-model";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;
const placement = {
  nodeSelector: { "jr2.dev/node": "real" },
  tolerations: [{ key: "jr2.dev/node", operator: "Exists" }],
};
const objects = scriptedModelObjects({
  namespace: "models",
  image: "registry.local/jr2/companions@sha256:abc",
  key: "sk-held",
  script: [{ text: "hi" }],
  placement,
}) as Obj[];
const byKind = (k: string) => objects.filter((o) => o.kind === k);

describe("the in-cluster scripted model", () => {
  it("runs the image's /app/scripted-model.js as a non-root pod with a read-only root, where it is placed", () => {
    const [deployment] = byKind("Deployment");
    expect(deployment.metadata.namespace).toBe("models");
    const pod = deployment.spec.template;
    expect(pod.spec).toMatchObject(placement);
    expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 65532 });
    const [c] = pod.spec.containers;
    expect(c.command).toEqual(["node", "/app/scripted-model.js", "/etc/model/script/script.json"]);
    expect(c.args).toEqual(expect.arrayContaining(["--host", "0.0.0.0", "--key-file", "/etc/model/key/key", "--log"]));
    expect(c.securityContext).toMatchObject({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
    // The key only in its Secret, never in the pod's spec.
    expect(JSON.stringify(pod)).not.toContain("sk-held");
    expect(byKind("Secret")[0].stringData).toEqual({ key: "sk-held" });
  });

  it("is reached at its Service name, and opens no way out of the Sandboxes' pods of its own", () => {
    expect(scriptedModelUrl("models")).toBe(`http://scripted-model.models.svc.cluster.local:${SCRIPTED_MODEL_PORT}`);
    const [svc] = byKind("Service");
    expect(svc.spec.selector).toEqual(byKind("Deployment")[0].spec.template.metadata.labels);
    expect(svc.spec.selector).toEqual(byKind("Deployment")[0].spec.selector.matchLabels);
    expect(byKind("NetworkPolicy")).toEqual([]);
  });
});

describe("the scripted model's request log", () => {
  const request = (authorization: string | undefined) => ({
    path: "/v1/chat/completions",
    headers: { authorization } as IncomingHttpHeaders,
    authorization,
    body: {
      messages: [
        { role: "user", content: "go" },
        { role: "tool", content: "hello\n65532\n" },
      ],
    },
    status: 200,
    step: 1,
  });

  it("says whether the key came, and what was sent back, never the key", () => {
    const line = requestLine(request("Bearer sk-held"), "sk-held");
    expect(line).toMatchObject({ keyed: true, status: 200, step: 1, messages: 2, last: { role: "tool" } });
    expect(line.last?.content).toBe("hello\n65532\n");
    expect(JSON.stringify(line)).not.toContain("sk-held");
    expect(requestLine(request("Bearer sk-stand-in"), "sk-held")).toMatchObject({ keyed: false });
    expect(JSON.stringify(requestLine(request("Bearer sk-stand-in"), "sk-held"))).not.toContain("stand-in");
  });

  it("bounds what it prints of a message", () => {
    const big = request(undefined);
    big.body.messages[1].content = "x".repeat(10_000);
    expect(requestLine(big, undefined).last?.content).toHaveLength(2000);
    expect(requestLine(big, undefined).keyed).toBeUndefined();
  });
});
