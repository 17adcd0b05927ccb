// A DELETE with preconditions through the pooled client (lib/kube.ts), over HTTP/1.1 and HTTP/2:
// the lease's reap deletes only the Sandbox it judged (decision 0014), so a keepalive renewed in
// between is a 409 that deletes nothing. Over HTTP/2 undici once refused any DELETE body.
import { useClient } from "./support/api-client";
import { useNamespace } from "./support/cluster";

const ns = useNamespace("delete-pre");

type ConfigMap = { metadata: { name: string; uid: string; resourceVersion: string }; data?: Record<string, string> };

describe.each([
  ["HTTP/1.1", false],
  ["HTTP/2", true],
])("a DELETE with preconditions over %s", (_label, http2) => {
  const client = useClient(http2);
  const path = (name?: string) => `/api/v1/namespaces/${ns.name}/configmaps${name ? `/${name}` : ""}`;
  const deleteAsOf = (cm: ConfigMap) =>
    client.kube.kubeRequest("DELETE", `${path(cm.metadata.name)}?propagationPolicy=Background`, {
      apiVersion: "v1",
      kind: "DeleteOptions",
      preconditions: { uid: cm.metadata.uid, resourceVersion: cm.metadata.resourceVersion },
    });

  it("deletes nothing when the object changed since it was read, and deletes it as last read", async () => {
    const name = `lease-${http2 ? "h2" : "h1"}`;
    const judged = await client.kube.kubeRequest<ConfigMap>("POST", path(), {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name },
      data: { keepalive: "first" },
    });
    // A renewal after the judgement.
    const renewed = await client.kube.kubeRequest<ConfigMap>(
      "PATCH",
      path(name),
      { data: { keepalive: "renewed" } },
      "application/merge-patch+json",
    );
    expect(renewed.metadata.resourceVersion).not.toBe(judged.metadata.resourceVersion);

    const refused = await deleteAsOf(judged).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeDefined();
    expect(client.api.isConflict(refused)).toBe(true);
    const still = await client.kube.kubeRequest<ConfigMap>("GET", path(name));
    expect(still.data).toEqual({ keepalive: "renewed" });

    await deleteAsOf(still);
    const gone = await client.kube.kubeRequest("GET", path(name)).then(
      () => false,
      (err: unknown) => client.api.isNotFound(err),
    );
    expect(gone).toBe(true);
  });
});
