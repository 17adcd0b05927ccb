import { modelToGroupVersionKind } from "kubernetes-fluent-client";
import { RepoModel, SandboxModel } from "../../api/crd";

describe("fluent-client models", () => {
  it("registers Sandbox with its irregular plural, so typed calls hit /sandboxes", () => {
    expect(modelToGroupVersionKind(SandboxModel.name)).toEqual({
      group: "core.jr2.dev",
      version: "v1alpha1",
      kind: "Sandbox",
      plural: "sandboxes",
    });
  });

  it("registers Repo", () => {
    expect(modelToGroupVersionKind(RepoModel.name)).toMatchObject({ kind: "Repo", plural: "repos" });
  });
});
