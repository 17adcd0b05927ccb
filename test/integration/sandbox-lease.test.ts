// The keepalive lease (decision 0014): a Sandbox whose client keeps renewing
// jr2.dev/keepalive is kept past its idle timeout; one whose renewals stop is deleted one idle
// timeout after the last, and the garbage collector takes its pod and Service.
import { K8s, kind } from "kubernetes-fluent-client";
import { SandboxModel } from "../../api/crd";
import { getSandbox, listPods, createSandbox, useNamespace, waitFor, waitPhase, eventsFor } from "./support/cluster";

const ns = useNamespace("lease");
const IDLE_SECONDS = 4;

const renew = (name: string) =>
  K8s(SandboxModel, { name, namespace: ns.name }).Patch([
    { op: "add", path: "/metadata/annotations", value: { "jr2.dev/keepalive": new Date().toISOString() } },
  ]);

const gone = async (read: () => Promise<unknown>) => {
  try {
    await read();
    return false;
  } catch (err) {
    if ((err as { status?: number }).status === 404) return true;
    throw err;
  }
};

describe("the keepalive lease", () => {
  it("keeps a Sandbox whose keepalive is renewed, and reaps it once renewals stop", async () => {
    const created = await createSandbox(ns.name, "renewed", { idleTimeout: `${IDLE_SECONDS}s` });
    await waitPhase(ns.name, "renewed", "Ready");
    const createdAt = Date.parse(String(created.metadata.creationTimestamp));

    // Renew every second until well past the first deadline (creation + idle timeout).
    let lastRenewal = Date.now();
    while (Date.now() < createdAt + 2 * IDLE_SECONDS * 1000) {
      await renew("renewed");
      lastRenewal = Date.now();
      expect((await getSandbox(ns.name, "renewed")).metadata.deletionTimestamp).toBeUndefined();
      await new Promise((r) => setTimeout(r, 1000));
    }
    expect((await getSandbox(ns.name, "renewed")).status?.phase).toBe("Ready");

    // Renewals stop: deleted one idle timeout after the last, and not before.
    await waitFor(
      "the Sandbox to be reaped",
      () => gone(() => getSandbox(ns.name, "renewed")),
      (g) => g,
      30_000,
    );
    expect(Date.now()).toBeGreaterThanOrEqual(lastRenewal + IDLE_SECONDS * 1000 - 1000);
    const reaped = await eventsFor(ns.name, "renewed");
    expect(reaped.some((e) => e.reason === "Reaped")).toBe(true);

    await waitFor(
      "its pod to be collected",
      () => listPods(ns.name, "renewed"),
      (pods) => pods.length === 0,
      60_000,
    );
    await waitFor(
      "its Service to be collected",
      () => gone(() => K8s(kind.Service).InNamespace(ns.name).Get("renewed")),
      (g) => g,
      60_000,
    );
  });

  it("reaps a Sandbox that was never renewed, counting from its creation", async () => {
    const created = await createSandbox(ns.name, "abandoned", { idleTimeout: `${IDLE_SECONDS}s` });
    const createdAt = Date.parse(String(created.metadata.creationTimestamp));
    await waitFor(
      "the Sandbox to be reaped",
      () => gone(() => getSandbox(ns.name, "abandoned")),
      (g) => g,
      30_000,
    );
    // Not before one idle timeout from its creation, by the API server's own clock (its Reaped
    // Event's time against its creationTimestamp; both truncate to the second, which keeps the
    // order: floor(created + idle) >= floor(created) + idle).
    const reaped = await waitFor(
      "its Reaped Event",
      async () => (await eventsFor(ns.name, "abandoned")).find((e) => e.reason === "Reaped"),
      (e) => e !== undefined,
    );
    const reapedAt = Date.parse(String(reaped!.eventTime ?? reaped!.lastTimestamp ?? reaped!.firstTimestamp));
    expect(reapedAt - createdAt).toBeGreaterThanOrEqual(IDLE_SECONDS * 1000);
  });

  it("counts an unparsable keepalive as absent and warns about it", async () => {
    await createSandbox(ns.name, "garbled", { idleTimeout: "30m" }, { "jr2.dev/keepalive": "yesterday" });
    const events = await waitFor(
      "a KeepaliveInvalid Warning",
      () => eventsFor(ns.name, "garbled"),
      (es) => es.some((e) => e.reason === "KeepaliveInvalid"),
    );
    const warning = events.find((e) => e.reason === "KeepaliveInvalid")!;
    expect(warning.type).toBe("Warning");
    expect(warning.message).toContain('"yesterday"');
    expect((await getSandbox(ns.name, "garbled")).metadata.deletionTimestamp).toBeUndefined();
  });
});
