import { Repo, Sandbox, SandboxSpec } from "../../api/crd";

describe("the Sandbox schema", () => {
  it("accepts a minimal spec and fills idleTimeout with 30m", () => {
    const r = Sandbox.safeParse({ spec: { image: "x" } });
    expect(r.success).toBe(true);
    expect(r.data?.spec.idleTimeout).toBe("30m");
  });

  it("rejects a misspelled sidecar field (securityContex), pointing at the sidecar or naming the key", () => {
    const r = Sandbox.safeParse({ spec: { image: "x", sidecars: [{ name: "c", image: "c:1", securityContex: {} }] } });
    expect(r.success).toBe(false);
    const issue = r.error!.issues.find(
      (i) =>
        JSON.stringify(i.path) === JSON.stringify(["spec", "sidecars", 0]) ||
        i.path.includes("securityContex") ||
        i.message.includes("securityContex"),
    );
    expect(issue).toBeDefined();
  });

  it("rejects an idleTimeout that is not a Go duration, saying so", () => {
    const r = SandboxSpec.safeParse({ image: "x", idleTimeout: "5 minutes" });
    expect(r.success).toBe(false);
    const issue = r.error!.issues.find((i) => i.path.join(".") === "idleTimeout");
    expect(issue?.message).toMatch(/Go duration/);
  });
});

describe("the Repo schema", () => {
  it("fills interval with 5m", () => {
    const r = Repo.safeParse({ spec: { url: "https://example.com/repo.git" } });
    expect(r.success).toBe(true);
    expect(r.data?.spec.interval).toBe("5m");
  });
});
