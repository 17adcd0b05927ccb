// Names on the wire, kept from jr2 so a jr2 Orchestrator's CRs work unchanged (docs/decisions/0001).
export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
export const MANAGED_BY = "jr2-operator";
export const SANDBOX_NAME_LABEL = "sandbox.jr2.dev/name";
export const KEEPALIVE_ANNOTATION = "jr2.dev/keepalive";

/** The labels an Orchestrator puts on what it writes (seed 002's CRs carry them). */
export const RUN_LABEL = "jr2.dev/run";
export const WORKFLOW_LABEL = "jr2.dev/workflow";
/** The Harness's attach body, kept on the Sandbox so a restarted Orchestrator can send it again. */
export const ATTACH_ANNOTATION = "jr2.dev/attach";
/** On the pod: a digest per spec field it was built from, so a later spec change can be named. */
export const SPEC_DIGEST_ANNOTATION = "jr2.dev/spec-digest";

/** The Sandbox token Secret `<sandbox>-token` and its one key (the Custodian reads it, seed 002). */
export const SANDBOX_TOKEN_KEY = "JR2_SANDBOX_TOKEN";
export const tokenSecretName = (sandbox: string) => `${sandbox}-token`;

/** Container names the operator and its clients agree on. */
export const HARNESS = "harness";
export const CUSTODIAN = "custodian";
export const USER = "user";
export const EFFECTOR = "effector";

/** The Harness serves on this port; the Service exposes it as `http`. */
export const HARNESS_PORT = 8080;

/** Where each node keeps its bare Repo checkouts (the cache agents and the pods agree on it), and
 * where the Harness container sees them. */
export const DEFAULT_CACHE_ROOT = "/var/lib/jr2/repos";
export const REPOS_MOUNT = "/repos";

/** The pod's work group when the spec states none (seed 002 DEFAULT_WORK_GROUP). */
export const DEFAULT_FS_GROUP = 2000;
export const DEFAULT_IDLE_TIMEOUT = "30m";

/** Volumes the operator adds itself; a spec may not take these names. */
export const SHM_VOLUME = "jr2-shm";
export const repoVolumeName = (key: string) => `repo-${key}`;
/** The cache key a `repo-<key>` volume carries; undefined for any other volume. */
export const keyOfRepoVolume = (volume: string) => (volume.startsWith("repo-") ? volume.slice(5) : undefined);
