// What the certificate tests share (not a test file): a certificate's extensions read from its DER
// (Node's X509Certificate shows few of them), its nameConstraints as text, and a real TLS
// handshake on loopback against a client that trusts the given roots alone.
import { once } from "node:events";
import { createServer, isIP, type AddressInfo } from "node:net";
import {
  checkServerIdentity,
  connect,
  createSecureContext,
  TLSSocket,
  type DetailedPeerCertificate,
  type SecureContext,
} from "node:tls";
import forge from "node-forge";

const { asn1 } = forge;
type Asn1 = forge.asn1.Asn1;

export const OID = {
  basicConstraints: "2.5.29.19",
  keyUsage: "2.5.29.15",
  nameConstraints: "2.5.29.30",
  subjectKeyIdentifier: "2.5.29.14",
  authorityKeyIdentifier: "2.5.29.35",
} as const;

/** An extension of a PEM certificate: whether it is critical, and its value as ASN.1. */
export function extensionOf(certPem: string, oid: string): { critical: boolean; value: Asn1 } | undefined {
  const der = forge.pem.decode(certPem)[0]!.body;
  const tbs = (asn1.fromDer(der).value as Asn1[])[0]!.value as Asn1[];
  const tagged = tbs.find((f) => f.tagClass === asn1.Class.CONTEXT_SPECIFIC && f.type === 3);
  for (const ext of ((tagged?.value as Asn1[])[0]!.value as Asn1[]) ?? []) {
    const parts = ext.value as Asn1[];
    if (asn1.derToOid(forge.util.createBuffer(parts[0]!.value as string)) !== oid) continue;
    const critical = parts.length === 3 && (parts[1]!.value as string) === "\xff";
    return { critical, value: asn1.fromDer(parts.at(-1)!.value as string) };
  }
  return undefined;
}

/** A GeneralName as text: `DNS:name` or `IP:address/mask` (dotted or hex groups). */
function generalName(n: Asn1): string {
  const bytes = Buffer.from(n.value as string, "binary");
  if (n.type === 2) return `DNS:${bytes.toString("latin1")}`;
  if (n.type === 7) {
    const half = bytes.length / 2;
    const show = (b: Buffer) =>
      b.length === 4 ? [...b].join(".") : (b.toString("hex").match(/.{4}/g) ?? []).join(":");
    return `IP:${show(bytes.subarray(0, half))}/${show(bytes.subarray(half))}`;
  }
  return `type ${n.type}`;
}

/** nameConstraints as text, with whether it is critical; undefined when absent. */
export function nameConstraintsOf(
  certPem: string,
): { critical: boolean; permitted: string[]; excluded: string[] } | undefined {
  const ext = extensionOf(certPem, OID.nameConstraints);
  if (!ext) return undefined;
  const out = { critical: ext.critical, permitted: [] as string[], excluded: [] as string[] };
  for (const trees of ext.value.value as Asn1[]) {
    const names = (trees.value as Asn1[]).map((subtree) => generalName((subtree.value as Asn1[])[0]!));
    (trees.type === 0 ? out.permitted : out.excluded).push(...names);
  }
  return out;
}

export type Handshake = { ok: true; peer: DetailedPeerCertificate } | { ok: false; error: Error };

/**
 * A TLS server on 127.0.0.1 presenting `server` (a context, or a certificate chain and key), and a
 * client that trusts `roots` alone and asks for `host` (SNI unless an address): how it ended.
 * `verify: false` only reads what is presented.
 */
export async function handshake(
  server: SecureContext | { cert: string; key: string },
  roots: string,
  host: string,
  opts: { verify?: boolean } = {},
): Promise<Handshake> {
  const secureContext = "cert" in server ? createSecureContext(server) : server;
  // As the Custodian serves an intercepted socket: TLS over an accepted connection.
  const srv = createServer((raw) => {
    const tls = new TLSSocket(raw, { isServer: true, secureContext });
    tls.on("error", () => raw.destroy());
    tls.on("secure", () => tls.end());
  });
  srv.listen(0, "127.0.0.1");
  await once(srv, "listening");
  const { port } = srv.address() as AddressInfo;
  const socket = connect({
    host: "127.0.0.1",
    port,
    ca: roots,
    ...(isIP(host) ? {} : { servername: host }),
    rejectUnauthorized: opts.verify ?? true,
    // The name checked is the one asked for, not the loopback address dialled.
    checkServerIdentity: (_, cert) => checkServerIdentity(host, cert),
  });
  try {
    await once(socket, "secureConnect");
    return { ok: true, peer: socket.getPeerCertificate(true) };
  } catch (error) {
    return { ok: false, error: error as Error };
  } finally {
    socket.destroy();
    srv.close();
  }
}
