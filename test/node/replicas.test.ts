// Several Orchestrators on the real node (decision 0079): the chart installed with three replicas;
// a Machine written against the raw HTTP API (fetch, nothing of jr2's client) drives a turn on each
// of twenty workspaces to its Menu pick, held; one replica is SIGKILLed, then a `helm upgrade`
// rolls all three, while the Machine calls the API the whole time. Every call is answered (a
// refused connection retried by the Machine itself, as a raw client must), every turn's event
// stream reads on with no repeat and no gap, every pick is answered exactly once and every turn
// completes, no workspace is lost or made twice, and no keepalive lease lapses (each workspace's
// idle timeout is the shortest there is, a minute). Shares the installation's names with
// helm.test.ts and deployed.test.ts: each removes them before and after.
import { helmRunner } from "./helm-run";
import { type ChildProcess, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { SCRIPTED_MODEL, scriptedModelObjects, scriptedModelUrl } from "../../dev/in-cluster-model";
import { CRDS_RELEASE, helmBin } from "../../dev/helm";
import { CHART_NAME, CRDS_CHART_NAME } from "../../scripts/helm-chart";
import { KEEPALIVE_ANNOTATION, ORCHESTRATOR_LEASE_LABEL, SHARD_COUNT } from "../../api/wire";
import {
  type Obj,
  ROOT,
  apply,
  available,
  fromSetup,
  getJson,
  kubectlOk,
  proposeScript,
  realNode,
  until,
  serveWidgetsRemote,
  INSTALLED,
  removeInstallation,
  SANDBOX_RESOURCE,
} from "./support";

const node = realNode();
const NODE_IP = fromSetup("JR2_REAL_NODE_IP");
const SANDBOX_IMAGE = fromSetup("JR2_NODE_SANDBOX_IMAGE");
const COMPANIONS_IMAGE = fromSetup("JR2_NODE_COMPANIONS_IMAGE");
const BY_TAG = JSON.parse(fromSetup("JR2_NODE_IMAGES_BY_TAG")) as Record<string, string>;

const RELEASE = "jr2";
const RELEASE_NS = "default";
const CHART = join(ROOT, "dist", `${CHART_NAME}-chart`);
const CRDS_CHART = join(ROOT, "dist", `${CRDS_CHART_NAME}-chart`);
const { module: MODULE, peprNamespace: PEPR_NS, system: SYSTEM, sandboxes: SANDBOXES } = INSTALLED;
const WORKSPACES = 20;
const REPLICAS = 3;
const IDLE_TIMEOUT_MS = 60_000;
const suffix = randomBytes(3).toString("hex");
const modelNs = `jr2-rmodel-${suffix}`;
const tmp = mkdtempSync(join(tmpdir(), "jr2-replicas-"));
const KEY = `sk-replicas-${randomBytes(16).toString("hex")}`;
const TOKEN = randomBytes(24).toString("hex");
const API = `http://jr2-orchestrator.${SYSTEM}.svc.cluster.local:8090`;
const onRealNode = {
  nodeSelector: { [node.label[0]]: node.label[1] },
  tolerations: [{ key: node.taint.key, operator: "Equal", value: node.taint.value, effect: node.taint.effect }],
};
const helm = helmBin();
const { helmRun, helmOk } = helmRunner(helm, RELEASE_NS);
let daemon: ChildProcess | undefined;
let remoteUrl = "";

// ---------------------------------------------------------------------------------------------
// The Machine: raw HTTP. What it does on its own is what any raw client must: retry a refused
// connection (nothing was sent), and an idempotent call whose connection broke before an answer.

type Call = { method: string; path: string; status?: number; error?: string; retries: number };
const calls: Call[] = [];
const IDEMPOTENT = new Set(["GET", "HEAD", "PUT", "DELETE"]);
const RETRY_FOR_MS = 30_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The connection error a fetch failed with, when it failed before any answer. */
const codeOf = (err: unknown): string | undefined =>
  ((err as { cause?: { code?: string } }).cause?.code ?? (err as { code?: string }).code) || undefined;

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: Obj }> {
  const record: Call = { method, path, retries: 0 };
  calls.push(record);
  const until = Date.now() + RETRY_FOR_MS;
  for (;;) {
    try {
      const res = await fetch(API + path, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { "content-type": "application/json" } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      record.status = res.status;
      return { status: res.status, json: text ? (JSON.parse(text) as Obj) : {} };
    } catch (err) {
      const code = codeOf(err);
      const retryable = code === "ECONNREFUSED" || (IDEMPOTENT.has(method) && code !== undefined);
      if (!retryable || Date.now() > until) {
        record.error = `${code ?? ""} ${(err as Error).message}`;
        throw err;
      }
      record.retries++;
      await sleep(200);
    }
  }
}

async function ok(method: string, path: string, body?: unknown): Promise<Obj> {
  const r = await call(method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${JSON.stringify(r.json)}`);
  return r.json;
}

const ws = (name: string) => `/v1/workspaces/${encodeURIComponent(name)}`;

/** A turn's event stream read to its end, resumed with Last-Event-ID whenever it breaks. */
type Follow = {
  ids: number[];
  kinds: string[];
  deliveries: string[];
  reconnects: number;
  /** Answers other than the stream: a 503 `unavailable` (its shard moving) is retried as it says. */
  refusals: string[];
  done: Promise<Obj>;
};
/** Ends every stream still followed when the file ends (a failed check leaves some open). */
const following = new AbortController();
function follow(name: string, iid: string): Follow {
  const f: Follow = { ids: [], kinds: [], deliveries: [], reconnects: 0, refusals: [], done: Promise.resolve({}) };
  f.done = (async () => {
    for (let attempt = 0; ; attempt++) {
      if (following.signal.aborted) return {};
      if (attempt > 0) f.reconnects++;
      if (attempt > 200) throw new Error(`${name}: the turn's stream broke ${attempt} times`);
      try {
        const last = f.ids.at(-1);
        const res = await fetch(`${API}${ws(name)}/turns/${encodeURIComponent(iid)}/events`, {
          signal: following.signal,
          headers: {
            authorization: `Bearer ${TOKEN}`,
            accept: "text/event-stream",
            ...(last !== undefined ? { "last-event-id": String(last) } : {}),
          },
        });
        if (res.status !== 200) {
          const code = ((await res.json().catch(() => ({}))) as Obj).error?.code as string | undefined;
          f.refusals.push(`${res.status} ${code}`);
          // The API's word for a workspace between owners: retry after Retry-After (decision 0079).
          if (res.status !== 503 || code !== "unavailable")
            throw new Error(`${name}: the turn's stream answered ${res.status} ${code}`);
          await sleep(Number(res.headers.get("retry-after") ?? 1) * 1000);
          continue;
        }
        const decoder = new TextDecoder();
        let buffer = "";
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true }).replace(/\r\n/g, "\n");
          for (let cut = buffer.indexOf("\n\n"); cut >= 0; cut = buffer.indexOf("\n\n")) {
            const frame = buffer.slice(0, cut);
            buffer = buffer.slice(cut + 2);
            const id = /^id: (\d+)$/m.exec(frame)?.[1];
            const data = /^data: (.*)$/m.exec(frame)?.[1];
            if (id === undefined || data === undefined) continue;
            const event = JSON.parse(data) as Obj;
            f.ids.push(Number(id));
            f.kinds.push(String(event.kind));
            if (event.kind === "pick" && typeof event.deliveryId === "string") f.deliveries.push(event.deliveryId);
            if (event.kind === "end") return event;
          }
        }
      } catch (err) {
        if ((err as Error).message.includes("the turn's stream answered")) throw err;
      }
      await sleep(200);
    }
  })();
  // Awaited by the last test; a file that fails before it must not die of an unheard rejection.
  f.done.catch(() => undefined);
  return f;
}

// ---------------------------------------------------------------------------------------------

const digestOf = (tag: string) => {
  const d = BY_TAG[tag];
  if (!d) throw new Error(`the chart's image ${tag} is not one npm run images pushed`);
  return d;
};
const chartDefaults = () => parseAllDocuments(readFileSync(join(CHART, "values.yaml"), "utf8"))[0].toJS() as Obj;

function values(extraAllow: string[] = []): string {
  const defaults = chartDefaults();
  const file = join(tmp, `values-${randomBytes(3).toString("hex")}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      images: { controller: digestOf(defaults.images.controller), companions: digestOf(defaults.images.companions) },
      placement: onRealNode,
      orchestrator: { apiTokens: [TOKEN], replicas: REPLICAS },
      podConfig: {
        custodian: {
          providers: [{ name: "scripted", url: scriptedModelUrl(modelNs) }],
          held: [{ secret: "model-keys", key: "openai", env: "OPENAI_API_KEY", origins: [scriptedModelUrl(modelNs)] }],
          // Twenty Sandboxes on a two-core node: a small slice each.
          resources: { cpu: "20m" },
        },
        harness: {
          env: [
            { name: "JR2_MODEL_PROVIDER", value: "scripted" },
            { name: "JR2_MODEL_ID", value: "scripted" },
          ],
        },
        egress: { allow: extraAllow },
        placement: onRealNode,
      },
      fence: [remoteUrl.replace(/widgets\.git$/, "")],
      cacheAgent: { vouchedHosts: [NODE_IP] },
    }),
  );
  return file;
}

async function cleanUp() {
  for (const r of [RELEASE, CRDS_RELEASE]) await helmRun(["uninstall", r, "--ignore-not-found"]);
  removeInstallation([modelNs]);
}

const orchestratorPods = () =>
  (getJson(["pods", "-n", SYSTEM, "-l", "app.kubernetes.io/name=jr2-orchestrator"]).items as Obj[]).filter(
    (p) => !p.metadata.deletionTimestamp,
  );

/** The shard Leases' holders now (holderIdentity; "" when free). */
const shardHolders = (): string[] =>
  (getJson(["leases", "-n", SYSTEM, "-l", `${ORCHESTRATOR_LEASE_LABEL}=shard`]).items as Obj[]).map(
    (l) => (l.spec?.holderIdentity as string | undefined) ?? "",
  );

/** A replica's identity is its pod's name and its process's own suffix (decision 0079). */
const podOf = (identity: string) => orchestratorPods().find((p) => identity.startsWith(`${p.metadata.name}-`));

// Sampled the whole time: each workspace's keepalive, and whether its Sandbox is there.
const keepalive = { worstMs: 0, missing: [] as string[], timer: undefined as NodeJS.Timeout | undefined };

beforeAll(async () => {
  ({ url: remoteUrl, daemon } = await serveWidgetsRemote(tmp, NODE_IP));
  await cleanUp();
  kubectlOk(["create", "namespace", modelNs]);
  apply(
    ...scriptedModelObjects({
      namespace: modelNs,
      image: COMPANIONS_IMAGE,
      key: KEY,
      script: proposeScript("replicas"),
      placement: onRealNode,
    }),
  );
  await available(modelNs, SCRIPTED_MODEL);
  await helmOk(["install", CRDS_RELEASE, CRDS_CHART]);
  await helmOk(["install", RELEASE, CHART, "--values", values()]);
  // The whole installation up, admission included: a Repo or Sandbox written before the module's
  // webhook answers is refused ("failed calling webhook").
  for (const d of [MODULE, `${MODULE}-watcher`]) await available(PEPR_NS, d);
  for (const d of ["jr2-orchestrator", "jr2-egress"]) await available(SYSTEM, d);
  apply({
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "model-keys", namespace: SANDBOXES },
    stringData: { openai: KEY },
  });
}, 900_000);

afterAll(async () => {
  following.abort();
  clearInterval(keepalive.timer);
  daemon?.kill();
  await cleanUp();
  rmSync(tmp, { recursive: true, force: true });
}, 600_000);

describe("three Orchestrators: a replica killed and all rolled while twenty workspaces hold Menu picks", () => {
  const names: string[] = [];
  const uids = new Map<string, { sandbox: string; pod: string }>();
  const turns = new Map<string, { iid: string; follow: Follow; deliveryId?: string }>();
  // The Machine's reads, round and round the workspaces, the whole time the replicas change.
  const reads = { stop: false, done: Promise.resolve() as Promise<unknown> };

  test("the three replicas hold the sixteen shards between them", async () => {
    const holders = await until("every shard held by a live replica", 120_000, () => {
      const h = shardHolders();
      return h.length === SHARD_COUNT && h.every((id) => id && podOf(id)) ? h : undefined;
    });
    const pods = new Set(holders.map((id) => podOf(id)!.metadata.name));
    expect(pods.size).toBe(REPLICAS);
    for (const p of orchestratorPods()) expect(p.spec.nodeName).toBe(node.name);
  }, 180_000);

  test("twenty workspaces through the raw API, each turn held at its Menu pick", async () => {
    for (let i = 0; i < WORKSPACES; i++) {
      const created = await ok("POST", "/v1/workspaces", {
        image: SANDBOX_IMAGE,
        branch: `feature/r${i}`,
        repos: [{ slot: "app", url: remoteUrl }],
        idleTimeout: "1m",
      });
      names.push(created.name as string);
    }
    await until("every workspace ready", 600_000, async () => {
      const list = (await ok("GET", "/v1/workspaces")).items as Obj[];
      const mine = list.filter((v) => names.includes(v.name));
      const bad = mine.find((v) => ["failed", "lost", "destroyed"].includes(v.state));
      if (bad) throw new Error(`${bad.name} ${bad.state}: ${JSON.stringify(bad.failure ?? bad.lost)}`);
      return mine.length === WORKSPACES && mine.every((v) => v.state === "ready") ? true : undefined;
    });
    for (const name of names) {
      const sandbox = getJson([SANDBOX_RESOURCE, "-n", SANDBOXES, name]);
      const pod = getJson(["pod", "-n", SANDBOXES, name]);
      uids.set(name, { sandbox: sandbox.metadata.uid, pod: pod.metadata.uid });
    }
    // From here on, no workspace's lease may lapse: sampled until the end.
    keepalive.timer = setInterval(() => {
      const items = getJson([SANDBOX_RESOURCE, "-n", SANDBOXES]).items as Obj[];
      const now = Date.now();
      for (const name of names) {
        const s = items.find((i) => i.metadata.name === name);
        if (!s) {
          if (!keepalive.missing.includes(name)) keepalive.missing.push(name);
          continue;
        }
        const since = Math.max(
          Date.parse(s.metadata.creationTimestamp),
          Date.parse(s.metadata.annotations?.[KEEPALIVE_ANNOTATION] ?? "") || 0,
        );
        keepalive.worstMs = Math.max(keepalive.worstMs, now - since);
      }
    }, 2_000);
    for (const name of names) {
      const submitted = await ok("POST", `${ws(name)}/turns`, {
        agent: "coder",
        message: "write change.txt, then propose it",
        menu: [
          {
            name: "propose",
            description: "Propose the change for approval.",
            parameters: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] },
          },
        ],
        allowed: ["propose"],
      });
      turns.set(name, { iid: submitted.iid as string, follow: follow(name, submitted.iid as string) });
    }
    await until("every turn held at its propose pick", 600_000, async () => {
      for (const name of names) {
        const t = turns.get(name)!;
        if (t.deliveryId) continue;
        const picks = (await ok("GET", `${ws(name)}/picks`)).items as Obj[];
        const pick = picks.find((p) => p.iid === t.iid && p.pick === "propose");
        if (pick) t.deliveryId = pick.deliveryId as string;
      }
      return names.every((n) => turns.get(n)!.deliveryId) ? true : undefined;
    });
    reads.done = (async () => {
      for (let i = 0; !reads.stop; i++) {
        const name = names[i % names.length]!;
        // A call that failed is kept in `calls` with its error: the checks below find it.
        await call("GET", ws(name)).catch(() => undefined);
        await call("GET", `${ws(name)}/picks`).catch(() => undefined);
      }
    })();
  }, 1_200_000);

  test("one replica SIGKILLed: its shards move to the others, every call answered", async () => {
    const holders = shardHolders();
    // The replica holding the most shards.
    const count = new Map<string, number>();
    for (const h of holders) count.set(h, (count.get(h) ?? 0) + 1);
    const [victim] = [...count.entries()].sort((a, b) => b[1] - a[1])[0]!;
    const pod = podOf(victim)!;
    const id = (pod.status.containerStatuses[0].containerID as string).replace(/^containerd:\/\//, "");
    const killedAt = Date.now();
    execFileSync("bash", [join(ROOT, "dev/cluster/cluster.sh"), "ctr", "tasks", "kill", "-s", "SIGKILL", id]);
    // The killed process's Leases are taken by live replicas (its restarted container is another
    // process, with an identity of its own).
    await until("no shard held by the killed process", 120_000, () => {
      const h = shardHolders();
      return h.every((x) => x && x !== victim) ? true : undefined;
    });
    process.stdout.write(`[replicas] shards moved ${((Date.now() - killedAt) / 1000).toFixed(1)}s after SIGKILL\n`);
    // Calls meanwhile: every one answered.
    const callsSoFar = calls.length;
    await until("ten more rounds of reads", 120_000, () => (calls.length >= callsSoFar + 40 ? true : undefined));
    expect(calls.filter((c) => c.error !== undefined || (c.status ?? 0) >= 500)).toEqual([]);
  }, 300_000);

  test("helm upgrade rolls all three: every call answered throughout", async () => {
    const before = orchestratorPods().map((p) => p.metadata.uid as string);
    await helmOk(["upgrade", RELEASE, CHART, "--values", values(["rolled.egress.example:80"])]);
    await available(SYSTEM, "jr2-orchestrator");
    await until("every Orchestrator pod replaced", 300_000, () =>
      orchestratorPods().some((p) => before.includes(p.metadata.uid)) ? undefined : true,
    );
    await until("every shard held by a new replica", 120_000, () => {
      const h = shardHolders();
      return h.every((x) => x && podOf(x) && !before.includes(podOf(x)!.metadata.uid)) ? true : undefined;
    });
    const callsSoFar = calls.length;
    await until("ten more rounds of reads", 120_000, () => (calls.length >= callsSoFar + 40 ? true : undefined));
    expect(calls.filter((c) => c.error !== undefined || (c.status ?? 0) >= 500)).toEqual([]);
  }, 600_000);

  test("every pick answered exactly once, every turn completes, no workspace lost or made twice, no lease lapsed", async () => {
    reads.stop = true;
    await reads.done;
    for (const name of names) {
      const t = turns.get(name)!;
      await ok("POST", `${ws(name)}/picks/${encodeURIComponent(t.deliveryId!)}/answer`, { answer: "approved" });
      // Answered once: a second answer is refused as already answered.
      const again = await call("POST", `${ws(name)}/picks/${encodeURIComponent(t.deliveryId!)}/answer`, {
        answer: "approved",
      });
      expect([name, again.status, again.json.error?.code]).toEqual([name, 409, "already_answered"]);
    }
    for (const name of names) {
      const t = turns.get(name)!;
      const end = await t.follow.done;
      expect([name, end.outcome]).toEqual([name, "completed"]);
      // The stream read on across every move: each id once, none skipped.
      const first = t.follow.ids[0]!;
      expect([name, t.follow.ids]).toEqual([name, t.follow.ids.map((_, i) => first + i)]);
      // One pick made: the stream says so at its taking and at each poll that found it outstanding,
      // always with the one delivery the Machine answered.
      expect([name, [...new Set(t.follow.deliveries)]]).toEqual([name, [t.deliveryId]]);
    }
    // The same twenty Sandboxes and pods, none other made by the Orchestrators.
    const sandboxes = (getJson([SANDBOX_RESOURCE, "-n", SANDBOXES]).items as Obj[]).map(
      (s) => s.metadata.name as string,
    );
    expect(sandboxes.sort()).toEqual([...names].sort());
    for (const name of names) {
      expect([name, getJson([SANDBOX_RESOURCE, "-n", SANDBOXES, name]).metadata.uid]).toEqual([
        name,
        uids.get(name)!.sandbox,
      ]);
      expect([name, getJson(["pod", "-n", SANDBOXES, name]).metadata.uid]).toEqual([name, uids.get(name)!.pod]);
    }
    clearInterval(keepalive.timer);
    const refusals = names.flatMap((n) => turns.get(n)!.follow.refusals);
    const reconnects = names.reduce((sum, n) => sum + turns.get(n)!.follow.reconnects, 0);
    process.stdout.write(
      `[replicas] turn streams: ${reconnects} resumed by Last-Event-ID, ${refusals.length} answered 503 unavailable and retried\n`,
    );
    process.stdout.write(
      `[replicas] ${calls.length} calls, ${calls.filter((c) => c.retries).length} retried by the Machine; ` +
        `longest keepalive gap ${(keepalive.worstMs / 1000).toFixed(1)}s of ${IDLE_TIMEOUT_MS / 1000}s\n`,
    );
    expect(keepalive.missing).toEqual([]);
    expect(keepalive.worstMs).toBeLessThan(IDLE_TIMEOUT_MS);
    for (const name of names) await ok("DELETE", ws(name));
  }, 600_000);
});
