// The deployed webhook certificate made ECDSA (scripts/serving-tls.ts, decision 0032): Pepr's RSA
// pair and CA bundle swapped, as text, for a P-256 pair with the same names; once per build.
import { X509Certificate } from "node:crypto";
import forge from "node-forge";
import { parseAllDocuments } from "yaml";
import { applyTlsSwap, servingTlsSwap } from "../../scripts/serving-tls";

const uuid = "u-1";
const b64 = (s: string) => Buffer.from(s).toString("base64");

/** A build's TLS as Pepr writes it: an RSA CA and a serving certificate for the Service's name. */
function peprTls(dnsName: string) {
  const keys = forge.pki.rsa.generateKeyPair(1024);
  const cert = forge.pki.createCertificate();
  cert.publicKey = keys.publicKey;
  cert.serialNumber = "01";
  cert.validity.notBefore = new Date();
  cert.validity.notAfter = new Date(Date.now() + 86_400_000);
  cert.setSubject([{ name: "commonName", value: "ca" }]);
  cert.setIssuer([{ name: "commonName", value: "ca" }]);
  cert.setExtensions([{ name: "subjectAltName", altNames: [{ type: 2, value: dnsName }] }]);
  cert.sign(keys.privateKey, forge.md.sha256.create());
  return {
    crt: b64(forge.pki.certificateToPem(cert)),
    key: b64(forge.pki.privateKeyToPem(keys.privateKey)),
    ca: b64(forge.pki.certificateToPem(cert) + "\n"),
  };
}

const manifest = (t: { crt: string; key: string; ca: string }) => `apiVersion: v1
kind: Secret
metadata:
  name: pepr-${uuid}-tls
data:
  tls.crt: >-
    ${t.crt}
  tls.key: >-
    ${t.key}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: v
webhooks:
  - name: a
    clientConfig:
      caBundle: ${t.ca}
  - name: b
    clientConfig:
      caBundle: ${t.ca}
`;

describe("the deployed webhook certificate", () => {
  const tls = peprTls(`pepr-${uuid}.pepr-system.svc`);
  const built = manifest(tls);
  const swap = servingTlsSwap(built, uuid)!;
  const { text, replaced } = applyTlsSwap(built, swap);
  const docs = parseAllDocuments(text).map((d) => d.toJS());
  const secret = docs[0].data;
  const cert = new X509Certificate(Buffer.from(secret["tls.crt"], "base64"));

  it("replaces the Secret's pair and every webhook's CA bundle, nothing else", () => {
    expect(replaced).toBe(3);
    expect(text).not.toContain(tls.crt);
    expect(text).not.toContain(tls.key);
    expect(text).not.toContain(tls.ca);
    expect(text.replace(/: [A-Za-z0-9+/=]{100,}|\n {4}[A-Za-z0-9+/=]{100,}/g, "")).toBe(
      built.replace(/: [A-Za-z0-9+/=]{100,}|\n {4}[A-Za-z0-9+/=]{100,}/g, ""),
    );
  });

  it("makes a P-256 serving certificate for the build's DNS names, signed by the new CA bundle", () => {
    const bundles = docs[1].webhooks.map((w: { clientConfig: { caBundle: string } }) => w.clientConfig.caBundle);
    expect(new Set(bundles).size).toBe(1);
    const ca = new X509Certificate(Buffer.from(bundles[0], "base64"));
    expect(cert.publicKey.asymmetricKeyType).toBe("ec");
    expect(cert.subjectAltName).toBe(`DNS:pepr-${uuid}.pepr-system.svc`);
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(Buffer.from(secret["tls.key"], "base64").toString()).toContain("BEGIN PRIVATE KEY");
  });

  it("makes no second swap of a build swapped already", () => {
    expect(servingTlsSwap(text, uuid)).toBeNull();
  });

  it("refuses a build without the module's TLS Secret, naming it", () => {
    expect(() => servingTlsSwap(built.replace(`pepr-${uuid}-tls`, "other"), uuid)).toThrow(`pepr-${uuid}-tls`);
  });

  it("refuses webhooks that trust two different CAs", () => {
    const other = peprTls("x").ca;
    const two = built.replace(new RegExp(`caBundle: ${tls.ca.replace(/[+/=]/g, "\\$&")}\n$`), `caBundle: ${other}\n`);
    expect(() => servingTlsSwap(two, uuid)).toThrow(/2 CA bundles/);
  });
});
