// Benchmark: what an Effect costs (decisions 0070-0072). The real Effector program (the bundle
// dist/companions/effector.js, else effector/main.ts under tsx) runs on this machine as its pod
// runs it: its key file (derived from a signing key as the Orchestrator derives it), POD_IP
// 127.0.0.1, /work and /repos, its secrets and scratch, jr2-confine from scripts/confine-binary.sh,
// and a CA bundle (JR2_EFFECTOR_CA_FILE) that trusts the two loopback servers: a git server (real
// `git http-backend` over https, token auth, test/support/git-http-server.ts) and a small HTTPS
// server. The worktrees are made as the Harness's attach makes them: `git clone --shared` from a
// bare cache of the remote.
//
// Round trips (BENCH_EFFECTS_RUNS, default 30): each order sent through the Orchestrator's own
// effector call (orchestrator/workspaces/kube-gateway.ts, signed with api/effector-wire.ts, its
// answer's signature checked), driven without a cluster: its Sandbox from a stand-in watch, the
// Effector's address resolved to the local one. Per run, one of each Effect and, beside it, the
// same work done directly from this machine, the two alternating which goes first:
//   push     one new commit (a file of its own) on the worktree's branch, pushed by the Effector
//            | the same push by `git push` from a second worktree of the same cache, to the same
//            server with the same token (an http.extraHeader), another branch.
//   http     a POST with a JSON body and a secret header (read from its file by the Effector)
//            | the same request by undici, a fresh connection each as the Effector's.
//   command  `true`, confined by jr2-confine | `true` spawned directly.
// p50 and p90 of each, and p50(effect)/p50(direct): wall times on shared cores are noise, their
// ratio in the same run is the figure. With them the Effector's CPU per Effect, its own and its
// children's (git, jr2-confine: reaped, so counted in its cutime+cstime), from /proc/<pid>/stat
// before and after the runs of each kind.
// Not measured here: the same through the Orchestrator's API in local mode (its ledger's writes
// per Effect); this is the Effector's round trip alone.
//
// At rest: three fresh Effectors, each read once /healthz answers 200 and 3 s have passed:
// smaps_rollup's Private_Clean + Private_Dirty (its own memory, decision 0052) and Rss, medians;
// with them the CPU each took to start (its threads' schedstat when /healthz first answered).
//   BENCH_EFFECTS_RUNS=30
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Agent, request } from "undici";
import type { SandboxModel } from "../api/crd";
import { EFFECTOR_PATHS, type EffectorOrder } from "../api/effector-wire";
import { EFFECTOR_ENV as E } from "../api/env";
import { running } from "../dev/child";
import { effectorKey } from "../orchestrator/tokens";
import { KubeSandboxGateway } from "../orchestrator/workspaces/kube-gateway";
import { SMALL_ANSWER } from "../orchestrator/workspaces/sandbox-gateway";
import type { SandboxWatch } from "../orchestrator/workspaces/sandbox-watch";
import { confineBinary } from "../scripts/images/confine";
import { gitIn, GIT_ENV } from "../test/support/git-fixtures";
import { startGitHttpServer, type GitHttpServer } from "../test/support/git-http-server";
import { testTls } from "../test/support/test-tls";
import { effectorDirs, effectorEnv, type EffectorDirs } from "../test/support/effector-fixture";
import { cpuTimes, threadCpuMs } from "./cost";
import type { Result } from "./sandbox-burst-bench";
import { percentile, round, sleep, sorted } from "./stats";

const B = "effects";
const ROOT = join(__dirname, "..");
const log = (line: string) => process.stderr.write(`effects: ${line}\n`);

const USER = "jr2-bot";
const TOKEN = `jr2-bench-token-${randomBytes(12).toString("hex")}`;
const SECRET = `Bearer jr2-bench-secret-${randomBytes(12).toString("hex")}`;
/** The Sandbox the Orchestrator's call names: its Effector key derives from it. */
const SANDBOX = "bench-effects";
const KINDS = ["push", "http", "command"] as const;
type Kind = (typeof KINDS)[number];

/** The Effector's program: the bundle its image runs, else its source under tsx (one process, so
 * /proc/<pid> is the program's). */
function effectorProgram(): { args: string[]; what: string } {
  const bundle = join(ROOT, "dist", "companions", "effector.js");
  if (existsSync(bundle)) return { args: [bundle], what: "dist/companions/effector.js" };
  return { args: ["--import", "tsx", join(ROOT, "effector", "main.ts")], what: "effector/main.ts (tsx)" };
}

/** The process's private memory and its RSS, in MiB (smaps_rollup; decision 0052). */
function memoryOf(pid: number): { private: number; rss: number } {
  const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(rollup)![1]);
  return { private: (kb("Private_Clean") + kb("Private_Dirty")) / 1024, rss: kb("Rss") / 1024 };
}

type Effector = { child: ChildProcess; url: string; startCpuMs: number; stop(): Promise<void> };

/** Starts the Effector; resolves once /healthz answers 200 (it holds its key). */
async function startEffector(d: EffectorDirs, extra: Record<string, string>): Promise<Effector> {
  const scratch = mkdtempSync(join(d.scratch, "run-"));
  const child = spawn(process.execPath, effectorProgram().args, {
    // The tests' layout and env, each run with a scratch of its own.
    env: effectorEnv({ ...d, scratch }, { [E.podName]: SANDBOX, [E.node]: "jr2-bench", ...extra }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  const stop = async () => {
    if (!running(child)) return;
    const gone = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    await gone;
  };
  for (let i = 0; i < 600; i++) {
    const m = /"message":"listening","port":(\d+)/.exec(out);
    if (m) {
      const url = `http://127.0.0.1:${m[1]}`;
      const ok = await fetch(`${url}${EFFECTOR_PATHS.healthz}`)
        .then((r) => r.status === 200)
        .catch(() => false);
      if (ok) return { child, url, startCpuMs: threadCpuMs(child.pid!), stop };
    }
    if (!running(child)) break;
    await sleep(50);
  }
  await stop();
  throw new Error(`the Effector did not answer /healthz 200: ${out.slice(-500)}`);
}

/** A small HTTPS server standing in for a forge's API: every POST answered 201 with a small JSON body. */
async function forgeApi(tls: { certPem: string; keyPem: string }) {
  let requests = 0;
  const server = https.createServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      requests++;
      const authorized = req.headers.authorization === SECRET;
      res.writeHead(authorized ? 201 : 401, { "content-type": "application/json" }).end('{"number":7}');
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** One new commit on the worktree's checked-out branch, a file of its own; its id. */
function commitIn(worktree: string, i: number): string {
  writeFileSync(join(worktree, `change-${i}.txt`), `change ${i} ${randomBytes(8).toString("hex")}\n`);
  gitIn(worktree, "add", ".");
  gitIn(worktree, "commit", "-qm", `change ${i}`);
  return gitIn(worktree, "rev-parse", "HEAD");
}

/** `cmd args` spawned and waited for; throws on a non-zero exit. */
function spawnWait(cmd: string, args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { ...opts, stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr!.on("data", (c: Buffer) => (err += c.toString()));
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args[0] ?? ""} exited ${code}: ${err.slice(-300)}`)),
    );
  });
}

export async function effectsBench(): Promise<Result[]> {
  const runs = Number(process.env.BENCH_EFFECTS_RUNS ?? 30);
  // The Effector's dirs as the tests lay them out (a pod's mounts, in a temp dir).
  const d = effectorDirs();
  const base = d.base;
  const signingKey = randomBytes(32);
  writeFileSync(d.keyFile, `${effectorKey(signingKey, SANDBOX)}\n`, { mode: 0o600 });

  // One certificate for 127.0.0.1, its CA the Effector's trust bundle and the direct clients'.
  const tls = testTls(["127.0.0.1"]);
  const caFile = join(base, "ca.pem");
  writeFileSync(caFile, tls.caPem);
  const confine = confineBinary(ROOT);
  const probe = spawnSync(confine, ["--probe"], { encoding: "utf8" });
  if (probe.status !== 0)
    throw new Error(
      `jr2-confine --probe: no Landlock here (${probe.stdout}${probe.stderr}): the command Effect needs it`,
    );
  const extra = { [E.confine]: confine, [E.ca]: caFile };
  log(`program ${effectorProgram().what}; jr2-confine ${confine} (${probe.stdout.trim()}); ${runs} runs`);

  let git: GitHttpServer | undefined;
  let api: Awaited<ReturnType<typeof forgeApi>> | undefined;
  let fx: Effector | undefined;
  try {
    // At rest: three fresh Effectors; the last one serves the round trips.
    const rest: Array<{ private: number; rss: number; cpu: number }> = [];
    for (let i = 0; i < 3; i++) {
      await fx?.stop();
      fx = await startEffector(d, extra);
      await sleep(3000);
      rest.push({ ...memoryOf(fx.child.pid!), cpu: fx.startCpuMs });
    }
    log(
      `at rest: private ${rest.map((r) => r.private.toFixed(1)).join(", ")} MiB; ` +
        `rss ${rest.map((r) => r.rss.toFixed(1)).join(", ")} MiB; ` +
        `${rest.map((r) => r.cpu.toFixed(0)).join(", ")} ms CPU to start`,
    );

    // The remote with one commit, served over https with the token; the node's cache of it; two
    // worktrees as the Harness makes them, one pushed by the Effector, one directly.
    const serverRoot = join(base, "server");
    mkdirSync(serverRoot);
    git = await startGitHttpServer({
      root: serverRoot,
      user: USER,
      password: TOKEN,
      tls: { cert: tls.certPem, key: tls.keyPem, host: "127.0.0.1" },
    });
    const seed = join(base, "seed");
    gitIn(undefined, "init", "-q", "-b", "main", seed);
    writeFileSync(join(seed, "README.md"), "hello\n");
    gitIn(seed, "add", ".");
    gitIn(seed, "commit", "-qm", "base");
    const remote = join(serverRoot, "remote.git");
    gitIn(undefined, "clone", "-q", "--bare", seed, remote);
    gitIn(remote, "config", "http.receivepack", "true");
    const cache = join(d.repos, "k1");
    gitIn(undefined, "clone", "-q", "--bare", remote, cache);
    const worktree = (branch: string) => {
      const wt = join(d.work, "app", branch);
      gitIn(undefined, "clone", "-q", "--shared", cache, wt);
      gitIn(wt, "checkout", "-q", "-b", branch);
      return wt;
    };
    const effWt = worktree("effect");
    const directWt = worktree("direct");
    mkdirSync(join(d.git, "forge"), { recursive: true });
    writeFileSync(join(d.git, "forge", "token"), `${TOKEN}\n`, { mode: 0o600 });
    writeFileSync(join(d.git, "forge", "username"), `${USER}\n`, { mode: 0o600 });
    mkdirSync(join(d.secrets, "forge-api"), { recursive: true });
    writeFileSync(join(d.secrets, "forge-api", "token"), `${SECRET}\n`, { mode: 0o600 });
    api = await forgeApi(tls);
    const remoteUrl = git.url("remote.git");
    const apiUrl = `${api.url}/pulls`;

    // The Orchestrator's call, without a cluster: its Sandbox from a stand-in watch, the Effector's
    // address the local one.
    const sandbox = { metadata: { name: SANDBOX } } as SandboxModel;
    const gateway = new KubeSandboxGateway({
      namespace: "jr2-bench",
      watch: { get: (name: string) => (name === SANDBOX ? sandbox : undefined) } as unknown as SandboxWatch,
      signingKey,
      resolveEffector: () => ({ url: fx!.url, pod: "127.0.0.1" }),
    });
    let ids = 0;
    const effect = async (e: EffectorOrder["effect"]) => {
      const id = `bench-${e.kind}-${ids++}`;
      const reply = await gateway.effector(
        SANDBOX,
        "POST",
        EFFECTOR_PATHS.effects,
        { id, idempotent: false, effect: e },
        SMALL_ANSWER,
      );
      const answer = JSON.parse(reply.text) as { state?: string; error?: unknown };
      if (reply.status !== 200 || !reply.signed || answer.state !== "succeeded")
        throw new Error(
          `effect ${id}: ${reply.status}${reply.signed ? "" : " (unsigned)"} ${reply.text.slice(0, 500)}`,
        );
    };

    const basic = Buffer.from(`${USER}:${TOKEN}`).toString("base64");
    const body = JSON.stringify({ title: "the Agent's change", head: "effect" });
    const ca = [tls.caPem];
    // Each push's new commit is made before it is timed (`prepare`): the push alone is measured.
    let directCommit = "";
    const work: Record<
      Kind,
      { prepare?: (i: number) => void; effect: () => Promise<void>; direct: () => Promise<void> }
    > = {
      push: {
        prepare: (i) => {
          commitIn(effWt, i);
          directCommit = commitIn(directWt, i);
        },
        effect: async () => {
          await effect({
            kind: "push",
            worktree: effWt,
            source: { branch: "effect" },
            url: remoteUrl,
            credential: "forge",
            ref: "refs/heads/effect",
            timeoutSeconds: 60,
          });
        },
        direct: async () => {
          await spawnWait(
            "git",
            [
              "-c",
              `http.extraHeader=Authorization: Basic ${basic}`,
              "-c",
              `http.sslCAInfo=${caFile}`,
              "push",
              "--porcelain",
              "--no-verify",
              "--",
              remoteUrl,
              `${directCommit}:refs/heads/direct`,
            ],
            { cwd: directWt, env: GIT_ENV },
          );
        },
      },
      http: {
        effect: () =>
          effect({
            kind: "http",
            method: "POST",
            url: apiUrl,
            headers: { authorization: { secret: "forge-api", key: "token" }, accept: "application/json" },
            body: { json: JSON.parse(body) as unknown },
            maxResponseBytes: 1024,
            timeoutSeconds: 10,
          }),
        direct: async () => {
          const dispatcher = new Agent({ connect: { ca } });
          try {
            const res = await request(apiUrl, {
              method: "POST",
              dispatcher,
              headers: { authorization: SECRET, accept: "application/json", "content-type": "application/json" },
              body,
            });
            await res.body.text();
            if (res.statusCode !== 201) throw new Error(`the direct request answered ${res.statusCode}`);
          } finally {
            await dispatcher.destroy();
          }
        },
      },
      command: {
        effect: () =>
          effect({
            kind: "command",
            argv: ["true"],
            root: effWt,
            cwd: "",
            env: {},
            timeoutSeconds: 10,
            maxOutputBytes: 1024,
          }),
        direct: () => spawnWait("true", [], { cwd: directWt }),
      },
    };

    // One of each, untimed: the first push of each branch, caches warm.
    for (const k of KINDS) {
      work[k].prepare?.(-1);
      await work[k].effect();
      await work[k].direct();
    }
    const ms: Record<Kind, { effect: number[]; direct: number[]; own: number; children: number }> = {
      push: { effect: [], direct: [], own: 0, children: 0 },
      http: { effect: [], direct: [], own: 0, children: 0 },
      command: { effect: [], direct: [], own: 0, children: 0 },
    };
    const timed = async (f: () => Promise<void>) => {
      const t0 = performance.now();
      await f();
      return performance.now() - t0;
    };
    const pid = fx!.child.pid!;
    for (let i = 0; i < runs; i++) {
      for (const k of KINDS) {
        const m = ms[k];
        work[k].prepare?.(i);
        const viaEffector = async () => {
          const before = cpuTimes(pid);
          m.effect.push(await timed(work[k].effect));
          const after = cpuTimes(pid);
          m.own += after.own - before.own;
          m.children += after.children - before.children;
        };
        const direct = async () => void m.direct.push(await timed(work[k].direct));
        // Alternating which goes first: neither always meets the machine the other left.
        if (i % 2 === 0) {
          await viaEffector();
          await direct();
        } else {
          await direct();
          await viaEffector();
        }
      }
      if ((i + 1) % 10 === 0) log(`${i + 1}/${runs} runs`);
    }
    const effectorAfter = memoryOf(pid);
    const heads = gitIn(remote, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/");
    log(`remote heads: ${heads.replace(/\n/g, "; ")}; forge API requests ${api.requests()}`);
    for (const k of KINDS) {
      const f = (v: number[]) =>
        `p50 ${percentile(sorted(v), 50).toFixed(1)} p90 ${percentile(sorted(v), 90).toFixed(1)}`;
      log(`${k}: effect ${f(ms[k].effect)} ms, direct ${f(ms[k].direct)} ms`);
    }

    const med = (v: number[]) => percentile(sorted(v), 50);
    const out: Result[] = [
      { bench: B, metric: "runs", value: runs, unit: "count" },
      // No target: decision 0071 names none for the Effector's memory; reported as the Custodian's is.
      { bench: B, metric: "effector_idle_private", value: round(med(rest.map((r) => r.private))), unit: "MiB" },
      { bench: B, metric: "effector_idle_rss", value: round(med(rest.map((r) => r.rss))), unit: "MiB" },
      { bench: B, metric: "effector_start_cpu_ms", value: round(med(rest.map((r) => r.cpu))), unit: "ms" },
      { bench: B, metric: "effector_private_after_runs", value: round(effectorAfter.private), unit: "MiB" },
    ];
    for (const k of KINDS) {
      const m = ms[k];
      const e = sorted(m.effect);
      const dd = sorted(m.direct);
      out.push(
        { bench: B, metric: `${k}_effect_p50_ms`, value: round(percentile(e, 50)), unit: "ms" },
        { bench: B, metric: `${k}_effect_p90_ms`, value: round(percentile(e, 90)), unit: "ms" },
        { bench: B, metric: `${k}_direct_p50_ms`, value: round(percentile(dd, 50)), unit: "ms" },
        { bench: B, metric: `${k}_direct_p90_ms`, value: round(percentile(dd, 90)), unit: "ms" },
        {
          bench: B,
          metric: `${k}_effect_ratio_to_direct`,
          value: round(percentile(e, 50) / percentile(dd, 50)),
          unit: "ratio",
        },
        // The Effector's CPU per Effect (/proc/<pid>/stat, clock ticks summed over the runs).
        { bench: B, metric: `${k}_effector_cpu_ms`, value: round((m.own * 1000) / runs), unit: "ms" },
        { bench: B, metric: `${k}_effector_children_cpu_ms`, value: round((m.children * 1000) / runs), unit: "ms" },
      );
    }
    return out;
  } finally {
    await fx?.stop();
    await git?.close();
    await api?.close();
    rmSync(base, { recursive: true, force: true });
  }
}
