// A self-signed CA for an installation's Custodians (decision 0021): Node makes the RSA key,
// node-forge builds and signs the certificate (decision 0019: Node has no certificate builder).
// Also what every certificate the project writes shares: its positive serial, the day's length.
// Pure apart from the randomness.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import forge from "node-forge";

export type CaPem = { certPem: string; keyPem: string };

export const DAY = 86_400_000;

/** A certificate serial, hex: 16 random bytes, the first byte's top bit clear so it is positive. */
export function positiveSerial(): string {
  const serial = randomBytes(16);
  serial[0]! &= 0x7f;
  return serial.toString("hex");
}

/** A CA certificate (basicConstraints CA:TRUE, keyCertSign) valid from a minute ago for `days`. */
export function issueCa(commonName: string, days = 3650, now = Date.now()): CaPem {
  const pair = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const keyPem = pair.privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(pair.publicKey.export({ type: "spki", format: "pem" }).toString());
  cert.serialNumber = positiveSerial();
  cert.validity.notBefore = new Date(now - 60_000);
  cert.validity.notAfter = new Date(now + days * DAY);
  const subject = [{ name: "commonName", value: commonName }];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: "basicConstraints", cA: true, critical: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    { name: "subjectKeyIdentifier" },
  ]);
  cert.sign(forge.pki.privateKeyFromPem(keyPem) as forge.pki.rsa.PrivateKey, forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem };
}
