// npm start's choice of where the Sandboxes run (dev/start-mode.ts, decision 0039): in pods on the
// local cluster's real node when it is up, else local process mode, the named fallback, whose banner
// says why and what it gives up.
import { LOCAL_MODE_WARNING } from "../../dev/local-model";
import { START_MODE_ENV, modeBanner, startMode } from "../../dev/start-mode";

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
