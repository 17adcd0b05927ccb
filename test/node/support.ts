// What the real node tier's tests share: the cluster's settings (read once by global-setup.ts from
// `cluster.sh env` and handed over in the environment), kubectl, and waiting with a deadline.
import { GROUP } from "../../api/crd/sources/common";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { SCRIPTED_MODEL } from "../../dev/in-cluster-model";
import { freePort } from "../../dev/local-orchestrator";
import { gitIn } from "../support/git-fixtures";
import { DEFAULT_SANDBOX_NAMESPACE } from "../../api/wire";
import {
  MODULE_PODS_POLICY,
  MODULE_ROLES_POLICY,
  SANDBOX_NAMESPACE_PODS_POLICY,
} from "../../capabilities/admission/module-policy";
import cfg from "../../package.json";

export const ROOT = join(__dirname, "..", "..");
export const CLUSTER_SH = join(ROOT, "dev", "cluster", "cluster.sh");

/** `cluster.sh env` as a map (each line KEY=VALUE). */
export function clusterEnv(): Record<string, string> {
  const r = spawnSync("bash", [CLUSTER_SH, "env"], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`cluster.sh env failed (exit ${r.status}):\n${r.stderr}`);
  const env: Record<string, string> = {};
  for (const line of r.stdout.split("\n")) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line);
    if (m) env[m[1]] = m[2];
  }
  return env;
}

/** A value the tier's global setup hands over in the environment; throws naming it when absent. */
export function fromSetup(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run through the node tier's global setup`);
  return v;
}

export type Node = { name: string; label: [string, string]; taint: { key: string; value: string; effect: string } };

/** The real node as `cluster.sh env` names it. */
export function realNode(env = process.env): Node {
  const [key, value] = (env.JR2_REAL_NODE_LABEL ?? "").split("=");
  const taint = /^([^=]+)=([^:]*):(.+)$/.exec(env.JR2_REAL_NODE_TAINT ?? "");
  if (!env.JR2_REAL_NODE_NAME || !key || !taint)
    throw new Error("JR2_REAL_NODE_* not set: run through the node tier's global setup");
  return {
    name: env.JR2_REAL_NODE_NAME,
    label: [key, value],
    taint: { key: taint[1], value: taint[2], effect: taint[3] },
  };
}

/** A pod spec's placement on the real node: its label, and a toleration of its taint. */
export const onNode = (node: Node) => ({
  nodeSelector: { [node.label[0]]: node.label[1] },
  tolerations: [{ key: node.taint.key, operator: "Equal", value: node.taint.value, effect: node.taint.effect }],
});

/** A probe pod (the test image's `serve <port>`, Ready on /healthz) on the real node, restricted. */
export function probePod(
  node: Node,
  image: string,
  name: string,
  namespace: string,
  labels: Record<string, string>,
  port = 8080,
) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, labels },
    spec: {
      ...onNode(node),
      terminationGracePeriodSeconds: 1,
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: "RuntimeDefault" } },
      containers: [
        {
          name: "probe",
          image,
          args: ["serve", String(port)],
          readinessProbe: { httpGet: { path: "/healthz", port }, periodSeconds: 1 },
          securityContext: {
            readOnlyRootFilesystem: true,
            allowPrivilegeEscalation: false,
            capabilities: { drop: ["ALL"] },
          },
        },
      ],
    },
  };
}

export type Run = { status: number | null; stdout: string; stderr: string };

/** kubectl against the tier's cluster; `input` goes to its stdin. Never throws. */
export function kubectl(args: string[], input?: string): Run {
  const r = spawnSync(process.env.KUBECTL!, ["--kubeconfig", process.env.KUBECONFIG!, ...args], {
    encoding: "utf8",
    input,
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? String(r.error ?? "") };
}

/** kubectl that must succeed; returns its stdout. */
export function kubectlOk(args: string[], input?: string): string {
  const r = kubectl(args, input);
  if (r.status !== 0) throw new Error(`kubectl ${args.join(" ")} failed (exit ${r.status}):\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

/** The installation's names, the same whether its manifests or its chart made them. */
export const INSTALLED = {
  module: `pepr-${cfg.pepr.uuid}`,
  peprNamespace: "pepr-system",
  /** The companions' namespace: the Orchestrator and the cache agents. */
  system: "jr2-system",
  /** Where the deployed Orchestrator's Sandboxes live (its default, decision 0047). */
  sandboxes: DEFAULT_SANDBOX_NAMESPACE,
} as const;

/**
 * The installation removed and waited for: Sandboxes first, while the watcher that finishes them
 * still runs; then its namespaces and `namespaces`, then its cluster-wide objects. Never throws.
 */
export function removeInstallation(namespaces: string[]): void {
  const { module, peprNamespace, system, sandboxes } = INSTALLED;
  if (kubectl(["get", "namespace", sandboxes]).status === 0)
    kubectl(["delete", SANDBOX_RESOURCE, "--all", "-n", sandboxes, "--timeout=120s"]);
  for (const ns of [sandboxes, system, peprNamespace, ...namespaces])
    kubectl(["delete", "namespace", ns, "--ignore-not-found", "--timeout=180s"]);
  kubectl(["delete", "validatingwebhookconfiguration,mutatingwebhookconfiguration", module, "--ignore-not-found"]);
  kubectl([
    "delete",
    "mutatingadmissionpolicy,mutatingadmissionpolicybinding",
    "jr2-sandbox-defaults",
    "--ignore-not-found",
  ]);
  // What holds the module's own writes and the Sandbox namespaces' pods (decision 0069): left
  // behind, it would hold a later local module's pods to this installation's cache root.
  kubectl([
    "delete",
    "validatingadmissionpolicy,validatingadmissionpolicybinding",
    MODULE_PODS_POLICY,
    MODULE_ROLES_POLICY,
    SANDBOX_NAMESPACE_PODS_POLICY,
    "--ignore-not-found",
  ]);
  kubectl([
    "delete",
    "clusterrole,clusterrolebinding",
    module,
    "jr2-cache-agent",
    "jr2-egress",
    "jr2-orchestrator-sandboxes",
    "jr2-operator-sandboxes",
    "--ignore-not-found",
  ]);
}

/** Apply objects (JSON is YAML). */
export const apply = (...objects: object[]) =>
  kubectlOk(["apply", "-f", "-"], JSON.stringify({ apiVersion: "v1", kind: "List", items: objects }));

/** Poll `check` every 250 ms until it returns (or resolves to) a value, not undefined, or `ms` pass;
 * then fail with `what`. */
export async function until<T>(
  what: string,
  ms: number,
  check: () => T | undefined | Promise<T | undefined>,
): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`not within ${ms / 1000}s: ${what}${last ? `\nlast error: ${String(last)}` : ""}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Obj = any;

/** jr2's Sandboxes by their full name: a cluster may serve another kind named Sandbox (agent-sandbox's
 * `sandboxes.agents.x-k8s.io`), which kubectl could take for a bare `sandbox`. */
export const SANDBOX_RESOURCE = `sandboxes.${GROUP}`;
export const getJson = (args: string[]): Obj => JSON.parse(kubectlOk(["get", ...args, "-o", "json"]));

/**
 * The options the runtime mounted `path` with, from a container's /proc/self/mountinfo: the
 * per-mount options (the sixth field) of the last entry at `path`, the one a process there sees.
 * Fails naming the path when no entry is at it.
 */
export function mountOptions(mountinfo: string, path: string): string[] {
  const at = mountinfo
    .split("\n")
    .map((line) => line.split(" "))
    .filter((f) => f.length > 5 && f[4].replace(/\\040/g, " ") === path);
  if (!at.length) throw new Error(`no mount at ${path} in:\n${mountinfo}`);
  return at[at.length - 1][5].split(",");
}

/** One chat request as the in-cluster scripted model logs it (dev/scripted-model.ts requestLine). */
export type ModelRequest = {
  status: number;
  step?: number;
  keyed?: boolean;
  /** The API the scripted model spoke, and the header the key came in (dev/scripted-model.ts). */
  wire?: string;
  keyHeader?: string;
  last?: { content: string };
};

/** The scripted model's log in `namespace` (its Deployment, dev/in-cluster-model.ts), one entry
 * per chat request it answered. */
export const modelRequests = (namespace: string): ModelRequest[] =>
  kubectlOk(["logs", "-n", namespace, `deployment/${SCRIPTED_MODEL}`])
    .split("\n")
    .filter((l) => l.startsWith("{") && l.includes('"chat request"'))
    .map((l) => JSON.parse(l) as ModelRequest);

/** The turn both turn tests script: bash writes `word` to change.txt in the Harness container and
 * prints it and its uid (then runs `more`, when given), then a `propose` pick, then the last word. */
export const proposeScript = (word: string, more?: string) => [
  {
    toolCalls: [
      {
        name: "bash",
        arguments: { command: `echo ${word} > change.txt && cat change.txt && id -u${more ? `; ${more}` : ""}` },
      },
    ],
  },
  { toolCalls: [{ name: "propose", arguments: { summary: "wrote change.txt" } }] },
  { text: "done: the change is approved" },
];

/**
 * A proposeScript turn completed, seen from both sides: the Machine's output (the pick, the last
 * word), and the model's own log in `namespace`: every request carried the held key (the model
 * refuses any other with a 401), and the bash result came back as run in the Harness container
 * (`word`, as uid 65532). Returns what each request sent back last, for more checks.
 */
export function expectProposedTurn(
  output: { error?: string; outcome?: string; message?: string; pick?: unknown },
  namespace: string,
  word: string,
): string[] {
  expect({ error: output.error, outcome: output.outcome, message: output.message }).toEqual({
    error: undefined,
    outcome: "completed",
    message: "done: the change is approved",
  });
  expect(output.pick).toMatchObject({ pick: "propose", args: { summary: "wrote change.txt" } });
  const requests = modelRequests(namespace);
  expect(requests.length).toBeGreaterThanOrEqual(3);
  for (const r of requests) expect([r.status, r.keyed]).toEqual([200, true]);
  const contents = requests.map((r) => r.last?.content ?? "");
  expect(contents.some((c) => c.includes(word) && c.includes("65532"))).toBe(true);
  return contents;
}

/** Waits until every replica of the Deployment is of its current spec and available. */
export async function available(namespace: string, deployment: string): Promise<void> {
  await until(`deployment ${namespace}/${deployment} available`, 240_000, () => {
    const d = getJson(["deployment", "-n", namespace, deployment]);
    const s = d.status ?? {};
    // Every replica the current one: an old pod still serving mid-rollout would present the
    // previous build's certificate to a webhook's new CA bundle.
    if (
      !(
        s.observedGeneration >= d.metadata.generation &&
        s.replicas === d.spec.replicas &&
        s.updatedReplicas === d.spec.replicas &&
        s.availableReplicas === d.spec.replicas
      )
    )
      return undefined;
    // And no old pod still terminating: the status counts none, but one may still serve (an
    // Orchestrator replica hands its shards over after SIGTERM, with the previous pod config).
    const selector = Object.entries(d.spec.selector?.matchLabels ?? {})
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(",");
    const pods = getJson(["pods", "-n", namespace, "-l", selector]).items as Obj[];
    return pods.length === d.spec.replicas && pods.every((p) => !p.metadata.deletionTimestamp) ? true : undefined;
  });
}

/**
 * The pod webhook's CONNECT guard (decision 0048) refuses every exec into the custodian and the
 * effector, so no installation can look inside them. This test does, to prove what they hold: it
 * takes the guard out of the validating configuration while it looks, and puts it back after.
 */
export const connectGuard = {
  held: undefined as { config: string; webhook: Obj } | undefined,
  lift() {
    for (const config of getJson(["validatingwebhookconfigurations"]).items as Obj[]) {
      const i = (config.webhooks ?? []).findIndex((w: Obj) => w.name.startsWith("connect."));
      if (i < 0) continue;
      kubectlOk([
        "patch",
        "validatingwebhookconfiguration",
        config.metadata.name,
        "--type=json",
        "-p",
        JSON.stringify([{ op: "remove", path: `/webhooks/${i}` }]),
      ]);
      this.held = { config: config.metadata.name, webhook: config.webhooks[i] };
      return;
    }
    throw new Error("no connect webhook registered: the operator's configuration lacks decision 0048's guard");
  },
  restore() {
    if (!this.held) return;
    kubectlOk([
      "patch",
      "validatingwebhookconfiguration",
      this.held.config,
      "--type=json",
      "-p",
      JSON.stringify([{ op: "add", path: "/webhooks/-", value: this.held.webhook }]),
    ]);
    this.held = undefined;
  },
};

/**
 * A one-commit repository, `widgets`, served by real git over git:// on `host` (the real node's
 * address, where its pods reach this machine) from `<dir>/remotes`. The caller kills `daemon`.
 */
export async function serveWidgetsRemote(dir: string, host: string): Promise<{ url: string; daemon: ChildProcess }> {
  const work = join(dir, "src");
  const remotes = join(dir, "remotes");
  gitIn(undefined, "init", "--quiet", "-b", "main", work);
  writeFileSync(join(work, "README"), "widgets\n");
  gitIn(work, "add", "README");
  gitIn(work, "commit", "--quiet", "-m", "first widget");
  gitIn(undefined, "clone", "--quiet", "--bare", work, join(remotes, "widgets.git"));
  const port = await freePort(host);
  const daemon = spawn(
    "git",
    ["daemon", "--reuseaddr", "--export-all", `--base-path=${remotes}`, `--listen=${host}`, `--port=${port}`, remotes],
    { stdio: "ignore" },
  );
  const url = `git://${host}:${port}/widgets.git`;
  await until("git daemon serving", 20_000, () =>
    gitIn(undefined, "ls-remote", url, "HEAD").length > 0 ? true : undefined,
  );
  return { url, daemon };
}
