// Names on the wire, kept from jr2 so a jr2 Orchestrator's CRs work unchanged (docs/decisions/0001).
export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
export const MANAGED_BY = "jr2-operator";
/** What the operator's server-side applies (a namespace's NetworkPolicies) are written as. */
export const OPERATOR_FIELD_MANAGER = "jr2-operator";
/** What the Orchestrator's server-side applies are written as (its own field manager). */
export const ORCHESTRATOR_FIELD_MANAGER = "jr2-orchestrator";
export const SANDBOX_NAME_LABEL = "sandbox.jr2.dev/name";
/** jr2's label and annotation domain: `jr2.dev/...` and `<anything>.jr2.dev/...` are jr2's keys,
 * on a Sandbox pod set, changed and removed by the operator alone (decision 0067). */
export const JR2_DOMAIN = "jr2.dev";
export const KEEPALIVE_ANNOTATION = "jr2.dev/keepalive";

/** The labels an Orchestrator puts on what it writes (jr2's CRs carry them, decision 0001). */
export const RUN_LABEL = "jr2.dev/run";
export const WORKFLOW_LABEL = "jr2.dev/workflow";
/** The tenant whose API token created the workspace (decision 0042); absent: an admin's. */
export const TENANT_LABEL = "jr2.dev/tenant";
/** The Harness's attach body, kept on the Sandbox so a restarted Orchestrator can send it again. */
export const ATTACH_ANNOTATION = "jr2.dev/attach";
/** On the pod: a digest per spec field it was built from, so a later spec change can be named. */
export const SPEC_DIGEST_ANNOTATION = "jr2.dev/spec-digest";

/** The Sandbox token Secret `<sandbox>-token` and its one key (the Custodian reads it, decision 0021). */
export const SANDBOX_TOKEN_KEY = "JR2_SANDBOX_TOKEN";
export const tokenSecretName = (sandbox: string) => `${sandbox}-token`;
/** On every object the Orchestrator writes for one Sandbox beside its CR (decision 0021). */
export const SANDBOX_LABEL = "jr2.dev/sandbox";

/** Container names the operator and its clients agree on. */
export const HARNESS = "harness";
export const CUSTODIAN = "custodian";
export const USER = "user";
export const EFFECTOR = "effector";

/** The Harness serves on this port; the Service exposes it as `http`. */
export const HARNESS_PORT = 8080;

/** The admission pod's preStop asks here: from then on each answer closes its connection
 * (decision 0060). */
export const ADMISSION_DRAIN_PATH = "/jr2-drain";
/** How long an admission pod keeps serving after it is told to stop (decision 0060). */
export const ADMISSION_DRAIN_SECONDS = 3;
/** The Sandbox Effector serves on this port, behind its own headless Service `<sandbox>-effector`. */
export const EFFECTOR_PORT = 8082;
export const effectorServiceName = (sandbox: string) => `${sandbox}-effector`;
/** The Effector's key Secret `<sandbox>-effector` (key `key`), mounted by the effector alone. */
export const effectorKeySecretName = (sandbox: string) => `${sandbox}-effector`;
export const EFFECTOR_KEY_KEY = "key";
/** Where the effector finds its secrets, and under `@git/<name>/` each push Secret of spec.gitCredentials
 * (`@` is no character of a Secret's name, so no secret's file takes that directory). */
export const EFFECTOR_SECRETS_DIR = "/run/jr2/secrets";
export const GIT_CREDENTIALS_ROOT = `${EFFECTOR_SECRETS_DIR}/@git`;
/** The volumes the Orchestrator composes for the effector (its key, scratch, effect Secrets, trust
 * bundle) are named `effector-*`, and no other container may mount one (decision 0070). */
export const EFFECTOR_VOLUME_PREFIX = "effector-";
/** An effect Secret's projected volume: `effector-secret-<n>`, one per Secret the workspace declares,
 * mounted in the effector alone at `/run/jr2/secrets/<secret>/` (decision 0070). */
export const EFFECT_SECRET_VOLUME_PREFIX = `${EFFECTOR_VOLUME_PREFIX}secret-`;
export const effectSecretVolumeName = (index: number) => `${EFFECT_SECRET_VOLUME_PREFIX}${index}`;
export const effectSecretMountPath = (secret: string) => `${EFFECTOR_SECRETS_DIR}/${secret}/`;
/** The pod config's effector.trust bundle (a ConfigMap key), as the effector sees it. */
export const EFFECTOR_CA_DIR = "/etc/jr2/effector-ca";
export const EFFECTOR_CA_FILE = `${EFFECTOR_CA_DIR}/ca.crt`;

/** The one volume every seat shares (decision 0021): an emptyDir, so a non-root uid can write it. */
export const WORK_ROOT = "/work";
/** The Harness's conversations (decision 0021: an emptyDir in the Harness container alone). */
export const CONVERSATIONS_DIR = "/conversations";

/** Per installation, in the Sandboxes' namespace: the root CA (a `kubernetes.io/tls` Secret the
 * Orchestrator alone reads, never mounted) and its certificate for the Harness (a ConfigMap, key
 * `ca.crt`, at /etc/jr2/ca). */
export const CUSTODIAN_CA_SECRET = "jr2-custodian-ca";
export const CA_CONFIGMAP = "jr2-ca";
/** Per Sandbox: `<sandbox>-custodian-ca`, the intermediate the root signs for its Custodian alone
 * (decision 0037), mounted by the custodian alone. */
export const custodianCaSecretName = (sandbox: string) => `${sandbox}-custodian-ca`;
/** The label every object an installation of jr2 writes carries (companions, CA, policy). */
export const PART_OF_JR2 = { "app.kubernetes.io/part-of": "jr2" } as const;
/** Where the companions (the Orchestrator, the cache agents) install unless told otherwise. */
export const COMPANION_NAMESPACE = "jr2-system";
/** The label the API server itself sets on every namespace, its name: nobody can set it to another
 * namespace's name, so a policy peer chosen by it is that namespace and no other (decision 0067). */
export const NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name";
/** Where the Orchestrator's Sandboxes live unless told otherwise: never the companions' own
 * namespace, whose Secrets (the signing key, the API tokens, the root CA) no Sandbox namespace
 * role may reach (decision 0045). */
export const DEFAULT_SANDBOX_NAMESPACE = "jr2-sandboxes";
/** A namespace that holds Sandboxes carries `jr2.dev/sandboxes: enabled`. The installation binds
 * its components' namespaced roles (the operator's pod, Service and policy writes, the cache
 * agent's repo-credential reads) in exactly those namespaces, and nowhere else (decision 0045). */
export const SANDBOX_NAMESPACE_LABEL = "jr2.dev/sandboxes";
export const SANDBOX_NAMESPACE_ENABLED = "enabled";
/** The Orchestrator's name (its Deployment, Service and service account) and its pods' label
 * `app.kubernetes.io/name`, by which the Sandbox namespaces' policies admit it (decision 0047). */
export const APP_NAME_LABEL = "app.kubernetes.io/name";
export const ORCHESTRATOR_NAME = "jr2-orchestrator";
/** The Orchestrator's API port. */
export const ORCHESTRATOR_PORT = 8090;
/** Per namespace: ingress to Sandbox pods from the Orchestrator alone (decision 0021). */
export const SANDBOX_INGRESS_POLICY = "jr2-sandbox-ingress";
/** Per namespace: what Sandbox pods may connect to (decision 0038, api/sandbox-policies.ts). */
export const SANDBOX_EGRESS_POLICY = "jr2-sandbox-egress";

/** Where each node keeps its bare Repo checkouts (the cache agents and the pods agree on it), and
 * where the Harness container sees them. */
export const DEFAULT_CACHE_ROOT = "/var/lib/jr2/repos";
export const REPOS_MOUNT = "/repos";
/** A Repo cache belongs to its Repo's namespace (decision 0046): one directory per namespace under
 * the cache root, and in it one bare checkout per Repo key. The cache agent writes
 * `<cacheRoot>/<namespace>/<key>`, the operator mounts exactly that into the namespace's pods and
 * the pod guard allows no other hostPath, so a key never reaches another namespace's cache. */
export const repoCacheNamespaceDir = (cacheRoot: string, namespace: string) => `${cacheRoot}/${namespace}`;
export const repoCachePath = (cacheRoot: string, namespace: string, key: string) =>
  `${repoCacheNamespaceDir(cacheRoot, namespace)}/${key}`;

/** A Secret a Repo's spec.secretRef may name declares itself a repo credential with this label
 * (value "true") and lists, in the annotation, the url prefixes it may be sent to, comma-separated
 * (`https://github.com/org/,ssh://git@github.com/org/`). The cache agent sends it nowhere else
 * (api/repo-credential.ts, decision 0046). */
export const REPO_CREDENTIAL_LABEL = "jr2.dev/repo-credential";
export const REPO_CREDENTIAL_LABEL_VALUE = "true";
export const REPO_CREDENTIAL_HOSTS_ANNOTATION = "jr2.dev/repo-credential-hosts";
/** Per Sandbox namespace: the Role whose one rule lets the cache agents `get` exactly the Secrets
 * that the namespace's Repos name as their credential (by resourceNames, never jr2's own Secrets).
 * The operator writes its rules; the installation binds it to the cache agent (decision 0046). */
export const REPO_CREDENTIALS_ROLE = "jr2-cache-agent-repo-credentials";

/** The pod's work group when the spec states none (decision 0021). */
export const DEFAULT_FS_GROUP = 2000;
export const DEFAULT_IDLE_TIMEOUT = "30m";

/** Volumes the operator adds itself; a spec may not take these names. */
export const SHM_VOLUME = "jr2-shm";
export const repoVolumeName = (key: string) => `repo-${key}`;
/** The cache key a `repo-<key>` volume carries; undefined for any other volume. */
export const keyOfRepoVolume = (volume: string) => (volume.startsWith("repo-") ? volume.slice(5) : undefined);

/** The headers of one hop (RFC 9110 7.6.1, and the proxies' own): never passed on by a proxy. The
 * Custodian adds `host` to them, the egress point its own header. */
export const HOP_BY_HOP_HEADERS = [
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
] as const;

// Several Orchestrators (decision 0079): the workspaces fall in SHARD_COUNT shards by name, each
// shard held by one replica through a Lease; every replica renews a member Lease naming where its
// API is. Changing the count re-shards every workspace: every replica must agree on it.
export const SHARD_COUNT = 16;
/** On the Orchestrators' Leases: `shard` or `member`. */
export const ORCHESTRATOR_LEASE_LABEL = "jr2.dev/orchestrator-lease";
export const shardLeaseName = (shard: number) => `jr2-orchestrator-shard-${shard}`;
export const memberLeaseName = (identity: string) => `jr2-orchestrator-member-${identity}`;
/** On a member Lease: the base url the other replicas forward to. */
export const PEER_URL_ANNOTATION = "jr2.dev/peer-url";
/** On a call one replica forwarded to another: never forwarded again (the receiver, no longer the
 * owner, answers 503 not_owner and the forwarder looks again). */
export const FORWARDED_HEADER = "x-jr2-forwarded-by";
/** On a GET /v1/workspaces one replica asks of another: only the workspaces it owns. */
export const OWN_ONLY_HEADER = "x-jr2-own-only";
