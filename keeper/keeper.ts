// The keeper (decision 0075): what no render may hold, made and renewed in the cluster. Run by the
// chart as a hook Job at install and upgrade and as a daily CronJob; each run is idempotent (a run
// with nothing to do writes nothing) and resumable (a run stopped at any step is finished by the
// next). In order:
//   1. the Orchestrator's signing key: made once when absent, never rewritten; a Secret the values
//      name (orchestrator.existingSecret) is only checked;
//   2. Pepr's API path (the token its webhook paths end in, decision 0075 says why it is made here);
//   3. (certificate source `cluster`) the admission CA, kept in a Secret, and the serving pair it
//      signs in pepr-<uuid>-tls; a new CA is first trusted beside the old one (widen);
//   4. the admission and watcher Deployments restarted onto the pair in the Secret (Pepr reads it at
//      start), by a pod-template annotation naming the pair; waited for when pods were serving;
//   5. every webhook configuration trusting the CA alone (narrow) and calling the API path.
// So no admission call is refused on the way (the sequence scripts/renew-webhook-certificate.ts runs).
import { createHash, randomBytes, X509Certificate } from "node:crypto";
import { ApiError } from "../lib/api-error";
import { widenedBundle } from "../lib/ca-bundle";
import { issueAdmissionCa, issueServing, type Pair } from "./certificates";
import {
  caVerdict,
  LIFETIMES,
  rolledOut,
  servingVerdict,
  trusts,
  trustsOnly,
  webhookPatch,
  webhookPath,
  type WebhookConfiguration,
} from "./decide";

/** The API calls the keeper makes: a GET that answers undefined for a 404, a create, a patch. */
export type Api = {
  get<T>(path: string): Promise<T | undefined>;
  create(path: string, body: object): Promise<void>;
  patch(path: string, body: unknown, type: "json" | "merge"): Promise<void>;
};

export type KeeperConfig = {
  /** pepr-<uuid>: its Secrets <module>-tls, <module>-api-path, <module>-ca, its webhook
   * configurations and its Deployments <module> and <module>-watcher. */
  module: string;
  /** Where the module runs (pepr-system). */
  namespace: string;
  /** cluster: the keeper makes the CA and the serving pair; certManager: cert-manager does. */
  certificate: "cluster" | "certManager";
  /** The Orchestrator's namespace and the Secret holding its signing key. */
  orchestrator: { namespace: string; secret: string; existing: boolean };
  /** How long a rollout may take before the run fails (it is finished by the next). */
  rolloutTimeoutMs?: number;
  now?: () => number;
  say?: (entry: Record<string, unknown>) => void;
};

/** The pod-template annotation naming the serving pair a Deployment's pods were started with. */
export const SERVING_ANNOTATION = "jr2.dev/serving-certificate";
/** The key the Orchestrator reads its signing key from (orchestrator/orchestrator-manifests.ts). */
export const SIGNING_KEY = "signing-key";
const MIN_SIGNING_KEY_BYTES = 32;

const enc = encodeURIComponent;
const secretPath = (ns: string, name = "") => `/api/v1/namespaces/${enc(ns)}/secrets${name ? `/${enc(name)}` : ""}`;
const deploymentPath = (ns: string, name: string) => `/apis/apps/v1/namespaces/${enc(ns)}/deployments/${enc(name)}`;
const WEBHOOK_KINDS = {
  ValidatingWebhookConfiguration: "validatingwebhookconfigurations",
  MutatingWebhookConfiguration: "mutatingwebhookconfigurations",
} as const;
const webhookConfigPath = (kind: keyof typeof WEBHOOK_KINDS, name: string) =>
  `/apis/admissionregistration.k8s.io/v1/${WEBHOOK_KINDS[kind]}/${enc(name)}`;

type Secret = { metadata?: { resourceVersion?: string }; data?: Record<string, string> };
type Deployment = Parameters<typeof rolledOut>[0] & {
  spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
};

const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");
const unb64 = (s: string | undefined) => (s === undefined ? undefined : Buffer.from(s, "base64").toString("utf8"));
/** A short name of a serving pair: what a Deployment's annotation holds (public: a certificate's hash). */
export const pairId = (tlsCrtB64: string) => createHash("sha256").update(tlsCrtB64).digest("hex").slice(0, 16);

/** The names the serving pair is for: the module's Services in its namespace. */
export const servingNames = (module: string, namespace: string) => [
  `${module}.${namespace}.svc`,
  `${module}-watcher.${namespace}.svc`,
];

/** The names of the Secrets the keeper keeps (what docs/operations.md says to back up: CA and signing key). */
export const keptSecrets = (module: string) => ({
  tls: `${module}-tls`,
  ca: `${module}-ca`,
  apiPath: `${module}-api-path`,
});

const labels = { "app.kubernetes.io/part-of": "jr2", "app.kubernetes.io/managed-by": "jr2-keeper" };

/** One keeper run; resolves what it wrote (by kind and name), empty when nothing was to do. */
export async function keep(api: Api, cfg: KeeperConfig): Promise<string[]> {
  const now = cfg.now ?? Date.now;
  const say = cfg.say ?? (() => undefined);
  const written: string[] = [];
  const { module, namespace: ns } = cfg;
  const names = keptSecrets(module);

  /** A Secret made when absent; if another run made it first, theirs is kept (never rewritten). */
  const createSecret = async (sns: string, name: string, data: Record<string, string>, type = "Opaque") => {
    try {
      await api.create(secretPath(sns), {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name, namespace: sns, labels },
        type,
        data,
      });
      written.push(`Secret ${sns}/${name}`);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 409)) throw err;
    }
    return (await api.get<Secret>(secretPath(sns, name)))!;
  };
  /** A Secret's data replaced, refused if it changed since it was read (its resourceVersion). */
  const replaceData = async (sns: string, name: string, read: Secret, data: Record<string, string>) => {
    await api.patch(
      secretPath(sns, name),
      [
        { op: "test", path: "/metadata/resourceVersion", value: read.metadata?.resourceVersion },
        { op: "add", path: "/data", value: data },
      ],
      "json",
    );
    written.push(`Secret ${sns}/${name}`);
  };

  // 1. The signing key.
  const o = cfg.orchestrator;
  const keySecret = await api.get<Secret>(secretPath(o.namespace, o.secret));
  if (o.existing) {
    const key = unb64(keySecret?.data?.[SIGNING_KEY]);
    if (!key || Buffer.byteLength(key) < MIN_SIGNING_KEY_BYTES)
      throw new Error(
        `Secret ${o.namespace}/${o.secret} (orchestrator.existingSecret) ${keySecret ? `has no ${SIGNING_KEY} of ${MIN_SIGNING_KEY_BYTES} bytes or more` : "does not exist"}: create it with keys ${SIGNING_KEY} and api-tokens (e.g. kubectl create secret generic ${o.secret} -n ${o.namespace} --from-literal=${SIGNING_KEY}="$(head -c 32 /dev/urandom | base64)" --from-file=api-tokens=tokens.txt), or empty orchestrator.existingSecret to have one made`,
      );
  } else if (!keySecret) {
    await createSecret(o.namespace, o.secret, { [SIGNING_KEY]: b64(randomBytes(32).toString("hex")) });
    say({ message: "made the Orchestrator's signing key", secret: `${o.namespace}/${o.secret}` });
  } else if (!keySecret.data?.[SIGNING_KEY])
    throw new Error(
      `Secret ${o.namespace}/${o.secret} exists without ${SIGNING_KEY}: the keeper never rewrites a signing key; restore it from a backup, or delete the Secret to have a new one made (every live workspace's bearer then stops working)`,
    );

  // 2. The API path.
  let pathSecret = await api.get<Secret>(secretPath(ns, names.apiPath));
  if (!pathSecret?.data?.value) {
    if (pathSecret)
      throw new Error(`Secret ${ns}/${names.apiPath} has no value: delete it and run the keeper again to make one`);
    pathSecret = await createSecret(ns, names.apiPath, { value: b64(randomBytes(32).toString("hex")) });
  }
  const apiPath = unb64(pathSecret.data!.value)!;

  // The webhook configurations, as they are now (the Mutating one exists only with admission.defaults webhook).
  const configs: Array<{ kind: keyof typeof WEBHOOK_KINDS; config: WebhookConfiguration }> = [];
  for (const kind of Object.keys(WEBHOOK_KINDS) as Array<keyof typeof WEBHOOK_KINDS>) {
    const config = await api.get<WebhookConfiguration>(webhookConfigPath(kind, module));
    if (config) configs.push({ kind, config });
  }
  const bundleOf = (c: WebhookConfiguration) =>
    c.webhooks?.find((w) => w.clientConfig?.service)?.clientConfig?.caBundle;

  // 3. The CA and the serving pair.
  let ca: Pair | undefined;
  if (cfg.certificate === "cluster") {
    const caSecret = await api.get<Secret>(secretPath(ns, names.ca));
    const caPem = unb64(caSecret?.data?.["ca.crt"]);
    const caVerdictNow = caVerdict(caPem, now());
    if (caVerdictNow.action === "keep") ca = { certPem: caPem!, keyPem: unb64(caSecret!.data!["ca.key"])! };
    else {
      const fresh = issueAdmissionCa(`${module} admission CA`, LIFETIMES.caDays, now());
      const data = { "ca.crt": b64(fresh.certPem), "ca.key": b64(fresh.keyPem) };
      const made = caSecret
        ? (await replaceData(ns, names.ca, caSecret, data), undefined)
        : await createSecret(ns, names.ca, data);
      const kept = made?.data ?? data;
      ca = { certPem: unb64(kept["ca.crt"])!, keyPem: unb64(kept["ca.key"])! };
      say({
        message: `${caVerdictNow.action === "make" ? "made" : "renewed"} the admission CA`,
        why: caVerdictNow.why,
      });
    }
    const tls = await api.get<Secret>(secretPath(ns, names.tls));
    const verdict = servingVerdict(unb64(tls?.data?.["tls.crt"]), ca.certPem, servingNames(module, ns), now());
    if (verdict.action !== "keep") {
      // Widen first: a pod started on the new pair is trusted before any exists.
      for (const c of configs) {
        const bundle = bundleOf(c.config);
        if (!bundle || trusts(bundle, ca.certPem)) continue;
        const widened = widenedBundle(bundle, ca.certPem, now());
        const patch = webhookPatch(c.config, widened, webhookPath(c.kind, apiPath));
        await api.patch(webhookConfigPath(c.kind, module), patch, "json");
        written.push(`${c.kind} ${module} (widened)`);
        c.config = (await api.get<WebhookConfiguration>(webhookConfigPath(c.kind, module)))!;
      }
      const caEnd = Date.parse(new X509Certificate(ca.certPem).validTo);
      const pair = issueServing(
        ca,
        `${module} admission CA`,
        servingNames(module, ns),
        LIFETIMES.servingDays,
        now(),
        caEnd,
      );
      const data = { "tls.crt": b64(pair.certPem), "tls.key": b64(pair.keyPem), "ca.crt": b64(ca.certPem) };
      if (tls) await replaceData(ns, names.tls, tls, data);
      else await createSecret(ns, names.tls, data, "kubernetes.io/tls");
      say({
        message: `${verdict.action === "make" ? "made" : "renewed"} the admission serving certificate`,
        why: verdict.why,
      });
    }
  }

  // 4. The Deployments onto the pair in the Secret (cert-manager's too: it renews, Pepr does not reload).
  const tlsNow = await api.get<Secret>(secretPath(ns, names.tls));
  const crt = tlsNow?.data?.["tls.crt"];
  const deadline = now() + (cfg.rolloutTimeoutMs ?? 600_000);
  const deployments = [module, `${module}-watcher`];
  const waitFor: string[] = [];
  if (crt)
    for (const name of deployments) {
      const d = await api.get<Deployment>(deploymentPath(ns, name));
      if (!d) continue;
      if (d.spec?.template?.metadata?.annotations?.[SERVING_ANNOTATION] === pairId(crt)) continue;
      await api.patch(
        deploymentPath(ns, name),
        { spec: { template: { metadata: { annotations: { [SERVING_ANNOTATION]: pairId(crt) } } } } },
        "merge",
      );
      written.push(`Deployment ${ns}/${name} (restarted)`);
      // A fresh install's pods wait for the Secret: none serves an older pair, so none is waited for.
      if ((d.status?.availableReplicas ?? 0) > 0) waitFor.push(name);
    }
  // Narrowing drops the old CA: only once every pod serves the new pair.
  if (ca && configs.some((c) => bundleOf(c.config) && !trustsOnly(bundleOf(c.config), ca!.certPem)))
    for (const name of deployments) if (!waitFor.includes(name)) waitFor.push(name);
  for (const name of waitFor) {
    for (;;) {
      const d = await api.get<Deployment>(deploymentPath(ns, name));
      if (!d || rolledOut(d)) break;
      if (now() > deadline)
        throw new Error(
          `Deployment ${ns}/${name} has not rolled out onto the serving certificate in ${Math.round((cfg.rolloutTimeoutMs ?? 600_000) / 1000)} s (kubectl -n ${ns} rollout status deployment/${name}); the next keeper run finishes what this one began`,
        );
      await new Promise((r) => setTimeout(r, 2000));
    }
    say({ message: "rolled out onto the serving certificate", deployment: `${ns}/${name}` });
  }

  // 5. The webhooks: the CA alone, the API path.
  for (const c of configs) {
    const patch = webhookPatch(c.config, ca ? b64(ca.certPem) : undefined, webhookPath(c.kind, apiPath));
    if (!patch.length) continue;
    await api.patch(webhookConfigPath(c.kind, module), patch, "json");
    written.push(`${c.kind} ${module}`);
  }
  say({ message: written.length ? "kept" : "nothing to do", written });
  return written;
}
