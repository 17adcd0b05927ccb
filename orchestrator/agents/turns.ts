// A Machine's turns on a workspace's Agents (decision 0025): submit a turn (the
// Harness's admission, answered at once), read its events from the Harness's stream (resumable
// from an offset), abort it. The admission is the durable handle (decision 0025): each
// conversation's `iid → {agent, admission}` is kept in the cluster, in the ConfigMap
// `<workspace>-turns` owned by the Sandbox, before the submit answers, so an Orchestrator restarted
// mid-turn finds the stream again from its ledger and never admits the turn twice.
import { randomBytes } from "node:crypto";
import { z } from "zod";
import {
  Admission,
  ConversationId,
  AgentName,
  StreamPage,
  TurnBody,
  agentPath,
  abortPath,
} from "../../api/agent-protocol";
import { ApiError } from "../../lib/api-error";
import { applyRequest, kubeRequest } from "../../lib/kube";
import { ORCHESTRATOR_FIELD_MANAGER, SANDBOX_LABEL } from "../../api/wire";
import { sandboxOwnerReference } from "../../api/crd";
import { HttpError } from "../schemas";
import type { Picks } from "./pick-store";
import type { SandboxWatch } from "../workspaces/sandbox-watch";

/** What a Machine sends: a turn for one Agent, on a conversation (`iid`; a new one when absent). */
export const SubmitTurnBody = TurnBody.extend({
  agent: AgentName,
  iid: ConversationId.optional(),
});
export type SubmitTurnBody = z.infer<typeof SubmitTurnBody>;

const Entry = z.object({ agent: z.string(), admission: Admission });
const Ledger = z.record(z.string(), Entry);
type Ledger = z.infer<typeof Ledger>;

export const turnsConfigMap = (workspace: string) => `${workspace}-turns`;
const LEDGER_KEY = "turns.json";
const enc = encodeURIComponent;

/** The Harness calls this needs (kube-gateway.ts `harness`). */
export type HarnessCaller = {
  harness(
    name: string,
    method: "GET" | "POST",
    path: string,
    body?: unknown,
    signal?: AbortSignal,
  ): Promise<{ status: number; body: unknown }>;
};

export class Turns {
  /** The ledgers read or written by this process, by workspace. */
  readonly #ledgers = new Map<string, Ledger>();

  constructor(
    readonly opts: {
      namespace: string;
      gateway: HarnessCaller;
      watch: SandboxWatch;
      /** Where a conversation's Allowed picks are kept for the Harness to read (pick-store.ts). */
      allowed?: Pick<Picks, "setAllowed">;
    },
  ) {}

  /** Admits the turn on the workspace's Harness and records its admission before answering. */
  async submit(workspace: string, body: SubmitTurnBody): Promise<{ iid: string; admission: Admission }> {
    this.#ready(workspace);
    // A conversation belongs to its workspace by name (pick-ledger.ts workspaceOfIid): `<workspace>.<rest>`.
    const iid = body.iid ?? `${workspace}.c-${randomBytes(6).toString("hex")}`;
    if (!iid.startsWith(`${workspace}.`))
      throw new HttpError(400, "invalid", `iid: must begin with "${workspace}." (the workspace's name and a dot)`);
    const submissionId = body.submissionId ?? `s-${randomBytes(6).toString("hex")}`;
    const ledger = await this.#ledger(workspace);
    const held = ledger[iid];
    if (held && held.agent !== body.agent)
      throw new HttpError(409, "conflict", `conversation ${iid} belongs to Agent "${held.agent}", not "${body.agent}"`);
    const { agent, iid: _iid, ...turn } = body;
    // Kept before the admission: the Harness reads them back at the turn's first step boundary.
    await this.opts.allowed?.setAllowed(workspace, iid, turn.allowed);
    const res = await this.opts.gateway.harness(workspace, "POST", agentPath(agent, iid), { ...turn, submissionId });
    if (res.status !== 202) throw harnessRefusal(workspace, res);
    const admission = Admission.parse(res.body);
    ledger[iid] = { agent, admission };
    await this.#write(workspace, ledger);
    return { iid, admission };
  }

  /** The conversation's events from `offset` (absent: its last admission's), one long-poll page. */
  async page(workspace: string, iid: string, offset: number | undefined, waitMs: number, signal?: AbortSignal) {
    this.#ready(workspace);
    const entry = (await this.#ledger(workspace))[iid];
    if (!entry) throw new HttpError(404, "not_found", `workspace ${workspace} has no conversation ${iid}`);
    const from = offset ?? entry.admission.offset;
    const res = await this.opts.gateway.harness(
      workspace,
      "GET",
      `${entry.admission.streamUrl}?offset=${from}&wait=${waitMs}`,
      undefined,
      signal,
    );
    if (res.status !== 200) throw harnessRefusal(workspace, res);
    return { page: StreamPage.parse(res.body), submissionId: entry.admission.submissionId };
  }

  /** A deliberate terminal cancel of the conversation's running turn. */
  async abort(workspace: string, iid: string): Promise<{ aborted: boolean }> {
    this.#ready(workspace);
    const entry = (await this.#ledger(workspace))[iid];
    if (!entry) throw new HttpError(404, "not_found", `workspace ${workspace} has no conversation ${iid}`);
    const res = await this.opts.gateway.harness(workspace, "POST", abortPath(entry.agent, iid));
    if (res.status !== 200) throw harnessRefusal(workspace, res);
    return res.body as { aborted: boolean };
  }

  /** The conversation's Allowed picks changed by the Machine (a Gate's answer, an outside event):
   * its running turn reads them at its next step boundary (decision 0025's restated Turn part). */
  async setAllowed(workspace: string, iid: string, allowed: string[]): Promise<{ iid: string; allowed: string[] }> {
    this.#ready(workspace);
    if (!(await this.#ledger(workspace))[iid])
      throw new HttpError(404, "not_found", `workspace ${workspace} has no conversation ${iid}`);
    if (!this.opts.allowed) throw new HttpError(404, "not_found", "Allowed picks are not served here");
    return { iid, allowed: await this.opts.allowed.setAllowed(workspace, iid, allowed) };
  }

  // -------------------------------------------------------------------------------------------

  #ready(workspace: string) {
    const sandbox = this.opts.watch.get(workspace);
    if (!sandbox) throw new HttpError(404, "not_found", `no workspace ${workspace}`);
    if (sandbox.status?.phase !== "Ready")
      throw new HttpError(
        409,
        "not_ready",
        `workspace ${workspace} is ${sandbox.status?.phase ?? "Pending"}, not Ready`,
      );
  }

  async #ledger(workspace: string): Promise<Ledger> {
    const held = this.#ledgers.get(workspace);
    if (held) return held;
    let ledger: Ledger = {};
    try {
      const cm = await kubeRequest<{ data?: Record<string, string> }>("GET", this.#path(workspace));
      const parsed = Ledger.safeParse(JSON.parse(cm.data?.[LEDGER_KEY] ?? "{}"));
      if (parsed.success) ledger = parsed.data;
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    }
    this.#ledgers.set(workspace, ledger);
    return ledger;
  }

  /** Server-side apply of the whole ledger, owned by the Sandbox: it goes when the workspace does. */
  async #write(workspace: string, ledger: Ledger) {
    const uid = this.opts.watch.get(workspace)?.metadata?.uid;
    const body = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: {
        name: turnsConfigMap(workspace),
        namespace: this.opts.namespace,
        labels: { [SANDBOX_LABEL]: workspace },
        ...(uid ? { ownerReferences: [sandboxOwnerReference(workspace, uid)] } : {}),
      },
      data: { [LEDGER_KEY]: JSON.stringify(ledger) },
    };
    await applyRequest(this.#path(workspace), body, ORCHESTRATOR_FIELD_MANAGER);
  }

  #path(workspace: string) {
    return `/api/v1/namespaces/${enc(this.opts.namespace)}/configmaps/${enc(turnsConfigMap(workspace))}`;
  }
}

/** A Harness answer that is not the one asked for, with its own words and status. */
function harnessRefusal(workspace: string, res: { status: number; body: unknown }): HttpError {
  const said = (res.body as { error?: { code?: string; message?: string } } | undefined)?.error;
  const status = res.status === 409 || res.status === 404 || res.status === 400 ? res.status : 502;
  return new HttpError(
    status,
    said?.code ?? "harness_error",
    `workspace ${workspace}'s Harness answered ${res.status}: ${said?.message ?? JSON.stringify(res.body).slice(0, 500)}`,
  );
}
