// What one installation shares across its Sandboxes, made sure of once at the Orchestrator's boot
// (decision 0021): the pod config (pod-config.ts) read from its file, the root CA (a
// `kubernetes.io/tls` Secret, created once and never rotated here, read by the Orchestrator alone:
// it signs each Sandbox's Custodian CA, decision 0037) and its certificate as the `jr2-ca`
// ConfigMap the Harness containers trust. The namespace's two NetworkPolicies are the operator's,
// kept in every namespace that holds Sandboxes (api/sandbox-policies.ts, decision 0047).
import { readFileSync } from "node:fs";
import { CA_CERT_KEY, CA_KEY_KEY, HARNESS_CA_KEY, viaAddress, viaProblem } from "../../api/custodian-config";
import { ORCHESTRATOR_ENV as E } from "../../api/env";
import { EGRESS, EGRESS_ADMIN_PORT, EGRESS_PROXY_PORT } from "../../api/egress-point";
import {
  CA_CONFIGMAP,
  COMPANION_NAMESPACE,
  CUSTODIAN_CA_SECRET,
  ORCHESTRATOR_FIELD_MANAGER,
  PART_OF_JR2,
} from "../../api/wire";
import { ApiError } from "../../lib/api-error";
import { urlWithoutCredentials } from "../../lib/redact";
import { issueCa, type CaPem } from "../../lib/ca";
import { applyRequest, kubeRequest } from "../../lib/kube";
import { ORCHESTRATOR, ORCHESTRATOR_PORT } from "../orchestrator-manifests";
import { DEFAULT_POD_CONFIG, parsePodConfig, withCompanionsImage, type PodConfig } from "./pod-config";

/** The companions image a Custodian and an Effector run when nothing says otherwise (`npm run build`'s
 * tag for local use; the Orchestrator's manifest sets JR2_CUSTODIAN_IMAGE to its own image). */
export const DEFAULT_CUSTODIAN_IMAGE = "jr2/companions:local";
/** The Orchestrator's Service in its default namespace. */
export const DEFAULT_ORCHESTRATOR_URL = `http://${ORCHESTRATOR}.${COMPANION_NAMESPACE}.svc:${ORCHESTRATOR_PORT}`;

const enc = encodeURIComponent;

/** The egress point (decision 0051): its proxy as a Sandbox pod reaches it, its admin listener as
 * the Orchestrator does, and, when it is the installation's own Service, where its replicas are
 * listed (its EndpointSlices): each replica keeps its own log, read from each (decision 0076). */
export type EgressSettings = {
  proxyUrl: string;
  adminUrl: string;
  replicas?: { namespace: string; service: string; port: number };
};

export type PodSettings = {
  config: PodConfig;
  custodianImage: string;
  orchestratorUrl: string;
  /** Absent outside a cluster (local mode): the Custodian keeps its own tunnel list. */
  egress?: EgressSettings;
};

/** The egress point's settings from the environment: its Service in `namespace` unless
 * JR2_EGRESS_URL names another (`off`: none). Absent outside a cluster unless named. */
export function egressSettingsFrom(env: NodeJS.ProcessEnv, namespace: string | undefined): EgressSettings | undefined {
  const named = env[E.egressUrl];
  if (named === "off") return undefined;
  const service = namespace ? `${EGRESS}.${namespace}.svc` : undefined;
  const proxyUrl = named || (service ? `http://${service}:${EGRESS_PROXY_PORT}` : undefined);
  if (!proxyUrl) return undefined;
  // The url becomes each Custodian's egress.via: judged here by the same rule, at boot.
  const problem = viaProblem(proxyUrl);
  if (problem)
    throw new Error(`${E.egressUrl}: ${JSON.stringify(urlWithoutCredentials(proxyUrl))} ${problem}; or write off`);
  const adminUrl = env[E.egressAdminUrl] || `http://${service ?? viaAddress(proxyUrl).host}:${EGRESS_ADMIN_PORT}`;
  // The installation's Service (by default, or named by its cluster name): each of its replicas is
  // read. Any other url, or an admin url named by hand, is one egress point read as such.
  const ofService = new RegExp(`^${EGRESS}\\.([a-z0-9-]+)\\.svc(\\.|$)`).exec(viaAddress(proxyUrl).host);
  const replicasIn = named ? ofService?.[1] : namespace;
  const replicas =
    replicasIn && !env[E.egressAdminUrl]
      ? { namespace: replicasIn, service: EGRESS, port: EGRESS_ADMIN_PORT }
      : undefined;
  return { proxyUrl, adminUrl: adminUrl.replace(/\/$/, ""), ...(replicas ? { replicas } : {}) };
}

/** The pod settings from the environment; throws naming the variable or file and the fix. `tls`:
 * the API is served over TLS, so the Custodians' default url is https. */
export function podSettingsFrom(env: NodeJS.ProcessEnv, tls = false): PodSettings {
  const file = env[E.podConfigFile];
  let config = DEFAULT_POD_CONFIG;
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (err) {
      throw new Error(`${E.podConfigFile}: ${file} cannot be read (${(err as NodeJS.ErrnoException).code})`);
    }
    config = parsePodConfig(text, file);
  }
  const ns = env[E.podNamespace];
  const scheme = tls ? "https" : "http";
  const orchestratorUrl =
    env[E.selfUrl] ||
    (ns
      ? `${scheme}://${ORCHESTRATOR}.${ns}.svc:${ORCHESTRATOR_PORT}`
      : DEFAULT_ORCHESTRATOR_URL.replace(/^http/, scheme));
  const egress = egressSettingsFrom(env, ns);
  // The companions image (this Orchestrator's own, as its manifest says): the Custodian's and, by
  // default, the Effector's, whose command is jr2's program in it (decision 0070).
  const companions = env[E.custodianImage] || DEFAULT_CUSTODIAN_IMAGE;
  return {
    config: withCompanionsImage(config, companions),
    custodianImage: config.custodian.image ?? companions,
    orchestratorUrl,
    ...(egress ? { egress } : {}),
  };
}

/** The CA Secret (created if absent) and the `jr2-ca` ConfigMap from its certificate. */
export async function ensureInstallation(namespace: string): Promise<void> {
  const { certPem } = await ensureInstallationCa(namespace);
  await apply(`/api/v1/namespaces/${enc(namespace)}/configmaps/${CA_CONFIGMAP}`, {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name: CA_CONFIGMAP, namespace, labels: { ...PART_OF_JR2 } },
    data: { [HARNESS_CA_KEY]: certPem },
  });
}

/** The root CA with its key: the Secret's, or a new CA's written now. Two Orchestrators racing keep the first. */
export async function ensureInstallationCa(namespace: string): Promise<CaPem> {
  const path = `/api/v1/namespaces/${enc(namespace)}/secrets`;
  type Secret = { data?: Record<string, string> };
  const read = async () => {
    try {
      return await kubeRequest<Secret>("GET", `${path}/${CUSTODIAN_CA_SECRET}`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) return undefined;
      throw err;
    }
  };
  let secret = await read();
  if (!secret) {
    const ca = issueCa(`jr2 Custodian CA (${namespace})`);
    const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");
    try {
      secret = await kubeRequest<Secret>("POST", path, {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: CUSTODIAN_CA_SECRET, namespace, labels: { ...PART_OF_JR2 } },
        type: "kubernetes.io/tls",
        data: { [CA_CERT_KEY]: b64(ca.certPem), [CA_KEY_KEY]: b64(ca.keyPem) },
      });
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 409)) throw err;
      secret = await read();
    }
  }
  const pem = (key: string) => {
    const b64 = secret?.data?.[key];
    if (!b64)
      throw new Error(
        `Secret ${namespace}/${CUSTODIAN_CA_SECRET} has no ${key}: delete it and the Orchestrator makes a new CA`,
      );
    return Buffer.from(b64, "base64").toString("utf8");
  };
  return { certPem: pem(CA_CERT_KEY), keyPem: pem(CA_KEY_KEY) };
}

const apply = (path: string, body: unknown) => applyRequest(path, body, ORCHESTRATOR_FIELD_MANAGER);
