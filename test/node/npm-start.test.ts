// `npm start` in in-cluster mode (docs/decisions/0039-in-cluster-by-default.md): the README's run
// command, with no KUBECONFIG of its own, finds the local cluster's real node up, pushes the
// images, serves the scripted model from a pod there, and its Orchestrator places each Sandbox on
// the real node instead of running a Harness and a Custodian on this machine. The example Machine
// (examples/propose-machine.ts, as its printed command runs it) drives a turn through it. Ctrl-C
// removes its webhook configurations and the model it served.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../dev/local-orchestrator";
import { main as proposeMachine } from "../../examples/propose-machine";
import { type Obj, modelRequests, ROOT, getJson, kubectl, kubectlOk, realNode, until } from "./support";
import { DEFAULT_SANDBOX_NAMESPACE } from "../../api/wire";

const node = realNode();
const demo = mkdtempSync(join(tmpdir(), "jr2-npm-start-"));
const MODEL_NS = "jr2-demo-model";
let start: ChildProcess | undefined;
let out = "";
let exited: Promise<number | null>;
let orchestratorUrl = "";
let token = "";

const api = async (method: string, path: string, body?: unknown): Promise<{ status: number; body: Obj }> => {
  const res = await fetch(orchestratorUrl + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
};

/** The images pushed, as npm start named them in its printed commands. */
const printedImage = () => /JR2_HARNESS_IMAGE=(\S+)/.exec(out)?.[1];

beforeAll(async () => {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    JR2_DEMO_DIR: demo,
    JR2_PEPR_PORT: String(await freePort("127.0.0.1")),
    JR2_ORCHESTRATOR_PORT: String(await freePort(process.env.JR2_REAL_NODE_IP!)),
  };
  // As the README runs it: no KUBECONFIG, so npm start brings the local cluster up (already up: fast).
  delete env.KUBECONFIG;
  delete env.JR2_START_MODE;
  start = spawn(join(ROOT, "node_modules", ".bin", "tsx"), [join(ROOT, "dev", "start.ts")], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const onData = (b: Buffer) => {
    out += b.toString();
  };
  start.stdout!.on("data", onData);
  start.stderr!.on("data", onData);
  exited = new Promise((resolve) => start!.once("exit", (code) => resolve(code)));
  // Running once it prints its Ctrl-C line; an exit before that fails at once, with its output.
  await Promise.race([
    until("npm start running (its Ctrl-C line)", 300_000, () => (out.includes("Ctrl-C stops it") ? true : undefined)),
    exited.then((code) => {
      throw new Error(`npm start exited (${code}) before it ran`);
    }),
  ]).catch((err: Error) => {
    throw new Error(`${err.message}\n--- npm start's output ---\n${out.slice(-4000)}`);
  });
  orchestratorUrl = /The Orchestrator's API is at (\S+) /.exec(out)![1];
  token = readFileSync(join(demo, "orchestrator", "api-tokens"), "utf8")
    .split("\n")[0]
    .trim();
}, 330_000);

afterAll(async () => {
  if (start && start.exitCode === null) {
    start.kill("SIGINT");
    await exited;
  }
  rmSync(demo, { recursive: true, force: true });
}, 60_000);

describe("npm start with the real node up", () => {
  test("says it is in in-cluster mode, pushes the images, and serves its Orchestrator where the node's pods reach it", () => {
    expect(out).toMatch(new RegExp(`in-cluster mode: each Sandbox is a pod on the real node ${node.name}`));
    expect(out).not.toMatch(/LOCAL PROCESS MODE/);
    expect(orchestratorUrl).toBe(`http://${process.env.JR2_REAL_NODE_IP}:${/:(\d+)$/.exec(orchestratorUrl)![1]}`);
    expect(printedImage()).toMatch(new RegExp(`^${process.env.JR2_REGISTRY}/.+@sha256:[0-9a-f]{64}$`));
    expect(out).toMatch(/the Agents' model: the scripted model, served from the real node/);
  });

  test("a workspace's Sandbox is a pod on the real node, its Harness no process of this machine", async () => {
    const created = await api("POST", "/v1/workspaces", {
      image: printedImage(),
      branch: "feature/start",
      repos: [{ slot: "app", url: join(demo, "remotes", "demo.git") }],
    });
    expect(created.status).toBe(202);
    const name = created.body.name as string;
    const view = await until(`workspace ${name} ready`, 300_000, async () => {
      const v = (await api("GET", `/v1/workspaces/${name}`)).body;
      // Ready or ended: a failure's view says why.
      return ["ready", "failed", "lost"].includes(v.state) ? v : undefined;
    });
    expect({ state: view.state, failure: view.failure }).toEqual({ state: "ready", failure: undefined });
    expect(view.phase).toBe("Ready");
    const pod = getJson(["pod", "-n", DEFAULT_SANDBOX_NAMESPACE, name]);
    expect(pod.spec.nodeName).toBe(node.name);
    expect((pod.spec.containers as Obj[]).map((c) => c.name).sort()).toEqual(["custodian", "harness"]);
    // Local process mode would have started a Harness of dist/ here, under the demo's work root.
    const ps = kubectlOk([
      "exec",
      "-n",
      DEFAULT_SANDBOX_NAMESPACE,
      name,
      "-c",
      "harness",
      "--",
      "cat",
      "/proc/1/cmdline",
    ]);
    expect(ps).toContain("/opt/jr2/harness.js");
    expect(hostHarnesses()).toEqual([]);
    expect((await api("DELETE", `/v1/workspaces/${name}`)).status).toBeLessThan(300);
  }, 330_000);

  // Decision 0078: a newcomer tries gVisor with npm start alone. Its pod config lets a create name any
  // RuntimeClass the local cluster has (the real node's gVisor, decision 0055).
  test("a workspace naming runtimeClassName gvisor is accepted and its pod runs in gVisor's sentry", async () => {
    const gvisor = process.env.JR2_GVISOR_RUNTIME_CLASS!;
    expect(out).toContain(
      `==> the workspaces run under the cluster's default runtime; a create may name runtimeClassName ${gvisor}`,
    );
    const created = await api("POST", "/v1/workspaces", {
      image: printedImage(),
      branch: "feature/start-gvisor",
      repos: [{ slot: "app", url: join(demo, "remotes", "demo.git") }],
      runtimeClassName: gvisor,
    });
    expect({ status: created.status, error: created.body?.error }).toEqual({ status: 202, error: undefined });
    const name = created.body.name as string;
    const view = await until(`workspace ${name} ready`, 300_000, async () => {
      const v = (await api("GET", `/v1/workspaces/${name}`)).body;
      return ["ready", "failed", "lost"].includes(v.state) ? v : undefined;
    });
    expect({ state: view.state, failure: view.failure }).toEqual({ state: "ready", failure: undefined });
    const pod = getJson(["pod", "-n", DEFAULT_SANDBOX_NAMESPACE, name]);
    expect([pod.spec.runtimeClassName, pod.spec.nodeName]).toEqual([gvisor, node.name]);
    const dmesg = kubectlOk(["exec", "-n", DEFAULT_SANDBOX_NAMESPACE, name, "-c", "harness", "--", "dmesg"]);
    expect(dmesg).toContain("Starting gVisor");
    // A class the cluster lacks is still refused, by the pod config, naming what a create may choose.
    const refused = await api("POST", "/v1/workspaces", {
      image: printedImage(),
      branch: "feature/start-kata",
      repos: [{ slot: "app", url: join(demo, "remotes", "demo.git") }],
      runtimeClassName: "kata",
    });
    expect(refused.status).toBe(403);
    const said = JSON.stringify(refused.body);
    expect(said).toContain("runtime_class_refused");
    expect(said).toMatch(new RegExp(`name one of .*${gvisor}`));
    expect((await api("DELETE", `/v1/workspaces/${name}`)).status).toBeLessThan(300);
  }, 330_000);

  test("the example Machine drives a turn through it: the pick answered, the model given the held key", async () => {
    const output = await proposeMachine({
      JR2_ORCHESTRATOR_URL: orchestratorUrl,
      JR2_API_TOKEN: token,
      JR2_REPO_URL: join(demo, "remotes", "demo.git"),
      JR2_HARNESS_IMAGE: printedImage(),
    });
    expect({ error: output.error, outcome: output.outcome }).toEqual({ error: undefined, outcome: "completed" });
    expect(output.pick).toMatchObject({ pick: "propose" });
    const lines = modelRequests(MODEL_NS);
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const l of lines) expect([l.status, l.keyed]).toEqual([200, true]);
    // The bash step ran in the Sandbox's harness container, on the demo repository's clone.
    expect(lines.some((l) => l.last?.content.includes("README.md"))).toBe(true);
  }, 420_000);

  test("Ctrl-C stops it: its webhook configurations and the model it served are removed", async () => {
    start!.kill("SIGINT");
    expect(await exited).toBe(0);
    const hooks = kubectlOk(["get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", "name"]);
    expect(hooks).not.toMatch(/pepr/);
    await until(`namespace ${MODEL_NS} gone`, 120_000, () =>
      kubectl(["get", "namespace", MODEL_NS]).status !== 0 ? true : undefined,
    );
  }, 180_000);
});

/** Harness processes of this machine running dist/'s bundle (what local process mode starts). */
function hostHarnesses(): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ");
      if (
        cmd.includes(join(ROOT, "dist", "companions", "harness.js")) ||
        cmd.includes(join(ROOT, "harness", "main.ts"))
      )
        found.push(`${pid}: ${cmd}`);
    } catch {
      // gone
    }
  }
  return found;
}
