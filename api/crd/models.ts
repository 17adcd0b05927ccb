// kubernetes-fluent-client models for typed K8s(...) calls, shared by the capabilities and the
// companion workloads. Imported from kubernetes-fluent-client itself (the one copy pepr uses too),
// so the Orchestrator and the cache agent need not load pepr.
import { GenericKind, RegisterKind } from "kubernetes-fluent-client";
import { GROUP, VERSION } from "./sources/common";
import type { RepoSpecInput, RepoStatus } from "./sources/repo";
import type { SandboxSpecInput, SandboxStatus } from "./sources/sandbox";
import { REPO_KIND, SANDBOX_KIND } from "./definitions";

// Specs are typed as written (defaults optional): a client need not state them, and the API
// server fills them in before anyone reads them back.
export class SandboxModel extends GenericKind {
  declare spec?: SandboxSpecInput;
  declare status?: SandboxStatus;
}

export class RepoModel extends GenericKind {
  declare spec?: RepoSpecInput;
  declare status?: RepoStatus;
}

// The plural is given: kubernetes-fluent-client's own guess for "Sandbox" would be "sandboxs".
RegisterKind(SandboxModel, { group: GROUP, version: VERSION, kind: SANDBOX_KIND.kind, plural: SANDBOX_KIND.plural });
RegisterKind(RepoModel, { group: GROUP, version: VERSION, kind: REPO_KIND.kind, plural: REPO_KIND.plural });
