// The suite of a workspace's Sandbox pod run by the real node's kubelet, under the runtime a test
// file names (sandbox-pod.test.ts: the node's default, runc; sandbox-pod-gvisor.test.ts: gVisor,
// decision 0055).
//
// A workspace's Sandbox pod run by the real node's kubelet (docs/decisions/0038-sandbox-pod-on-a-real-node.md):
// made through the Orchestrator (in-cluster mode, no local Harness) with the default Sandbox image
// and the companions image from the loopback registry (decision 0041), reconciled into its pod by
// the operator, placed on the real node by the pod config's placement. Every container starts and
// turns Ready; the roots that are read-only are mounted so (each seat's own mount table) and refuse
// writes; the Custodian's values and CA are read by the custodian alone; the Repo cache is
// read-only and /attach cloned from it into /work; exec and logs reach each container (the
// credential holders only while the test lifts the webhook that refuses exec into them, decision
// 0048; then it refuses them). Then the two NetworkPolicies
// (decisions 0021 and 0038), enforced by kube-network-policies (decision 0040), written by the
// operator (decision 0047): the Sandbox's :8080 and :8082 answer a pod that is the Orchestrator's
// and no other, and the Sandbox reaches the Orchestrator but no other pod, no resolver and not its
// node (decision 0051); a Sandbox written directly in a second opted-in namespace gets both
// policies too. The egress point and the turns through it are deployed.test.ts's.
//
// What runs where: the API server, the operator, the Orchestrator and the node's cache agent are
// processes on this machine (as in the integration tier); this machine resolves and reaches the
// Sandbox's Service name (decision 0040's DNS), and its traffic to a pod on its own node is not
// policed, which is why a host-process Orchestrator reaches the Harness through the ingress policy.
import { createHash, randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { STAND_IN } from "../../api/custodian-config";
import { ORCHESTRATOR_ENV, CACHE_AGENT_ENV, OPERATOR_ENV } from "../../api/env";
import { API_VERSION } from "../../api/crd/sources/common";
import { SUITE } from "../../scripts/images/debian";
import { PART_OF_JR2, SANDBOX_NAMESPACE_ENABLED, SANDBOX_NAMESPACE_LABEL } from "../../api/wire";
import { CACHE_DIR, startLocalOperator, type LocalOperator } from "../../dev/local-operator";
import { startLocalOrchestrator, type LocalOrchestrator } from "../../dev/local-orchestrator";
import { startCacheAgent, type Agent } from "../../dev/local-cache-agent";
import { scriptedModelUrl } from "../../dev/in-cluster-model";
import { gitIn } from "../support/git-fixtures";
import {
  type Obj,
  fromSetup,
  apply,
  getJson,
  kubectl,
  kubectlOk,
  connectGuard,
  mountOptions,
  realNode,
  onNode,
  probePod as nodeProbePod,
  until,
  SANDBOX_RESOURCE,
} from "./support";

/** How a suite runs its Sandboxes: the RuntimeClass of every Sandbox pod (absent: the node's
 * default runtime, runc). */
export interface SandboxPodRuntime {
  runtimeClass?: string;
}

export function sandboxPodSuite({ runtimeClass }: SandboxPodRuntime): void {
  const node = realNode();
  const env = fromSetup;
  const SANDBOX_IMAGE = env("JR2_NODE_SANDBOX_IMAGE");
  const COMPANIONS_IMAGE = env("JR2_NODE_COMPANIONS_IMAGE");
  const PROBE_IMAGE = env("JR2_NODE_TEST_IMAGE");
  const NODE_IP = env("JR2_REAL_NODE_IP");
  const USER_IMAGE = env("JR2_NODE_USER_IMAGE");

  const suffix = randomBytes(3).toString("hex");
  /** The Sandboxes' namespace. */
  const ns = `jr2-pod-${suffix}`;
  /** Where the Orchestrator's pods would run (POD_NAMESPACE), the operator's companions' namespace
   * (JR2_COMPANION_NAMESPACE), which the policies name (api/sandbox-policies.ts, decision 0067). */
  const orchNs = `jr2-orch-${suffix}`;
  /** A second Sandboxes' namespace, opted in, whose Sandbox is written directly (no Orchestrator). */
  const ns2 = `jr2-pod2-${suffix}`;
  const tmp = mkdtempSync(join(tmpdir(), "jr2-node-pod-"));
  const remotes = join(tmp, "remotes");
  const remote = join(remotes, "widgets.git");
  /** The node's cache root: the operator's hostPath volumes and the cache agent agree on it. */
  const cacheRoot = join(tmp, "caches");
  /** A value only the Custodian may hold; never printed (its digest is compared). */
  const MODEL_KEY = `sk-node-${randomBytes(16).toString("hex")}`;
  /** The scripted model's key: held by the Custodian, wanted by the model in its own namespace. */
  const SCRIPTED_KEY = `sk-scripted-${randomBytes(16).toString("hex")}`;
  /** A provider's url the pod config names (no model is served here: the turns are deployed.test.ts's). */
  const MODEL_URL = scriptedModelUrl(`jr2-model-${suffix}`);
  const VALUES = "/etc/jr2/custodian/values";
  const HELD_FILE = `${VALUES}/model-keys__anthropic`;
  const CUSTODIAN_CA = "/etc/jr2/custodian/ca";
  const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");

  let operator: LocalOperator | undefined;
  let agent: Agent | undefined;
  let orch: LocalOrchestrator | undefined;

  async function api<T = Obj>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const res = await fetch(orch!.url + path, {
      method,
      headers: { authorization: `Bearer ${orch!.token}`, ...(body ? { "content-type": "application/json" } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
  }

  const onRealNode = onNode(node);

  /** A probe pod on the real node, serving `port`. */
  const probePod = (name: string, namespace: string, labels: Record<string, string>, port = 8080) =>
    nodeProbePod(node, PROBE_IMAGE, name, namespace, labels, port);

  const ready = (p: Obj) => p.status?.conditions?.find((c: Obj) => c.type === "Ready")?.status === "True";
  const readyPod = (namespace: string, name: string, ms = 120_000): Promise<Obj> =>
    until(`pod ${namespace}/${name} Ready`, ms, () => {
      const p = getJson(["pod", "-n", namespace, name]);
      return ready(p) ? p : undefined;
    });

  beforeAll(async () => {
    for (const n of [ns, orchNs, ns2]) kubectlOk(["create", "namespace", n]);
    kubectlOk(["label", "namespace", orchNs, `${Object.keys(PART_OF_JR2)[0]}=${Object.values(PART_OF_JR2)[0]}`]);
    for (const n of [ns, ns2])
      kubectlOk(["label", "namespace", n, `${SANDBOX_NAMESPACE_LABEL}=${SANDBOX_NAMESPACE_ENABLED}`]);
    // A pod is admitted once its namespace's default service account exists.
    for (const n of [ns, orchNs, ns2])
      await until(`ServiceAccount ${n}/default`, 30_000, () =>
        kubectl(["get", "sa", "default", "-n", n]).status === 0 ? true : undefined,
      );
    // uid 65532 in the pod reads the cache through the hostPath: every directory on the way is 0755.
    chmodSync(tmp, 0o755);
    mkdirSync(cacheRoot, { mode: 0o755 });
    const work = join(tmp, "work-src");
    gitIn(undefined, "init", "--quiet", "-b", "main", work);
    writeFileSync(join(work, "README"), "widgets\n");
    gitIn(work, "add", "README");
    gitIn(work, "commit", "--quiet", "-m", "first widget");
    gitIn(undefined, "clone", "--quiet", "--bare", work, remote);
    apply({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "model-keys", namespace: ns },
      data: {
        anthropic: Buffer.from(MODEL_KEY).toString("base64"),
        openai: Buffer.from(SCRIPTED_KEY).toString("base64"),
      },
    });
    const podConfig = join(tmp, "pod-config.json");
    writeFileSync(
      podConfig,
      JSON.stringify({
        custodian: {
          image: COMPANIONS_IMAGE,
          providers: [
            { name: "anthropic", url: "https://api.anthropic.com" },
            // The Agents' model: the scripted provider served in the cluster, plain HTTP to its Service.
            { name: "scripted", url: MODEL_URL },
          ],
          // Bound to an https origin, so the Custodian intercepts it and gets its own CA (decision 0037).
          held: [
            {
              secret: "model-keys",
              key: "anthropic",
              env: "ANTHROPIC_API_KEY",
              origins: ["https://api.anthropic.com"],
              headers: ["x-api-key"],
            },
            { secret: "model-keys", key: "openai", env: "OPENAI_API_KEY", origins: [MODEL_URL] },
          ],
        },
        harness: {
          env: [
            { name: "JR2_MODEL_PROVIDER", value: "scripted" },
            { name: "JR2_MODEL_ID", value: "scripted" },
          ],
        },
        // jr2's Effector: its program in the companions image (decision 0070).
        effector: { image: COMPANIONS_IMAGE },
        placement: onRealNode,
        // Every Sandbox pod of the installation under this runtime (decision 0055).
        ...(runtimeClass ? { runtime: { className: runtimeClass } } : {}),
      }),
    );
    const kubeconfig = env("KUBECONFIG");
    operator = await startLocalOperator({
      kubeconfig,
      stateDir: join(CACHE_DIR, "node-test-operator"),
      port: 3643,
      logs: "file",
      // The companions' namespace, where the policies' peers are: the Orchestrator's (decision 0067).
      env: { [CACHE_AGENT_ENV.cacheRoot]: cacheRoot, [OPERATOR_ENV.companionNamespace]: orchNs },
    });
    agent = await startCacheAgent(node.name, cacheRoot);
    orch = await startLocalOrchestrator({
      kubeconfig,
      namespace: ns,
      dir: join(tmp, "orchestrator"),
      credentials: [remotes],
      reposRoot: cacheRoot,
      // In-cluster mode: each Sandbox its own pod, reached at its Service name; the Custodians reach
      // this process for the Sandbox's picks and admissions (decision 0039).
      podAddress: env("JR2_REAL_NODE_IP"),
      env: {
        [ORCHESTRATOR_ENV.podConfigFile]: podConfig,
        [ORCHESTRATOR_ENV.podNamespace]: orchNs,
        // No egress point here: this Orchestrator is a process on the node, which a Sandbox pod may
        // not reach (decision 0051), so nothing in these pods needs a way out. The egress point, and
        // an Agent's turn through it, are the deployed tier's (deployed.test.ts).
        [ORCHESTRATOR_ENV.egressUrl]: "off",
      },
    });
  }, 240_000);

  afterAll(async () => {
    await orch?.stop();
    await agent?.stop();
    await operator?.stop();
    for (const n of [ns, orchNs, ns2]) kubectl(["delete", "namespace", n, "--wait=false"]);
    rmSync(tmp, { recursive: true, force: true });
  }, 60_000);

  describe("a workspace's Sandbox pod on the real node", () => {
    let name: string;
    let pod: Obj;
    let repoKey: string;
    const exec = (container: string, ...cmd: string[]) =>
      kubectl(["exec", "-n", ns, name, "-c", container, "--", ...cmd]);
    /** A write a read-only mount refuses. runc's kernel says EROFS before it looks at the file's
     * mode; gVisor's sentry checks the mode first, so where the seat could not write the file
     * anyway it says EACCES: there the mount's own options (in /proc/mounts) prove it read-only. */
    const READ_ONLY = runtimeClass ? /read-only file system|permission denied/i : /read-only file system/i;
    const sh = (container: string, script: string) => exec(container, "sh", "-c", script);

    beforeAll(async () => {
      const t0 = Date.now();
      const res = await api<{ name: string }>("POST", "/v1/workspaces", {
        image: SANDBOX_IMAGE,
        branch: "feature/node",
        repos: [{ slot: "app", url: remote }],
        userImage: USER_IMAGE,
        effector: {},
      });
      expect(res.status).toBe(202);
      name = res.body.name;
      // The workspace's own word: ready once placed, provisioned (the pod Ready) and attached.
      let view: Obj;
      for (const deadline = Date.now() + 300_000; ; ) {
        view = (await api<Obj>("GET", `/v1/workspaces/${name}`)).body;
        if (["ready", "failed", "lost"].includes(view.state) || Date.now() > deadline) break;
        await new Promise((r) => setTimeout(r, 250));
      }
      process.stdout.write(
        `[sandbox-pod] workspace ${name} ${view.state} in ${((Date.now() - t0) / 1000).toFixed(1)}s\n`,
      );
      // The whole failure when it is one: its stage, reason and message say what to fix.
      expect({ state: view.state, phase: view.phase, failure: view.failure }).toEqual({
        state: "ready",
        phase: "Ready",
        failure: undefined,
      });
      pod = getJson(["pod", "-n", ns, name]);
      repoKey = getJson([SANDBOX_RESOURCE, "-n", ns, name]).spec.repos[0].key;
      // Refused first: the guard is there; then lifted until an exec into the custodian gets in.
      expect(exec("custodian", "true").stderr).toContain('exec into container "custodian"');
      connectGuard.lift();
      await until("exec into the custodian with the guard lifted", 30_000, () =>
        exec("custodian", "true").status === 0 ? true : undefined,
      );
    }, 330_000);

    afterAll(() => connectGuard.restore());

    test("lands on the real node by the pod config's placement, every container started and Ready", () => {
      expect(pod.spec.nodeName).toBe(node.name);
      expect(pod.spec.runtimeClassName).toBe(runtimeClass);
      // The RuntimeClass's scheduling is merged in by admission: its nodes only (decision 0055).
      expect(pod.spec.nodeSelector).toEqual({
        ...onRealNode.nodeSelector,
        ...(runtimeClass ? getJson(["runtimeclass", runtimeClass]).scheduling.nodeSelector : {}),
      });
      expect(pod.spec.tolerations).toEqual(expect.arrayContaining(onRealNode.tolerations));
      expect(pod.status.podIP).toMatch(/^10\.244\.255\.\d+$/);
      const statuses = pod.status.containerStatuses as Obj[];
      expect(statuses.map((s) => s.name).sort()).toEqual(["custodian", "effector", "harness", "user"]);
      for (const s of statuses) {
        expect([s.name, s.ready, s.started, s.restartCount]).toEqual([s.name, true, true, 0]);
        expect(s.state.running).toBeDefined();
      }
      // Each from the loopback registry, by the digest pushed.
      const image = (c: string) => statuses.find((s) => s.name === c)!.imageID as string;
      const digest = (ref: string) => ref.slice(ref.indexOf("@"));
      expect(image("harness")).toContain(digest(SANDBOX_IMAGE));
      expect(image("custodian")).toContain(digest(COMPANIONS_IMAGE));
      for (const c of ["harness", "custodian", "effector", "user"]) expect(image(c)).toContain(env("JR2_REGISTRY"));
      for (const c of ["Ready", "ContainersReady"])
        expect(pod.status.conditions.find((x: Obj) => x.type === c).status).toBe("True");
    });

    // The guard against a silent fallback: the node is this machine, so under runc the Harness
    // reads this machine's kernel; under gVisor its sentry answers instead, and says so in its log.
    test(`runs ${runtimeClass ? "in gVisor's sentry, not on the node's kernel" : "on the node's kernel (runc)"}`, () => {
      const version = exec("harness", "cat", "/proc/version");
      expect(version.status).toBe(0);
      const hostKernel = readFileSync("/proc/version", "utf8");
      const dmesg = exec("harness", "dmesg");
      if (runtimeClass) {
        expect(version.stdout).not.toBe(hostKernel);
        expect([dmesg.status, dmesg.stdout]).toEqual([0, expect.stringContaining("Starting gVisor")]);
        // Every seat is in the one sandbox: the credential holders too (read with the guard lifted).
        expect(exec("custodian", "cat", "/proc/version").stdout).toBe(version.stdout);
      } else {
        expect(version.stdout).toBe(hostKernel);
        expect(dmesg.stdout).not.toContain("gVisor");
      }
    });

    test("its probes are the kubelet's and pass: readiness on each seat, liveness on the Custodian", () => {
      const c = (n: string) => (pod.spec.containers as Obj[]).find((x) => x.name === n)!;
      expect(c("harness").readinessProbe.httpGet).toMatchObject({ path: "/healthz", port: 8080 });
      expect(c("custodian").readinessProbe.httpGet).toMatchObject({ path: "/readyz", port: 15021 });
      expect(c("custodian").livenessProbe.httpGet).toMatchObject({ path: "/healthz", port: 15021 });
      expect(c("effector").readinessProbe.httpGet).toMatchObject({ path: "/healthz", port: 8082 });
      // Ready (above) is the readiness probes' verdict; no restart is the liveness probe's. The
      // Custodian's readiness answers from inside its own container as the kubelet sees it.
      const readyz = exec(
        "custodian",
        "node",
        "-e",
        "fetch('http://127.0.0.1:15021/readyz').then(r=>console.log(r.status))",
      );
      expect(readyz.stdout.trim()).toBe("200");
    });

    test("the read-only roots hold, each by its mount options; each seat writes only its own volumes", () => {
      const containers = pod.spec.containers as Obj[];
      // The seats whose root the composition states read-only (orchestrator/workspaces/compose.ts):
      // the Custodian and the Effector. The Harness's root is the image's, writable where the image
      // lets uid 65532 write; the user seat's is its image's own (decision 0009).
      const readOnly = containers
        .filter((c) => c.securityContext?.readOnlyRootFilesystem === true)
        .map((c) => c.name as string)
        .sort();
      expect(readOnly).toEqual(["custodian", "effector"]);
      // Every seat's root as the runtime mounted it (its options in the seat's own
      // /proc/self/mountinfo; gVisor's sentry answers there for its own mounts): `ro` exactly where
      // the spec asks for it, so a runtime that ignored the field fails here, whatever a write says.
      for (const c of containers) {
        const seat = c.name as string;
        // The probe image's seat (user) has no cat: the probe prints the file.
        const read = ["user"].includes(seat)
          ? exec(seat, "/jr2-probe", "mounts")
          : exec(seat, "cat", "/proc/self/mountinfo");
        expect([seat, read.status, read.stderr]).toEqual([seat, 0, ""]);
        const root = mountOptions(read.stdout, "/");
        expect([seat, root.includes("ro") ? "ro" : root.includes("rw") ? "rw" : root.join(",")]).toEqual([
          seat,
          readOnly.includes(seat) ? "ro" : "rw",
        ]);
      }
      // ... and a write to a read-only root is refused.
      const custodian = sh("custodian", "echo x > /escape");
      expect([custodian.status === 0, custodian.stderr]).toEqual([false, expect.stringMatching(READ_ONLY)]);
      const effector = sh("effector", "echo x > /escape");
      expect(effector.status).not.toBe(0);
      expect(effector.stderr).toMatch(READ_ONLY);
      expect(sh("effector", "echo x > /run/jr2/scratch/ok").status).toBe(0);
      // The Effector reads /work and never writes it (decision 0021).
      expect(sh("effector", "echo x > /work/escape").stderr).toMatch(READ_ONLY);
      // The Harness writes its two volumes; its root is the image's, owned by root where it matters.
      expect(
        sh(
          "harness",
          "echo x > /work/.probe && echo x > /conversations/.probe && rm /work/.probe /conversations/.probe",
        ).status,
      ).toBe(0);
      const opt = sh("harness", "echo x > /opt/jr2/harness.js");
      expect(opt.status).not.toBe(0);
      expect(opt.stderr).toMatch(/Permission denied/);
      expect(sh("harness", "id -u").stdout.trim()).toBe("65532");
    });

    test("the Custodian's values and CA are its alone: the Harness, the Effector and the User Container cannot read them", () => {
      // kubectl exec -c harness -- cat <the Custodian's values>: not mounted there at all.
      const cat = exec("harness", "cat", HELD_FILE);
      expect(cat.status).not.toBe(0);
      expect(cat.stderr).toMatch(/No such file or directory/);
      for (const path of [VALUES, `${VALUES}/JR2_SANDBOX_TOKEN`, `${CUSTODIAN_CA}/tls.key`, "/etc/jr2/custodian"])
        expect([path, exec("harness", "ls", path).status === 0]).toEqual([path, false]);
      for (const seat of ["effector", "user"])
        for (const path of [HELD_FILE, `${CUSTODIAN_CA}/tls.key`]) {
          const r = seat === "user" ? exec(seat, "/jr2-probe", "read", path) : exec(seat, "cat", path);
          expect([seat, path, r.status === 0, r.stderr]).toEqual([
            seat,
            path,
            false,
            expect.stringMatching(/no such file/i),
          ]);
        }
      // The custodian reads them: the held value as stored (compared by digest, never printed), its
      // CA's key, each file 0440 to the pod's work group, never world-readable.
      const digest = exec(
        "custodian",
        "node",
        "-e",
        `process.stdout.write(require("crypto").createHash("sha256").update(require("fs").readFileSync(${JSON.stringify(HELD_FILE)})).digest("hex"))`,
      );
      expect(digest.stderr).toBe("");
      expect(digest.stdout).toBe(sha256(MODEL_KEY));
      // The Effector's own key likewise: the effector reads it, the Harness does not see it.
      const key = sh("effector", "wc -c < /run/jr2/effector/key");
      expect([key.status, Number(key.stdout) > 0]).toEqual([0, true]);
      expect(exec("harness", "ls", "/run/jr2/effector").status).not.toBe(0);
      expect(exec("user", "/jr2-probe", "read", "/run/jr2/effector/key").status).not.toBe(0);
      const modes = sh(
        "custodian",
        `stat -L -c '%a %g' ${HELD_FILE} ${VALUES}/JR2_SANDBOX_TOKEN ${CUSTODIAN_CA}/tls.key`,
      );
      expect(modes.stdout.trim().split("\n")).toEqual(["440 2000", "440 2000", "440 2000"]);
    });

    test("the Harness sees Stand-ins only: its env, its files and its CA certificate hold no credential", () => {
      const envText = exec("harness", "env").stdout;
      const standIn = /^ANTHROPIC_API_KEY=(.*)$/m.exec(envText)?.[1];
      expect(standIn).toMatch(STAND_IN);
      expect(/^OPENAI_API_KEY=(.*)$/m.exec(envText)?.[1]).toMatch(STAND_IN);
      for (const key of [MODEL_KEY, SCRIPTED_KEY]) expect(envText).not.toContain(key);
      expect(envText).toMatch(/^HTTPS_PROXY=http:\/\/127\.0\.0\.1:8081$/m);
      // Nowhere it can read: grep lists no file (its exit is 1, or 2 for the files it may not read).
      const grep = sh(
        "harness",
        `grep -rsFl -e '${MODEL_KEY}' -e '${SCRIPTED_KEY}' /etc /opt /work /conversations /home /tmp /run /var /proc/self/environ`,
      );
      expect([grep.status === 0, grep.stdout]).toEqual([false, ""]);
      // Its trust: the installation CA's certificate and nothing else in that directory.
      expect(exec("harness", "ls", "/etc/jr2/ca").stdout.trim()).toBe("ca.crt");
      expect(exec("harness", "cat", "/etc/jr2/ca/ca.crt").stdout).toMatch(/^-----BEGIN CERTIFICATE-----/);
    });

    test("the Repo cache is mounted read-only from the node's cache agent, and /attach cloned it into /work", () => {
      const mount = sh("harness", `grep ' /repos/${repoKey} ' /proc/mounts`).stdout;
      expect(mount.split(" ")[3]).toMatch(/^ro,/);
      const write = sh("harness", `touch /repos/${repoKey}/escape`);
      expect(write.status).not.toBe(0);
      expect(write.stderr).toMatch(READ_ONLY);
      // The cache is the agent's bare checkout on this machine, the one the hostPath names: the
      // Sandboxes' namespace's (decision 0046).
      expect(gitIn(join(cacheRoot, ns, repoKey), "rev-parse", "HEAD")).toBe(gitIn(remote, "rev-parse", "HEAD"));
      // /work/<slot>/default and a worktree for the branch, borrowing the cache's objects.
      const git = (...args: string[]) => exec("harness", "git", "-c", "safe.directory=*", ...args);
      expect(git("-C", "/work/app/default", "log", "--format=%s").stdout.trim()).toBe("first widget");
      expect(exec("harness", "cat", "/work/app/default/README").stdout).toBe("widgets\n");
      expect(git("-C", "/work/app/feature/node", "rev-parse", "--abbrev-ref", "HEAD").stdout.trim()).toBe(
        "feature/node",
      );
      expect(exec("harness", "cat", "/work/app/default/.git/objects/info/alternates").stdout.trim()).toBe(
        `/repos/${repoKey}/objects`,
      );
    });

    // Decision 0048: the guard back, nobody execs or attaches into a credential holder; the Harness
    // and the user seat stay open.
    test("exec and attach into the custodian and the effector are refused, into the harness and user seat not", async () => {
      connectGuard.restore();
      const refused = await until("exec into the custodian refused again", 30_000, () => {
        const r = exec("custodian", "cat", HELD_FILE);
        return r.status !== 0 && r.stderr.includes("credential holder") ? r : undefined;
      });
      expect(refused.stdout).toBe("");
      expect(refused.stderr).toContain(`exec into container "custodian" of Sandbox pod ${ns}/${name} is refused`);
      expect(refused.stderr).toContain(`kubectl exec -n ${ns} ${name} -c harness`);
      expect(exec("effector", "cat", "/run/jr2/effector/key").stderr).toContain('exec into container "effector"');
      expect(kubectl(["attach", "-n", ns, name, "-c", "custodian"]).stderr).toContain(
        'attach into container "custodian"',
      );
      expect(exec("harness", "true").status).toBe(0);
      expect(exec("user", "/jr2-probe", "read", "/work").stderr).not.toContain("credential holder");
    });

    if (!runtimeClass)
      test("/attach set the slot's default ACL in the image (its acl package), with no warning", () => {
        // The slot root inherits group rwx to whatever an Agent or the User Container makes under it.
        const acl = exec("harness", "getfacl", "-p", "/work/app");
        expect([acl.status, acl.stderr]).toEqual([0, ""]);
        for (const entry of ["default:user::rwx", "default:group::rwx", "default:other::r-x"])
          expect(acl.stdout.split("\n")).toContain(entry);
        expect(kubectlOk(["logs", "-n", ns, name, "-c", "harness"])).not.toContain("setfacl");
      });
    // gVisor has no POSIX ACLs (decision 0055): the Harness says it skipped the slot's default ACL,
    // and the group's share rests on the slot's setgid group and the Harness's umask 002.
    else
      test("/attach skipped the slot's default ACL, which gVisor has not, saying so; the slot's files stay the group's", () => {
        const acl = exec("harness", "getfacl", "-p", "/work/app");
        expect(acl.stdout).not.toContain("default:");
        expect(kubectlOk(["logs", "-n", ns, name, "-c", "harness"])).toContain("setfacl on /work/app skipped");
        expect(sh("harness", "stat -c '%a %g' /work/app /work/app/default/README").stdout.trim().split("\n")).toEqual([
          "2775 2000",
          "664 2000",
        ]);
      });

    test("kubectl exec -c harness works, and kubectl logs shows each container", () => {
      // The image is built on the suite the images script names (decision 0041), not a release pinned here.
      expect(exec("harness", "cat", "/etc/os-release").stdout).toMatch(new RegExp(`^VERSION_CODENAME=${SUITE}$`, "m"));
      const logs = (c: string) => kubectlOk(["logs", "-n", ns, name, "-c", c]);
      expect(logs("harness")).toMatch(/"message":"listening".*"port":8080/);
      expect(logs("custodian")).toMatch(/"message":"listening"/);
      expect(logs("effector")).toMatch(/"message":"listening".*"port":8082/);
      expect(logs("user")).toContain("jr2-probe serving :9090");
      // Never a held value in a log.
      for (const c of ["harness", "custodian"])
        for (const key of [MODEL_KEY, SCRIPTED_KEY]) expect(logs(c)).not.toContain(key);
    });

    describe("its NetworkPolicies, enforced", () => {
      let sandboxIp: string;
      let orchestratorIp: string;
      let neighbourIp: string;
      /** From a probe pod: GET url, exit 0 on a 2xx. */
      const get = (namespace: string, from: string, url: string) =>
        kubectl(["exec", "-n", namespace, from, "--", "/jr2-probe", "get", url]);
      /** From the Sandbox's harness container: a TCP connect within 3 s (bash's /dev/tcp; no proxy). */
      const connect = (ip: string, port: number) =>
        exec("harness", "timeout", "3", "bash", "-c", `exec 3<>/dev/tcp/${ip}/${port}`);

      beforeAll(async () => {
        apply(
          // The Orchestrator, as the policies know it: its namespace and its name label.
          probePod("orchestrator", orchNs, { "app.kubernetes.io/name": "jr2-orchestrator" }, 8090),
          // Not the Orchestrator: the same namespace without the label, and a pod beside the Sandbox.
          probePod("stranger", orchNs, { app: "stranger" }),
          probePod("neighbour", ns, { app: "neighbour" }),
        );
        orchestratorIp = (await readyPod(orchNs, "orchestrator")).status.podIP;
        await readyPod(orchNs, "stranger");
        neighbourIp = (await readyPod(ns, "neighbour")).status.podIP;
        sandboxIp = pod.status.podIP;
      }, 150_000);

      test("the policies are the operator's: ingress and egress over every Sandbox pod", () => {
        const names = getJson(["networkpolicy", "-n", ns])
          .items.map((p: Obj) => p.metadata.name)
          .sort();
        expect(names).toEqual(["jr2-sandbox-egress", "jr2-sandbox-ingress"]);
      });

      test("from a pod that is not the Orchestrator, the Sandbox's :8080 and :8082 are unreachable", () => {
        // Those pods have a network: the stranger reaches the neighbour.
        expect(get(orchNs, "stranger", `http://${neighbourIp}:8080/`).status).toBe(0);
        for (const [namespace, from] of [
          [orchNs, "stranger"],
          [ns, "neighbour"],
        ])
          for (const port of [8080, 8082]) {
            const r = get(namespace, from, `http://${sandboxIp}:${port}/healthz`);
            expect([from, port, r.status === 0]).toEqual([from, port, false]);
            // Dropped, not refused: the policy, not a closed port.
            expect(r.stderr).toMatch(/Client\.Timeout|i\/o timeout|deadline exceeded/);
          }
      });

      test("from the Orchestrator's pod they answer", async () => {
        for (const port of [8080, 8082]) {
          const r = await until(`the Orchestrator's pod reaches the Sandbox's :${port}`, 30_000, () => {
            const x = get(orchNs, "orchestrator", `http://${sandboxIp}:${port}/healthz`);
            return x.status === 0 ? x : undefined;
          });
          expect(r.stdout).toMatch(/^200 /);
        }
        // The Orchestrator itself, a process on this machine, reached the Harness at its Service name
        // for the attach (the workspace is ready): node-local traffic, which no policy here polices.
      });

      test("the Sandbox reaches the Orchestrator's port, no other pod, and no resolver", () => {
        expect(connect(orchestratorIp, 8090).status).toBe(0);
        for (const [ip, port] of [
          [neighbourIp, 8080],
          [orchestratorIp, 8080],
        ] as const) {
          const r = connect(ip, port);
          // timeout's 124: the SYN dropped by the egress policy, not refused.
          expect([ip, port, r.status]).toEqual([ip, port, 124]);
        }
        // The Orchestrator pod's :8080 is closed (it serves :8090): from a pod the egress policy does
        // not cover, a connect is refused at once, which is what the 124 above is not.
        expect(get(orchNs, "stranger", `http://${orchestratorIp}:8080/`).stderr).toMatch(/connection refused/);
        // No DNS (decision 0051): the cluster's resolver answers the stranger, not the Sandbox.
        expect(sh("harness", "timeout 5 getent hosts kubernetes.default.svc.cluster.local").status).not.toBe(0);
        expect(exec("harness", "timeout", "3", "bash", "-c", `exec 3<>/dev/tcp/${NODE_IP}/53`).status).toBe(124);
      });

      describe("a Sandbox written directly in a second namespace (decision 0047)", () => {
        let directIp: string;
        beforeAll(async () => {
          // jr2's CR shape, no Orchestrator: the probe program as its Harness, serving :8080.
          apply({
            apiVersion: API_VERSION,
            kind: "Sandbox",
            metadata: { name: "direct", namespace: ns2 },
            spec: {
              image: PROBE_IMAGE,
              args: ["serve", "8080"],
              ...onRealNode,
              // A direct CR names its runtime itself; the operator passes it to the pod.
              ...(runtimeClass ? { runtimeClassName: runtimeClass } : {}),
            },
          });
          directIp = (await readyPod(ns2, "direct")).status.podIP;
        }, 150_000);

        test("gets both policies from the operator", () => {
          const names = getJson(["networkpolicy", "-n", ns2])
            .items.map((p: Obj) => p.metadata.name)
            .sort();
          expect(names).toEqual(["jr2-sandbox-egress", "jr2-sandbox-ingress"]);
        });

        test("its :8080 is dropped from a pod that is not the Orchestrator, and answers the Orchestrator's", async () => {
          for (const [namespace, from] of [
            [orchNs, "stranger"],
            [ns, "neighbour"],
          ]) {
            const r = get(namespace, from, `http://${directIp}:8080/healthz`);
            expect([from, r.status === 0]).toEqual([from, false]);
            expect(r.stderr).toMatch(/Client\.Timeout|i\/o timeout|deadline exceeded/);
          }
          const r = await until("the Orchestrator's pod reaches the direct Sandbox's :8080", 30_000, () => {
            const x = get(orchNs, "orchestrator", `http://${directIp}:8080/healthz`);
            return x.status === 0 ? x : undefined;
          });
          expect(r.stdout).toMatch(/^200 /);
        });
      });

      test("this node's own addresses are closed to the Sandbox (decision 0051): the API server, the kubelet, DNS", () => {
        // kube-network-policies polices no traffic between a pod and its node (decision 0040); the
        // node's own rule, set before the pod's containers started, drops what the Sandbox opens
        // toward the node, by the API server's Service address or the node's own.
        for (const [ip, port] of [
          ["10.96.0.1", 443],
          [NODE_IP, 10250],
          [NODE_IP, 53],
        ] as const)
          expect([ip, port, connect(ip, port).status]).toEqual([ip, port, 124]);
      });
    });
  });
}
