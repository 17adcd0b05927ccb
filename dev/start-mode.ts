// Which way `npm start` runs the Sandboxes (docs/decisions/0039-in-cluster-by-default.md): in
// pods on the local cluster's real node when it has one (in-cluster mode, the default), or as
// processes of this machine (local process mode, the named fallback: no isolation, decision 0042).
// Pure: the environment and `cluster.sh env` in, the mode and the words for it out.
import { LOCAL_MODE_WARNING } from "./local-model";

/** `in-cluster` or `local`: what to run whatever the cluster offers (unset: in-cluster when it can). */
export const START_MODE_ENV = "JR2_START_MODE";

export type RealNode = {
  name: string;
  /** This machine's address as the node's pods reach it. */
  address: string;
  registry: string;
  /** The node guard's set of node ports Sandbox pods may open (decision 0051), "family/table/set". */
  guardPorts: string;
  placement: {
    nodeSelector: Record<string, string>;
    tolerations: Array<{ key: string; operator: "Equal"; value: string; effect: string }>;
  };
};

export type StartMode = { mode: "in-cluster"; node: RealNode } | { mode: "local process"; why: string };

/** The real node `cluster.sh env` names, or why there is none. */
function realNode(cluster: Record<string, string>): RealNode | string {
  if (cluster.JR2_REAL_NODE_STATUS !== "up")
    return `the local cluster's real node is ${cluster.JR2_REAL_NODE_STATUS || "absent"} (npm run cluster -- status says why)`;
  const [key, value] = (cluster.JR2_REAL_NODE_LABEL ?? "").split("=");
  const taint = /^([^=]+)=([^:]*):(.+)$/.exec(cluster.JR2_REAL_NODE_TAINT ?? "");
  const missing = ["JR2_REAL_NODE_NAME", "JR2_REAL_NODE_IP", "JR2_REGISTRY", "JR2_NODE_GUARD_PORTS"].filter(
    (k) => !cluster[k],
  );
  if (!key || value === undefined || !taint || missing.length)
    return `cluster.sh env names no usable real node (${[...missing, ...(!key ? ["JR2_REAL_NODE_LABEL"] : []), ...(!taint ? ["JR2_REAL_NODE_TAINT"] : [])].join(", ")})`;
  return {
    name: cluster.JR2_REAL_NODE_NAME,
    address: cluster.JR2_REAL_NODE_IP,
    registry: cluster.JR2_REGISTRY,
    guardPorts: cluster.JR2_NODE_GUARD_PORTS,
    placement: {
      nodeSelector: { [key]: value },
      tolerations: [{ key: taint[1], operator: "Equal", value: taint[2], effect: taint[3] }],
    },
  };
}

/**
 * `cluster` is `cluster.sh env` when npm start brought up (or found) the local cluster, undefined
 * when KUBECONFIG names a cluster of the user's own. Throws when JR2_START_MODE asks for what cannot
 * be, naming what to change.
 */
export function startMode(env: NodeJS.ProcessEnv, cluster: Record<string, string> | undefined): StartMode {
  const asked = env[START_MODE_ENV];
  if (asked && asked !== "in-cluster" && asked !== "local")
    throw new Error(`${START_MODE_ENV}=${asked}: must be in-cluster or local (or unset: in-cluster when it can)`);
  if (asked === "local") return { mode: "local process", why: `${START_MODE_ENV}=local` };
  const node = cluster
    ? realNode(cluster)
    : "KUBECONFIG names a cluster of your own, and in-cluster mode runs on the local cluster's real node";
  if (typeof node !== "string") return { mode: "in-cluster", node };
  if (asked === "in-cluster")
    throw new Error(
      `${START_MODE_ENV}=in-cluster, but ${node}: unset ${START_MODE_ENV} to fall back to local process mode`,
    );
  return { mode: "local process", why: node };
}

/** The banner npm start prints first: which mode, and for the fallback, what it gives up and why. */
export function modeBanner(m: StartMode): string {
  if (m.mode === "in-cluster")
    return (
      `==> in-cluster mode: each Sandbox is a pod on the real node ${m.node.name} (its Harness, Custodian and ` +
      `sidecars in their own containers), from the images pushed to ${m.node.registry}`
    );
  return [
    "==> LOCAL PROCESS MODE (the fallback): each Sandbox's Harness and Custodian run as processes of yours here.",
    `    Why not in-cluster: ${m.why}.`,
    `    Warning: ${LOCAL_MODE_WARNING}.`,
  ].join("\n");
}

/** `npm start -- --runtime-class <name>`: the RuntimeClass every workspace runs under when its create names none. */
export const RUNTIME_CLASS_FLAG = "--runtime-class";

/** npm start's arguments: `--runtime-class <name>` (or `=<name>`) alone. Throws naming what it cannot read. */
export function startArgs(argv: readonly string[]): { runtimeClass?: string } {
  const out: { runtimeClass?: string } = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const inline = arg.startsWith(`${RUNTIME_CLASS_FLAG}=`) ? arg.slice(RUNTIME_CLASS_FLAG.length + 1) : undefined;
    if (arg !== RUNTIME_CLASS_FLAG && inline === undefined)
      throw new Error(
        `npm start: unknown argument ${JSON.stringify(arg)}: the one it takes is ${RUNTIME_CLASS_FLAG} <name>`,
      );
    const value = inline ?? argv[++i];
    if (!value || value.startsWith("-"))
      throw new Error(
        `npm start: ${RUNTIME_CLASS_FLAG} needs a RuntimeClass's name, e.g. ${RUNTIME_CLASS_FLAG} gvisor`,
      );
    out.runtimeClass = value;
  }
  return out;
}

/** The pod config's `runtime` for npm start's workspaces (decision 0055's className and allowedClassNames). */
export type StartRuntime = { className?: string; allowedClassNames: string[] };

/**
 * What npm start's workspaces may run under (decision 0078): in in-cluster mode every RuntimeClass
 * the local cluster has (gVisor's, on the real node) is one a create may name, and `--runtime-class`
 * makes one of them the default; local process mode runs no pod, so it allows none. Throws naming
 * the fix when the asked class cannot be had. Pure.
 */
export function startRuntime(asked: string | undefined, m: StartMode, clusterClasses: readonly string[]): StartRuntime {
  if (m.mode !== "in-cluster") {
    if (asked)
      throw new Error(
        `${RUNTIME_CLASS_FLAG} ${asked}: local process mode runs each Sandbox as processes here, under no RuntimeClass ` +
          `(${m.why}): bring the local cluster's real node up (npm run cluster -- up), or leave ${RUNTIME_CLASS_FLAG} out`,
      );
    return { allowedClassNames: [] };
  }
  const classes = [...new Set(clusterClasses)].sort();
  if (asked && !classes.includes(asked))
    throw new Error(
      `${RUNTIME_CLASS_FLAG} ${asked}: the local cluster has no RuntimeClass of that name ` +
        `(it has ${classes.length ? classes.map((c) => JSON.stringify(c)).join(", ") : "none"}): name one of them, ` +
        `or leave ${RUNTIME_CLASS_FLAG} out for the cluster's default runtime`,
    );
  return { ...(asked ? { className: asked } : {}), allowedClassNames: classes.filter((c) => c !== asked) };
}

/** The line npm start prints about its workspaces' runtime classes. */
export function runtimeBanner(r: StartRuntime): string {
  const dflt = r.className ? `RuntimeClass ${r.className}` : "the cluster's default runtime";
  const others = r.allowedClassNames.length
    ? `; a create may name runtimeClassName ${r.allowedClassNames.join(", ")}`
    : "; a create may name no other runtimeClassName";
  return `==> the workspaces run under ${dflt}${others}`;
}
