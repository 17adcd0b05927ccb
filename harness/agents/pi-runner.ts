// The turn loop on pi (decision 0024): one pi Agent per turn, rebuilt from the conversation's
// history, with the working tools (read, write, edit, bash inside /work) and the turn's Menu as
// tools. The turn's message is followed by its Turn part (the Allowed picks, turn-part.ts). A Menu
// tool call is a pick: allowed ones go to the Orchestrator through the Custodian and wait for the
// Machine's answer (picks/client.ts); one the turn does not allow is answered so, and sent nowhere.
// At each step boundary (pi's turn_end, when the loop goes on) the Allowed picks are read again
// (picks/allowed.ts) and, when they changed, the Turn part is restated before the next model call
// (decision 0025). The model is reached through the Custodian's provider route with a Stand-in
// as its key (decision 0021): the Harness never holds the key.
import type { AgentMessage, AgentTool } from "@earendil-works/pi-agent-core";
import type { AssistantMessage } from "@earendil-works/pi-ai";
import { Type } from "typebox";
import type { MenuTool } from "../../api/agent-protocol";
import { readAllowed } from "../picks/allowed";
import { sendPick } from "../picks/pick-client";
import type { TurnInput, TurnRunner } from "./host";
import { agentModel, piLib, type ModelEndpoint } from "./model";
import { restatedTurnPart, sameAllowed, turnPart } from "./turn-part";
import { workingTools } from "./tools";

export type PiRunnerOptions = {
  endpoint: ModelEndpoint;
  /** The working tools' root (/work). */
  workRoot: string;
  /** Where picks go (JR2_CUSTODIAN_URL); absent, a pick is answered as not deliverable. */
  custodianUrl?: string;
  systemPrompt?: string;
  /** How hard a reasoning model thinks (pi's level); default off. */
  thinking?: ThinkingLevel;
};

export type ThinkingLevel = "off" | "minimal" | "low" | "medium" | "high";

const SYSTEM_PROMPT =
  "You are a coding agent working in /work, a checkout of the repositories you were given. Use the tools to " +
  "read, change and test the code. When the work of this turn is done, call the tool of the decision you make.";

export function piRunner(o: PiRunnerOptions): TurnRunner {
  // The endpoint is the Harness's for its life: its Models collection and catalog entry are built
  // with the first turn, not again on each.
  let built: ReturnType<typeof agentModel> | undefined;
  return async (turn) => {
    const { Agent } = await piLib();
    const { model, streamFn, getApiKey } = await (built ??= agentModel(o.endpoint));
    // The picks allowed now: the turn's, then each step boundary's read.
    const allowed = { now: turn.body.allowed };
    const menuNames = new Set(turn.body.menu.map((m) => m.name));
    const tools: AgentTool[] = [
      ...workingTools({ root: o.workRoot }),
      ...turn.body.menu.map((m) => menuTool(m, turn, allowed, o)),
    ];
    const agent = new Agent({
      initialState: {
        systemPrompt: o.systemPrompt ?? SYSTEM_PROMPT,
        model,
        thinkingLevel: o.thinking ?? "off",
        tools,
        messages: turn.history as AgentMessage[],
      },
      streamFn,
      getApiKey,
      // The provider's prompt cache keyed by the conversation (OpenAI's prompt_cache_key).
      sessionId: turn.conversation,
      // No attribution headers: the provider sees the Custodian's request, not an app's.
      identity: { attribution: null },
      // A Menu tool the turn does not allow now is refused before it runs: sent nowhere, and the
      // model is told which picks it may make (decision 0025).
      beforeToolCall: async ({ toolCall }) => {
        if (!menuNames.has(toolCall.name) || allowed.now.includes(toolCall.name)) return undefined;
        return { block: true, reason: notAllowed(toolCall.name, allowed.now) };
      },
    });
    let answering = { chars: 0, told: 0 };
    const unsubscribe = agent.subscribe(async (event) => {
      // The model's answer as it streams, told at most once a second (progress is lossy).
      if (event.type === "message_start" && isAssistant(event.message)) answering = { chars: 0, told: Date.now() };
      if (event.type === "message_update" && event.assistantMessageEvent.type === "text_delta") {
        answering.chars += event.assistantMessageEvent.delta.length;
        if (Date.now() - answering.told >= 1_000) {
          answering.told = Date.now();
          turn.emit({ kind: "working", note: `the model is answering (${answering.chars} characters so far)` });
        }
      }
      // A step boundary where the loop goes on (tool results to answer): pi awaits this listener,
      // and drains what is steered here before its next model call.
      if (event.type === "turn_end" && event.toolResults.length > 0 && o.custodianUrl && turn.body.menu.length > 0) {
        const read = await readAllowed({
          custodianUrl: o.custodianUrl,
          iid: turn.conversation,
          submissionId: turn.submissionId,
          signal: turn.signal,
        });
        if (read.ok && !sameAllowed(read.allowed, allowed.now)) {
          allowed.now = read.allowed;
          agent.steer(userText(restatedTurnPart(turn.body.menu, allowed.now)));
          turn.emit({ kind: "allowed", allowed: allowed.now });
        }
      } else if (event.type === "message_end" && isAssistant(event.message)) {
        const text = textOf(event.message);
        if (text) turn.emit({ kind: "text", text });
        // What the model call cost, as the provider counted it (tokens, not money).
        const u = event.message.usage;
        if (u && (u.input > 0 || u.output > 0))
          turn.emit({
            kind: "usage",
            model: event.message.model || model.id,
            input: u.input,
            output: u.output,
            cacheRead: u.cacheRead,
            cacheWrite: u.cacheWrite,
          });
      } else if (event.type === "tool_execution_start") {
        turn.emit({ kind: "tool", tool: event.toolName, callId: event.toolCallId, args: event.args });
      } else if (event.type === "tool_execution_end") {
        turn.emit({
          kind: "toolResult",
          tool: event.toolName,
          callId: event.toolCallId,
          isError: event.isError,
          text: resultText(event.result).slice(0, 4000),
        });
      }
    });
    const onAbort = () => agent.abort();
    turn.signal.addEventListener("abort", onAbort, { once: true });
    try {
      const part = turnPart(turn.body.menu, allowed.now);
      const text = part ? `${turn.body.message}\n\n${part}` : turn.body.message;
      await agent.prompt(
        text,
        (turn.body.images ?? []).map((i) => ({ type: "image", data: i.data, mimeType: i.mediaType })),
      );
    } finally {
      turn.signal.removeEventListener("abort", onAbort);
      unsubscribe();
    }
    const messages = agent.state.messages;
    const last = [...messages].reverse().find(isAssistant);
    // pi ends a turn whose model call failed with an error message rather than a throw.
    if (!turn.signal.aborted && last?.stopReason === "error")
      throw new Error(`the model call failed: ${last.errorMessage ?? "no reason given"}`);
    return { ...(last ? { message: textOf(last) } : {}), history: messages };
  };
}

/** A Menu entry as a tool: its pick, sent when the turn allows it. */
function menuTool(m: MenuTool, turn: TurnInput, allowed: { now: string[] }, o: PiRunnerOptions): AgentTool {
  return {
    name: m.name,
    label: m.name,
    description: m.description,
    parameters: Type.Unsafe(m.parameters ?? { type: "object", properties: {} }),
    executionMode: "sequential",
    execute: async (callId, args, signal) => {
      // beforeToolCall refused it already when not allowed; checked again at the point of sending.
      if (!allowed.now.includes(m.name)) throw new Error(notAllowed(m.name, allowed.now));
      if (!o.custodianUrl) throw new Error(`\`${m.name}\` cannot be sent: this Harness has no Custodian`);
      const both = signal ? AbortSignal.any([signal, turn.signal]) : turn.signal;
      const outcome = await sendPick({
        custodianUrl: o.custodianUrl,
        iid: turn.conversation,
        pick: m.name,
        args,
        submissionId: turn.submissionId,
        callId,
        signal: both,
        onOutstanding: (deliveryId) => turn.emit({ kind: "pick", pick: m.name, deliveryId }),
      });
      // A failure the model must not read as a failed pick is the call's answer (decision 0025).
      if (outcome.isError) throw new Error(outcome.text);
      return { content: [{ type: "text", text: outcome.text }], details: { answered: outcome.answered } };
    },
  };
}

const notAllowed = (pick: string, allowed: readonly string[]) =>
  `\`${pick}\` is not allowed in this turn; the allowed picks are: ${allowed.join(", ") || "none"}`;

const userText = (text: string): AgentMessage => ({
  role: "user",
  content: [{ type: "text", text }],
  timestamp: Date.now(),
});

const isAssistant = (m: AgentMessage): m is AssistantMessage =>
  typeof m === "object" && m !== null && (m as { role?: string }).role === "assistant";

const textOf = (m: AssistantMessage) =>
  m.content
    .filter((c): c is { type: "text"; text: string } => c.type === "text")
    .map((c) => c.text)
    .join("");

function resultText(result: unknown): string {
  const content = (result as { content?: Array<{ type: string; text?: string }> } | undefined)?.content ?? [];
  return content.map((c) => (c.type === "text" ? (c.text ?? "") : `[${c.type}]`)).join("");
}
