// `/v1/openapi.json`, generated from the very zod schemas the server validates with (api/orchestrator-schemas.ts), by
// zod 4's own JSON Schema writer (docs/decisions/0003). OpenAPI 3.1 takes JSON Schema 2020-12 as is.
import { z } from "zod";
import {
  AbortReceipt,
  AllowedBody,
  AllowedSet,
  AnswerBody,
  AnswerReceipt,
  Created,
  CreateWorkspaceBody,
  EgressList,
  EgressLog,
  ErrorBody,
  PickList,
  SubmitTurnBody,
  TurnSubmitted,
  WorkspaceEvent,
  WorkspaceList,
  WorkspaceView,
} from "../../api/orchestrator-schemas";
import { Admission, Allowed, Delivery, PickBody, PickReceipt, StreamEvent } from "../../api/agent-protocol";
import { PATHS, paramsOf, type Param, type RouteId } from "../../api/orchestrator-routes";

type Json = Record<string, unknown>;

/** A component: request bodies as a client writes them (defaults optional), answers as written. */
function schemaOf(schema: z.ZodType, io: "input" | "output"): Json {
  const json = z.toJSONSchema(schema, { target: "draft-2020-12", io, unrepresentable: "any" }) as Json;
  delete json.$schema;
  return json;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: string) => ({ content: { "application/json": { schema: ref(name) } } });
const answer = (description: string, name: string) => ({ description, ...json(name) });
const error = (description: string) => answer(description, "Error");

/** Each path parameter the route table names, as the document states it. */
const PARAMS: Record<Param, Json> = {
  name: { name: "name", in: "path", required: true, description: "The workspace's name.", schema: { type: "string" } },
  iid: {
    name: "iid",
    in: "path",
    required: true,
    description: "The conversation: `<workspace>.<rest>` (its workspace is the part before the first dot).",
    schema: { type: "string" },
  },
  deliveryId: {
    name: "deliveryId",
    in: "path",
    required: true,
    description: "The pick's delivery.",
    schema: { type: "string" },
  },
};

const COMMON_ERRORS = { "401": error("No valid bearer token.") };

/** A route's operation; `query`: its query parameters, listed after the path's own. `null`: a
 * route the document leaves out (HEAD of the health check). */
type Operation = Json & { query?: Json[] };

/** Every route of the table (api/orchestrator-routes.ts) documented: one missing does not compile. */
const OPERATIONS: Record<RouteId, Operation | null> = {
  createWorkspace: {
    summary: "Ask for a workspace",
    requestBody: { required: true, ...json("CreateWorkspaceBody") },
    responses: {
      "202": answer("Accepted: the workspace is being placed.", "Created"),
      "400": error("The body is invalid; the message names each field path."),
      "403": error(
        "A repo url is outside the fence: no git.credentials entry admits it (fence_refused); or effector.image " +
          "is not one the pod config lets hold push credentials (image_refused); or runtimeClassName is not one " +
          "the pod config lets a workspace choose (runtime_class_refused).",
      ),
      "413": error("The body exceeds 1 MiB."),
      "415": error("The body is not JSON."),
      ...COMMON_ERRORS,
    },
  },
  listWorkspaces: {
    summary: "List the workspaces",
    responses: { "200": answer("Every workspace.", "WorkspaceList"), ...COMMON_ERRORS },
  },
  getWorkspace: {
    summary: "A workspace",
    responses: {
      "200": answer("The workspace.", "WorkspaceView"),
      "404": error("No such workspace."),
      ...COMMON_ERRORS,
    },
  },
  deleteWorkspace: {
    summary: "Destroy a workspace (its Sandbox is deleted)",
    responses: {
      "202": answer("Accepted: the workspace is being destroyed.", "Created"),
      "404": error("No such workspace."),
      ...COMMON_ERRORS,
    },
  },
  workspaceEvents: {
    summary: "The workspace's events as Server-Sent Events",
    description:
      "First a `snapshot` event (a WorkspaceView), then one event per transition, wait and renewal, named " +
      "by its `type`, with a WorkspaceEvent as data; `: keep-alive` comments while idle. The stream ends " +
      "after a final state (lost, failed, destroyed).",
    responses: {
      "200": {
        description: "The event stream.",
        content: { "text/event-stream": { schema: ref("WorkspaceEvent") } },
      },
      "404": error("No such workspace."),
      ...COMMON_ERRORS,
    },
  },
  getEgress: {
    summary: "The workspace's egress list",
    description:
      "The hosts its Sandbox may reach through the egress point beside the installation's base list and its " +
      "Repos' remotes (decision 0051).",
    responses: {
      "200": answer("The list.", "EgressList"),
      "404": error("No such workspace, or no egress point (local mode)."),
      "409": error("The workspace has no Sandbox now (being placed, or ended)."),
      ...COMMON_ERRORS,
    },
  },
  setEgress: {
    summary: "Replace the workspace's egress list",
    description:
      "Takes effect within 2 s with no restart: the next connection is judged by the new list; connections " +
      "already open stay open.",
    requestBody: { required: true, ...json("EgressList") },
    responses: {
      "200": answer("The list, as now in force.", "EgressList"),
      "400": error("An entry is no host rule; the message names its index and the fix."),
      "404": error("No such workspace, or no egress point (local mode)."),
      "409": error("The workspace has no Sandbox now (being placed, or ended)."),
      ...COMMON_ERRORS,
    },
  },
  egressLog: {
    summary: "The workspace's latest connections, allowed and refused",
    responses: {
      "200": answer("The egress point's log for its Sandbox, oldest first.", "EgressLog"),
      "404": error("No such workspace, or no egress point (local mode)."),
      "502": error("The egress point could not be read."),
      ...COMMON_ERRORS,
    },
  },
  submitTurn: {
    summary: "Submit a turn to one of the workspace's Agents (a new conversation unless `iid` names one)",
    requestBody: { required: true, ...json("SubmitTurnBody") },
    responses: {
      "202": answer(
        "Admitted: `{iid, admission}`, the durable handle (kept in the cluster); read the turn from " +
          "`.../turns/{iid}/events`.",
        "TurnSubmitted",
      ),
      "400": error("The body is invalid."),
      "404": error("No such workspace."),
      "409": error("The workspace is not Ready, or another turn runs (one Agent at a time)."),
      "413": error("The Menu's tools' `parameters` pass 256 KiB as JSON together (the body itself: 1 MiB)."),
      ...COMMON_ERRORS,
    },
  },
  turnEvents: {
    summary:
      "The conversation's events as Server-Sent Events (`id` = the offset), from its last admission or " +
      "after `Last-Event-ID`, until that turn's `end` or until nothing more can come (no running turn, every event read)",
    responses: {
      "200": {
        description: "The event stream.",
        content: { "text/event-stream": { schema: ref("StreamEvent") } },
      },
      "400": error("`Last-Event-ID` is not an id of this stream, or is past its end: the message names it."),
      "404": error("No such workspace or conversation."),
      "429": error("The workspace has as many turn event streams open as it may (8): close one."),
      ...COMMON_ERRORS,
    },
  },
  abortTurn: {
    summary: "Abort the conversation's running turn (a deliberate terminal cancel)",
    responses: {
      "200": answer("`{aborted}`: false when no turn ran.", "AbortReceipt"),
      "404": error("No such workspace or conversation."),
      ...COMMON_ERRORS,
    },
  },
  setAllowed: {
    summary:
      "Change the conversation's Allowed picks (a Gate's answer, an outside event): its running turn " +
      "reads them at its next step boundary and is told the new list",
    requestBody: { required: true, ...json("AllowedBody") },
    responses: {
      "200": answer("`{iid, allowed}`: the Allowed picks now, sorted.", "AllowedSet"),
      "400": error("The body is invalid."),
      "404": error("No such workspace or conversation."),
      "409": error("The workspace is not Ready, or the conversation has no running turn."),
      ...COMMON_ERRORS,
    },
  },
  listPicks: {
    summary: "The picks the workspace's Agents wait on (outstanding), oldest first",
    responses: {
      "200": answer("The outstanding picks.", "PickList"),
      "404": error("No such workspace."),
      ...COMMON_ERRORS,
    },
  },
  answerPick: {
    summary: "Answer a pick: the text its Agent reads as the Menu tool's result",
    requestBody: { required: true, ...json("AnswerBody") },
    responses: {
      "200": answer("Answered; the Agent's delivery poll gets it.", "AnswerReceipt"),
      "400": error("The body is invalid."),
      "404": error("No such workspace, or no pick with this delivery."),
      "409": error("The pick is answered already, or its turn is over."),
      ...COMMON_ERRORS,
    },
  },
  takePick: {
    summary: "A Harness's pick (through its Custodian)",
    description:
      "Taken at once and kept in the cluster (a ConfigMap the Sandbox owns). The same (iid, submissionId, " +
      "callId) again answers the same delivery (200).",
    security: [{ sandbox: [] }],
    requestBody: { required: true, ...json("PickBody") },
    responses: {
      "202": answer("Taken: poll the delivery.", "PickReceipt"),
      "200": answer("The same pick again: its delivery.", "PickReceipt"),
      "400": error(
        "The body is invalid or nests more than 64 deep, or `args` do not match the Menu tool's `parameters` " +
          "(`invalid_args`, naming the place inside args).",
      ),
      "401": error("No valid Sandbox token for the conversation's workspace."),
      "403": error(
        "The pick is not on the turn's Menu (`not_on_menu`), or not among its Allowed picks now (`not_allowed`).",
      ),
      "404": error(
        "No such workspace, or no turn the Orchestrator admitted on the conversation (`unknown_conversation`).",
      ),
      "409": error(
        "Another pick of this turn is outstanding (`pick_outstanding`), the turn is over (`turn_over`) or not the " +
          "running one (`not_running`), or the callId named another pick (`call_reused`).",
      ),
      "413": error(
        "A field is past its bound (pick 64, submissionId and callId 128 characters, args 64 KiB, the body 96 KiB): " +
          "the message names it.",
      ),
      "429": error("The workspace's Sandbox calls are over their rate: retry after `retry-after` seconds."),
    },
  },
  readAllowed: {
    summary: "A Harness's read of its conversation's Allowed picks, at each step boundary (through its Custodian)",
    security: [{ sandbox: [] }],
    responses: {
      "200": answer("The running turn's Allowed picks now, and its submission.", "Allowed"),
      "401": error("No valid Sandbox token for the conversation's workspace."),
      "404": error("No such workspace, or no running turn on the conversation."),
      "429": error("The workspace's Sandbox calls are over their rate: retry after `retry-after` seconds."),
    },
  },
  readDelivery: {
    query: [
      {
        name: "wait",
        in: "query",
        required: false,
        description: "How long to hold while outstanding, in ms (at most 25000; default 0).",
        schema: { type: "integer", minimum: 0 },
      },
    ],
    summary: "A pick's delivery, long-polled (through the Custodian)",
    security: [{ sandbox: [] }],
    responses: {
      "200": answer("Answered, or still outstanding after the hold.", "Delivery"),
      "401": error("No valid Sandbox token for the conversation's workspace."),
      "404": error("No such workspace, or no such delivery in this conversation."),
      "429": error("The workspace's Sandbox calls are over their rate: retry after `retry-after` seconds."),
    },
  },
  healthz: {
    summary: "Liveness",
    security: [],
    responses: { "200": { description: "The Orchestrator serves." } },
  },
  healthzHead: null,
  metrics: {
    summary: "Prometheus metrics (an admin token's)",
    responses: {
      "200": { description: "The metrics, in Prometheus's text format." },
      "403": error("A tenant's token: the metrics are an admin's."),
      ...COMMON_ERRORS,
    },
  },
  openapi: {
    summary: "This document",
    responses: { "200": { description: "The OpenAPI document." }, ...COMMON_ERRORS },
  },
};

/** The document's paths, from the route table: each template's parameters, then its operations. */
function pathsOf(): Json {
  const out: Json = {};
  for (const { template, routes } of PATHS) {
    const parameters: Json[] = paramsOf(template).map((p) => PARAMS[p]);
    const item: Json = {};
    for (const { id, method } of routes) {
      const op = OPERATIONS[id];
      if (!op) continue;
      const { query, ...operation } = op;
      parameters.push(...(query ?? []));
      item[method.toLowerCase()] = operation;
    }
    out[template] = parameters.length ? { parameters, ...item } : item;
  }
  return out;
}

export function openApiDocument(): Json {
  return {
    openapi: "3.1.0",
    info: {
      title: "jr2 Orchestrator API",
      version: "1",
      description:
        "Workspaces for Machines: a Sandbox placed, provisioned and attached, kept alive by its lease, and " +
        "reported lost when it dies. Every error is `{error: {code, message}}`.",
    },
    security: [{ bearer: [] }],
    paths: pathsOf(),
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "An API token (JR2_API_TOKENS_FILE): an admin's sees every workspace, a tenant's only the workspaces " +
            "it created (another tenant's answer 404).",
        },
        sandbox: {
          type: "http",
          scheme: "bearer",
          description: "The Sandbox token of the conversation's workspace (its Custodian adds it).",
        },
      },
      schemas: {
        CreateWorkspaceBody: schemaOf(CreateWorkspaceBody, "input"),
        Created: schemaOf(Created, "output"),
        WorkspaceView: schemaOf(WorkspaceView, "output"),
        WorkspaceList: schemaOf(WorkspaceList, "output"),
        EgressList: schemaOf(EgressList, "output"),
        EgressLog: schemaOf(EgressLog, "output"),
        WorkspaceEvent: schemaOf(WorkspaceEvent, "output"),
        Error: schemaOf(ErrorBody, "output"),
        PickList: schemaOf(PickList, "output"),
        AnswerBody: schemaOf(AnswerBody, "input"),
        AllowedBody: schemaOf(AllowedBody, "input"),
        Allowed: schemaOf(Allowed, "output"),
        AnswerReceipt: schemaOf(AnswerReceipt, "output"),
        PickBody: schemaOf(PickBody, "input"),
        PickReceipt: schemaOf(PickReceipt, "output"),
        Delivery: schemaOf(Delivery, "output"),
        SubmitTurnBody: schemaOf(SubmitTurnBody, "input"),
        TurnSubmitted: schemaOf(TurnSubmitted, "output"),
        AbortReceipt: schemaOf(AbortReceipt, "output"),
        AllowedSet: schemaOf(AllowedSet, "output"),
        Admission: schemaOf(Admission, "output"),
        StreamEvent: schemaOf(StreamEvent, "output"),
      },
    },
  };
}
