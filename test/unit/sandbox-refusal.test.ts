import { refusalOf } from "../../capabilities/sandbox/sandbox-controller";
import { ApiError } from "../../lib/api-writer";

describe("refusalOf", () => {
  it("names a 403 'exceeded quota' QuotaExceeded, keeping the server's message", () => {
    const message = 'pods "sb" is forbidden: exceeded quota: compute, requested: cpu=2, used: cpu=8, limited: cpu=8';
    const r = refusalOf(new ApiError(403, "Forbidden", message), "ns");
    expect(r?.reason).toBe("QuotaExceeded");
    expect(r?.message).toBe(message);
  });

  it("names a 403 for a missing PriorityClass PriorityClassNotFound", () => {
    const message = 'pods "sb" is forbidden: no PriorityClass with name gold was found';
    const r = refusalOf(new ApiError(403, "Forbidden", message), "ns");
    expect(r?.reason).toBe("PriorityClassNotFound");
    expect(r?.message).toBe(message);
  });

  it("names a 422 PodInvalid", () => {
    const message = 'Pod "sb" is invalid: spec.containers[1].name: Duplicate value: "harness"';
    expect(refusalOf(new ApiError(422, "Invalid", message), "ns")?.reason).toBe("PodInvalid");
  });

  it("is undefined for a 500, which is retried rather than waited on", () => {
    expect(refusalOf(new ApiError(500, "InternalError", "etcdserver: request timed out"), "ns")).toBeUndefined();
  });

  it("names RBAC's 403 NamespaceNotEnabled: the namespace and the fix, not the server's words", () => {
    const message =
      'pods is forbidden: User "system:serviceaccount:pepr-system:pepr-x" cannot create resource "pods" in API group "" in the namespace "team-b"';
    const r = refusalOf(new ApiError(403, "Forbidden", message), "team-b");
    expect(r?.reason).toBe("NamespaceNotEnabled");
    expect(r?.message).toMatch(/namespace team-b is not opted in/);
    expect(r?.message).toMatch(/jr2\.dev\/sandboxes=enabled/);
    expect(r?.message).toMatch(/JR2_SANDBOX_NAMESPACES/);
    expect(r?.message).not.toContain("serviceaccount");
  });
});
