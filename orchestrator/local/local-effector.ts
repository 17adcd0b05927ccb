// Local mode's Sandbox Effector (decision 0070): beside a local Harness whose Sandbox has an
// `effector` sidecar, the real Effector program (effector/), run as its pod would run it: its key
// from the `<sandbox>-effector` Secret, the push Secrets of spec.gitCredentials at
// `<podDir>/secrets/@git/<name>/<key>`, the Secrets its sidecar mounts under /run/jr2/secrets at
// the same place under `<podDir>/secrets` (each file 0600, read from the API server as a kubelet
// would), the ConfigMaps it mounts (the pod config's trust bundle) under `<podDir>/effector/etc`,
// /work the local Harness's, a scratch of its own, and POD_IP 127.0.0.1 (what the Orchestrator
// signs for here). jr2-confine is the one JR2_EFFECTOR_CONFINE names in the Orchestrator's own
// env (no bundle here carries it): unset, the Effector finds none and refuses credentialed commands
// (decision 0072). Used only when the Orchestrator runs outside the cluster.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { SandboxModel } from "../../api/crd";
import { EFFECTOR_ENV } from "../../api/env";
import { EFFECTOR, EFFECTOR_KEY_KEY, EFFECTOR_SECRETS_DIR, effectorKeySecretName } from "../../api/wire";
import { kubeRequest } from "../../lib/kube";
import { companionCommand, hostEnv, startDetached, stopPid } from "./local-process";

export type LocalEffector = { pid: number; url: string; pod: string; stop(): Promise<void> };

type Secret = { data?: Record<string, string> };
type ConfigMap = { data?: Record<string, string> };
type KeyToPath = { key: string; path: string };
const enc = encodeURIComponent;
const file = (path: string, data: Buffer | string) => {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  writeFileSync(path, data, { mode: 0o600 });
};

/** The Sandbox's `effector` sidecar, when it has one. */
export const effectorSidecar = (sandbox: SandboxModel) => sandbox.spec?.sidecars?.find((c) => c.name === EFFECTOR);

/** Each ConfigMap file the sidecar's pod would mount: [its path in the pod, ConfigMap, key]. */
export function mountedConfigMapFiles(sandbox: SandboxModel): Array<[string, string, string]> {
  const out: Array<[string, string, string]> = [];
  for (const m of effectorSidecar(sandbox)?.volumeMounts ?? []) {
    const cm = sandbox.spec?.volumes?.find((x) => x.name === m.name)?.configMap;
    if (!cm?.name) continue;
    for (const i of (cm.items ?? []) as KeyToPath[]) out.push([join(m.mountPath, i.path), cm.name, i.key]);
  }
  return out;
}

/** Each Secret file the sidecar's pod would mount under /run/jr2/secrets: [path under it, Secret, key]. */
export function mountedSecretFiles(sandbox: SandboxModel): Array<[string, string, string | undefined]> {
  const sidecar = effectorSidecar(sandbox);
  const out: Array<[string, string, string | undefined]> = [];
  for (const m of sidecar?.volumeMounts ?? []) {
    if (m.mountPath !== EFFECTOR_SECRETS_DIR && !m.mountPath.startsWith(`${EFFECTOR_SECRETS_DIR}/`)) continue;
    const under = m.mountPath.slice(EFFECTOR_SECRETS_DIR.length).replace(/^\//, "");
    const v = sandbox.spec?.volumes?.find((x) => x.name === m.name);
    const sources: Array<{ name?: string; items?: KeyToPath[] }> = [
      ...(v?.secret?.secretName
        ? [{ name: v.secret.secretName, items: v.secret.items as KeyToPath[] | undefined }]
        : []),
      ...(v?.projected?.sources ?? []).flatMap((s) =>
        s.secret?.name ? [{ name: s.secret.name, items: s.secret.items as KeyToPath[] | undefined }] : [],
      ),
    ];
    for (const s of sources) {
      if (!s.items?.length) out.push([under, s.name!, undefined]);
      else for (const i of s.items) out.push([join(under, i.path), s.name!, i.key]);
    }
  }
  return out;
}

export async function startLocalEffector(
  namespace: string,
  sandbox: SandboxModel,
  podDir: string,
  dirs: { work: string; repos: string },
): Promise<LocalEffector> {
  const name = sandbox.metadata!.name!;
  const api = `/api/v1/namespaces/${enc(namespace)}`;
  const secret = (n: string) => kubeRequest<Secret>("GET", `${api}/secrets/${enc(n)}`);
  const root = join(podDir, "effector");
  const secretsDir = join(root, "secrets");
  const gitDir = join(secretsDir, "@git");
  const scratch = join(root, "scratch");
  const keyFile = join(root, "own", EFFECTOR_KEY_KEY);
  for (const d of [root, secretsDir, gitDir, scratch]) mkdirSync(d, { recursive: true, mode: 0o700 });

  const keyB64 = (await secret(effectorKeySecretName(name))).data?.[EFFECTOR_KEY_KEY];
  if (keyB64 === undefined) throw new Error(`Secret ${effectorKeySecretName(name)} has no key ${EFFECTOR_KEY_KEY}`);
  file(keyFile, Buffer.from(keyB64, "base64"));
  for (const { name: cred } of sandbox.spec?.gitCredentials ?? [])
    for (const [k, v] of Object.entries((await secret(cred)).data ?? {}))
      file(join(gitDir, cred, k), Buffer.from(v, "base64"));
  for (const [path, secretName, key] of mountedSecretFiles(sandbox)) {
    const data = (await secret(secretName)).data ?? {};
    if (key === undefined)
      for (const [k, v] of Object.entries(data)) file(join(secretsDir, path, k), Buffer.from(v, "base64"));
    else if (data[key] !== undefined) file(join(secretsDir, path), Buffer.from(data[key], "base64"));
  }

  // The ConfigMaps it mounts, each at its pod path under `etc`, and the env naming them mapped there.
  const etc = join(root, "etc");
  for (const [path, cmName, key] of mountedConfigMapFiles(sandbox)) {
    const data = (await kubeRequest<ConfigMap>("GET", `${api}/configmaps/${enc(cmName)}`)).data ?? {};
    if (data[key] !== undefined) file(join(etc, path), data[key]);
  }
  const podEnv = (n: string) => effectorSidecar(sandbox)?.env?.find((e) => e.name === n)?.value;
  const ca = podEnv(EFFECTOR_ENV.ca);
  const confine = process.env[EFFECTOR_ENV.confine];

  const [cmd, args] = companionCommand("effector");
  const { pid, port } = await startDetached(
    cmd,
    args,
    {
      ...hostEnv(),
      HOME: scratch,
      [EFFECTOR_ENV.port]: "0",
      [EFFECTOR_ENV.work]: dirs.work,
      [EFFECTOR_ENV.repos]: dirs.repos,
      [EFFECTOR_ENV.key]: keyFile,
      [EFFECTOR_ENV.secrets]: secretsDir,
      [EFFECTOR_ENV.git]: gitDir,
      [EFFECTOR_ENV.scratch]: scratch,
      ...(ca ? { [EFFECTOR_ENV.ca]: join(etc, ca) } : {}),
      ...(confine ? { [EFFECTOR_ENV.confine]: confine } : {}),
      ...(podEnv(EFFECTOR_ENV.requireCommands) ? { [EFFECTOR_ENV.requireCommands]: "1" } : {}),
      [EFFECTOR_ENV.podName]: name,
      [EFFECTOR_ENV.podIp]: "127.0.0.1",
      [EFFECTOR_ENV.node]: sandbox.status?.nodeName ?? "local",
    },
    join(podDir, "effector.log"),
    /"message":"listening","port":(\d+)/,
    "Effector",
  );
  return { pid, url: `http://127.0.0.1:${port}`, pod: "127.0.0.1", stop: () => stopPid(pid) };
}
