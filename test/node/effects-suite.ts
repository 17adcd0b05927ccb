// The Machine's Effects through the deployed installation (decision 0070), on the real
// node: jr2's Effector in the `effector` seat pushes the Agent's commit over HTTPS to the stand-in
// forge with the push token the operator projected into it alone, opens a pull request with an
// `http` Effect whose header names a secret and whose body is a Worktree file, and runs a
// credentialed `command` confined with Landlock. From the Harness: the token is unreadable and
// useless, and forged, replayed and unsigned requests to :8082 run nothing. An Orchestrator
// SIGKILLed between send and answer leaves one push at the forge. Run by deployed.test.ts once under
// the cluster's runtime and once under gVisor, where a command is refused naming the node.
import { randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { EFFECTOR_PATHS, signRequest } from "../../api/effector-wire";
import type { OrchestratorClient } from "../../clients/typescript/src";
import { effectorKey } from "../../orchestrator/tokens";
import { shardOf } from "../../orchestrator/replicas/ownership";
import { shardLeaseName } from "../../api/wire";
import type { PublicHost } from "./public-host";
import { type Obj, ROOT, getJson, kubectl, kubectlOk, until, SANDBOX_RESOURCE } from "./support";

export type EffectsContext = {
  client: () => OrchestratorClient;
  publicHost: () => PublicHost;
  sandboxImage: string;
  namespace: string;
  system: string;
  /** The forge's repositories' directory on this machine, and its names. */
  forgeRoot: () => string;
  forgeUrl: (repo: string) => string;
  forgeOrigin: string;
  forgeToken: string;
  /** The installation's signing key (hex text, as its Secret holds it): a test plays a thief
   * that has it, to sign a request it can then replay. */
  signingKey: () => string;
  nodeName: string;
  /** gVisor's RuntimeClass, or undefined for the cluster's default runtime. */
  runtimeClassName?: string;
  /** Applies the installation's pod config with these choices and restarts the Orchestrator. */
  podConfig: (o: { requireCommands?: boolean }) => Promise<void>;
};

export function describeEffects(ctx: EffectsContext) {
  const under = ctx.runtimeClassName ? ` under ${ctx.runtimeClassName}` : "";
  const gvisor = ctx.runtimeClassName !== undefined;
  describe(`Effects from jr2's Sandbox Effector${under}`, () => {
    const branch = `feature/effects${gvisor ? "-gvisor" : ""}`;
    const work = `/work/app/${branch}`;
    const exec = (ws: string, container: string, ...command: string[]) =>
      kubectl(["exec", "-n", ctx.namespace, ws, "-c", container, "--", ...command]);
    let ws = "";
    let head = "";
    const remoteRef = (repo: string, ref: string) => {
      try {
        return execFileSync("git", ["--git-dir", join(ctx.forgeRoot(), repo), "rev-parse", "--verify", "-q", ref], {
          encoding: "utf8",
        }).trim();
      } catch {
        return "";
      }
    };

    /** Nothing the installation writes or says holds the forge's token: the Orchestrator's and the
     * Effector's logs, the workspace's ledgers, the namespace's Events, the Orchestrator's metrics. */
    const expectNoToken = async () => {
      const token = ctx.forgeToken;
      const orchestrator = kubectlOk(["logs", "-n", ctx.system, "deployment/jr2-orchestrator", "--all-containers"]);
      const effector = kubectlOk(["logs", "-n", ctx.namespace, ws, "-c", "effector"]);
      const configMaps = kubectlOk(["get", "configmaps", "-n", ctx.namespace, "-o", "json"]);
      const events = kubectlOk(["get", "events", "-n", ctx.namespace, "-o", "json"]);
      const metrics = await ctx.client().metrics();
      for (const [where, text] of Object.entries({ orchestrator, effector, configMaps, events, metrics }))
        expect([where, text.includes(token)]).toEqual([where, false]);
    };

    beforeAll(async () => {
      const c = ctx.client();
      ws = (
        await c.createWorkspace({
          image: ctx.sandboxImage,
          branch,
          repos: [{ slot: "app", url: ctx.forgeUrl("acme/app.git") }],
          effector: { pushes: ["app"], secrets: [{ secret: "forge-api", key: "authorization" }] },
          egress: { allow: [new URL(ctx.forgeOrigin).host] },
          ...(ctx.runtimeClassName ? { runtimeClassName: ctx.runtimeClassName } : {}),
        })
      ).name;
      const v = await c.waitReady(ws, { timeoutMs: 300_000 });
      expect({ state: v.state, failure: v.failure }).toEqual({ state: "ready", failure: undefined });
      // The Agent's work, as its bash makes it: a file and a commit on the Machine's branch.
      const agent = exec(
        ws,
        "harness",
        "sh",
        "-c",
        `cd ${work} && printf '# Widgets, faster\\n\\nThe Agent made this.\\n' > PR.md && git add PR.md && ` +
          "git -c user.name=agent -c user.email=agent@example.invalid commit -q -m 'the agent s change' && git rev-parse HEAD",
      );
      expect(agent.stderr).toBe("");
      head = agent.stdout.trim();
      expect(head).toMatch(/^[0-9a-f]{40}$/);
    }, 330_000);
    afterAll(async () => {
      if (ws) await ctx.client().deleteWorkspace(ws);
    });

    test("a push over HTTPS with the projected token: the forge holds the Agent's commit; the Harness can neither read the token nor push with it", async () => {
      const before = ctx.publicHost().forge().length;
      const r = await ctx.client().runEffect(ws, { id: "push-1", kind: "push", slot: "app" }, { timeoutMs: 180_000 });
      expect({ state: r.state, error: r.error }).toEqual({ state: "succeeded", error: undefined });
      expect(r.result).toMatchObject({ kind: "push", commit: head, ref: `refs/heads/${branch}`, forced: false });
      expect(remoteRef("acme/app.git", `refs/heads/${branch}`)).toBe(head);
      // The token went to the forge, in the push's Authorization, and nowhere the Machine reads. (The
      // forge's records are read from its pipe while this process awaits: waited for, not assumed.)
      await ctx.publicHost().waitFor("the push at the forge", (rs) =>
        rs
          .filter((r) => r.kind === "forge")
          .slice(before)
          .some((r) => r.kind === "forge" && r.service === "git-receive-pack" && r.method === "POST")
          ? true
          : undefined,
      );
      const pushes = ctx
        .publicHost()
        .forge()
        .slice(before)
        .filter((f) => f.service === "git-receive-pack" && f.method === "POST");
      expect(pushes).toHaveLength(1);
      expect(Buffer.from(pushes[0].authorization!.replace(/^Basic /, ""), "base64").toString()).toContain(
        ctx.forgeToken,
      );
      expect(JSON.stringify(r)).not.toContain(ctx.forgeToken);

      // The same id again: the recorded result, nothing run.
      const again = await ctx
        .client()
        .runEffect(ws, { id: "push-1", kind: "push", slot: "app" }, { timeoutMs: 60_000 });
      expect(again.result).toEqual(r.result);
      expect(
        ctx
          .publicHost()
          .forge()
          .slice(before)
          .filter((f) => f.service === "git-receive-pack" && f.method === "POST"),
      ).toHaveLength(1);

      // From the Harness: no secret mount, no token in any file or environment it can read, and a
      // push with what it has is refused by the forge.
      expect(exec(ws, "harness", "ls", "/run/jr2/secrets").status).not.toBe(0);
      const grep = exec(
        ws,
        "harness",
        "sh",
        "-c",
        `grep -rsl -- '${ctx.forgeToken}' /proc/*/environ /work /etc /tmp; true`,
      );
      expect(grep.stdout.trim()).toBe("");
      const stolen = exec(
        ws,
        "harness",
        "sh",
        "-c",
        `cd ${work} && GIT_TERMINAL_PROMPT=0 git push ${ctx.forgeUrl("acme/app.git")} HEAD:refs/heads/stolen 2>&1; echo exit=$?`,
      );
      expect(stolen.stdout).not.toMatch(/exit=0/);
      expect(remoteRef("acme/app.git", "refs/heads/stolen")).toBe("");
      await expectNoToken();
    }, 240_000);

    test("an http Effect opens a pull request: the header's secret reaches the forge, the body is a Worktree file", async () => {
      const before = ctx.publicHost().forge().length;
      const r = await ctx.client().runEffect(
        ws,
        {
          id: "pr-1",
          kind: "http",
          method: "POST",
          url: `${ctx.forgeOrigin}/api/repos/acme/app/pulls`,
          headers: { authorization: { secret: "forge-api", key: "authorization" }, "content-type": "text/markdown" },
          body: { file: { slot: "app", path: "PR.md" } },
        },
        { timeoutMs: 120_000 },
      );
      expect({ state: r.state, error: r.error }).toEqual({ state: "succeeded", error: undefined });
      expect(r.result).toMatchObject({ kind: "http", status: 201 });
      expect(JSON.parse((r.result as { body: string }).body)).toMatchObject({ number: expect.any(Number) });
      await ctx.publicHost().waitFor("the pull request at the forge", (rs) =>
        rs
          .filter((r) => r.kind === "forge")
          .slice(before)
          .some((r) => r.kind === "forge" && r.path === "/api/repos/acme/app/pulls")
          ? true
          : undefined,
      );
      const api = ctx
        .publicHost()
        .forge()
        .slice(before)
        .filter((f) => f.path === "/api/repos/acme/app/pulls");
      expect(api).toHaveLength(1);
      expect(api[0].authorization).toBe(`Bearer ${ctx.forgeToken}`);
      expect(api[0].body).toBe("# Widgets, faster\n\nThe Agent made this.\n");
      await expectNoToken();
    }, 180_000);

    test(
      gvisor
        ? "a credentialed command is refused where the kernel cannot confine it, naming the node and why"
        : "a command's child reads the secret it names and nothing else, writes only its scratch, and leaves no process behind",
      async () => {
        const probe = [
          'check() { l=$1; shift; if "$@" >/dev/null 2>&1; then echo "$l yes"; else echo "$l no"; fi; }',
          "check named cat /run/jr2/secrets/forge-api/authorization",
          'check env test -n "$FORGE"',
          "check key cat /run/jr2/effector/key",
          "check push-secret cat /run/jr2/secrets/@git/forge-push/token",
          "check environ cat /proc/1/environ",
          `check work sh -c 'echo x > ${work}/escape'`,
          "check tmp sh -c 'echo x > /tmp/escape'",
          `check scratch sh -c 'echo x > "$TMPDIR/ok"'`,
          `check read-work cat ${work}/PR.md`,
          "setsid sh -c 'sleep 600' </dev/null >/dev/null 2>&1 &",
          "echo done",
        ].join("\n");
        const r = await ctx.client().runEffect(
          ws,
          {
            id: "cmd-1",
            kind: "command",
            argv: ["sh", "-c", probe],
            cwd: { slot: "app" },
            env: { FORGE: { secret: "forge-api", key: "authorization" } },
            timeoutSeconds: 60,
          },
          { timeoutMs: 120_000 },
        );
        if (gvisor) {
          expect(r.state).toBe("failed");
          expect(r.error?.code).toBe("unconfined");
          expect(r.error?.message).toContain(ctx.nodeName);
          expect(r.error?.message).toMatch(/landlock/i);
          return;
        }
        expect({ state: r.state, error: r.error }).toEqual({ state: "succeeded", error: undefined });
        const out = (r.result as { stdout: string }).stdout;
        expect(out.trim().split("\n")).toEqual([
          "named yes",
          "env yes",
          "key no",
          "push-secret no",
          "environ no",
          "work no",
          "tmp no",
          "scratch yes",
          "read-work yes",
          "done",
        ]);
        expect((r.result as { ended: number }).ended).toBeGreaterThanOrEqual(1);
        expect(out).not.toContain(ctx.forgeToken);
        // Nothing it started outlived it: a later command sees no `sleep 600` in the seat.
        const ps = await ctx.client().runEffect(
          ws,
          {
            id: "cmd-2",
            kind: "command",
            argv: ["sh", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo"],
            cwd: { slot: "app" },
          },
          { timeoutMs: 120_000 },
        );
        expect(ps.state).toBe("succeeded");
        expect((ps.result as { stdout: string }).stdout).not.toContain("sleep 600");
        await expectNoToken();
      },
      240_000,
    );

    test("forged, replayed, stale and unsigned requests from the Harness to :8082 are refused and run nothing", async () => {
      const pod = getJson(["pod", "-n", ctx.namespace, ws]) as Obj;
      const ip = pod.status.podIP as string;
      const key = effectorKey(Buffer.from(ctx.signingKey()), ws);
      const order = (id: string) =>
        JSON.stringify({
          id,
          idempotent: false,
          effect: {
            kind: "http",
            method: "GET",
            url: `${ctx.forgeOrigin}/forged/${id}`,
            headers: {},
            maxResponseBytes: 1024,
            timeoutSeconds: 10,
          },
        });
      const signed = (k: string, id: string, over: { pod?: string; time?: number } = {}) => {
        const body = order(id);
        const headers = signRequest(k, {
          method: "POST",
          path: EFFECTOR_PATHS.effects,
          body,
          pod: over.pod ?? ip,
          time: over.time ?? Date.now(),
          nonce: randomBytes(16).toString("base64url"),
        });
        return { body, headers };
      };
      /** POSTs from the Harness container, over the pod's shared network; prints the status. */
      const post = (req: { body: string; headers: Record<string, string> }) =>
        exec(
          ws,
          "harness",
          "node",
          "-e",
          `fetch("http://127.0.0.1:8082${EFFECTOR_PATHS.effects}",{method:"POST",headers:${JSON.stringify({
            "content-type": "application/json",
            ...req.headers,
          })},body:${JSON.stringify(req.body)}}).then(r=>console.log(r.status),e=>console.log("error",e.message))`,
        ).stdout.trim();
      const otherKey = effectorKey(Buffer.from(ctx.signingKey()), `${ws}-other`);
      expect(post({ body: order("unsigned"), headers: {} })).toBe("401");
      expect(post(signed(otherKey, "other-key"))).toBe("401");
      expect(post(signed(key, "other-pod", { pod: "10.255.255.1" }))).toBe("401");
      expect(post(signed(key, "stale", { time: Date.now() - 10 * 60_000 }))).toBe("401");
      const tampered = signed(key, "tampered");
      expect(post({ ...tampered, body: tampered.body.replace("tampered", "tampere2") })).toBe("401");
      // A thief with the installation's signing key is the one who can: the positive control. Its
      // exact request sent again is a replay.
      const good = signed(key, "thief");
      expect(post(good)).toBe("200");
      expect(post(good)).toBe("401");
      // The thief's request is the barrier: the forge records in the order requests come, and every
      // refused one was sent before it.
      await ctx
        .publicHost()
        .waitFor("the thief's request at the forge", (rs) =>
          rs.some((r) => r.kind === "forge" && r.path === "/forged/thief") ? true : undefined,
        );
      const paths = ctx
        .publicHost()
        .forge()
        .map((f) => f.path);
      for (const id of ["unsigned", "other-key", "other-pod", "stale", "tampered", "tampere2"])
        expect([id, paths.includes(`/forged/${id}`)]).toEqual([id, false]);
      expect(paths.filter((p) => p === "/forged/thief")).toHaveLength(1);
      const metrics = exec(
        ws,
        "harness",
        "node",
        "-e",
        'fetch("http://127.0.0.1:8082/metrics").then(r=>r.text()).then(t=>console.log(t))',
      ).stdout;
      for (const reason of ["unsigned", "bad_signature", "wrong_pod", "stale", "replayed"])
        expect(metrics).toMatch(new RegExp(`jr2_effector_refused_total\\{reason="${reason}"\\} [1-9]`));
    }, 120_000);

    if (gvisor)
      test("where the pod config requires commands, an Effector that cannot confine them ends at start, and the workspace fails at once naming why", async () => {
        await ctx.podConfig({ requireCommands: true });
        const c = ctx.client();
        let ws = "";
        try {
          ws = (
            await c.createWorkspace({
              image: ctx.sandboxImage,
              branch: "feature/required",
              effector: {},
              runtimeClassName: ctx.runtimeClassName,
            })
          ).name;
          const failed = await until(`workspace ${ws} failed`, 240_000, async () => {
            const v = await c.workspace(ws);
            return v.state === "ready" ? { state: v.state } : v.failure ? v : undefined;
          });
          expect(failed.state).toBe("failed");
          const f = (failed as { failure: { reason: string; message: string } }).failure;
          expect(f.reason).toBe("EffectorEnded");
          expect(f.message).toContain(ctx.nodeName);
          expect(f.message).toMatch(/landlock/i);
          expect(f.message).toContain("effector.requireCommands");
          // What the operator published: the Effector's termination, its reason in its own words.
          const sandbox = getJson([SANDBOX_RESOURCE, "-n", ctx.namespace, ws]) as Obj;
          expect(sandbox.status.effector.lastTerminated.message).toMatch(/landlock/i);
        } finally {
          if (ws) await c.deleteWorkspace(ws).catch(() => undefined);
          await ctx.podConfig({});
        }
      }, 600_000);

    if (!gvisor)
      test("at most once across an Orchestrator SIGKILL between send and answer: the forge shows one push", async () => {
        const c = ctx.client();
        const held = (
          await c.createWorkspace({
            image: ctx.sandboxImage,
            branch: "feature/held",
            repos: [{ slot: "held", url: ctx.forgeUrl("acme/held.git") }],
            effector: { pushes: ["held"] },
            egress: { allow: [new URL(ctx.forgeOrigin).host] },
          })
        ).name;
        try {
          const v = await c.waitReady(held, { timeoutMs: 300_000 });
          expect({ state: v.state, failure: v.failure }).toEqual({ state: "ready", failure: undefined });
          const commit = exec(
            held,
            "harness",
            "sh",
            "-c",
            "cd /work/held/feature/held && echo held > held.txt && git add held.txt && " +
              "git -c user.name=agent -c user.email=agent@example.invalid commit -q -m held && git rev-parse HEAD",
          ).stdout.trim();
          const before = ctx.publicHost().forge().length;
          const pushesNow = () =>
            ctx
              .publicHost()
              .forge()
              .slice(before)
              .filter((f) => f.path === "/acme/held.git/git-receive-pack" && f.method === "POST");
          await c.createEffect(held, { id: "held-push", kind: "push", slot: "held" });
          // The forge has the push and holds its answer: the Effect is sent and unanswered.
          await ctx
            .publicHost()
            .waitFor("the held push at the forge", () => (pushesNow().length ? true : undefined), 120_000);
          // The replica that owns the workspace runs its Effects (decision 0079): the one killed.
          const holder = getJson(["lease", "-n", ctx.system, shardLeaseName(shardOf(held))]).spec
            .holderIdentity as string;
          const orchestrator = (
            getJson(["pods", "-n", ctx.system, "-l", "app.kubernetes.io/name=jr2-orchestrator"]).items as Obj[]
          ).find((p) => holder.startsWith(`${p.metadata.name}-`))!;
          const id = (orchestrator.status.containerStatuses[0].containerID as string).replace(/^containerd:\/\//, "");
          execFileSync("bash", [join(ROOT, "dev/cluster/cluster.sh"), "ctr", "tasks", "kill", "-s", "SIGKILL", id]);
          const settled = await until("the held push settled after the restart", 240_000, async () => {
            try {
              const e = await ctx.client().getEffect(held, "held-push");
              return ["succeeded", "failed", "unknown"].includes(e.state) ? e : undefined;
            } catch {
              return undefined; // the Orchestrator is restarting
            }
          });
          expect(["succeeded", "unknown"]).toContain(settled.state);
          if (settled.state === "succeeded") expect(settled.result).toMatchObject({ commit });
          expect(pushesNow()).toHaveLength(1);
          expect(remoteRef("acme/held.git", "refs/heads/feature/held")).toBe(commit);
          // And asked again, it runs nothing.
          await ctx.client().createEffect(held, { id: "held-push", kind: "push", slot: "held" });
          expect(pushesNow()).toHaveLength(1);
        } finally {
          await c.deleteWorkspace(held);
        }
      }, 600_000);
  });
}
