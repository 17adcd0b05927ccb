// The pooled API client's connections (lib/kube.ts, decision 0008): over HTTP/2 a burst of
// writes and reads shares one connection, as the Orchestrator relies on; over HTTP/1.1 each
// request in flight takes a connection of its own. undici, by default, runs one request at a time
// per connection and a POST or PATCH only on an idle one, HTTP/2 or not.
import { connectionsOpenedBy, useClient, type Kube } from "./support/api-client";
import { useNamespace } from "./support/cluster";

const ns = useNamespace("api-conn");
const BURST = 40;

type ConfigMap = { metadata: { name: string; uid: string; resourceVersion: string }; data?: Record<string, string> };

const path = (name?: string) => `/api/v1/namespaces/${ns.name}/configmaps${name ? `/${name}` : ""}`;

/** BURST requests at once: creates, merge patches of what was created, and reads. */
async function burst(kube: Kube, tag: string): Promise<ConfigMap[]> {
  const names = Array.from({ length: BURST / 2 }, (_, i) => `${tag}-${i}`);
  const created = await Promise.all([
    ...names.map((name) =>
      kube.kubeRequest<ConfigMap>("POST", path(), { apiVersion: "v1", kind: "ConfigMap", metadata: { name } }),
    ),
    ...names.map(() => kube.kubeRequest<ConfigMap>("GET", `/api/v1/namespaces/${ns.name}`)),
  ]);
  const patched = await Promise.all(
    names.map((name) =>
      kube.kubeRequest<ConfigMap>("PATCH", path(name), { data: { tag } }, "application/merge-patch+json"),
    ),
  );
  expect(created.slice(0, names.length).map((c) => c.metadata.name)).toEqual(names);
  return patched;
}

describe("the pooled API client over HTTP/2", () => {
  const client = useClient(true);

  it(`carries ${BURST} writes and reads at once on the one connection it has`, async () => {
    const { result, opened } = await connectionsOpenedBy(() => burst(client.kube, "h2"));
    expect(result.every((c) => c.data?.tag === "h2")).toBe(true);
    expect(opened).toEqual([]);
  });

  it("completes a DELETE with a body (preconditions) sent amid a burst of creates", async () => {
    const victim = await client.kube.kubeRequest<ConfigMap>("POST", path(), {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "h2-victim" },
    });
    const creates = (from: number) =>
      Array.from({ length: BURST / 2 }, (_, i) =>
        client.kube.kubeRequest("POST", path(), {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: `h2d-${from + i}` },
        }),
      );
    // undici sends a streamed body only on an idle connection: the DELETE waits for the creates
    // before it, and the creates after it go on without it.
    await Promise.all([
      ...creates(0),
      client.kube.kubeRequest("DELETE", path(victim.metadata.name), {
        apiVersion: "v1",
        kind: "DeleteOptions",
        preconditions: { uid: victim.metadata.uid, resourceVersion: victim.metadata.resourceVersion },
      }),
      ...creates(BURST / 2),
    ]);
    const left = await client.kube.kubeRequest<{ items: ConfigMap[] }>("GET", path());
    const names = new Set(left.items.map((c) => c.metadata.name));
    expect(names.has("h2-victim")).toBe(false);
    expect(Array.from({ length: BURST }, (_, i) => names.has(`h2d-${i}`)).every(Boolean)).toBe(true);
  });
});

describe("the pooled API client over HTTP/1.1", () => {
  const client = useClient(false);

  // The contrast: what HTTP/2 saves, and proof that the count above sees new connections.
  it(`opens a connection for each request in flight beyond the first`, async () => {
    const { result, opened } = await connectionsOpenedBy(() => burst(client.kube, "h1"));
    expect(result.every((c) => c.data?.tag === "h1")).toBe(true);
    expect(opened.length).toBeGreaterThanOrEqual(BURST / 2);
    expect(new Set(opened)).toEqual(new Set(["http/1.1"]));
  });
});
