// The real Effector program (effector/main.ts under tsx) started for a test, in directories of its
// own, and a client that signs its requests as the Orchestrator does (api/effector-wire.ts).
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { EFFECTOR_ENV as E } from "../../api/env";
import { signRequest, SIGNATURE_HEADERS } from "../../api/effector-wire";
import { running } from "../../dev/child";

const ROOT = join(__dirname, "..", "..");
export const TSX = join(ROOT, "node_modules", ".bin", "tsx");

export type EffectorDirs = {
  base: string;
  work: string;
  repos: string;
  secrets: string;
  git: string;
  scratch: string;
  keyFile: string;
};

export function effectorDirs(): EffectorDirs {
  const base = mkdtempSync(join(tmpdir(), "jr2-effector-"));
  const d = {
    base,
    work: join(base, "work"),
    repos: join(base, "repos"),
    secrets: join(base, "secrets"),
    git: join(base, "secrets", "@git"),
    scratch: join(base, "scratch"),
    keyFile: join(base, "own", "key"),
  };
  for (const p of [d.work, d.repos, d.git, d.scratch, join(base, "own")])
    mkdirSync(p, { recursive: true, mode: 0o700 });
  return d;
}

export const newKey = () => randomBytes(32).toString("base64url");

export type RunningEffector = {
  url: string;
  child: ChildProcess;
  out: () => string;
  err: () => string;
  stop(): Promise<void>;
};

export function effectorEnv(d: EffectorDirs, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: d.scratch,
    [E.port]: "0",
    [E.work]: d.work,
    [E.repos]: d.repos,
    [E.key]: d.keyFile,
    [E.secrets]: d.secrets,
    [E.git]: d.git,
    [E.scratch]: d.scratch,
    [E.confine]: join(d.base, "no-jr2-confine"),
    [E.podIp]: "127.0.0.1",
    [E.node]: "jr2-node-test",
    ...extra,
  };
}

/** Starts the Effector; resolves once it logs `listening`. */
export async function startEffector(d: EffectorDirs, extra: Record<string, string> = {}): Promise<RunningEffector> {
  // Node itself with tsx's loader, not tsx's CLI: a SIGKILL to the CLI would leave its node child
  // running, holding this process's pipes (and jest from exiting).
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "effector", "main.ts")], {
    env: effectorEnv(d, extra),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the Effector did not listen: ${out}${err}`)), 30_000);
    const check = () => {
      const m = /"message":"listening","port":(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the Effector exited ${code}: ${out}${err}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    out: () => out,
    err: () => err,
    stop: async () => {
      if (!running(child)) return;
      const gone = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await gone;
    },
  };
}

export type Signed = { status: number; text: string; json: unknown; nonce: string; signature?: string };

/** A request signed as the Orchestrator signs it; `tamper` changes what is sent after signing. */
export async function signedRequest(
  url: string,
  key: string,
  method: string,
  path: string,
  body = "",
  opt: { pod?: string; time?: number; nonce?: string; sendBody?: string; headers?: Record<string, string> } = {},
): Promise<Signed> {
  const nonce = opt.nonce ?? randomBytes(18).toString("base64url");
  const headers = signRequest(key, {
    method,
    path,
    body,
    pod: opt.pod ?? "127.0.0.1",
    time: opt.time ?? Date.now(),
    nonce,
  });
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { ...headers, ...(body ? { "content-type": "application/json" } : {}), ...opt.headers },
    body: method === "GET" ? undefined : (opt.sendBody ?? body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return {
    status: res.status,
    text,
    json,
    nonce,
    signature: res.headers.get(SIGNATURE_HEADERS.signature) ?? undefined,
  };
}

export const writeKey = (d: EffectorDirs, key: string) => writeFileSync(d.keyFile, `${key}\n`, { mode: 0o600 });
