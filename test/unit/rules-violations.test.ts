import { describe as describeViolations } from "../../capabilities/rules/violations";

describe("describe (violations)", () => {
  it("joins every violation as '<what> refused: <path>: <message>; ...'", () => {
    const text = describeViolations("Sandbox team-a/sb", [
      { path: "spec.image", message: "is required" },
      { path: "spec.volumes[0].hostPath", message: "is not allowed" },
    ]);
    expect(text).toBe("Sandbox team-a/sb refused: spec.image: is required; spec.volumes[0].hostPath: is not allowed");
  });

  it("writes one violation without a separator", () => {
    expect(describeViolations("Pod ns/p", [{ path: "a", message: "b" }])).toBe("Pod ns/p refused: a: b");
  });
});
