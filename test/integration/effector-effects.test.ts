// The Effector's push and http Effects (decision 0070), on the real program against real servers.
// push: real `git http-backend` behind https with a self-signed certificate (trusted through
// JR2_EFFECTOR_CA_FILE) and HTTP Basic with the token; a worktree made as the Harness makes it
// (`git clone --shared` from a bare cache) with an Agent's commit, and its `.git/config` hostile
// (pushurl, pushInsteadOf, hooksPath, a pre-push hook, fsmonitor): none of it is used, the token
// shows nowhere, a lease guards a force and a non-fast-forward is refused. http: a secret header,
// a Worktree file body, a symlink out refused, an answer bounded.
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { EFFECTOR_PATHS, type EffectorOrder } from "../../api/effector-wire";
import { gitIn } from "../support/git-fixtures";
import { startGitHttpServer, type GitHttpServer } from "../support/git-http-server";
import {
  effectorDirs,
  newKey,
  signedRequest,
  startEffector,
  writeKey,
  type EffectorDirs,
  type RunningEffector,
} from "../support/effector-fixture";

const TOKEN = "ghp_tokenNeverShown0123456789";
const SECRET = "forge-secret-value-9876";

let d: EffectorDirs;
let key: string;
let fx: RunningEffector;
let git: GitHttpServer;
let serverRoot: string;
let worktree: string;
let base: string;
let agent: string;
let alt: string;
let marker: string;
let evil: string;

type Answer = {
  state: string;
  replayed: boolean;
  result?: Record<string, unknown>;
  error?: { code: string; message: string };
};
const send = async (order: EffectorOrder) => {
  const r = await signedRequest(fx.url, key, "POST", EFFECTOR_PATHS.effects, JSON.stringify(order));
  expect(r.text).not.toContain(TOKEN);
  expect(r.text).not.toContain(SECRET);
  return r.json as Answer;
};

beforeAll(async () => {
  d = effectorDirs();
  key = newKey();
  writeKey(d, key);
  // A certificate for 127.0.0.1, its own CA.
  const certDir = join(d.base, "cert");
  mkdirSync(certDir);
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=127.0.0.1",
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      join(certDir, "key.pem"),
      "-out",
      join(certDir, "cert.pem"),
    ],
    { stdio: "ignore" },
  );
  serverRoot = join(d.base, "server");
  mkdirSync(serverRoot);
  git = await startGitHttpServer({
    root: serverRoot,
    user: "jr2-bot",
    password: TOKEN,
    tls: {
      key: readFileSync(join(certDir, "key.pem"), "utf8"),
      cert: readFileSync(join(certDir, "cert.pem"), "utf8"),
      host: "127.0.0.1",
    },
  });
  // The remote, with one commit; the node's cache of it; the Agent's worktree, a --shared clone.
  const seed = join(d.base, "seed");
  gitIn(undefined, "init", "-q", "-b", "main", seed);
  writeFileSync(join(seed, "README.md"), "hello\n");
  gitIn(seed, "add", ".");
  gitIn(seed, "commit", "-qm", "base");
  base = gitIn(seed, "rev-parse", "HEAD");
  gitIn(undefined, "clone", "-q", "--bare", seed, join(serverRoot, "remote.git"));
  gitIn(join(serverRoot, "remote.git"), "config", "http.receivepack", "true");
  const cache = join(d.repos, "k1");
  gitIn(undefined, "clone", "-q", "--bare", join(serverRoot, "remote.git"), cache);
  worktree = join(d.work, "s", "feature");
  gitIn(undefined, "clone", "-q", "--shared", cache, worktree);
  gitIn(worktree, "checkout", "-q", "-b", "alt");
  writeFileSync(join(worktree, "alt.txt"), "another line\n");
  gitIn(worktree, "add", ".");
  gitIn(worktree, "commit", "-qm", "alt");
  alt = gitIn(worktree, "rev-parse", "HEAD");
  gitIn(worktree, "checkout", "-q", "-b", "feature", base);
  mkdirSync(join(worktree, "docs"));
  writeFileSync(join(worktree, "docs", "PR.md"), "# The Agent's change\n");
  gitIn(worktree, "add", ".");
  gitIn(worktree, "commit", "-qm", "the agent's work");
  agent = gitIn(worktree, "rev-parse", "HEAD");
  // The Agent's hostile repository config: every line would send the push elsewhere or run its code.
  marker = join(d.base, "hook-ran");
  evil = join(d.base, "evil.git");
  gitIn(undefined, "init", "-q", "--bare", evil);
  const hooks = join(d.base, "hooks");
  mkdirSync(hooks);
  for (const dir of [hooks, join(worktree, ".git", "hooks")]) {
    writeFileSync(join(dir, "pre-push"), `#!/bin/sh\ntouch ${marker}\n`);
    chmodSync(join(dir, "pre-push"), 0o755);
  }
  gitIn(worktree, "config", "remote.origin.pushurl", evil);
  gitIn(worktree, "config", `url.${evil}.pushInsteadOf`, git.url(""));
  gitIn(worktree, "config", `url.${evil}.insteadOf`, git.url(""));
  gitIn(worktree, "config", "core.hooksPath", hooks);
  gitIn(worktree, "config", "core.fsmonitor", `touch ${marker}.fsmonitor; false`);
  gitIn(worktree, "config", "credential.helper", `!touch ${marker}.credential; echo password=wrong`);
  // The push Secret as the operator projects it; an Effect secret.
  mkdirSync(join(d.git, "forge"), { recursive: true });
  writeFileSync(join(d.git, "forge", "token"), `${TOKEN}\n`, { mode: 0o600 });
  writeFileSync(join(d.git, "forge", "username"), "jr2-bot\n", { mode: 0o600 });
  mkdirSync(join(d.secrets, "forge-api"), { recursive: true });
  writeFileSync(join(d.secrets, "forge-api", "token"), `Bearer ${SECRET}\n`, { mode: 0o600 });
  fx = await startEffector(d, { JR2_EFFECTOR_CA_FILE: join(certDir, "cert.pem") });
}, 60_000);

afterAll(async () => {
  await fx?.stop();
  await git?.close();
});

const remoteHead = (branch: string) => {
  try {
    return gitIn(join(serverRoot, "remote.git"), "rev-parse", `refs/heads/${branch}`);
  } catch {
    return undefined;
  }
};

const push = (id: string, over: Partial<Extract<EffectorOrder["effect"], { kind: "push" }>> = {}): EffectorOrder => ({
  id,
  idempotent: false,
  effect: {
    kind: "push",
    worktree,
    source: { branch: "feature" },
    url: git.url("remote.git"),
    credential: "forge",
    ref: "refs/heads/feature",
    timeoutSeconds: 60,
    ...over,
  },
});

describe("push", () => {
  it("pushes the Agent's branch to the order's url with the token, using none of the worktree's config", async () => {
    const a = await send(push("push-1"));
    expect(a).toMatchObject({
      state: "succeeded",
      result: { kind: "push", remote: git.url("remote.git"), ref: "refs/heads/feature", commit: agent, forced: false },
    });
    expect(remoteHead("feature")).toBe(agent);
    expect(() => gitIn(evil, "rev-parse", "refs/heads/feature")).toThrow();
    for (const m of [marker, `${marker}.fsmonitor`, `${marker}.credential`]) expect(existsSync(m)).toBe(false);
    // Nothing written in the worktree: no remote-tracking ref, no new object, no config.
    expect(existsSync(join(worktree, ".git", "refs", "remotes", "origin", "feature"))).toBe(false);
    // No temporary repository left in scratch.
    expect(execFileSync("ls", [d.scratch], { encoding: "utf8" })).not.toMatch(/push-/);
  });

  it("refuses a non-fast-forward as push_rejected and a stale lease as lease_broken; a good lease forces", async () => {
    const rejected = await send(push("push-2", { source: { commit: alt } }));
    expect(rejected).toMatchObject({ state: "failed", error: { code: "push_rejected" } });
    const stale = await send(push("push-3", { source: { commit: alt }, expect: base }));
    expect(stale).toMatchObject({ state: "failed", error: { code: "lease_broken" } });
    expect(remoteHead("feature")).toBe(agent);
    const forced = await send(push("push-4", { source: { commit: alt }, expect: agent }));
    expect(forced).toMatchObject({ state: "succeeded", result: { commit: alt, forced: true } });
    expect(remoteHead("feature")).toBe(alt);
  });

  it("a wrong token is auth_failed; a worktree outside /work is refused", async () => {
    mkdirSync(join(d.git, "wrong"), { recursive: true });
    writeFileSync(join(d.git, "wrong", "token"), "not-the-token\n");
    const denied = await send(push("push-5", { credential: "wrong", ref: "refs/heads/other" }));
    expect(denied).toMatchObject({ state: "failed", error: { code: "auth_failed" } });
    const outside = await send(push("push-6", { worktree: d.repos }));
    expect(outside).toMatchObject({ state: "failed", error: { code: "refused" } });
    expect(remoteHead("other")).toBeUndefined();
  });

  it("shows the token nowhere: not in the answers (checked on each), not in the Effector's output", () => {
    expect(fx.out()).not.toContain(TOKEN);
    expect(fx.err()).not.toContain(TOKEN);
    expect(fx.out()).toMatch(/"message":"effect","id":"push-1","kind":"push","state":"succeeded"/);
  });
});

describe("http", () => {
  let server: http.Server;
  let url = "";
  const seen: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString() });
        if (req.url === "/big") return res.writeHead(200).end("x".repeat(5000));
        if (req.url === "/redirect") return res.writeHead(302, { location: "http://127.0.0.1:1/" }).end();
        res.writeHead(201, { "content-type": "application/json", "x-one": "1" }).end('{"number":7}');
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  const order = (id: string, over: Partial<Extract<EffectorOrder["effect"], { kind: "http" }>>): EffectorOrder => ({
    id,
    idempotent: false,
    effect: {
      kind: "http",
      method: "POST",
      url: `${url}/pulls`,
      headers: {},
      maxResponseBytes: 1024,
      timeoutSeconds: 10,
      ...over,
    },
  });

  it("sends a secret header from its file and a Worktree file as the body", async () => {
    const a = await send(
      order("http-1", {
        headers: { authorization: { secret: "forge-api", key: "token" }, accept: "application/json" },
        body: { file: { root: worktree, path: "docs/PR.md" } },
      }),
    );
    expect(a).toMatchObject({
      state: "succeeded",
      result: { kind: "http", status: 201, body: '{"number":7}', bodyEncoding: "utf8", headers: { "x-one": "1" } },
    });
    const got = seen.at(-1)!;
    expect(got.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(got.body).toBe("# The Agent's change\n");
    expect(fx.out() + fx.err()).not.toContain(SECRET);
  });

  it("sends JSON with its content type; follows no redirect", async () => {
    const a = await send(order("http-2", { url: `${url}/redirect`, body: { json: { title: "t" } } }));
    expect(a).toMatchObject({ state: "succeeded", result: { status: 302 } });
    expect(seen.at(-1)!.headers["content-type"]).toBe("application/json");
    expect(seen.at(-1)!.body).toBe('{"title":"t"}');
  });

  it("refuses a body file that leads out of its worktree, and a secret not mounted", async () => {
    symlinkSync(join(d.secrets, "forge-api", "token"), join(worktree, "leak"));
    const n = seen.length;
    const out = await send(order("http-3", { body: { file: { root: worktree, path: "leak" } } }));
    expect(out).toMatchObject({ state: "failed", error: { code: "refused" } });
    const dots = await send(
      order("http-4", { body: { file: { root: worktree, path: "../../secrets/forge-api/token" } } }),
    );
    expect(dots).toMatchObject({ state: "failed", error: { code: "refused" } });
    const missing = await send(order("http-5", { headers: { authorization: { secret: "absent", key: "token" } } }));
    expect(missing).toMatchObject({ state: "failed", error: { code: "refused" } });
    expect(seen.length).toBe(n);
  });

  it("bounds the answer's body", async () => {
    const a = await send(order("http-6", { method: "GET", url: `${url}/big`, maxResponseBytes: 100 }));
    expect(a).toMatchObject({ state: "succeeded", result: { status: 200, truncated: true, body: "x".repeat(100) } });
  });
});
