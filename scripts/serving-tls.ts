// The deployed webhook certificate made ECDSA (decision 0032). `pepr build` writes an RSA-2048
// pair into the module's TLS Secret and its CA into every webhook configuration's caBundle. This
// makes a P-256 CA and serving certificate for the same DNS names and swaps all three values, as
// text, in the manifest; the chart then takes its TLS Secret and CA bundle from the manifest.
import { X509Certificate } from "node:crypto";
import { parseAllDocuments } from "yaml";
import { servingCertificate } from "../lib/serving-certificate";
import { caBundleOf } from "./webhooks";

/** Base64 values of the build to replace, each with its replacement. */
export type TlsSwap = Map<string, string>;

type Doc = {
  kind?: string;
  metadata?: { name?: string };
  data?: Record<string, string>;
};

const b64 = (pem: string) => Buffer.from(pem).toString("base64");

/** The module's TLS Secret (`pepr-<uuid>-tls`) among a manifest's documents; throws naming it. */
export function tlsSecretOf(docs: unknown[], uuid: string): Doc & { data: { "tls.crt": string; "tls.key": string } } {
  const name = `pepr-${uuid}-tls`;
  const secret = (docs as Doc[]).find((d) => d?.kind === "Secret" && d.metadata?.name === name);
  if (!secret?.data?.["tls.crt"] || !secret.data["tls.key"])
    throw new Error(`the build has no Secret ${name} with tls.crt and tls.key`);
  return secret as Doc & { data: { "tls.crt": string; "tls.key": string } };
}

/**
 * The swap for a built manifest: its TLS Secret's pair and the webhooks' caBundle replaced by a
 * new ECDSA pair for the certificate's own DNS names; null when the build's is ECDSA already
 * (post-processed before). Throws naming what the build lacks.
 */
export function servingTlsSwap(manifestYaml: string, uuid: string): TlsSwap | null {
  const docs = parseAllDocuments(manifestYaml).map((d) => (d.toJS() ?? {}) as Doc);
  const { "tls.crt": crt, "tls.key": key } = tlsSecretOf(docs, uuid).data;
  const cert = new X509Certificate(Buffer.from(crt, "base64"));
  if (cert.publicKey.asymmetricKeyType === "ec") return null;
  const dnsNames = (cert.subjectAltName ?? "")
    .split(", ")
    .filter((n) => n.startsWith("DNS:"))
    .map((n) => n.slice(4));
  if (!dnsNames.length) throw new Error(`the build's pepr-${uuid}-tls certificate names no DNS name`);
  const fresh = servingCertificate({ dnsNames });
  return new Map([
    [crt, b64(fresh.certPem)],
    [key, b64(fresh.keyPem)],
    [caBundleOf(docs), b64(fresh.caPem)],
  ]);
}

/** `text` with every value of the swap replaced; the values it carried, for checking. */
export function applyTlsSwap(text: string, swap: TlsSwap): { text: string; replaced: number } {
  let replaced = 0;
  for (const [from, to] of swap) {
    const parts = text.split(from);
    if (parts.length > 1) replaced++;
    text = parts.join(to);
  }
  return { text, replaced };
}
