// A stand-in forge for the local tier's Effects (decision 0070): one HTTPS server on loopback, its
// certificate from a throwaway CA (test-tls.ts), serving git by git-http-server's backend (HTTP
// Basic with the push token, for fetches and pushes alike) and a forge's one API call jr2's
// examples make, `POST /api/repos/<owner>/<repo>/pulls` (the API token as a bearer), answered 201
// with the pull request's number. It records every request (the API's bodies too), so a test can
// count pushes and read what a pull request carried; and a push may be held at a gate, its answer
// kept back until the test lets it go (an Orchestrator stopped between send and answer).
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REPO_CREDENTIAL_HOSTS_ANNOTATION, REPO_CREDENTIAL_LABEL, REPO_CREDENTIAL_LABEL_VALUE } from "../../api/wire";
import { GIT_ENV } from "./git-fixtures";
import { gitHttpHandler } from "./git-http-server";
import { testTls } from "./test-tls";

export type ForgeRequest = {
  method: string;
  path: string;
  /** git-upload-pack or git-receive-pack, for git's requests. */
  service: string | null;
  authorization: string | null;
  contentType: string | null;
  /** The API's request bodies (utf8), null for git's. */
  body: string | null;
};

export type StandInForge = {
  /** `https://localhost:<port>`. */
  origin: string;
  /** The PEM of the CA that signed its certificate: what a client is told to trust. */
  caPem: string;
  /** Where its bare repositories are (`<root>/<owner>/<repo>.git`). */
  root: string;
  /** The fence identity prefix of every repository it serves: `localhost:<port>`. */
  identity: string;
  /** `https://localhost:<port>/<owner>/<repo>.git`. */
  url(repo: string): string;
  requests: ForgeRequest[];
  /** The POSTs to git-receive-pack that reached the server, the held one included. */
  pushes(repo?: string): ForgeRequest[];
  pulls(): ForgeRequest[];
  /** The push Secret (`token`, `username`) as an installation declares it a repo credential for
   * this forge's repositories, so the node caches may send it when they clone (decision 0066). */
  pushSecret(
    name: string,
    namespace: string,
  ): {
    metadata: { name: string; namespace: string; labels: Record<string, string>; annotations: Record<string, string> };
    stringData: Record<string, string>;
  };
  /** A ref of a repository, or "" when it has none. */
  ref(repo: string, ref: string): string;
  /** A bare repository `<owner>/<repo>.git` holding one commit on `main` (README.md): its commit. */
  createRepo(repo: string): string;
  /** From now on, every push's answer waits until `release()`: resolves once a push is held. */
  hold(): { held: Promise<void>; release(): void };
  close(): Promise<void>;
};

export async function startStandInForge(o: { user: string; token: string; apiToken: string }): Promise<StandInForge> {
  const tls = testTls(["localhost", "127.0.0.1"]);
  const root = mkdtempSync(join(tmpdir(), "jr2-forge-"));
  const git = gitHttpHandler({ root, user: o.user, password: o.token });
  const requests: ForgeRequest[] = [];
  let pulls = 0;
  let gate: { open: Promise<void>; onHeld: () => void } | undefined;

  const api = (req: http.IncomingMessage, res: http.ServerResponse, rec: ForgeRequest) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      rec.body = Buffer.concat(chunks).toString("utf8");
      const m = /^\/api\/repos\/([^/]+)\/([^/]+)\/pulls$/.exec(rec.path);
      if (req.headers.authorization !== `Bearer ${o.apiToken}`)
        return void res.writeHead(401, { "content-type": "text/plain" }).end("bad credentials\n");
      if (req.method !== "POST" || !m) return void res.writeHead(404).end();
      pulls += 1;
      const out = { number: pulls, url: `${origin}/${m[1]}/${m[2]}/pull/${pulls}` };
      res.writeHead(201, { "content-type": "application/json" }).end(JSON.stringify(out));
    });
  };

  const server = https.createServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) => {
    const url = new URL(req.url ?? "/", "https://forge");
    const service =
      url.searchParams.get("service") ?? /\/(git-upload-pack|git-receive-pack)$/.exec(url.pathname)?.[1] ?? null;
    const rec: ForgeRequest = {
      method: req.method ?? "GET",
      path: url.pathname,
      service,
      authorization: req.headers.authorization ?? null,
      contentType: req.headers["content-type"] ?? null,
      body: null,
    };
    requests.push(rec);
    if (url.pathname.startsWith("/api/")) return api(req, res, rec);
    const held = gate;
    if (held && service === "git-receive-pack" && req.method === "POST") {
      held.onHeld();
      void held.open.then(() => git.handler(req, res));
      return;
    }
    git.handler(req, res);
  });
  server.on("clientError", (_err, socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const origin = `https://localhost:${port}`;
  const gitIn = (dir: string, ...args: string[]) =>
    execFileSync("git", args, { cwd: dir, env: GIT_ENV, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();

  return {
    origin,
    caPem: tls.caPem,
    root,
    identity: `localhost:${port}`,
    url: (repo) => `${origin}/${repo}`,
    requests,
    pushes: (repo) =>
      requests.filter(
        (r) =>
          r.service === "git-receive-pack" &&
          r.method === "POST" &&
          (repo === undefined || r.path === `/${repo}/git-receive-pack`),
      ),
    pulls: () => requests.filter((r) => r.path.startsWith("/api/")),
    pushSecret: (name, namespace) => ({
      metadata: {
        name,
        namespace,
        labels: { [REPO_CREDENTIAL_LABEL]: REPO_CREDENTIAL_LABEL_VALUE },
        annotations: { [REPO_CREDENTIAL_HOSTS_ANNOTATION]: `${origin}/` },
      },
      stringData: { token: o.token, username: o.user },
    }),
    ref(repo, ref) {
      try {
        return gitIn(join(root, repo), "rev-parse", "--verify", "-q", ref);
      } catch {
        return "";
      }
    },
    createRepo(repo) {
      const seed = mkdtempSync(join(tmpdir(), "jr2-forge-seed-"));
      try {
        gitIn(seed, "init", "-q", "-b", "main");
        writeFileSync(join(seed, "README.md"), "# app\n");
        gitIn(seed, "add", ".");
        gitIn(seed, "commit", "-qm", "base");
        const bare = join(root, repo);
        mkdirSync(join(bare, ".."), { recursive: true });
        gitIn(root, "clone", "-q", "--bare", seed, bare);
        gitIn(bare, "config", "http.receivepack", "true");
        return gitIn(bare, "rev-parse", "main");
      } finally {
        rmSync(seed, { recursive: true, force: true });
      }
    },
    hold() {
      let release!: () => void;
      let onHeld!: () => void;
      const open = new Promise<void>((r) => (release = r));
      const heldOne = new Promise<void>((r) => (onHeld = r));
      gate = { open, onHeld };
      return {
        held: heldOne,
        release: () => {
          gate = undefined;
          release();
        },
      };
    },
    close: () =>
      new Promise<void>((resolve) => {
        git.killChildren();
        server.close(() => resolve());
        server.closeAllConnections();
        rmSync(root, { recursive: true, force: true });
      }),
  };
}
