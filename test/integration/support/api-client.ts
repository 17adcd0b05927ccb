// The pooled API client (lib/kube.ts) loaded afresh for one test file, over HTTP/1.1 or HTTP/2,
// and a count of the TCP connections undici opens meanwhile.
import diagnostics from "node:diagnostics_channel";
import type { TLSSocket } from "node:tls";

export type Kube = typeof import("../../../lib/kube");
export type Api = typeof import("../../../lib/api-writer");

/**
 * lib/kube.ts loaded afresh with JR2_API_HTTP2 set as asked. It reads the setting when it opens
 * its connection pool, at its first call: that call is made here, and the protocol its connection
 * negotiated (ALPN: "h2" or "http/1.1") is returned, so a test knows what it runs over.
 */
export async function clientFor(http2: boolean): Promise<{ kube: Kube; api: Api; protocol: string }> {
  const before = process.env.JR2_API_HTTP2;
  process.env.JR2_API_HTTP2 = http2 ? "1" : "0";
  try {
    let loaded: { kube: Kube; api: Api } | undefined;
    await jest.isolateModulesAsync(async () => {
      loaded = { kube: await import("../../../lib/kube"), api: await import("../../../lib/api-writer") };
    });
    const { opened } = await connectionsOpenedBy(() => loaded!.kube.kubeRequest("GET", "/version"));
    if (opened.length !== 1) throw new Error(`the first call opened ${opened.length} connections, not 1`);
    return { ...loaded!, protocol: opened[0] };
  } finally {
    if (before === undefined) delete process.env.JR2_API_HTTP2;
    else process.env.JR2_API_HTTP2 = before;
  }
}

/**
 * For a describe block: the client over the protocol asked, loaded before its tests, which fail
 * at once if the connection negotiated another protocol.
 */
export function useClient(http2: boolean): { kube: Kube; api: Api } {
  const client = {} as { kube: Kube; api: Api };
  beforeAll(async () => {
    const { protocol, ...loaded } = await clientFor(http2);
    expect(protocol).toBe(http2 ? "h2" : "http/1.1");
    Object.assign(client, loaded);
  });
  return client;
}

/**
 * Runs `fn` and lists the connections any undici client in this process opened meanwhile, by the
 * protocol each negotiated.
 */
export async function connectionsOpenedBy<T>(fn: () => Promise<T>): Promise<{ result: T; opened: string[] }> {
  const opened: string[] = [];
  const onConnected = (message: unknown) => {
    const socket = (message as { socket?: TLSSocket }).socket;
    opened.push(socket?.alpnProtocol || "none");
  };
  diagnostics.subscribe("undici:client:connected", onConnected);
  try {
    const result = await fn();
    return { result, opened };
  } finally {
    diagnostics.unsubscribe("undici:client:connected", onConnected);
  }
}
