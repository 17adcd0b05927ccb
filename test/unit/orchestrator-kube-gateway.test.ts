// The Kubernetes gateway's waits over a hand-driven watch (the watch is the gateway's only input for
// them; no API call is made by a provision). The race it pins: a CR written a moment ago that the
// watch has not delivered yet is not "absent". And a call to the Harness over a connection closed
// under it: a GET is sent again, a POST is not.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { SandboxModel } from "../../api/crd";
import { KubeSandboxGateway } from "../../orchestrator/workspaces/kube-gateway";
import { HarnessMisbehaved } from "../../orchestrator/workspaces/sandbox-gateway";
import type { SandboxListener, SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";

class HandWatch {
  held = new Map<string, SandboxModel>();
  listeners = new Map<string, Set<SandboxListener>>();
  listed = true;
  whenListed = () => Promise.resolve();
  get = (name: string) => this.held.get(name);
  all = () => [...this.held.values()];
  subscribe(name: string, l: SandboxListener) {
    const set = this.listeners.get(name) ?? new Set();
    this.listeners.set(name, set.add(l));
    l(this.held.get(name));
    return () => set.delete(l);
  }
  deliver(name: string, s: SandboxModel | undefined) {
    if (s) this.held.set(name, s);
    else this.held.delete(name);
    for (const l of this.listeners.get(name) ?? []) l(s);
  }
}

const ready = (name: string): SandboxModel =>
  ({
    metadata: { name, namespace: "ns", uid: "u1", resourceVersion: "2" },
    status: {
      phase: "Ready",
      endpoint: `http://${name}.ns.svc:8080`,
      conditions: [
        {
          type: "Scheduled",
          status: "True",
          reason: "Scheduled",
          message: "",
          lastTransitionTime: new Date().toISOString(),
        },
        {
          type: "Ready",
          status: "True",
          reason: "PodReady",
          message: "",
          lastTransitionTime: new Date().toISOString(),
        },
      ],
    },
  }) as unknown as SandboxModel;

function gateway(watch: HandWatch) {
  return new KubeSandboxGateway({
    namespace: "ns",
    watch: watch as unknown as SandboxWatch,
    signingKey: Buffer.alloc(32, 1),
  });
}

describe("the Kubernetes gateway's provision wait", () => {
  const budgets = { podMs: 60_000, repoMs: 60_000 };

  it("waits through a watch that has not delivered the Sandbox yet, then answers Ready", async () => {
    const watch = new HandWatch();
    const p = gateway(watch).provision("w1", budgets, { onWait: () => undefined });
    await new Promise((r) => setImmediate(r));
    watch.deliver("w1", ready("w1"));
    await expect(p).resolves.toEqual({ endpoint: "http://w1.ns.svc:8080" });
  });

  it("fails Lost when a Sandbox it has seen goes away", async () => {
    const watch = new HandWatch();
    const pending = { ...ready("w2"), status: { phase: "Pending", conditions: [] } } as unknown as SandboxModel;
    watch.deliver("w2", pending);
    const p = gateway(watch).provision("w2", budgets, { onWait: () => undefined });
    watch.deliver("w2", undefined);
    await expect(p).rejects.toMatchObject({ stage: "provision", reason: "Lost" });
  });
});

describe("a call to the Harness", () => {
  // A Harness whose first connection is closed as the request arrives (a kept-alive connection the
  // server dropped), then answers: a GET is sent once more, a POST never.
  async function flakyHarness() {
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push(req.method!);
      if (seen.length === 1) return req.socket.destroy();
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ events: [], next: 3, idle: true }));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return {
      seen,
      url,
      close: () => {
        server.closeAllConnections();
        return new Promise((r) => server.close(r));
      },
    };
  }

  it("sends a GET again when the connection was closed under it, and a POST never", async () => {
    for (const method of ["GET", "POST"] as const) {
      const h = await flakyHarness();
      const watch = new HandWatch();
      watch.deliver("ws-1", ready("ws-1"));
      const p = new KubeSandboxGateway({
        namespace: "ns",
        watch: watch as unknown as SandboxWatch,
        signingKey: Buffer.alloc(32, 1),
        resolveEndpoint: async () => h.url,
      });
      try {
        const call = p.harness("ws-1", method, "/agents/coder/c1/stream?offset=0", method === "POST" ? {} : undefined);
        if (method === "GET") expect(await call).toEqual({ status: 200, body: { events: [], next: 3, idle: true } });
        else await expect(call).rejects.toMatchObject({ code: expect.stringMatching(/ECONNRESET|UND_ERR_SOCKET/) });
        expect(h.seen).toEqual(method === "GET" ? ["GET", "GET"] : ["POST"]);
      } finally {
        await h.close();
      }
    }
  });
});

describe("a Harness's answer is input, not truth (decision 0042)", () => {
  /** A Harness over real HTTP on loopback, and a bystander host it must never make us call. */
  async function server(handler: Parameters<typeof createServer>[1]) {
    const srv = createServer(handler);
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    return {
      url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`,
      close: () => {
        srv.closeAllConnections();
        return new Promise((r) => srv.close(r));
      },
    };
  }
  const gatewayTo = (url: string) => {
    const watch = new HandWatch();
    watch.deliver("ws-1", ready("ws-1"));
    return new KubeSandboxGateway({
      namespace: "ns",
      watch: watch as unknown as SandboxWatch,
      signingKey: Buffer.alloc(32, 1),
      resolveEndpoint: async () => url,
    });
  };

  it("stops reading an endless answer at its bound and closes the connection: the Orchestrator's memory stays bounded", async () => {
    let sent = 0;
    let closed = false;
    let onClosed: () => void = () => undefined;
    const whenClosed = new Promise<void>((r) => (onClosed = r));
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const endless = await server((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      const pump = () => {
        while (!closed && res.write(chunk)) sent += chunk.length;
        if (!closed) res.once("drain", pump);
      };
      res.on("close", () => {
        closed = true;
        onClosed();
      });
      pump();
    });
    try {
      const call = gatewayTo(endless.url).harness(
        "ws-1",
        "GET",
        "/agents/coder/ws-1.c/stream?offset=0",
        undefined,
        undefined,
        {
          maxBytes: 1024 * 1024,
          timeoutMs: 30_000,
        },
      );
      await expect(call).rejects.toBeInstanceOf(HarnessMisbehaved);
      await expect(call).rejects.toMatchObject({ workspace: "ws-1", reason: "too_large" });
      await expect(call).rejects.toThrow(
        /ws-1's Harness answered GET \/agents\/coder\/ws-1.c\/stream with more than 1048576 bytes/,
      );
      // The connection was closed: the Harness stopped being able to send. What it sent before is
      // bounded by the read bound plus what sockets buffer, not by the Harness.
      await whenClosed;
      expect(sent).toBeLessThan(16 * 1024 * 1024);
    } finally {
      await endless.close();
    }
  });

  it("gives up on a Harness that holds its answer past the bound in time", async () => {
    const slow = await server((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.write("{");
    });
    try {
      const call = gatewayTo(slow.url).harness("ws-1", "POST", "/agents/coder/ws-1.c", {}, undefined, {
        maxBytes: 1024,
        timeoutMs: 300,
      });
      await expect(call).rejects.toMatchObject({ reason: "too_slow" });
    } finally {
      await slow.close();
    }
  });

  it("bounds the whole attach: an answer drip-fed past the deadline fails TooSlow and is reported as misbehaviour", async () => {
    let dripping: NodeJS.Timeout | undefined;
    const drip = await server((_req, res) => {
      // Headers at once, then a byte every 20 ms, never the end: within every per-read timeout.
      res.writeHead(200, { "content-type": "application/json" });
      res.write("{");
      dripping = setInterval(() => res.write(" "), 20);
      res.on("close", () => clearInterval(dripping));
    });
    const misbehaved: Array<[string, string, string]> = [];
    const watch = new HandWatch();
    watch.deliver("ws-1", ready("ws-1"));
    const g = new KubeSandboxGateway({
      namespace: "ns",
      watch: watch as unknown as SandboxWatch,
      signingKey: Buffer.alloc(32, 1),
      resolveEndpoint: async () => drip.url,
      attachDeadlineMs: 300,
      onMisbehaviour: (w, r, m) => misbehaved.push([w, r, m]),
    });
    try {
      const err = await g.attach("ws-1", { branch: "b", slots: [] } as never).catch((e: unknown) => e);
      expect(err).toMatchObject({ stage: "attach", reason: "TooSlow", details: { deadlineMs: 300 } });
      expect(misbehaved).toEqual([
        ["ws-1", "too_slow", "workspace ws-1's Harness did not answer its attach, to the end, within 300 ms"],
      ]);
    } finally {
      clearInterval(dripping);
      await drip.close();
    }
  });

  it("requests no path but one on the Harness's own origin: an absolute or //host path is refused unsent", async () => {
    const seen: string[] = [];
    const harness = await server((req, res) => {
      seen.push(req.url!);
      res.end("{}");
    });
    const elsewhere = await server((req, res) => {
      seen.push(`elsewhere ${req.url}`);
      res.end("{}");
    });
    try {
      const g = gatewayTo(harness.url);
      const host = new URL(elsewhere.url).host;
      for (const path of [`${elsewhere.url}/steal`, `//${host}/steal`, "steal", `http://${host}/x`])
        await expect(g.harness("ws-1", "GET", path)).rejects.toThrow(/is not a path on workspace ws-1's Harness/);
      expect(seen).toEqual([]);
    } finally {
      await harness.close();
      await elsewhere.close();
    }
  });
});
