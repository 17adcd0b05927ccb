// The local operator's own identity (dev/operator-identity.ts, decision 0029): a client certificate
// from the cluster's CA naming the deployed service account, kept while the CA stays the same, and
// the kubeconfig as given where no CA key is at hand. Real files, a real CA made here.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import forge from "node-forge";
import { parse, stringify } from "yaml";
import { operatorKubeconfig } from "../../dev/operator-identity";

const USER = "system:serviceaccount:pepr-system:pepr-x";

/** A CA (ca.crt, ca.key) in `dir` and a kubeconfig naming it, as the local control plane writes them. */
function cluster(dir: string, withKey = true) {
  const keys = forge.pki.rsa.generateKeyPair(1024);
  const ca = forge.pki.createCertificate();
  ca.publicKey = keys.publicKey;
  ca.serialNumber = "01";
  ca.validity.notBefore = new Date();
  ca.validity.notAfter = new Date(Date.now() + 86_400_000);
  ca.setSubject([{ name: "commonName", value: "test-ca" }]);
  ca.setIssuer([{ name: "commonName", value: "test-ca" }]);
  ca.setExtensions([{ name: "basicConstraints", cA: true }]);
  ca.sign(keys.privateKey, forge.md.sha256.create());
  writeFileSync(join(dir, "ca.crt"), forge.pki.certificateToPem(ca));
  if (withKey) writeFileSync(join(dir, "ca.key"), forge.pki.privateKeyToPem(keys.privateKey));
  const kubeconfig = join(dir, "kubeconfig.yaml");
  writeFileSync(
    kubeconfig,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "c", cluster: { server: "https://127.0.0.1:6443", "certificate-authority": join(dir, "ca.crt") } },
      ],
      users: [{ name: "u", user: { "client-certificate": "admin.crt", "client-key": "admin.key" } }],
      contexts: [{ name: "x", context: { cluster: "c", user: "u" } }],
      "current-context": "x",
    }),
  );
  return { kubeconfig, ca };
}

const clientCert = (file: string) => {
  const config = parse(readFileSync(file, "utf8"));
  const pem = Buffer.from(config.users[0].user["client-certificate-data"], "base64").toString();
  return { pem, cert: forge.pki.certificateFromPem(pem), server: config.clusters[0].cluster.server };
};

describe("operatorKubeconfig", () => {
  it("issues a client certificate from the cluster's CA naming the service account, in system:masters", () => {
    const dir = mkdtempSync(join(tmpdir(), "jr2-identity-"));
    const { kubeconfig, ca } = cluster(dir);
    const file = operatorKubeconfig(kubeconfig, dir, USER);
    expect(file).not.toBe(kubeconfig);
    const { cert, server } = clientCert(file);
    expect(server).toBe("https://127.0.0.1:6443");
    expect(cert.subject.getField("CN").value).toBe(USER);
    expect(cert.subject.getField("O").value).toBe("system:masters");
    expect(ca.verify(cert)).toBe(true);
    // A positive DER integer: Go's x509, in the API server, refuses a negative serial number. Each
    // serial is new, so several are issued: a random one is negative half the time.
    const serials = [
      cert,
      ...[1, 2, 3].map(() => clientCert(operatorKubeconfig(kubeconfig, mkdtempSync(join(dir, "s-")), USER)).cert),
    ];
    for (const c of serials) expect(Number.parseInt(c.serialNumber.slice(0, 2), 16)).toBeLessThan(0x80);
  });

  it("keeps the certificate while the CA is the same, and issues a new one for a new CA", () => {
    const dir = mkdtempSync(join(tmpdir(), "jr2-identity-"));
    const { kubeconfig } = cluster(dir);
    const first = clientCert(operatorKubeconfig(kubeconfig, dir, USER)).pem;
    expect(clientCert(operatorKubeconfig(kubeconfig, dir, USER)).pem).toBe(first);
    const { ca } = cluster(dir); // the cluster made again: a new CA in the same place
    const renewed = clientCert(operatorKubeconfig(kubeconfig, dir, USER));
    expect(renewed.pem).not.toBe(first);
    expect(ca.verify(renewed.cert)).toBe(true);
  });

  it("reads a relative CA path from the kubeconfig's own directory, as kubectl does", () => {
    const dir = mkdtempSync(join(tmpdir(), "jr2-identity-"));
    const { kubeconfig, ca } = cluster(dir);
    const config = parse(readFileSync(kubeconfig, "utf8"));
    config.clusters[0].cluster["certificate-authority"] = "ca.crt";
    writeFileSync(kubeconfig, stringify(config));
    const file = operatorKubeconfig(kubeconfig, mkdtempSync(join(dir, "state-")), USER);
    expect(file).not.toBe(kubeconfig);
    expect(ca.verify(clientCert(file).cert)).toBe(true);
  });

  it("returns the kubeconfig as given when the CA's key is not at hand (another cluster)", () => {
    const dir = mkdtempSync(join(tmpdir(), "jr2-identity-"));
    const { kubeconfig } = cluster(dir, false);
    expect(operatorKubeconfig(kubeconfig, dir, USER)).toBe(kubeconfig);
  });
});
