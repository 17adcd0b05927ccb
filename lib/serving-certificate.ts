// The webhook server's certificates (decision 0032): a throwaway CA and a serving certificate,
// both ECDSA P-256. In a burst the API server opens a new TLS connection for most reviews (it
// keeps few idle ones), and each full handshake signs once with the server's key on the module's
// one event loop: about 0.9 ms with RSA-2048, 0.03 ms with P-256.
// Node makes the keys and signs; node-forge writes the certificate's fields (lib/x509.ts, decision
// 0019), since Node cannot write a certificate and forge signs with RSA only. Pure apart from the
// randomness.
import { generateKeyPairSync } from "node:crypto";
import { DAY, positiveSerial } from "./ca";
import { certificate, keyIdentifiers, subjectKeyIdentifier } from "./x509";

export type ServingCertificate = { caPem: string; certPem: string; keyPem: string };

/** Who the serving certificate is for (subjectAltName): DNS names and IP addresses. */
export type ServingNames = { dnsNames: string[]; ips?: string[] };

/**
 * A CA and a serving certificate it signed for `names`, valid from a minute ago for `days`; the
 * serving certificate's key as PKCS#8 PEM. The CA's key is not kept: nothing else is ever signed.
 */
export function servingCertificate(names: ServingNames, days = 365, now = Date.now()): ServingCertificate {
  const ca = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const leaf = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const notBefore = new Date(now - 60_000);
  const notAfter = new Date(now + days * DAY);
  const subject = names.dnsNames[0] ?? names.ips?.[0] ?? "jr2-operator";
  const caName = `${subject} CA`;
  const caPem = certificate({
    serial: positiveSerial(),
    subject: caName,
    issuer: caName,
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
      subjectKeyIdentifier(ca.publicKey),
    ],
    publicKey: ca.publicKey,
    signer: ca.privateKey,
    notBefore,
    notAfter,
  });
  const certPem = certificate({
    serial: positiveSerial(),
    subject,
    issuer: caName,
    extensions: [
      { name: "basicConstraints", cA: false, critical: true },
      { name: "keyUsage", digitalSignature: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      {
        name: "subjectAltName",
        altNames: [
          ...names.dnsNames.map((value) => ({ type: 2, value })),
          ...(names.ips ?? []).map((ip) => ({ type: 7, ip })),
        ],
      },
      // Key identifiers: every CA of one name has the same subject, so while a caBundle holds the
      // old CA and the new (scripts/renew-webhook-certificate.ts) they tell a verifier which signed.
      ...keyIdentifiers(leaf.publicKey, caPem),
    ],
    publicKey: leaf.publicKey,
    signer: ca.privateKey,
    notBefore,
    notAfter,
  });
  const keyPem = leaf.privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  return { caPem, certPem, keyPem };
}
