// Leaf certificates for the hosts the proxy intercepts (decision 0018), signed by the
// installation's CA (its certificate and RSA key mounted from a Secret; the Harness trusts the
// certificate alone). One key pair per process, made by Node; node-forge builds and signs each
// certificate (decision 0019). Leaves are cached per host and made again a day before they end.
import { generateKeyPairSync, X509Certificate } from "node:crypto";
import { isIP } from "node:net";
import { createSecureContext, type SecureContext } from "node:tls";
import forge from "node-forge";
import { positiveSerial } from "../lib/ca";

const HOUR = 3_600_000;
const LEAF_LIFE = 7 * 24 * HOUR;
const RENEW_BEFORE = 24 * HOUR;

export type CaFiles = { certPem: string; keyPem: string };

/** The CA read and checked: a CA certificate, in date, with its RSA key. Throws naming the fix. */
export function readCa(
  files: CaFiles,
  now = Date.now(),
): { cert: forge.pki.Certificate; key: forge.pki.rsa.PrivateKey } {
  let x509: X509Certificate;
  try {
    x509 = new X509Certificate(files.certPem);
  } catch {
    throw new Error("the CA certificate is not a PEM certificate");
  }
  if (!x509.ca) throw new Error("the CA certificate is not a CA (basicConstraints CA:TRUE is required)");
  if (Date.parse(x509.validTo) <= now)
    throw new Error(`the CA certificate expired on ${x509.validTo}: issue a new one`);
  let key: forge.pki.rsa.PrivateKey;
  try {
    key = forge.pki.privateKeyFromPem(files.keyPem) as forge.pki.rsa.PrivateKey;
  } catch {
    throw new Error("the CA key is not an RSA private key in PEM (node-forge signs with RSA only)");
  }
  const cert = forge.pki.certificateFromPem(files.certPem);
  const pub = cert.publicKey as forge.pki.rsa.PublicKey;
  if (!pub.n || pub.n.compareTo(key.n) !== 0) throw new Error("the CA key is not the key of the CA certificate");
  return { cert, key };
}

type Leaf = { context: SecureContext; notAfter: number };

export class LeafIssuer {
  readonly #ca: ReturnType<typeof readCa>;
  readonly #keyPem: string;
  readonly #publicKey: forge.pki.PublicKey;
  readonly #leaves = new Map<string, Leaf>();
  readonly #now: () => number;

  constructor(files: CaFiles, now: () => number = Date.now) {
    this.#now = now;
    this.#ca = readCa(files, now());
    const pair = generateKeyPairSync("rsa", { modulusLength: 2048 });
    this.#keyPem = pair.privateKey.export({ type: "pkcs8", format: "pem" }).toString();
    this.#publicKey = forge.pki.publicKeyFromPem(pair.publicKey.export({ type: "spki", format: "pem" }).toString());
  }

  /** The TLS context presenting a leaf for `host` (a DNS name or an IP literal). */
  contextFor(host: string): SecureContext {
    const cached = this.#leaves.get(host);
    if (cached && cached.notAfter - this.#now() > RENEW_BEFORE) return cached.context;
    const { pem, notAfter } = this.#issue(host);
    const leaf = { context: createSecureContext({ cert: pem, key: this.#keyPem }), notAfter };
    this.#leaves.set(host, leaf);
    return leaf.context;
  }

  #issue(host: string): { pem: string; notAfter: number } {
    const now = this.#now();
    const cert = forge.pki.createCertificate();
    cert.publicKey = this.#publicKey;
    cert.serialNumber = positiveSerial();
    const notAfter = Math.min(now + LEAF_LIFE, this.#ca.cert.validity.notAfter.getTime());
    cert.validity.notBefore = new Date(now - HOUR);
    cert.validity.notAfter = new Date(notAfter);
    cert.setSubject([{ name: "commonName", value: host.slice(0, 64) }]);
    cert.setIssuer(this.#ca.cert.subject.attributes);
    const altName = isIP(host) ? { type: 7, ip: host } : { type: 2, value: host };
    cert.setExtensions([
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: [altName] },
    ]);
    cert.sign(this.#ca.key, forge.md.sha256.create());
    return { pem: forge.pki.certificateToPem(cert), notAfter };
  }
}
