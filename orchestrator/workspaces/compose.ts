// The Sandbox pod the Orchestrator asks for (decision 0021: jr2's `crFor` and its mounts
// table), pure: the CR, and the objects it owns from birth (the token Secret, the
// Custodian's ConfigMap, the Effector's key Secret and Service). kube-gateway.ts writes them; local
// mode (local-harness.ts) runs the same Custodian config beside each local Harness.
//
// Who holds what, stated once (the asymmetry the Custodian exists for, decision 0018):
//
//   harness    /work, /conversations, the CA certificate at /etc/jr2/ca; env: the Custodian's
//              address, the proxy, and a Stand-in for every held value. No credential.
//   custodian  its config (`<sandbox>-custodian`), its values (the Sandbox token and each held
//              secret, one file each) and, with a bound host, its own CA with its key
//              (`<sandbox>-custodian-ca`, kube-gateway.ts writes it, decision 0037). No /work, no Repos.
//   user       /work and /repos/<key> (read-only), and nothing else; no NET_RAW unless the pod
//              config opts out (decision 0048).
//   effector   jr2's Effector program (decision 0070). /work and /repos/<key> read-only, its key,
//              its scratch, the effect Secrets its create declared at /run/jr2/secrets/<secret>/
//              (effector-secrets.ts), the pod config's trust bundle at /etc/jr2/effector-ca, and the
//              push Secrets the operator projects at /run/jr2/secrets/@git/<name>/
//              (spec.gitCredentials). Its volumes (`effector-*`) are its alone (capabilities/rules).
import {
  boundHosts,
  CA_CERT_KEY,
  CA_KEY_KEY,
  CUSTODIAN_CA_DIR,
  CUSTODIAN_CONFIG_DIR,
  CUSTODIAN_CONFIG_KEY,
  CUSTODIAN_HEALTH_PORT,
  CUSTODIAN_PORT,
  CUSTODIAN_VALUES_DIR,
  HARNESS_CA_DIR,
  HARNESS_CA_KEY,
  custodianConfigMapName,
  harnessCustodianEnv,
  proxyEnv,
  parseCustodianConfig,
  standInFrom,
  type CustodianConfig,
  type CustodianConfigInput,
} from "../../api/custodian-config";
import { API_VERSION, sandboxOwnerReference, type SandboxSpecInput } from "../../api/crd";
import { USER_SEAT_DROP, hardenedSecurityContext } from "../../api/hardening";
import type { Container, HostAlias, SecurityContext, Volume, VolumeMount } from "../../api/crd/generated/corev1";
import { CUSTODIAN_ENV, EFFECTOR_ENV, HARNESS_ENV } from "../../api/env";
import { providerKind } from "../../api/model-kinds";
import {
  ATTACH_ANNOTATION,
  CA_CONFIGMAP,
  CONVERSATIONS_DIR,
  CUSTODIAN,
  custodianCaSecretName,
  DEFAULT_FS_GROUP,
  EFFECTOR,
  EFFECTOR_CA_DIR,
  EFFECTOR_CA_FILE,
  EFFECTOR_KEY_KEY,
  EFFECTOR_PORT,
  EFFECTOR_SECRETS_DIR,
  GIT_CREDENTIALS_ROOT,
  KEEPALIVE_ANNOTATION,
  REPOS_MOUNT,
  RUN_LABEL,
  TENANT_LABEL,
  SANDBOX_LABEL,
  SANDBOX_NAME_LABEL,
  SANDBOX_TOKEN_KEY,
  USER,
  WORK_ROOT,
  WORKFLOW_LABEL,
  effectorKeySecretName,
  effectorServiceName,
  repoVolumeName,
  tokenSecretName,
} from "../../api/wire";
import type { PodConfig, HeldSecret } from "./pod-config";
import { effectSecretVolumes } from "./effector-secrets";
import type { PlaceRequest } from "./sandbox-gateway";
import { splitSize, type SizeSplit } from "./size";
import { effectorKey, harnessToken, sandboxToken, standInBytes, tokenDigest } from "../tokens";

/** The volumes the composition names (the operator adds `repo-<key>`, `jr2-shm` and `jr2-git-<n>`). */
export const VOLUME = {
  work: "work",
  conversations: "conversations",
  harnessCa: "jr2-ca",
  custodianConfig: "custodian-config",
  custodianValues: "custodian-values",
  custodianCa: "custodian-ca",
  effectorOwn: "effector-own",
  effectorScratch: "effector-scratch",
  effectorCa: "effector-ca",
} as const;

/** The custodian's program in the companions image (Dockerfile). */
export const CUSTODIAN_COMMAND = ["node", "/app/custodian.js"];
/**
 * The Effector's program in the companions image (decision 0070): jr2's own, whatever image the pod
 * config names, so an image with more tools is built FROM the companions image. Under tini, as the
 * Harness is: the credentialed commands it runs may leave processes behind, which tini reaps.
 */
export const EFFECTOR_COMMAND = ["/usr/bin/tini", "--", "node", "/app/effector.js"];
/** jr2-confine, the Landlock launcher of credentialed commands, beside the Effector's bundle. */
export const EFFECTOR_CONFINE = "/app/jr2-confine";
/** The uid the companions image runs as (Dockerfile `USER 65532`), stated so the kubelet need not read the image. */
export const COMPANIONS_UID = 65532;

/** Where the effector keeps its key, and its $HOME (decision 0021). */
const EFFECTOR_OWN_DIR = "/run/jr2/effector";
const EFFECTOR_SCRATCH_DIR = "/run/jr2/scratch";

export type ComposeInput = {
  req: PlaceRequest;
  namespace: string;
  signingKey: Buffer;
  pod: PodConfig;
  /** The custodian container's image (the pod config's, else the companions image). */
  custodianImage: string;
  /** How the Custodian reaches the Orchestrator (its Service, or loopback in local mode). */
  orchestratorUrl: string;
  /** The keepalive's start, ms since the epoch. */
  now: number;
  /** The egress point (decision 0051): its proxy url, and the /etc/hosts entries by which the pod,
   * which reaches no resolver, finds it and the Orchestrator. Absent in local mode. */
  egress?: { proxyUrl: string; hostAliases: HostAlias[] };
};

type KubeObject = { apiVersion: string; kind: string; metadata: Record<string, unknown> & { name: string } };

export type Composition = {
  /** The Sandbox CR, as POSTed. */
  sandbox: KubeObject & { spec: SandboxSpecInput };
  /** What the `<sandbox>-custodian` ConfigMap carries, parsed (local mode runs it too). */
  custodianConfig: CustodianConfig;
  /** The held values' files: each Secret key and the file it lands as under the values directory. */
  heldFiles: Array<{ secret: string; key: string; file: string }>;
  /** The objects the CR owns, given its uid: written after it, so none outlives it. */
  owned(uid: string): KubeObject[];
};

/** The file a held value lands as in the values directory: a Secret's name has no `_`, so `__`
 * cannot join two pairs into one file. */
export const heldFileName = (h: Pick<HeldSecret, "secret" | "key">) => `${h.secret}__${h.key}`;

/** The Custodian's config for one Sandbox: every Stand-in derived, so a re-provision writes the same. */
export function custodianConfigFor(
  input: Pick<ComposeInput, "pod" | "signingKey" | "orchestratorUrl"> & { egress?: { proxyUrl: string } },
  sandbox: string,
) {
  const c = input.pod.custodian;
  const config: CustodianConfigInput = {
    version: 1,
    orchestrator: { url: input.orchestratorUrl, token: SANDBOX_TOKEN_KEY },
    providers: c.providers,
    held: c.held.map((h) => ({
      value: heldFileName(h),
      standIn: standInFrom(standInBytes(input.signingKey, sandbox, h.secret, h.key)),
      origins: h.origins,
      ...(h.headers ? { headers: h.headers } : {}),
      ...(h.env ? { env: h.env } : {}),
    })),
    // With an egress point, the Custodian chains every connection but the Orchestrator's through it,
    // which judges it against the Sandbox's list (the tunnel hosts are in its base list); without
    // one (local mode), the Custodian's own tunnel list (decision 0051).
    egress: { tunnel: c.tunnel, ...(input.egress ? { via: input.egress.proxyUrl } : {}) },
    ...(c.timeouts ? { timeouts: c.timeouts } : {}),
  };
  const parsed = parseCustodianConfig(config);
  // The pod config was checked at boot with the same schemas: this is a bug, not an input error.
  if (!parsed.ok) throw new Error(`the composed Custodian config is invalid: ${parsed.message}`);
  return parsed.config;
}

export function composeSandbox(input: ComposeInput): Composition {
  const { req, namespace } = input;
  const split = splitSize(req.size, req.userSize, input.pod.custodian.resources);
  const config = custodianConfigFor(input, req.name);
  const keys = req.repos.map((r) => r.key);
  // Its image was resolved from the pod config at the create (decision 0048), never the workspace's.
  const effectSecrets = effectSecretVolumes(req.effector?.secrets ?? []);
  const effector = req.effector
    ? effectorContainer(req.effector.image, keys, input.pod.effector, effectSecrets.mounts, input.egress?.proxyUrl)
    : undefined;

  const spec: SandboxSpecInput = {
    image: req.image,
    ...(req.idleTimeout ? { idleTimeout: req.idleTimeout } : {}),
    // The work group: every seat writes /work whatever its uid (decision 0021).
    fsGroup: DEFAULT_FS_GROUP,
    ...(split.harness ? { resources: split.harness } : {}),
    ...(split.pod ? { podResources: split.pod } : {}),
    ...(split.shmSize ? { shmSize: split.shmSize } : {}),
    env: harnessEnv(input, config),
    sidecars: [
      custodianContainer(input.custodianImage, split, boundHosts(input.pod.custodian.held).length > 0),
      ...(req.userImage
        ? [userContainer(req.userImage, keys, split, input.pod.userSeat.netRaw, input.egress?.proxyUrl)]
        : []),
      ...(effector ? [effector] : []),
    ],
    // Where the installation puts its Sandboxes (decision 0038), copied so a pod config change
    // reaches the next Sandbox and never an existing one (the spec is immutable).
    ...(input.pod.placement.nodeSelector ? { nodeSelector: { ...input.pod.placement.nodeSelector } } : {}),
    ...(input.pod.placement.tolerations?.length
      ? { tolerations: input.pod.placement.tolerations.map((t) => ({ ...t })) }
      : {}),
    // One runtime class for the whole pod, so every seat runs under it (decision 0055); resolved
    // from the pod config at the create, so a pod config change never reaches an existing Sandbox.
    ...(req.runtimeClassName ? { runtimeClassName: req.runtimeClassName } : {}),
    ...(req.repos.length ? { repos: req.repos.map((r) => ({ key: r.key, url: r.url })) } : {}),
    // The workspace's own egress list; the egress point adds the base list and the Repos' remotes.
    ...(req.egressAllow ? { egress: { allow: [...req.egressAllow] } } : {}),
    ...(input.egress?.hostAliases.length
      ? { hostAliases: input.egress.hostAliases.map((a) => ({ ip: a.ip, hostnames: [...(a.hostnames ?? [])] })) }
      : {}),
    ...(req.effector?.gitCredentials.length
      ? { gitCredentials: req.effector.gitCredentials.map((name) => ({ name })) }
      : {}),
    volumes: [
      { name: VOLUME.work, emptyDir: {} },
      { name: VOLUME.conversations, emptyDir: {} },
      {
        name: VOLUME.harnessCa,
        configMap: { name: CA_CONFIGMAP, items: [{ key: HARNESS_CA_KEY, path: HARNESS_CA_KEY }] },
      },
      ...custodianVolumes(req.name, input.pod.custodian.held),
      ...(effector ? effectorVolumes(req.name, effectSecrets.volumes, input.pod.effector.trust) : []),
    ],
    // The Harness's own: none of the Custodian's volumes (decision 0021).
    volumeMounts: [
      { name: VOLUME.work, mountPath: WORK_ROOT },
      { name: VOLUME.conversations, mountPath: CONVERSATIONS_DIR },
      { name: VOLUME.harnessCa, mountPath: HARNESS_CA_DIR, readOnly: true },
    ],
  };

  const sandbox = {
    apiVersion: API_VERSION,
    kind: "Sandbox",
    metadata: {
      name: req.name,
      namespace,
      labels: {
        [RUN_LABEL]: req.labels.run,
        [WORKFLOW_LABEL]: req.labels.workflow,
        ...(req.labels.tenant ? { [TENANT_LABEL]: req.labels.tenant } : {}),
      },
      annotations: {
        // The lease starts with the CR (decision 0014).
        [KEEPALIVE_ANNOTATION]: new Date(input.now).toISOString(),
        ...(req.attach ? { [ATTACH_ANNOTATION]: JSON.stringify(req.attach) } : {}),
      },
    },
    spec,
  };

  const owned = (uid: string) =>
    ownedObjects({ name: req.name, namespace, signingKey: input.signingKey, config, effector: !!effector }, uid);

  return {
    sandbox,
    custodianConfig: config,
    heldFiles: input.pod.custodian.held.map((h) => ({ secret: h.secret, key: h.key, file: heldFileName(h) })),
    owned,
  };
}

/**
 * What a Sandbox owns, given its uid: the token Secret, the Custodian's ConfigMap and, with an
 * Effector, its key Secret and Service. Also what a restored Orchestrator writes again, create-if-absent,
 * for a Sandbox whose first writes it may not have finished (kube-gateway.ts resumeOwned).
 */
export function ownedObjects(
  o: { name: string; namespace: string; signingKey: Buffer; config: CustodianConfig; effector: boolean },
  uid: string,
): KubeObject[] {
  const { name: sandbox, namespace, config } = o;
  const meta = (name: string) => ({
    name,
    namespace,
    labels: { [SANDBOX_LABEL]: sandbox },
    ownerReferences: [sandboxOwnerReference(sandbox, uid)],
  });
  const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64");
  const objects: KubeObject[] = [
    // `data`, not `stringData`: write-only stringData never reads back, so a re-apply would differ.
    {
      apiVersion: "v1",
      kind: "Secret",
      metadata: meta(tokenSecretName(sandbox)),
      type: "Opaque",
      data: { [SANDBOX_TOKEN_KEY]: b64(sandboxToken(o.signingKey, sandbox)) },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: meta(custodianConfigMapName(sandbox)),
      data: { [CUSTODIAN_CONFIG_KEY]: JSON.stringify(config) },
    } as KubeObject,
  ];
  if (o.effector) {
    objects.push(
      {
        apiVersion: "v1",
        kind: "Secret",
        metadata: meta(effectorKeySecretName(sandbox)),
        type: "Opaque",
        data: { [EFFECTOR_KEY_KEY]: b64(effectorKey(o.signingKey, sandbox)) },
      } as KubeObject,
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: meta(effectorServiceName(sandbox)),
        // Headless, and publishing a not-ready address: the Effector answers while the Harness
        // beside it restarts (decision 0021).
        spec: {
          clusterIP: "None",
          publishNotReadyAddresses: true,
          selector: { [SANDBOX_NAME_LABEL]: sandbox },
          ports: [{ name: EFFECTOR, port: EFFECTOR_PORT, targetPort: EFFECTOR_PORT, protocol: "TCP" }],
        },
      } as KubeObject,
    );
  }
  return objects;
}

/**
 * The Harness's env: the installation's passthrough first (decision 0021), then what the
 * composition owns, which wins: an entry of the passthrough with one of its names is dropped rather
 * than listed twice. The bearer's digest last, so nothing can choose it (decision 0021).
 */
function harnessEnv(input: ComposeInput, config: CustodianConfig) {
  const owned = [
    ...harnessCustodianEnv(config),
    ...modelKindEnv(input.pod.harness.env, config),
    { name: HARNESS_ENV.conversationsDir, value: CONVERSATIONS_DIR },
    { name: HARNESS_ENV.tokenSha256, value: tokenDigest(harnessToken(input.signingKey, input.req.name)) },
  ];
  const names = new Set(owned.map((e) => e.name));
  return [...input.pod.harness.env.filter((e) => !names.has(e.name)), ...owned];
}

/** The kind of the provider the Harness's model names (JR2_MODEL_PROVIDER), so it speaks that
 * provider's own API (docs/decisions/0054); nothing when it names none the Custodian routes. */
function modelKindEnv(env: ReadonlyArray<{ name: string; value: string }>, config: CustodianConfig) {
  const name = env.find((e) => e.name === HARNESS_ENV.modelProvider)?.value;
  const provider = config.providers.find((p) => p.name === name);
  return provider ? [{ name: HARNESS_ENV.modelKind, value: providerKind(provider) }] : [];
}

// ---------------------------------------------------------------------------------------------
// The containers

/** The restricted profile, stated in full (the operator completes only what a context leaves out). */
const hardened = (runAsUser?: number): SecurityContext =>
  hardenedSecurityContext({ runAsUser, runAsGroup: runAsUser, readOnlyRootFilesystem: true });

/** The longest the Custodian's postStart waits for its probes' port (decision 0063). */
export const UNTIL_LISTENING_SECONDS = 3;

/**
 * The Custodian's postStart (decision 0063): done once its probes' port accepts a connection, or
 * after UNTIL_LISTENING_SECONDS, and always successful, so a Custodian that never binds fails as it
 * did without it. The kubelet starts a pod's containers one after another and probes each the moment
 * its start is done; the Custodian, started last, is not yet bound then, and a refused probe waits a
 * whole period for the next. A start that ends only once the port is bound makes that first probe
 * the one answered. bash's own /dev/tcp: the companions image is Debian's Essential set (decision
 * 0041), no program added.
 */
export const untilListening = (port: number, seconds = UNTIL_LISTENING_SECONDS): string[] => [
  "/bin/bash",
  "-c",
  `for _ in $(seq ${seconds * 50}); do true 2>/dev/null <>/dev/tcp/127.0.0.1/${port} && exit 0; sleep 0.02; done; exit 0`,
];

function custodianContainer(image: string, split: SizeSplit, intercepts: boolean): Container {
  return {
    name: CUSTODIAN,
    image,
    command: CUSTODIAN_COMMAND,
    env: [
      { name: CUSTODIAN_ENV.configFile, value: `${CUSTODIAN_CONFIG_DIR}/${CUSTODIAN_CONFIG_KEY}` },
      { name: CUSTODIAN_ENV.valuesDir, value: CUSTODIAN_VALUES_DIR },
      { name: CUSTODIAN_ENV.caDir, value: CUSTODIAN_CA_DIR },
      { name: CUSTODIAN_ENV.port, value: String(CUSTODIAN_PORT) },
      { name: CUSTODIAN_ENV.healthPort, value: String(CUSTODIAN_HEALTH_PORT) },
    ],
    ports: [{ name: "custodian-probe", containerPort: CUSTODIAN_HEALTH_PORT, protocol: "TCP" }],
    // The pod's Ready waits on its config and values (and so the Sandbox's Ready does). The port is
    // bound before the Custodian loads and the first probe answered once it has (decision 0062):
    // 2 s to wait for that answer.
    readinessProbe: {
      httpGet: { path: "/readyz", port: CUSTODIAN_HEALTH_PORT },
      periodSeconds: 1,
      timeoutSeconds: 2,
    },
    livenessProbe: { httpGet: { path: "/healthz", port: CUSTODIAN_HEALTH_PORT }, periodSeconds: 10 },
    lifecycle: { postStart: { exec: { command: untilListening(CUSTODIAN_HEALTH_PORT) } } },
    resources: split.custodian,
    terminationMessagePolicy: "FallbackToLogsOnError",
    securityContext: hardened(COMPANIONS_UID),
    volumeMounts: [
      { name: VOLUME.custodianConfig, mountPath: CUSTODIAN_CONFIG_DIR, readOnly: true },
      { name: VOLUME.custodianValues, mountPath: CUSTODIAN_VALUES_DIR, readOnly: true },
      ...(intercepts ? [{ name: VOLUME.custodianCa, mountPath: CUSTODIAN_CA_DIR, readOnly: true }] : []),
    ],
  };
}

/**
 * The image's own entrypoint and user, no hardened context (the User Container's exemption,
 * decision 0009): only NET_RAW dropped, or nothing where the pod config opts out (decision 0048).
 */
function userContainer(image: string, keys: string[], split: SizeSplit, netRaw: boolean, proxy?: string): Container {
  return {
    name: USER,
    image,
    ...(proxy ? { env: seatProxyEnv(proxy) } : {}),
    // The opt-out states its own (empty) drop list: the runtime's default set, NET_RAW in it.
    securityContext: { capabilities: { drop: netRaw ? [] : [USER_SEAT_DROP] } },
    volumeMounts: [{ name: VOLUME.work, mountPath: WORK_ROOT }, ...repoMounts(keys)],
    ...(split.user ? { resources: split.user } : {}),
  };
}

/**
 * The user seat's and the Effector's way out (decision 0051): the egress point itself, as they hold
 * no Stand-in (the Harness's proxy is its Custodian, which chains to it). A tool that ignores these
 * variables reaches nothing: the pod's policy admits no other address.
 */
const seatProxyEnv = (url: string) => proxyEnv(url, true);

/**
 * The Sandbox Effector (decisions 0021, 0070): jr2's program whatever the image, Ready once it holds
 * its key (/healthz every second), saying why it ended in its termination message (FallbackToLogsOnError),
 * which the operator publishes on the Sandbox (status.effector). No limit of its own: it shares the
 * pod's Size with the Harness.
 */
function effectorContainer(
  image: string,
  keys: string[],
  pod: PodConfig["effector"],
  secretMounts: VolumeMount[],
  proxy?: string,
): Container {
  return {
    name: EFFECTOR,
    image,
    command: EFFECTOR_COMMAND,
    env: [
      ...(proxy ? seatProxyEnv(proxy) : []),
      { name: EFFECTOR_ENV.port, value: String(EFFECTOR_PORT) },
      { name: EFFECTOR_ENV.work, value: WORK_ROOT },
      { name: EFFECTOR_ENV.repos, value: REPOS_MOUNT },
      { name: EFFECTOR_ENV.key, value: `${EFFECTOR_OWN_DIR}/${EFFECTOR_KEY_KEY}` },
      { name: EFFECTOR_ENV.secrets, value: EFFECTOR_SECRETS_DIR },
      { name: EFFECTOR_ENV.git, value: GIT_CREDENTIALS_ROOT },
      { name: EFFECTOR_ENV.scratch, value: EFFECTOR_SCRATCH_DIR },
      { name: "HOME", value: EFFECTOR_SCRATCH_DIR },
      { name: EFFECTOR_ENV.confine, value: EFFECTOR_CONFINE },
      ...(pod.requireCommands ? [{ name: EFFECTOR_ENV.requireCommands, value: "1" }] : []),
      ...(pod.trust ? [{ name: EFFECTOR_ENV.ca, value: EFFECTOR_CA_FILE }] : []),
      { name: EFFECTOR_ENV.podName, valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
      { name: EFFECTOR_ENV.podIp, valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
      { name: EFFECTOR_ENV.node, valueFrom: { fieldRef: { fieldPath: "spec.nodeName" } } },
    ],
    ports: [{ name: EFFECTOR, containerPort: EFFECTOR_PORT, protocol: "TCP" }],
    // Bound before it loads, its first probe held until it holds its key (decision 0062), and its
    // start done once the port accepts (decision 0063): the kubelet's first probe is the one answered,
    // not a refusal that waits a whole period.
    readinessProbe: { httpGet: { path: "/healthz", port: EFFECTOR_PORT }, periodSeconds: 1, timeoutSeconds: 2 },
    lifecycle: { postStart: { exec: { command: untilListening(EFFECTOR_PORT) } } },
    terminationMessagePolicy: "FallbackToLogsOnError",
    securityContext: hardened(),
    volumeMounts: [
      { name: VOLUME.work, mountPath: WORK_ROOT, readOnly: true },
      ...repoMounts(keys),
      { name: VOLUME.effectorOwn, mountPath: EFFECTOR_OWN_DIR, readOnly: true },
      { name: VOLUME.effectorScratch, mountPath: EFFECTOR_SCRATCH_DIR },
      ...secretMounts,
      ...(pod.trust ? [{ name: VOLUME.effectorCa, mountPath: EFFECTOR_CA_DIR, readOnly: true }] : []),
    ],
  };
}

const repoMounts = (keys: string[]) =>
  keys.map((key) => ({ name: repoVolumeName(key), mountPath: `${REPOS_MOUNT}/${key}`, readOnly: true }));

// ---------------------------------------------------------------------------------------------
// The volumes

function custodianVolumes(sandbox: string, held: HeldSecret[]): Volume[] {
  // One source per Secret, each key to its file; the token first. 0440: the Custodian reads them by
  // its group (fsGroup); no other container mounts this volume.
  const bySecret = new Map<string, Array<{ key: string; path: string }>>();
  for (const h of held) {
    const items = bySecret.get(h.secret) ?? [];
    items.push({ key: h.key, path: heldFileName(h) });
    bySecret.set(h.secret, items);
  }
  return [
    {
      name: VOLUME.custodianConfig,
      configMap: {
        name: custodianConfigMapName(sandbox),
        items: [{ key: CUSTODIAN_CONFIG_KEY, path: CUSTODIAN_CONFIG_KEY }],
      },
    },
    {
      name: VOLUME.custodianValues,
      projected: {
        defaultMode: 0o440,
        sources: [
          { secret: { name: tokenSecretName(sandbox), items: [{ key: SANDBOX_TOKEN_KEY, path: SANDBOX_TOKEN_KEY }] } },
          ...[...bySecret].map(([name, items]) => ({ secret: { name, items } })),
        ],
      },
    },
    // Its own CA, never the installation root (decision 0037); only where a host is bound.
    ...(boundHosts(held).length
      ? [
          {
            name: VOLUME.custodianCa,
            secret: {
              secretName: custodianCaSecretName(sandbox),
              defaultMode: 0o440,
              items: [
                { key: CA_CERT_KEY, path: CA_CERT_KEY },
                { key: CA_KEY_KEY, path: CA_KEY_KEY },
              ],
            },
          },
        ]
      : []),
  ];
}

function effectorVolumes(sandbox: string, secrets: Volume[], trust: PodConfig["effector"]["trust"]): Volume[] {
  return [
    {
      name: VOLUME.effectorOwn,
      projected: {
        defaultMode: 0o440,
        sources: [
          {
            secret: {
              name: effectorKeySecretName(sandbox),
              items: [{ key: EFFECTOR_KEY_KEY, path: EFFECTOR_KEY_KEY }],
            },
          },
        ],
      },
    },
    { name: VOLUME.effectorScratch, emptyDir: {} },
    ...secrets,
    // The installation's trust bundle (pod config effector.trust): its one key as ca.crt.
    ...(trust
      ? [{ name: VOLUME.effectorCa, configMap: { name: trust.configMap, items: [{ key: trust.key, path: "ca.crt" }] } }]
      : []),
  ];
}
