// Runs the built Pepr module on this machine against a cluster, in the deployed layout: one
// admission process (the webhooks point at it over TLS) and one watcher process (the controllers),
// as the build's two Deployments run it. Used by `npm start`, the benchmarks and the integration
// tier's global setup (docs/decisions/0005-running-the-module-locally.md, 0027).
//
// Why not `npx pepr dev`: its port is fixed at 3000, its certificate carries DNS names only, it
// rebuilds on every start, and it cannot be stopped and restarted under a test's control. This
// keeps everything Pepr decided in the build (webhook rules, failure policy, ignored namespaces)
// and changes only where the webhooks point.
import { WATCHER_V8_FLAGS, peprStoreCrd } from "../scripts/module-rbac";
import { modulePolicies } from "../capabilities/admission/module-policy";
import { cacheRootFrom } from "../api/env";
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { createPrivateKey } from "node:crypto";
import { request } from "node:https";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import cfg from "../package.json";
import { LOCAL_REPO_ROOTS_ENV, OPERATOR_ENV } from "../api/env";
import { sandboxNamespace } from "../api/sandbox-namespaces";
import * as kubectl from "./kubectl";
import { running, stopper } from "./child";
import {
  DEPLOYED_OPERATOR,
  SANDBOX_DEFAULTS_ENV,
  forOperator,
  sandboxDefaultsModeFrom,
  withSandboxDefaults,
  type SandboxDefaultsMode,
  type Webhook as ScopedWebhook,
} from "../scripts/webhooks";
import { operatorKubeconfig } from "./operator-identity";
import { servingCertificate, type ServingCertificate } from "../lib/serving-certificate";

export const ROOT = join(__dirname, "..");
/** Binaries, cluster state and local operators' files (the control plane uses the same default). */
export const CACHE_DIR = process.env.JR2_CACHE_DIR ?? join(homedir(), ".cache", "jr2");
const uuid = cfg.pepr.uuid;
export const MODULE_JS = join(ROOT, "dist", `pepr-${uuid}.js`);
const MANIFEST = join(ROOT, "dist", `pepr-module-${uuid}.yaml`);

type K8sObject = { apiVersion: string; kind: string; metadata: { name: string }; [k: string]: unknown };
type Webhook = ScopedWebhook & { clientConfig: { url?: string; caBundle?: string; service?: unknown } };

export type LocalOperatorOptions = {
  kubeconfig: string;
  /** Where the certificate, key and log go. */
  stateDir: string;
  /** The admission process's HTTPS port (reviews, its metrics, health). */
  port?: number;
  /** The watcher's HTTPS port (the controllers' metrics, health); default port + 100. */
  watcherPort?: number;
  /** "inherit" prints the module's logs; otherwise they go to <stateDir>/operator.log. */
  logs?: "inherit" | "file";
  logLevel?: string;
  /** Extra environment for the module process. */
  env?: Record<string, string>;
  /** A benchmark's probe (dev/memory-probe.cjs): SIGUSR2 collects garbage and writes what is held here. */
  memoryProbeFile?: string;
  /**
   * Who writes the Sandbox defaults (decision 0059): the API server's policy (Kubernetes 1.36 and
   * newer) or the module's mutating webhook (1.34, 1.35). Default: JR2_SANDBOX_DEFAULTS, else policy.
   */
  sandboxDefaults?: SandboxDefaultsMode;
};

export type LocalOperator = {
  /** Where the webhooks point: the admission process. */
  port: number;
  /** The watcher's /metrics: reconciles, writes, queue, phases. */
  watcherPort: number;
  /** The admission process: judges reviews, watches nothing (PEPR_WATCH_MODE=false). */
  admission: ChildProcess;
  /** The watcher: the Sandbox and Repo controllers, no admission (PEPR_WATCH_MODE=true). */
  watcher: ChildProcess;
  caPem: string;
  /** Who the operator is to the API server (its kubeconfig's user). */
  operator: string;
  /** Both processes' log (one file, lines appended). */
  logFile?: string;
  /** Settles when either process exits, with its role and exit code. */
  exited: Promise<{ role: Role; code: number | null }>;
  /** Both processes still run. */
  running(): boolean;
  /** SIGKILL to both, as a crash: the webhook configurations stay, failing closed. */
  kill(): Promise<void>;
  /** Removes the webhook configurations, then stops both processes. */
  stop(): Promise<void>;
};

type Role = "admission" | "watcher";

/**
 * The build's webhook configurations and API path, re-pointed at https://127.0.0.1:<port>, and its
 * Sandbox defaults written as `defaults` says: the policy and its binding, or the module's mutating
 * webhook (scripts/webhooks.ts withSandboxDefaults, the build's own choice made again).
 */
export function localWebhooks(
  manifestYaml: string,
  port: number,
  caPem: string,
  operator: string,
  defaults: SandboxDefaultsMode = "policy",
) {
  const docs = withSandboxDefaults(
    parseAllDocuments(manifestYaml).map((d) => d.toJS() as K8sObject),
    defaults,
  );
  const secret = docs.find((d) => d.kind === "Secret" && d.metadata.name === `pepr-${uuid}-api-path`) as
    | (K8sObject & { data: { value: string } })
    | undefined;
  if (!secret) throw new Error(`${MANIFEST} has no api-path Secret: rebuild with \`npm run build\``);
  const apiPath = Buffer.from(secret.data.value, "base64").toString();
  const caBundle = Buffer.from(caPem).toString("base64");
  const webhooks = docs
    .filter((d) => d.kind === "MutatingWebhookConfiguration" || d.kind === "ValidatingWebhookConfiguration")
    .map((d) => {
      const kind = d.kind === "MutatingWebhookConfiguration" ? "mutate" : "validate";
      // The operator's own pod creates skip the pod webhook by its identity (decision 0029): here,
      // whoever the local operator's kubeconfig says it is.
      const hooks = (d.webhooks as Webhook[]).map((w) => ({
        ...forOperator(w, operator),
        clientConfig: { url: `https://127.0.0.1:${port}/${kind}/${apiPath}`, caBundle },
      }));
      return { ...d, webhooks: hooks };
    });
  // The Sandbox defaults (decision 0026): CEL the API server runs itself, calling no process; the
  // policy before its binding.
  const policies = ["MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"].flatMap((kind) =>
    docs.filter((d) => d.kind === kind),
  );
  return { apiPath, webhooks, policies };
}

/**
 * The policies holding what the module's identity writes (decision 0069), for the local module:
 * its pods in the Sandbox pod's shape (with the cache root it runs with), its Roles `get` on Secrets
 * by name. Only when it has an identity of its own, the deployed service account's name (decision
 * 0029): with another cluster's kubeconfig it runs as that kubeconfig's user, often the
 * developer's own admin, whose every pod the policy would then hold to a Sandbox pod's shape.
 */
export function localModuleHolds(operator: string, env: NodeJS.ProcessEnv) {
  return operator === DEPLOYED_OPERATOR ? modulePolicies({ username: operator, cacheRoot: cacheRootFrom(env) }) : [];
}

/**
 * What `npx pepr deploy` applies before the module runs and a local run must apply too: the
 * pepr-system namespace and the PeprStore CRD, without which the module never serves (its store
 * is read before the endpoints bind). The CRD is the one the built manifests carry.
 */
export const peprPrerequisites = () => [
  { apiVersion: "v1", kind: "Namespace", metadata: { name: "pepr-system" } },
  peprStoreCrd(),
];

/**
 * A throwaway CA and a serving certificate for 127.0.0.1 and localhost (SANs, not a CN), ECDSA
 * (decision 0032): the API server checks the SANs, and in a burst it handshakes again for most
 * reviews.
 */
export const localCertificate = (): ServingCertificate =>
  servingCertificate({ dnsNames: ["localhost"], ips: ["127.0.0.1"] });

/** The pair an earlier run stored, if it is of the kind localCertificate makes (not RSA, not unreadable). */
function storedCertificate(keyPath: string, certPath: string, caPath: string): ServingCertificate | undefined {
  if (![keyPath, certPath, caPath].every((f) => existsSync(f))) return undefined;
  const keyPem = readFileSync(keyPath, "utf8");
  try {
    if (createPrivateKey(keyPem).asymmetricKeyType !== "ec") return undefined;
  } catch {
    return undefined; // unreadable: a new pair, as for none
  }
  return { keyPem, certPem: readFileSync(certPath, "utf8"), caPem: readFileSync(caPath, "utf8") };
}

export async function startLocalOperator(opts: LocalOperatorOptions): Promise<LocalOperator> {
  if (!existsSync(MODULE_JS) || !existsSync(MANIFEST)) {
    throw new Error(`${MODULE_JS} is missing: run \`npm run build\` first`);
  }
  const port = opts.port ?? 3000;
  mkdirSync(opts.stateDir, { recursive: true });
  const keyPath = join(opts.stateDir, "tls.key");
  const certPath = join(opts.stateDir, "tls.crt");
  const caPath = join(opts.stateDir, "ca.crt");
  // Kept across restarts: the webhooks a killed operator left behind still trust its CA, so a
  // restarted one serves at once instead of failing its own pod creates until they are re-applied.
  const tls = storedCertificate(keyPath, certPath, caPath) ?? localCertificate();
  writeFileSync(keyPath, tls.keyPem, { mode: 0o600 });
  writeFileSync(certPath, tls.certPem);
  writeFileSync(caPath, tls.caPem);
  // The operator's own identity (decision 0029): the deployed service account's name where the
  // cluster's CA is at hand, else the kubeconfig's user; the pod webhook skips its pod creates.
  const operatorConfig = operatorKubeconfig(opts.kubeconfig, opts.stateDir, DEPLOYED_OPERATOR);
  const operator = await kubectl.whoAmI(operatorConfig);
  const defaults = opts.sandboxDefaults ?? sandboxDefaultsModeFrom(process.env);
  const { apiPath, webhooks, policies } = localWebhooks(
    readFileSync(MANIFEST, "utf8"),
    port,
    tls.caPem,
    operator,
    defaults,
  );
  // The module's own writes held as deployed (decision 0069), or, for an identity not its own, said.
  const holds = localModuleHolds(operator, { ...process.env, ...opts.env });
  if (!holds.length)
    process.stderr.write(
      `the local module runs as ${operator}, not an identity of its own: the policies holding its pods and Role ` +
        "(decision 0069) are not registered\n",
    );

  await kubectl.apply(opts.kubeconfig, peprPrerequisites());
  await kubectl.run(opts.kubeconfig, [
    "wait",
    "--for=condition=Established",
    "crd/peprstores.pepr.dev",
    "--timeout=60s",
  ]);

  const logFile = opts.logs === "inherit" ? undefined : join(opts.stateDir, "operator.log");
  const out = logFile ? openSync(logFile, "a") : "inherit";
  const watcherPort = opts.watcherPort ?? port + 100;
  // Pepr's deployed layout (its two Deployments): admission in processes that watch nothing, the
  // controllers in one that serves no review. One process for both (Pepr's dev mode) made every
  // review wait behind the reconciles on the same event loop (decision 0027).
  const spawn = (role: Role, rolePort: number) =>
    fork(MODULE_JS, [], {
      cwd: ROOT,
      // Loopback only: the webhooks point at 127.0.0.1 (dev/loopback.cjs).
      // Not this process's execArgv: under tsx that would load its loader into the module, which is
      // plain JavaScript, and count its memory as the operator's.
      execArgv: [
        "--require",
        join(ROOT, "dev", "loopback.cjs"),
        // As deployed (scripts/module-rbac.ts, decision 0065).
        ...(role === "watcher" ? WATCHER_V8_FLAGS : []),
        // The probe goes in the watcher alone: the process that holds the Sandboxes.
        ...(opts.memoryProbeFile && role === "watcher"
          ? ["--expose-gc", "--require", join(ROOT, "dev", "memory-probe.cjs")]
          : []),
        // A CPU profile per process, written when it stops (a benchmark's look inside).
        ...(process.env.JR2_OPERATOR_CPU_PROF_DIR
          ? [
              "--cpu-prof",
              `--cpu-prof-dir=${process.env.JR2_OPERATOR_CPU_PROF_DIR}`,
              `--cpu-prof-name=${role}.cpuprofile`,
            ]
          : []),
      ],
      env: {
        ...withoutPeprMode(process.env),
        KUBECONFIG: operatorConfig,
        PEPR_WATCH_MODE: role === "watcher" ? "true" : "false",
        PEPR_API_PATH: apiPath,
        SSL_KEY_PATH: keyPath,
        SSL_CERT_PATH: certPath,
        [OPERATOR_ENV.peprPort]: String(rolePort),
        LOG_LEVEL: opts.logLevel ?? process.env.LOG_LEVEL ?? "info",
        ...(opts.memoryProbeFile && role === "watcher" ? { JR2_MEMORY_PROBE_FILE: opts.memoryProbeFile } : {}),
        PEPR_PRETTY_LOGS: opts.logs === "inherit" ? "true" : "false",
        // Local mode's switch (decision 0066): a Repo's url may be a path under these directories
        // (the tests' temp remotes). No built manifest or chart carries it.
        [LOCAL_REPO_ROOTS_ENV]: process.env[LOCAL_REPO_ROOTS_ENV] || tmpdir(),
        ...opts.env,
      },
      stdio: ["ignore", out, out, "ipc"],
    });
  const admission = spawn("admission", port);
  const watcher = spawn("watcher", watcherPort);
  const exitOf = (role: Role, child: ChildProcess) =>
    once(child, "exit").then(([code]) => ({ role, code: code as number | null }));
  const exited = Promise.race([exitOf("admission", admission), exitOf("watcher", watcher)]);
  const stops = [stopper(admission), stopper(watcher)];
  const signal = async (sig: NodeJS.Signals) => {
    await Promise.all(stops.map((stop) => stop(sig)));
  };
  // The webhooks, then each policy's binding, then the policy.
  const removeWebhooks = async () => {
    for (const w of [...webhooks, ...[...policies, ...holds].reverse()]) {
      await kubectl.run(opts.kubeconfig, ["delete", w.kind.toLowerCase(), w.metadata.name, "--ignore-not-found"]);
    }
  };

  try {
    await Promise.race([
      Promise.all([waitHealthy(port, tls.caPem), waitHealthy(watcherPort, tls.caPem)]),
      exited.then(({ role, code }) => {
        throw new Error(
          `the module's ${role} exited with ${code} before it served${logFile ? `; see ${logFile}` : ""}`,
        );
      }),
    ]);
    // Registered only once the module answers, so the webhooks never point at nothing. The policy
    // depends on nothing of the module's, but goes with it, so every path has the same admission.
    if (webhooks.length || policies.length || holds.length) {
      if (policies.length) await requirePolicyServed(opts.kubeconfig);
      await kubectl.apply(opts.kubeconfig, [...policies, ...holds, ...webhooks]);
      await waitJudged(opts.kubeconfig, { defaults: true });
    }
  } catch (err) {
    await signal("SIGKILL");
    throw err;
  }

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await removeWebhooks();
      await signal("SIGTERM");
    })());
  return {
    port,
    watcherPort,
    admission,
    watcher,
    caPem: tls.caPem,
    operator,
    logFile,
    exited,
    running: () => running(admission) && running(watcher),
    kill: () => signal("SIGKILL"),
    stop,
  };
}

/**
 * The policy's API is served (Kubernetes 1.36 and newer), or an error saying what to set instead
 * (decision 0059): an older API server answers the apply with a bare NotFound.
 */
async function requirePolicyServed(kubeconfig: string) {
  const group = JSON.parse(
    await kubectl.run(kubeconfig, ["get", "--raw", "/apis/admissionregistration.k8s.io/v1"]),
  ) as {
    resources?: { name: string }[];
  };
  if (!group.resources?.some((r) => r.name === "mutatingadmissionpolicies")) {
    const server = await kubectl
      .run(kubeconfig, ["get", "--raw", "/version"])
      .then((v) => `Kubernetes ${(JSON.parse(v) as { gitVersion: string }).gitVersion}`)
      .catch(() => "this API server");
    throw new Error(
      `${server} does not serve MutatingAdmissionPolicy v1 (Kubernetes 1.36 and newer do): ` +
        `set ${SANDBOX_DEFAULTS_ENV}=webhook to have the module's webhook write the Sandbox defaults`,
    );
  }
}

/** The caller's environment without PEPR_MODE: "dev" would make each process do both jobs. */
function withoutPeprMode(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { PEPR_MODE: _mode, PEPR_WATCH_MODE: _watch, ...rest } = env;
  return rest;
}

/** Where the probe Sandboxes are judged: a namespace opted in to hold Sandboxes, as admission wants
 * of a Sandbox create (decision 0067); it holds none (every probe is a dry run). */
export const PROBE_NAMESPACE = "jr2-admission-probe";

/**
 * The API server learns of webhook configurations and policies through informers: until a probe
 * is actually judged, a request may pass unjudged. The probe is a server-side dry run of a Sandbox
 * that the validating webhook must refuse (a hostPath volume); with `defaults`, also one of a plain
 * Sandbox that must come back defaulted (fsGroup). Nothing is stored.
 */
async function waitJudged(kubeconfig: string, { defaults }: { defaults: boolean }, timeoutMs = 30_000) {
  await kubectl.apply(kubeconfig, [sandboxNamespace(PROBE_NAMESPACE)]);
  const probe = (spec: Record<string, unknown>) =>
    JSON.stringify({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Sandbox",
      metadata: { name: "jr2-webhook-probe", namespace: PROBE_NAMESPACE },
      spec: { image: "probe", ...spec },
    });
  const refused = probe({ volumes: [{ name: "probe", hostPath: { path: "/" } }] });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await kubectl.run(kubeconfig, ["create", "--dry-run=server", "-f", "-"], refused).then(
      () => "admitted",
      (err: Error) => err.message,
    );
    const defaulted =
      !defaults ||
      (await kubectl
        .run(kubeconfig, ["create", "--dry-run=server", "-o", "jsonpath={.spec.fsGroup}", "-f", "-"], probe({}))
        .then(
          (out) => out.trim() !== "",
          () => false,
        ));
    if (answer.includes("spec.volumes[0].hostPath") && defaulted) return;
    if (Date.now() > deadline)
      throw new Error(
        `admission did not judge a probe within ${timeoutMs / 1000}s: ${answer}${defaulted ? "" : "; no defaults written"}`,
      );
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Polls /healthz until the module's HTTPS server answers 200 (it answers only once its store is read). */
async function waitHealthy(port: number, ca: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await new Promise<number>((resolve) => {
      const req = request(
        { host: "127.0.0.1", port, path: "/healthz", ca, servername: "localhost", timeout: 2000 },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on("error", () => resolve(0));
      req.on("timeout", () => req.destroy());
      req.end();
    });
    if (status === 200) return;
    if (Date.now() > deadline)
      throw new Error(`the module did not answer https://127.0.0.1:${port}/healthz in ${timeoutMs / 1000}s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
