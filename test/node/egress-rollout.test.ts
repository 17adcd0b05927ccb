// The egress point rolled while a Sandbox downloads through it, on the real node (decision 0076).
// Deployed apart, as test/node/egress-names.test.ts deploys it (its built manifest and image, two
// replicas, the pod config holding the base list), with the Sandbox CRD, one Sandbox and a pod
// labelled as its: the whole installation is not needed to prove a drain, and its deploy costs
// minutes. From that pod, three loops of downloads through the egress point's Service: each a
// CONNECT to the stand-in public host's :443 and a GET of 2 MiB paced over 1.5 s inside the tunnel,
// retried once by a new connection if it breaks. Meanwhile a pod-template annotation rolls the
// Deployment (surge one, none unavailable; each old pod fails readiness, keeps accepting for the
// drain delay, then lets its tunnels finish). Every download completes, none needs more than one
// reconnect, and no connection is refused; the stand-in saw the requests come from the old
// replicas and the new ones, so the roll happened under the load.
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { builtManifests } from "../../dev/deployed";
import { egressPointObjects } from "../../dev/in-cluster-egress";
import { MANAGED_BY, MANAGED_BY_LABEL, SANDBOX_NAME_LABEL } from "../../api/wire";
import {
  INSTALLED,
  ROOT,
  type Obj,
  apply,
  available,
  fromSetup,
  getJson,
  kubectlOk,
  realNode,
  removeInstallation,
  until,
} from "./support";
import { publicHostAddresses, startPublicHost, type PublicHost } from "./public-host";

const node = realNode();
const COMPANIONS_IMAGE = fromSetup("JR2_NODE_COMPANIONS_IMAGE");
const BY_TAG = JSON.parse(fromSetup("JR2_NODE_IMAGES_BY_TAG")) as Record<string, string>;
const PUBLIC = publicHostAddresses();
const { system: SYSTEM, sandboxes: SANDBOXES } = INSTALLED;
const SANDBOX = "egress-rollout";
const EGRESS_LABEL = "app.kubernetes.io/name=jr2-egress";
const placement = {
  nodeSelector: { [node.label[0]]: node.label[1] },
  tolerations: [{ key: node.taint.key, operator: "Equal", value: node.taint.value, effect: node.taint.effect }],
};
const podConfig = {
  egress: {
    allow: [`${PUBLIC.allowedName}:443`],
    publicTestRanges: [`${PUBLIC.allowedIp}/32`, `${PUBLIC.otherIp}/32`],
  },
};
const BYTES = 2 * 1024 * 1024;
const PACE_MS = 1500;
const LOOPS = 3;

/** Node, in the pod: LOOPS loops for argv[4] ms, each download a CONNECT to argv[3] through the
 * proxy argv[1]:argv[2] and a GET of /slow-bytes inside, counted to its last byte; a broken one is
 * tried again once on a new connection. One JSON line per download, then {"done":true}. */
const DOWNLOADS_JS = `
const http = require("http");
const [host, port, target, forMs, tag, bytes, pace, loops] = process.argv.slice(1);
const until = Date.now() + Number(forMs);
function once(path) {
  return new Promise((resolve) => {
    const req = http.request({ host, port: Number(port), method: "CONNECT", path: target, headers: { host: target } });
    req.setTimeout(20000, () => { req.destroy(); resolve({ ok: false, error: "timeout" }); });
    req.on("error", (e) => resolve({ ok: false, error: e.code || e.message }));
    req.on("connect", (res, sock) => {
      if (res.statusCode !== 200) { sock.destroy(); return resolve({ ok: false, error: "status " + res.statusCode }); }
      sock.write("GET " + path + " HTTP/1.1\\r\\nHost: " + target.split(":")[0] + "\\r\\nConnection: close\\r\\n\\r\\n");
      let head = "", body = 0, inBody = false;
      sock.on("data", (c) => {
        if (inBody) return void (body += c.length);
        head += c.toString("latin1");
        const at = head.indexOf("\\r\\n\\r\\n");
        if (at >= 0) { inBody = true; body += Buffer.byteLength(head.slice(at + 4), "latin1"); }
      });
      sock.on("error", (e) => resolve({ ok: false, error: e.code || e.message, got: body }));
      sock.on("close", () => resolve(body === Number(bytes) && /^HTTP\\/1\\.1 200/.test(head) ? { ok: true } : { ok: false, error: "short", got: body }));
    });
    req.end();
  });
}
async function loop(l) {
  for (let i = 0; Date.now() < until; i++) {
    const path = "/slow-bytes/" + bytes + "/" + pace + "/" + tag + "-" + l + "-" + i;
    const started = Date.now();
    const tries = [await once(path)];
    if (!tries[0].ok) tries.push(await once(path + "-again"));
    console.log(JSON.stringify({ loop: l, i, ok: tries[tries.length - 1].ok, tries: tries.length, errors: tries.filter((t) => !t.ok).map((t) => t.error), ms: Date.now() - started }));
  }
}
Promise.all(Array.from({ length: Number(loops) }, (_, l) => loop(l))).then(() => console.log(JSON.stringify({ done: true })));
`;

type Download = { loop: number; i: number; ok: boolean; tries: number; errors: string[]; ms: number };

let publicHost: PublicHost | undefined;
let client: ChildProcess | undefined;

const egressPods = () =>
  (getJson(["pods", "-n", SYSTEM, "-l", EGRESS_LABEL]).items as Obj[]).filter((p) => !p.metadata.deletionTimestamp);

function cleanUp() {
  removeInstallation([]);
}

beforeAll(async () => {
  publicHost = await startPublicHost();
  cleanUp();
  const built = builtManifests(join(ROOT, "dist"));
  const crds = built.filter((d: Obj) => d.kind === "CustomResourceDefinition");
  kubectlOk(
    ["apply", "--server-side", "--force-conflicts", "-f", "-"],
    JSON.stringify({ kind: "List", apiVersion: "v1", items: crds }),
  );
  for (const c of crds) kubectlOk(["wait", "--for=condition=Established", `crd/${c.metadata.name}`, "--timeout=60s"]);
  kubectlOk(
    ["apply", "--server-side", "--force-conflicts", "-f", "-"],
    JSON.stringify({
      apiVersion: "v1",
      kind: "List",
      items: egressPointObjects({
        dist: join(ROOT, "dist"),
        pushed: BY_TAG,
        placement,
        podConfig: JSON.stringify(podConfig),
      }),
    }),
  );
  apply(
    {
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Sandbox",
      metadata: { name: SANDBOX, namespace: SANDBOXES },
      spec: { image: COMPANIONS_IMAGE },
    },
    {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: SANDBOX,
        namespace: SANDBOXES,
        labels: { [MANAGED_BY_LABEL]: MANAGED_BY, [SANDBOX_NAME_LABEL]: SANDBOX },
      },
      spec: {
        ...placement,
        automountServiceAccountToken: false,
        securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: "RuntimeDefault" } },
        containers: [
          {
            name: "probe",
            image: COMPANIONS_IMAGE,
            command: ["node", "-e", "setInterval(() => {}, 1 << 30)"],
            securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
          },
        ],
      },
    },
  );
  await available(SYSTEM, "jr2-egress");
  await until(`pod ${SANDBOXES}/${SANDBOX} running`, 180_000, () =>
    getJson(["pod", "-n", SANDBOXES, SANDBOX]).status?.containerStatuses?.[0]?.ready ? true : undefined,
  );
  // Each replica's index holds the pod before the downloads start.
  await until("every replica's index holds the pod", 60_000, async () => {
    const pods = egressPods();
    if (pods.length !== 2) return undefined;
    for (const p of pods) {
      const metrics = await (await fetch(`http://${p.status.podIP}:9091/metrics`)).text();
      if (!/^jr2_egress_pods 1$/m.test(metrics)) return undefined;
    }
    return true;
  });
}, 600_000);

afterAll(async () => {
  client?.kill("SIGKILL");
  await publicHost?.stop();
  cleanUp();
}, 600_000);

describe("the egress point's rolling update (decision 0076)", () => {
  test("two replicas, a budget of one, spread by node", () => {
    const dep = getJson(["deployment", "-n", SYSTEM, "jr2-egress"]);
    expect(dep.spec.replicas).toBe(2);
    expect(dep.spec.strategy.rollingUpdate).toEqual({ maxUnavailable: 0, maxSurge: 1 });
    expect(getJson(["pdb", "-n", SYSTEM, "jr2-egress"]).spec.minAvailable).toBe(1);
  });

  test("drops no download beyond one reconnect while every replica is replaced", async () => {
    const tag = `roll-${randomBytes(3).toString("hex")}`;
    const svc = getJson(["service", "-n", SYSTEM, "jr2-egress"]);
    const before = new Set(egressPods().map((p) => p.status.podIP as string));
    const lines: string[] = [];
    let rest = "";
    client = spawn(
      "kubectl",
      [
        "exec",
        "-n",
        SANDBOXES,
        SANDBOX,
        "--",
        "node",
        "-e",
        DOWNLOADS_JS,
        svc.spec.clusterIP,
        "3128",
        `${PUBLIC.allowedName}:443`,
        "90000",
        tag,
        String(BYTES),
        String(PACE_MS),
        String(LOOPS),
      ],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    client.stdout!.setEncoding("utf8").on("data", (c: string) => {
      const parts = (rest + c).split("\n");
      rest = parts.pop() ?? "";
      lines.push(...parts.filter(Boolean));
    });
    const ended = new Promise<void>((resolve) => client!.once("exit", () => resolve()));
    // Downloads under way on the old replicas, then the roll.
    await until("downloads under way", 30_000, () => (lines.length >= LOOPS ? true : undefined));
    kubectlOk([
      "patch",
      "deployment",
      "-n",
      SYSTEM,
      "jr2-egress",
      "--type=merge",
      "-p",
      JSON.stringify({ spec: { template: { metadata: { annotations: { "jr2.dev/rolled": tag } } } } }),
    ]);
    kubectlOk(["rollout", "status", "-n", SYSTEM, "deployment/jr2-egress", "--timeout=180s"]);
    // The old pods drain (their tunnels finish) and are gone.
    await until("the old replicas gone", 120_000, () => {
      const all = getJson(["pods", "-n", SYSTEM, "-l", EGRESS_LABEL]).items as Obj[];
      return all.every((p) => !before.has(p.status.podIP)) && all.length === 2 ? true : undefined;
    });
    const after = new Set(egressPods().map((p) => p.status.podIP as string));
    await ended;
    const downloads = lines.map((l) => JSON.parse(l)).filter((d) => !d.done) as Download[];
    expect(lines.map((l) => JSON.parse(l)).some((d) => d.done)).toBe(true);
    // Enough load to span the roll, every download whole, at most one reconnect each, none refused.
    expect(downloads.length).toBeGreaterThanOrEqual(LOOPS * 20);
    expect(downloads.filter((d) => !d.ok)).toEqual([]);
    expect(downloads.filter((d) => d.tries > 2)).toEqual([]);
    expect(downloads.flatMap((d) => d.errors).filter((e) => e === "ECONNREFUSED")).toEqual([]);
    process.stdout.write(
      `[egress-rollout] ${downloads.length} downloads, ${downloads.filter((d) => d.tries > 1).length} reconnected: ` +
        `${JSON.stringify(downloads.flatMap((d) => d.errors))}\n`,
    );
    // The stand-in served them from the old replicas and the new ones: the roll was under the load.
    const from = new Set(
      publicHost!
        .http()
        .filter((r) => r.path.includes(tag))
        .map((r) => r.from),
    );
    expect([...before].every((ip) => from.has(ip))).toBe(true);
    expect([...after].some((ip) => from.has(ip))).toBe(true);
    // And the new replicas refused nothing.
    for (const ip of after) {
      const metrics = await (await fetch(`http://${ip}:9091/metrics`)).text();
      expect(metrics).not.toMatch(/jr2_egress_connections_total\{decision="refused"[^}]*\} [1-9]/);
    }
  }, 400_000);
});
