// An Effect resolved into the Effector's order from what jr2 recorded (orchestrator/effects/resolve.ts,
// decision 0070): a push to the slot's url with its fence entry's secret; an http request only where
// the workspace may send one; secrets only as declared, and a header's only to its origins. Each
// refusal names its field.
import { EffectBody } from "../../api/effects";
import { parseCredentials } from "../../orchestrator/workspaces/fence";
import { resolveEffect, type ResolveContext, type WorkspaceFacts } from "../../orchestrator/effects/resolve";

const credentials = parseCredentials(`
- match: forge.example/acme
  secret: push-acme
- match: forge.example/acme/private
  secret: push-private
  tenants: [team-b]
`);

const ws: WorkspaceFacts = {
  name: "ws-1",
  branch: "feature",
  slots: [
    { slot: "app", url: "https://forge.example/acme/app.git", identity: "forge.example/acme/app" },
    { slot: "lib", url: "https://other.example/lib.git", identity: "other.example/lib" },
  ],
  gitCredentials: ["push-acme"],
  tenant: "team-a",
};

const ctx: ResolveContext = {
  credentials,
  heldOrigins: ["https://api.model.example"],
  declared: [{ secret: "forge-token", key: "token", origins: ["https://api.forge.example"] }],
};

const resolve = (body: Record<string, unknown>, over: Partial<WorkspaceFacts> = {}) =>
  resolveEffect(EffectBody.parse(body), { ...ws, ...over }, ctx);
const token = { secret: "forge-token", key: "token" };

describe("a push", () => {
  it("goes to the slot's url from its worktree, with its fence entry's secret", () => {
    expect(resolve({ id: "p", kind: "push", slot: "app" })).toEqual({
      ok: true,
      order: {
        id: "p",
        idempotent: false,
        effect: {
          kind: "push",
          worktree: "/work/app/feature",
          source: { branch: "feature" },
          url: "https://forge.example/acme/app.git",
          credential: "push-acme",
          ref: "refs/heads/feature",
          timeoutSeconds: 600,
        },
      },
    });
    const c = "a".repeat(40);
    expect(resolve({ id: "p", kind: "push", slot: "app", commit: c, to: "main", expect: c })).toMatchObject({
      ok: true,
      order: { effect: { source: { commit: c }, ref: "refs/heads/main", expect: c } },
    });
  });

  it("is refused for a slot not attached, one with no push secret, or one the Effector does not push", () => {
    expect(resolve({ id: "p", kind: "push", slot: "nope" })).toEqual({
      ok: false,
      message: 'slot: the workspace attaches no Repo Slot "nope" (slots: app, lib)',
    });
    expect(resolve({ id: "p", kind: "push", slot: "lib" })).toMatchObject({
      ok: false,
      message: /^slot: .*no fence entry/,
    });
    expect(resolve({ id: "p", kind: "push", slot: "app" }, { gitCredentials: [] })).toMatchObject({
      ok: false,
      message: /^slot: .*effector\.pushes/,
    });
  });
});

describe("an http request", () => {
  it("goes under a fence entry the tenant may use, to a held origin, or to a named secret's origin", () => {
    expect(resolve({ id: "h", kind: "http", method: "GET", url: "https://forge.example/acme/app/pulls" }).ok).toBe(
      true,
    );
    expect(resolve({ id: "h", kind: "http", method: "GET", url: "https://api.model.example/v1" }).ok).toBe(true);
    const withToken = resolve({
      id: "h",
      kind: "http",
      method: "POST",
      url: "https://api.forge.example/repos/acme/app/pulls",
      headers: { authorization: token },
      body: { file: { slot: "app", path: "docs/PR.md" } },
    });
    expect(withToken).toMatchObject({
      ok: true,
      order: {
        effect: {
          headers: { authorization: token },
          body: { file: { root: "/work/app/feature", path: "docs/PR.md" } },
        },
      },
    });
  });

  it("is refused elsewhere, over plain http under a fence entry, and under an entry set apart for another tenant", () => {
    for (const url of [
      "https://evil.example/x",
      "http://forge.example/acme/app",
      "https://forge.example/acme-evil/app",
      "https://forge.example/acme/private/x",
    ])
      expect([url, resolve({ id: "h", kind: "http", method: "GET", url })]).toEqual([
        url,
        { ok: false, message: expect.stringMatching(/^url: .*under no fence entry/) },
      ]);
    expect(
      resolve(
        { id: "h", kind: "http", method: "GET", url: "https://forge.example/acme/private/x" },
        { tenant: "team-b" },
      ).ok,
    ).toBe(true);
  });

  it("sends a header's secret only to its origins, and only a declared one, naming the header", () => {
    expect(
      resolve({
        id: "h",
        kind: "http",
        method: "GET",
        url: "https://forge.example/acme/app",
        headers: { authorization: token },
      }),
    ).toEqual({
      ok: false,
      message:
        "headers.authorization: secret forge-token/token may go only to https://api.forge.example; add the origin " +
        "https://forge.example to the pod config's effector.secrets entry",
    });
    expect(
      resolve({
        id: "h",
        kind: "http",
        method: "GET",
        url: "https://api.forge.example/x",
        headers: { "x-key": { secret: "other", key: "k" } },
      }),
    ).toMatchObject({ ok: false, message: /^headers\["x-key"\]: secret other\/k is not one the workspace declared/ });
  });

  it("refuses a file body of a slot not attached", () => {
    expect(
      resolve({
        id: "h",
        kind: "http",
        method: "POST",
        url: "https://forge.example/acme/x",
        body: { file: { slot: "z", path: "a" } },
      }),
    ).toMatchObject({ ok: false, message: /^body\.file\.slot: / });
  });
});

describe("a command", () => {
  it("runs in its slot's worktree, with declared secrets only", () => {
    expect(
      resolve({
        id: "c",
        kind: "command",
        argv: ["make"],
        cwd: { slot: "app", path: "sub" },
        env: { GH_TOKEN: token },
      }),
    ).toMatchObject({
      ok: true,
      order: { effect: { kind: "command", root: "/work/app/feature", cwd: "sub", env: { GH_TOKEN: token } } },
    });
    expect(
      resolve({
        id: "c",
        kind: "command",
        argv: ["make"],
        cwd: { slot: "app" },
        env: { K: { secret: "nope", key: "k" } },
      }),
    ).toMatchObject({ ok: false, message: /^env\.K: secret nope\/k is not one the workspace declared/ });
    expect(resolve({ id: "c", kind: "command", argv: ["make"], cwd: { slot: "z" } })).toMatchObject({
      ok: false,
      message: /^cwd\.slot: /,
    });
  });
});
