import { X509Certificate } from "node:crypto";
import { localCertificate } from "../../dev/local-operator";

describe("the local runner's certificate", () => {
  const { caPem, certPem } = localCertificate();
  const ca = new X509Certificate(caPem);
  const cert = new X509Certificate(certPem);

  it("names 127.0.0.1 and localhost as SANs, which the API server checks (not the CN)", () => {
    expect(cert.subjectAltName).toContain("IP Address:127.0.0.1");
    expect(cert.subjectAltName).toContain("DNS:localhost");
  });

  it("is ECDSA P-256, cheap for the API server's many new connections (decision 0032)", () => {
    expect(cert.publicKey.asymmetricKeyType).toBe("ec");
    expect(ca.publicKey.asymmetricKeyType).toBe("ec");
  });

  it("is signed by the CA whose bundle goes into the webhook configurations", () => {
    expect(cert.checkIssued(ca)).toBe(true);
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(ca.ca).toBe(true);
    expect(cert.ca).toBe(false);
  });
});
