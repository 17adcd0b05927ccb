// Renews the admission webhook's certificate in a running cluster, without a release
// (docs/operations.md, docs/decisions/0058-operating-it.md). An installation from the chart or
// dist/jr2-install.yaml has the keeper do this daily, under its own kept CA, with the pure steps
// below (decision 0075; a run now: kubectl -n pepr-system create job --from=cronjob/jr2-keeper
// jr2-keeper-now); this script is for a module applied from `pepr build`'s own manifest. `npm run build` writes a P-256 pair
// valid 365 days and its CA into the webhook configuration's caBundle (decision 0032); Pepr reads
// the pair once, when its process starts. So, in this order, no admission call is refused on the
// way (the window decision 0039 names for a new build):
//   1. each webhook's caBundle trusts the new CA beside the one(s) in use;
//   2. the TLS Secret gets the new pair (on kubectl's stdin, never its command line);
//   3. the admission and watcher Deployments restart onto it, and the rollouts are waited for;
//   4. each caBundle trusts the new CA alone.
// Usage: npx tsx scripts/renew-webhook-certificate.ts [--days 365] [--namespace pepr-system]
// with KUBECONFIG naming the cluster (KUBECTL: another kubectl than the one on PATH). It prints
// each step and the new certificate's end; never a key.
import { execFile } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { pemCertificates, widenedBundle } from "../lib/ca-bundle";
import { servingCertificate } from "../lib/serving-certificate";
import cfg from "../package.json";

/** Runs kubectl with `args`, `input` on its stdin; resolves its stdout. */
export type Kubectl = (args: string[], input?: string) => Promise<string>;

export const MODULE = `pepr-${cfg.pepr.uuid}`;
const WEBHOOK_KINDS = ["validatingwebhookconfiguration", "mutatingwebhookconfiguration"] as const;

type WebhookConfiguration = { webhooks?: Array<{ clientConfig?: { caBundle?: string } }> };

export { pemCertificates, widenedBundle };

/** The JSON patch that sets every webhook's caBundle in a configuration to `bundleB64`. */
export function caBundlePatch(config: WebhookConfiguration, bundleB64: string) {
  return (config.webhooks ?? []).flatMap((w, i) =>
    w.clientConfig ? [{ op: "add", path: `/webhooks/${i}/clientConfig/caBundle`, value: bundleB64 }] : [],
  );
}

/** The DNS names the serving certificate in use is for (its subjectAltName), from the Secret's tls.crt. */
export function servingNamesOf(tlsCrtB64: string): string[] {
  const cert = new X509Certificate(Buffer.from(tlsCrtB64, "base64"));
  const names = (cert.subjectAltName ?? "")
    .split(", ")
    .filter((n) => n.startsWith("DNS:"))
    .map((n) => n.slice(4));
  if (!names.length)
    throw new Error(`the certificate in use names no DNS name: it is not a webhook serving certificate`);
  return names;
}

export type RenewOptions = {
  /** The module's name (default `pepr-<uuid>` from package.json): its Secret `<module>-tls`, its
   * webhook configurations and its Deployments `<module>` and `<module>-watcher`. */
  module?: string;
  kubectl: Kubectl;
  namespace?: string;
  days?: number;
  say?: (line: string) => void;
  now?: number;
};

/** The four steps above; resolves the new certificate's end. */
export async function renewWebhookCertificate(opts: RenewOptions): Promise<Date> {
  const { kubectl, namespace = "pepr-system", days = 365, say = () => undefined, module: name = MODULE } = opts;
  const now = opts.now ?? Date.now();
  const secret = JSON.parse(await kubectl(["get", "secret", `${name}-tls`, "-n", namespace, "-o", "json"])) as {
    metadata?: object;
    data?: Record<string, string>;
  };
  const crt = secret.data?.["tls.crt"];
  if (!crt) throw new Error(`Secret ${namespace}/${name}-tls has no tls.crt: is the module installed there?`);
  const fresh = servingCertificate({ dnsNames: servingNamesOf(crt) }, days, now);
  const b64 = (pem: string) => Buffer.from(pem, "utf8").toString("base64");

  const configurations: Array<{ kind: string; config: WebhookConfiguration }> = [];
  for (const kind of WEBHOOK_KINDS) {
    const out = await kubectl(["get", kind, name, "--ignore-not-found", "-o", "json"]);
    if (out.trim()) configurations.push({ kind, config: JSON.parse(out) as WebhookConfiguration });
  }
  if (!configurations.length) throw new Error(`no webhook configuration named ${name}: is the module installed?`);
  const setBundles = async (bundleOf: (config: WebhookConfiguration) => string) => {
    for (const { kind, config } of configurations) {
      const patch = caBundlePatch(config, bundleOf(config));
      // A CA bundle is public: on the command line is fine (the key never is, below).
      if (patch.length) await kubectl(["patch", kind, name, "--type", "json", "-p", JSON.stringify(patch)]);
    }
  };

  say(`1/4 the webhooks of ${name} trust the new CA beside the one in use`);
  await setBundles((config) =>
    widenedBundle(config.webhooks?.find((w) => w.clientConfig)?.clientConfig?.caBundle ?? "", fresh.caPem, now),
  );
  say(`2/4 Secret ${namespace}/${name}-tls holds the new certificate and key`);
  // The Secret as read, its pair replaced, on stdin (`-`: kubectl reads its stdin, whatever it is;
  // `--patch-file /dev/stdin` cannot open a socket, which is what a child's stdin is from Node). Its
  // resourceVersion makes the replace refused if the Secret changed since it was read.
  await kubectl(
    ["replace", "-f", "-"],
    JSON.stringify({
      ...secret,
      data: { ...secret.data, "tls.crt": b64(fresh.certPem), "tls.key": b64(fresh.keyPem) },
    }),
  );
  say(`3/4 the admission and watcher Deployments restart onto it`);
  const deployments = [`deployment/${name}`, `deployment/${name}-watcher`];
  for (const d of deployments) await kubectl(["rollout", "restart", "-n", namespace, d]);
  for (const d of deployments) await kubectl(["rollout", "status", "-n", namespace, d, "--timeout=10m"]);
  say(`4/4 the webhooks trust the new CA alone`);
  await setBundles(() => b64(fresh.caPem));
  return new Date(new X509Certificate(fresh.certPem).validTo);
}

/** kubectl on PATH (or KUBECTL), its stderr in the error. */
const kubectl: Kubectl = (args, input) =>
  new Promise((resolve, reject) => {
    const child = execFile(process.env.KUBECTL || "kubectl", args, { maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      err ? reject(new Error(`kubectl ${args.join(" ")}: ${stderr || err.message}`)) : resolve(stdout),
    );
    child.stdin!.end(input ?? "");
  });

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
}

if (require.main === module) {
  const days = Number(flag("days") ?? 365);
  if (!Number.isInteger(days) || days < 1) {
    process.stderr.write(`--days must be a whole number of days, 1 or more (it was ${flag("days")})\n`);
    process.exit(2);
  }
  renewWebhookCertificate({ kubectl, namespace: flag("namespace") ?? "pepr-system", days, say: (l) => console.log(l) })
    .then((end) => console.log(`the webhook certificate is valid until ${end.toISOString()}`))
    .catch((err: Error) => {
      process.stderr.write(
        `${err.message}\nRun it again: each step is safe to repeat (the bundle keeps every CA still valid until the last step).\n`,
      );
      process.exit(1);
    });
}
