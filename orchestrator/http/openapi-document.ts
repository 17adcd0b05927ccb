// `/v1/openapi.json`, generated from the very zod schemas the server validates with (api/orchestrator-schemas.ts), by
// zod 4's own JSON Schema writer (docs/decisions/0003). OpenAPI 3.1 takes JSON Schema 2020-12 as is. Each operation's
// operationId and tags are its route's in the table (api/orchestrator-routes.ts); the Harness's routes (a Sandbox
// token's) make a document of their own, never served, and the public one leaves them out (decision 0077).
import { z } from "zod";
import {
  AbortReceipt,
  AllowedBody,
  AllowedSet,
  AnswerBody,
  AnswerReceipt,
  Created,
  CreateWorkspaceBody,
  Deleted,
  EffectBody,
  EffectList,
  EffectRecord,
  EgressList,
  EgressLog,
  ErrorBody,
  Health,
  PickList,
  SubmitTurnBody,
  TurnSubmitted,
  WorkspaceEvent,
  WorkspaceList,
  WorkspaceView,
} from "../../api/orchestrator-schemas";
import { Admission, Allowed, Delivery, PickBody, PickReceipt, StreamEvent } from "../../api/agent-protocol";
import { PATHS, ROUTES, TAGS, isInternal, paramsOf, type Param, type RouteId } from "../../api/orchestrator-routes";
import { ERRORS, ERROR_CODES, MACHINE_ERROR_CODES, type ErrorCode } from "../../api/orchestrator-errors";

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
/** An answer that names where its object lives (`Location`), as the server sends it. */
const located = (description: string, name: string, where: string) => ({
  ...answer(description, name),
  headers: { Location: { description: where, schema: { type: "string" } } },
});
/** An error answer: the catalogue's codes it may carry (api/orchestrator-errors.ts), each of whose
 * status is this answer's (test/unit/api-errors.test.ts checks), and what they say here. */
const error = (codes: ErrorCode[], description: string) => ({
  ...answer(description, "Error"),
  "x-error-codes": codes,
});

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
  effectId: {
    name: "effectId",
    in: "path",
    required: true,
    description: "The Effect's id, the Machine's.",
    schema: { type: "string" },
  },
};

const INTERNAL = "The Orchestrator failed; the details are in its log.";
const EFFECT_PATH = "The Effect's path (`getEffect`).";

/** What any route behind a token may answer. */
const COMMON_ERRORS = {
  "401": error(["unauthorized"], "No valid bearer token."),
  "500": error(["internal"], INTERNAL),
};

/** What a route reading or writing a workspace's turns or picks ledger may answer besides. */
const LEDGER_ERRORS = {
  "500": error(["internal", "ledger_unreadable"], `${INTERNAL} Or the workspace's ledger cannot be read.`),
};

/** What a route with a JSON body may answer besides. */
const BODY_ERRORS = {
  "413": error(["too_large"], "The body exceeds 1 MiB."),
  "415": error(["unsupported_media_type"], "The body is not JSON."),
};

/** What a route that calls the workspace's Harness may answer besides. */
const HARNESS_ERRORS = {
  "502": error(
    ["harness_misbehaved", "harness_error"],
    "The workspace's Harness broke a bound (`harness_misbehaved`) or answered an error of its own (`harness_error`).",
  ),
};

/** A Sandbox's call over its workspace's rate: the server says when to call again (api-server.ts). */
const RATE_LIMITED = {
  ...error(["rate_limited"], "The workspace's Sandbox calls are over their rate: retry after `Retry-After` seconds."),
  headers: {
    "Retry-After": {
      description: "Whole seconds to wait before the next call.",
      required: true,
      schema: { type: "integer", minimum: 0 },
    },
  },
};

/** A call about one workspace while its shard moves between replicas (decision 0079): no replica
 * owns it for a moment, and the server says when to call again. */
const MOVING = {
  ...error(
    ["unavailable"],
    "The workspace is moving between Orchestrator replicas: retry after `Retry-After` seconds.",
  ),
  headers: {
    "Retry-After": {
      description: "Whole seconds to wait before calling again.",
      required: true,
      schema: { type: "integer", minimum: 0 },
    },
  },
};

/** The routes a replica forwards to the workspace's owner, so that may answer MOVING: each about one
 * workspace (its name, or a Harness's conversation), and the create (a replica holding no shard). */
const movable = (id: RouteId, template: string) =>
  id === "createWorkspace" || template.includes("{name}") || ROUTES[id].auth === "sandbox";

/** A route's operation; `query`: its query and header parameters, listed after the path's own. */
type Operation = Json & { query?: Json[] };

/** Every route of the table (api/orchestrator-routes.ts) documented: one missing does not compile. */
const OPERATIONS: Record<RouteId, Operation> = {
  createWorkspace: {
    summary: "Ask for a workspace",
    requestBody: { required: true, ...json("CreateWorkspaceBody") },
    responses: {
      "202": located("Accepted: the workspace is being placed.", "Created", "The workspace's path (`getWorkspace`)."),
      "400": error(["invalid", "invalid_size"], "The body is invalid; the message names each field path."),
      "403": error(
        ["fence_refused", "image_refused", "runtime_class_refused"],
        "A repo url is outside the fence: no git.credentials entry admits it (fence_refused); or effector.image " +
          "is not one the pod config lets hold push credentials (image_refused); or runtimeClassName is not one " +
          "the pod config lets a workspace choose (runtime_class_refused).",
      ),
      "413": error(["too_large"], "The body exceeds 1 MiB."),
      "415": error(["unsupported_media_type"], "The body is not JSON."),
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
      "404": error(["not_found"], "No such workspace."),
      ...COMMON_ERRORS,
    },
  },
  deleteWorkspace: {
    summary: "Destroy a workspace (its Sandbox is deleted)",
    responses: {
      "202": answer("Accepted: the workspace is being destroyed.", "Deleted"),
      "404": error(["not_found"], "No such workspace."),
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
        description:
          "The event stream: each event's `data` is one JSON value, the `snapshot` a WorkspaceView, every other " +
          "a WorkspaceEvent (its `type` is the event's name).",
        content: {
          "text/event-stream": { schema: { oneOf: [ref("WorkspaceView"), ref("WorkspaceEvent")] } },
        },
      },
      "404": error(["not_found"], "No such workspace."),
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
      "404": error(["not_found"], "No such workspace, or no egress point (local mode)."),
      "409": error(["no_sandbox"], "The workspace has no Sandbox now (being placed, or ended)."),
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
      ...BODY_ERRORS,
      "200": answer("The list, as now in force.", "EgressList"),
      "400": error(["invalid"], "An entry is no host rule; the message names its index and the fix."),
      "404": error(["not_found"], "No such workspace, or no egress point (local mode)."),
      "409": error(["no_sandbox"], "The workspace has no Sandbox now (being placed, or ended)."),
      ...COMMON_ERRORS,
    },
  },
  egressLog: {
    summary: "The workspace's latest connections, allowed and refused",
    responses: {
      "200": answer("The egress point's log for its Sandbox, oldest first.", "EgressLog"),
      "404": error(["not_found"], "No such workspace, or no egress point (local mode)."),
      "502": error(["egress_unreadable"], "The egress point could not be read."),
      ...COMMON_ERRORS,
    },
  },
  submitTurn: {
    summary: "Submit a turn to one of the workspace's Agents (a new conversation unless `iid` names one)",
    requestBody: { required: true, ...json("SubmitTurnBody") },
    responses: {
      ...BODY_ERRORS,
      "202": answer(
        "Admitted: `{iid, admission}`, the durable handle (kept in the cluster); read the turn from " +
          "`.../turns/{iid}/events`.",
        "TurnSubmitted",
      ),
      "400": error(["invalid"], "The body is invalid."),
      "404": error(["not_found"], "No such workspace."),
      "409": error(
        ["not_ready", "busy", "conflict"],
        "The workspace is not Ready (`not_ready`), another turn runs (`busy`: one Agent at a time), or the " +
          "conversation is another Agent's (`conflict`).",
      ),
      "413": error(
        ["too_large"],
        "The Menu's tools' `parameters` pass 256 KiB as JSON together (the body itself: 1 MiB).",
      ),
      ...COMMON_ERRORS,
      ...LEDGER_ERRORS,
      ...HARNESS_ERRORS,
    },
  },
  turnEvents: {
    query: [
      {
        name: "Last-Event-ID",
        in: "header",
        required: false,
        description:
          "The `id` (an offset) of the last event read: the stream resumes after it. Absent, it starts at the " +
          "conversation's last admission.",
        schema: { type: "string", pattern: "^[0-9]{1,15}$" },
      },
    ],
    summary:
      "The conversation's events as Server-Sent Events (`id` = the offset), from its last admission or " +
      "after `Last-Event-ID`, until that turn's `end` or until nothing more can come (no running turn, every event read)",
    responses: {
      "200": {
        description:
          "The event stream: each event's `data` is a StreamEvent (its `kind` is the event's name, its `offset` " +
          "the SSE id); a failure after the stream began is an `error` event, `{message}`: resume with " +
          "`Last-Event-ID`.",
        content: { "text/event-stream": { schema: ref("StreamEvent") } },
      },
      "400": error(
        ["invalid"],
        "`Last-Event-ID` is not an id of this stream, or is past its end: the message names it.",
      ),
      "404": error(["not_found"], "No such workspace or conversation."),
      "409": error(["not_ready"], "The workspace is not Ready."),
      "429": error(["too_many_streams"], "The workspace has as many turn event streams open as it may (8): close one."),
      ...COMMON_ERRORS,
      ...LEDGER_ERRORS,
      ...HARNESS_ERRORS,
    },
  },
  abortTurn: {
    summary: "Abort the conversation's running turn (a deliberate terminal cancel)",
    responses: {
      "200": answer("`{aborted}`: false when no turn ran.", "AbortReceipt"),
      "404": error(["not_found"], "No such workspace or conversation."),
      "409": error(["not_ready"], "The workspace is not Ready."),
      ...COMMON_ERRORS,
      ...LEDGER_ERRORS,
      ...HARNESS_ERRORS,
    },
  },
  setAllowed: {
    summary:
      "Change the conversation's Allowed picks (a Gate's answer, an outside event): its running turn " +
      "reads them at its next step boundary and is told the new list",
    requestBody: { required: true, ...json("AllowedBody") },
    responses: {
      ...BODY_ERRORS,
      "200": answer("`{iid, allowed}`: the Allowed picks now, sorted.", "AllowedSet"),
      "400": error(["invalid"], "The body is invalid."),
      "404": error(["not_found"], "No such workspace or conversation."),
      "409": error(["not_ready", "turn_over"], "The workspace is not Ready, or the conversation has no running turn."),
      ...COMMON_ERRORS,
      ...LEDGER_ERRORS,
    },
  },
  listPicks: {
    summary: "The picks the workspace's Agents wait on (outstanding), oldest first",
    responses: {
      "200": answer("The outstanding picks.", "PickList"),
      "404": error(["not_found"], "No such workspace."),
      ...COMMON_ERRORS,
      ...LEDGER_ERRORS,
    },
  },
  answerPick: {
    summary: "Answer a pick: the text its Agent reads as the Menu tool's result",
    requestBody: { required: true, ...json("AnswerBody") },
    responses: {
      ...BODY_ERRORS,
      "200": answer("Answered; the Agent's delivery poll gets it.", "AnswerReceipt"),
      "400": error(["invalid"], "The body is invalid."),
      "404": error(["not_found"], "No such workspace, or no pick with this delivery."),
      "409": error(["already_answered", "turn_over"], "The pick is answered already, or its turn is over."),
      ...COMMON_ERRORS,
      ...LEDGER_ERRORS,
    },
  },
  createEffect: {
    summary:
      "Ask the workspace's Effector for an Effect: a push, an http request or a credentialed command, run at most once",
    description:
      "Recorded before it runs (the ledger `<workspace>-effects`, kept in the cluster), then run by the workspace's " +
      "Effector after every Effect sent before it, one at a time. Sending the same `id` again with the same body " +
      "answers its record (200) and runs nothing; another body under that id is `effect_conflict`. An Effect whose " +
      "answer was lost (an Orchestrator restart, an Effector restart) settles `unknown` and never runs again, unless " +
      "`idempotent`, when it is sent again. Secrets are named by reference (`{secret, key}`), never sent.",
    requestBody: { required: true, ...json("EffectBody") },
    responses: {
      ...BODY_ERRORS,
      "200": located("The same Effect again: its record now.", "EffectRecord", EFFECT_PATH),
      "202": located("Recorded `queued`: GET it (with `?wait=`) until it settles.", "EffectRecord", EFFECT_PATH),
      "400": error(["invalid"], "The body is invalid; the message names each field path."),
      "403": error(
        ["effect_refused"],
        "The Effect asks for what the workspace may not do: the message names the field and the fix.",
      ),
      "404": error(["not_found"], "No such workspace."),
      "409": error(
        ["effect_conflict", "effector_absent", "not_ready"],
        "The id names another Effect (`effect_conflict`), the workspace has no Effector (`effector_absent`), or " +
          "it is not Ready (`not_ready`).",
      ),
      "413": error(["too_large"], "The Effect passes 64 KiB as JSON (the body itself: 1 MiB)."),
      "429": error(
        ["too_many_effects"],
        "The workspace has as many Effects waiting as it may: wait for some to settle.",
      ),
      ...COMMON_ERRORS,
      ...LEDGER_ERRORS,
    },
  },
  listEffects: {
    summary: "The workspace's Effects, in the order the Machine sent them",
    responses: {
      "200": answer("Every Effect its ledger keeps (the oldest settled ones go first past its bound).", "EffectList"),
      "404": error(["not_found"], "No such workspace."),
      ...COMMON_ERRORS,
      ...LEDGER_ERRORS,
    },
  },
  getEffect: {
    query: [
      {
        name: "wait",
        in: "query",
        required: false,
        description: "How long to hold while the Effect has not settled, in seconds (at most 60; default 0).",
        schema: { type: "integer", minimum: 0 },
      },
    ],
    summary: "One Effect: its state, and once settled its result or error (long-polled with `?wait=`)",
    responses: {
      "200": answer("The Effect's record: settled, or still waiting after the hold.", "EffectRecord"),
      "400": error(["invalid"], "`wait` is not a whole number of seconds."),
      "404": error(["not_found"], "No such workspace, or no Effect with this id."),
      ...COMMON_ERRORS,
      ...LEDGER_ERRORS,
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
      ...BODY_ERRORS,
      "202": answer("Taken: poll the delivery.", "PickReceipt"),
      "200": answer("The same pick again: its delivery.", "PickReceipt"),
      "400": error(
        ["invalid", "invalid_args"],
        "The body is invalid or nests more than 64 deep, or `args` do not match the Menu tool's `parameters` " +
          "(`invalid_args`, naming the place inside args).",
      ),
      "401": error(["unauthorized"], "No valid Sandbox token for the conversation's workspace."),
      "403": error(
        ["not_on_menu", "not_allowed"],
        "The pick is not on the turn's Menu (`not_on_menu`), or not among its Allowed picks now (`not_allowed`).",
      ),
      "404": error(
        ["not_found", "unknown_conversation"],
        "No such workspace, or no turn the Orchestrator admitted on the conversation (`unknown_conversation`).",
      ),
      "409": error(
        ["pick_outstanding", "turn_over", "not_running", "call_reused"],
        "Another pick of this turn is outstanding (`pick_outstanding`), the turn is over (`turn_over`) or not the " +
          "running one (`not_running`), or the callId named another pick (`call_reused`).",
      ),
      "413": error(
        ["too_large"],
        "A field is past its bound (pick 64, submissionId and callId 128 characters, args 64 KiB, the body 96 KiB): " +
          "the message names it.",
      ),
      "429": RATE_LIMITED,
      ...LEDGER_ERRORS,
    },
  },
  readAllowed: {
    summary: "A Harness's read of its conversation's Allowed picks, at each step boundary (through its Custodian)",
    security: [{ sandbox: [] }],
    responses: {
      "200": answer("The running turn's Allowed picks now, and its submission.", "Allowed"),
      "401": error(["unauthorized"], "No valid Sandbox token for the conversation's workspace."),
      "404": error(["not_found"], "No such workspace, or no running turn on the conversation."),
      "429": RATE_LIMITED,
      ...LEDGER_ERRORS,
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
      "401": error(["unauthorized"], "No valid Sandbox token for the conversation's workspace."),
      "404": error(["not_found"], "No such workspace, or no such delivery in this conversation."),
      "429": RATE_LIMITED,
      ...LEDGER_ERRORS,
    },
  },
  healthz: {
    summary: "Liveness",
    security: [],
    responses: { "200": answer("The Orchestrator serves.", "Health") },
  },
  healthzHead: {
    summary: "Liveness, with no body: the status GET /healthz answers",
    security: [],
    responses: { "200": { description: "The Orchestrator serves." } },
  },
  metrics: {
    summary: "Prometheus metrics (an admin token's)",
    responses: {
      "200": {
        description: "The metrics, in Prometheus's text format.",
        content: { "text/plain": { schema: { type: "string" } } },
      },
      "403": error(["forbidden"], "A tenant's token: the metrics are an admin's."),
      ...COMMON_ERRORS,
    },
  },
  openapi: {
    summary: "This document",
    responses: {
      "200": { description: "The OpenAPI document.", content: { "application/json": { schema: { type: "object" } } } },
      ...COMMON_ERRORS,
    },
  },
};

/** Which routes a document holds: a Machine's (`public`, served) or a Harness's (`sandbox`). */
export type Audience = "public" | "sandbox";

const holds = (audience: Audience, id: RouteId) => isInternal(id) === (audience === "sandbox");

/** A document's paths, from the route table: each template's path parameters, then its operations,
 * each with its route's id as operationId and its route's tag. */
function pathsOf(audience: Audience): Json {
  const out: Json = {};
  for (const { template, routes } of PATHS) {
    const parameters: Json[] = paramsOf(template).map((p) => PARAMS[p]);
    const item: Json = {};
    for (const { id, method } of routes) {
      if (!holds(audience, id)) continue;
      const { query, responses, ...operation } = OPERATIONS[id];
      const all = { ...(responses as Json), ...(movable(id, template) ? { "503": MOVING } : {}) };
      // Statuses in order, whatever order the shared answers were spread in.
      const sorted = Object.entries(all).sort(([a], [b]) => a.localeCompare(b));
      item[method.toLowerCase()] = {
        operationId: id,
        tags: [ROUTES[id].tag],
        ...operation,
        ...(query ? { parameters: query } : {}),
        responses: Object.fromEntries(sorted),
      };
    }
    if (Object.keys(item).length) out[template] = parameters.length ? { parameters, ...item } : item;
  }
  return out;
}

/** Every component; each document keeps those its paths name (`$ref`) and, the public one, the named
 * shapes no route of the other names (Admission: a part of answers, named for the clients). */
function schemas(): Record<string, Json> {
  return {
    CreateWorkspaceBody: schemaOf(CreateWorkspaceBody, "input"),
    Created: schemaOf(Created, "output"),
    Deleted: schemaOf(Deleted, "output"),
    WorkspaceView: schemaOf(WorkspaceView, "output"),
    WorkspaceList: schemaOf(WorkspaceList, "output"),
    EgressList: schemaOf(EgressList, "output"),
    EgressLog: schemaOf(EgressLog, "output"),
    WorkspaceEvent: schemaOf(WorkspaceEvent, "output"),
    Error: schemaOf(ErrorBody, "output"),
    Health: schemaOf(Health, "output"),
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
    EffectBody: schemaOf(EffectBody, "input"),
    EffectRecord: schemaOf(EffectRecord, "output"),
    EffectList: schemaOf(EffectList, "output"),
  };
}

/** The component names `value` refers to, and those they refer to in turn. */
function refsOf(value: unknown, all: Record<string, Json>, out = new Set<string>()): Set<string> {
  for (const m of JSON.stringify(value).matchAll(/"#\/components\/schemas\/([^"]+)"/g))
    if (!out.has(m[1]) && all[m[1]]) {
      out.add(m[1]);
      refsOf(all[m[1]], all, out);
    }
  return out;
}

/** The error codes a document's callers may meet: a Machine never meets a Harness's own, and
 * neither meets those only a replica forwarding a call does (decision 0079). */
const codesFor = (audience: Audience): ErrorCode[] =>
  audience === "sandbox" ? ERROR_CODES.filter((c) => ERRORS[c].caller !== "replica") : MACHINE_ERROR_CODES;

/** The public document (served at /v1/openapi.json, what clients are generated from), or the
 * Harness's routes alone (`sandbox`: docs/api/openapi-sandbox.json, served nowhere). */
export function openApiDocument(audience: Audience = "public"): Json {
  const paths = pathsOf(audience);
  const all = schemas();
  const used = refsOf(paths, all);
  const other = refsOf(pathsOf(audience === "public" ? "sandbox" : "public"), all);
  const kept = Object.keys(all).filter((n) => used.has(n) || (audience === "public" && !other.has(n)));
  // The error body's code: the catalogue's words this document's callers may meet.
  const error = all.Error as { properties: { error: { properties: { code: Json } } } };
  error.properties.error.properties.code.enum = codesFor(audience);
  const ids = (Object.keys(ROUTES) as RouteId[]).filter((id) => holds(audience, id));
  const tags = [...new Set(ids.map((id) => ROUTES[id].tag))];
  return {
    openapi: "3.1.0",
    info:
      audience === "public"
        ? {
            title: "jr2 Orchestrator API",
            version: "1",
            description:
              "Workspaces for Machines: a Sandbox placed, provisioned and attached, kept alive by its lease, and " +
              "reported lost when it dies. Every error is `{error: {code, message}}`: each answer names the codes " +
              "it may carry (`x-error-codes`), and the error catalogue (docs/api/errors.md) says what each means and " +
              "what the caller does. A method a path does not serve is answered 405 `method_not_allowed`, naming " +
              "the methods it does in `Allow`.",
          }
        : {
            title: "jr2 Orchestrator API: a Harness's routes",
            version: "1",
            description:
              "The routes a Sandbox's Harness calls through its Custodian (which adds the Sandbox token): not a " +
              "Machine's, so left out of the public document and clients (decision 0077). Served by the same " +
              "Orchestrator; this document is served nowhere. Errors as in the public document.",
          },
    servers: [
      { url: "/", description: "The Orchestrator this document was read from." },
      {
        url: "{scheme}://{host}",
        description: "An Orchestrator by its address.",
        variables: {
          scheme: { default: "https", enum: ["https", "http"], description: "http only where TLS is not set up." },
          host: {
            default: "jr2-orchestrator.jr2-system.svc:8090",
            description: "Its host and port: in the cluster, its Service's.",
          },
        },
      },
    ],
    security: [{ [audience === "public" ? "bearer" : "sandbox"]: [] }],
    tags: tags.map((name) => ({ name, description: TAGS[name] })),
    paths,
    components: {
      securitySchemes:
        audience === "public"
          ? {
              bearer: {
                type: "http",
                scheme: "bearer",
                description:
                  "An API token (JR2_API_TOKENS_FILE): an admin's sees every workspace, a tenant's only the " +
                  "workspaces it created (another tenant's answer 404).",
              },
            }
          : {
              sandbox: {
                type: "http",
                scheme: "bearer",
                description: "The Sandbox token of the conversation's workspace (its Custodian adds it).",
              },
            },
      schemas: Object.fromEntries(kept.map((n) => [n, all[n]])),
    },
  };
}
