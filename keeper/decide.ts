// The keeper's decisions (decision 0075), pure: given what the cluster holds and the time, what to
// make or renew. keeper/keeper.ts reads and writes; this only judges, so each rule is unit-tested.
import { X509Certificate } from "node:crypto";
import { DAY } from "../lib/ca";
import { pemCertificates } from "../lib/ca-bundle";

/** How long what the keeper makes lasts, and how long before its end it is renewed. */
export const LIFETIMES = {
  caDays: 3650,
  caRenewBeforeDays: 365,
  servingDays: 365,
  servingRenewBeforeDays: 30,
} as const;

export type Verdict = { action: "keep" } | { action: "make" | "renew"; why: string };

const ends = (pem: string) => Date.parse(new X509Certificate(pem).validTo);
const daysLeft = (pem: string, now: number) => (ends(pem) - now) / DAY;

/** The CA: made when absent or unreadable, renewed when under caRenewBeforeDays remain. */
export function caVerdict(caPem: string | undefined, now: number): Verdict {
  if (!caPem) return { action: "make", why: "no CA yet" };
  let left: number;
  try {
    left = daysLeft(caPem, now);
  } catch {
    return { action: "make", why: "the CA Secret's ca.crt is not a certificate" };
  }
  return left < LIFETIMES.caRenewBeforeDays
    ? { action: "renew", why: `the CA ends in ${Math.floor(left)} days (renewed under ${LIFETIMES.caRenewBeforeDays})` }
    : { action: "keep" };
}

/**
 * The serving pair: made when absent, renewed when under servingRenewBeforeDays remain, when the
 * CA did not sign it (a renewed CA), or when it does not name every one of `dnsNames`.
 */
export function servingVerdict(
  servingPem: string | undefined,
  caPem: string,
  dnsNames: readonly string[],
  now: number,
): Verdict {
  if (!servingPem) return { action: "make", why: "no serving certificate yet" };
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(servingPem);
  } catch {
    return { action: "make", why: "the serving Secret's tls.crt is not a certificate" };
  }
  if (!cert.verify(new X509Certificate(caPem).publicKey))
    return { action: "renew", why: "the serving certificate is not signed by the CA in use" };
  const named = (cert.subjectAltName ?? "").split(", ").filter((n) => n.startsWith("DNS:"));
  const missing = dnsNames.filter((n) => !named.includes(`DNS:${n}`));
  if (missing.length) return { action: "renew", why: `the serving certificate does not name ${missing.join(", ")}` };
  const left = daysLeft(servingPem, now);
  return left < LIFETIMES.servingRenewBeforeDays
    ? {
        action: "renew",
        why: `the serving certificate ends in ${Math.floor(left)} days (renewed under ${LIFETIMES.servingRenewBeforeDays})`,
      }
    : { action: "keep" };
}

/** The certificates of a base64 caBundle (empty when there is none). */
export const bundleCertificates = (b64: string | undefined): string[] =>
  b64 ? pemCertificates(Buffer.from(b64, "base64").toString("utf8")) : [];

/** Whether a caBundle trusts exactly `caPem` and nothing else: nothing left to narrow. */
export function trustsOnly(bundleB64: string | undefined, caPem: string): boolean {
  const certs = bundleCertificates(bundleB64);
  return certs.length === 1 && certs[0] === pemCertificates(caPem)[0];
}

/** Whether a caBundle trusts `caPem` (among others). */
export const trusts = (bundleB64: string | undefined, caPem: string): boolean =>
  bundleCertificates(bundleB64).includes(pemCertificates(caPem)[0]!);

type Webhook = { name: string; clientConfig?: { caBundle?: string; service?: { path?: string } } };
export type WebhookConfiguration = { kind?: string; webhooks?: Webhook[] };

/** The path a webhook of this kind is served on by Pepr: /mutate/<api path> or /validate/<api path>. */
export const webhookPath = (kind: string, apiPath: string): string =>
  `/${kind.startsWith("Mutating") ? "mutate" : "validate"}/${apiPath}`;

/**
 * The JSON patch that makes every webhook of `config` trust `bundleB64` (when given) and call `path`; empty when
 * each already does (a second run writes nothing). Each change is guarded by a test of the
 * webhook's name at its index, so a configuration reordered since it was read refuses the patch.
 */
export function webhookPatch(config: WebhookConfiguration, bundleB64: string | undefined, path: string): object[] {
  const ops: object[] = [];
  (config.webhooks ?? []).forEach((w, i) => {
    if (!w.clientConfig?.service) return;
    const changes: object[] = [];
    // No bundle: cert-manager's cainjector writes it (admission.certificate.source certManager).
    if (bundleB64 !== undefined && w.clientConfig.caBundle !== bundleB64)
      changes.push({ op: "add", path: `/webhooks/${i}/clientConfig/caBundle`, value: bundleB64 });
    if (w.clientConfig.service.path !== path)
      changes.push({ op: "add", path: `/webhooks/${i}/clientConfig/service/path`, value: path });
    if (changes.length) ops.push({ op: "test", path: `/webhooks/${i}/name`, value: w.name }, ...changes);
  });
  return ops;
}

/** A Deployment's rollout, as `kubectl rollout status` judges it: done when every replica is new and available. */
export function rolledOut(d: {
  metadata?: { generation?: number };
  spec?: { replicas?: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
  };
}): boolean {
  const want = d.spec?.replicas ?? 1;
  const s = d.status ?? {};
  return (
    (s.observedGeneration ?? 0) >= (d.metadata?.generation ?? 0) &&
    (s.updatedReplicas ?? 0) === want &&
    (s.replicas ?? 0) === want &&
    (s.availableReplicas ?? 0) === want
  );
}
