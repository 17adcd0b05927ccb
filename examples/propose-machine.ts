// An example Machine (decision 0025): an xstate v5 machine that drives one workspace through the
// Orchestrator's API with the typed client (clients/typescript). It creates a workspace on a
// repository, asks the Agent for a change with a `propose` Menu tool allowed, holds the Agent's
// `propose` pick for a human's approval (an APPROVE or REJECT event; by default it prints the pick
// and approves it), answers it and reads the turn to its end. Then, when its input names a forge and
// the change was approved, it publishes it through the workspace's Effector (decision 0070): a `push`
// of the workspace's branch to the slot's remote, and an `http` Effect that opens a pull request,
// its Authorization a secret by reference and its body a Worktree file the Agent wrote. Last, it
// destroys the workspace.
//
//   JR2_ORCHESTRATOR_URL=http://127.0.0.1:8090 JR2_REPO_URL=$PWD/.jr2/demo/remotes/demo.git \
//     npx tsx examples/propose-machine.ts
//
// To publish: JR2_FORGE_PULLS_URL (the forge's pull request endpoint, e.g.
// https://forge.example/api/repos/acme/app/pulls) and JR2_FORGE_SECRET (`<secret>/<key>`: the
// effect secret holding the API's Authorization value, an entry of the pod config's
// effector.secrets bound to that origin); the repository's fence entry must name a push `secret`.
//
// The token is JR2_API_TOKEN, or the first line of .jr2/demo/orchestrator/api-tokens (`npm start`).
// An https:// JR2_ORCHESTRATOR_URL whose certificate chains to a private CA: JR2_ORCHESTRATOR_CA_FILE.
import { existsSync, readFileSync } from "node:fs";
import { assign, createActor, fromPromise, setup, toPromise } from "xstate";
import {
  OrchestratorClient,
  type CreateWorkspaceBody,
  type EffectRecord,
  type MenuTool,
  type OutstandingPick,
  type StreamEvent,
  type TurnSubmitted,
} from "../clients/typescript/src";
import { ORCHESTRATOR_CLIENT_ENV } from "../api/env";

export const PROPOSE: MenuTool = {
  name: "propose",
  description: "Propose the change you made for a human's approval; the answer says whether it is approved.",
  parameters: { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] },
};

/** Where the machine publishes an approved change (decision 0070): its Effects' ids are these. */
export const PUBLISH_IDS = { push: "publish-push", pullRequest: "publish-pull-request" } as const;

/** A forge to publish to: the Repo Slot's branch is pushed to the slot's remote (its fence entry's
 * push secret), then a pull request is opened by an `http` POST to `pullsUrl`. */
export type ForgeInput = {
  /** The forge's pull request endpoint, e.g. https://forge.example/api/repos/acme/app/pulls. */
  pullsUrl: string;
  /** The effect secret whose value is the API's Authorization header, e.g. `Bearer <token>`. */
  authorization: { secret: string; key: string };
  /** The Repo Slot to push (default: the workspace's first). */
  slot?: string;
  /** The Worktree file (in the slot's worktree) that is the request's body, as the Agent wrote it
   * (default PR.md), and its content type (default text/markdown). */
  bodyFile?: string;
  contentType?: string;
};

export type ProposeInput = {
  client: OrchestratorClient;
  /** The workspace to create (image, branch, repos). */
  workspace: CreateWorkspaceBody;
  /** What the Agent is asked to do. */
  message: string;
  agent?: string;
  /** Approve a pick by itself after printing it (default true); false waits for APPROVE or REJECT. */
  autoApprove?: boolean;
  readyTimeoutMs?: number;
  log?: (line: string) => void;
  /** Told every event of the turn's stream as it is read (progress such as `usage` included). */
  onEvent?: (e: StreamEvent) => void;
  /** Publish the approved change here; absent, the machine skips publishing. */
  forge?: ForgeInput;
  /** How long each Effect may take to settle (default 5 minutes). */
  effectTimeoutMs?: number;
};

export type ProposeEvent = { type: "APPROVE"; answer?: string } | { type: "REJECT"; reason?: string };

type Context = {
  input: ProposeInput;
  workspace?: string;
  iid?: string;
  submissionId?: string;
  /** The last turn event read, to resume the stream after it. */
  lastEventId?: number;
  pick?: OutstandingPick;
  answer?: string;
  end?: Extract<StreamEvent, { kind: "end" }>;
  /** Whether the pick's answer approved the change. */
  approved?: boolean;
  pushed?: EffectRecord["result"];
  pullRequest?: EffectRecord["result"];
  error?: string;
};

export type ProposeOutput = {
  workspace?: string;
  iid?: string;
  pick?: OutstandingPick;
  answer?: string;
  outcome?: "completed" | "aborted" | "failed";
  message?: string;
  /** The push's result: the commit the remote now holds. */
  pushed?: EffectRecord["result"];
  /** The pull request's http answer: the forge's status and body. */
  pullRequest?: EffectRecord["result"];
  error?: string;
};

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));
const say = (context: Context, line: string) => (context.input.log ?? console.log)(line);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Submits the turn, then reads its stream until the Agent picks `propose` (or the turn ends). */
const turnActor = fromPromise<
  { submitted: TurnSubmitted; lastEventId?: number; pick?: OutstandingPick; end?: Context["end"] },
  {
    client: OrchestratorClient;
    workspace: string;
    agent: string;
    message: string;
    onEvent?: (e: StreamEvent) => void;
  }
>(async ({ input, signal }) => {
  const submitted = await input.client.submitTurn(input.workspace, {
    agent: input.agent,
    message: input.message,
    menu: [PROPOSE],
    allowed: [PROPOSE.name],
  });
  let lastEventId: number | undefined;
  for await (const e of input.client.turnEvents(input.workspace, submitted.iid, { signal })) {
    lastEventId = e.offset;
    input.onEvent?.(e);
    if (e.kind === "end") return { submitted, lastEventId, end: e };
    if (e.kind === "pick" && e.pick === PROPOSE.name) break;
  }
  // The stream named the pick (or closed before it): the picks list has its delivery.
  for (;;) {
    const pick = (await input.client.picks(input.workspace)).items.find(
      (p) => p.iid === submitted.iid && p.pick === PROPOSE.name,
    );
    if (pick) return { submitted, lastEventId, pick };
    if (signal.aborted) throw new Error("aborted");
    await sleep(250);
  }
});

/** Reads the rest of the turn's stream to its end. */
const continueActor = fromPromise<
  { end: NonNullable<Context["end"]> },
  {
    client: OrchestratorClient;
    workspace: string;
    iid: string;
    submissionId: string;
    lastEventId?: number;
    onEvent?: (e: StreamEvent) => void;
  }
>(async ({ input, signal }) => {
  const opts = { signal, ...(input.lastEventId !== undefined ? { lastEventId: input.lastEventId } : {}) };
  for await (const e of input.client.turnEvents(input.workspace, input.iid, opts)) {
    input.onEvent?.(e);
    if (e.kind === "end" && e.submissionId === input.submissionId) return { end: e };
  }
  throw new Error("the turn's stream closed before its end");
});

/** The Repo Slot a forge publishes: its own, or the workspace's first. */
function publishSlot(input: Pick<ProposeInput, "workspace" | "forge">): string {
  const slot = input.forge?.slot ?? input.workspace.repos?.[0]?.slot;
  if (!slot) throw new Error("publishing to a forge needs a Repo Slot: the workspace names none");
  return slot;
}

/** The create body: the Machine's, with an Effector that pushes the slot and mounts the API secret
 * when a forge is named. */
export function createBody(input: Pick<ProposeInput, "workspace" | "forge">): CreateWorkspaceBody {
  if (!input.forge) return input.workspace;
  const slot = publishSlot(input);
  return { ...input.workspace, effector: { pushes: [slot], secrets: [input.forge.authorization] } };
}

/** Runs one Effect to its end; anything but `succeeded` is an error naming why. */
const effectActor = fromPromise<
  EffectRecord["result"],
  {
    client: OrchestratorClient;
    workspace: string;
    body: Parameters<OrchestratorClient["runEffect"]>[1];
    timeoutMs: number;
  }
>(async ({ input }) => {
  const r = await input.client.runEffect(input.workspace, input.body, { timeoutMs: input.timeoutMs });
  if (r.state !== "succeeded")
    throw new Error(
      `Effect ${input.body.id} ${r.state}: ${r.error ? `${r.error.code}: ${r.error.message}` : "no result"}`,
    );
  return r.result;
});

/** Deletes the workspace and waits until it is destroyed (or gone). */
const destroyActor = fromPromise<void, { client: OrchestratorClient; workspace: string }>(async ({ input }) => {
  await input.client.deleteWorkspace(input.workspace);
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      if ((await input.client.workspace(input.workspace)).state === "destroyed") return;
    } catch (err) {
      if ((err as { status?: number }).status === 404) return;
      throw err;
    }
    await sleep(250);
  }
  throw new Error(`workspace ${input.workspace} not destroyed in time`);
});

export const proposeMachine = setup({
  types: {
    context: {} as Context,
    input: {} as ProposeInput,
    events: {} as ProposeEvent,
    output: {} as ProposeOutput,
  },
  actors: {
    create: fromPromise<{ name: string }, ProposeInput>(({ input }) => input.client.createWorkspace(createBody(input))),
    ready: fromPromise<unknown, { client: OrchestratorClient; workspace: string; timeoutMs?: number }>(({ input }) =>
      input.client.waitReady(input.workspace, input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {}),
    ),
    turn: turnActor,
    answer: fromPromise<unknown, { client: OrchestratorClient; workspace: string; deliveryId: string; answer: string }>(
      ({ input }) => input.client.answer(input.workspace, input.deliveryId, input.answer),
    ),
    continue: continueActor,
    effect: effectActor,
    destroy: destroyActor,
  },
  actions: {
    log: ({ context }, line: string) => say(context, line),
  },
  guards: {
    autoApprove: ({ context }) => context.input.autoApprove !== false,
    failed: ({ context }) => context.error !== undefined,
    // An approved change the Agent completed, and a forge to publish it to.
    publish: ({ context }) =>
      context.input.forge !== undefined && context.approved === true && context.end?.outcome === "completed",
  },
}).createMachine({
  id: "propose",
  context: ({ input }) => ({ input }),
  initial: "creating",
  states: {
    creating: {
      invoke: {
        src: "create",
        input: ({ context }) => context.input,
        onDone: {
          target: "provisioning",
          actions: [
            assign({ workspace: ({ event }) => event.output.name }),
            ({ context, event }) => say(context, `workspace ${event.output.name} created`),
          ],
        },
        onError: { target: "failed", actions: assign({ error: ({ event }) => messageOf(event.error) }) },
      },
    },
    provisioning: {
      invoke: {
        src: "ready",
        input: ({ context }) => ({
          client: context.input.client,
          workspace: context.workspace!,
          ...(context.input.readyTimeoutMs !== undefined ? { timeoutMs: context.input.readyTimeoutMs } : {}),
        }),
        onDone: { target: "turn", actions: { type: "log", params: "workspace ready" } },
        onError: { target: "destroying", actions: assign({ error: ({ event }) => messageOf(event.error) }) },
      },
    },
    turn: {
      invoke: {
        src: "turn",
        input: ({ context }) => ({
          client: context.input.client,
          workspace: context.workspace!,
          agent: context.input.agent ?? "coder",
          message: context.input.message,
          ...(context.input.onEvent ? { onEvent: context.input.onEvent } : {}),
        }),
        onDone: [
          {
            guard: ({ event }) => event.output.pick !== undefined,
            target: "awaitingApproval",
            actions: assign({
              iid: ({ event }) => event.output.submitted.iid,
              submissionId: ({ event }) => event.output.submitted.admission.submissionId,
              lastEventId: ({ event }) => event.output.lastEventId,
              pick: ({ event }) => event.output.pick,
            }),
          },
          {
            // The turn ended without proposing anything: nothing to approve.
            target: "destroying",
            actions: assign({
              iid: ({ event }) => event.output.submitted.iid,
              end: ({ event }) => event.output.end,
              error: () => "the turn ended without a propose pick",
            }),
          },
        ],
        onError: { target: "destroying", actions: assign({ error: ({ event }) => messageOf(event.error) }) },
      },
    },
    awaitingApproval: {
      entry: {
        type: "log",
        params: ({ context }) =>
          `the Agent proposes: ${JSON.stringify(context.pick!.args ?? {})} (delivery ${context.pick!.deliveryId})`,
      },
      always: { guard: "autoApprove", target: "answering", actions: assign({ answer: "approved", approved: true }) },
      on: {
        APPROVE: {
          target: "answering",
          actions: assign({ answer: ({ event }) => event.answer ?? "approved", approved: true }),
        },
        REJECT: {
          target: "answering",
          actions: assign({
            answer: ({ event }) => `rejected${event.reason ? `: ${event.reason}` : ""}`,
            approved: false,
          }),
        },
      },
    },
    answering: {
      invoke: {
        src: "answer",
        input: ({ context }) => ({
          client: context.input.client,
          workspace: context.workspace!,
          deliveryId: context.pick!.deliveryId,
          answer: context.answer!,
        }),
        onDone: {
          target: "continuing",
          actions: { type: "log", params: ({ context }) => `answered: ${context.answer}` },
        },
        onError: { target: "destroying", actions: assign({ error: ({ event }) => messageOf(event.error) }) },
      },
    },
    continuing: {
      invoke: {
        src: "continue",
        input: ({ context }) => ({
          client: context.input.client,
          workspace: context.workspace!,
          iid: context.iid!,
          submissionId: context.submissionId!,
          ...(context.lastEventId !== undefined ? { lastEventId: context.lastEventId } : {}),
          ...(context.input.onEvent ? { onEvent: context.input.onEvent } : {}),
        }),
        onDone: {
          target: "published",
          actions: [
            assign({ end: ({ event }) => event.output.end }),
            ({ context, event }) => say(context, `turn ${event.output.end.outcome}: ${event.output.end.message ?? ""}`),
          ],
        },
        onError: { target: "destroying", actions: assign({ error: ({ event }) => messageOf(event.error) }) },
      },
    },
    // Publishing, when a forge is named and the change was approved; otherwise skipped.
    published: {
      always: [{ guard: "publish", target: "pushing" }, { target: "destroying" }],
    },
    pushing: {
      invoke: {
        src: "effect",
        input: ({ context }) => ({
          client: context.input.client,
          workspace: context.workspace!,
          body: { id: PUBLISH_IDS.push, kind: "push", slot: publishSlot(context.input) },
          timeoutMs: context.input.effectTimeoutMs ?? 300_000,
        }),
        onDone: {
          target: "openingPullRequest",
          actions: [
            assign({ pushed: ({ event }) => event.output }),
            ({ context, event }) => say(context, `pushed: ${JSON.stringify(event.output)}`),
          ],
        },
        onError: { target: "destroying", actions: assign({ error: ({ event }) => messageOf(event.error) }) },
      },
    },
    openingPullRequest: {
      invoke: {
        src: "effect",
        input: ({ context }) => {
          const forge = context.input.forge!;
          return {
            client: context.input.client,
            workspace: context.workspace!,
            body: {
              id: PUBLISH_IDS.pullRequest,
              kind: "http",
              method: "POST",
              url: forge.pullsUrl,
              headers: {
                authorization: forge.authorization,
                "content-type": forge.contentType ?? "text/markdown",
              },
              body: {
                file: { slot: publishSlot(context.input), path: forge.bodyFile ?? "PR.md" },
              },
            },
            timeoutMs: context.input.effectTimeoutMs ?? 300_000,
          };
        },
        onDone: {
          target: "destroying",
          actions: [
            assign({ pullRequest: ({ event }) => event.output }),
            ({ context, event }) =>
              say(context, `pull request: ${(event.output as { status?: number } | undefined)?.status ?? "?"}`),
          ],
        },
        onError: { target: "destroying", actions: assign({ error: ({ event }) => messageOf(event.error) }) },
      },
    },
    destroying: {
      invoke: {
        src: "destroy",
        input: ({ context }) => ({ client: context.input.client, workspace: context.workspace! }),
        onDone: [
          { guard: "failed", target: "failed" },
          { target: "done", actions: { type: "log", params: "workspace destroyed" } },
        ],
        onError: { target: "failed", actions: assign({ error: ({ event }) => messageOf(event.error) }) },
      },
    },
    done: { type: "final" },
    failed: { type: "final" },
  },
  output: ({ context }) => ({
    workspace: context.workspace,
    iid: context.iid,
    pick: context.pick,
    answer: context.answer,
    outcome: context.end?.outcome,
    message: context.end?.message,
    ...(context.pushed ? { pushed: context.pushed } : {}),
    ...(context.pullRequest ? { pullRequest: context.pullRequest } : {}),
    error: context.error,
  }),
});

/** Runs the example against the Orchestrator the environment names. */
export async function main(env: NodeJS.ProcessEnv = process.env): Promise<ProposeOutput> {
  const url = env.JR2_ORCHESTRATOR_URL ?? "http://127.0.0.1:8090";
  const tokenFile = ".jr2/demo/orchestrator/api-tokens";
  const token =
    env.JR2_API_TOKEN ?? (existsSync(tokenFile) ? readFileSync(tokenFile, "utf8").split("\n")[0]!.trim() : undefined);
  if (!token) throw new Error(`set JR2_API_TOKEN (or run \`npm start\`, which writes ${tokenFile})`);
  const repo = env.JR2_REPO_URL;
  if (!repo) throw new Error("set JR2_REPO_URL to a repository inside the Orchestrator's fence");
  const caFile = env[ORCHESTRATOR_CLIENT_ENV.caFile];
  const ca = caFile ? readFileSync(caFile, "utf8") : undefined;
  const [secret, key] = (env.JR2_FORGE_SECRET ?? "").split("/");
  if (env.JR2_FORGE_PULLS_URL && (!secret || !key))
    throw new Error("set JR2_FORGE_SECRET to <secret>/<key>: the effect secret holding the forge API's Authorization");
  const actor = createActor(proposeMachine, {
    input: {
      client: new OrchestratorClient({ url, token, ...(ca ? { ca } : {}) }),
      workspace: {
        image: env.JR2_HARNESS_IMAGE ?? "ghcr.io/example/harness:1",
        branch: "example/propose",
        repos: [{ slot: "app", url: repo }],
      },
      message: env.JR2_FORGE_PULLS_URL
        ? "In /work/app/example/propose, add a line to README.md saying hello, write PR.md describing the change, " +
          "commit both, then call propose with a summary of the change."
        : "In /work/app, add a line to README.md saying hello, then call propose with a summary of the change.",
      ...(env.JR2_FORGE_PULLS_URL
        ? { forge: { pullsUrl: env.JR2_FORGE_PULLS_URL, authorization: { secret: secret!, key: key! } } }
        : {}),
    },
  });
  actor.subscribe((s) => console.log(`-> ${String(s.value)}`));
  actor.start();
  const output = await toPromise(actor);
  console.log(JSON.stringify(output, null, 2));
  return output;
}

if (require.main === module && /propose-machine\.[cm]?[jt]s$/.test(__filename)) {
  main().then(
    (out) => process.exit(out.error ? 1 : 0),
    (err) => {
      console.error(messageOf(err));
      process.exit(1);
    },
  );
}
