// The keeper (keeper/keeper.ts, decision 0075) against the real API server: a module's worth of
// objects of its own (its Deployments on the kwok nodes, whose pods kwok makes Ready; its webhook
// configuration matching nothing, so no call reaches it): a fresh run makes everything, a second
// writes nothing, a serving pair near its end is renewed under the same CA, a CA near its end is
// renewed by widen, swap, restart, narrow; after every write each webhook trusts the CA of every
// pair a pod may serve (so no admission call would be refused); the signing key is never rewritten.
// A real admission call through a renewal is test/node's (the module's pods on the real node).
import { X509Certificate, randomBytes } from "node:crypto";
import { DAY } from "../../lib/ca";
import { kubeRequest } from "../../lib/kube";
import { issueAdmissionCa, issueServing } from "../../keeper/certificates";
import { bundleCertificates, rolledOut } from "../../keeper/decide";
import { type Api, SERVING_ANNOTATION, keep, pairId, servingNames } from "../../keeper/keeper";
import { kubeApi } from "../../keeper/run";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;

const suffix = randomBytes(3).toString("hex");
const mod = `pepr-keeper-${suffix}`;
const ns = `jr2-keeper-${suffix}`;
const sys = `jr2-keeper-sys-${suffix}`;
const SIGNING = "jr2-orchestrator-signing-key";
const b64 = (s: string) => Buffer.from(s).toString("base64");
const unb64 = (s: string) => Buffer.from(s, "base64").toString("utf8");
const secret = (n: string, space = ns) => kubeRequest<Obj>("GET", `/api/v1/namespaces/${space}/secrets/${n}`);
const hookPath = `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${mod}`;
const deployPath = (n: string) => `/apis/apps/v1/namespaces/${ns}/deployments/${n}`;

const deployment = (name: string, replicas: number) => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name, namespace: ns },
  spec: {
    replicas,
    selector: { matchLabels: { app: name } },
    template: {
      metadata: { labels: { app: name } },
      spec: { containers: [{ name: "server", image: "jr2/controller:keeper-test" }] },
    },
  },
});

/** What each pod may serve: the pair a Deployment's template names, the one it named before (until
 * its rollout is done), and the pair in the Secret (a pod restarting reads it). */
const seenPairs = new Map<string, string>();
const previousAnnotation = new Map<string, string>();
async function assertTrusted(after: string) {
  const tls = await secret(`${mod}-tls`).catch(() => undefined);
  const crt = tls?.data?.["tls.crt"] as string | undefined;
  if (crt) seenPairs.set(pairId(crt), unb64(crt));
  const served = new Set<string>(crt ? [unb64(crt)] : []);
  for (const name of [mod, `${mod}-watcher`]) {
    const d = await kubeRequest<Obj>("GET", deployPath(name));
    const now = d.spec.template.metadata.annotations?.[SERVING_ANNOTATION];
    const before = previousAnnotation.get(name);
    if (now && seenPairs.has(now)) served.add(seenPairs.get(now)!);
    const done = d.status?.updatedReplicas === d.spec.replicas && d.status?.replicas === d.spec.replicas;
    if (before && before !== now && !done && seenPairs.has(before)) served.add(seenPairs.get(before)!);
    if (now) previousAnnotation.set(name, now);
  }
  const hook = await kubeRequest<Obj>("GET", hookPath);
  for (const w of hook.webhooks) {
    const bundle = w.clientConfig.caBundle as string | undefined;
    if (!bundle) continue; // a fresh install's: no pod serves yet
    const cas = bundleCertificates(bundle).map((p) => new X509Certificate(p));
    for (const pem of served)
      expect([after, w.name, cas.some((ca) => new X509Certificate(pem).verify(ca.publicKey))]).toEqual([
        after,
        w.name,
        true,
      ]);
  }
}

/**
 * JR2_KEEPER_TEST_LONE_APISERVER=1: the run is against a lone API server (dev/cluster/apiserver.sh,
 * no controllers, no nodes), so the test writes each Deployment's status as its controller would on
 * a rollout that completed at once. Against the local cluster the Deployment controller and kwok do.
 */
const LONE = process.env.JR2_KEEPER_TEST_LONE_APISERVER === "1";
async function completeRollout(name: string) {
  if (!LONE) return;
  const d = await kubeRequest<Obj>("GET", deployPath(name));
  const n = d.spec.replicas;
  await kubeRequest(
    "PATCH",
    `${deployPath(name)}/status`,
    {
      status: {
        observedGeneration: d.metadata.generation,
        replicas: n,
        updatedReplicas: n,
        readyReplicas: n,
        availableReplicas: n,
      },
    },
    "application/merge-patch+json",
  );
}

/** The Deployments rolled onto what the test's own setup wrote, before the keeper runs. */
async function settle() {
  for (const name of [mod, `${mod}-watcher`]) {
    await completeRollout(name);
    const deadline = Date.now() + 90_000;
    while (!rolledOut(await kubeRequest<Obj>("GET", deployPath(name)))) {
      if (Date.now() > deadline) throw new Error(`Deployment ${ns}/${name} did not roll out in 90 s`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  await assertTrusted("the test's setup");
}

/** The real API, each write counted and followed by the trust check. */
function counted(): { api: Api; writes: string[] } {
  const real = kubeApi("jr2-keeper");
  const writes: string[] = [];
  return {
    writes,
    api: {
      get: real.get,
      async create(path, body) {
        await real.create(path, body);
        writes.push(`create ${path}`);
        await assertTrusted(`create ${path}`);
      },
      async patch(path, body, type) {
        await real.patch(path, body, type);
        writes.push(`patch ${path}`);
        const deployment = /\/deployments\/([^/]+)$/.exec(path);
        if (deployment) await completeRollout(deployment[1]!);
        await assertTrusted(`patch ${path}`);
      },
    },
  };
}
const cfg = { module: mod, namespace: ns, certificate: "cluster" as const, rolloutTimeoutMs: 120_000 };
const orchestrator = { namespace: sys, secret: SIGNING, existing: false };

beforeAll(async () => {
  for (const n of [ns, sys])
    await kubeRequest("POST", "/api/v1/namespaces", { metadata: { name: n, labels: { "jr2.dev/test": "keeper" } } });
  await kubeRequest("POST", `/apis/apps/v1/namespaces/${ns}/deployments`, deployment(mod, 2));
  await kubeRequest("POST", `/apis/apps/v1/namespaces/${ns}/deployments`, deployment(`${mod}-watcher`, 1));
  for (const d of [mod, `${mod}-watcher`]) await completeRollout(d);
  // As the chart writes it: no caBundle, no path; matching no object, so the API server never calls it.
  await kubeRequest("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", {
    metadata: { name: mod },
    webhooks: ["sandboxes", "pods"].map((w) => ({
      name: `${w}.${mod}.pepr.dev`,
      admissionReviewVersions: ["v1"],
      sideEffects: "None",
      failurePolicy: "Ignore",
      clientConfig: { service: { name: mod, namespace: ns } },
      namespaceSelector: { matchLabels: { "jr2.dev/keeper-test": suffix } },
      objectSelector: { matchLabels: { "jr2.dev/keeper-test": suffix } },
      rules: [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"] }],
    })),
  });
});

afterAll(async () => {
  await kubeRequest("DELETE", hookPath).catch(() => undefined);
  for (const n of [ns, sys]) await kubeRequest("DELETE", `/api/v1/namespaces/${n}`).catch(() => undefined);
});

describe("the keeper against the real API server", () => {
  let signing: Obj;
  let apiPath = "";

  it("a fresh run makes the signing key, the API path, the CA, the serving pair; restarts; injects the CA and path", async () => {
    const { api, writes } = counted();
    await keep(api, { ...cfg, orchestrator });
    expect(writes).toEqual([
      `create /api/v1/namespaces/${sys}/secrets`,
      `create /api/v1/namespaces/${ns}/secrets`,
      `create /api/v1/namespaces/${ns}/secrets`,
      `create /api/v1/namespaces/${ns}/secrets`,
      `patch ${deployPath(mod)}`,
      `patch ${deployPath(`${mod}-watcher`)}`,
      `patch ${hookPath}`,
    ]);
    signing = await secret(SIGNING, sys);
    expect(unb64(signing.data["signing-key"])).toMatch(/^[0-9a-f]{64}$/);
    apiPath = unb64((await secret(`${mod}-api-path`)).data.value);
    const ca = unb64((await secret(`${mod}-ca`)).data["ca.crt"]);
    const tls = await secret(`${mod}-tls`);
    expect(tls.type).toBe("kubernetes.io/tls");
    const cert = new X509Certificate(unb64(tls.data["tls.crt"]));
    expect(cert.subjectAltName).toBe(
      servingNames(mod, ns)
        .map((n) => `DNS:${n}`)
        .join(", "),
    );
    expect(cert.verify(new X509Certificate(ca).publicKey)).toBe(true);
    expect(Date.parse(cert.validTo) - Date.now()).toBeGreaterThan(364 * DAY);
    expect(Date.parse(new X509Certificate(ca).validTo) - Date.now()).toBeGreaterThan(3649 * DAY);
    for (const w of (await kubeRequest<Obj>("GET", hookPath)).webhooks) {
      expect(w.clientConfig.caBundle).toBe(b64(ca));
      expect(w.clientConfig.service.path).toBe(`/validate/${apiPath}`);
    }
  }, 60_000);

  it("a second run writes nothing", async () => {
    const { api, writes } = counted();
    expect(await keep(api, { ...cfg, orchestrator })).toEqual([]);
    expect(writes).toEqual([]);
  }, 60_000);

  it("a serving pair with under 30 days left is renewed under the same CA: no webhook write, the Deployments rolled", async () => {
    const caSecret = await secret(`${mod}-ca`);
    const ca = { certPem: unb64(caSecret.data["ca.crt"]), keyPem: unb64(caSecret.data["ca.key"]) };
    const tls = await secret(`${mod}-tls`);
    const short = issueServing(
      ca,
      `${mod} admission CA`,
      servingNames(mod, ns),
      20,
      Date.now(),
      Date.now() + 3000 * DAY,
    );
    await kubeApi("test").patch(
      `/api/v1/namespaces/${ns}/secrets/${mod}-tls`,
      [
        {
          op: "add",
          path: "/data",
          value: { ...tls.data, "tls.crt": b64(short.certPem), "tls.key": b64(short.keyPem) },
        },
      ],
      "json",
    );
    // The pods started on it (as after an earlier renewal).
    for (const d of [mod, `${mod}-watcher`]) {
      await kubeApi("test").patch(
        deployPath(d),
        { spec: { template: { metadata: { annotations: { [SERVING_ANNOTATION]: pairId(b64(short.certPem)) } } } } },
        "merge",
      );
    }
    seenPairs.set(pairId(b64(short.certPem)), short.certPem);
    await settle();
    const { api, writes } = counted();
    await keep(api, { ...cfg, orchestrator });
    expect(writes).toEqual([
      `patch /api/v1/namespaces/${ns}/secrets/${mod}-tls`,
      `patch ${deployPath(mod)}`,
      `patch ${deployPath(`${mod}-watcher`)}`,
    ]);
    const renewedB64 = (await secret(`${mod}-tls`)).data["tls.crt"] as string;
    const renewed = new X509Certificate(unb64(renewedB64));
    expect(Date.parse(renewed.validTo) - Date.now()).toBeGreaterThan(364 * DAY);
    // Waited for: every replica on the new pair.
    const d = await kubeRequest<Obj>("GET", deployPath(mod));
    expect(d.spec.template.metadata.annotations[SERVING_ANNOTATION]).toBe(pairId(renewedB64));
    expect([d.status.updatedReplicas, d.status.availableReplicas, d.status.replicas]).toEqual([2, 2, 2]);
  }, 180_000);

  it("a CA with under a year left is renewed by widen, swap, restart, narrow; the signing key never rewritten", async () => {
    // The installation as it would be nine years on: a CA with 300 days left, its pair in use.
    const oldCa = issueAdmissionCa(`${mod} admission CA`, 300, Date.now());
    const pair = issueServing(
      oldCa,
      `${mod} admission CA`,
      servingNames(mod, ns),
      200,
      Date.now(),
      Date.now() + 300 * DAY,
    );
    const t = kubeApi("test");
    const caSecret = await secret(`${mod}-ca`);
    await t.patch(
      `/api/v1/namespaces/${ns}/secrets/${mod}-ca`,
      [{ op: "add", path: "/data", value: { "ca.crt": b64(oldCa.certPem), "ca.key": b64(oldCa.keyPem) } }],
      "json",
    );
    const tls = await secret(`${mod}-tls`);
    await t.patch(
      `/api/v1/namespaces/${ns}/secrets/${mod}-tls`,
      [
        {
          op: "add",
          path: "/data",
          value: {
            ...tls.data,
            "tls.crt": b64(pair.certPem),
            "tls.key": b64(pair.keyPem),
            "ca.crt": b64(oldCa.certPem),
          },
        },
      ],
      "json",
    );
    for (const d of [mod, `${mod}-watcher`])
      await t.patch(
        deployPath(d),
        { spec: { template: { metadata: { annotations: { [SERVING_ANNOTATION]: pairId(b64(pair.certPem)) } } } } },
        "merge",
      );
    const hook = await kubeRequest<Obj>("GET", hookPath);
    await t.patch(
      hookPath,
      hook.webhooks.map((_: Obj, i: number) => ({
        op: "add",
        path: `/webhooks/${i}/clientConfig/caBundle`,
        value: b64(oldCa.certPem),
      })),
      "json",
    );
    seenPairs.set(pairId(b64(pair.certPem)), pair.certPem);
    await settle();
    expect(caSecret.data["ca.crt"]).not.toBe(b64(oldCa.certPem));

    const { api, writes } = counted();
    await keep(api, { ...cfg, orchestrator });
    expect(writes).toEqual([
      `patch /api/v1/namespaces/${ns}/secrets/${mod}-ca`,
      `patch ${hookPath}`, // widened: the old CA and the new
      `patch /api/v1/namespaces/${ns}/secrets/${mod}-tls`,
      `patch ${deployPath(mod)}`,
      `patch ${deployPath(`${mod}-watcher`)}`,
      `patch ${hookPath}`, // narrowed: the new CA alone
    ]);
    const newCa = unb64((await secret(`${mod}-ca`)).data["ca.crt"]);
    expect(Date.parse(new X509Certificate(newCa).validTo) - Date.now()).toBeGreaterThan(3649 * DAY);
    for (const w of (await kubeRequest<Obj>("GET", hookPath)).webhooks)
      expect(w.clientConfig.caBundle).toBe(b64(newCa));
    // And then nothing more to do; the signing key the first run made, untouched all along.
    expect(await keep(kubeApi("jr2-keeper"), { ...cfg, orchestrator })).toEqual([]);
    const now = await secret(SIGNING, sys);
    expect([now.data, now.metadata.resourceVersion]).toEqual([signing.data, signing.metadata.resourceVersion]);
  }, 180_000);

  it("a signing-key Secret without its key is never rewritten; a missing existingSecret is named with its fix", async () => {
    await kubeRequest("POST", `/api/v1/namespaces/${sys}/secrets`, {
      metadata: { name: "keyless" },
      data: { other: b64("x") },
    });
    await expect(
      keep(kubeApi("jr2-keeper"), { ...cfg, orchestrator: { namespace: sys, secret: "keyless", existing: false } }),
    ).rejects.toThrow(`Secret ${sys}/keyless exists without signing-key: the keeper never rewrites a signing key`);
    await expect(
      keep(kubeApi("jr2-keeper"), { ...cfg, orchestrator: { namespace: sys, secret: "team-jr2", existing: true } }),
    ).rejects.toThrow(
      `Secret ${sys}/team-jr2 (orchestrator.existingSecret) does not exist: create it with keys signing-key and api-tokens`,
    );
    expect((await secret("keyless", sys)).data).toEqual({ other: b64("x") });
  }, 60_000);
});
