// The binding table (capabilities/bindings.ts, decision 0035): one watch per kind and who hears it,
// Pepr's build shown those watches (so it renders the watcher Deployment) and nothing else shown
// them, and the controllers built and joined by one function, with nothing started at import.
import type { Capability } from "pepr";
import { checkRepoUrl, repoKey } from "../../api/repo-identity";
import { MANAGED_BY, MANAGED_BY_LABEL } from "../../api/wire";
import { operatorMetrics } from "../../lib/operator-metrics";
import {
  WATCHES,
  buildControllers,
  capabilities,
  ignoredNamespaces,
  type Controllers,
} from "../../capabilities/bindings";

describe("the watch table", () => {
  it("watches each kind once: Sandboxes, the operator's pods and Services, Repos", () => {
    expect(WATCHES.map((w) => [w.what, w.capability, w.label ?? null, !!w.skipIgnoredNamespaces])).toEqual([
      ["Sandbox", "sandbox", null, false],
      ["Sandbox pod", "sandbox", [MANAGED_BY_LABEL, MANAGED_BY], false],
      ["Sandbox Service", "sandbox", [MANAGED_BY_LABEL, MANAGED_BY], false],
      ["Repo", "repo", null, true],
    ]);
  });

  it("hands each event to its controller, deleted or not", () => {
    const heard: string[] = [];
    const record = (name: string) => (obj: { metadata?: { name?: string } }, deleted: boolean) =>
      heard.push(`${name}(${obj.metadata?.name},${deleted})`);
    const fake = {
      sandbox: { onSandbox: record("onSandbox"), onPod: record("onPod"), onService: record("onService") },
      repo: { onRepo: record("onRepo") },
    } as unknown as Controllers;
    for (const w of WATCHES) {
      w.hear(fake, { metadata: { name: w.what } }, false);
      w.hear(fake, { metadata: { name: w.what } }, true);
    }
    expect(heard).toEqual([
      "onSandbox(Sandbox,false)",
      "onSandbox(Sandbox,true)",
      "onPod(Sandbox pod,false)",
      "onPod(Sandbox pod,true)",
      "onService(Sandbox Service,false)",
      "onService(Sandbox Service,true)",
      "onRepo(Repo,false)",
      "onRepo(Repo,true)",
    ]);
  });
});

describe("Pepr's capabilities", () => {
  const watchBindings = (caps: Capability[]) =>
    caps.flatMap((c) =>
      c.bindings
        .filter((b) => b.isWatch)
        .map((b) => `${c.name} ${b.kind.kind} ${b.event} ${JSON.stringify(b.filters.labels)}`),
    );

  it("outside the build: admission's reviews only, no Pepr watch", () => {
    const caps = capabilities({});
    expect(caps.map((c) => c.name)).toEqual(["admission", "sandbox", "repo"]);
    expect(watchBindings(caps)).toEqual([]);
  });

  it("in Pepr's build: every watch of the table declared for every phase, so the watcher Deployment is rendered", () => {
    // Pepr decides at its import whether Watch bindings register (only in build, watch and dev mode).
    const before = process.env.PEPR_MODE;
    process.env.PEPR_MODE = "build";
    try {
      jest.isolateModules(() => {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        const fresh = require("../../capabilities/bindings") as typeof import("../../capabilities/bindings");
        const caps = fresh.capabilities(process.env);
        const label = JSON.stringify({ [MANAGED_BY_LABEL]: MANAGED_BY });
        expect(watchBindings(caps)).toEqual([
          "sandbox Sandbox CREATEORUPDATE {}",
          "sandbox Sandbox DELETE {}",
          `sandbox Pod CREATEORUPDATE ${label}`,
          `sandbox Pod DELETE ${label}`,
          `sandbox Service CREATEORUPDATE ${label}`,
          `sandbox Service DELETE ${label}`,
          "repo Repo CREATEORUPDATE {}",
          "repo Repo DELETE {}",
        ]);
      });
    } finally {
      if (before === undefined) delete process.env.PEPR_MODE;
      else process.env.PEPR_MODE = before;
    }
  });
});

describe("the controllers", () => {
  it("ignore the namespaces admission ignores, and those the environment adds", () => {
    expect(ignoredNamespaces({})).toEqual(["kube-system", "kube-public", "kube-node-lease", "pepr-system"]);
    expect(ignoredNamespaces({ PEPR_ADDITIONAL_IGNORED_NAMESPACES: " extra, kube-system ,," })).toEqual([
      "kube-system",
      "kube-public",
      "kube-node-lease",
      "pepr-system",
      "extra",
    ]);
  });

  it("are built by one call and joined: the Repo controller indexes the Sandboxes and wakes those a Repo concerns", () => {
    const none = { addGauge() {}, addSummary() {}, incGauge() {}, observeEnd() {} };
    const c = buildControllers(operatorMetrics(none), {});
    // Stopped queues take nothing: nothing here reaches an API server.
    c.sandbox.queue.stop();
    c.repo.queue.stop();
    const woken = jest.spyOn(c.sandbox.queue, "add");
    const url = "https://github.com/acme/app";
    const key = repoKey(checkRepoUrl(url));
    c.sandbox.onSandbox(
      {
        apiVersion: "core.jr2.dev/v1alpha1",
        kind: "Sandbox",
        metadata: { name: "s1", namespace: "team-a", uid: "u1", resourceVersion: "1" },
        spec: { image: "h:1", repos: [{ key, url }] },
      } as never,
      false,
    );
    expect(c.repo.naming("team-a", key)).toEqual(["team-a/s1"]);
    woken.mockClear();
    c.repo.onRepo(
      {
        apiVersion: "core.jr2.dev/v1alpha1",
        kind: "Repo",
        metadata: { name: "app", namespace: "team-a", uid: "r1", generation: 1 },
        spec: { url },
      } as never,
      false,
    );
    expect(woken).toHaveBeenCalledWith("team-a/s1");
  });
});
