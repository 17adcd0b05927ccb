// Where the egress point sends an allowed name, and what it calls internal, on the real node
// (docs/decisions/0068, amending 0051). The egress point alone is deployed (its built manifest and
// image, its pod config holding the base list and the installation's address ranges), with the
// Sandbox CRD, one Sandbox and a pod labelled as that Sandbox's (no module: nothing here needs its
// admission or controller; the egress point knows a Sandbox pod by its labels and address). From
// that pod, through the egress point's Service:
// - an attacker's namespace `example` with a headless Service `egress` plants
//   `allowed.egress.example.svc.cluster.local` on the stand-in public host's other address: an
//   allowed name still reaches its own address (the stand-in's recorder says which listener got the
//   request), and a name only the search path would answer does not resolve at all;
// - one name per kind of address (a headless Service's endpoint per kind, reached by its absolute
//   cluster name, which a workspace rule lists) is refused as `internal` in the Sandbox's log.
// The pod network has no uplink (dev/cluster/node.sh's forward chain), so even a refusal that
// failed would send nothing beyond this machine.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { builtManifests } from "../../dev/deployed";
import { egressPointObjects } from "../../dev/in-cluster-egress";
import { egressLogPath, mergeEgressLogs, type EgressLogEntry } from "../../api/egress-point";
import { MANAGED_BY, MANAGED_BY_LABEL, SANDBOX_NAME_LABEL } from "../../api/wire";
import {
  INSTALLED,
  ROOT,
  type Obj,
  apply,
  available,
  fromSetup,
  getJson,
  kubectl,
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
const SANDBOX = "egress-names";
/** The attacker's namespace: with the search domain svc.cluster.local, `<x>.egress.example` is the
 * endpoint `<x>` of its Service `egress`. */
const PLANT_NS = "example";
const KINDS_NS = `jr2-egress-kinds-${randomBytes(3).toString("hex")}`;
const KINDS = `kinds.${KINDS_NS}.svc.cluster.local`;
/** The installation's own cluster range (pod config egress.clusterRanges), public by IANA's word. */
const CLUSTER_RANGE = "11.22.0.0/16";
const placement = {
  nodeSelector: { [node.label[0]]: node.label[1] },
  tolerations: [{ key: node.taint.key, operator: "Equal", value: node.taint.value, effect: node.taint.effect }],
};

/** One endpoint per kind of address the egress point holds internal. Link-local and loopback
 * addresses are not here: the API server refuses them as endpoints (the table test has them). */
const V4_KINDS: Array<[string, string]> = [
  ["private", "10.123.45.67"],
  ["shared", "100.64.7.7"],
  ["alibaba-metadata", "100.100.100.200"],
  ["azure-wire-server", "168.63.129.16"],
  ["ietf", "192.0.0.170"],
  ["documentation", "192.0.2.1"],
  ["benchmarking", "198.18.0.1"],
  ["multicast", "239.1.2.3"],
  ["reserved", "240.0.0.1"],
  ["cluster-range", "11.22.33.44"],
];
const V6_KINDS: Array<[string, string]> = [
  ["site-local", "fec0::1"],
  ["unique-local-aws-metadata", "fd00:ec2::254"],
  ["nat64-private", "64:ff9b::a7b:2d43"],
  ["documentation6", "2001:db8::1"],
  ["teredo", "2001::1"],
];

/** Node, in the pod: `CONNECT argv[3]` to the proxy at argv[1]:argv[2], then a GET of argv[4]
 * inside; prints the CONNECT's status, and after a 200 the inner status line. */
const CONNECT_JS = `
const http = require("http");
const [host, port, target, path] = process.argv.slice(1);
const req = http.request({ host, port: Number(port), method: "CONNECT", path: target, headers: { host: target } });
req.setTimeout(20000, () => { console.log("timeout"); process.exit(0); });
req.on("error", (e) => { console.log(e.code); process.exit(0); });
req.on("connect", (res, sock) => {
  if (res.statusCode !== 200) { console.log(res.statusCode); process.exit(0); }
  sock.write("GET " + path + " HTTP/1.1\\r\\nHost: " + target.split(":")[0] + "\\r\\nConnection: close\\r\\n\\r\\n");
  let got = "";
  sock.on("data", (c) => (got += c));
  sock.on("end", () => { console.log("200 " + got.split("\\r\\n")[0]); process.exit(0); });
});
req.end();`;
/** Node: every address the system resolver gives for argv[1], as this pod's resolv.conf has it. */
const LOOKUP_JS = `require("dns").lookup(process.argv[1], { all: true }, (e, a) => {
  console.log(e ? e.code : a.map((x) => x.address).join(","));
});`;

let publicHost: PublicHost | undefined;
let proxy = "";

const podConfig = {
  egress: {
    // The installation's base list: the stand-in's allowed name, and a name no DNS holds, which
    // only a search domain could make resolve.
    allow: [`${PUBLIC.allowedName}:80`, "nothere.egress.example:80"],
    clusterRanges: [CLUSTER_RANGE],
    // A test installation's word: the stand-in's two documentation addresses are public here.
    publicTestRanges: [`${PUBLIC.allowedIp}/32`, `${PUBLIC.otherIp}/32`],
  },
};

const headless = (namespace: string, name: string) => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace },
  spec: { clusterIP: "None", ports: [{ name: "http", port: 80, protocol: "TCP" }] },
});
const slice = (namespace: string, service: string, family: "IPv4" | "IPv6", endpoints: Array<[string, string]>) => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: {
    name: `${service}-${family.toLowerCase()}`,
    namespace,
    labels: { "kubernetes.io/service-name": service, "endpointslice.kubernetes.io/managed-by": "jr2-tests" },
  },
  addressType: family,
  endpoints: endpoints.map(([hostname, ip]) => ({ addresses: [ip], hostname, conditions: { ready: true } })),
  ports: [{ name: "http", port: 80, protocol: "TCP" }],
});

const inPod = (...command: string[]) => kubectl(["exec", "-n", SANDBOXES, SANDBOX, "--", ...command]);
const connectThrough = (target: string, path = "/") =>
  inPod("node", "-e", CONNECT_JS, ...proxy.split(":"), target, path).stdout.trim();
const egressPods = () => getJson(["pods", "-n", SYSTEM, "-l", "app.kubernetes.io/name=jr2-egress"]).items as Obj[];
/** The Sandbox's log from every replica, merged as the Orchestrator merges it (decision 0076). */
const logOfSandbox = async (): Promise<EgressLogEntry[]> =>
  mergeEgressLogs(
    await Promise.all(
      egressPods().map(async (p) => {
        const res = await fetch(`http://${p.status.podIP}:9091${egressLogPath(SANDBOXES, SANDBOX)}`);
        return res.status === 404 ? [] : ((await res.json()) as { entries: EgressLogEntry[] }).entries;
      }),
    ),
  );

function cleanUp() {
  removeInstallation([PLANT_NS, KINDS_NS]);
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
  for (const ns of [PLANT_NS, KINDS_NS]) kubectlOk(["create", "namespace", ns]);
  apply(
    // The attacker's plant: allowed.egress.example.svc.cluster.local and nothere.egress.example.svc.cluster.local.
    headless(PLANT_NS, "egress"),
    slice(PLANT_NS, "egress", "IPv4", [
      ["allowed", PUBLIC.otherIp],
      ["nothere", PUBLIC.otherIp],
    ]),
    headless(KINDS_NS, "kinds"),
    slice(KINDS_NS, "kinds", "IPv4", V4_KINDS),
    slice(KINDS_NS, "kinds", "IPv6", V6_KINDS),
    {
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Sandbox",
      metadata: { name: SANDBOX, namespace: SANDBOXES },
      spec: {
        image: COMPANIONS_IMAGE,
        // The workspace's list: the stand-in's other name, and every name of the kinds' Service.
        egress: { allow: [`${PUBLIC.otherName}:80`, `*.${KINDS}:80`] },
      },
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
  const svc = getJson(["service", "-n", SYSTEM, "jr2-egress"]);
  proxy = `${svc.spec.clusterIP}:3128`;
  // The egress point knows the pod's address (its index holds one pod) before a test asks.
  await until("every replica's index holds the pod", 60_000, async () => {
    for (const p of egressPods()) {
      const metrics = await (await fetch(`http://${p.status.podIP}:9091/metrics`)).text();
      if (!(/^jr2_egress_pods 1$/m.test(metrics) && /^jr2_egress_sandboxes 1$/m.test(metrics))) return undefined;
    }
    return true;
  });
}, 600_000);

afterAll(async () => {
  await publicHost?.stop();
  cleanUp();
}, 600_000);

describe("the egress point resolves absolute names only (decision 0068)", () => {
  test("the plant answers a pod that searches: the name as the egress point looked it up before resolves to it", () => {
    // This pod has ClusterFirst's resolv.conf (ndots 5, the cluster's search domains), as the egress
    // point's pod had; a lookup without the trailing dot, as its code made, gets the plant.
    expect(inPod("node", "-e", LOOKUP_JS, PUBLIC.allowedName).stdout.trim()).toBe(PUBLIC.otherIp);
    expect(inPod("node", "-e", LOOKUP_JS, "nothere.egress.example").stdout.trim()).toBe(PUBLIC.otherIp);
    // The absolute names are the stand-in's own (and none).
    expect(inPod("node", "-e", LOOKUP_JS, `${PUBLIC.allowedName}.`).stdout.trim()).toBe(PUBLIC.allowedIp);
    expect(inPod("node", "-e", LOOKUP_JS, "nothere.egress.example.").stdout.trim()).toMatch(/^E[A-Z_]+$/);
  });

  test("an allowed name reaches its own address, not the plant; a name only the search path answers does not resolve", async () => {
    const tag = randomBytes(3).toString("hex");
    expect(connectThrough(`${PUBLIC.allowedName}:80`, `/names-allowed-${tag}`)).toMatch(/^200 HTTP\/1\.1 200/);
    const got = await publicHost!.waitFor("the allowed name's request", (rs) =>
      rs.find((r) => r.kind === "http" && r.path === `/names-allowed-${tag}`),
    );
    expect(got).toMatchObject({ local: `${PUBLIC.allowedIp}:80`, host: PUBLIC.allowedName });
    // Not resolved, so not connected: the base list names it, and it is no name outside the cluster.
    expect(connectThrough("nothere.egress.example:80", `/names-nothere-${tag}`)).toBe("502");
    const entries = await logOfSandbox();
    expect(entries.filter((e) => e.host === "nothere.egress.example").map((e) => [e.decision, e.reason])).toEqual([
      ["unreachable", "dns"],
    ]);
    // The egress point's own lookups (its pod keeps the cluster resolver) never went to the plant.
    expect(
      publicHost!
        .http()
        .filter((r) => r.path.includes(tag))
        .map((r) => `${r.local} ${r.path}`),
    ).toEqual([`${PUBLIC.allowedIp}:80 /names-allowed-${tag}`]);
  });
});

describe("a workspace rule reaches public addresses only (decision 0068)", () => {
  test("the stand-in's other name, public for this test installation alone, is reached by the workspace's rule", async () => {
    const tag = randomBytes(3).toString("hex");
    expect(connectThrough(`${PUBLIC.otherName}:80`, `/names-other-${tag}`)).toMatch(/^200 HTTP\/1\.1 200/);
    await publicHost!.waitFor("the other name's request", (rs) =>
      rs.find((r) => r.kind === "http" && r.path === `/names-other-${tag}`),
    );
  });

  test.each([...V4_KINDS, ...V6_KINDS])(
    "%s (%s), by a name the workspace's rule lists, is refused as internal",
    async (kind) => {
      const host = `${kind}.${KINDS}`;
      // The name resolves (the refusal is the address's, not a lookup's): the resolver answers it.
      expect(inPod("node", "-e", LOOKUP_JS, `${host}.`).stdout.trim()).not.toMatch(/^E[A-Z_]+$/);
      expect(connectThrough(`${host}:80`)).toBe("403");
      const entries = (await logOfSandbox()).filter((e) => e.host === host);
      expect(entries.map((e) => [e.decision, e.reason])).toEqual([["refused", "internal"]]);
    },
  );
});
