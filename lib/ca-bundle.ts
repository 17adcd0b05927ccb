// The webhooks' CA bundle, pure: what the keeper (decision 0075) and the manual renewal script
// (scripts/renew-webhook-certificate.ts, decision 0058) both widen. Apart from the script so a
// bundle that imports it never carries, or starts, the script's command line.
import { X509Certificate } from "node:crypto";

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** The certificates of a PEM bundle, each with `\n` line ends (Pepr's build writes `\r\n`). */
export const pemCertificates = (pem: string): string[] =>
  (pem.match(PEM_CERT) ?? []).map((c) => c.replace(/\r\n/g, "\n") + "\n");

/**
 * The caBundle (base64) that trusts `added` beside what `currentB64` trusts, less any certificate
 * already ended at `now` or equal to `added`: old pods keep being trusted while new ones start.
 */
export function widenedBundle(currentB64: string, added: string, now = Date.now()): string {
  const addedCert = pemCertificates(added)[0];
  if (!addedCert) throw new Error("the new CA is not a PEM certificate");
  const kept = pemCertificates(Buffer.from(currentB64, "base64").toString("utf8")).filter(
    (pem) => pem !== addedCert && Date.parse(new X509Certificate(pem).validTo) > now,
  );
  return Buffer.from([...kept, addedCert].join(""), "utf8").toString("base64");
}
