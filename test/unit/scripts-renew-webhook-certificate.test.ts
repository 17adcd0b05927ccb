// The webhook certificate renewed without a release (scripts/renew-webhook-certificate.ts): the
// bundle arithmetic, then the whole renewal against a cluster played in memory, checking after every
// write that each certificate a module pod serves chains to every webhook's caBundle (no admission
// call refused on the way), and a real TLS handshake trusting a widened bundle.
import { createPrivateKey, X509Certificate } from "node:crypto";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { servingCertificate, type ServingCertificate } from "../../lib/serving-certificate";
import {
  MODULE,
  caBundlePatch,
  pemCertificates,
  renewWebhookCertificate,
  servingNamesOf,
  widenedBundle,
  type Kubectl,
} from "../../scripts/renew-webhook-certificate";

const DNS = `${MODULE}.pepr-system.svc`;
const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");
const unb64 = (s: string) => Buffer.from(s, "base64").toString("utf8");
const DAY = 86_400_000;

describe("the bundle arithmetic", () => {
  const old = servingCertificate({ dnsNames: [DNS] });
  const fresh = servingCertificate({ dnsNames: [DNS] });

  it("trusts the new CA beside the old one, whatever the old one's line ends", () => {
    const crlf = b64(old.caPem.replace(/\n/g, "\r\n"));
    const widened = pemCertificates(unb64(widenedBundle(crlf, fresh.caPem)));
    expect(widened).toEqual([...pemCertificates(old.caPem), ...pemCertificates(fresh.caPem)]);
  });

  it("drops a CA already ended and does not add the new one twice", () => {
    const ended = servingCertificate({ dnsNames: [DNS] }, 1, Date.now() - 10 * DAY);
    const current = b64(ended.caPem + old.caPem + fresh.caPem);
    expect(pemCertificates(unb64(widenedBundle(current, fresh.caPem)))).toEqual(
      pemCertificates(old.caPem + fresh.caPem),
    );
  });

  it("patches every webhook that has a clientConfig", () => {
    const config = { webhooks: [{ clientConfig: { caBundle: "a" } }, {}, { clientConfig: {} }] };
    expect(caBundlePatch(config, "b")).toEqual([
      { op: "add", path: "/webhooks/0/clientConfig/caBundle", value: "b" },
      { op: "add", path: "/webhooks/2/clientConfig/caBundle", value: "b" },
    ]);
  });

  it("reads the DNS names the certificate in use is for", () => {
    expect(servingNamesOf(b64(old.certPem))).toEqual([DNS]);
    const ipOnly = servingCertificate({ dnsNames: [], ips: ["127.0.0.1"] });
    expect(() => servingNamesOf(b64(ipOnly.certPem))).toThrow("names no DNS name");
  });
});

/** Whether `certPem` chains to one of the CAs in the base64 bundle (signed by it, and in its time). */
function trusted(certPem: string, bundleB64: string): boolean {
  const cert = new X509Certificate(certPem);
  return pemCertificates(unb64(bundleB64)).some((pem) => {
    const ca = new X509Certificate(pem);
    return cert.checkIssued(ca) && cert.verify(ca.publicKey) && Date.parse(cert.validTo) > Date.now();
  });
}

/** The module's part of a cluster, in memory: its TLS Secret, its one validating configuration of
 * three webhooks, and the certificates its pods serve (what they read when they last started). */
function cluster(initial: ServingCertificate) {
  const state = {
    secret: {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: `${MODULE}-tls`, resourceVersion: "1" },
      data: { "tls.crt": b64(initial.certPem), "tls.key": b64(initial.keyPem) },
    },
    config: { webhooks: [0, 1, 2].map(() => ({ clientConfig: { caBundle: b64(initial.caPem) } })) },
    served: [initial.certPem],
    calls: [] as string[],
  };
  /** Every served certificate trusted by every webhook: checked after each write. */
  const check = () => {
    for (const w of state.config.webhooks)
      for (const pem of state.served)
        if (!trusted(pem, w.clientConfig.caBundle))
          throw new Error(`after ${state.calls.at(-1)}: a pod is not trusted`);
  };
  const kubectl: Kubectl = async (args, input) => {
    state.calls.push(args.slice(0, 3).join(" "));
    const [verb, kind] = args;
    if (verb === "get" && kind === "secret") return JSON.stringify(state.secret);
    if (verb === "get" && kind === "validatingwebhookconfiguration") return JSON.stringify(state.config);
    if (verb === "get") return "";
    // The key never on a command line: the Secret comes on stdin.
    expect(args.join(" ")).not.toContain(b64("-----BEGIN PRIVATE KEY").slice(0, 20));
    if (verb === "replace") {
      const secret = JSON.parse(input!) as typeof state.secret;
      // The Secret as read (its resourceVersion a precondition), its pair replaced.
      expect([secret.kind, secret.metadata]).toEqual(["Secret", { name: `${MODULE}-tls`, resourceVersion: "1" }]);
      state.secret = secret;
    } else if (verb === "patch") {
      for (const op of JSON.parse(args[args.indexOf("-p") + 1]!) as Array<{ path: string; value: string }>) {
        const i = Number(op.path.split("/")[2]);
        state.config.webhooks[i]!.clientConfig.caBundle = op.value;
      }
    } else if (verb === "rollout" && kind === "restart") {
      // A rollout: old pods still serve while new ones, reading the Secret, start.
      state.served = [...state.served, unb64(state.secret.data["tls.crt"])];
    } else if (verb === "rollout" && kind === "status") {
      state.served = [unb64(state.secret.data["tls.crt"])];
    }
    check();
    return "";
  };
  return { state, kubectl };
}

describe("renewWebhookCertificate", () => {
  it("moves the webhooks and the pods to a new certificate with every pod trusted at every step", async () => {
    const initial = servingCertificate({ dnsNames: [DNS] }, 365, Date.now() - 350 * DAY);
    const { state, kubectl } = cluster(initial);
    const said: string[] = [];
    const end = await renewWebhookCertificate({ kubectl, days: 30, say: (l) => said.push(l) });

    const cert = new X509Certificate(unb64(state.secret.data["tls.crt"]));
    expect(cert.subjectAltName).toBe(`DNS:${DNS}`);
    expect(Math.round((end.getTime() - Date.now()) / DAY)).toBe(30);
    expect(cert.checkPrivateKey(createPrivateKey(unb64(state.secret.data["tls.key"])))).toBe(true);
    expect(state.served).toEqual([unb64(state.secret.data["tls.crt"])]);
    // The bundles end trusting the new CA alone, and the old certificate is no longer trusted.
    for (const w of state.config.webhooks) {
      expect(pemCertificates(unb64(w.clientConfig.caBundle))).toHaveLength(1);
      expect(trusted(initial.certPem, w.clientConfig.caBundle)).toBe(false);
    }
    expect(state.calls).toEqual([
      `get secret ${MODULE}-tls`,
      `get validatingwebhookconfiguration ${MODULE}`,
      `get mutatingwebhookconfiguration ${MODULE}`,
      `patch validatingwebhookconfiguration ${MODULE}`,
      "replace -f -",
      "rollout restart -n",
      "rollout restart -n",
      "rollout status -n",
      "rollout status -n",
      `patch validatingwebhookconfiguration ${MODULE}`,
    ]);
    expect(said).toHaveLength(4);
    expect(said.join("\n")).not.toContain("PRIVATE KEY");
  });

  it("restarting before the bundle trusted the new CA is what the check catches", async () => {
    // The order is the point: the same cluster, the Secret replaced and the pods restarted with the
    // bundles untouched, leaves a pod no webhook trusts.
    const { state, kubectl } = cluster(servingCertificate({ dnsNames: [DNS] }));
    const next = servingCertificate({ dnsNames: [DNS] });
    await kubectl(
      ["replace", "-f", "-"],
      JSON.stringify({ ...state.secret, data: { "tls.crt": b64(next.certPem), "tls.key": b64(next.keyPem) } }),
    );
    await expect(kubectl(["rollout", "restart", "-n", "pepr-system"])).rejects.toThrow("a pod is not trusted");
    expect(state.served).toHaveLength(2);
  });

  it("says what is missing when the module is not installed there", async () => {
    await expect(renewWebhookCertificate({ kubectl: async () => "{}" })).rejects.toThrow(
      `Secret pepr-system/${MODULE}-tls has no tls.crt`,
    );
  });
});

describe("a widened bundle over real TLS", () => {
  it("lets a client reach a server on the old certificate and one on the new", async () => {
    const old = servingCertificate({ dnsNames: ["localhost"] });
    const fresh = servingCertificate({ dnsNames: ["localhost"] });
    const ca = unb64(widenedBundle(b64(old.caPem), fresh.caPem));
    for (const pair of [old, fresh]) {
      const server = https.createServer({ cert: pair.certPem, key: pair.keyPem }, (_req, res) => res.end("ok"));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      const port = (server.address() as AddressInfo).port;
      try {
        const body = await new Promise<string>((resolve, reject) => {
          https
            .get({ host: "127.0.0.1", servername: "localhost", port, ca, agent: false }, (res) => {
              let text = "";
              res.on("data", (c: Buffer) => (text += c.toString()));
              res.on("end", () => resolve(text));
            })
            .on("error", reject);
        });
        expect(body).toBe("ok");
      } finally {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      }
    }
  });
});
