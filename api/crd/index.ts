// The typed CRD models: one source of truth (sources/) for the zod schemas, the inferred
// TypeScript types, the generated CRDs and the fluent-client models.
export * from "./sources/common";
export * from "./sources/sandbox";
export * from "./sources/repo";
export { SandboxModel, RepoModel } from "./models";
export { crds, crdFor, SANDBOX_KIND, REPO_KIND } from "./definitions";
export { sandboxOwnerReference } from "./references";
