// What the keeper issues (decision 0075): the installation's admission CA, kept in a Secret so a
// serving pair renews under the same CA (no caBundle change), and the serving pair it signs.
// ECDSA P-256 both, as the build's were (decision 0032: a handshake signs on the module's one event
// loop). Pure apart from the randomness.
import { createPrivateKey, generateKeyPairSync } from "node:crypto";
import { DAY, positiveSerial } from "../lib/ca";
import { certificate, keyIdentifiers, subjectKeyIdentifier } from "../lib/x509";

export type Pair = { certPem: string; keyPem: string };

const pkcs8 = (k: ReturnType<typeof generateKeyPairSync>["privateKey"]) =>
  k.export({ type: "pkcs8", format: "pem" }).toString();

/** A self-signed CA named `name`, valid from a minute ago for `days`. */
export function issueAdmissionCa(name: string, days: number, now: number): Pair {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const certPem = certificate({
    serial: positiveSerial(),
    subject: name,
    issuer: name,
    extensions: [
      { name: "basicConstraints", cA: true, pathLenConstraint: 0, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
      subjectKeyIdentifier(publicKey),
    ],
    publicKey,
    signer: privateKey,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + days * DAY),
  });
  return { certPem, keyPem: pkcs8(privateKey) };
}

/** A serving pair `ca` signs for `dnsNames` (the first its subject), valid from a minute ago for `days`,
 * and never past the CA's own end. */
export function issueServing(ca: Pair, caName: string, dnsNames: string[], days: number, now: number, caEnd: number) {
  const { publicKey, privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const certPem = certificate({
    serial: positiveSerial(),
    subject: dnsNames[0]!,
    issuer: caName,
    extensions: [
      { name: "basicConstraints", cA: false, critical: true },
      { name: "keyUsage", digitalSignature: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: dnsNames.map((value) => ({ type: 2, value })) },
      ...keyIdentifiers(publicKey, ca.certPem),
    ],
    publicKey,
    signer: createPrivateKey(ca.keyPem),
    notBefore: new Date(now - 60_000),
    notAfter: new Date(Math.min(now + days * DAY, caEnd)),
  });
  return { certPem, keyPem: pkcs8(privateKey) };
}
