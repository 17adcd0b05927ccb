// A Sandbox's Custodian CA on the real API server (decision 0037): the Kubernetes gateway writes
// it on the lease's renewal, owned by the Sandbox; renewing again within the period writes nothing
// (the same bytes); the next period's renewal replaces it in place with one that has days to run;
// a Sandbox with no bound host gets none.
import { K8s, kind } from "kubernetes-fluent-client";
import { randomBytes, X509Certificate } from "node:crypto";
import type { SandboxModel } from "../../api/crd";
import { issueCa } from "../../lib/ca";
import { custodianCa, CUSTODIAN_CA_PERIOD_MS, periodStart } from "../../orchestrator/workspaces/custodian-ca";
import { KubeSandboxGateway } from "../../orchestrator/workspaces/kube-gateway";
import { DEFAULT_POD_CONFIG, parsePodConfig } from "../../orchestrator/workspaces/pod-config";
import type { SandboxWatch } from "../../orchestrator/workspaces/sandbox-watch";
import { nameConstraintsOf } from "../support/certificates";
import { createSandbox, useNamespace } from "./support/cluster";

const ns = useNamespace("custodian-ca");
const root = issueCa("jr2 Custodian CA (integration)");
const signingKey = randomBytes(32);
const POD = parsePodConfig(
  JSON.stringify({
    custodian: {
      held: [{ secret: "model-keys", key: "k", origins: ["https://api.anthropic.com", "http://models.local:8080"] }],
    },
  }),
  "pod.json",
);

/** The one thing the gateway's renewal reads of the watch: the Sandbox, for its uid. */
const watchOf = (sandbox: SandboxModel) => ({ get: () => sandbox }) as unknown as SandboxWatch;

const secretOf = (name: string) => K8s(kind.Secret).InNamespace(ns.name).Get(`${name}-custodian-ca`);
const certOf = (s: kind.Secret) => Buffer.from(s.data!["tls.crt"]!, "base64").toString();

describe("the Custodian CA on the lease's renewal", () => {
  it("is written owned by the Sandbox, kept through the period, and replaced in place by the next", async () => {
    const sandbox = await createSandbox(ns.name, "ca-rotates");
    let now = Date.now();
    const gateway = new KubeSandboxGateway({
      namespace: ns.name,
      watch: watchOf(sandbox),
      signingKey,
      pod: { config: POD, custodianImage: "jr2/companions:test", orchestratorUrl: "http://127.0.0.1:1" },
      custodianRoot: root,
      now: () => now,
    });

    await gateway.renew("ca-rotates");
    const first = await secretOf("ca-rotates");
    expect(first.type).toBe("kubernetes.io/tls");
    expect(first.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: "Sandbox", name: "ca-rotates", uid: sandbox.metadata!.uid, controller: true }),
    ]);
    expect(certOf(first)).toBe(
      custodianCa({ root, signingKey, sandbox: "ca-rotates", hosts: ["api.anthropic.com"], now }).certPem,
    );
    expect(nameConstraintsOf(certOf(first))?.permitted).toEqual(["DNS:api.anthropic.com"]);

    // Later in the same period: nothing to write, and a second gateway (a restart) writes the same bytes.
    now = periodStart("ca-rotates", now) + CUSTODIAN_CA_PERIOD_MS - 60_000;
    await gateway.renew("ca-rotates");
    await new KubeSandboxGateway({ ...gateway.opts }).renew("ca-rotates");
    expect((await secretOf("ca-rotates")).metadata?.resourceVersion).toBe(first.metadata?.resourceVersion);

    // The next period: the same Secret, a new intermediate with at least 2 days ahead of it.
    now += 120_000;
    await gateway.renew("ca-rotates");
    const next = await secretOf("ca-rotates");
    expect(next.metadata?.uid).toBe(first.metadata?.uid);
    const cert = new X509Certificate(certOf(next));
    expect(cert.serialNumber).not.toBe(new X509Certificate(certOf(first)).serialNumber);
    expect(Date.parse(cert.validTo) - now).toBeGreaterThan(2 * 86_400_000);
    expect(Date.parse(cert.validFrom)).toBeLessThanOrEqual(now);
  });

  it("is not written for a Sandbox with no bound host", async () => {
    const sandbox = await createSandbox(ns.name, "ca-none");
    const gateway = new KubeSandboxGateway({
      namespace: ns.name,
      watch: watchOf(sandbox),
      signingKey,
      pod: { config: DEFAULT_POD_CONFIG, custodianImage: "jr2/companions:test", orchestratorUrl: "http://127.0.0.1:1" },
      custodianRoot: root,
    });
    await gateway.renew("ca-none");
    await expect(secretOf("ca-none")).rejects.toMatchObject({ status: 404 });
  });
});
