// Local mode's Custodian (decision 0021): beside each local Harness, the real Custodian process
// (custodian/), run with exactly what its pod would mount: the `<sandbox>-custodian` ConfigMap's
// config, the values its projected volume would hold (the token Secret and each held Secret key,
// read from the API server and written 0600 into a 0700 directory), and, with a bound host, its
// own CA (`<sandbox>-custodian-ca`, decision 0037), kept in step as the kubelet keeps a mounted
// Secret (syncLocalCa). The Harness beside it trusts the installation root (the `jr2-ca`
// ConfigMap) and gets the pod's env with the pod's paths and the Custodian's address mapped to
// this machine's (localHarnessEnv). Used only when the Orchestrator runs outside the cluster.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  boundHosts,
  CA_CERT_KEY,
  CA_KEY_KEY,
  CUSTODIAN_CONFIG_KEY,
  CUSTODIAN_PORT,
  HARNESS_CA_DIR,
  HARNESS_CA_KEY,
  custodianConfigMapName,
  parseCustodianConfigText,
} from "../../api/custodian-config";
import type { EnvVar } from "../../api/crd/generated/corev1";
import { CUSTODIAN_ENV } from "../../api/env";
import {
  CA_CONFIGMAP,
  CONVERSATIONS_DIR,
  SANDBOX_TOKEN_KEY,
  WORK_ROOT,
  custodianCaSecretName,
  tokenSecretName,
} from "../../api/wire";
import { kubeRequest } from "../../lib/kube";
import { companionCommand, hostEnv, startDetached, stopPid } from "./local-process";

export type LocalCustodian = {
  pid: number;
  /** The routes and the proxy, on loopback. */
  url: string;
  /** Where the Harness finds the root's certificate (the pod's /etc/jr2/ca/ca.crt). */
  caFile: string;
  /** The pod's /conversations, here. */
  conversationsDir: string;
  stop(): Promise<void>;
};

type Secret = { data?: Record<string, string> };
const enc = encodeURIComponent;
const apiOf = (namespace: string) => `/api/v1/namespaces/${enc(namespace)}`;
const file = (path: string, data: string | Buffer) => writeFileSync(path, data, { mode: 0o600 });

/**
 * Local mode's kubelet for the Custodian's CA: the Sandbox's CA Secret's `tls.crt` and `tls.key`
 * written into `<dir>/ca` where they differ, each a new file renamed over the old (as the kubelet
 * swaps a Secret's files), so the running Custodian reads a rotated CA (decision 0037).
 */
export async function syncLocalCa(namespace: string, sandbox: string, dir: string): Promise<void> {
  const name = custodianCaSecretName(sandbox);
  const secret = await kubeRequest<Secret>("GET", `${apiOf(namespace)}/secrets/${enc(name)}`);
  const caDir = join(dir, "ca");
  mkdirSync(caDir, { recursive: true, mode: 0o700 });
  for (const key of [CA_KEY_KEY, CA_CERT_KEY]) {
    const b64 = secret.data?.[key];
    if (b64 === undefined) throw new Error(`Secret ${name} has no key ${key}`);
    const path = join(caDir, key);
    const data = Buffer.from(b64, "base64");
    if (data.equals(readOr(path))) continue;
    file(`${path}.new`, data);
    renameSync(`${path}.new`, path);
  }
}

const readOr = (path: string) => {
  try {
    return readFileSync(path);
  } catch {
    return Buffer.alloc(0);
  }
};

/** Writes the pod's Custodian files under `dir` from the API server and starts the process. */
export async function startLocalCustodian(namespace: string, sandbox: string, dir: string): Promise<LocalCustodian> {
  const api = apiOf(namespace);
  const cm = await kubeRequest<{ data?: Record<string, string> }>(
    "GET",
    `${api}/configmaps/${enc(custodianConfigMapName(sandbox))}`,
  );
  const text = cm.data?.[CUSTODIAN_CONFIG_KEY];
  if (text === undefined)
    throw new Error(`ConfigMap ${custodianConfigMapName(sandbox)} has no ${CUSTODIAN_CONFIG_KEY}`);
  const parsed = parseCustodianConfigText(text);
  if (!parsed.ok) throw new Error(`ConfigMap ${custodianConfigMapName(sandbox)}: ${parsed.message}`);

  const secrets = new Map<string, Secret>();
  const secret = async (name: string) => {
    if (!secrets.has(name)) secrets.set(name, await kubeRequest<Secret>("GET", `${api}/secrets/${enc(name)}`));
    return secrets.get(name)!;
  };
  const value = async (name: string, key: string) => {
    const b64 = (await secret(name)).data?.[key];
    if (b64 === undefined) throw new Error(`Secret ${name} has no key ${key}`);
    return Buffer.from(b64, "base64");
  };

  const configDir = join(dir, "config");
  const valuesDir = join(dir, "values");
  const caDir = join(dir, "ca");
  const harnessCaDir = join(dir, "harness-ca");
  const conversationsDir = join(dir, "conversations");
  for (const d of [configDir, valuesDir, harnessCaDir, conversationsDir])
    mkdirSync(d, { recursive: true, mode: 0o700 });
  file(join(configDir, CUSTODIAN_CONFIG_KEY), text);
  // The projected volume's files: the token, then each held value by the file name it is mounted as
  // (compose.ts heldFileName: `<secret>__<key>`).
  file(join(valuesDir, SANDBOX_TOKEN_KEY), await value(tokenSecretName(sandbox), SANDBOX_TOKEN_KEY));
  for (const h of parsed.config.held) {
    const [name, key] = h.value.split("__");
    if (!name || !key) throw new Error(`held value file ${h.value} is not <secret>__<key>`);
    file(join(valuesDir, h.value), await value(name, key));
  }
  // Its own CA where a host is bound (the pod mounts it then alone); the Harness trusts the root.
  if (boundHosts(parsed.config.held).length) await syncLocalCa(namespace, sandbox, dir);
  const trust = await kubeRequest<{ data?: Record<string, string> }>("GET", `${api}/configmaps/${CA_CONFIGMAP}`);
  const root = trust.data?.[HARNESS_CA_KEY];
  if (root === undefined) throw new Error(`ConfigMap ${CA_CONFIGMAP} has no ${HARNESS_CA_KEY}`);
  file(join(harnessCaDir, HARNESS_CA_KEY), root);

  const [cmd, args] = companionCommand("custodian");
  const { pid, port } = await startDetached(
    cmd,
    args,
    {
      ...hostEnv(),
      [CUSTODIAN_ENV.configFile]: join(configDir, CUSTODIAN_CONFIG_KEY),
      [CUSTODIAN_ENV.valuesDir]: valuesDir,
      [CUSTODIAN_ENV.caDir]: caDir,
      [CUSTODIAN_ENV.port]: "0",
      [CUSTODIAN_ENV.healthPort]: "0",
      [CUSTODIAN_ENV.healthHost]: "127.0.0.1",
    },
    join(dir, "custodian.log"),
    /"message":"listening","port":(\d+)/,
    "Custodian",
  );
  return {
    pid,
    url: `http://127.0.0.1:${port}`,
    caFile: join(harnessCaDir, HARNESS_CA_KEY),
    conversationsDir,
    stop: () => stopPid(pid),
  };
}

/**
 * The Harness's env as its pod has it (the CR's literal `env`), with the pod's places mapped to
 * this machine's: the Custodian's loopback address to the local one, the CA certificate, the
 * conversations directory and /work. Entries drawn from elsewhere (valueFrom) are left out: a
 * local Harness has no pod to draw them from.
 */
export function localHarnessEnv(
  env: EnvVar[] | undefined,
  local: { custodianUrl: string; caFile: string; conversationsDir: string; workRoot: string },
): Record<string, string> {
  const podUrl = `http://127.0.0.1:${CUSTODIAN_PORT}`;
  const paths: Array<[string, string]> = [
    [`${HARNESS_CA_DIR}/${HARNESS_CA_KEY}`, local.caFile],
    [CONVERSATIONS_DIR, local.conversationsDir],
    [WORK_ROOT, local.workRoot],
  ];
  const out: Record<string, string> = {};
  for (const e of env ?? []) {
    if (e.value === undefined) continue;
    let v = e.value;
    if (v === podUrl) v = local.custodianUrl;
    for (const [from, to] of paths) if (v === from) v = to;
    out[e.name] = v;
  }
  return out;
}
