// One X.509 certificate, written where Node cannot (decision 0019): forge lays out the fields, the
// subject's key goes in as Node's own DER (RSA or EC alike), and Node signs with the issuer's key,
// sha256WithRSAEncryption or ecdsa-with-SHA256 with absent parameters (decision 0032). Also what a
// chain is built from: a certificate's subject as encoded there, and a key's identifier.
// Pure apart from the randomness of an ECDSA signature.
import { createHash, type KeyObject, sign } from "node:crypto";
import forge from "node-forge";

const { asn1 } = forge;
type Asn1 = forge.asn1.Asn1;

/** A name: a common name alone, or a Name as another certificate encodes it (copied byte for byte). */
export type CertName = string | Asn1;

export type CertificateFields = {
  /** Hex, positive (lib/ca.ts positiveSerial). */
  serial: string;
  subject: CertName;
  issuer: CertName;
  /** forge's extension objects: by name, or `{ id, critical, value }` with the value as ASN.1. */
  extensions: object[];
  publicKey: KeyObject;
  /** The issuer's private key, RSA or EC. */
  signer: KeyObject;
  notBefore: Date;
  notAfter: Date;
};

const SIGNATURE_OID: Record<string, string> = {
  rsa: "1.2.840.113549.1.1.11", // sha256WithRSAEncryption, parameters NULL (RFC 4055)
  ec: "1.2.840.10045.4.3.2", // ecdsa-with-SHA256, parameters absent (RFC 5758 3.2)
};

/** forge's TBSCertificate writer, which its type declarations leave out. */
const tbsOf = (cert: forge.pki.Certificate) =>
  (forge.pki as unknown as { getTBSCertificate(c: forge.pki.Certificate): Asn1 }).getTBSCertificate(cert);

function signatureOid(signer: KeyObject): string {
  const oid = SIGNATURE_OID[signer.asymmetricKeyType ?? ""];
  if (!oid) throw new Error(`a ${signer.asymmetricKeyType} key cannot sign a certificate here (RSA or EC only)`);
  return oid;
}

function signatureAlgorithm(signer: KeyObject): Asn1 {
  const oid = signatureOid(signer);
  const id = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OID, false, asn1.oidToDer(oid).getBytes());
  const params =
    signer.asymmetricKeyType === "rsa" ? [asn1.create(asn1.Class.UNIVERSAL, asn1.Type.NULL, false, "")] : [];
  return asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [id, ...params]);
}

const commonName = (name: CertName) => [{ name: "commonName", value: typeof name === "string" ? name : "-" }];

/** One certificate, PEM. */
export function certificate(f: CertificateFields): string {
  const cert = forge.pki.createCertificate();
  cert.serialNumber = f.serial;
  cert.validity.notBefore = f.notBefore;
  cert.validity.notAfter = f.notAfter;
  cert.setSubject(commonName(f.subject));
  cert.setIssuer(commonName(f.issuer));
  cert.setExtensions(f.extensions);
  // forge writes only RSA keys: a stand-in here, replaced below by the key's own DER.
  cert.publicKey = forge.pki.setRsaPublicKey(new forge.jsbn.BigInteger("3"), new forge.jsbn.BigInteger("3"));
  cert.siginfo.algorithmOid = signatureOid(f.signer);
  const tbs = tbsOf(cert);
  const fields = tbs.value as Asn1[];
  // TBSCertificate: version, serial, signature, issuer, validity, subject, subjectPublicKeyInfo, ...
  fields[2] = signatureAlgorithm(f.signer);
  if (typeof f.issuer !== "string") fields[3] = f.issuer;
  if (typeof f.subject !== "string") fields[5] = f.subject;
  fields[6] = asn1.fromDer(f.publicKey.export({ type: "spki", format: "der" }).toString("binary"));
  const tbsDer = Buffer.from(asn1.toDer(tbs).getBytes(), "binary");
  const signature = sign("sha256", tbsDer, f.signer);
  const signed = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    tbs,
    signatureAlgorithm(f.signer),
    asn1.create(asn1.Class.UNIVERSAL, asn1.Type.BITSTRING, false, "\0" + signature.toString("binary")),
  ]);
  return forge.pem.encode({ type: "CERTIFICATE", body: asn1.toDer(signed).getBytes() });
}

/** The TBSCertificate of a PEM certificate, and where its fields start (after the optional version). */
function tbsFields(certPem: string): { fields: Asn1[]; at: number } {
  const der = forge.pem.decode(certPem).find((m) => m.type === "CERTIFICATE")?.body;
  if (der === undefined) throw new Error("not a PEM certificate");
  const fields = ((asn1.fromDer(der).value as Asn1[])[0]!.value as Asn1[]) ?? [];
  return { fields, at: fields[0]?.tagClass === asn1.Class.CONTEXT_SPECIFIC ? 1 : 0 };
}

/** A certificate's subject, as encoded there: what a certificate it issues names as its issuer. */
export function subjectOf(certPem: string): Asn1 {
  const { fields, at } = tbsFields(certPem);
  // serial, signature, issuer, validity, subject
  return fields[at + 4]!;
}

/** A key's identifier (RFC 5280 4.2.1.2, method 1): SHA-1 of its subjectPublicKey bits, as forge's bytes. */
export function keyIdentifier(publicKey: KeyObject): string {
  const spki = asn1.fromDer(publicKey.export({ type: "spki", format: "der" }).toString("binary"));
  const bits = (spki.value as Asn1[])[1]!.value as string; // the BIT STRING: unused-bits byte, then the key
  return createHash("sha1")
    .update(Buffer.from(bits.slice(1), "binary"))
    .digest()
    .toString("binary");
}

/** A certificate's subjectKeyIdentifier as it states it, or undefined. */
function statedKeyIdentifier(certPem: string): string | undefined {
  const { fields } = tbsFields(certPem);
  const tagged = fields.find((f) => f.tagClass === asn1.Class.CONTEXT_SPECIFIC && f.type === 3);
  const extensions = ((tagged?.value as Asn1[] | undefined)?.[0]?.value as Asn1[] | undefined) ?? [];
  for (const ext of extensions) {
    const [id, ...rest] = ext.value as Asn1[];
    if (asn1.derToOid(forge.util.createBuffer(id!.value as string)) !== SUBJECT_KEY_IDENTIFIER) continue;
    return asn1.fromDer(rest.at(-1)!.value as string).value as string;
  }
  return undefined;
}

const SUBJECT_KEY_IDENTIFIER = "2.5.29.14";

/**
 * subjectKeyIdentifier of `subject`, and authorityKeyIdentifier naming the identifier the issuer's
 * certificate states (left out when it states none: a mismatched one would break the chain).
 */
export function keyIdentifiers(subject: KeyObject, issuerPem: string): object[] {
  const authority = statedKeyIdentifier(issuerPem);
  return [
    subjectKeyIdentifier(subject),
    ...(authority !== undefined ? [{ name: "authorityKeyIdentifier", keyIdentifier: authority }] : []),
  ];
}

/** subjectKeyIdentifier of `subject` alone: a self-signed CA's. */
export const subjectKeyIdentifier = (subject: KeyObject): object => ({
  name: "subjectKeyIdentifier",
  value: asn1.create(asn1.Class.UNIVERSAL, asn1.Type.OCTETSTRING, false, keyIdentifier(subject)),
});
