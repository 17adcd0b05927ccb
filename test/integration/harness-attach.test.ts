// The Harness over real HTTP, running real git against real repositories in a temp dir: a source
// repository, its bare clone as the node's cache (<tmp>/repos/<key>), and a work root.
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, realpath, rm, stat } from "node:fs/promises";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { startHarness, type LogEntry } from "../../harness/harness-server";

const exec = promisify(execFile);
const TOKEN = randomBytes(24).toString("hex");
const SECRET_URL = "https://user:secret@git.invalid/team/app.git";
const PLAIN_URL = "https://git.invalid/team/lib.git";

// Commits need an author, and the machine's own git config must not change the outcome.
const GIT_ENV = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_AUTHOR_NAME: "t",
  GIT_AUTHOR_EMAIL: "t@t.invalid",
  GIT_COMMITTER_NAME: "t",
  GIT_COMMITTER_EMAIL: "t@t.invalid",
};
const savedEnv = { ...process.env };

async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await exec("git", ["-C", cwd, ...args], { env: { ...process.env, ...GIT_ENV } });
  return stdout.trim();
}

let tmp: string;
let work: string;
let repos: string;
let server: Server;
let base: string;
let commits: string[]; // commits[0] oldest; main's HEAD is the last
let libHead: string;
const logs: LogEntry[] = [];
const answers: string[] = [];

/** A source repository with one commit per message, cloned bare into <repos>/<key>. */
async function makeCache(key: string, messages: string[]): Promise<string[]> {
  const src = path.join(tmp, "src", key);
  await exec("git", ["init", "-q", "-b", "main", src]);
  const shas: string[] = [];
  for (const m of messages) {
    await git(src, "commit", "-q", "--allow-empty", "-m", m);
    shas.push(await git(src, "rev-parse", "HEAD"));
  }
  await git(src, "branch", "release", shas[Math.max(0, shas.length - 2)]);
  await git(tmp, "clone", "-q", "--bare", src, path.join(repos, key));
  return shas;
}

type Answer = { status: number; json: Record<string, unknown> };

async function call(method: string, route: string, body?: unknown, auth: string | null = `Bearer ${TOKEN}`) {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (auth !== null) headers.authorization = auth;
  const payload = typeof body === "string" ? body : body === undefined ? undefined : JSON.stringify(body);
  const res = await fetch(`${base}${route}`, { method, headers, body: payload });
  const text = await res.text();
  answers.push(text);
  return { status: res.status, json: JSON.parse(text) } as Answer;
}

const attach = (body: unknown, auth?: string | null) => call("POST", "/attach", body, auth);
const slot = (name: string, extra: Record<string, unknown> = {}) => ({
  slot: name,
  url: SECRET_URL,
  identity: "git.invalid/team/app",
  key: "app",
  ...extra,
});
const errorOf = (a: Answer) => a.json.error as { code: string; message: string };
const repoOf = (a: Answer, name: string) =>
  (a.json.repos as Record<string, { path: string; branch: string; head: string }>)[name];

beforeAll(async () => {
  Object.assign(process.env, GIT_ENV);
  tmp = await mkdtemp(path.join(os.tmpdir(), "jr2-harness-"));
  work = path.join(tmp, "work");
  repos = path.join(tmp, "repos");
  commits = await makeCache("app", ["one", "two", "three"]);
  [libHead] = await makeCache("lib", ["lib"]);
  const tokenSha256 = createHash("sha256").update(TOKEN).digest("hex");
  server = await startHarness(
    { workRoot: work, reposRoot: repos, tokenSha256, log: (e) => logs.push(e) },
    0,
    "127.0.0.1",
  );
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(tmp, { recursive: true, force: true });
  process.env = savedEnv;
});

describe("harness routes", () => {
  it("answers GET /healthz with 200 {ok:true}", async () => {
    expect(await call("GET", "/healthz")).toEqual({ status: 200, json: { ok: true } });
  });

  it("answers an unknown path with 404 and a wrong method with 405", async () => {
    expect((await call("GET", "/nope")).status).toBe(404);
    expect(errorOf(await call("GET", "/attach")).code).toBe("method_not_allowed");
  });

  it.each([
    ["no Authorization header", null],
    ["a wrong bearer token", "Bearer wrong-token"],
    ["the right token under another scheme", `Basic ${TOKEN}`],
  ])("refuses /attach with %s: 401 unauthorized", async (_, auth) => {
    const a = await attach({ slots: [slot("unauth")], branch: "feat" }, auth);
    expect(a.status).toBe(401);
    expect(errorOf(a).code).toBe("unauthorized");
  });

  it("refuses a body over 1 MB with 413", async () => {
    const a = await attach(JSON.stringify({ pad: "x".repeat(1024 * 1024) }));
    expect(a.status).toBe(413);
  });
});

describe("attach body validation", () => {
  const { key: _key, ...keyless } = slot("s");
  it.each([
    ["a missing key", { slots: [keyless], branch: "feat" }, "slots[0].key: Required"],
    ["a slot with a slash", { slots: [slot("a/b")], branch: "feat" }, "slots[0].slot:"],
    ["the slot ..", { slots: [slot("..")], branch: "feat" }, "slots[0].slot:"],
    ["an empty slot", { slots: [slot("")], branch: "feat" }, "slots[0].slot:"],
    ["the branch default", { slots: [slot("s")], branch: "default" }, "branch:"],
    ["a branch git refuses", { slots: [slot("s")], branch: "a..b" }, "branch: git refuses"],
    ["a key that is a path", { slots: [slot("s", { key: "../app" })], branch: "feat" }, "slots[0].key:"],
    ["an unknown field", { slots: [slot("s", { extra: 1 })], branch: "feat" }, "slots[0]: Unrecognized key"],
    ["a slot named twice", { slots: [slot("s"), slot("s")], branch: "feat" }, "slots[1].slot: duplicate"],
    ["a reviewSha that is an expression", { slots: [slot("s")], branch: "f", reviewSha: "HEAD~1" }, "reviewSha:"],
    ["a body that is not JSON", "{", "body: not valid JSON"],
  ])("refuses %s with 400 naming the field", async (_, body, expected) => {
    const a = await attach(body);
    expect(a.status).toBe(400);
    expect(errorOf(a).code).toBe("invalid");
    expect(errorOf(a).message).toContain(expected);
  });

  // The one rule of api/names.ts, which the Orchestrator's API uses too: refused before any git runs.
  it.each([
    [
      "a slot with a control character",
      { slots: [slot("a\u0001b")], branch: "feat" },
      "slots[0].slot: must not contain a control character",
    ],
    [
      "a slot with a NUL",
      { slots: [slot("a\u0000")], branch: "feat" },
      "slots[0].slot: must not contain a control character",
    ],
    ["the slot .git", { slots: [slot(".git")], branch: "feat" }, "slots[0].slot: must not start with '.'"],
    ["a slot with a backslash", { slots: [slot("a\\b")], branch: "feat" }, "slots[0].slot: must not contain '\\'"],
    ["a slot like an option", { slots: [slot("-x")], branch: "feat" }, "slots[0].slot: must not start with '-'"],
    [
      "a slot of 64 bytes",
      { slots: [slot("s".repeat(64))], branch: "feat" },
      "slots[0].slot: must be at most 63 bytes",
    ],
    [
      "a branch like an option",
      { slots: [slot("s")], branch: "--upload-pack=touch /tmp/x" },
      "branch: must not start with '-'",
    ],
    ["the branch -c", { slots: [slot("s")], branch: "-c" }, "branch: must not start with '-'"],
    ["the branch HEAD", { slots: [slot("s")], branch: "HEAD" }, "branch: must not be 'HEAD'"],
    ["the branch @{-1}", { slots: [slot("s")], branch: "@{-1}" }, "branch: git refuses '@{'"],
    [
      "a branch with a NUL",
      { slots: [slot("s")], branch: "a\u0000b" },
      "branch: git refuses a space or a control character",
    ],
    ["a branch with a space", { slots: [slot("s")], branch: "a b" }, "branch: git refuses a space"],
    [
      "a url that climbs",
      { slots: [slot("s", { url: "https://git.invalid/team/../x" })], branch: "f" },
      "slots[0].url: climbs",
    ],
  ])("refuses %s with 400 naming the field and the rule", async (_, body, expected) => {
    const a = await attach(body);
    expect(a.status).toBe(400);
    expect(errorOf(a).message).toContain(expected);
  });
});

describe("attach", () => {
  let first: Answer;
  beforeAll(async () => {
    first = await attach({ slots: [slot("app")], branch: "feature/one" });
  });

  it("answers the worktree's path, branch and head (the cache's HEAD)", () => {
    expect(first.status).toBe(200);
    expect(first.json).toEqual({
      repos: { app: { path: path.join(work, "app", "feature/one"), branch: "feature/one", head: commits[2] } },
    });
  });

  it("clones default with --shared: its alternates point into the cache", async () => {
    const alternates = await readFile(
      path.join(work, "app", "default", ".git", "objects", "info", "alternates"),
      "utf8",
    );
    expect(await realpath(alternates.trim())).toBe(await realpath(path.join(repos, "app", "objects")));
    expect(await git(path.join(work, "app", "default"), "rev-parse", "--abbrev-ref", "HEAD")).toBe("main");
  });

  it("sets the default ACL on the slot root, with no warning (acl is a prerequisite here and in the Sandbox image)", async () => {
    // The Harness only warns where setfacl or ACLs are missing (harness/attach-git.ts); this machine
    // and CI have both (.ci/run installs acl), so a warning here is a failure, never a pass.
    expect(logs.filter((l) => String(l.message).includes("setfacl"))).toEqual([]);
    // Without -d: getfacl -d prints the default entries without their "default:" prefix.
    const { stdout } = await exec("getfacl", ["-p", path.join(work, "app")]);
    expect(stdout).toMatch(/^default:user::rwx$/m);
    expect(stdout).toMatch(/^default:group::rwx$/m);
    expect(stdout).toMatch(/^default:other::r-x$/m);
  });

  it("fetches origin from the cache and pushes to the slot's url", async () => {
    const def = path.join(work, "app", "default");
    expect(await git(def, "remote", "get-url", "origin")).toBe(path.join(repos, "app"));
    expect(await git(def, "remote", "get-url", "--push", "origin")).toBe(SECRET_URL);
  });

  it("sets the push url again on a later attach: a new url (a new token) replaces the clone's", async () => {
    const def = path.join(work, "rotate", "default");
    expect((await attach({ slots: [slot("rotate")], branch: "r1" })).status).toBe(200);
    expect(await git(def, "remote", "get-url", "--push", "origin")).toBe(SECRET_URL);
    const rotated = "https://user:rotated@git.invalid/team/app.git";
    expect((await attach({ slots: [slot("rotate", { url: rotated })], branch: "r1" })).status).toBe(200);
    expect(await git(def, "remote", "get-url", "--push", "origin")).toBe(rotated);
    expect(await git(def, "remote", "get-url", "origin")).toBe(path.join(repos, "app"));
  });

  it("checks the worktree out on the new branch, group-writable (umask 002)", async () => {
    const wt = path.join(work, "app", "feature/one");
    expect(await git(wt, "rev-parse", "--abbrev-ref", "HEAD")).toBe("feature/one");
    expect(await realpath(await git(wt, "rev-parse", "--git-common-dir"))).toBe(
      await realpath(path.join(work, "app", "default", ".git")),
    );
    expect((await stat(wt)).mode & 0o020).toBe(0o020);
  });

  it("gives the same answer when repeated, and again after the worktree was removed by hand", async () => {
    const body = { slots: [slot("app")], branch: "feature/one" };
    expect(await attach(body)).toEqual(first);
    await rm(path.join(work, "app", "feature/one"), { recursive: true, force: true });
    expect(await attach(body)).toEqual(first);
  });

  it("attaches two slots in one call", async () => {
    const lib = { slot: "lib", url: PLAIN_URL, identity: "git.invalid/team/lib", key: "lib" };
    const a = await attach({ slots: [slot("two"), lib], branch: "pair" });
    expect(a.status).toBe(200);
    expect(repoOf(a, "two")).toEqual({ path: path.join(work, "two", "pair"), branch: "pair", head: commits[2] });
    expect(repoOf(a, "lib")).toEqual({ path: path.join(work, "lib", "pair"), branch: "pair", head: libHead });
  });

  it("starts the branch at reviewSha when given", async () => {
    const a = await attach({ slots: [slot("review")], branch: "review", reviewSha: commits[0] });
    expect(repoOf(a, "review").head).toBe(commits[0]);
    expect(await git(path.join(work, "review", "review"), "rev-parse", "--abbrev-ref", "HEAD")).toBe("review");
  });

  it("checks default out at the slot's ref when given, and branches from it", async () => {
    const a = await attach({ slots: [slot("rel", { ref: "release" })], branch: "fix" });
    expect(repoOf(a, "rel").head).toBe(commits[1]);
    expect(await git(path.join(work, "rel", "default"), "rev-parse", "--abbrev-ref", "HEAD")).toBe("release");
  });

  it("runs concurrent attaches one at a time, so both succeed", async () => {
    const [a, b] = await Promise.all([
      attach({ slots: [slot("conc")], branch: "b1" }),
      attach({ slots: [slot("conc")], branch: "b2" }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(repoOf(b, "conc").head).toBe(commits[2]);
  });

  it("answers 500 attach_failed naming the slot and the step when the cache is missing", async () => {
    const a = await attach({ slots: [slot("lost", { key: "missing" })], branch: "feat" });
    expect(a.status).toBe(500);
    expect(errorOf(a).code).toBe("attach_failed");
    expect(errorOf(a).message).toMatch(/slot "lost": step "clone" failed: .*does not exist/);
  });

  it("never puts the url's credentials or the token in an answer or a log line", () => {
    const seen = [...answers, ...logs.map((l) => JSON.stringify(l))].join("\n");
    expect(seen).not.toContain("secret");
    expect(seen).not.toContain(TOKEN);
    expect(logs).toContainEqual(expect.objectContaining({ method: "GET", path: "/healthz", status: 200 }));
  });
});
