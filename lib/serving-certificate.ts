// The webhook server's certificates (decision 0032): a throwaway CA and a serving certificate,
// both ECDSA P-256. In a burst the API server opens a new TLS connection for most reviews (it
// keeps few idle ones), and each full handshake signs once with the server's key on the module's
// one event loop: about 0.9 ms with RSA-2048, 0.03 ms with P-256.
// Node makes the keys and signs; node-forge writes the certificate's fields (decision 0019), since
// Node cannot write a certificate and forge signs with RSA only. Pure apart from the randomness.
import { generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import forge from "node-forge";
import { DAY, positiveSerial } from "./ca";

export type ServingCertificate = { caPem: string; certPem: string; keyPem: string };

/** Who the serving certificate is for (subjectAltName): DNS names and IP addresses. */
export type ServingNames = { dnsNames: string[]; ips?: string[] };

const ECDSA_WITH_SHA256 = "1.2.840.10045.4.3.2";
const { asn1 } = forge;
/** forge's TBSCertificate writer, which its type declarations leave out. */
const tbsOf = (cert: forge.pki.Certificate) =>
  (forge.pki as unknown as { getTBSCertificate(c: forge.pki.Certificate): forge.asn1.Asn1 }).getTBSCertificate(cert);

/** ecdsa-with-SHA256, its parameters absent (RFC 5758 3.2), where forge would write NULL. */
const ecdsaWithSha256 = () =>
  asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OID, false, asn1.oidToDer(ECDSA_WITH_SHA256).getBytes()),
  ]);

type Fields = {
  subject: string;
  issuer: string;
  extensions: object[];
  publicKey: KeyObject;
  signer: KeyObject;
  notBefore: Date;
  notAfter: Date;
};

/** One certificate, PEM: forge lays out the fields, the EC key goes in as DER, Node signs. */
function certificate(f: Fields): string {
  const cert = forge.pki.createCertificate();
  cert.serialNumber = positiveSerial();
  cert.validity.notBefore = f.notBefore;
  cert.validity.notAfter = f.notAfter;
  cert.setSubject([{ name: "commonName", value: f.subject }]);
  cert.setIssuer([{ name: "commonName", value: f.issuer }]);
  cert.setExtensions(f.extensions);
  // forge writes only RSA keys: a stand-in here, replaced below by the EC key's own DER.
  cert.publicKey = forge.pki.setRsaPublicKey(new forge.jsbn.BigInteger("3"), new forge.jsbn.BigInteger("3"));
  cert.siginfo.algorithmOid = ECDSA_WITH_SHA256;
  const tbs = tbsOf(cert);
  const fields = tbs.value as forge.asn1.Asn1[];
  // TBSCertificate: version, serial, signature, issuer, validity, subject, subjectPublicKeyInfo, ...
  fields[2] = ecdsaWithSha256();
  const spki = f.publicKey.export({ type: "spki", format: "der" });
  fields[6] = asn1.fromDer(spki.toString("binary"));
  const tbsDer = Buffer.from(asn1.toDer(tbs).getBytes(), "binary");
  const signature = sign("sha256", tbsDer, f.signer);
  const signed = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    tbs,
    ecdsaWithSha256(),
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.BITSTRING, false, "\0" + signature.toString("binary")),
  ]);
  return forge.pem.encode({ type: "CERTIFICATE", body: asn1.toDer(signed).getBytes() });
}

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
    subject: caName,
    issuer: caName,
    extensions: [
      { name: "basicConstraints", cA: true, critical: true },
      { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    ],
    publicKey: ca.publicKey,
    signer: ca.privateKey,
    notBefore,
    notAfter,
  });
  const certPem = certificate({
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
    ],
    publicKey: leaf.publicKey,
    signer: ca.privateKey,
    notBefore,
    notAfter,
  });
  const keyPem = leaf.privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  return { caPem, certPem, keyPem };
}
