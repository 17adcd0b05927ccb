// The Effector's settings, from its container's env (api/env.ts EFFECTOR_ENV; compose.ts
// effectorContainer writes them). Pure: `env` in, settings or the one field that is wrong out.
import { dirname, join } from "node:path";
import { EFFECTOR_ENV as E } from "../api/env";
import { EFFECTOR_PORT, EFFECTOR_SECRETS_DIR, GIT_CREDENTIALS_ROOT, WORK_ROOT } from "../api/wire";

export type EffectorConfig = {
  port: number;
  /** The pod's /work (read-only here) and /repos (the Repo caches, read-only). */
  work: string;
  repos: string;
  keyFile: string;
  /** Effect secrets at `<secrets>/<secret>/<key>`; push Secrets at `<git>/<name>/`. */
  secrets: string;
  git: string;
  /** The emptyDir that is this container's HOME and outlives a restart of it (not of the pod). */
  scratch: string;
  requireCommands: boolean;
  confine: string;
  caFile?: string;
  podName: string;
  /** What a signed request must be meant for (decision 0070). */
  podIp: string;
  node: string;
};

export type ConfigResult = { ok: true; config: EffectorConfig } | { ok: false; message: string };

/** The program's own file: the bundle (dist/companions/effector.js) or effector/main.ts under tsx. */
export const programFile = () => process.argv[1] ?? __filename;

export function readConfig(env: NodeJS.ProcessEnv): ConfigResult {
  const rawPort = env[E.port] ?? String(EFFECTOR_PORT);
  const port = Number(rawPort);
  if (rawPort === "" || !Number.isInteger(port) || port < 0 || port > 65535)
    return { ok: false, message: `${E.port}=${rawPort} is not a port number: set it to 0-65535 (the pod's is 8082)` };
  const podIp = env[E.podIp] ?? "";
  if (!podIp)
    return {
      ok: false,
      message: `${E.podIp} is not set: a signed request names the pod it is meant for; set it from the downward API (status.podIP)`,
    };
  const abs = (name: string, fallback: string): string | { bad: string } => {
    const v = env[name] || fallback;
    return v.startsWith("/") ? v : { bad: `${name}=${v} is not an absolute path: set it to the mount's path` };
  };
  const paths = {
    work: abs(E.work, WORK_ROOT),
    repos: abs(E.repos, "/repos"),
    keyFile: abs(E.key, "/run/jr2/effector/key"),
    secrets: abs(E.secrets, EFFECTOR_SECRETS_DIR),
    git: abs(E.git, GIT_CREDENTIALS_ROOT),
    scratch: abs(E.scratch, "/run/jr2/scratch"),
  };
  for (const v of Object.values(paths)) if (typeof v !== "string") return { ok: false, message: v.bad };
  const p = paths as Record<keyof typeof paths, string>;
  return {
    ok: true,
    config: {
      port,
      ...p,
      requireCommands: env[E.requireCommands] === "1",
      confine: env[E.confine] || join(dirname(programFile()), "jr2-confine"),
      caFile: env[E.ca] || undefined,
      podName: env[E.podName] ?? "",
      podIp,
      node: env[E.node] || "(unknown node)",
    },
  };
}
