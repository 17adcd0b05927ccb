// The HTTP API's schemas: what a body must be, how a refusal names its fields, and the OpenAPI
// document generated from the same schemas.
import { z } from "zod";
import { parseAttachBody } from "../../api/attach";
import {
  CreateWorkspaceBody,
  ErrorBody,
  WorkspaceEvent,
  WorkspaceView,
  parseCreateBody,
  zodIssuesToMessage,
} from "../../api/orchestrator-schemas";
import { openApiDocument } from "../../orchestrator/http/openapi-document";
import { PATHS, paramsOf } from "../../api/orchestrator-routes";

const GOOD = {
  image: "ghcr.io/acme/harness:1",
  repos: [
    { slot: "app", url: "https://github.com/acme/app.git", ref: "main" },
    { slot: "lib", url: "git@github.com:acme/lib.git" },
  ],
  branch: "feat/login",
};

function refusal(body: unknown): string {
  const r = parseCreateBody(body);
  if (r.ok) throw new Error("expected a refusal");
  return r.message;
}

describe("POST /v1/workspaces body", () => {
  it("accepts a full body", () => {
    const body = {
      ...GOOD,
      userImage: "ghcr.io/acme/dev:1",
      size: { cpu: "2", memory: "4Gi" },
      idleTimeout: "1h30m",
      runtimeClassName: "gvisor",
      run: "run-42",
      workflow: "fix-bug",
    };
    expect(parseCreateBody(body)).toEqual({ ok: true, body });
  });

  it("defaults repos to none", () => {
    expect(parseCreateBody({ image: "h", branch: "b" })).toEqual({
      ok: true,
      body: { image: "h", branch: "b", repos: [] },
    });
  });

  it.each([
    ["a missing branch", { image: "h", repos: [] }, "branch: Required"],
    ["a missing image", { branch: "b" }, "image: Required"],
    [
      "a slot with a slash",
      { ...GOOD, repos: [{ slot: "a/b", url: "https://x.io/a" }] },
      "repos[0].slot: must not contain '/'",
    ],
    [
      "a slot with ..",
      { ...GOOD, repos: [{ slot: "a..b", url: "https://x.io/a" }] },
      "repos[0].slot: must not contain '..'",
    ],
    ["the slot .", { ...GOOD, repos: [{ slot: ".", url: "https://x.io/a" }] }, "repos[0].slot: must not be '.'"],
    ["an empty slot", { ...GOOD, repos: [{ slot: "", url: "https://x.io/a" }] }, "repos[0].slot: must not be empty"],
    ["a duplicate slot", { ...GOOD, repos: [GOOD.repos[0], GOOD.repos[0]] }, "repos[1].slot: duplicate slot"],
    ["the branch default", { ...GOOD, branch: "default" }, "branch: must not be 'default'"],
    ["a branch under default/", { ...GOOD, branch: "default/x" }, "branch: must not be 'default'"],
    [
      "a url like an option",
      { ...GOOD, repos: [{ slot: "a", url: "--upload-pack=x" }] },
      "repos[0].url: must not start with '-'",
    ],
    ["a url that is no url", { ...GOOD, repos: [{ slot: "a", url: "just words" }] }, "repos[0].url:"],
    ["a ref like an option", { ...GOOD, repos: [{ slot: "a", url: "https://x.io/a", ref: "-x" }] }, "repos[0].ref:"],
    ["an unknown field", { ...GOOD, colour: "blue" }, 'body: Unrecognized key: "colour"'],
    [
      "an unknown slot field",
      { ...GOOD, repos: [{ slot: "a", url: "https://x.io/a", key: "k" }] },
      "repos[0]: Unrecognized key",
    ],
    ["a bad size", { ...GOOD, size: { cpu: "lots" } }, "size.cpu: must be a Kubernetes quantity"],
    ["an empty size", { ...GOOD, size: {} }, "size: must name cpu, memory or disk"],
    ["a bad idle timeout", { ...GOOD, idleTimeout: "30 minutes" }, "idleTimeout: idleTimeout must be a Go duration"],
    ["a bad run label", { ...GOOD, run: "a b" }, "run: must be a Kubernetes label value"],
    [
      "a runtime class that is no RuntimeClass's name",
      { ...GOOD, runtimeClassName: "gVisor" },
      "runtimeClassName: must be a RuntimeClass's name (lower-case DNS subdomain), e.g. gvisor",
    ],
    ["repos not a list", { ...GOOD, repos: "app" }, "repos: Invalid input: expected array"],
    ["not an object", [GOOD], "body: Invalid input: expected object"],
  ])("refuses %s, naming the field", (_what, body, message) => {
    expect(refusal(body)).toContain(message);
  });

  it("names every bad field at once", () => {
    const m = refusal({ image: "", repos: [{ slot: "a/b", url: "" }], branch: "default" });
    expect(m.split("; ").map((part) => part.split(":")[0])).toEqual([
      "image",
      "repos[0].slot",
      "repos[0].url",
      "branch",
    ]);
  });

  it("accepts only what the Harness's /attach accepts, slot for slot", () => {
    const r = parseCreateBody(GOOD);
    if (!r.ok) throw new Error(r.message);
    const attach = parseAttachBody({
      slots: r.body.repos.map((s, i) => ({ ...s, identity: `id-${i}`, key: `key-${i}` })),
      branch: r.body.branch,
    });
    expect(attach.ok).toBe(true);
    // ...and the Harness refuses what this refuses.
    expect(parseAttachBody({ slots: [{ slot: "a/b", url: "u", identity: "i", key: "k" }], branch: "x" }).ok).toBe(
      false,
    );
  });
});

describe("zodIssuesToMessage", () => {
  it("joins every issue with its path", () => {
    const r = z.strictObject({ a: z.array(z.strictObject({ b: z.number() })) }).safeParse({ a: [{ b: "x" }] });
    expect(r.success).toBe(false);
    if (r.success) return;
    expect(zodIssuesToMessage(r.error.issues)).toBe("a[0].b: Invalid input: expected number, received string");
  });
});

describe("answers", () => {
  it("a workspace view", () => {
    const view = {
      name: "ws-1",
      state: "ready",
      phase: "Ready",
      endpoint: "http://ws-1.ns.svc:8080",
      conditions: [
        { type: "Ready", status: "True", reason: "PodReady", message: "", lastTransitionTime: "2026-03-01T12:00:00Z" },
      ],
      attach: { repos: { app: { path: "/work/app/feat", branch: "feat", head: "abc" } } },
      stale: { app: "stale" },
      createdAt: "2026-03-01T12:00:00.000Z",
    };
    expect(WorkspaceView.parse(view)).toEqual(view);
    expect(WorkspaceView.safeParse({ ...view, state: "sleeping" }).success).toBe(false);
  });

  it("every event shape", () => {
    const at = "2026-03-01T12:00:00.000Z";
    for (const e of [
      { type: "transition", from: null, to: "placing", at },
      { type: "transition", from: "ready", to: "lost", at, lost: { reason: "Evicted", message: "m" } },
      { type: "wait", wait: { kind: "node", message: "m" }, at },
      { type: "wait", wait: { kind: "repo", reason: "RepoPending", message: "m" }, at },
      { type: "renewed", count: 3, at },
      { type: "renew_failed", message: "m", at },
    ]) {
      expect(WorkspaceEvent.parse(e)).toEqual(e);
    }
    expect(
      WorkspaceEvent.safeParse({ type: "wait", wait: { kind: "repo", reason: "Other", message: "m" }, at }).success,
    ).toBe(false);
  });

  it("an error", () => {
    expect(ErrorBody.parse({ error: { code: "invalid", message: "branch: Required" } })).toBeTruthy();
  });
});

describe("the OpenAPI document", () => {
  const doc = openApiDocument() as {
    openapi: string;
    paths: Record<string, Record<string, unknown>>;
    components: {
      schemas: Record<string, { properties?: Record<string, unknown>; required?: string[]; $schema?: string }>;
    };
  };

  it("describes every path of the route table, each with the methods the table gives it", () => {
    expect(doc.openapi).toBe("3.1.0");
    // A Harness's routes are in the Sandbox's own document (decision 0077).
    const sandbox = openApiDocument("sandbox") as typeof doc;
    const publicPaths = PATHS.filter((p) => p.auth !== "sandbox");
    expect(Object.keys(doc.paths)).toEqual(publicPaths.map((p) => p.template));
    expect(Object.keys(sandbox.paths)).toEqual(PATHS.filter((p) => p.auth === "sandbox").map((p) => p.template));
    for (const { template, routes } of PATHS) {
      const methods = routes.map((r) => r.method.toLowerCase());
      const item = (doc.paths[template] ?? sandbox.paths[template])!;
      expect(Object.keys(item).filter((k) => k !== "parameters")).toEqual(methods);
      const named = (item.parameters as Array<{ name: string; in: string }> | undefined) ?? [];
      expect(named.filter((p) => p.in === "path").map((p) => p.name)).toEqual(paramsOf(template));
    }
    expect(Object.keys(doc.paths["/v1/workspaces"]).sort()).toEqual(["get", "post"]);
    expect(Object.keys(doc.paths["/v1/workspaces/{name}"]).sort()).toEqual(["delete", "get", "parameters"]);
  });

  it("is generated from the same schemas: the body as a client writes it", () => {
    const body = doc.components.schemas.CreateWorkspaceBody;
    expect(body.required).toEqual(["image", "branch"]);
    expect(Object.keys(body.properties ?? {}).sort()).toEqual(Object.keys(CreateWorkspaceBody.shape).sort());
    expect(body.$schema).toBeUndefined();
    expect(Object.keys(doc.components.schemas).sort()).toEqual(
      [
        "CreateWorkspaceBody",
        "Created",
        "Deleted",
        "Error",
        "Health",
        "WorkspaceEvent",
        "WorkspaceList",
        "WorkspaceView",
        "EgressList",
        "EgressLog",
        "PickList",
        "AnswerBody",
        "AllowedBody",
        "AnswerReceipt",
        "SubmitTurnBody",
        "TurnSubmitted",
        "AbortReceipt",
        "AllowedSet",
        "Admission",
        "StreamEvent",
        "EffectBody",
        "EffectRecord",
        "EffectList",
      ].sort(),
    );
  });

  it("states every route's bodies: each answer's content, a JSON one by its component", () => {
    const loose: string[] = [];
    type Content = Record<string, { schema: { $ref?: string } }>;
    type Op = { requestBody?: { content: Content }; responses: Record<string, { content?: Content }> };
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Op>>))
      for (const [method, op] of Object.entries(item)) {
        if (method === "parameters") continue;
        const where = `${method} ${path}`;
        if (op.requestBody && !op.requestBody.content["application/json"]?.schema.$ref) loose.push(`${where} body`);
        for (const [status, answer] of Object.entries(op.responses)) {
          // A HEAD answer has no body, by HTTP's rule.
          if (!answer.content) {
            if (method !== "head") loose.push(`${where} ${status}: no content`);
          }
          // The document's own answer is the one JSON answer with no component: it is this document.
          else if (answer.content["application/json"] && !answer.content["application/json"].schema.$ref)
            if (path !== "/v1/openapi.json") loose.push(`${where} ${status}: inline JSON`);
        }
      }
    expect(loose).toEqual([]);
    const events = (doc.paths as Record<string, Record<string, Op>>)["/v1/workspaces/{name}/events"].get;
    expect(events.responses["200"].content!["text/event-stream"].schema).toEqual({
      oneOf: [{ $ref: "#/components/schemas/WorkspaceView" }, { $ref: "#/components/schemas/WorkspaceEvent" }],
    });
  });

  it("every $ref resolves", () => {
    const refs = JSON.stringify(doc).match(/"\$ref":"[^"]+"/g) ?? [];
    expect(refs.length).toBeGreaterThan(5);
    for (const r of refs) {
      const name = r.split("/").pop()!.replace(/"$/, "");
      expect(doc.components.schemas[name]).toBeDefined();
    }
  });
});

describe("names that cross a process: one rule, at the edge, naming the field", () => {
  const withBranch = (branch: string) => ({ ...GOOD, branch });
  const withSlot = (slot: string) => ({ ...GOOD, repos: [{ slot, url: "https://github.com/acme/app" }] });
  const withUrl = (url: string) => ({ ...GOOD, repos: [{ slot: "app", url }] });

  it.each([
    ["an option", "--upload-pack=touch /tmp/x", "must not start with '-'"],
    ["-c", "-c", "must not start with '-'"],
    ["..", "..", "'..'"],
    ["a..b", "a..b", "'..'"],
    ["a reflog expression", "@{-1}", "'@{'"],
    ["HEAD", "HEAD", "must not be 'HEAD'"],
    ["@", "@", "'@'"],
    ["a NUL", "a\u0000b", "control character"],
    ["a space", "a b", "a space"],
    ["a newline", "a\nb", "control character"],
    ["a tilde", "a~1", "'~'"],
    ["a caret", "a^", "'^'"],
    ["a colon", "a:b", "':'"],
    ["a question mark", "a?", "'?'"],
    ["a star", "a*", "'*'"],
    ["a bracket", "a[b", "'['"],
    ["a backslash", "a\\b", "'\\'"],
    ["a leading /", "/a", "starts or ends with '/'"],
    ["a trailing /", "a/", "starts or ends with '/'"],
    ["//", "a//b", "'//'"],
    ["a component starting with .", "a/.b", "starting with '.'"],
    ["a leading .", ".a", "starting with '.'"],
    ["a .lock component", "a.lock/b", "'.lock'"],
    ["a trailing .", "a.", "ending with '.'"],
    ["256 bytes", "b".repeat(256), "at most 255 bytes"],
    ["default", "default", "must not be 'default'"],
    ["default/x", "default/x", "must not be 'default'"],
  ])("refuses the branch %s, naming the field and the rule", (_what, branch, message) => {
    const m = refusal(withBranch(branch));
    expect(m).toMatch(/^branch: /);
    expect(m).toContain(message);
    // ...and the Harness refuses it too, by the same rule.
    expect(parseAttachBody({ slots: [{ slot: "s", url: "https://h/x", identity: "h/x", key: "k" }], branch }).ok).toBe(
      false,
    );
  });

  it.each(["feature/login", "v1.0", "fix-123_a", "féature/ü", "a@b", "x".repeat(255)])(
    "accepts the branch %j",
    (branch) => {
      expect(parseCreateBody(withBranch(branch)).ok).toBe(true);
    },
  );

  it.each([
    [".git", "must not start with '.'"],
    [".hidden", "must not start with '.'"],
    ["a\\b", "must not contain '\\'"],
    ["a\u0001b", "control character"],
    ["a\u0000", "control character"],
    ["a\nb", "control character"],
    ["-rf", "must not start with '-'"],
    ["..", "'..'"],
    ["s".repeat(64), "at most 63 bytes"],
  ])("refuses the slot %j, naming the field and the fix", (slot, message) => {
    const m = refusal(withSlot(slot));
    expect(m).toMatch(/^repos\[0\]\.slot: /);
    expect(m).toContain(message);
    expect(m).toMatch(/name the slot with|shorten/);
    expect(parseAttachBody({ slots: [{ slot, url: "https://h/x", identity: "h/x", key: "k" }], branch: "b" }).ok).toBe(
      false,
    );
  });

  it.each(["app", "my.lib", "a_b", "A-1", "s".repeat(63)])("accepts the slot %j", (slot) => {
    expect(parseCreateBody(withSlot(slot)).ok).toBe(true);
  });

  it.each([
    ["https://host/acme%2F..%2Fevil/x", "encoded '/'"],
    ["https://host/acme/..%2Fevil/x", "encoded '/'"],
    ["https://host/acme/../evil/x", "climbs"],
    ["git@host:acme/../evil/x", "climbs"],
    ["file://host/acme/../../tmp", "file url"],
    ["/srv/demo/remotes/demo.git/../../../../tmp", "climbs"],
  ])("refuses the url %s, which climbs, before the fence", (url, message) => {
    const m = refusal(withUrl(url));
    expect(m).toMatch(/^repos\[0\]\.url: /);
    expect(m).toContain(message);
  });

  it.each([
    "https://user:hunter2@github.com/acme/app",
    "https://hunter2@github.com/acme/app",
    "https://x-access-token:hunter2@github.com/acme/app",
    "ssh://git:hunter2@github.com/acme/app",
    "git:hunter2@github.com:acme/app",
  ])("refuses %s, a url with a credential, with the fix and never the password", (url) => {
    const m = refusal(withUrl(url));
    expect(m).toMatch(/^repos\[0\]\.url: carries a (password|user)/);
    expect(m).toContain("credentials come from the fence entry's Secret");
    expect(m).not.toContain("hunter2");
  });

  it.each(["git@github.com:acme/app.git", "ssh://git@github.com/acme/app", "https://github.com/acme/app"])(
    "accepts %s",
    (url) => {
      expect(parseCreateBody(withUrl(url)).ok).toBe(true);
    },
  );
});
