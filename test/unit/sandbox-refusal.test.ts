import { refusalOf } from "../../capabilities/sandbox/sandbox-controller";
import { ApiError } from "../../lib/api-writer";

describe("refusalOf", () => {
  it("names a 403 'exceeded quota' QuotaExceeded, keeping the server's message", () => {
    const message = 'pods "sb" is forbidden: exceeded quota: compute, requested: cpu=2, used: cpu=8, limited: cpu=8';
    const r = refusalOf(new ApiError(403, "Forbidden", message));
    expect(r?.reason).toBe("QuotaExceeded");
    expect(r?.message).toBe(message);
  });

  it("names a 403 for a missing PriorityClass PriorityClassNotFound", () => {
    const message = 'pods "sb" is forbidden: no PriorityClass with name gold was found';
    const r = refusalOf(new ApiError(403, "Forbidden", message));
    expect(r?.reason).toBe("PriorityClassNotFound");
    expect(r?.message).toBe(message);
  });

  it("names a 422 PodInvalid", () => {
    const message = 'Pod "sb" is invalid: spec.containers[1].name: Duplicate value: "harness"';
    expect(refusalOf(new ApiError(422, "Invalid", message))?.reason).toBe("PodInvalid");
  });

  it("is undefined for a 500, which is retried rather than waited on", () => {
    expect(refusalOf(new ApiError(500, "InternalError", "etcdserver: request timed out"))).toBeUndefined();
  });
});
