// npm start's choice of where the Sandboxes run (dev/start-mode.ts, decision 0039): in pods on the
// local cluster's real node when it is up, else local process mode, the named fallback, whose banner
// says why and what it gives up.
import { LOCAL_MODE_WARNING } from "../../dev/local-model";
import { PodConfig } from "../../orchestrator/workspaces/pod-config";
import { START_MODE_ENV, modeBanner, runtimeBanner, startArgs, startMode, startRuntime } from "../../dev/start-mode";

const up = {
  KUBECONFIG: "/cache/kubeconfig.yaml",
  JR2_REGISTRY: "127.0.0.1:5000",
  JR2_REAL_NODE_STATUS: "up",
  JR2_REAL_NODE_NAME: "jr2-real-0",
  JR2_REAL_NODE_LABEL: "jr2.dev/node=real",
  JR2_REAL_NODE_TAINT: "jr2.dev/node=real:NoSchedule",
  JR2_REAL_NODE_IP: "10.244.255.1",
  JR2_NODE_GUARD_PORTS: "inet/jr2-node/sandbox_node_ports",
};

describe("npm start's mode", () => {
  it("is in-cluster on the real node when the local cluster has one: its placement, address and registry", () => {
    expect(startMode({}, up)).toEqual({
      mode: "in-cluster",
      node: {
        name: "jr2-real-0",
        address: "10.244.255.1",
        registry: "127.0.0.1:5000",
        guardPorts: "inet/jr2-node/sandbox_node_ports",
        placement: {
          nodeSelector: { "jr2.dev/node": "real" },
          tolerations: [{ key: "jr2.dev/node", operator: "Equal", value: "real", effect: "NoSchedule" }],
        },
      },
    });
  });

  it("falls back to local process mode, saying why: the node is off, a cluster of your own, or asked", () => {
    expect(startMode({}, { ...up, JR2_REAL_NODE_STATUS: "off" })).toEqual({
      mode: "local process",
      why: expect.stringMatching(/real node is off .*npm run cluster -- status/),
    });
    expect(startMode({}, undefined)).toEqual({
      mode: "local process",
      why: expect.stringMatching(/KUBECONFIG names a cluster of your own/),
    });
    expect(startMode({ [START_MODE_ENV]: "local" }, up)).toEqual({
      mode: "local process",
      why: "JR2_START_MODE=local",
    });
    expect(startMode({}, { ...up, JR2_REAL_NODE_IP: "" })).toEqual({
      mode: "local process",
      why: expect.stringMatching(/no usable real node \(JR2_REAL_NODE_IP\)/),
    });
  });

  it("refuses what cannot be when asked for by name", () => {
    expect(() => startMode({ [START_MODE_ENV]: "in-cluster" }, { ...up, JR2_REAL_NODE_STATUS: "off" })).toThrow(
      /JR2_START_MODE=in-cluster, but the local cluster's real node is off.*unset JR2_START_MODE/,
    );
    expect(() => startMode({ [START_MODE_ENV]: "pods" }, up)).toThrow(/must be in-cluster or local/);
  });

  it("names itself: in-cluster says where; the fallback is named as such, with its warning", () => {
    const inCluster = startMode({}, up);
    expect(modeBanner(inCluster)).toMatch(/in-cluster mode: each Sandbox is a pod on the real node jr2-real-0/);
    const fallback = modeBanner(startMode({}, { ...up, JR2_REAL_NODE_STATUS: "off" }));
    expect(fallback).toMatch(/LOCAL PROCESS MODE \(the fallback\)/);
    expect(fallback).toContain(LOCAL_MODE_WARNING);
    // The Agent's bash runs as you: the kubeconfig npm start uses is the local cluster's admin.
    expect(fallback).toMatch(
      /the Agent's bash can read .*the cluster's kubeconfig there \(cluster-admin on that cluster\)/,
    );
    expect(fallback).toMatch(/Why not in-cluster: the local cluster's real node is off/);
  });
});

describe("npm start's runtime classes (decision 0078)", () => {
  const inCluster = startMode({}, up);
  const local = startMode({}, { ...up, JR2_REAL_NODE_STATUS: "off" });

  it("reads --runtime-class <name> and --runtime-class=<name>, and nothing else", () => {
    expect(startArgs([])).toEqual({});
    expect(startArgs(["--runtime-class", "gvisor"])).toEqual({ runtimeClass: "gvisor" });
    expect(startArgs(["--runtime-class=gvisor"])).toEqual({ runtimeClass: "gvisor" });
    expect(() => startArgs(["--runtime-class"])).toThrow(
      /--runtime-class needs a RuntimeClass's name, e\.g\. --runtime-class gvisor/,
    );
    expect(() => startArgs(["--runtime-class", "--x"])).toThrow(/needs a RuntimeClass's name/);
    expect(() => startArgs(["--runtimeclass", "gvisor"])).toThrow(
      /unknown argument "--runtimeclass": the one it takes is --runtime-class <name>/,
    );
  });

  it("in-cluster, a create may name any RuntimeClass the local cluster has; --runtime-class makes one the default", () => {
    expect(startRuntime(undefined, inCluster, ["gvisor"])).toEqual({ allowedClassNames: ["gvisor"] });
    expect(startRuntime("gvisor", inCluster, ["gvisor"])).toEqual({ className: "gvisor", allowedClassNames: [] });
    expect(startRuntime("gvisor", inCluster, ["kata", "gvisor", "kata"])).toEqual({
      className: "gvisor",
      allowedClassNames: ["kata"],
    });
    expect(startRuntime(undefined, inCluster, [])).toEqual({ allowedClassNames: [] });
  });

  it("what the pod config then says: a create naming gvisor is accepted (the Orchestrator's own check)", () => {
    const config = PodConfig.parse({ runtime: startRuntime(undefined, inCluster, ["gvisor"]) });
    expect(config.runtime).toEqual({ allowedClassNames: ["gvisor"] });
  });

  it("refuses a class the cluster lacks, and any in local process mode, naming the fix", () => {
    expect(() => startRuntime("kata", inCluster, ["gvisor"])).toThrow(
      /--runtime-class kata: the local cluster has no RuntimeClass of that name \(it has "gvisor"\): name one of them/,
    );
    expect(() => startRuntime("gvisor", local, [])).toThrow(
      /--runtime-class gvisor: local process mode .*under no RuntimeClass .*real node is off.*npm run cluster -- up/,
    );
    expect(startRuntime(undefined, local, ["gvisor"])).toEqual({ allowedClassNames: [] });
  });

  it("says what the workspaces run under", () => {
    expect(runtimeBanner({ allowedClassNames: ["gvisor"] })).toBe(
      "==> the workspaces run under the cluster's default runtime; a create may name runtimeClassName gvisor",
    );
    expect(runtimeBanner({ className: "gvisor", allowedClassNames: [] })).toBe(
      "==> the workspaces run under RuntimeClass gvisor; a create may name no other runtimeClassName",
    );
  });
});
