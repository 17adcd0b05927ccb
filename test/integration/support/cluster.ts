// What integration tests share: a namespace per test file, waits on real objects, and the
// operator's control endpoint. Everything talks to the real API server through the typed models.
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { RepoModel, SandboxModel, type SandboxSpec } from "../../../api/crd";
import { SANDBOX_NAMESPACE_ENABLED, SANDBOX_NAMESPACE_LABEL } from "../../../api/wire";

/**
 * A fresh namespace for this test file, deleted (not waited for) after it. Opted in to hold
 * Sandboxes (`jr2.dev/sandboxes: enabled`), which admission wants of a Sandbox create (decision
 * 0067), unless `optedIn: false` asks for a namespace the installation did not opt in.
 */
export function useNamespace(prefix: string, { optedIn = true }: { optedIn?: boolean } = {}): { name: string } {
  const ns = { name: `${prefix}-${randomBytes(3).toString("hex")}` };
  beforeAll(async () => {
    const labels = {
      "jr2.dev/test": prefix,
      ...(optedIn ? { [SANDBOX_NAMESPACE_LABEL]: SANDBOX_NAMESPACE_ENABLED } : {}),
    };
    await K8s(kind.Namespace).Apply({ metadata: { name: ns.name, labels } });
  });
  afterAll(async () => {
    await K8s(kind.Namespace).Delete(ns.name);
  });
  return ns;
}

export type Sbx = SandboxModel & {
  metadata: { name: string; namespace: string; uid: string; resourceVersion: string };
};

/** Polls `read` until `done` holds; on timeout fails naming what it waited for and what it last saw. */
export async function waitFor<T>(
  what: string,
  read: () => Promise<T>,
  done: (v: T) => boolean,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  let lastErr: unknown;
  for (;;) {
    try {
      last = await read();
      if (done(last)) return last;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline) {
      const seen =
        lastErr && last === undefined
          ? String((lastErr as Error).message ?? JSON.stringify(lastErr))
          : JSON.stringify(last, null, 1);
      throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}; last seen: ${seen?.slice(0, 3000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const getSandbox = (ns: string, name: string) => K8s(SandboxModel).InNamespace(ns).Get(name) as Promise<Sbx>;

/** Creates or updates a Repo (server-side apply), with its credential Secret when named. */
export const applyRepo = (namespace: string, name: string, url: string, secret?: string) =>
  K8s(RepoModel).Apply({
    apiVersion: "core.jr2.dev/v1alpha1",
    kind: "Repo",
    metadata: { name, namespace },
    spec: { url, ...(secret ? { secretRef: { name: secret } } : {}) },
  });

export async function createSandbox(
  ns: string,
  name: string,
  spec: Partial<SandboxSpec> = {},
  annotations?: Record<string, string>,
) {
  return (await K8s(SandboxModel).Apply({
    apiVersion: "core.jr2.dev/v1alpha1",
    kind: "Sandbox",
    metadata: { name, namespace: ns, ...(annotations ? { annotations } : {}) },
    spec: { image: "ghcr.io/example/harness:1", ...spec },
  })) as Sbx;
}

export const waitPhase = (ns: string, name: string, phase: string, timeoutMs?: number) =>
  waitFor(
    `Sandbox ${ns}/${name} phase ${phase}`,
    () => getSandbox(ns, name),
    (s) => s.status?.phase === phase,
    timeoutMs,
  );

export const condition = (s: Sbx | undefined, type: string) => s?.status?.conditions?.find((c) => c.type === type);

export async function listPods(ns: string, sandbox?: string) {
  const q = K8s(kind.Pod).InNamespace(ns);
  return (sandbox ? await q.WithLabel("sandbox.jr2.dev/name", sandbox).Get() : await q.Get()).items;
}

/** Events the operator recorded on a Sandbox. */
export async function eventsFor(ns: string, name: string) {
  const list = await K8s(kind.CoreEvent).InNamespace(ns).Get();
  return list.items.filter((e) => e.involvedObject?.kind === "Sandbox" && e.involvedObject.name === name);
}

/** Asks the global setup to kill (as a crash) or start the operator. */
export async function operator(action: "kill" | "start", opts: { qps?: number } = {}): Promise<void> {
  const query = opts.qps ? `?qps=${opts.qps}` : "";
  const res = await fetch(`${process.env.JR2_TEST_CONTROL}/${action}${query}`, { method: "POST" });
  if (!res.ok) throw new Error(`operator ${action}: ${res.status} ${await res.text()}`);
}

/**
 * Runs `fn` with the local cluster's kubelets stalled, as nodes that stop reporting: kwok is
 * paused (SIGSTOP) and resumed (SIGCONT) however `fn` ends, so no pod turns Ready meanwhile. Only
 * the local control plane (npm run cluster), whose kubeconfig sits beside kwokctl's pid files.
 */
export async function withKubeletsStalled<T>(fn: () => Promise<T>): Promise<T> {
  const pidFile = join(dirname(process.env.KUBECONFIG ?? ""), "pids", "kwok-controller.pid");
  if (!existsSync(pidFile)) {
    throw new Error(`no kwok pid file at ${pidFile}: this test needs the local cluster (npm run cluster -- up)`);
  }
  const pid = Number(readFileSync(pidFile, "utf8").trim());
  process.kill(pid, "SIGSTOP");
  try {
    return await fn();
  } finally {
    process.kill(pid, "SIGCONT");
  }
}
