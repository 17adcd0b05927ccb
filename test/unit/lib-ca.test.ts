// The installation's CA (lib/ca.ts issueCa, decision 0021): a self-signed CA certificate valid for its
// days, with its key, that the Custodian's leaf issuer (custodian/leaf.ts) reads and signs with.
import { createPrivateKey, X509Certificate } from "node:crypto";
import forge from "node-forge";
import { issueCa } from "../../lib/ca";
import { LeafIssuer, readCa } from "../../custodian/leaf";

const DAY = 86_400_000;

describe("the installation's CA", () => {
  const now = Date.now();
  const ca = issueCa("jr2 installation CA", 30, now);
  const cert = new X509Certificate(ca.certPem);

  it("is a CA certificate", () => {
    expect(cert.ca).toBe(true);
  });

  it("is self-signed: issued by its own subject and verified by its own key", () => {
    expect(cert.subject).toBe("CN=jr2 installation CA");
    expect(cert.issuer).toBe(cert.subject);
    expect(cert.checkIssued(cert)).toBe(true);
    expect(cert.verify(cert.publicKey)).toBe(true);
  });

  it("is valid from a minute before it was made for the days asked", () => {
    // X.509 times are whole seconds.
    expect(Math.abs(Date.parse(cert.validFrom) - (now - 60_000))).toBeLessThan(1_000);
    expect(Math.abs(Date.parse(cert.validTo) - (now + 30 * DAY))).toBeLessThan(1_000);
  });

  it("is valid for ten years unless told", () => {
    const start = Date.now();
    const long = new X509Certificate(issueCa("jr2 default", undefined, start).certPem);
    expect(Math.abs(Date.parse(long.validTo) - (start + 3650 * DAY))).toBeLessThan(1_000);
  });

  it("says CA:TRUE and may sign certificates and revocation lists, both critical", () => {
    const parsed = forge.pki.certificateFromPem(ca.certPem);
    expect(parsed.getExtension("basicConstraints")).toMatchObject({ cA: true, critical: true });
    expect(parsed.getExtension("keyUsage")).toMatchObject({ keyCertSign: true, cRLSign: true, critical: true });
    expect(parsed.getExtension("subjectKeyIdentifier")).toBeTruthy();
  });

  it("has a positive serial: the first byte's top bit clear", () => {
    expect(cert.serialNumber).toMatch(/^[0-9A-F]+$/i);
    expect(parseInt(cert.serialNumber.padStart(32, "0").slice(0, 2), 16)).toBeLessThan(0x80);
  });

  it("comes with its own key, which the leaf issuer accepts", () => {
    expect(cert.checkPrivateKey(createPrivateKey(ca.keyPem))).toBe(true);
    expect(() => readCa(ca)).not.toThrow();
  });

  it("is told apart from another CA's key", () => {
    const other = issueCa("another CA", 1, now);
    expect(() => readCa({ certPem: ca.certPem, keyPem: other.keyPem })).toThrow(
      "the CA key is not the key of the CA certificate",
    );
  });

  it("gives each CA a fresh key and serial", () => {
    const other = new X509Certificate(issueCa("jr2 installation CA", 30, now).certPem);
    expect(other.serialNumber).not.toBe(cert.serialNumber);
    expect(other.fingerprint256).not.toBe(cert.fingerprint256);
  });

  it("signs the leaves a LeafIssuer built from it issues", () => {
    const issuer = new LeafIssuer(ca);
    expect(() => issuer.contextFor("api.anthropic.com")).not.toThrow();
    expect(() => issuer.contextFor("10.0.0.1")).not.toThrow();
  });
});
