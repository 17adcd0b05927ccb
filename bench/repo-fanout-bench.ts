// Benchmark: the Repo fan-out. N Sandboxes (default 200) name one Repo over the 3 fake nodes, with
// a real cache agent per node and a real bare remote. Then one node's agent fetches again (it is
// restarted: a restarted agent fetches every Repo once), and the operator's reconcile counter says
// how many Sandboxes that woke: no more than sit on that node (decision 0010: a Repo event wakes
// only the Sandboxes it changes).
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { RepoModel, SandboxModel } from "../api/crd";
import { repoIdentity, repoKey } from "../api/repo-identity";
import { type Agent, startCacheAgent } from "../dev/local-cache-agent";
import { benchOperator, type Result, scrape, sumMetric } from "./sandbox-burst-bench";
import { sleep } from "./stats";
import { sandboxNamespace } from "../api/sandbox-namespaces";

const NODES = ["jr2-node-0", "jr2-node-1", "jr2-node-2"];

async function until<T>(what: string, get: () => Promise<T>, ok: (v: T) => boolean, ms = 10 * 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await get();
    if (ok(v)) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

export async function repoFanout(kubeconfig: string, count: number): Promise<Result[]> {
  const port = 3445;
  const op = await benchOperator(kubeconfig, port, "bench-fanout-operator");
  const ns = `fanout-${randomBytes(3).toString("hex")}`;
  const tmp = mkdtempSync(join(tmpdir(), "jr2-fanout-"));
  const agents = new Map<string, Agent>();
  const root = (node: string) => join(tmp, `cache-${node}`);
  const reconciles = async () =>
    sumMetric(await scrape(op.watcherPort, op.caPem), "pepr_jr2_reconciles", { controller: "sandbox" });
  // Quiet: the counter still for three scrapes a second apart.
  const settled = async () => {
    let last = await reconciles();
    for (let still = 0; still < 3; ) {
      await sleep(1000);
      const now = await reconciles();
      still = now === last ? still + 1 : 0;
      last = now;
    }
    return last;
  };
  try {
    const work = join(tmp, "work");
    const remote = join(tmp, "remote.git");
    const git = (...args: string[]) => execFileSync("git", args, { cwd: tmp, stdio: "ignore" });
    git("init", "--quiet", "-b", "main", work);
    git("-C", work, "-c", "user.name=b", "-c", "user.email=b@b", "commit", "--quiet", "--allow-empty", "-m", "one");
    git("clone", "--quiet", "--bare", work, remote);
    const key = repoKey(repoIdentity(remote));
    for (const node of NODES) agents.set(node, await startCacheAgent(node, root(node)));

    await K8s(kind.Namespace).Apply(sandboxNamespace(ns) as kind.Namespace);
    await K8s(RepoModel).Apply({
      apiVersion: "core.jr2.dev/v1alpha1",
      kind: "Repo",
      metadata: { name: "shared", namespace: ns },
      spec: { url: remote, interval: "1h" },
    });
    const getRepo = () => K8s(RepoModel).InNamespace(ns).Get("shared");
    await until("the Repo present on every node", getRepo, (r) =>
      NODES.every((n) => r.status?.nodes?.[n]?.phase === "Present"),
    );

    const t0 = performance.now();
    const names = Array.from({ length: count }, (_, i) => `f-${i}`);
    for (let i = 0; i < names.length; i += 50) {
      await Promise.all(
        names.slice(i, i + 50).map((name) =>
          K8s(SandboxModel).Create({
            apiVersion: "core.jr2.dev/v1alpha1",
            kind: "Sandbox",
            metadata: { name, namespace: ns },
            spec: { image: "ghcr.io/example/harness:1", repos: [{ key, url: remote }] },
          }),
        ),
      );
    }
    const list = () => K8s(SandboxModel).InNamespace(ns).Get();
    const all = await until(
      "every Sandbox Ready",
      list,
      (l) => l.items.filter((s) => s.status?.phase === "Ready").length === count,
    );
    const allReady = (performance.now() - t0) / 1000;
    const perNode = Object.fromEntries(NODES.map((n) => [n, all.items.filter((s) => s.status?.nodeName === n).length]));
    process.stderr.write(`Sandboxes per node: ${JSON.stringify(perNode)}\n`);

    const before = await settled();
    const node = NODES[0];
    const lastFetch = (await getRepo()).status?.nodes?.[node]?.fetchedAt ?? "";
    await agents.get(node)!.stop();
    agents.set(node, await startCacheAgent(node, root(node)));
    await until(`${node}'s fetch written`, getRepo, (r) => (r.status?.nodes?.[node]?.fetchedAt ?? "") > lastFetch);
    const woken = (await settled()) - before;

    const b = "repo-fanout";
    return [
      { bench: b, metric: "sandboxes", value: count, unit: "count" },
      { bench: b, metric: "all_ready_seconds", value: Math.round(allReady * 100) / 100, unit: "s" },
      { bench: b, metric: "sandboxes_on_fetching_node", value: perNode[node], unit: "count" },
      {
        bench: b,
        metric: "reconciles_woken_by_one_node_fetch",
        value: woken,
        unit: "count",
        target: `<= ${perNode[node]}`,
      },
    ];
  } finally {
    await Promise.all([...agents.values()].map((a) => a.stop()));
    await K8s(kind.Namespace)
      .Delete(ns)
      .catch(() => undefined);
    await op.stop();
    rmSync(tmp, { recursive: true, force: true });
  }
}
