// The labels an Orchestrator puts on what it writes (jr2's wire contract, seed 002).
export const RUN_LABEL = "jr2.dev/run";
export const WORKFLOW_LABEL = "jr2.dev/workflow";
/** The harness container's env var holding the SHA-256 of its bearer (harness/auth.ts). */
export const TOKEN_DIGEST_ENV = "JR2_HARNESS_TOKEN_SHA256";
/** The token Secret's one key (the Custodian will read it, seed 002). */
export const TOKEN_KEY = "JR2_SANDBOX_TOKEN";
export const tokenSecretName = (sandbox: string) => `${sandbox}-token`;
