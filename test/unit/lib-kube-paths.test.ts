// The operator's API paths: jr2's kinds under the one API version (the wire contract, decision
// 0001), every name and namespace encoded so it cannot climb out of its segment.
import { paths } from "../../lib/kube";

describe("paths", () => {
  it("puts Sandboxes and Repos under core.jr2.dev/v1alpha1", () => {
    expect(paths.sandboxes("team-a")).toBe("/apis/core.jr2.dev/v1alpha1/namespaces/team-a/sandboxes");
    expect(paths.sandbox("team-a", "s-1")).toBe("/apis/core.jr2.dev/v1alpha1/namespaces/team-a/sandboxes/s-1");
    expect(paths.sandboxStatus("team-a", "s-1")).toBe(
      "/apis/core.jr2.dev/v1alpha1/namespaces/team-a/sandboxes/s-1/status",
    );
    expect(paths.repoStatus("team-a", "r")).toBe("/apis/core.jr2.dev/v1alpha1/namespaces/team-a/repos/r/status");
  });

  it("encodes names and namespaces", () => {
    expect(paths.sandbox("a/../b", "x?y")).toBe("/apis/core.jr2.dev/v1alpha1/namespaces/a%2F..%2Fb/sandboxes/x%3Fy");
  });

  it("refuses a segment URL parsing would resolve away", () => {
    for (const bad of ["", ".", ".."]) {
      expect(() => paths.sandboxes(bad)).toThrow(/is not a Kubernetes name/);
      expect(() => paths.pod("team-a", bad)).toThrow(/is not a Kubernetes name/);
    }
  });
});
