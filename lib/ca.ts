// A self-signed CA for an installation's Custodians (decision 0021): Node makes the RSA key,
// node-forge builds and signs the certificate (decision 0019: Node has no certificate builder).
// And the intermediate it signs for one Sandbox's Custodian (decision 0037): a P-256 CA that may
// sign leaves for that Sandbox's bound hosts alone. Also what every certificate the project writes
// shares: its positive serial, the day's length. Pure apart from the randomness.
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, randomBytes } from "node:crypto";
import { isIP } from "node:net";
import forge from "node-forge";
import { certificate, keyIdentifiers, subjectOf } from "./x509";

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

const { asn1 } = forge;
const NAME_CONSTRAINTS = "2.5.29.30";

const dnsName = (host: string) => asn1.create(asn1.Class.CONTEXT_SPECIFIC, 2, false, host);
/** An iPAddress subtree: the address and its mask, as RFC 5280 4.2.1.10 writes a range. */
const ipRange = (address: string, bits: number) => {
  const bytes = (forge.util as unknown as { bytesFromIP(ip: string): string }).bytesFromIP(address);
  const mask = Buffer.alloc(bytes.length);
  for (let i = 0; i < bits; i++) mask[i >> 3]! |= 0x80 >> (i & 7);
  return asn1.create(asn1.Class.CONTEXT_SPECIFIC, 7, false, bytes + mask.toString("binary"));
};
const subtrees = (tag: number, names: forge.asn1.Asn1[]) =>
  asn1.create(
    asn1.Class.CONTEXT_SPECIFIC,
    tag,
    true,
    names.map((n) => asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [n])),
  );

/**
 * nameConstraints (RFC 5280 4.2.1.10), critical, for exactly `hosts`: each DNS name permitted and
 * its subdomains excluded (a leading dot: subdomains only), unless another of `hosts` is one of
 * them; each IP literal permitted as itself (/32, /128). A type with no host is excluded whole
 * (every address; the empty DNS name, which matches every name): an unconstrained type is open.
 * Throws on an empty list: no constraint is no limit.
 */
export function nameConstraintsFor(hosts: readonly string[]) {
  if (hosts.length === 0) throw new Error("an intermediate needs at least one host to be limited to");
  const dns = [...new Set(hosts.filter((h) => !isIP(h)).map((h) => h.toLowerCase()))];
  const ips = [...new Set(hosts.filter((h) => isIP(h)))];
  const permitted = [...dns.map(dnsName), ...ips.map((ip) => ipRange(ip, isIP(ip) === 4 ? 32 : 128))];
  const excluded = [
    ...dns.filter((h) => !dns.some((o) => o.endsWith(`.${h}`))).map((h) => dnsName(`.${h}`)),
    ...(dns.length ? [] : [dnsName("")]),
    ...(ips.length ? [] : [ipRange("0.0.0.0", 0), ipRange("::", 0)]),
  ];
  const value = asn1.create(asn1.Class.UNIVERSAL, asn1.Type.SEQUENCE, true, [
    subtrees(0, permitted),
    ...(excluded.length ? [subtrees(1, excluded)] : []),
  ]);
  return { id: NAME_CONSTRAINTS, critical: true, value };
}

export type IntermediateRequest = {
  /** Its subject's common name (at most 64 characters are kept). */
  name: string;
  /** What its leaves may name: DNS names and IP literals, at least one. */
  hosts: readonly string[];
  notBefore: number;
  notAfter: number;
  /** Its private key; a new P-256 key when absent. */
  key?: KeyObject;
  /** Hex; a random positive one when absent. */
  serial?: string;
};

/**
 * A CA `root` signs for one Sandbox's Custodian: basicConstraints CA:TRUE pathlen:0 and keyUsage
 * keyCertSign, both critical, and nameConstraints for `hosts` (nameConstraintsFor). Its key as
 * PKCS#8 PEM. With a given key and serial and an RSA root the bytes are the same every time.
 */
export function issueIntermediate(root: CaPem, req: IntermediateRequest): CaPem {
  const key = req.key ?? generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey;
  const publicKey = createPublicKey(key);
  const certPem = certificate({
    serial: req.serial ?? positiveSerial(),
    subject: req.name.slice(0, 64),
    issuer: subjectOf(root.certPem),
    extensions: [
      { name: "basicConstraints", cA: true, pathLenConstraint: 0, critical: true },
      { name: "keyUsage", keyCertSign: true, critical: true },
      nameConstraintsFor(req.hosts),
      ...keyIdentifiers(publicKey, root.certPem),
    ],
    publicKey,
    signer: createPrivateKey(root.keyPem),
    notBefore: new Date(req.notBefore),
    notAfter: new Date(req.notAfter),
  });
  return { certPem, keyPem: key.export({ type: "pkcs8", format: "pem" }).toString() };
}
