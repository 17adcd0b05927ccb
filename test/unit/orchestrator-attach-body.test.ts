// The attach request the Orchestrator sends and keeps on the Sandbox (pure).
import { ATTACH_ANNOTATION } from "../../api/wire";
import { attachBodyOf, readAttach } from "../../orchestrator/attach-body";
import { repoIdentity, repoKey } from "../../api/repo-identity";
import { AttachBody } from "../../api/attach";

describe("attachBodyOf", () => {
  it("has no body for a workspace without Repo Slots", () => {
    expect(attachBodyOf({ repos: [], branch: "b" })).toBeUndefined();
  });

  it("gives each slot the identity and cache key the operator mounts, and the Harness accepts it", () => {
    const url = "git@github.com:Acme/Widgets.git";
    const body = attachBodyOf({ branch: "feature/x", repos: [{ slot: "app", url, ref: "main" }] })!;
    expect(body.slots[0]).toEqual({
      slot: "app",
      url,
      identity: repoIdentity(url),
      key: repoKey(repoIdentity(url)),
      ref: "main",
    });
    expect(AttachBody.safeParse(body).success).toBe(true);
  });

  it("reads back what the CR carries, and nothing from a bad annotation", () => {
    const body = attachBodyOf({ branch: "b", repos: [{ slot: "s", url: "https://example.com/a/b" }] })!;
    expect(readAttach({ metadata: { annotations: { [ATTACH_ANNOTATION]: JSON.stringify(body) } } })).toEqual(body);
    expect(readAttach({ metadata: { annotations: { [ATTACH_ANNOTATION]: "{not json" } } })).toBeUndefined();
    expect(readAttach({ metadata: {} })).toBeUndefined();
  });
});
