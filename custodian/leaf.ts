// Leaf certificates for the hosts the proxy intercepts (decision 0018), signed by the Sandbox's
// intermediate (decision 0037: a P-256 CA the Orchestrator mints for this Sandbox's bound hosts
// alone, a week long, rotated in place) and served with it, so a Harness that trusts the
// installation root alone accepts them. One P-256 key per process; lib/x509.ts builds and signs
// each certificate (decision 0019). Leaves are cached per host, made again a day before they end,
// never past the CA's own end. The CA's files are read again when they change (the kubelet
// updates a mounted Secret in place); a CA past its end refuses, it never signs a leaf no one accepts.
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import { createSecureContext, type SecureContext } from "node:tls";
import { CA_CERT_KEY, CA_KEY_KEY } from "../api/custodian-config";
import { once } from "../lib/once";

// The certificate builder (and node-forge under it) loads with the first leaf: a Custodian whose
// Harness never opens a bound host's tunnel never pays for it (docs/decisions/0044-the-custodian-starts-small.md).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const x509 = once((): typeof import("../lib/x509") => require("../lib/x509"));
// eslint-disable-next-line @typescript-eslint/no-require-imports
const caLib = once((): typeof import("../lib/ca") => require("../lib/ca"));

const HOUR = 3_600_000;
const LEAF_LIFE = 7 * 24 * HOUR;
const RENEW_BEFORE = 24 * HOUR;

/** The CA's files as mounted: `tls.crt` (the CA, then any certificate above it) and `tls.key`. */
export type CaFiles = { certPem: string; keyPem: string };
/** The CA: fixed, or read by a function that returns the same object until the files change. */
export type CaSource = CaFiles | (() => CaFiles);

/** A CA read and checked. */
export type Ca = {
  /** The CA's own certificate (the first of `tls.crt`). */
  certPem: string;
  /** What a leaf is served with: `tls.crt` without a self-signed root (the client has that). */
  chainPem: string;
  key: KeyObject;
  notAfter: number;
};

/** Why interception cannot go on now (an expired or unreadable CA): the proxy answers it. */
export class CaUnusable extends Error {
  constructor(
    readonly code: "ca_expired" | "ca_unusable",
    message: string,
  ) {
    super(message);
  }
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g;
const selfSigned = (c: X509Certificate) => c.checkIssued(c) && c.verify(c.publicKey);

/** The CA read and checked: a CA certificate with its RSA or EC key. Throws naming the fix. */
export function readCa(files: CaFiles): Ca {
  const pems = files.certPem.match(PEM_CERTIFICATE) ?? [];
  let certs: X509Certificate[];
  try {
    certs = pems.map((p) => new X509Certificate(p));
  } catch {
    certs = [];
  }
  const x509 = certs[0];
  if (!x509) throw new Error("the CA certificate is not a PEM certificate");
  if (!x509.ca) throw new Error("the CA certificate is not a CA (basicConstraints CA:TRUE is required)");
  let key: KeyObject;
  try {
    key = createPrivateKey(files.keyPem);
  } catch {
    throw new Error("the CA key is not a private key in PEM");
  }
  if (key.asymmetricKeyType !== "rsa" && key.asymmetricKeyType !== "ec")
    throw new Error(`the CA key is ${key.asymmetricKeyType}: it must be RSA or EC`);
  if (!x509.checkPrivateKey(key)) throw new Error("the CA key is not the key of the CA certificate");
  return {
    certPem: pems[0]!,
    chainPem: pems.filter((_, i) => !selfSigned(certs[i]!)).join("\n"),
    key,
    notAfter: Date.parse(x509.validTo),
  };
}

/**
 * The CA files in `dir`, read again when either file's inode, size or mtime changes (the kubelet
 * swaps a mounted Secret's files whole); the same object until then. Throws naming a missing file.
 */
export function caFilesIn(dir: string): () => CaFiles {
  const paths = [join(dir, CA_CERT_KEY), join(dir, CA_KEY_KEY)] as const;
  let stamp = "";
  let files: CaFiles | undefined;
  return () => {
    const now = paths
      .map((p) => statSync(p))
      .map((s) => `${s.ino}:${s.size}:${s.mtimeMs}`)
      .join("/");
    if (files && now === stamp) return files;
    files = { certPem: readFileSync(paths[0], "utf8"), keyPem: readFileSync(paths[1], "utf8") };
    stamp = now;
    return files;
  };
}

type Leaf = { context: SecureContext; notAfter: number };
/** The CA in use; the names a leaf copies from it are read with its first leaf. */
type Issuing = {
  files: CaFiles;
  ca: Ca;
  names?: { issuer: ReturnType<typeof import("../lib/x509").subjectOf>; keyIds: object[] };
};

export type LeafIssuerOptions = {
  now?: () => number;
  /** Told when the CA changed (a rotation). */
  onChange?: (ca: Ca) => void;
};

export class LeafIssuer {
  readonly #source: () => CaFiles;
  readonly #now: () => number;
  readonly #onChange?: (ca: Ca) => void;
  #issuing: Issuing;
  readonly #key: KeyObject;
  readonly #keyPem: string;
  readonly #publicKey: KeyObject;
  readonly #leaves = new Map<string, Leaf>();

  /** Throws when the CA cannot be read (not when it is past its end: that refuses each leaf). */
  constructor(source: CaSource, opts: LeafIssuerOptions = {}) {
    this.#source = typeof source === "function" ? source : () => source;
    this.#now = opts.now ?? Date.now;
    this.#onChange = opts.onChange;
    const pair = generateKeyPairSync("ec", { namedCurve: "P-256" });
    this.#key = pair.privateKey;
    this.#keyPem = pair.privateKey.export({ type: "pkcs8", format: "pem" }).toString();
    this.#publicKey = createPublicKey(this.#key);
    this.#issuing = this.#read(this.#source());
  }

  /** The CA in use now. */
  get ca(): Ca {
    return this.#issuing.ca;
  }

  /** The TLS context presenting a leaf for `host` (a DNS name or an IP literal), with the chain.
   * Throws CaUnusable when the CA's files no longer read or it is past its end. */
  contextFor(host: string): SecureContext {
    const { ca } = this.#current();
    const now = this.#now();
    if (ca.notAfter <= now)
      throw new CaUnusable(
        "ca_expired",
        `the Custodian's CA expired on ${new Date(ca.notAfter).toISOString()}: its Orchestrator mints the next one as it renews the Sandbox's lease (decision 0037)`,
      );
    const cached = this.#leaves.get(host);
    // A leaf ending with its CA is as long as any can be: kept to its end.
    if (cached && cached.notAfter > now && (cached.notAfter - now > RENEW_BEFORE || cached.notAfter >= ca.notAfter))
      return cached.context;
    const { pem, notAfter } = this.#issue(host, now);
    const leaf = { context: createSecureContext({ cert: `${pem}${ca.chainPem}`, key: this.#keyPem }), notAfter };
    this.#leaves.set(host, leaf);
    return leaf.context;
  }

  #read(files: CaFiles): Issuing {
    const ca = readCa(files);
    return { files, ca };
  }

  /** The CA, read again when its files changed; its leaves go with the old one. */
  #current(): Issuing {
    let files: CaFiles;
    try {
      files = this.#source();
      if (files === this.#issuing.files) return this.#issuing;
      this.#issuing = this.#read(files);
    } catch (err) {
      throw new CaUnusable("ca_unusable", `the Custodian's CA cannot be read: ${(err as Error).message}`);
    }
    this.#leaves.clear();
    this.#onChange?.(this.#issuing.ca);
    return this.#issuing;
  }

  #issue(host: string, now: number): { pem: string; notAfter: number } {
    const issuing = this.#issuing;
    const { ca } = issuing;
    const { subjectOf, keyIdentifiers, certificate } = x509();
    issuing.names ??= { issuer: subjectOf(ca.certPem), keyIds: keyIdentifiers(this.#publicKey, ca.certPem) };
    const { issuer, keyIds } = issuing.names;
    const notAfter = Math.min(now + LEAF_LIFE, ca.notAfter);
    const ip = isIP(host) !== 0;
    const pem = certificate({
      serial: caLib().positiveSerial(),
      // An address's common name must not read as a DNS name: a CA limited to DNS names checks
      // a leaf's common name as one when the leaf names no DNS name.
      subject: ip ? `IP ${host}` : host.slice(0, 64),
      issuer,
      extensions: [
        { name: "basicConstraints", cA: false },
        { name: "keyUsage", digitalSignature: true, critical: true },
        { name: "extKeyUsage", serverAuth: true },
        { name: "subjectAltName", altNames: [ip ? { type: 7, ip: host } : { type: 2, value: host }] },
        ...keyIds,
      ],
      publicKey: this.#publicKey,
      signer: ca.key,
      notBefore: new Date(now - HOUR),
      notAfter: new Date(notAfter),
    });
    return { pem, notAfter };
  }
}
