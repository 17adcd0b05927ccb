// The attach request the Orchestrator sends and keeps on the Sandbox (pure).
import { ATTACH_ANNOTATION } from "../../api/wire";
import { attachBodyOf, readAttach } from "../../orchestrator/workspaces/attach-body";
import { repoIdentity, repoKey } from "../../api/repo-identity";
import { AttachBody, parseAttachBody } from "../../api/attach";
import { fenceSlots, parseCredentials } from "../../orchestrator/workspaces/fence";
import type { PlaceRepo, PlacedRepo } from "../../orchestrator/workspaces/sandbox-gateway";

const ENTRIES = parseCredentials("- github.com/Acme\n- example.com/a\n");

/** The create's one fence, as registry.ts runs it. */
function fenced(slots: PlaceRepo[]): PlacedRepo[] {
  const r = fenceSlots(slots, ENTRIES);
  if (!r.ok) throw r.error;
  return r.repos;
}

describe("attachBodyOf", () => {
  it("has no body for a workspace without Repo Slots", () => {
    expect(attachBodyOf({ repos: [], branch: "b" })).toBeUndefined();
  });

  it("gives each slot the identity and cache key the operator mounts, and the Harness accepts it", () => {
    const url = "git@github.com:Acme/Widgets.git";
    const body = attachBodyOf({ branch: "feature/x", repos: fenced([{ slot: "app", url, ref: "main" }]) })!;
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
    const body = attachBodyOf({ branch: "b", repos: fenced([{ slot: "s", url: "https://example.com/a/b" }]) })!;
    expect(readAttach({ metadata: { annotations: { [ATTACH_ANNOTATION]: JSON.stringify(body) } } })).toEqual(body);
    expect(readAttach({ metadata: { annotations: { [ATTACH_ANNOTATION]: "{not json" } } })).toBeUndefined();
    expect(readAttach({ metadata: {} })).toBeUndefined();
  });
});

describe("the create's one fence (fenceSlots) and the body built from it", () => {
  it("hands each slot its identity, key and entry, in order, computed once", () => {
    const repos = fenced([
      { slot: "app", url: "git@github.com:Acme/Widgets.git", ref: "main" },
      { slot: "lib", url: "https://example.com/a/lib" },
    ]);
    expect(repos).toEqual([
      {
        slot: "app",
        url: "git@github.com:Acme/Widgets.git",
        ref: "main",
        identity: "github.com/Acme/Widgets",
        key: repoKey("github.com/Acme/Widgets"),
        bound: false,
        entry: ENTRIES[0],
      },
      {
        slot: "lib",
        url: "https://example.com/a/lib",
        identity: "example.com/a/lib",
        key: repoKey("example.com/a/lib"),
        bound: false,
        entry: ENTRIES[1],
      },
    ]);
  });

  it("builds the body from the fenced repos without reading a url again", () => {
    // An identity and key no url spells: the body carries what the fence said, as it is.
    const repo: PlacedRepo = {
      slot: "app",
      url: "https://example.com/a/b",
      identity: "fenced/id",
      key: "k-1",
      bound: false,
    };
    expect(attachBodyOf({ branch: "b", repos: [repo] })!.slots[0]).toEqual({
      slot: "app",
      url: "https://example.com/a/b",
      identity: "fenced/id",
      key: "k-1",
    });
  });

  it.each([
    "https://example.com/a%2F..%2Fevil/x",
    "https://example.com/a/..%2Fevil/x",
    "https://example.com/a/%2e%2e/evil",
    "git@github.com:Acme/../evil/x",
    "file://example.com/a/../../tmp",
  ])("refuses %s, a url that climbs out of its entry, before any body exists", (url) => {
    const r = fenceSlots([{ slot: "app", url }], ENTRIES);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.error.reason).toBe("FenceRefused");
  });

  it("every body it builds is one the Harness accepts", () => {
    const body = attachBodyOf({ branch: "feat/x", repos: fenced([{ slot: "app", url: "https://example.com/a/b" }]) });
    expect(parseAttachBody(body).ok).toBe(true);
  });
});
