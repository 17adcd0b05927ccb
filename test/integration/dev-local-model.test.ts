// `npm start`'s model (dev/local-model.ts, decision 0025) on the control plane: with nothing set,
// the built-in scripted provider plays the demo, and the example Machine, run as examples/README.md
// says (examples/propose-machine.ts `main`), creates a workspace on a real repository, gets the
// Agent's `propose`, approves it and ends with the Agent's last word. With JR2_MODEL_URL and a key
// file, the Agents ask that endpoint instead (here a second scripted model standing in for a remote
// one): the key reaches it from the file through the Custodian, and the model's id is the one the
// endpoint lists. Bad settings are refused naming the variable and the fix.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { K8s, kind } from "kubernetes-fluent-client";
import { ORCHESTRATOR_ENV } from "../../api/env";
import { type Agent, localReposRoot, startCacheAgents } from "../../dev/local-cache-agent";
import { DEMO_SCRIPT, MODEL_SECRET, startLocalModel, type LocalModel } from "../../dev/local-model";
import { startLocalOrchestrator } from "../../dev/local-orchestrator";
import { oneCommitRepository } from "../../dev/repository";
import { startScriptedModel, type ScriptedModel } from "../../dev/scripted-model";
import { main as runExample } from "../../examples/propose-machine";
import type { StreamEvent } from "../../api/agent-protocol";
import { OrchestratorClient } from "../../clients/typescript/src";
import { PodConfig } from "../../orchestrator/workspaces/pod-config";
import { useNamespace, waitFor } from "./support/cluster";

/** The remote models' key: what the Custodian must put in each API's own header. */
const KEY = "sk-remote-real-key-3f8a";

const ns = useNamespace("model");
const tmp = mkdtempSync(join(tmpdir(), "jr2-model-"));
const agents: Agent[] = [];
const cleanups: Array<() => Promise<unknown>> = [];

const orchestrator = (dir: string, podConfigFile: string) =>
  startLocalOrchestrator({
    kubeconfig: process.env.KUBECONFIG!,
    namespace: ns.name,
    dir: join(tmp, dir),
    credentials: [join(tmp, "remotes")],
    reposRoot: localReposRoot(tmp),
    env: { [ORCHESTRATOR_ENV.podConfigFile]: podConfigFile },
  });

/** A bare repository with one commit, inside the fence. */
const repository = () => oneCommitRepository(join(tmp, "src"), join(tmp, "remotes", "demo.git"));

beforeAll(async () => {
  agents.push(...(await startCacheAgents(tmp)));
}, 60_000);

afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  await Promise.all(agents.map((a) => a.stop()));
  rmSync(tmp, { recursive: true, force: true });
});

describe("npm start's model", () => {
  it("by default is the scripted provider, and the example Machine runs on it as the README says", async () => {
    const dir = join(tmp, "default");
    mkdirSync(dir, { recursive: true });
    const model = await startLocalModel({ namespace: ns.name, dir, env: {} });
    cleanups.push(() => model.stop());
    expect(model.summary).toBe("the scripted model");
    // The pod config the Orchestrator reads: the provider and its key, held by the Custodian.
    const config = PodConfig.parse(JSON.parse(readFileSync(model.podConfigFile, "utf8")));
    expect(config.custodian.held).toEqual([
      expect.objectContaining({ secret: MODEL_SECRET.name, key: MODEL_SECRET.key, env: "OPENAI_API_KEY" }),
    ]);
    expect(config.harness.env).toEqual(expect.arrayContaining([{ name: "JR2_MODEL_PROVIDER", value: "model" }]));

    const orch = await orchestrator("orch-default", model.podConfigFile);
    cleanups.push(() => orch.stop());
    const output = await runExample({
      JR2_ORCHESTRATOR_URL: orch.url,
      JR2_API_TOKEN: orch.token,
      JR2_REPO_URL: repository(),
    });
    expect(output.error).toBeUndefined();
    const proposed = DEMO_SCRIPT[1] as { toolCalls: Array<{ arguments: unknown }> };
    expect(output.pick).toMatchObject({ pick: "propose", args: proposed.toolCalls[0]!.arguments });
    expect(output).toMatchObject({ outcome: "completed", message: (DEMO_SCRIPT[2] as { text: string }).text });
  }, 180_000);

  it("with JR2_MODEL_URL and a key file, asks that endpoint with the file's key and the id it lists", async () => {
    const remote: ScriptedModel = await startScriptedModel({
      apiKey: KEY,
      model: "remote-model-1",
      script: [{ text: "hello from the remote model" }],
      perConversation: true,
    });
    cleanups.push(() => remote.stop());
    const dir = join(tmp, "remote");
    mkdirSync(dir, { recursive: true });
    const keyFile = join(dir, "model-key");
    writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
    const model: LocalModel = await startLocalModel({
      namespace: ns.name,
      dir,
      env: { JR2_MODEL_URL: `${remote.baseUrl}/`, JR2_MODEL_KEY_FILE: keyFile, JR2_LOCAL_ALLOW_REAL_KEY: "1" },
    });
    expect(model.summary).toBe(`remote-model-1 at ${remote.baseUrl} (openai-compatible)`);
    const secret = await K8s(kind.Secret).InNamespace(ns.name).Get(MODEL_SECRET.name);
    expect(Buffer.from(secret.data![MODEL_SECRET.key]!, "base64").toString()).toBe(KEY);
    expect(readFileSync(model.podConfigFile, "utf8")).not.toContain(KEY);

    const orch = await orchestrator("orch-remote", model.podConfigFile);
    cleanups.push(() => orch.stop());
    const client = new OrchestratorClient({ url: orch.url, token: orch.token });
    const { name } = await client.createWorkspace({ image: "ghcr.io/example/harness:1", branch: "model/remote" });
    await client.waitReady(name, { timeoutMs: 60_000 });
    const { iid } = await client.submitTurn(name, { agent: "coder", message: "say hello" });
    let end: unknown;
    for await (const e of client.turnEvents(name, iid)) if (e.kind === "end") end = e;
    expect(end).toMatchObject({ outcome: "completed", message: "hello from the remote model" });
    const asked = remote.requests.filter((r) => r.status === 200);
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({ authorization: `Bearer ${KEY}`, body: { model: "remote-model-1" } });
    await client.deleteWorkspace(name);
    await waitFor(
      "the workspace gone",
      () => client.workspace(name).catch(() => undefined),
      (v) => v === undefined || v.state === "destroyed",
      60_000,
    );
  }, 120_000);

  // Decision 0054: a provider's own API, spoken by the Harness with pi-ai's client, the key put by the
  // Custodian in the one header that API reads; each call's tokens in the turn's events.
  for (const [modelKind, wire, id, header] of [
    ["anthropic", "anthropic", "claude-sonnet-4-5", "x-api-key"],
    ["openai", "openai-responses", "gpt-5", "authorization"],
    ["google", "google", "gemini-2.5-flash", "x-goog-api-key"],
  ] as const)
    it(`with JR2_MODEL_KIND=${modelKind}, the Harness speaks ${wire} and the key rides in ${header} alone`, async () => {
      const remote: ScriptedModel = await startScriptedModel({
        apiKey: KEY,
        wire,
        script: [{ toolCalls: [{ name: "bash", arguments: { command: "echo native" } }] }, { text: `hello from ${modelKind}` }],
        perConversation: true,
      });
      cleanups.push(() => remote.stop());
      const dir = join(tmp, `native-${modelKind}`);
      mkdirSync(dir, { recursive: true });
      const keyFile = join(dir, "model-key");
      writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
      const model = await startLocalModel({
        namespace: ns.name,
        dir,
        env: {
          JR2_MODEL_URL: remote.url,
          JR2_MODEL_KIND: modelKind,
          JR2_MODEL_ID: id,
          JR2_MODEL_KEY_FILE: keyFile,
          JR2_LOCAL_ALLOW_REAL_KEY: "1",
        },
      });
      expect(JSON.parse(readFileSync(model.podConfigFile, "utf8")).custodian).toMatchObject({
        providers: [{ name: "model", url: remote.url, kind: modelKind }],
        held: [{ headers: [header] }],
      });
      const orch = await orchestrator(`orch-${modelKind}`, model.podConfigFile);
      cleanups.push(() => orch.stop());
      const client = new OrchestratorClient({ url: orch.url, token: orch.token });
      const { name } = await client.createWorkspace({ image: "ghcr.io/example/harness:1", branch: `model/${modelKind}` });
      await client.waitReady(name, { timeoutMs: 60_000 });
      const { iid } = await client.submitTurn(name, { agent: "coder", message: "say hello" });
      const events: StreamEvent[] = [];
      for await (const e of client.turnEvents(name, iid)) events.push(e);
      expect(events.at(-1)).toMatchObject({ kind: "end", outcome: "completed", message: `hello from ${modelKind}` });
      expect(events.find((e) => e.kind === "toolResult")).toMatchObject({ tool: "bash", isError: false, text: "native\n" });
      // Two calls, each with the held key in the API's own header, none refused.
      expect(remote.requests.map((r) => [r.status, r.wire, r.keyHeader, r.key])).toEqual([
        [200, wire, header, KEY],
        [200, wire, header, KEY],
      ]);
      const usage = events.filter((e) => e.kind === "usage");
      expect(usage).toHaveLength(2);
      for (const u of usage) expect(u).toMatchObject({ model: id, input: expect.any(Number), output: expect.any(Number) });
      expect(usage.every((u) => u.kind === "usage" && u.input > 0 && u.output > 0)).toBe(true);
      await client.deleteWorkspace(name);
    }, 120_000);

  it("refuses settings it cannot use, naming the variable and the fix", async () => {
    const dir = join(tmp, "bad");
    mkdirSync(dir, { recursive: true });
    await expect(
      startLocalModel({ namespace: ns.name, dir, env: { JR2_MODEL_URL: "http://127.0.0.1:9/chat" } }),
    ).rejects.toThrow(
      /JR2_MODEL_URL=http:\/\/127\.0\.0\.1:9\/chat: must be an OpenAI-compatible base URL ending in \/v1/,
    );
    const withCredential = await startLocalModel({
      namespace: ns.name,
      dir,
      env: { JR2_MODEL_URL: "http://me:sk-in-the-url-77@127.0.0.1:9/v1" },
    }).then(
      () => new Error("it started"),
      (e: unknown) => e as Error,
    );
    expect(withCredential.message).toMatch(/JR2_MODEL_URL: must not carry a credential .*put the key in the key file/);
    expect(withCredential.message).not.toContain("sk-in-the-url-77");
    await expect(
      startLocalModel({
        namespace: ns.name,
        dir,
        env: {
          JR2_MODEL_URL: "http://127.0.0.1:9/v1",
          JR2_MODEL_KEY_FILE: join(dir, "absent"),
          JR2_LOCAL_ALLOW_REAL_KEY: "1",
        },
      }),
    ).rejects.toThrow(/does not exist: write the key there .* or name another file in JR2_MODEL_KEY_FILE/);
    writeFileSync(join(dir, "key"), "sk-never-shown-5521");
    const err = await startLocalModel({
      namespace: ns.name,
      dir,
      env: {
        JR2_MODEL_URL: "http://127.0.0.1:9/v1",
        JR2_MODEL_KEY_FILE: join(dir, "key"),
        JR2_LOCAL_ALLOW_REAL_KEY: "1",
      },
    }).then(
      () => new Error("it started"),
      (e: unknown) => e as Error,
    );
    expect(err.message).toMatch(/set JR2_MODEL_ID to the model's id/);
    expect(err.message).not.toContain("sk-never-shown-5521");
  });
});
